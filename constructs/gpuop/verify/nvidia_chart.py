"""NVIDIA's gpu-operator chart rendered with given values, as the API server would store its CRs.

`render(values, chart, namespace) -> Rendered`: Helm 4's own engine (helm-python-sdk) renders NVIDIA's chart
(a folder: the chart's source tree, e.g. `helm pull nvidia/gpu-operator --version v26.7.0 --untar`), then
every ClusterPolicy / NVIDIADriver gets the structural defaults of its CRD (the chart's own `crds/`): the
`default:` of every absent (or, not nullable, null) property of the openAPIV3Schema, recursively through
objects and array items, as the API server applies them on create. A null the defaults do not replace stays:
`cr_schema_errors` (the CRD's schema, strict, as the API server validates) reports it. What `gpuop import --check` and the operator-mode tests compare.

`crd_defaults(obj, schema)` is the defaulting alone (for CRs from elsewhere, e.g. a live export).
"""

from __future__ import annotations

import copy
import os
import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import yaml

from gpuop.errors import field_path

CHART_ENV = "GPUOP_NVIDIA_CHART"
KINDS = {"ClusterPolicy": "nvidia.com_clusterpolicies.yaml", "NVIDIADriver": "nvidia.com_nvidiadrivers.yaml",
         "GPUCluster": "nvidia.com_gpuclusters.yaml"}


# the operator version whose chart ../shared/refs/gpu-operator/chart is; the others' are under
# ../shared/refs/gpu-operator-releases/<version>/chart (each folder's SOURCES.md)
REFS_CHART_VERSION = "v26.7.0"


def default_chart(version: str | None = None) -> Path | None:
    """$GPUOP_NVIDIA_CHART, else the reference copy of `version`'s chart (default: the newest) beside a development
    checkout (../shared/refs); None when there is none. `version` comes from gpuop's catalog, never from input
    text: only catalogued versions reach here (ops/import_version.py refuses the others)."""
    env = os.environ.get(CHART_ENV)
    if env:
        return Path(env)
    refs = Path(__file__).resolve().parents[3].parent / "shared" / "refs"
    here = (refs / "gpu-operator" / "chart" if version in (None, REFS_CHART_VERSION)
            else refs / "gpu-operator-releases" / version / "chart")
    return here if here.is_dir() else None


# Helm's location of a template error: "(<chart name>/templates/x.yaml:12:3)"
_HELM_AT = re.compile(r"\(([^()\s:]+/templates/[^()\s:]+):(\d+):(\d+)\)")


class RenderError(Exception):
    """Helm could not render the chart; `where()` is the template file, line and column Helm names, if any."""

    def __init__(self, message: str, chart: Path):
        super().__init__(" ".join(message.split()))
        self.chart = chart

    def where(self) -> tuple[str, int, int]:
        m = _HELM_AT.search(str(self))
        if not m:
            return str(self.chart), 0, 0
        inside = m.group(1).split("/", 1)[1]            # below the chart's own name
        return str(self.chart / inside), int(m.group(2)), int(m.group(3))


@dataclass
class Rendered:
    objects: list[dict] = field(default_factory=list)          # every object, CRs defaulted

    def of_kind(self, kind: str) -> list[dict]:
        return [o for o in self.objects if o.get("kind") == kind]

    @property
    def cluster_policy(self) -> dict | None:
        found = self.of_kind("ClusterPolicy")
        return found[0] if found else None

    @property
    def drivers(self) -> list[dict]:
        return self.of_kind("NVIDIADriver")

    @property
    def configmaps(self) -> dict[str, dict]:
        return {o["metadata"]["name"]: o for o in self.of_kind("ConfigMap")}


@lru_cache(maxsize=8)
def _schema(crds: str, kind: str) -> dict:
    doc = yaml.safe_load((Path(crds) / KINDS[kind]).read_text())
    return doc["spec"]["versions"][0]["schema"]["openAPIV3Schema"]


def crd_defaults(obj, schema: dict):
    """`obj` with the structural defaults of `schema` filled in (a new object; `obj` is left alone)."""
    obj = copy.deepcopy(obj)
    _fill(obj, schema)
    return obj


