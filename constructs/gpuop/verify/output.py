"""Validate a compiled output folder the way the API servers would: every core object against the
strict Kubernetes schemas of its cluster's version, every custom resource against the CEL rules of its
CRD (Flux's; in operator mode NVIDIA's NVIDIADriver, in the chart values' extraObjects or the OLM
folder), and each cluster's rendered manifests together against the semantic rules (verify/semantic/:
what the API server and kubelet refuse beyond the schema, and references between the objects).
Used by `gpuop validate DIST` (and so after hand edits of dist/).

CRD kinds without a schema here (NodeFeatureRule, ServiceMonitor, Argo CD, Flux and NVIDIA kinds) are
checked by their CEL rules only; the tests check them against the upstream CRD schemas as well.
"""

from __future__ import annotations

import json
from pathlib import Path

from gpuop.errors import Issue, Rule, registry, rule
from gpuop.kube.yamlio import load_all
from gpuop.verify import cel
from gpuop.verify.kubeschema import KubeValidator, SchemaNotFound
from gpuop.verify import semantic
from gpuop.verify.user_created import manifest_issues


@rule("kube-schema", stage="verify", source="kubernetes-validate: the strict OpenAPI schemas of the cluster's "
      "Kubernetes version (verify/kubeschema.py)")
def check_kube_schema(obj: dict, kube: KubeValidator) -> list[str]:
    """A built-in kind's object that its Kubernetes version's schema refuses (unknown fields, types, required)."""
    try:
        return kube.errors(obj)
    except SchemaNotFound:
        return []                        # CRD kinds: their CEL rules (and, in the tests, their CRD schemas)


@rule("crd-cel", stage="verify", source="the x-kubernetes-validations (CEL) rules of the upstream CRDs "
      "(verify/cel.py)")
def check_crd_cel(obj: dict) -> list[str]:
    """A custom object that a CEL rule of its CRD refuses."""
    return cel.errors(obj)


OBJECT_CHECKS = (check_kube_schema, check_crd_cel)
# Every rule `gpuop validate DIST` runs: the schema and CEL checks here and the semantic rules.
REGISTRY: dict[str, Rule] = {**registry(OBJECT_CHECKS), **semantic.REGISTRY}


def is_output(path: Path) -> bool:
    return path.is_dir() and (path / "index.json").is_file()


def _object_issues(obj, shown: str, kube: KubeValidator) -> list[Issue]:
    if not isinstance(obj, dict) or "kind" not in obj:
        return [Issue(shown, 0, 0, "", "not a Kubernetes object")]
    return [Issue(shown, 0, 0, "", f"{obj['kind']}/{obj.get('metadata', {}).get('name')}: {m}", rule=check.rule.id)
            for check, msgs in ((check_kube_schema, check_kube_schema(obj, kube)), (check_crd_cel, check_crd_cel(obj)))
            for m in msgs]


def _operator_files(dist: Path, c: dict) -> list[tuple[Path, str]]:
    """Operator mode's objects: (file, "objects") for the OLM folder's files, (values.yaml, "extraObjects")
    for the objects the Helm values hand NVIDIA's chart."""
    op = c.get("operator")
    if not op:
        return []
    base = dist / op["path"]
    if op.get("install") == "olm":
        return [(f, "objects") for f in sorted((base / "olm").rglob("*.yaml")) if f.name != "kustomization.yaml"]
    return [(base / "values.yaml", "extraObjects")] if (base / "values.yaml").is_file() else []


def validate_output(dist: Path, only: frozenset | None = None) -> list[Issue]:
    """`only`: the names of the clusters to check (the review gate's selection); None: every cluster."""
    issues: list[Issue] = []
    index = json.loads((dist / "index.json").read_text())
    validators: dict[str, KubeValidator] = {}
    for c in index["clusters"]:
        if only is not None and c["name"] not in only:
            continue
        kube = validators.setdefault(c["kubeVersion"], KubeValidator(c["kubeVersion"]))
        files = [(f, "objects") for key in ("manifests", "argocd", "flux")
                 for f in sorted((dist / c[key]).glob("*.yaml")) if f.name != "kustomization.yaml"]
        for f, what in files + _operator_files(dist, c):
            shown = str(f)
            try:
                docs = load_all(f.read_text())
            except Exception as exc:  # noqa: BLE001 - any parse failure is the user's edit
                issues.append(Issue(shown, 0, 0, "", f"not valid YAML: {' '.join(str(exc).split())}"))
                continue
            if what == "extraObjects":
                docs = (docs[0].get("extraObjects") or []) if docs and isinstance(docs[0], dict) else []
            for obj in docs:
                issues += _object_issues(obj, shown, kube)
        issues += manifest_issues(dist / c["manifests"], c, str(dist / "index.json"))
    return issues
