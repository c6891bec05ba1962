"""`gpuop import --check --operator-renderer RENDER`: the operands NVIDIA's operator would create, both sides.

The ClusterPolicy and NVIDIADriver CRs of the live install and those of the profile (import_check's two sides,
CRD-defaulted) go through NVIDIA's own controller code (the nvidia-operator renderer, a checking tool beside the
project: `render.sh clusterpolicy CP FACTS OUT`, `render.sh nvidiadriver NVD CP FACTS OUT`) with the same node
facts -- one node per pool of the profile, with its GPU's PCI ids, its nodeSelector and the config labels its
nodes carry -- and with the image env of the operator Deployment of each side (the chart's, or with OLM the
CSV's). Every object it writes (DaemonSets, ConfigMaps, RBAC, RuntimeClasses, Services, and the Nodes as the
operator labels them) is compared field by field, keyed by kind, namespace and name.

The renderer is named by the user (`--operator-renderer`, or $GPUOP_NVIDIA_OPERATOR_RENDER), never by anything
read from the repository. Without one, the operands are not compared and the report says so.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from pathlib import Path

import yaml

from gpuop.errors import Issue, UserError
from gpuop.ops.import_io import one_line

RENDER_ENV = "GPUOP_NVIDIA_OPERATOR_RENDER"
RUNTIMES = {"containerd": "containerd://2.1.3", "crio": "cri-o://1.33.2", "docker": "docker://28.0.1"}
KERNEL = "6.8.0-60-generic"                   # the facts are the same on both sides: any supported kernel
RHCOS_BUILD = "419.96.202507091512-0"
TIMEOUT = 300


def default_renderer() -> Path | None:
    env = os.environ.get(RENDER_ENV)
    return Path(env) if env else None


def _os_labels(plan) -> dict:
    if plan.platform == "openshift":
        minor = plan.platform_version
        return {"feature.node.kubernetes.io/system-os_release.ID": "rhcos",
                "feature.node.kubernetes.io/system-os_release.VERSION_ID": minor,
                "feature.node.kubernetes.io/system-os_release.VERSION_ID.major": minor.split(".")[0],
                "feature.node.kubernetes.io/system-os_release.OSTREE_VERSION": RHCOS_BUILD}
    name = plan.os or "ubuntu24.04"
    ident = name.rstrip("0123456789.")
    version = name[len(ident):] or "24.04"
    return {"feature.node.kubernetes.io/system-os_release.ID": ident,
            "feature.node.kubernetes.io/system-os_release.VERSION_ID": version,
            "feature.node.kubernetes.io/system-os_release.VERSION_ID.major": version.split(".")[0]}


def node_facts(plan, cat) -> dict:
    """One node per pool of the profile, as NFD and the kubelet would show it (the renderer's FACTS.json)."""
    nodes = []
    for p in plan.pool_configs.pools:
        gpu = cat.gpus.get(p.gpu)
        labels = {"feature.node.kubernetes.io/pci-10de.present": "true", "kubernetes.io/os": "linux",
                  "feature.node.kubernetes.io/kernel-version.full": KERNEL, **_os_labels(plan),
                  **dict(p.node_selector), **dict(p.nfd), **dict(p.manual)}
        if gpu is not None and gpu.migCapable:
            labels["nvidia.com/mig.capable"] = "true"
        nodes.append({"name": f"{p.name}-0", "runtime": RUNTIMES.get(plan.runtime, RUNTIMES["containerd"]),
                      "labels": labels})
    openshift = plan.platform == "openshift"
    return {"namespace": plan.namespace, "openshift": plan.platform_version if openshift else "",
            "k8sVersion": "v1.32.5" if openshift else f"v{plan.platform_version}.2", "nodes": nodes,
            "dtkImages": {RHCOS_BUILD: "quay.io/openshift-release-dev/ocp-v4.0-art-dev@sha256:" + "a" * 64}
            if openshift else {}}


def operator_env(side, olm_env: dict) -> dict[str, str]:
    """The image env the operator runs with: its Deployment's (Helm) or the CSV's (OLM)."""
    dep = next((o for o in side.of_kind("Deployment") if o["metadata"].get("name") == "gpu-operator"), None)
    if dep is None:
        return dict(olm_env)
    ctr = next((c for c in dep["spec"]["template"]["spec"].get("containers") or []
                if c.get("name") == "gpu-operator"), {})
    return {e["name"]: str(e.get("value", "")) for e in ctr.get("env") or []
            if isinstance(e, dict) and "valueFrom" not in e and e.get("name") != "WATCH_NAMESPACE"}


def operands(renderer: Path, policy: dict | None, drivers: list[dict], facts: dict, env: dict) -> dict:
    """(kind, namespace, name) -> object NVIDIA's operator creates on its first reconcile."""
    if policy is None:
        return {}
    out: dict = {}
    with tempfile.TemporaryDirectory(prefix="gpuop-operands-") as tmp:
        work = Path(tmp)
        (work / "facts.json").write_text(json.dumps(facts))
        (work / "cp.yaml").write_text(yaml.safe_dump(policy))
        runs = [("clusterpolicy", [work / "cp.yaml"], work / "cp-out")]
        if drivers:
            (work / "nvd.yaml").write_text(yaml.safe_dump_all(drivers))
            runs.append(("nvidiadriver", [work / "nvd.yaml", work / "cp.yaml"], work / "nvd-out"))
        for mode, inputs, dest in runs:
            try:
                proc = subprocess.run([str(renderer), mode, *map(str, inputs), str(work / "facts.json"), str(dest)],
                                      capture_output=True, text=True, timeout=TIMEOUT,
                                      env={**os.environ, **env})
            except OSError as exc:
                raise UserError(Issue(str(renderer), 0, 0, "", f"--operator-renderer cannot run: "
                                      f"{exc.strerror or exc}")) from None
            except subprocess.TimeoutExpired:
                raise UserError(Issue(str(renderer), 0, 0, "", f"--operator-renderer took more than {TIMEOUT}s "
                                      f"({mode})")) from None
            if proc.returncode != 0:
                tail = one_line((proc.stderr or proc.stdout).strip().splitlines()[-1:] and
                                (proc.stderr or proc.stdout).strip().splitlines()[-1])
                raise UserError(Issue(str(renderer), 0, 0, "", f"NVIDIA's operator code refused the {mode} "
                                      f"input (exit {proc.returncode}): {tail}"))
            for f in sorted(dest.glob("*.yaml")):
                obj = yaml.safe_load(f.read_text())
                if isinstance(obj, dict) and "kind" in obj:
                    meta = obj.get("metadata") or {}
                    out.setdefault((obj["kind"], str(meta.get("namespace") or ""), str(meta.get("name"))), obj)
    return out
