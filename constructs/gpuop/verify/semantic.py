"""The semantic check of a compiled stack: what the API server, its admission plugins, the scheduler
and the kubelet refuse (or silently break on) beyond the OpenAPI schema, and the references between
the objects of one cluster's output.

Owns: the rules (`check_*`, each a small named function `rule(obj, ctx) -> findings` gathered in the
one tuple `RULES`, each with its Kubernetes source in the comment above it), the table of names that
legitimately exist outside the output (`EXTERNAL`, data with a reason per entry; `TENANT_KINDS` for
the objects gpuop places in its users' namespaces), and the two entry
points the pipeline uses: `stack_issues` (every `gpuop synth`, before anything is written; memoized)
and `manifest_issues` (`gpuop validate DIST`, over dist/<cluster>/manifests/*.yaml).

Conventions and where it differs from upstream on purpose:
* `Finding.path` points at the offending field of the *submitted* (v1) object in the notation of
  k8s.io/apimachinery/pkg/util/validation/field.Path (`a.b[0].c`, map keys as `labels[app]`). Where the
  API server reports a coarser or internal path (e.g. `securityContext.shareProcessNamespace` for the
  hostPID pair) the real field is named instead: the user edits the v1 object, not the internal one.
* `Finding.message` is the API server's `field.Error.ErrorBody()` text where upstream has one
  (`Invalid value: "x": ...`, `Required value: ...`, `Duplicate value: "x"`, `Not found: "x"`,
  `Forbidden: ...`, `Unsupported value: "x": supported values: ...`, `Too long: ...`); otherwise the
  admission plugin's or kubelet's wording (without the `pods "x" is forbidden:` envelope, which names
  a pod that does not exist yet); otherwise our own (the rules marked "Not an API-server check").
  Label keys use the newest wording (content.IsLabelKey: "a valid label key ..."); older API servers
  say "a qualified name ..." for the same refusal.
* v1 defaulting is applied where it changes the outcome (probe thresholds, DaemonSet rolling-update
  defaults, toleration operator, Service type, port protocol).
* Env var names keep the strict, portable grammar although the RelaxedEnvironmentVariableValidation
  gate (on by default since 1.32) accepts more: the stack must run on every supported version.
* Image pull secrets are never resolved: they are the user's, created beside the stack (README).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any

from gpuop.errors import Issue
from gpuop.kube.slots import MARKER, fill, lookup
from gpuop.kube.yamlio import load_all

__all__ = ["EXTERNAL", "RULES", "Context", "External", "Finding", "check_objects", "manifest_issues",
           "parse_quantity", "stack_issues"]

Obj = Mapping[str, Any]


@dataclass(frozen=True)
class Finding:
    kind: str
    name: str
    namespace: str
    path: str
    message: str


# --------------------------------------------------------------------------------------
# apimachinery message helpers (k8s.io/apimachinery/pkg/util/validation/validation.go,
# .../validation/field/errors.go)
# --------------------------------------------------------------------------------------


def _go_value(value: Any) -> str:
    """Render a bad value the way field.Error.ErrorBody does (%q for strings, %v otherwise)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if value is None:
        return "null"
    return str(value)


def invalid(value: Any, detail: str) -> str:
    return f"Invalid value: {_go_value(value)}: {detail}"


def required(detail: str = "") -> str:
    return f"Required value: {detail}" if detail else "Required value"


def forbidden(detail: str) -> str:
    return f"Forbidden: {detail}"


def duplicate(value: Any) -> str:
    return f"Duplicate value: {_go_value(value)}"


def not_found(value: Any) -> str:
    return f"Not found: {_go_value(value)}"


def not_supported(value: Any, valid: Iterable[str]) -> str:
    quoted = ", ".join(json.dumps(v) for v in valid)
    return f"Unsupported value: {_go_value(value)}: supported values: {quoted}"


def too_long(max_bytes: int) -> str:
    return f"Too long: must have at most {max_bytes} bytes"


def regex_error(msg: str, fmt: str, *examples: str) -> str:
    """validation.RegexError, including upstream's doubled space before ' or '."""
    if not examples:
        return f"{msg} (regex used for validation is '{fmt}')"
    out = msg + " (e.g. "
    for i, example in enumerate(examples):
        if i > 0:
            out += " or "
        out += f"'{example}', "
    return out + f"regex used for validation is '{fmt}')"


def max_len_error(length: int) -> str:
    return f"must be no more than {length} characters"


def inclusive_range_error(lo: int, hi: int) -> str:
    return f"must be between {lo} and {hi}, inclusive"


IS_NEGATIVE_ERROR_MSG = "must be greater than or equal to 0"

_DNS1123_LABEL_FMT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_SUBDOMAIN_FMT = _DNS1123_LABEL_FMT + "(\\." + _DNS1123_LABEL_FMT + ")*"
_DNS1035_LABEL_FMT = "[a-z]([-a-z0-9]*[a-z0-9])?"
_LABEL_KEY_FMT = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_LABEL_VALUE_FMT = "(" + _LABEL_KEY_FMT + ")?"
_ENV_VAR_NAME_FMT = "[-._a-zA-Z][-._a-zA-Z0-9]*"
_CONFIG_MAP_KEY_FMT = "[-._a-zA-Z0-9]+"
_PERCENT_FMT = "[0-9]+%"

_DNS1123_LABEL_RE = re.compile(f"^{_DNS1123_LABEL_FMT}$")
_DNS1123_SUBDOMAIN_RE = re.compile(f"^{_DNS1123_SUBDOMAIN_FMT}$")
_DNS1035_LABEL_RE = re.compile(f"^{_DNS1035_LABEL_FMT}$")
_LABEL_KEY_RE = re.compile(f"^{_LABEL_KEY_FMT}$")
_LABEL_VALUE_RE = re.compile(f"^{_LABEL_VALUE_FMT}$")
_ENV_VAR_NAME_RE = re.compile(f"^{_ENV_VAR_NAME_FMT}$")
_CONFIG_MAP_KEY_RE = re.compile(f"^{_CONFIG_MAP_KEY_FMT}$")
_PERCENT_RE = re.compile(f"^{_PERCENT_FMT}$")
_PORT_NAME_CHARSET_RE = re.compile("^[-a-z0-9]+$")


def is_dns1123_label(value: str) -> list[str]:
    errs: list[str] = []
    if len(value) > 63:
        errs.append(max_len_error(63))
    if not _DNS1123_LABEL_RE.match(value):
        if _DNS1123_SUBDOMAIN_RE.match(value):
            errs.append("must not contain dots")
        else:
            errs.append(
                regex_error(
                    "a lowercase RFC 1123 label must consist of lower case alphanumeric "
                    "characters or '-', and must start and end with an alphanumeric character",
                    _DNS1123_LABEL_FMT,
                    "my-name",
                    "123-abc",
                )
            )
    return errs


def is_dns1123_subdomain(value: str) -> list[str]:
    errs: list[str] = []
    if len(value) > 253:
        errs.append(max_len_error(253))
    if not _DNS1123_SUBDOMAIN_RE.match(value):
        errs.append(
            regex_error(
                "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric "
                "characters, '-' or '.', and must start and end with an alphanumeric character",
                _DNS1123_SUBDOMAIN_FMT,
                "example.com",
            )
        )
    return errs


def is_dns1035_label(value: str) -> list[str]:
    errs: list[str] = []
    if len(value) > 63:
        errs.append(max_len_error(63))
    if not _DNS1035_LABEL_RE.match(value):
        errs.append(
            regex_error(
                "a DNS-1035 label must consist of lower case alphanumeric characters or '-', "
                "start with an alphabetic character, and end with an alphanumeric character",
                _DNS1035_LABEL_FMT,
                "my-name",
                "abc-123",
            )
        )
    return errs


def is_path_segment_name(value: str) -> list[str]:
    """k8s.io/apimachinery/pkg/api/validation/path IsValidPathSegmentName (RBAC names)."""
    for illegal in (".", ".."):
        if value == illegal:
            return [f"may not be '{illegal}'"]
    return [f"may not contain '{c}'" for c in ("/", "%") if c in value]


_LABEL_KEY_ERR = (
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"
)


def is_qualified_name(value: str) -> list[str]:
    """validation.IsQualifiedName (content.IsLabelKey)."""
    errs: list[str] = []
    parts = value.split("/")
    if len(parts) == 1:
        name = parts[0]
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix:
            errs.append("prefix part must be non-empty")
        else:
            errs.extend("prefix part " + m for m in is_dns1123_subdomain(prefix))
    else:
        return [
            "a valid label key "
            + regex_error(_LABEL_KEY_ERR, _LABEL_KEY_FMT, "MyName", "my.name", "123-abc")
            + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
        ]
    if not name:
        errs.append("name part must be non-empty")
    elif len(name) > 63:
        errs.append("name part " + max_len_error(63))
    if not _LABEL_KEY_RE.match(name):
        errs.append("name part " + regex_error(_LABEL_KEY_ERR, _LABEL_KEY_FMT, "MyName", "my.name", "123-abc"))
    return errs


