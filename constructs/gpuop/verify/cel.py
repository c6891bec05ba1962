"""The CEL validation rules (`x-kubernetes-validations`) of the Flux CRDs, hand-coded.

JSON-Schema validators skip CEL, so an object can pass the CRD schema and still be rejected by the
API server. These are all nine rules of the CRDs gpuop targets (helm-controller v1.6.3,
source-controller v1.9.x, kustomize-controller v1.9.4; the Argo CD CRDs carry none), each written
as a predicate over the object with the CRD's own message. `tests/test_cel.py` breaks each one and
checks the rule list still matches the CRD files in ../shared/refs/crds.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable


def _has(node: object, key: str) -> bool:
    return isinstance(node, dict) and key in node


@dataclass(frozen=True)
class Rule:
    group: str          # apiVersion group
    kind: str
    path: tuple         # where the rule sits, from the object root
    rule: str           # the CEL source, verbatim
    message: str        # the CRD's message, verbatim
    holds: Callable[[dict], bool]


RULES = (
    Rule("helm.toolkit.fluxcd.io", "HelmRelease", ("spec",),
         "(has(self.chart) && !has(self.chartRef)) || (!has(self.chart) && has(self.chartRef))",
         "either chart or chartRef must be set", lambda s: _has(s, "chart") != _has(s, "chartRef")),
    Rule("helm.toolkit.fluxcd.io", "HelmRelease", ("spec", "install", "strategy"),
         "!has(self.retryInterval) || self.name != 'RemediateOnFailure'",
         ".retryInterval cannot be set when .name is 'RemediateOnFailure'",
         lambda s: not _has(s, "retryInterval") or s.get("name") != "RemediateOnFailure"),
    Rule("helm.toolkit.fluxcd.io", "HelmRelease", ("spec", "kubeConfig"),
         "has(self.configMapRef) || has(self.secretRef)",
         "exactly one of spec.kubeConfig.configMapRef or spec.kubeConfig.secretRef must be specified",
         lambda s: _has(s, "configMapRef") or _has(s, "secretRef")),
    Rule("helm.toolkit.fluxcd.io", "HelmRelease", ("spec", "kubeConfig"),
         "!has(self.configMapRef) || !has(self.secretRef)",
         "exactly one of spec.kubeConfig.configMapRef or spec.kubeConfig.secretRef must be specified",
         lambda s: not (_has(s, "configMapRef") and _has(s, "secretRef"))),
    Rule("helm.toolkit.fluxcd.io", "HelmRelease", ("spec", "upgrade", "strategy"),
         "!has(self.retryInterval) || self.name == 'RetryOnFailure'",
         ".retryInterval can only be set when .name is 'RetryOnFailure'",
         lambda s: not _has(s, "retryInterval") or s.get("name") == "RetryOnFailure"),
    Rule("kustomize.toolkit.fluxcd.io", "Kustomization", ("spec", "kubeConfig"),
         "has(self.configMapRef) || has(self.secretRef)",
         "exactly one of spec.kubeConfig.configMapRef or spec.kubeConfig.secretRef must be specified",
         lambda s: _has(s, "configMapRef") or _has(s, "secretRef")),
    Rule("kustomize.toolkit.fluxcd.io", "Kustomization", ("spec", "kubeConfig"),
         "!has(self.configMapRef) || !has(self.secretRef)",
         "exactly one of spec.kubeConfig.configMapRef or spec.kubeConfig.secretRef must be specified",
         lambda s: not (_has(s, "configMapRef") and _has(s, "secretRef"))),
    Rule("source.toolkit.fluxcd.io", "GitRepository", ("spec",),
         "!has(self.serviceAccountName) || (has(self.provider) && (self.provider == 'azure' || self.provider == 'aws'))",
         "serviceAccountName can only be set when provider is 'azure' or 'aws'",
         lambda s: not _has(s, "serviceAccountName") or s.get("provider") in ("azure", "aws")),
    Rule("source.toolkit.fluxcd.io", "HelmChart", ("spec",),
         "!has(self.verify) || self.sourceRef.kind == 'HelmRepository'",
         "spec.verify is only supported when spec.sourceRef.kind is 'HelmRepository'",
         lambda s: not _has(s, "verify") or (s.get("sourceRef") or {}).get("kind") == "HelmRepository"),
)


def errors(obj: dict) -> list[str]:
    """Messages `path: message` for every CEL rule the object breaks (rules on absent fields do not apply)."""
    group = str(obj.get("apiVersion", "")).split("/")[0]
    out = []
    for r in RULES:
        if r.group != group or r.kind != obj.get("kind"):
            continue
        node: object = obj
        for part in r.path:
            node = node.get(part) if isinstance(node, dict) else None
        if isinstance(node, dict) and not r.holds(node):
            out.append(f"{'.'.join(r.path)}: {r.message}")
    return out