def _fill(obj, schema: dict) -> None:
    if isinstance(obj, dict):
        for key, sub in (schema.get("properties") or {}).items():
            # the API server defaults a null as an absent field unless the field is nullable; a null left
            # (no default) is then refused by validation (k8s structuraldefaulting)
            if "default" in sub and (key not in obj or (obj[key] is None and not sub.get("nullable"))):
                obj[key] = copy.deepcopy(sub["default"])
            if key in obj:
                _fill(obj[key], sub)
        extra = schema.get("additionalProperties")
        if isinstance(extra, dict):
            for key, value in obj.items():
                if key not in (schema.get("properties") or {}):
                    _fill(value, extra)
    elif isinstance(obj, list) and isinstance(schema.get("items"), dict):
        for item in obj:
            _fill(item, schema["items"])


def render(values: dict, chart: Path | None = None, namespace: str = "gpu-operator",
           release: str = "gpu-operator") -> Rendered:
    import helm_python as helm                 # only where a chart is rendered

    chart = chart or default_chart()
    if chart is None:
        raise FileNotFoundError(f"NVIDIA's gpu-operator chart: set {CHART_ENV} to its folder")
    try:
        c = helm.Chart.load(str(chart))
        try:
            out = c.render(values, name=release, namespace=namespace)
        finally:
            c.close()
    except helm.HelmError as exc:       # the chart's (a template's `fail`, a bad value), not gpuop's: Helm's words
        raise RenderError(str(exc), Path(chart)) from None
    objs = []
    crds = str(Path(chart) / "crds")
    for path in sorted(out):
        for o in yaml.safe_load_all(out[path]):
            if not isinstance(o, dict):
                continue
            if o.get("kind") in KINDS and (Path(crds) / KINDS[o["kind"]]).is_file():
                o = crd_defaults(o, _schema(crds, o["kind"]))
            objs.append(o)
    return Rendered(objs)


# ------------------------------------------------------------------------------------------ the CRs as refused

def schema_of(chart: Path, kind: str) -> dict | None:
    """The openAPIV3Schema of `kind` in the chart's own crds/, None when the chart has no CRD for it."""
    crds = Path(chart) / "crds"
    return _schema(str(crds), kind) if kind in KINDS and (crds / KINDS[kind]).is_file() else None


def _null_type(schema: dict) -> str:
    if schema.get("x-kubernetes-int-or-string"):
        return "integer,string"
    return schema.get("type") or "object"


def null_errors(obj, schema: dict, path: tuple = ()) -> list[tuple[tuple, str]]:
    """(field path, "path: message") of every null `obj` holds where `schema` does not say `nullable: true`, in the API
    server's words (k8s.io/kube-openapi validate: InvalidType). Run on a defaulted object: a null the API
    server replaces by the field's default is gone by then (crd_defaults)."""
    if obj is None:
        if schema.get("nullable") or not (schema.get("type") or schema.get("x-kubernetes-int-or-string")):
            return []
        shown = field_path(path) or "<root>"
        return [(path, f'{shown}: Invalid value: "null": {shown} in body must be of type {_null_type(schema)}: '
                       '"null"')]
    out: list[tuple[tuple, str]] = []
    if isinstance(obj, dict):
        props = schema.get("properties") or {}
        extra = schema.get("additionalProperties")
        for key, value in obj.items():
            sub = props.get(key) or (extra if isinstance(extra, dict) else None)
            if sub is not None:
                out += null_errors(value, sub, (*path, key))
    elif isinstance(obj, list) and isinstance(schema.get("items"), dict):
        for i, item in enumerate(obj):
            out += null_errors(item, schema["items"], (*path, i))
    return out


def cr_problems(obj: dict, chart: Path, validator) -> list[tuple[tuple, str]]:
    """(field path, "path: message") of what the API server refuses in a ClusterPolicy / NVIDIADriver / GPUCluster `obj`
    (already defaulted): its nulls (null_errors) and the rest of the CRD's schema, strict (`validator`: a
    verify.crdschema.CrdValidator of the chart's crds/, whose null messages null_errors words instead)."""
    schema = schema_of(chart, obj.get("kind"))
    if schema is None:
        return []
    out = null_errors(obj, schema)
    nulls = {p for p, _ in out}
    for path, message in validator.located(obj):
        if tuple(path) not in nulls and _at(obj, path) is not None:
            out.append((tuple(path), message))
    return out


def _at(obj, path):
    for part in path:
        try:
            obj = obj[part]
        except (KeyError, IndexError, TypeError):
            return _MISSING
    return obj


_MISSING = object()