def is_valid_label_value(value: str) -> list[str]:
    errs: list[str] = []
    if len(value) > 63:
        errs.append(max_len_error(63))
    if not _LABEL_VALUE_RE.match(value):
        errs.append(
            regex_error(
                "a valid label must be an empty string or consist of alphanumeric characters, "
                "'-', '_' or '.', and must start and end with an alphanumeric character",
                _LABEL_VALUE_FMT,
                "MyValue",
                "my_value",
                "12345",
            )
        )
    return errs


def is_valid_port_num(port: int) -> list[str]:
    return [] if 1 <= port <= 65535 else [inclusive_range_error(1, 65535)]


def is_valid_port_name(port: str) -> list[str]:
    """IANA_SVC_NAME (validation.IsValidPortName)."""
    errs: list[str] = []
    if len(port) > 15:
        errs.append(max_len_error(15))
    if not _PORT_NAME_CHARSET_RE.match(port):
        errs.append("must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)")
    if not re.search("[a-z]", port):
        errs.append("must contain at least one letter (a-z)")
    if "--" in port:
        errs.append("must not contain consecutive hyphens")
    if port and (port[0] == "-" or port[-1] == "-"):
        errs.append("must not begin or end with a hyphen")
    return errs


def _has_chdir_prefix(value: str) -> list[str]:
    if value == ".":
        return ["must not be '.'"]
    if value == "..":
        return ["must not be '..'"]
    if value.startswith(".."):
        return ["must not start with '..'"]
    return []


def is_env_var_name(value: str) -> list[str]:
    errs: list[str] = []
    if not _ENV_VAR_NAME_RE.match(value):
        errs.append(
            regex_error(
                "a valid environment variable name must consist of alphabetic characters, "
                "digits, '_', '-', or '.', and must not start with a digit",
                _ENV_VAR_NAME_FMT,
                "my.env-name",
                "MY_ENV.NAME",
                "MyEnvName1",
            )
        )
    return errs + _has_chdir_prefix(value)


def is_config_map_key(value: str) -> list[str]:
    errs: list[str] = []
    if len(value) > 253:
        errs.append(max_len_error(253))
    if not _CONFIG_MAP_KEY_RE.match(value):
        errs.append(
            regex_error(
                "a valid config key must consist of alphanumeric characters, '-', '_' or '.'",
                _CONFIG_MAP_KEY_FMT,
                "key.name",
                "KEY_NAME",
                "key-name",
            )
        )
    return errs + _has_chdir_prefix(value)


def is_valid_percent(value: str) -> list[str]:
    if _PERCENT_RE.match(value):
        return []
    return [
        regex_error(
            "a valid percent string must be a numeric string followed by an ending '%'",
            _PERCENT_FMT,
            "1%",
            "93%",
        )
    ]


# --------------------------------------------------------------------------------------
# resource.Quantity (k8s.io/apimachinery/pkg/api/resource/quantity.go ParseQuantity)
# --------------------------------------------------------------------------------------

QUANTITY_FORMAT_ERROR = "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
QUANTITY_SUFFIX_ERROR = "unable to parse quantity's suffix"

_QUANTITY_RE = re.compile(r"^([+-]?)(\d+(?:\.\d*)?|\.\d+)([eEinumkKMGTP]*[-+]?[0-9]*)$")
_EXPONENT_RE = re.compile(r"^[eE]([-+]?\d+)$")
_SUFFIXES: dict[str, Fraction] = {
    "": Fraction(1),
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 1000),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
    "Ki": Fraction(2**10),
    "Mi": Fraction(2**20),
    "Gi": Fraction(2**30),
    "Ti": Fraction(2**40),
    "Pi": Fraction(2**50),
    "Ei": Fraction(2**60),
}


class QuantityError(ValueError):
    pass


def parse_quantity(value: object) -> Fraction:
    """Exact value of a Kubernetes quantity (JSON numbers are accepted as such)."""
    if isinstance(value, bool):
        raise QuantityError(QUANTITY_FORMAT_ERROR)
    if isinstance(value, int):
        return Fraction(value)
    if isinstance(value, float):
        return Fraction(str(value))
    if not isinstance(value, str):
        raise QuantityError(QUANTITY_FORMAT_ERROR)
    match = _QUANTITY_RE.match(value)
    if not match:
        raise QuantityError(QUANTITY_FORMAT_ERROR)
    sign, number, suffix = match.groups()
    magnitude = Fraction(number if not number.endswith(".") else number[:-1])
    if suffix in _SUFFIXES:
        scale = _SUFFIXES[suffix]
    elif exp := _EXPONENT_RE.match(suffix):
        scale = Fraction(10) ** int(exp.group(1))
    else:
        raise QuantityError(QUANTITY_SUFFIX_ERROR)
    result = magnitude * scale
    return -result if sign == "-" else result


# --------------------------------------------------------------------------------------
# Paths, object helpers, context
# --------------------------------------------------------------------------------------


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
    External("PriorityClass", "system-node-critical",
             "built in: every API server creates it (pkg/apis/scheduling SystemPriorityClasses)"),
    External("PriorityClass", "system-cluster-critical",
             "built in: every API server creates it (pkg/apis/scheduling SystemPriorityClasses)"),
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
    return str(obj.get("kind", "")), str(meta.get("namespace", "") or ""), str(meta.get("name", ""))


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


# --------------------------------------------------------------------------------------
# Rules: pod spec
# --------------------------------------------------------------------------------------


# k8s pkg/apis/core/validation/validation.go validatePodSpecSecurityContext:
#   "ShareProcessNamespace and HostPID cannot both be enabled"
# (upstream reports it at securityContext.shareProcessNamespace, the internal location)
def check_host_pid_with_share_process_namespace(obj: Obj, ctx: Context) -> Iterable[Finding]:
    emit = _Emitter(obj)
    for ref in pod_specs(obj):
        if ref.spec.get("hostPID") is True and ref.spec.get("shareProcessNamespace") is True:
            emit(
                child(ref.path, "shareProcessNamespace"),
                invalid(True, "ShareProcessNamespace and HostPID cannot both be enabled"),
            )
    return emit.findings


# k8s pkg/apis/core/validation/validation.go validateContainerCommon (DNS-1123 label),
#   validateContainers / validateInitContainers (names unique across containers+initContainers)
def check_container_names(obj: Obj, ctx: Context) -> Iterable[Finding]:
    emit = _Emitter(obj)
    for ref in pod_specs(obj):
        seen: set[str] = set()
        # upstream reports the duplicate on the init container; walk regular containers first
        ordered = sorted(containers(ref.spec, ref.path), key=lambda item: item[2])
        for path, ctr, _ in ordered:
            name = ctr.get("name")
            if not isinstance(name, str) or not name:
                emit(child(path, "name"), required())
                continue
            for msg in is_dns1123_label(name):
                emit(child(path, "name"), invalid(name, msg))
            if name in seen:
                emit(child(path, "name"), duplicate(name))
            seen.add(name)
    return emit.findings


_VOLUME_SOURCES = (
    "emptyDir", "hostPath", "gitRepo", "gcePersistentDisk", "awsElasticBlockStore", "secret",
    "nfs", "iscsi", "glusterfs", "flocker", "persistentVolumeClaim", "rbd", "cinder", "cephfs",
    "quobyte", "downwardAPI", "fc", "flexVolume", "configMap", "azureFile", "vsphereVolume",
    "photonPersistentDisk", "portworxVolume", "azureDisk", "storageos", "projected", "scaleIO",
    "csi", "ephemeral", "image",
)  # fmt: skip
_HOST_PATH_TYPES = (
    "", "BlockDevice", "CharDevice", "Directory", "DirectoryOrCreate", "File", "FileOrCreate", "Socket",
)  # fmt: skip


# k8s pkg/apis/core/validation/validation.go ValidateVolumes (name DNS-1123 label, unique),
#   validateVolumeSource ("may not specify more than 1 volume type" / "must specify a volume type"),
#   validateHostPathVolumeSource (validatePathNoBacksteps, validateHostPathType)
def check_volumes(obj: Obj, ctx: Context) -> Iterable[Finding]:
    emit = _Emitter(obj)
    for ref in pod_specs(obj):
        seen: set[str] = set()
        for i, vol in _dicts(ref.spec.get("volumes")):
            path = child(ref.path, "volumes", i)
            name = vol.get("name")
            if not isinstance(name, str) or not name:
                emit(child(path, "name"), required())
            else:
                for msg in is_dns1123_label(name):
                    emit(child(path, "name"), invalid(name, msg))
                if name in seen:
                    emit(child(path, "name"), duplicate(name))
                seen.add(name)
            sources = [s for s in _VOLUME_SOURCES if vol.get(s) is not None]
            if not sources:
                emit(path, required("must specify a volume type"))
            for extra in sources[1:]:
                emit(child(path, extra), forbidden("may not specify more than 1 volume type"))
            host_path = vol.get("hostPath")
            if isinstance(host_path, Mapping):
                hp = host_path.get("path")
                if not hp:
                    emit(child(path, "hostPath", "path"), required())
                elif ".." in str(hp).split("/"):
                    emit(child(path, "hostPath", "path"), invalid(hp, "must not contain '..'"))
                hp_type = host_path.get("type")
                if hp_type is not None and hp_type not in _HOST_PATH_TYPES:
                    emit(child(path, "hostPath", "type"), not_supported(hp_type, _HOST_PATH_TYPES))
    return emit.findings


