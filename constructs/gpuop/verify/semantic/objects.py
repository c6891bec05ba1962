"""What every rule module of the semantic check shares: the finding, the object helpers, the pod specs an
object holds, and the context (the cluster's other objects and the names that exist outside the output:
`EXTERNAL`, `TENANT_KINDS`)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from gpuop.errors import rule as _rule
from gpuop.kube.types import SYSTEM_PRIORITY_CLASSES

# The semantic rules' declaration (errors.py): `@rule(id, source=..., refuses=...)` above each check's
# upstream comment.
rule = partial(_rule, stage="verify")



Obj = Mapping[str, Any]


@dataclass(frozen=True)
class Finding:
    kind: str
    name: str
    namespace: str
    path: str
    message: str
    rule: str = field(default="", compare=False)    # the id of the rule that found it (check_indexed sets it)


def child(base: str, *parts: str | int) -> str:
    out = base
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out = f"{out}.{part}" if out else part
    return out


def key(base: str, k: str) -> str:
    return f"{base}[{k}]"


def _meta(obj: Obj) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


def _dict(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _dicts(value: Any) -> Iterator[tuple[int, Mapping[str, Any]]]:
    for i, item in enumerate(_list(value)):
        if isinstance(item, Mapping):
            yield i, item


CLUSTER_SCOPED_KINDS = frozenset(
    {
        "Namespace",
        "Node",
        "PersistentVolume",
        "ClusterRole",
        "ClusterRoleBinding",
        "RuntimeClass",
        "PriorityClass",
        "StorageClass",
        "CSIDriver",
        "SecurityContextConstraints",
        "NodeFeatureRule",
        "CustomResourceDefinition",
        "MutatingWebhookConfiguration",
        "ValidatingWebhookConfiguration",
        "APIService",
    }
)


@dataclass(frozen=True)
class External:
    """A name the output may reference without defining it. `name` is `NAME` for cluster-scoped kinds
    and `NAMESPACE/NAME` (or `NAME`: any namespace) for namespaced ones."""

    kind: str
    name: str
    reason: str


# Names that legitimately exist outside the output. Anything a rule resolves and finds neither in the
# output nor here is a violation. Deliberately absent:
# - image pull secrets: the user's (profile `images.pullSecrets`), never resolved by any rule;
# - NFD's objects (its CRDs, its namespace, its DaemonSets): delivered separately (README "GitOps"),
#   and no stack object names one (NodeFeatureRules are matched by NFD, not referenced by name);
# - OpenShift's `hostmount-anyuid` SCC: the operands carry it only in the `openshift.io/scc`
#   annotation, which records the SCC OpenShift's admission chose; no Role grants it, no rule reads it.
EXTERNAL: tuple[External, ...] = (
    *(External("PriorityClass", name, "built in: every API server creates it (pkg/apis/scheduling SystemPriorityClasses)")
      for name in SYSTEM_PRIORITY_CLASSES),
    External("Namespace", "default", "built in: created by the API server (pkg/controlplane SystemNamespaces)"),
    External("Namespace", "kube-system", "built in: created by the API server (SystemNamespaces)"),
    External("Namespace", "kube-public", "built in: created by the API server (SystemNamespaces)"),
    External("Namespace", "kube-node-lease", "built in: created by the API server (SystemNamespaces)"),
    External("SecurityContextConstraints", "privileged",
             "OpenShift's default SCC, which every operand's Role may `use` as in the Operator's assets; on "
             "plain Kubernetes the grant names a resource that does not exist and grants nothing"),
    External("ServiceAccount", "openshift-monitoring/prometheus-k8s",
             "OpenShift cluster monitoring's Prometheus; the stack's RoleBinding lets it scrape the "
             "operands' metrics (the Operator's own prometheus-k8s RoleBinding does the same)"),
)


# Kinds that gpuop writes into its users' namespaces (named in the profile), which exist outside the
# output as pull secrets do: the namespace of these objects is not resolved (kind -> reason).
TENANT_KINDS: dict[str, str] = {
    "ResourceClaimTemplate": "the tenants' DRA claim templates (profile spec.claimTemplates[].namespace) go "
                             "into the tenants' namespaces, which the cluster's users create (docs/dra.md)",
    "LocalQueue": "Kueue's LocalQueues (profile spec.queues.namespaces) go into the namespaces whose workloads "
                  "they queue, which the cluster's users create",
}


def external_names(extra: Mapping[str, set[str]] | None = None) -> dict[str, set[str]]:
    """EXTERNAL as kind -> names, plus `extra` (tests, callers with more knowledge)."""
    out: dict[str, set[str]] = {}
    for e in EXTERNAL:
        out.setdefault(e.kind, set()).add(e.name)
    for kind, names in (extra or {}).items():
        out.setdefault(kind, set()).update(names)
    return out

WORKLOAD_KINDS = frozenset({"DaemonSet", "Deployment", "StatefulSet", "ReplicaSet", "Job"})


def _identity(obj: Obj) -> tuple[str, str, str]:
    meta = _meta(obj)
    kind = str(obj.get("kind", ""))
    # a namespace on a cluster-scoped object is refused (metadata rules) and otherwise ignored by the API
    namespace = "" if kind in CLUSTER_SCOPED_KINDS else str(meta.get("namespace", "") or "")
    return kind, namespace, str(meta.get("name", ""))


@dataclass
class Context:
    """Everything a rule may look up besides the object it checks."""

    objects: list[Obj]
    external: Mapping[str, set[str]] = field(default_factory=dict)
    node_port_range: tuple[int, int] = (30000, 32767)

    def __post_init__(self) -> None:
        self._index: dict[tuple[str, str, str], Obj] = {}   # first object of each identity
        for obj in self.objects:
            self._index.setdefault(_identity(obj), obj)

    def get(self, kind: str, name: str, namespace: str = "") -> Obj | None:
        return self._index.get((kind, namespace, name))

    def first(self, obj: Obj) -> Obj:
        """The first object of the output with `obj`'s kind, namespace and name."""
        return self._index[_identity(obj)]

    def exists(self, kind: str, name: str, namespace: str = "") -> bool:
        if (kind, namespace, name) in self._index:
            return True
        names = self.external.get(kind, set())
        return name in names or (bool(namespace) and f"{namespace}/{name}" in names)

    def of_kind(self, kind: str) -> Iterator[Obj]:
        return (o for o in self.objects if o.get("kind") == kind)


