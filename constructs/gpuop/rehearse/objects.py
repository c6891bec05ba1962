"""What a rehearsal applies for one cluster, read from its compiled output folder, and the CRDs it needs.

- stack mode: `<output>/<cluster>/manifests/`, the files its kustomization.yaml lists, in that order (the
  install order gpuop wrote them in);
- operator mode: NVIDIA's gpu-operator chart rendered with `<output>/<cluster>/operator/values.yaml`
  (verify/nvidia_chart.py: the chart NVIDIA publishes, found by $GPUOP_NVIDIA_CHART or the reference copy
  beside a checkout), or with `install: olm` the objects of `<output>/<cluster>/operator/olm/` (OLM's own
  kinds are not served here: OLM is not rehearsed, the ClusterPolicy and NVIDIADriver CRs are), and, standing in for the operands NVIDIA's operator creates from that ClusterPolicy,
  the operands gpuop renders for the same profile (`<output>/<cluster>/preview/manifests/`, docs/operator.md).

CRDs: NFD's NodeFeature / NodeFeatureRule / NodeFeatureGroup (NFD v0.19.0, Apache-2.0), shipped with gpuop as
package data (crds/, see crds/SOURCES.md), so `gpuop rehearse` works from a wheel; in operator mode NVIDIA's
CRDs from the chart's own `crds/` folder. Objects of kinds no installed CRD serves (ServiceMonitor,
PrometheusRule, OpenShift's SecurityContextConstraints and ImageStream) are not rehearsed and are listed so.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import yaml

from gpuop.errors import Issue, UserError
from gpuop.kube.folders import PREVIEW

CRDS = Path(__file__).parent / "crds"


@dataclass
class Output:
    cluster: str
    mode: str                                   # stack | operator
    objects: list[dict] = field(default_factory=list)
    crds: list[dict] = field(default_factory=list)
    source: dict[int, str] = field(default_factory=dict)    # id(obj) -> the file it came from


def nfd_crds() -> list[dict]:
    return [d for d in yaml.safe_load_all((CRDS / "nfd-api-crds.yaml").read_text()) if d]


def kueue_crds() -> list[dict]:
    """Kueue's ResourceFlavor, ClusterQueue and LocalQueue CRDs (v0.19.2, verify/crds/kueue/SOURCES.md)."""
    from gpuop.verify.output import KUEUE_CRDS

    return [d for f in sorted(KUEUE_CRDS.glob("*.yaml")) for d in yaml.safe_load_all(f.read_text()) if d]


def _load_file(path: Path) -> list[dict]:
    try:
        docs = list(yaml.safe_load_all(path.read_text()))
    except (OSError, yaml.YAMLError) as exc:
        raise UserError(Issue(str(path), getattr(getattr(exc, "problem_mark", None), "line", -1) + 1, 0, "",
                              f"cannot read the compiled output: {exc}")) from None
    out = []
    for i, d in enumerate(docs):
        if d is None:
            continue
        if not isinstance(d, dict) or not isinstance(d.get("metadata"), dict) or "kind" not in d:
            raise UserError(Issue(str(path), 0, 0, f"[{i}]", "not a Kubernetes object (apiVersion, kind, metadata)"))
        out.append(d)
    return out


def _manifests(folder: Path) -> list[tuple[dict, str]]:
    kust = folder / "kustomization.yaml"
    if kust.is_file():
        doc = yaml.safe_load(kust.read_text()) or {}
        names = [str(r) for r in doc.get("resources", [])]
        for name in names:
            if "/" in name or name.startswith("."):
                raise UserError(Issue(str(kust), 0, 0, "resources", f"{name!r}: only files of this folder are "
                                      "rehearsed"))
    else:
        names = sorted(p.name for p in folder.glob("*.yaml"))
    out = []
    for name in names:
        path = folder / name
        if not path.is_file():
            raise UserError(Issue(str(kust), 0, 0, "resources", f"{name}: no such file in {folder}"))
        out += [(o, str(path)) for o in _load_file(path)]
    return out


def load(output: Path, cluster: str, operator: bool) -> Output:
    """The objects to apply for a cluster; a missing output is bad input (run `gpuop synth`)."""
    base = output / cluster
    if not operator:
        folder = base / "manifests"
        if not folder.is_dir():
            raise UserError(Issue(str(folder), 0, 0, "", "not found: compile the cluster first (gpuop synth)"))
        out = Output(cluster, "stack", crds=nfd_crds())
        for o, src in _manifests(folder):
            out.objects.append(o)
            out.source[id(o)] = src
        if any(str(o.get("apiVersion", "")).startswith("kueue.x-k8s.io/") for o in out.objects):
            out.crds += kueue_crds()    # the queue objects (spec.queues) are applied to the API server too
        return out
    values_file = base / "operator" / "values.yaml"
    olm = base / "operator" / "olm"
    preview = base / PREVIEW / "manifests"
    for need in (values_file if not olm.is_dir() else olm, preview):
        if not need.exists():
            raise UserError(Issue(str(need), 0, 0, "", "not found: compile the cluster first (gpuop synth)"))
    from gpuop.verify import nvidia_chart

    chart = nvidia_chart.default_chart()
    if chart is None:
        raise UserError(Issue(str(base / "operator"), 0, 0, "", "NVIDIA's gpu-operator chart (its CRDs) is needed "
                              f"to rehearse operator mode: set {nvidia_chart.CHART_ENV} to its folder"))
    out = Output(cluster, "operator", crds=nfd_crds())
    for f in sorted((Path(chart) / "crds").glob("*.yaml")):
        out.crds += [d for d in yaml.safe_load_all(f.read_text()) if d]
    namespace = _namespace(preview)
    if olm.is_dir():            # OLM installs the operator (its Subscription): gpuop's objects as written
        for part in ("operator", "policy"):
            for o, src in _manifests(olm / part):
                out.objects.append(o)
                out.source[id(o)] = src
    else:
        values = yaml.safe_load(values_file.read_text()) or {}
        for o in nvidia_chart.render(values, Path(chart), namespace=namespace).objects:
            # Helm hooks (CRD upgrade / cleanup Jobs) run at install time, not as objects of the release
            if "helm.sh/hook" in (o.get("metadata", {}).get("annotations") or {}):
                continue
            if _namespaced(o):
                o.setdefault("metadata", {}).setdefault("namespace", namespace)
            out.objects.append(o)
            out.source[id(o)] = f"{chart} (values {values_file})"
    made = {o["metadata"]["name"] for o in out.objects if o.get("kind") == "Namespace"}
    for o, src in _manifests(preview):
        if o["kind"] == "Namespace" and o["metadata"]["name"] in made:
            continue
        out.objects.append(o)
        out.source[id(o)] = src
    return out


CLUSTER_SCOPED = {"Namespace", "ClusterRole", "ClusterRoleBinding", "RuntimeClass", "NodeFeatureRule",
                  "ClusterPolicy", "NVIDIADriver", "DeviceClass", "CustomResourceDefinition",
                  "SecurityContextConstraints", "PriorityClass", "GPUCluster"}


def _namespaced(o: dict) -> bool:
    return o.get("kind") not in CLUSTER_SCOPED


def _namespace(preview: Path) -> str:
    for o, _ in _manifests(preview):
        if o.get("kind") == "Namespace":
            return o["metadata"]["name"]
    return "gpu-operator"