# k8s pkg/apis/core/validation/validation.go validateContainerPorts (IsValidPortName, unique
#   names, IsValidPortNum), validatePodHostNetworkDeps ("must match `containerPort` when
#   `hostNetwork` is true"), AccumulateUniqueHostPorts (duplicate protocol/hostIP/hostPort)
def check_container_ports(obj: Obj, ctx: Context) -> Iterable[Finding]:
    emit = _Emitter(obj)
    for ref in pod_specs(obj):
        host_network = ref.spec.get("hostNetwork") is True
        host_ports: set[str] = set()
        for cpath, ctr, is_init in containers(ref.spec, ref.path):
            names: set[str] = set()
            init_ports: set[str] = set()  # init containers run one by one: per-container set
            for i, port in _dicts(ctr.get("ports")):
                path = child(cpath, "ports", i)
                name = port.get("name")
                if isinstance(name, str) and name:
                    msgs = is_valid_port_name(name)
                    for msg in msgs:
                        emit(child(path, "name"), invalid(name, msg))
                    if not msgs and name in names:
                        emit(child(path, "name"), duplicate(name))
                    names.add(name)
                cport = port.get("containerPort")
                if not cport:
                    emit(child(path, "containerPort"), required())
                elif isinstance(cport, int):
                    for msg in is_valid_port_num(cport):
                        emit(child(path, "containerPort"), invalid(cport, msg))
                hport = port.get("hostPort")
                if isinstance(hport, int) and hport != 0:
                    for msg in is_valid_port_num(hport):
                        emit(child(path, "hostPort"), invalid(hport, msg))
                    acc = init_ports if is_init else host_ports
                    token = f"{port.get('protocol') or 'TCP'}/{port.get('hostIP', '')}/{hport}"
                    if token in acc:
                        emit(child(path, "hostPort"), duplicate(token))
                    acc.add(token)
                if host_network and not is_init and isinstance(hport, int) and hport not in (0, cport):
                    emit(
                        child(path, "hostPort"),
                        invalid(hport, "must match `containerPort` when `hostNetwork` is true"),
                    )
    return emit.findings


def _has_dotdot(value: str) -> bool:
    return ".." in value.replace("\\", "/").split("/")


# k8s pkg/apis/core/validation/validation.go ValidateVolumeMounts (name must be a pod volume,
#   mountPath required and unique, subPath/subPathExpr via validateLocalDescendingPath),
#   validateMountPropagation ("Bidirectional mount propagation is available only to privileged
#   containers").  A relative mountPath is NOT refused: the kubelet's makeMounts makes it absolute.
def check_volume_mounts(obj: Obj, ctx: Context) -> Iterable[Finding]:
    emit = _Emitter(obj)
    for ref in pod_specs(obj):
        volumes = {v.get("name") for _, v in _dicts(ref.spec.get("volumes"))}
        for cpath, ctr, _ in containers(ref.spec, ref.path):
            privileged = _dict(ctr.get("securityContext")).get("privileged") is True
            mount_points: set[str] = set()
            for i, mnt in _dicts(ctr.get("volumeMounts")):
                path = child(cpath, "volumeMounts", i)
                name = mnt.get("name") or ""
                if not name:
                    emit(child(path, "name"), required())
                if name not in volumes:
                    emit(child(path, "name"), not_found(name))
                mount_path = mnt.get("mountPath") or ""
                if not mount_path:
                    emit(child(path, "mountPath"), required())
                if mount_path in mount_points:
                    emit(child(path, "mountPath"), invalid(mount_path, "must be unique"))
                mount_points.add(mount_path)
                for sub_field in ("subPath", "subPathExpr"):
                    sub = mnt.get(sub_field)
                    if not isinstance(sub, str) or not sub:
                        continue
                    if sub.startswith("/"):
                        emit(child(path, sub_field), invalid(sub, "must be a relative path"))
                    if _has_dotdot(sub):
                        emit(child(path, sub_field), invalid(sub, "must not contain '..'"))
                if mnt.get("subPath") and mnt.get("subPathExpr"):
                    emit(
                        child(path, "subPathExpr"),
                        invalid(mnt["subPathExpr"], "subPathExpr and subPath are mutually exclusive"),
                    )
                propagation = mnt.get("mountPropagation")
                if propagation is not None:
                    valid = ("Bidirectional", "HostToContainer", "None")
                    if propagation not in valid:
                        emit(child(path, "mountPropagation"), not_supported(propagation, valid))
                    elif propagation == "Bidirectional" and not privileged:
                        emit(
                            child(path, "mountPropagation"),
                            forbidden("Bidirectional mount propagation is available only to privileged containers"),
                        )
    return emit.findings


_PROBE_HANDLERS = ("exec", "httpGet", "tcpSocket", "grpc")
_LIFECYCLE_HANDLERS = ("exec", "httpGet", "tcpSocket", "sleep")


def _check_handler(
    emit: _Emitter, handler: Mapping[str, Any], kinds: tuple[str, ...], path: str, ctr: Mapping[str, Any]
) -> None:
    present = [k for k in kinds if handler.get(k) is not None]
    if not present:
        emit(path, required("must specify a handler type"))
    for extra in present[1:]:
        emit(child(path, extra), forbidden("may not specify more than 1 handler type"))
    if not present:
        return
    action = _dict(handler.get(present[0]))
    apath = child(path, present[0])
    if present[0] == "exec" and not _list(action.get("command")):
        emit(child(apath, "command"), required())
    if present[0] in ("httpGet", "tcpSocket", "grpc"):
        port = action.get("port")
        ppath = child(apath, "port")
        if isinstance(port, bool) or port is None:
            emit(ppath, required())
        elif isinstance(port, int):
            for msg in is_valid_port_num(port):
                emit(ppath, invalid(port, msg))
        elif isinstance(port, str):
            msgs = is_valid_port_name(port)
            for msg in msgs:
                emit(ppath, invalid(port, msg))
            declared = {p.get("name") for _, p in _dicts(ctr.get("ports"))}
            if not msgs and port not in declared:
                # kubelet pkg/kubelet/prober util.ResolveContainerPort: the probe can never succeed
                emit(ppath, not_found(port) + ": no container port with this name (kubelet: couldn't find port)")
    if present[0] == "httpGet":
        scheme = action.get("scheme")
        if scheme is not None and scheme not in ("HTTP", "HTTPS"):
            emit(child(apath, "scheme"), not_supported(scheme, ("HTTP", "HTTPS")))


# k8s pkg/apis/core/validation/validation.go validateProbe / validateHandler ("must specify a
#   handler type", "may not specify more than 1 handler type"), ValidateNonnegativeField on the
#   timing fields, validateLivenessProbe / validateStartupProbe (successThreshold "must be 1"),
#   validateReadinessProbe (terminationGracePeriodSeconds "must not be set for readinessProbes"),
#   validateInitContainers ("may not be set for init containers without restartPolicy=Always").
# v1 defaulting turns 0/absent timeoutSeconds, periodSeconds, successThreshold and
# failureThreshold into 1, 10, 1 and 3, so only negatives (and successThreshold > 1) remain.
def check_probes(obj: Obj, ctx: Context) -> Iterable[Finding]:
    emit = _Emitter(obj)
    for ref in pod_specs(obj):
        for cpath, ctr, is_init in containers(ref.spec, ref.path):
            sidecar = is_init and ctr.get("restartPolicy") == "Always"
            for probe_field in ("livenessProbe", "readinessProbe", "startupProbe"):
                probe = ctr.get(probe_field)
                if not isinstance(probe, Mapping):
                    continue
                path = child(cpath, probe_field)
                if is_init and not sidecar:
                    emit(path, forbidden("may not be set for init containers without restartPolicy=Always"))
                    continue
                _check_handler(emit, probe, _PROBE_HANDLERS, path, ctr)
                for num_field in (
                    "initialDelaySeconds", "timeoutSeconds", "periodSeconds", "successThreshold", "failureThreshold",
                ):  # fmt: skip
                    value = probe.get(num_field)
                    if isinstance(value, int) and value < 0:
                        emit(child(path, num_field), invalid(value, IS_NEGATIVE_ERROR_MSG))
                success = probe.get("successThreshold")
                if probe_field != "readinessProbe" and isinstance(success, int) and success > 1:
                    emit(child(path, "successThreshold"), invalid(success, "must be 1"))
                grace = probe.get("terminationGracePeriodSeconds")
                if grace is not None:
                    if probe_field == "readinessProbe":
                        emit(
                            child(path, "terminationGracePeriodSeconds"),
                            invalid(grace, "must not be set for readinessProbes"),
                        )
                    elif isinstance(grace, int) and grace <= 0:
                        emit(child(path, "terminationGracePeriodSeconds"), invalid(grace, "must be greater than 0"))
            lifecycle = ctr.get("lifecycle")
            if isinstance(lifecycle, Mapping):
                if is_init and not sidecar:
                    emit(
                        child(cpath, "lifecycle"),
                        forbidden("may not be set for init containers without restartPolicy=Always"),
                    )
                    continue
                for hook in ("postStart", "preStop"):
                    if isinstance(lifecycle.get(hook), Mapping):
                        _check_handler(emit, lifecycle[hook], _LIFECYCLE_HANDLERS, child(cpath, "lifecycle", hook), ctr)
    return emit.findings


