"""Helpers (not tests) for the differential test of operator mode (tests/test_operator_differential.py).

One profile, two compiles: gpuop's static stack (the components rendered from the plan and filled with its
values, as the manifests writer does) and operator mode (gpuop's values -> NVIDIA's chart through Helm 4's
engine -> the CRD's structural defaults -> NVIDIA's operator v26.7.0 controller code, render.sh). Their
DaemonSets are reduced to what a node sees (`node_view`) and compared field by field (`differences`).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import yaml

from gpuop.catalog import operator as operator_catalog
from gpuop.kube.slots import fill
from gpuop.outputs import operator as operator_out
from gpuop.stack.registry import component_props
from gpuop.verify import nvidia_chart

from conftest import BUILDS, BUILDS_ENV, REFS, TOOL_PATHS, TOOLS, release_chart  # noqa: F401 (BUILDS_ENV: the tests')

RENDER = TOOLS / TOOL_PATHS["nvidia-operator"]          # GPUOP_TOOLS, else ../shared/tools (conftest)
CHART = REFS / "gpu-operator" / "chart"
# NVIDIA's controller code of the other operator versions: BUILDS/<version>/tool/ (bin/, root/ beside a copy of
# render.sh; conftest), built by tools/nvidia-operator/build_release.py (the renderer's own build.sh on a copy of
# the tool folder, with the tag's compat files)


def oracle(version: str) -> tuple[Path, Path]:
    """(render.sh, NVIDIA's chart folder) of one operator version: the shared tool and chart for the newest; for
    the others the build at the tag (tools/nvidia-operator/build_release.py) and the tag's chart (conftest
    release_chart: the reference copy, else the build's own copy when refs.lock's checksums hold; a path that does
    not exist when neither is there)."""
    if version == nvidia_chart.REFS_CHART_VERSION:
        return RENDER, CHART
    chart = release_chart(version) or REFS / "gpu-operator-releases" / version / "chart"
    return BUILDS / version / "tool" / "render.sh", chart
RUNTIMES = {"containerd": "containerd://2.1.3", "crio": "cri-o://1.33.2", "docker": "docker://28.0.1"}
OPENSHIFT_KUBE = {"4.18": "v1.31.6", "4.19": "v1.32.5", "4.20": "v1.33.2", "4.21": "v1.34.1", "4.22": "v1.35.0"}
KERNEL = "6.8.0-60-generic"


# ---------------------------------------------------------------------------------------- both sides

def stack_daemonsets(plan) -> dict[str, dict]:
    out = {}
    for component, props in component_props(plan):
        for o in component.objects(props):
            if o["kind"] == "DaemonSet":
                o = fill(o, plan.values)
                out[o["metadata"]["name"]] = o
    return out


def _os_labels(os_name: str | None, platform: str, build: str | None) -> dict:
    if platform == "openshift":
        minor = (os_name or "rhcos4.19").removeprefix("rhcos")
        labels = {"feature.node.kubernetes.io/system-os_release.ID": "rhcos",
                  "feature.node.kubernetes.io/system-os_release.VERSION_ID": minor,
                  "feature.node.kubernetes.io/system-os_release.VERSION_ID.major": minor.split(".")[0]}
        if build:
            labels["feature.node.kubernetes.io/system-os_release.OSTREE_VERSION"] = build
        return labels
    name = os_name or "ubuntu24.04"
    ident = name.rstrip("0123456789.")
    version = name[len(ident):]
    return {"feature.node.kubernetes.io/system-os_release.ID": ident,
            "feature.node.kubernetes.io/system-os_release.VERSION_ID": version,
            "feature.node.kubernetes.io/system-os_release.VERSION_ID.major": version.split(".")[0]}


def _build_os(build: str) -> str:
    """RHCOS build 419.96.202507091512-0 -> rhcos4.19 (the node's VERSION_ID follows its build)."""
    return f"rhcos{build[0]}.{build[1:3]}"


def facts(profile, plan, cat) -> dict:
    """One node per pool, as NFD and the kubelet would show it: the pool's nodeSelector and the labels gpuop's
    NodeFeatureRule gives it, its OS and kernel, MIG capability."""
    spec = profile.spec
    openshift = spec.platform.type == "openshift"
    runtime = RUNTIMES[plan.runtime]
    builds = list(spec.driver.rhcosVersions) or ["419.96.202507091512-0"]
    labels_of = {p.index: dict(p.nfd) | dict(p.manual) for p in plan.pool_configs.pools}
    nodes = []
    for i, pool in enumerate(spec.nodePools):
        gpu = cat.gpus[pool.gpu]
        for j, build in enumerate(builds if openshift else [None]):     # OpenShift: a node per RHCOS build
            labels = {"feature.node.kubernetes.io/pci-10de.present": "true", "kubernetes.io/os": "linux",
                      "feature.node.kubernetes.io/kernel-version.full": (spec.driver.kernels or [KERNEL])[0],
                      **_os_labels(_build_os(build) if build else pool.os or spec.os, spec.platform.type, build),
                      **dict(pool.nodeSelector), **labels_of.get(i, {})}
            if gpu.migCapable:
                labels["nvidia.com/mig.capable"] = "true"
            nodes.append({"name": f"{pool.name}-{j}", "runtime": runtime, "labels": labels})
    return {"namespace": plan.namespace, "openshift": spec.platform.version if openshift else "",
            "k8sVersion": OPENSHIFT_KUBE.get(spec.platform.version) if openshift else f"v{spec.platform.version}.2",
            "nodes": nodes,
            "dtkImages": {b: f"quay.io/openshift-release-dev/ocp-v4.0-art-dev@sha256:{'a' * 63}{j}"
                          for j, b in enumerate(builds)} if openshift else {}}


def operator_daemonsets(plan, node_facts: dict, work: Path, render: Path = RENDER,
                        chart: Path = CHART) -> tuple[dict[str, dict], dict, dict]:
    """NVIDIA's chart with gpuop's values, CRs defaulted, then NVIDIA's controller code: its DaemonSets, the
    values used, and the nodes as the operator labels them."""
    values = operator_out.chart_values(plan)
    rendered = nvidia_chart.render(values, chart, namespace=plan.namespace)
    work.mkdir(parents=True, exist_ok=True)
    (work / "facts.json").write_text(json.dumps(node_facts))
    cp = rendered.cluster_policy
    (work / "cp.yaml").write_text(yaml.safe_dump(cp))
    out: dict[str, dict] = {}
    runs = [("clusterpolicy", [str(work / "cp.yaml")], work / "cp-out")]
    drivers = rendered.drivers                  # the default CR and the extraObjects ones, defaulted
    if drivers:
        (work / "nvd.yaml").write_text(yaml.safe_dump_all(drivers))
        runs.append(("nvidiadriver", [str(work / "nvd.yaml"), str(work / "cp.yaml")], work / "nvd-out"))
    for mode, inputs, dest in runs:
        proc = subprocess.run([str(render), mode, *inputs, str(work / "facts.json"), str(dest)],
                              capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        for f in sorted(dest.glob("DaemonSet_*.yaml")):
            ds = yaml.safe_load(f.read_text())
            out[ds["metadata"]["name"]] = ds
    return out, values, operator_nodes(work, drivers)


def config_source(case) -> str:
    """The host path of the containerd config a distribution renders (catalog/data/distributions.yaml)."""
    from gpuop.catalog import distributions
    return distributions.load().get(case.spec.platform.distribution).containerd.configSource or ""


def _driver_key(ds: dict) -> str | None:
    """The driver DaemonSets are named per CR / OS by the operator and per driver variant by gpuop: paired by
    what they run (the driver image, which names the version and the OS, and the sidecars)."""
    pod = ds["spec"]["template"]["spec"]
    ctr = next((c for c in pod.get("containers") or [] if c["name"] == "nvidia-driver-ctr"), None)
    if ctr is None:
        return None
    dtk = next((c for c in pod.get("containers") or [] if c["name"] == "openshift-driver-toolkit-ctr"), None)
    if dtk is not None:            # one per RHCOS build
        build = next((e.get("value") for e in dtk.get("env") or [] if e["name"] == "RHCOS_VERSION"), None)
        return f"driver[{ctr['image'].rpartition(':')[0]}, RHCOS {build}]"
    sidecars = [c["name"] for c in pod.get("containers") or [] if c["name"] != "nvidia-driver-ctr"]
    return f"driver[{ctr['image']}" + "".join(f", {n}" for n in sidecars) + "]"     # one per sidecar set


def paired(ours: dict[str, dict], theirs: dict[str, dict]) -> tuple[dict, dict]:
    """Both sides keyed alike: by name, driver DaemonSets by `_driver_key`."""
    def key(objs):
        return {(_driver_key(ds) or name): ds for name, ds in objs.items()}
    return key(ours), key(theirs)


def olm_daemonsets(plan, node_facts: dict, work: Path, render: Path = RENDER, chart: Path = CHART) -> dict[str, dict]:
    """install: olm: the ClusterPolicy gpuop writes itself (outputs/operator.py olm_cluster_policy), defaulted as
    the API server would, through NVIDIA's controller code run with the image env the bundle's CSV gives the
    operator Deployment (where the ClusterPolicy names no image, the operator runs that one). By DaemonSet name."""
    schema = nvidia_chart._schema(str(chart / "crds"), "ClusterPolicy")
    cp = nvidia_chart.crd_defaults(operator_out.olm_cluster_policy(plan), schema)
    work.mkdir(parents=True, exist_ok=True)
    (work / "cp.yaml").write_text(yaml.safe_dump(cp))
    (work / "facts.json").write_text(json.dumps(node_facts))
    env = {**os.environ, **operator_catalog.olm_operator_env(plan.operator.version)}
    proc = subprocess.run([str(render), "clusterpolicy", str(work / "cp.yaml"), str(work / "facts.json"),
                           str(work / "out")], capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return {d["metadata"]["name"]: d for d in (yaml.safe_load(f.read_text())
                                               for f in sorted((work / "out").glob("DaemonSet_*.yaml")))}


# ---------------------------------------------------------------------------------------- what a node sees

def _env(c: dict) -> dict:
    """name -> value (a valueFrom as JSON); the last one wins, as the kubelet does with a repeated name."""
    out = {}
    for e in c.get("env") or []:
        out[e["name"]] = json.dumps(e["valueFrom"], sort_keys=True) if "valueFrom" in e else str(e.get("value", ""))
    return out


def _container(c: dict) -> dict:
    return {
        "image": c.get("image"), "command": c.get("command") or [], "args": c.get("args") or [],
        "env": _env(c),
        "volumeMounts": {m["mountPath"]: json.dumps([m["name"], bool(m.get("readOnly")), m.get("mountPropagation") or "",
                                                     m.get("subPath") or ""]) for m in c.get("volumeMounts") or []},
        "securityContext": c.get("securityContext") or {}, "resources": c.get("resources") or {},
        **{p: _probe(c.get(p)) for p in ("startupProbe", "livenessProbe", "readinessProbe")},
    }


def _probe(p):
    if not p:
        return None
    p = dict(p)
    if p.get("successThreshold") in (0, 1):        # 0: the operator's unset (no API-server defaulting), 1: default
        p.pop("successThreshold")
    return p


def _volume(v: dict):
    v = dict(v)
    name = v.pop("name")
    if "hostPath" in v:
        hp = dict(v["hostPath"])
        hp.setdefault("type", "")
        v["hostPath"] = hp
    if "configMap" in v:
        cm = dict(v["configMap"])
        cm.pop("defaultMode", None)
        v["configMap"] = cm
    return name, json.dumps(v, sort_keys=True)


def _expr(e: dict, labels: dict) -> bool:
    op, key, vals = e["operator"], e["key"], e.get("values") or []
    if op == "In":
        return labels.get(key) in vals
    if op == "NotIn":
        return labels.get(key) not in vals
    if op == "Exists":
        return key in labels
    if op == "DoesNotExist":
        return key not in labels
    if op in ("Gt", "Lt"):
        try:
            n = int(labels[key])
        except (KeyError, ValueError):
            return False
        return n > int(vals[0]) if op == "Gt" else n < int(vals[0])
    raise ValueError(op)


def selects(pod: dict, labels: dict) -> bool:
    """The scheduler's node filter: nodeSelector and required node affinity (terms ORed, expressions ANDed)."""
    if any(labels.get(k) != v for k, v in (pod.get("nodeSelector") or {}).items()):
        return False
    req = (((pod.get("affinity") or {}).get("nodeAffinity") or {})
           .get("requiredDuringSchedulingIgnoredDuringExecution") or {})
    terms = req.get("nodeSelectorTerms") or []
    return not terms or any(all(_expr(e, labels) for e in t.get("matchExpressions") or []) for t in terms)


def operator_nodes(work: Path, drivers: list[dict]) -> dict[str, dict]:
    """The nodes with the labels NVIDIA's operator gives them (labelGPUNodes, render.sh's Node files), plus the
    NVIDIADriver owner label its NVIDIADriver controller sets: the CR whose nodeSelector selects the node, the
    default CR for the rest."""
    nodes = {}
    for f in sorted((work / "cp-out").glob("Node_*.yaml")):
        n = yaml.safe_load(f.read_text())
        nodes[n["metadata"]["name"]] = dict(n["metadata"].get("labels") or {})
    for labels in nodes.values():
        owner = next((d["metadata"]["name"] for d in drivers if not d["spec"].get("default")
                      and all(labels.get(k) == v for k, v in (d["spec"].get("nodeSelector") or {}).items())),
                     next((d["metadata"]["name"] for d in drivers if d["spec"].get("default")), None))
        if owner:
            labels["nvidia.com/gpu-operator.driver.owner"] = owner
    return nodes


def node_view(ds: dict, nodes: dict[str, dict]) -> dict:
    """The node-visible fields of a DaemonSet's pods; placement as the nodes it runs on."""
    pod = ds["spec"]["template"]["spec"]
    return {
        "placement": sorted(n for n, labels in nodes.items() if selects(pod, labels)),
        "containers": {c["name"]: _container(c) for c in pod.get("containers") or []},
        "containerOrder": [c["name"] for c in pod.get("containers") or []],
        "initContainers": {c["name"]: _container(c) for c in pod.get("initContainers") or []},
        "initOrder": [c["name"] for c in pod.get("initContainers") or []],
        "volumes": dict(_volume(v) for v in pod.get("volumes") or []),
        "hostPID": bool(pod.get("hostPID")), "hostNetwork": bool(pod.get("hostNetwork")),
        "hostIPC": bool(pod.get("hostIPC")),
        "tolerations": sorted({json.dumps(t, sort_keys=True) for t in pod.get("tolerations") or []}),
        "runtimeClassName": pod.get("runtimeClassName"),
        "priorityClassName": pod.get("priorityClassName"),
        "podSecurityContext": pod.get("securityContext") or {},
    }


def leaves(node, path=""):
    if isinstance(node, dict) and node:
        for k, v in node.items():
            yield from leaves(v, f"{path}.{k}" if path else str(k))
    else:
        yield path, node


def differences(ours: dict, theirs: dict, nodes: dict[str, dict]) -> list[tuple[str, object, object]]:
    a, b = dict(leaves(node_view(ours, nodes))), dict(leaves(node_view(theirs, nodes)))
    return [(k, a.get(k), b.get(k)) for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)]
