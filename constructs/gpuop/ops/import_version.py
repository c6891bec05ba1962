"""Which GPU Operator version an import reads: from what the install itself says, never assumed silently.

Evidence, each read where NVIDIA's chart and OLM put it:
- chart values: `operator.version`, the operator image's tag (templates/_helpers.tpl `gpu-operator.fullimage`);
- a ClusterPolicy the chart rendered: its labels `app.kubernetes.io/version` (the chart's appVersion) and
  `helm.sh/chart: gpu-operator-<version>` (templates/_helpers.tpl `gpu-operator.labels`);
- OLM: a Subscription's `spec.startingCSV`, `status.installedCSV` / `status.currentCSV`, and a
  ClusterServiceVersion's `metadata.name`, all `gpu-operator-certified.<version>` (the bundle's CSV name);
- the operator Deployment (`gpu-operator`): its `gpu-operator` container's image tag.

A decision with its reason (`Version`): `read` (the evidence agrees on one version gpuop has catalog data for),
`assumed` (nothing in the input names one: the newest, which the profile's comment says and pins), or a
located error: a version gpuop has no catalog data for, or two pieces of evidence that disagree (exit 2).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from gpuop.catalog import operator as operator_catalog
from gpuop.catalog import versions as catalog_versions
from gpuop.errors import Issue, UserError
from gpuop.ops.import_io import Doc, one_line

CSV_PREFIX = "gpu-operator-certified."
CHART_PREFIX = "gpu-operator-"
_VERSION = re.compile(r"^v?\d+\.\d+\.\d+$")
# a tag like "v26.3.3" or "v26.3.3-ubi9" / "v26.3.3@sha256:..." names the release it starts with
_TAG = re.compile(r"^(v?\d+\.\d+\.\d+)(?:[-@].*)?$")


@dataclass(frozen=True)
class Evidence:
    version: str
    doc: Doc
    path: tuple
    what: str                       # "operator.version", "the ClusterPolicy's label app.kubernetes.io/version", ...

    def at(self) -> tuple[str, int, int]:
        return self.doc.where(self.path)


@dataclass(frozen=True)
class Version:
    """The operator version an import is read as, and why."""
    version: str
    state: str                      # read | assumed
    reason: str


def _norm(text: str) -> str:
    return text if text.startswith("v") else f"v{text}"


def _get(d, *keys):
    for k in keys:
        if not isinstance(d, dict):
            return None
        d = d.get(k)
    return d


def _from_tag(image) -> str | None:
    if not isinstance(image, str) or ":" not in image.rpartition("/")[2]:
        return None
    m = _TAG.match(image.rpartition("/")[2].partition(":")[2])
    return _norm(m.group(1)) if m else None


def evidence(docs: list[Doc]) -> list[Evidence]:
    """Every place of the input that names the operator version."""
    out: list[Evidence] = []
    for doc in docs:
        d = doc.data
        kind = d.get("kind")
        if "kind" not in d and "apiVersion" not in d:
            v = _get(d, "operator", "version")
            if isinstance(v, str) and v:
                m = _TAG.match(v)
                out.append(Evidence(_norm(m.group(1)) if m else v, doc, ("operator", "version"),
                                    "operator.version (the operator image's tag)"))
        elif kind == "ClusterPolicy":
            labels = _get(d, "metadata", "labels") or {}
            v = labels.get("app.kubernetes.io/version") if isinstance(labels, dict) else None
            if isinstance(v, str) and _VERSION.match(v):
                out.append(Evidence(_norm(v), doc, ("metadata", "labels", "app.kubernetes.io/version"),
                                    "the ClusterPolicy's label app.kubernetes.io/version (the chart's appVersion)"))
            chart = labels.get("helm.sh/chart") if isinstance(labels, dict) else None
            if isinstance(chart, str) and chart.startswith(CHART_PREFIX) and _VERSION.match(chart[len(CHART_PREFIX):]):
                out.append(Evidence(_norm(chart[len(CHART_PREFIX):]), doc, ("metadata", "labels", "helm.sh/chart"),
                                    "the ClusterPolicy's label helm.sh/chart"))
        elif kind == "Subscription":
            for path in (("spec", "startingCSV"), ("status", "installedCSV"), ("status", "currentCSV")):
                v = _get(d, *path)
                if isinstance(v, str) and v.startswith(CSV_PREFIX):
                    out.append(Evidence(_norm(v[len(CSV_PREFIX):]), doc, path, f"the Subscription's {'.'.join(path)}"))
        elif kind == "ClusterServiceVersion":
            v = _get(d, "metadata", "name")
            if isinstance(v, str) and v.startswith(CSV_PREFIX):
                out.append(Evidence(_norm(v[len(CSV_PREFIX):]), doc, ("metadata", "name"), "the CSV's name"))
        elif kind == "Deployment" and _get(d, "metadata", "name") == "gpu-operator":
            containers = _get(d, "spec", "template", "spec", "containers")
            for i, c in enumerate(containers if isinstance(containers, list) else []):
                if isinstance(c, dict) and c.get("name") == "gpu-operator" and _from_tag(c.get("image")):
                    out.append(Evidence(_from_tag(c["image"]), doc,
                                        ("spec", "template", "spec", "containers", i, "image"),
                                        "the operator Deployment's image tag"))
    return out


def decide(docs: list[Doc]) -> Version:
    """The version the import reads (see the module's doc); UserError (located) for an unknown version or
    evidence that disagrees."""
    known = operator_catalog.compiled_versions()
    found = evidence(docs)
    issues = []
    for e in found:
        if e.version not in known:
            issues.append(Issue(*e.at(), _path(e), f'Unsupported value: "{one_line(e.version)}": {e.what} names GPU '
                                f"Operator {one_line(e.version)}, which gpuop has no catalog data for (chart "
                                f"defaults, operand versions); supported values: "
                                + ", ".join(f'"{v}"' for v in known)))
    if issues:
        raise UserError(issues)
    versions = sorted({e.version for e in found})
    if len(versions) > 1:
        first = found[0]
        raise UserError([Issue(*e.at(), _path(e), f"Invalid value: \"{e.version}\": {e.what} names GPU Operator "
                               f"{e.version}, but {first.what} ({first.doc.file}:{first.at()[1]}) names "
                               f"{first.version}; give the documents of one install")
                         for e in found if e.version != first.version])
    if versions:
        e = found[0]
        return Version(versions[0], "read", f"{e.what} ({e.doc.file}:{e.at()[1]})")
    newest = max(known, key=catalog_versions.key)
    return Version(newest, "assumed", "the input names no GPU Operator version (no operator.version, chart labels, "
                   f"CSV or operator image); read as {newest}, the newest gpuop knows: set "
                   "spec.delivery.operator.version and spec.release to the installed one")


def _path(e: Evidence) -> str:
    from gpuop.ops.import_io import field_path
    return field_path(e.path)