_VALUE_FROM_SOURCES = ("fieldRef", "resourceFieldRef", "configMapKeyRef", "secretKeyRef")


# k8s pkg/apis/core/validation/validation.go ValidateEnv (IsEnvVarName), validateEnvVarValueFrom
#   (exactly one source; not together with `value`), validateConfigMapKeySelector /
#   validateSecretKeySelector (IsConfigMapKey), ValidateEnvFrom (exactly one of configMapRef /
#   secretRef; prefix IsEnvVarName).  Duplicate env names are only a warning upstream
#   (pkg/api/pod/warnings.go "hides previous definition"), so they are not reported.
# Note: with the RelaxedEnvironmentVariableValidation gate (default on since 1.32) newer API
# servers accept any printable ASCII but '='; this rule keeps the strict, portable grammar.
def check_env(obj: Obj, ctx: Context) -> Iterable[Finding]:
    emit = _Emitter(obj)
    for ref in pod_specs(obj):
        for cpath, ctr, _ in containers(ref.spec, ref.path):
            for i, env in _dicts(ctr.get("env")):
                path = child(cpath, "env", i)
                name = env.get("name")
                if not isinstance(name, str) or not name:
                    emit(child(path, "name"), required())
                else:
                    for msg in is_env_var_name(name):
                        emit(child(path, "name"), invalid(name, msg))
                value_from = env.get("valueFrom")
                if not isinstance(value_from, Mapping):
                    continue
                vpath = child(path, "valueFrom")
                sources = [s for s in _VALUE_FROM_SOURCES if value_from.get(s) is not None]
                if not sources:
                    emit(
                        vpath,
                        invalid(
                            "",
                            "must specify one of: `fieldRef`, `resourceFieldRef`, `configMapKeyRef` or `secretKeyRef`",
                        ),
                    )
                elif env.get("value"):
                    emit(vpath, invalid("", "may not be specified when `value` is not empty"))
                elif len(sources) > 1:
                    emit(vpath, invalid("", "may not have more than one field specified at a time"))
                for selector in ("configMapKeyRef", "secretKeyRef"):
                    sel = value_from.get(selector)
                    if not isinstance(sel, Mapping):
                        continue
                    k = sel.get("key")
                    if not k:
                        emit(child(vpath, selector, "key"), required())
                    else:
                        for msg in is_config_map_key(str(k)):
                            emit(child(vpath, selector, "key"), invalid(k, msg))
            for i, env_from in _dicts(ctr.get("envFrom")):
                path = child(cpath, "envFrom", i)
                prefix = env_from.get("prefix")
                if isinstance(prefix, str) and prefix:
                    for msg in is_env_var_name(prefix):
                        emit(child(path, "prefix"), invalid(prefix, msg))
                count = sum(env_from.get(s) is not None for s in ("configMapRef", "secretRef"))
                if count == 0:
                    emit(path, invalid("", "must specify one of: `configMapRef` or `secretRef`"))
                elif count > 1:
                    emit(path, invalid("", "may not have more than one field specified at a time"))
    return emit.findings


_STANDARD_CONTAINER_RESOURCES = frozenset({"cpu", "memory", "ephemeral-storage"})
_OTHER_STANDARD_RESOURCES = frozenset(
    {"storage", "pods", "services", "replicationcontrollers", "resourcequotas", "secrets", "configmaps",
     "persistentvolumeclaims", "services.nodeports", "services.loadbalancers"}
)  # fmt: skip


def _is_native_resource(name: str) -> bool:
    return "/" not in name or "kubernetes.io/" in name


def _is_hugepages(name: str) -> bool:
    return name.startswith("hugepages-")


def _is_extended_resource(name: str) -> bool:
    return (
        not _is_native_resource(name) and not name.startswith("requests.") and not is_qualified_name("requests." + name)
    )


def _overcommit_allowed(name: str) -> bool:
    return _is_native_resource(name) and not _is_hugepages(name)


def container_resource_name_errors(name: str) -> list[str]:
    """validateContainerResourceName (validateResourceName + container restrictions)."""
    errs = is_qualified_name(name)
    if errs:
        return errs
    if "/" not in name:
        if name in _STANDARD_CONTAINER_RESOURCES or _is_hugepages(name):
            return []
        if name not in _OTHER_STANDARD_RESOURCES:
            errs.append("must be a standard resource type or fully qualified")
        return errs + ["must be a standard resource for containers"]
    if not _is_native_resource(name) and not _is_extended_resource(name):
        return ["doesn't follow extended resource name standard"]
    return []


# k8s pkg/apis/core/validation/validation.go validateResourceRequirements (request <= limit:
#   "must be less than or equal to %s limit of %s"; non-overcommitable resources such as
#   nvidia.com/gpu: "must be equal to %s limit of %s" and "Limit must be set for non
#   overcommitable resources"), ValidateResourceQuantityValue (non-negative; "must be an
#   integer" for extended resources), validateContainerResourceName; quantity syntax from
#   k8s.io/apimachinery/pkg/api/resource ParseQuantity (a decode error in the API server).
# Quantities are echoed as written, not in Quantity.String() canonical form.
def check_resources(obj: Obj, ctx: Context) -> Iterable[Finding]:
    emit = _Emitter(obj)
    for ref in pod_specs(obj):
        for cpath, ctr, _ in containers(ref.spec, ref.path):
            rpath = child(cpath, "resources")
            resources = _dict(ctr.get("resources"))
            parsed: dict[str, dict[str, Fraction]] = {"limits": {}, "requests": {}}
            for section in ("limits", "requests"):
                for rname, raw in _dict(resources.get(section)).items():
                    qpath = key(child(rpath, section), rname)
                    for msg in container_resource_name_errors(rname):
                        emit(qpath, invalid(rname, msg))
                    try:
                        quantity = parse_quantity(raw)
                    except QuantityError as err:
                        emit(qpath, invalid(raw, str(err)))
                        continue
                    parsed[section][rname] = quantity
                    shown = str(raw)
                    if quantity < 0:
                        emit(qpath, invalid(shown, IS_NEGATIVE_ERROR_MSG))
                    if _is_extended_resource(rname) and quantity.denominator != 1:
                        emit(qpath, f"Invalid value: {shown}: must be an integer")
            limits_raw = _dict(resources.get("limits"))
            requests_raw = _dict(resources.get("requests"))
            for rname, req in parsed["requests"].items():
                req_shown = str(requests_raw[rname])
                if rname in parsed["limits"]:
                    lim = parsed["limits"][rname]
                    lim_shown = str(limits_raw[rname])
                    if req != lim and not _overcommit_allowed(rname):
                        emit(
                            key(child(rpath, "requests"), rname),
                            invalid(req_shown, f"must be equal to {rname} limit of {lim_shown}"),
                        )
                    elif req > lim:
                        emit(
                            key(child(rpath, "requests"), rname),
                            invalid(req_shown, f"must be less than or equal to {rname} limit of {lim_shown}"),
                        )
                elif rname not in limits_raw and not _overcommit_allowed(rname):
                    emit(
                        key(child(rpath, "limits"), rname),
                        required("Limit must be set for non overcommitable resources"),
                    )
    return emit.findings


_TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")


# k8s pkg/apis/core/validation/validation.go ValidateTolerations (+ validateTaintEffect)
def check_tolerations(obj: Obj, ctx: Context) -> Iterable[Finding]:
    emit = _Emitter(obj)
    for ref in pod_specs(obj):
        for i, tol in _dicts(ref.spec.get("tolerations")):
            path = child(ref.path, "tolerations", i)
            tkey = tol.get("key") or ""
            operator = tol.get("operator") or ""
            value = tol.get("value") or ""
            effect = tol.get("effect") or ""
            if tkey:
                for msg in is_qualified_name(tkey):
                    emit(child(path, "key"), invalid(tkey, msg))
            if not tkey and operator != "Exists":
                emit(
                    child(path, "operator"),
                    invalid(
                        operator,
                        'operator must be Exists when `key` is empty, which means "match all values and all keys"',
                    ),
                )
            if tol.get("tolerationSeconds") is not None and effect != "NoExecute":
                emit(
                    child(path, "effect"), invalid(effect, "effect must be 'NoExecute' when `tolerationSeconds` is set")
                )
            if operator in ("Equal", ""):
                errs = is_valid_label_value(value)
                if errs:
                    emit(child(path, "value"), invalid(value, ";".join(errs)))
            elif operator == "Exists":
                if value:
                    emit(child(path, "operator"), invalid(value, "value must be empty when `operator` is 'Exists'"))
            else:
                emit(child(path, "operator"), not_supported(operator, ("Equal", "Exists")))
            if effect and effect not in _TAINT_EFFECTS:
                emit(child(path, "effect"), not_supported(effect, _TAINT_EFFECTS))
    return emit.findings