@dataclass(frozen=True)
class PodSpecRef:
    spec: Mapping[str, Any]
    path: str  # path of the PodSpec, e.g. "spec.template.spec"
    meta: Mapping[str, Any]  # pod (template) metadata
    meta_path: str  # "" for a Pod (its own metadata), else e.g. "spec.template.metadata"

    @property
    def labels(self) -> Mapping[str, Any]:
        return _dict(self.meta.get("labels"))


def pod_specs(obj: Obj) -> list[PodSpecRef]:
    kind = obj.get("kind")
    spec = _dict(obj.get("spec"))
    if kind == "Pod":
        return [PodSpecRef(spec, "spec", _meta(obj), "")]
    if kind in WORKLOAD_KINDS:
        template, base = _dict(spec.get("template")), "spec.template"
    elif kind == "CronJob":
        template = _dict(_dict(_dict(spec.get("jobTemplate")).get("spec")).get("template"))
        base = "spec.jobTemplate.spec.template"
    else:
        return []
    return [
        PodSpecRef(_dict(template.get("spec")), f"{base}.spec", _dict(template.get("metadata")), f"{base}.metadata")
    ]


def containers(spec: Mapping[str, Any], base: str) -> Iterator[tuple[str, Mapping[str, Any], bool]]:
    """(path, container, is_init) for initContainers then containers."""
    for field_name, is_init in (("initContainers", True), ("containers", False)):
        for i, ctr in _dicts(spec.get(field_name)):
            yield child(base, field_name, i), ctr, is_init


class _Emitter:
    """Collects findings for one object."""

    def __init__(self, obj: Obj) -> None:
        meta = _meta(obj)
        self.kind = str(obj.get("kind", ""))
        self.name = str(meta.get("name", ""))
        self.namespace = str(meta.get("namespace", "") or "")
        self.findings: list[Finding] = []

    def __call__(self, path: str, message: str) -> None:
        self.findings.append(Finding(self.kind, self.name, self.namespace, path, message))


Rule = Callable[[Obj, Context], Iterable[Finding]]