# k8s pkg/apis/core/validation/validation.go ValidatePodSpec (ValidatePriorityClassName =
#   NameIsDNSSubdomain) and plugin/pkg/admission/priority admission.go:
#   "no PriorityClass with name %v was found"
def check_priority_class_name(obj: Obj, ctx: Context) -> Iterable[Finding]:
    emit = _Emitter(obj)
    for ref in pod_specs(obj):
        name = ref.spec.get("priorityClassName")
        if not isinstance(name, str) or not name:
            continue
        path = child(ref.path, "priorityClassName")
        errs = is_dns1123_subdomain(name)
        for msg in errs:
            emit(path, invalid(name, msg))
        if not errs and not ctx.exists("PriorityClass", name):
            emit(path, f"no PriorityClass with name {name} was found")
    return emit.findings


def _term_path(base: str, req: str) -> str:
    return child(base, "affinity", "nodeAffinity", req)


# k8s pkg/apis/core/validation/validation.go ValidatePodSpec (unversionedvalidation.ValidateLabels
#   on nodeSelector)
def check_node_selector(obj: Obj, ctx: Context) -> Iterable[Finding]:
    emit = _Emitter(obj)
    for ref in pod_specs(obj):
        base = child(ref.path, "nodeSelector")
        for k, v in _dict(ref.spec.get("nodeSelector")).items():
            for msg in is_qualified_name(str(k)):
                emit(key(base, str(k)), invalid(k, msg))
            for msg in is_valid_label_value(str(v)):
                emit(key(base, str(k)), invalid(v, msg))
    return emit.findings


def _check_node_selector_requirement(emit: _Emitter, req: Mapping[str, Any], path: str, check_values: bool) -> None:
    operator = req.get("operator")
    values = [str(v) for v in _list(req.get("values"))]
    vpath = child(path, "values")
    if operator in ("In", "NotIn"):
        if not values:
            emit(vpath, required("must be specified when `operator` is 'In' or 'NotIn'"))
    elif operator in ("Exists", "DoesNotExist"):
        if values:
            emit(vpath, forbidden("may not be specified when `operator` is 'Exists' or 'DoesNotExist'"))
    elif operator in ("Gt", "Lt"):
        if len(values) != 1:
            emit(vpath, required("must be specified single value when `operator` is 'Lt' or 'Gt'"))
        elif not re.fullmatch(r"[+-]?\d+", values[0]):
            # k8s.io/apimachinery/pkg/labels NewRequirement, used by the scheduler's node matching
            emit(child(vpath, 0), invalid(values[0], "for 'Gt', 'Lt' operators, the value must be an integer"))
    else:
        emit(child(path, "operator"), invalid(operator or "", "not a valid selector operator"))
    rkey = str(req.get("key", ""))
    for msg in is_qualified_name(rkey):
        emit(child(path, "key"), invalid(rkey, msg))
    if check_values:
        for j, value in enumerate(values):
            for msg in is_valid_label_value(value):
                emit(child(vpath, j), invalid(value, msg))


# k8s pkg/apis/core/validation/validation.go validateNodeAffinity / ValidateNodeSelector ("must
#   have at least one node selector term") / ValidateNodeSelectorRequirement /
#   ValidatePreferredSchedulingTerms ("must be in the range 1-100")
def check_node_affinity(obj: Obj, ctx: Context) -> Iterable[Finding]:
    emit = _Emitter(obj)
    for ref in pod_specs(obj):
        affinity = _dict(_dict(ref.spec.get("affinity")).get("nodeAffinity"))
        req_name = "requiredDuringSchedulingIgnoredDuringExecution"
        pref_name = "preferredDuringSchedulingIgnoredDuringExecution"
        required_sel = affinity.get(req_name)
        if isinstance(required_sel, Mapping):
            tpath = child(_term_path(ref.path, req_name), "nodeSelectorTerms")
            terms = list(_dicts(required_sel.get("nodeSelectorTerms")))
            if not terms:
                emit(tpath, required("must have at least one node selector term"))
            for i, term in terms:
                for j, expr in _dicts(term.get("matchExpressions")):
                    _check_node_selector_requirement(emit, expr, child(tpath, i, "matchExpressions", j), True)
        for i, pref in _dicts(affinity.get(pref_name)):
            ppath = child(_term_path(ref.path, pref_name), i)
            weight = pref.get("weight")
            if not isinstance(weight, int) or not 1 <= weight <= 100:
                emit(child(ppath, "weight"), invalid(weight, "must be in the range 1-100"))
            for j, expr in _dicts(_dict(pref.get("preference")).get("matchExpressions")):
                _check_node_selector_requirement(emit, expr, child(ppath, "preference", "matchExpressions", j), False)
    return emit.findings


# --------------------------------------------------------------------------------------
# Rules: workloads
# --------------------------------------------------------------------------------------


def go_string_map(values: Mapping[str, Any]) -> str:
    """fmt %#v of a map[string]string (keys sorted, as fmt does)."""
    inner = ", ".join(f"{json.dumps(str(k))}:{json.dumps(str(v))}" for k, v in sorted(values.items()))
    return f"map[string]string{{{inner}}}"


def selector_matches(selector: Mapping[str, Any], labels: Mapping[str, Any]) -> bool:
    """metav1.LabelSelectorAsSelector(selector).Matches(labels) for a non-nil selector."""
    for k, v in _dict(selector.get("matchLabels")).items():
        if labels.get(k) != v:
            return False
    for _, expr in _dicts(selector.get("matchExpressions")):
        label_key, op, values = str(expr.get("key")), expr.get("operator"), _list(expr.get("values"))
        present = label_key in labels
        if op == "In" and not (present and labels[label_key] in values):
            return False
        if op == "NotIn" and present and labels[label_key] in values:
            return False
        if op == "Exists" and not present:
            return False
        if op == "DoesNotExist" and present:
            return False
    return True


# k8s pkg/apis/apps/validation/validation.go ValidateDaemonSetSpec ("`selector` does not match
#   template `labels`", "empty selector is invalid for daemonset"), and the same selector checks
#   of ValidateDeploymentSpec / ValidateStatefulSetSpec / ValidateReplicaSetSpec
def check_workload_selector(obj: Obj, ctx: Context) -> Iterable[Finding]:
    emit = _Emitter(obj)
    kind = obj.get("kind")
    if kind not in ("DaemonSet", "Deployment", "StatefulSet", "ReplicaSet"):
        return emit.findings
    spec = _dict(obj.get("spec"))
    selector = spec.get("selector")
    labels = _dict(_dict(_dict(spec.get("template")).get("metadata")).get("labels"))
    if not isinstance(selector, Mapping):
        emit("spec.selector", required())
        return emit.findings
    if not _dict(selector.get("matchLabels")) and not _list(selector.get("matchExpressions")):
        detail = (
            "empty selector is not valid for statefulset."
            if kind == "StatefulSet"
            else f"empty selector is invalid for {kind.lower()}"
        )
        emit("spec.selector", f"Invalid value: {{}}: {detail}")
        return emit.findings
    if not selector_matches(selector, labels):
        emit(
            "spec.template.metadata.labels",
            f"Invalid value: {go_string_map(labels)}: `selector` does not match template `labels`",
        )
    return emit.findings


# k8s pkg/apis/apps/validation/validation.go ValidateDaemonSetSpec / ValidateDeploymentSpec /
#   ValidateStatefulSetSpec ("Unsupported value ... supported values: \"Always\"") and
#   pkg/apis/batch/validation ValidateJobSpec (OnFailure or Never)
def check_pod_template_restart_policy(obj: Obj, ctx: Context) -> Iterable[Finding]:
    emit = _Emitter(obj)
    kind = obj.get("kind")
    for ref in pod_specs(obj):
        policy = ref.spec.get("restartPolicy") or "Always"  # v1 default
        if kind in ("DaemonSet", "Deployment", "StatefulSet", "ReplicaSet") and policy != "Always":
            emit(child(ref.path, "restartPolicy"), not_supported(policy, ("Always",)))
        elif kind in ("Job", "CronJob") and policy not in ("OnFailure", "Never"):
            emit(child(ref.path, "restartPolicy"), not_supported(policy, ("OnFailure", "Never")))
        if kind == "DaemonSet" and ref.spec.get("activeDeadlineSeconds") is not None:
            emit(
                child(ref.path, "activeDeadlineSeconds"),
                forbidden("activeDeadlineSeconds in DaemonSet is not Supported"),
            )
    return emit.findings


def _int_or_percent(value: Any) -> tuple[int | None, bool]:
    """(value, is_percent); value None when unparseable (getIntOrPercentValue)."""
    if isinstance(value, bool):
        return None, False
    if isinstance(value, int):
        return value, False
    if isinstance(value, str) and not is_valid_percent(value):
        return int(value[:-1]), True
    return None, isinstance(value, str)


# k8s pkg/apis/apps/validation/validation.go ValidateDaemonSetUpdateStrategy /
#   ValidateRollingUpdateDaemonSet / ValidatePositiveIntOrPercent / IsNotMoreThan100Percent,
#   after pkg/apis/apps/v1 defaults.go SetDefaults_DaemonSet (type RollingUpdate,
#   maxUnavailable 1, maxSurge 0 when absent).
# "rollingUpdate with OnDelete" is NOT refused for DaemonSets upstream (it is silently ignored);
# it is reported with the wording StatefulSet validation uses for the same mistake.
def check_daemonset_update_strategy(obj: Obj, ctx: Context) -> Iterable[Finding]:
    emit = _Emitter(obj)
    if obj.get("kind") != "DaemonSet":
        return emit.findings
    base = "spec.updateStrategy"
    strategy = _dict(_dict(obj.get("spec")).get("updateStrategy"))
    stype = strategy.get("type") or "RollingUpdate"
    rolling = strategy.get("rollingUpdate")
    if stype == "OnDelete":
        if rolling is not None:
            emit(child(base, "rollingUpdate"), invalid("", "only allowed for updateStrategy 'RollingUpdate'"))
        return emit.findings
    if stype != "RollingUpdate":
        emit(child(base, "type"), not_supported(stype, ("RollingUpdate", "OnDelete")))
        return emit.findings
    rolling = _dict(rolling)
    values: dict[str, int | None] = {}
    for fname, default in (("maxUnavailable", 1), ("maxSurge", 0)):
        raw = rolling.get(fname, default)
        fpath = child(base, "rollingUpdate", fname)
        value, is_percent = _int_or_percent(raw)
        if isinstance(raw, str) and value is None:
            for msg in is_valid_percent(raw):
                emit(fpath, invalid(raw, msg))
        elif value is not None and value < 0:
            emit(fpath, f"Invalid value: {raw}: {IS_NEGATIVE_ERROR_MSG}")
        elif is_percent and value is not None and value > 100:
            emit(fpath, f"Invalid value: {raw}: must not be greater than 100%")
        values[fname] = value
    has_unavailable = values["maxUnavailable"] not in (0, None)
    has_surge = values["maxSurge"] not in (0, None)
    if has_unavailable and has_surge:
        emit(
            child(base, "rollingUpdate", "maxSurge"),
            f"Invalid value: {rolling.get('maxSurge')}: may not be set when maxUnavailable is non-zero",
        )
    elif values["maxUnavailable"] == 0 and values["maxSurge"] == 0:
        emit(child(base, "rollingUpdate", "maxUnavailable"), required("cannot be 0 when maxSurge is 0"))
    return emit.findings


# --------------------------------------------------------------------------------------
# Rules: Services
# --------------------------------------------------------------------------------------


# k8s pkg/apis/core/validation/validation.go ValidateService / validateServicePort (port
#   IsValidPortNum, targetPort ValidatePortNumOrName, names DNS-1123 label, required when more
#   than one port, unique; nodePort "may not be used when `type` is 'ClusterIP'") and
#   pkg/registry/core/service/portallocator ErrNotInRange ("provided port is not in the valid
#   range. The range of valid ports is 30000-32767")
def check_service_ports(obj: Obj, ctx: Context) -> Iterable[Finding]:
    emit = _Emitter(obj)
    if obj.get("kind") != "Service":
        return emit.findings
    spec = _dict(obj.get("spec"))
    stype = spec.get("type") or "ClusterIP"
    ports = list(_dicts(spec.get("ports")))
    names: set[str] = set()
    lo, hi = ctx.node_port_range
    for i, port in ports:
        path = child("spec.ports", i)
        name = port.get("name") or ""
        if len(ports) > 1 and not name:
            emit(child(path, "name"), required())
        elif name:
            for msg in is_dns1123_label(name):
                emit(child(path, "name"), invalid(name, msg))
            if name in names:
                emit(child(path, "name"), duplicate(name))
            names.add(name)
        number = port.get("port")
        if isinstance(number, int):
            for msg in is_valid_port_num(number):
                emit(child(path, "port"), invalid(number, msg))
        target = port.get("targetPort")
        if isinstance(target, int) and target != 0:  # 0/absent defaults to `port`
            for msg in is_valid_port_num(target):
                emit(child(path, "targetPort"), invalid(target, msg))
        elif isinstance(target, str):
            for msg in is_valid_port_name(target):
                emit(child(path, "targetPort"), invalid(target, msg))
        node_port = port.get("nodePort")
        if isinstance(node_port, int) and node_port != 0:
            if stype == "ClusterIP":
                emit(child(path, "nodePort"), forbidden("may not be used when `type` is 'ClusterIP'"))
            elif not lo <= node_port <= hi:
                emit(
                    child(path, "nodePort"),
                    invalid(
                        node_port,
                        f"provided port is not in the valid range. The range of valid ports is {lo}-{hi}",
                    ),
                )
    return emit.findings


# Not an API-server check: a Service whose selector matches no pod template in the output has
# no endpoints (kube-controller-manager endpointslice controller selects nothing).
def check_service_selector_matches_pods(obj: Obj, ctx: Context) -> Iterable[Finding]:
    emit = _Emitter(obj)
    if obj.get("kind") != "Service":
        return emit.findings
    selector = _dict(_dict(obj.get("spec")).get("selector"))
    if not selector:
        return emit.findings  # selector-less Services are managed by hand
    for other in ctx.objects:
        if (_meta(other).get("namespace") or "") != emit.namespace:
            continue
        for ref in pod_specs(other):
            if all(ref.labels.get(k) == v for k, v in selector.items()):
                return emit.findings
    rendered = json.dumps(dict(selector), sort_keys=True)
    emit("spec.selector", f"selector {rendered} matches no pod template in namespace {json.dumps(emit.namespace)}")
    return emit.findings


# --------------------------------------------------------------------------------------
# Rules: references inside the output
# --------------------------------------------------------------------------------------


# k8s plugin/pkg/admission/serviceaccount admission.go: pods naming a missing ServiceAccount are
#   refused ("service account %s/%s was not found, retry after the service account is created");
#   the "default" account always exists (the serviceaccounts controller creates it).
def check_service_account_exists(obj: Obj, ctx: Context) -> Iterable[Finding]:
    emit = _Emitter(obj)
    for ref in pod_specs(obj):
        for fname in ("serviceAccountName", "serviceAccount"):
            name = ref.spec.get(fname)
            if not isinstance(name, str) or not name or name == "default":
                continue
            if not ctx.exists("ServiceAccount", name, emit.namespace):
                emit(
                    child(ref.path, fname),
                    f"service account {emit.namespace}/{name} was not found, "
                    "retry after the service account is created",
                )
            break  # serviceAccountName wins over the deprecated serviceAccount
    return emit.findings


def _config_refs(ref: PodSpecRef, kind: str) -> Iterator[tuple[str, str, Mapping[str, Any], list[str]]]:
    """(path, name, source, keys) of every ConfigMap ('configMap') or Secret ('secret') reference."""
    vol_field, name_field = ("configMap", "name") if kind == "configMap" else ("secret", "secretName")
    key_ref, env_ref = ("configMapKeyRef", "configMapRef") if kind == "configMap" else ("secretKeyRef", "secretRef")
    for i, vol in _dicts(ref.spec.get("volumes")):
        vpath = child(ref.path, "volumes", i)
        src = vol.get(vol_field)
        if isinstance(src, Mapping):
            keys = [str(item.get("key")) for _, item in _dicts(src.get("items"))]
            yield child(vpath, vol_field, name_field), str(src.get(name_field, "")), src, keys
        for j, proj in _dicts(_dict(vol.get("projected")).get("sources")):
            psrc = proj.get(vol_field)
            if isinstance(psrc, Mapping):
                keys = [str(item.get("key")) for _, item in _dicts(psrc.get("items"))]
                yield child(vpath, "projected", "sources", j, vol_field, "name"), str(psrc.get("name", "")), psrc, keys
    for cpath, ctr, _ in containers(ref.spec, ref.path):
        for i, env_from in _dicts(ctr.get("envFrom")):
            src = env_from.get(env_ref)
            if isinstance(src, Mapping):
                yield child(cpath, "envFrom", i, env_ref, "name"), str(src.get("name", "")), src, []
        for i, env in _dicts(ctr.get("env")):
            src = _dict(env.get("valueFrom")).get(key_ref)
            if isinstance(src, Mapping):
                path = child(cpath, "env", i, "valueFrom", key_ref, "name")
                yield path, str(src.get("name", "")), src, [str(src.get("key", ""))]


def _check_config_refs(obj: Obj, ctx: Context, ref_kind: str, obj_kind: str, resource: str) -> list[Finding]:
    emit = _Emitter(obj)
    for ref in pod_specs(obj):
        for path, name, src, keys in _config_refs(ref, ref_kind):
            if not name or src.get("optional") is True:
                continue
            if not ctx.exists(obj_kind, name, emit.namespace):
                emit(path, f'{resource} "{name}" not found')
                continue
            target = ctx.get(obj_kind, name, emit.namespace)
            if target is None:
                continue  # external: its keys are unknown
            available = (
                set(_dict(target.get("data")))
                | set(_dict(target.get("binaryData")))
                | set(_dict(target.get("stringData")))
            )
            for k in keys:
                if k not in available:
                    # kubelet: "couldn't find key %v in ConfigMap %v/%v" / volume
                    # "configmap references non-existent config key"
                    emit(path, f'{resource} "{name}" has no key "{k}"')
    return emit.findings


# kubelet pkg/kubelet/kubelet_pods.go makeEnvironmentVariables and pkg/volume/configmap SetUpAt:
#   a missing, non-optional ConfigMap (or key) keeps the pod in CreateContainerConfigError /
#   ContainerCreating.  Message: API NotFound wording 'configmaps "x" not found'.
def check_config_map_references(obj: Obj, ctx: Context) -> Iterable[Finding]:
    return _check_config_refs(obj, ctx, "configMap", "ConfigMap", "configmaps")


# Same kubelet paths for Secrets (pkg/volume/secret SetUpAt).  imagePullSecrets are deliberately
# not checked: they are provided by the user.
def check_secret_references(obj: Obj, ctx: Context) -> Iterable[Finding]:
    return _check_config_refs(obj, ctx, "secret", "Secret", "secrets")


# k8s pkg/apis/core/validation/validation.go ValidateRuntimeClassName (DNS subdomain) and
#   plugin/pkg/admission/runtimeclass admission.go: 'pod rejected: RuntimeClass "%s" not found'
def check_runtime_class_exists(obj: Obj, ctx: Context) -> Iterable[Finding]:
    emit = _Emitter(obj)
    for ref in pod_specs(obj):
        name = ref.spec.get("runtimeClassName")
        if not isinstance(name, str):
            continue
        path = child(ref.path, "runtimeClassName")
        errs = is_dns1123_subdomain(name)
        for msg in errs:
            emit(path, invalid(name, msg))
        if not errs and not ctx.exists("RuntimeClass", name):
            emit(path, f'pod rejected: RuntimeClass "{name}" not found')
    return emit.findings


# k8s pkg/apis/rbac/validation/validation.go ValidateRoleBinding / ValidateClusterRoleBinding
#   (roleRef.apiGroup, roleRef.kind) and pkg/registry/rbac/rolebinding/policybased storage.go:
#   without "bind"/escalate rights, creating a binding resolves the role and fails with the
#   NotFound error 'clusterroles.rbac.authorization.k8s.io "x" not found'.
def check_role_binding_role_ref(obj: Obj, ctx: Context) -> Iterable[Finding]:
    emit = _Emitter(obj)
    kind = obj.get("kind")
    if kind not in ("RoleBinding", "ClusterRoleBinding"):
        return emit.findings
    role_ref = _dict(obj.get("roleRef"))
    group = role_ref.get("apiGroup", "")
    if group != "rbac.authorization.k8s.io":
        emit("roleRef.apiGroup", not_supported(group, ("rbac.authorization.k8s.io",)))
    ref_kind = role_ref.get("kind", "")
    allowed = ("Role", "ClusterRole") if kind == "RoleBinding" else ("ClusterRole",)
    if ref_kind not in allowed:
        emit("roleRef.kind", not_supported(ref_kind, allowed))
        return emit.findings
    name = str(role_ref.get("name", ""))
    if not name:
        emit("roleRef.name", required())
        return emit.findings
    namespace = emit.namespace if ref_kind == "Role" else ""
    if not ctx.exists(ref_kind, name, namespace):
        resource = "roles" if ref_kind == "Role" else "clusterroles"
        emit("roleRef.name", f'{resource}.rbac.authorization.k8s.io "{name}" not found')
    return emit.findings


# k8s pkg/apis/rbac/validation/validation.go validateRoleBindingSubject (ServiceAccount subjects
#   need a namespace in ClusterRoleBindings) + reference check: a binding to a ServiceAccount
#   that is neither in the output nor external grants nothing to the workload.
def check_role_binding_subjects(obj: Obj, ctx: Context) -> Iterable[Finding]:
    emit = _Emitter(obj)
    kind = obj.get("kind")
    if kind not in ("RoleBinding", "ClusterRoleBinding"):
        return emit.findings
    for i, subject in _dicts(obj.get("subjects")):
        if subject.get("kind") != "ServiceAccount":
            continue
        path = child("subjects", i)
        namespace = subject.get("namespace") or (emit.namespace if kind == "RoleBinding" else "")
        if not namespace:
            emit(child(path, "namespace"), required())
            continue
        name = str(subject.get("name", ""))
        if name and name != "default" and not ctx.exists("ServiceAccount", name, namespace):
            emit(child(path, "name"), f'serviceaccounts "{name}" not found in namespace "{namespace}"')
    return emit.findings


_SA_USER_RE = re.compile(r"^system:serviceaccount:([^:]+):([^:]+)$")


# OpenShift SecurityContextConstraints: `users` entries "system:serviceaccount:NS:NAME" must name
#   an existing ServiceAccount, otherwise the SCC never applies to the workload.
def check_scc_users(obj: Obj, ctx: Context) -> Iterable[Finding]:
    emit = _Emitter(obj)
    if obj.get("kind") != "SecurityContextConstraints":
        return emit.findings
    for i, user in enumerate(_list(obj.get("users"))):
        match = _SA_USER_RE.match(str(user))
        if not match:
            continue
        namespace, name = match.groups()
        if name != "default" and not ctx.exists("ServiceAccount", name, namespace):
            emit(child("users", i), f'serviceaccounts "{name}" not found in namespace "{namespace}"')
    return emit.findings


# OpenShift: a Role/ClusterRole rule granting `use` on securitycontextconstraints by resourceName
#   must name an SCC that exists (in the output or external), else the grant is dead.
def check_rbac_scc_use_resource_names(obj: Obj, ctx: Context) -> Iterable[Finding]:
    emit = _Emitter(obj)
    if obj.get("kind") not in ("Role", "ClusterRole"):
        return emit.findings
    for i, rule in _dicts(obj.get("rules")):
        resources = _list(rule.get("resources"))
        verbs = _list(rule.get("verbs"))
        if "securitycontextconstraints" not in resources or not ({"use", "*"} & set(verbs)):
            continue
        for j, name in enumerate(_list(rule.get("resourceNames"))):
            if not ctx.exists("SecurityContextConstraints", str(name)):
                emit(
                    child("rules", i, "resourceNames", j),
                    f'securitycontextconstraints.security.openshift.io "{name}" not found',
                )
    return emit.findings


# k8s plugin/pkg/admission/namespace/lifecycle admission.go: objects in a namespace that does not
#   exist are refused ('namespaces "x" not found'). TENANT_KINDS go into the users' namespaces.
def check_namespace_exists(obj: Obj, ctx: Context) -> Iterable[Finding]:
    emit = _Emitter(obj)
    if obj.get("kind") in CLUSTER_SCOPED_KINDS or obj.get("kind") in TENANT_KINDS or not emit.namespace:
        return emit.findings
    # gpuop/tenant-namespace=true: a tenant's namespace the profile says exists (DRA claim templates, issue 13)
    if ((obj.get("metadata") or {}).get("annotations") or {}).get("gpuop/tenant-namespace") == "true":
        return emit.findings
    if not ctx.exists("Namespace", emit.namespace):
        emit("metadata.namespace", f'namespaces "{emit.namespace}" not found')
    return emit.findings


# --------------------------------------------------------------------------------------
# Rules: metadata
# --------------------------------------------------------------------------------------

_RBAC_KINDS = frozenset({"Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding"})


def name_errors(kind: str, name: str) -> list[str]:
    """The ValidateNameFunc upstream uses for each kind."""
    if kind == "Namespace":
        return is_dns1123_label(name)  # ValidateNamespaceName = NameIsDNSLabel
    if kind == "Service":
        return is_dns1035_label(name)  # ValidateServiceName = NameIsDNS1035Label
    if kind in _RBAC_KINDS:
        return is_path_segment_name(name)  # rbac minimalNameRequirements
    return is_dns1123_subdomain(name)  # NameIsDNSSubdomain (everything else, CRs included)


# k8s.io/apimachinery/pkg/api/validation/objectmeta.go ValidateObjectMetaAccessor (name with the
#   kind's ValidateNameFunc, "name or generateName is required", namespace DNS-1123 label)
def check_metadata_name(obj: Obj, ctx: Context) -> Iterable[Finding]:
    emit = _Emitter(obj)
    meta = _meta(obj)
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        emit("metadata.name", required("name or generateName is required"))
    else:
        for msg in name_errors(emit.kind, name):
            emit("metadata.name", invalid(name, msg))
    namespace = meta.get("namespace")
    if isinstance(namespace, str) and namespace:
        for msg in is_dns1123_label(namespace):
            emit("metadata.namespace", invalid(namespace, msg))
    return emit.findings


def _metas(obj: Obj) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """(path, metadata) of the object and of its pod template, if any."""
    yield "metadata", _meta(obj)
    for ref in pod_specs(obj):
        if ref.meta_path:
            yield ref.meta_path, ref.meta


def _label_maps(obj: Obj) -> Iterator[tuple[str, Mapping[str, Any]]]:
    for path, meta in _metas(obj):
        yield child(path, "labels"), _dict(meta.get("labels"))
    spec = _dict(obj.get("spec"))
    if obj.get("kind") in ("DaemonSet", "Deployment", "StatefulSet", "ReplicaSet"):
        yield "spec.selector.matchLabels", _dict(_dict(spec.get("selector")).get("matchLabels"))
    if obj.get("kind") == "Service":
        yield "spec.selector", _dict(spec.get("selector"))


# k8s.io/apimachinery/pkg/apis/meta/v1/validation ValidateLabels (IsQualifiedName keys,
#   IsValidLabelValue values) on object and template labels, workload and Service selectors
def check_labels(obj: Obj, ctx: Context) -> Iterable[Finding]:
    emit = _Emitter(obj)
    for base, labels in _label_maps(obj):
        for k, v in labels.items():
            for msg in is_qualified_name(str(k)):
                emit(key(base, str(k)), invalid(k, msg))
            if not isinstance(v, str):
                emit(key(base, str(k)), invalid(v, "label values must be strings"))
                continue
            for msg in is_valid_label_value(v):
                emit(key(base, str(k)), invalid(v, msg))
    return emit.findings


TOTAL_ANNOTATION_SIZE_LIMIT_B = 256 * (1 << 10)


# k8s.io/apimachinery/pkg/api/validation/objectmeta.go ValidateAnnotations (lower-cased keys are
#   qualified names; total size of keys+values <= 256KiB: "Too long: must have at most 262144 bytes")
def check_annotations(obj: Obj, ctx: Context) -> Iterable[Finding]:
    emit = _Emitter(obj)
    for path, meta in _metas(obj):
        base, annotations = child(path, "annotations"), _dict(meta.get("annotations"))
        size = 0
        for k, v in annotations.items():
            for msg in is_qualified_name(str(k).lower()):
                emit(key(base, str(k)), invalid(k, msg))
            size += len(str(k).encode()) + len(str(v).encode())
        if size > TOTAL_ANNOTATION_SIZE_LIMIT_B:
            emit(base, too_long(TOTAL_ANNOTATION_SIZE_LIMIT_B))
    return emit.findings


# Not an API-server check: two objects with the same kind/namespace/name in one output means
#   the second silently overwrites the first on apply.
def check_duplicate_objects(obj: Obj, ctx: Context) -> Iterable[Finding]:
    emit = _Emitter(obj)
    if ctx.first(obj) is not obj:
        emit("metadata.name", duplicate(emit.name))
    return emit.findings


RULES: tuple[Rule, ...] = (
    check_metadata_name,
    check_labels,
    check_annotations,
    check_duplicate_objects,
    check_namespace_exists,
    check_host_pid_with_share_process_namespace,
    check_container_names,
    check_volumes,
    check_container_ports,
    check_volume_mounts,
    check_probes,
    check_env,
    check_resources,
    check_tolerations,
    check_priority_class_name,
    check_node_selector,
    check_node_affinity,
    check_workload_selector,
    check_pod_template_restart_policy,
    check_daemonset_update_strategy,
    check_service_ports,
    check_service_selector_matches_pods,
    check_service_account_exists,
    check_config_map_references,
    check_secret_references,
    check_runtime_class_exists,
    check_role_binding_role_ref,
    check_role_binding_subjects,
    check_scc_users,
    check_rbac_scc_use_resource_names,
)


# The rules that look past the object they check (references, duplicates, Service endpoints). The
# others read only their object (and the constant node port range), so their findings are memoized per
# distinct object: clusters share synthesized variants, and a fleet checks each variant once.
CONTEXT_RULES: frozenset[Rule] = frozenset({
    check_duplicate_objects,
    check_namespace_exists,
    check_priority_class_name,
    check_service_selector_matches_pods,
    check_service_account_exists,
    check_config_map_references,
    check_secret_references,
    check_runtime_class_exists,
    check_role_binding_role_ref,
    check_role_binding_subjects,
    check_scc_users,
    check_rbac_scc_use_resource_names,
})


def check_indexed(objs: list[dict[str, Any]], *, external: Mapping[str, set[str]] | None = None,
                  local: list[list[list[Finding]]] | None = None) -> list[tuple[int, Finding]]:
    """(index of the object, finding) for every rule in RULES over every object, in object order then
    rule order. `local[i][r]`, when given, holds the findings of RULES[r] on objs[i] for rules outside
    CONTEXT_RULES (computed earlier); `external` is added to the EXTERNAL table."""
    ctx = Context(objects=list(objs), external=external_names(external))
    out: list[tuple[int, Finding]] = []
    for i, obj in enumerate(ctx.objects):
        for r, rule in enumerate(RULES):
            found = local[i][r] if local is not None and rule not in CONTEXT_RULES else rule(obj, ctx)
            out += [(i, f) for f in found]
    return out


def check_objects(objs: list[dict[str, Any]], *, external: Mapping[str, set[str]] | None = None) -> list[Finding]:
    """Every finding of every rule over one cluster's objects (the EXTERNAL table plus `external`)."""
    return [f for _, f in check_indexed(objs, external=external)]


_NO_CONTEXT = Context(objects=[])


def _local_findings(obj: Obj) -> list[list[Finding]]:
    return [[] if rule in CONTEXT_RULES else list(rule(obj, _NO_CONTEXT)) for rule in RULES]


class StackChecker:
    """Checks synthesized stacks (objects with value slots, and the chart's default values), memoized.

    An object is identified by its synthesized body (shared between the clusters that use the same
    component variant; the memo holds a reference, so the identity cannot be reused) and the values
    of the slots it contains; each distinct one is filled and checked by the local rules once. A
    cluster whose objects were all seen together before is answered from the memo outright."""

    def __init__(self) -> None:
        self._slots: dict[int, tuple[dict, tuple[str, ...]]] = {}
        self._objects: dict[tuple, tuple[dict, list[list[Finding]]]] = {}
        self._clusters: dict[tuple, list[tuple[int, Finding]]] = {}

    def _slot_paths(self, body: dict) -> tuple[str, ...]:
        hit = self._slots.get(id(body))
        if hit is None:
            text = json.dumps(body, ensure_ascii=False)      # the markers are not ASCII
            hit = self._slots[id(body)] = (body, tuple(sorted(set(MARKER.findall(text)))))
        return hit[1]

    def check(self, bodies: list[dict], values_json: str) -> list[tuple[int, Finding]]:
        fast = (tuple(id(b) for b in bodies), values_json)    # the same variants with the same values
        if fast in self._clusters:
            return self._clusters[fast]
        if len(self._objects) > 100_000:      # a long-lived process (tests): start over rather than grow
            self.__init__()
        values = json.loads(values_json)
        keys = []
        for body in bodies:
            paths = self._slot_paths(body)
            keys.append((id(body), tuple(json.dumps(lookup(values, p), sort_keys=True) for p in paths)))
        cluster = tuple(keys)
        if cluster not in self._clusters:
            filled, local = [], []
            for body, k in zip(bodies, keys):
                if k not in self._objects:
                    obj = fill(body, values)
                    self._objects[k] = (obj, _local_findings(obj))
                obj, found = self._objects[k]
                filled.append(obj)
                local.append(found)
            self._clusters[cluster] = check_indexed(filled, local=local)
        self._clusters[fast] = self._clusters[cluster]
        return self._clusters[fast]


_checker = StackChecker()   # one per process: spawned workers each keep their own


def _issue(file: str, f: Finding, note: str = "") -> Issue:
    return Issue(file, 0, 0, f"{f.kind}/{f.name} {f.path}", f.message + note)


def stack_issues(stack, file: str) -> list[Issue]:
    """A synthesized cluster (stack.Synthesized) checked as its manifests will be (value slots filled with
    the chart's defaults); each violation located at the profile `file`, naming the object and field."""
    plan = stack.plan
    found = _checker.check([o.body for o in stack.objects], plan.values_json)
    return [_issue(file, f, f" (the stack compiled for cluster {plan.name})") for _, f in found]


def manifest_issues(folder: Path) -> list[Issue]:
    """One cluster's rendered manifests (dist/<cluster>/manifests/*.yaml, kustomization.yaml excepted),
    checked together; each violation located at the file holding the object. Files that do not parse
    are left to the schema check, which reports them."""
    objs: list[dict] = []
    files: list[str] = []
    for path in sorted(folder.glob("*.yaml")):
        if path.name == "kustomization.yaml":
            continue
        try:
            docs = load_all(path.read_text())
        except Exception:  # noqa: BLE001, S112 - verify.output reports it as "not valid YAML"
            continue
        for obj in docs:
            if isinstance(obj, dict) and "kind" in obj:
                objs.append(obj)
                files.append(str(path))
    return [_issue(files[i], f) for i, f in check_indexed(objs)]
