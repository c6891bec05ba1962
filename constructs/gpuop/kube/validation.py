"""The Kubernetes syntax kernel: the API server's rules for names, keys and values, with its exact
message wording, for every stage that checks a string bound for a Kubernetes object (the profile models,
validate/, verify/).

Sources: k8s.io/apimachinery pkg/util/validation/validation.go (IsDNS1123Label, IsDNS1123Subdomain,
IsDNS1035Label, IsQualifiedName, IsValidLabelValue, IsValidPortNum, IsValidPortName, IsEnvVarName,
IsRelaxedEnvVarName, IsConfigMapKey, IsValidPercent), pkg/util/validation/field/errors.go (the
`Invalid value: ...` bodies), pkg/api/validation/path (IsValidPathSegmentName) and
k8s.io/component-helpers node/util/sysctl (the sysctl name grammar and which sysctls are namespaced).

Each `is_*` function returns the list of messages the API server gives for the value, empty when it
is accepted, so a caller reports exactly what `kubectl apply` would print. Every pattern is applied with
`fullmatch`: Python's `$` also matches before a final "\\n", Go's `$` (without (?m)) only at the end of
the text, so "abc\\n" is not a name in either.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any

# ------------------------------------------------------------------ field.Error bodies (field/errors.go)


def go_value(value: Any) -> str:
    """A bad value as field.Error.ErrorBody renders it (%q for strings, %v otherwise)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if value is None:
        return "null"
    return str(value)


def invalid(value: Any, detail: str) -> str:
    return f"Invalid value: {go_value(value)}: {detail}"


def invalid_raw(rendered: str, detail: str) -> str:
    """Invalid value with a value already rendered (structs and lists, which ErrorBody prints as JSON)."""
    return f"Invalid value: {rendered}: {detail}"


def required(detail: str = "") -> str:
    return f"Required value: {detail}" if detail else "Required value"


def forbidden(detail: str) -> str:
    return f"Forbidden: {detail}"


def duplicate(value: Any) -> str:
    return f"Duplicate value: {go_value(value)}"


def not_found(value: Any) -> str:
    return f"Not found: {go_value(value)}"


def not_supported(value: Any, valid: Iterable[str]) -> str:
    quoted = ", ".join(json.dumps(v) for v in valid)
    return f"Unsupported value: {go_value(value)}: supported values: {quoted}"


def too_long(max_bytes: int) -> str:
    return f"Too long: must have at most {max_bytes} bytes"


# ------------------------------------------------------------------ validation.go message helpers


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
PROTOCOLS = ("SCTP", "TCP", "UDP")     # core.Protocol, as the API server lists them

DNS1123_LABEL_FMT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
DNS1123_SUBDOMAIN_FMT = DNS1123_LABEL_FMT + "(\\." + DNS1123_LABEL_FMT + ")*"
DNS1035_LABEL_FMT = "[a-z]([-a-z0-9]*[a-z0-9])?"
QUALIFIED_NAME_FMT = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
LABEL_VALUE_FMT = "(" + QUALIFIED_NAME_FMT + ")?"
ENV_VAR_NAME_FMT = "[-._a-zA-Z][-._a-zA-Z0-9]*"
CONFIG_MAP_KEY_FMT = "[-._a-zA-Z0-9]+"
PERCENT_FMT = "[0-9]+%"
# component-helpers node/util/sysctl: SysctlSegmentFmt, SysctlFmt (either '.' or '/' separates segments)
SYSCTL_SEGMENT_FMT = "[a-z0-9]([-_a-z0-9]*[a-z0-9])?"
SYSCTL_FMT = "(" + SYSCTL_SEGMENT_FMT + "[\\./])*" + SYSCTL_SEGMENT_FMT
SYSCTL_MAX_LENGTH = 253

_DNS1123_LABEL = re.compile(DNS1123_LABEL_FMT)
_DNS1123_SUBDOMAIN = re.compile(DNS1123_SUBDOMAIN_FMT)
_DNS1035_LABEL = re.compile(DNS1035_LABEL_FMT)
_QUALIFIED_NAME = re.compile(QUALIFIED_NAME_FMT)
_LABEL_VALUE = re.compile(LABEL_VALUE_FMT)
_ENV_VAR_NAME = re.compile(ENV_VAR_NAME_FMT)
_CONFIG_MAP_KEY = re.compile(CONFIG_MAP_KEY_FMT)
_PERCENT = re.compile(PERCENT_FMT)
_PORT_NAME_CHARSET = re.compile("[-a-z0-9]+")
_SYSCTL = re.compile(SYSCTL_FMT)
_INTEGER = re.compile(r"[+-]?[0-9]+")

DNS1123_LABEL_MAX = 63
DNS1123_SUBDOMAIN_MAX = 253


def schema_pattern(fmt: str) -> str:
    """A format as an anchored JSON-schema pattern (profile.schema.json; JSON Schema and pydantic-core anchor
    `$` at the end of the text, as Go does)."""
    return f"^{fmt}$"


# The relaxed env var name grammar as a pattern: printable ASCII (0x20-0x7e) except '=' (0x3d). For the JSON
# schema (editors) only: apimachinery states the rule as a loop, and its message (is_env_var_name) names no regex.
RELAXED_ENV_VAR_NAME_FMT = "[ -<>-~]+"


def ok(errors: list[str]) -> bool:
    """True when an `is_*` function found nothing."""
    return not errors


def is_dns1123_label(value: str) -> list[str]:
    """IsDNS1123Label: namespaces, container, volume and Service port names."""
    errs: list[str] = []
    if len(value) > DNS1123_LABEL_MAX:
        errs.append(max_len_error(DNS1123_LABEL_MAX))
    if not _DNS1123_LABEL.fullmatch(value):
        if _DNS1123_SUBDOMAIN.fullmatch(value):
            errs.append("must not contain dots")
        else:
            errs.append(regex_error(
                "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must "
                "start and end with an alphanumeric character", DNS1123_LABEL_FMT, "my-name", "123-abc"))
    return errs


def is_dns1123_subdomain(value: str) -> list[str]:
    """IsDNS1123Subdomain: most object names (ConfigMap, Secret, DaemonSet, PriorityClass ...)."""
    errs: list[str] = []
    if len(value) > DNS1123_SUBDOMAIN_MAX:
        errs.append(max_len_error(DNS1123_SUBDOMAIN_MAX))
    if not _DNS1123_SUBDOMAIN.fullmatch(value):
        errs.append(regex_error(
            "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and "
            "must start and end with an alphanumeric character", DNS1123_SUBDOMAIN_FMT, "example.com"))
    return errs


def is_dns1035_label(value: str) -> list[str]:
    """IsDNS1035Label: Service names."""
    errs: list[str] = []
    if len(value) > DNS1123_LABEL_MAX:
        errs.append(max_len_error(DNS1123_LABEL_MAX))
    if not _DNS1035_LABEL.fullmatch(value):
        errs.append(regex_error(
            "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an "
            "alphabetic character, and end with an alphanumeric character", DNS1035_LABEL_FMT, "my-name", "abc-123"))
    return errs


def is_path_segment_name(value: str) -> list[str]:
    """path.IsValidPathSegmentName (RBAC object names)."""
    for illegal in (".", ".."):
        if value == illegal:
            return [f"may not be '{illegal}'"]
    return [f"may not contain '{c}'" for c in ("/", "%") if c in value]


_QUALIFIED_NAME_ERR = (
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"
)


def is_qualified_name(value: str) -> list[str]:
    """IsQualifiedName (the newest wording, content.IsLabelKey): label and annotation keys, resource names."""
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
        return ["a valid label key "
                + regex_error(_QUALIFIED_NAME_ERR, QUALIFIED_NAME_FMT, "MyName", "my.name", "123-abc")
                + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"]
    if not name:
        errs.append("name part must be non-empty")
    elif len(name) > 63:
        errs.append("name part " + max_len_error(63))
    if not _QUALIFIED_NAME.fullmatch(name):
        errs.append("name part " + regex_error(_QUALIFIED_NAME_ERR, QUALIFIED_NAME_FMT, "MyName", "my.name", "123-abc"))
    return errs


def is_valid_label_value(value: str) -> list[str]:
    """IsValidLabelValue: at most 63 characters, empty allowed."""
    errs: list[str] = []
    if len(value) > 63:
        errs.append(max_len_error(63))
    if not _LABEL_VALUE.fullmatch(value):
        errs.append(regex_error(
            "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and "
            "must start and end with an alphanumeric character", LABEL_VALUE_FMT, "MyValue", "my_value", "12345"))
    return errs


def is_valid_port_num(port: int) -> list[str]:
    return [] if 1 <= port <= 65535 else [inclusive_range_error(1, 65535)]


def is_valid_port_name(port: str) -> list[str]:
    """IsValidPortName (IANA_SVC_NAME): container port names, named probe and Service target ports."""
    errs: list[str] = []
    if len(port) > 15:
        errs.append(max_len_error(15))
    if not _PORT_NAME_CHARSET.fullmatch(port):
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


# The API server's RelaxedEnvironmentVariableValidation gate is on by default from this version on
# (pkg/features kube_features.go: beta, default true); older servers apply the C-identifier-like grammar.
RELAXED_ENV_VAR_NAMES_FROM = (1, 33)
NEWEST = (1, 35)    # the newest Kubernetes minor whose rules this module states


def kube_minor(version: str | tuple[int, int] | None) -> tuple[int, int]:
    """(major, minor) of "1.31", "v1.31.4" or (1, 31); None: the newest version known here."""
    if version is None:
        return NEWEST
    if isinstance(version, tuple):
        return version
    m = re.fullmatch(r"v?(\d+)\.(\d+)(?:\.\d+)?(?:[-+].*)?", version.strip())
    return (int(m.group(1)), int(m.group(2))) if m else NEWEST


def is_env_var_name(value: str, kube: str | tuple[int, int] | None = None) -> list[str]:
    """The env var name rule of the API server of Kubernetes `kube` (default: the newest): IsRelaxedEnvVarName
    (any printable ASCII but '=') from 1.33 on, IsEnvVarName before; apimachinery's messages verbatim
    (tests/test_kube_validation.py holds them to kubeval, Kubernetes v1.35.4's ValidateEnv)."""
    if kube_minor(kube) >= RELAXED_ENV_VAR_NAMES_FROM:
        errs = []
        if not value:
            errs.append("environment variable name must be non-empty")
        if any(not " " <= c <= "~" or c == "=" for c in value):
            errs.append("a valid environment variable name must consist only of printable ASCII characters "
                        "other than '='")
        return errs
    errs = []
    if not _ENV_VAR_NAME.fullmatch(value):
        errs.append(regex_error(
            "a valid environment variable name must consist of alphabetic characters, digits, '_', '-', or '.', "
            "and must not start with a digit", ENV_VAR_NAME_FMT, "my.env-name", "MY_ENV.NAME", "MyEnvName1"))
    return errs + _has_chdir_prefix(value)


def is_config_map_key(value: str) -> list[str]:
    """IsConfigMapKey: ConfigMap and Secret data keys, key selectors, projected items."""
    errs: list[str] = []
    if len(value) > 253:
        errs.append(max_len_error(253))
    if not _CONFIG_MAP_KEY.fullmatch(value):
        errs.append(regex_error("a valid config key must consist of alphanumeric characters, '-', '_' or '.'",
                                CONFIG_MAP_KEY_FMT, "key.name", "KEY_NAME", "key-name"))
    return errs + _has_chdir_prefix(value)


def is_valid_percent(value: str) -> list[str]:
    if _PERCENT.fullmatch(value):
        return []
    return [regex_error("a valid percent string must be a numeric string followed by an ending '%'",
                        PERCENT_FMT, "1%", "93%")]


def is_sysctl_name(value: str) -> list[str]:
    """validateSysctls' name rule (IsValidSysctlName): at most 253 characters of the sysctl grammar."""
    if len(value) <= SYSCTL_MAX_LENGTH and _SYSCTL.fullmatch(value):
        return []
    return [f"must have at most {SYSCTL_MAX_LENGTH} characters and match regex ^{SYSCTL_FMT}$"]


# component-helpers node/util/sysctl namespace.go: the sysctls a pod's network or IPC namespace holds.
_IPC_SYSCTL_PREFIXES = ("kernel.shm", "kernel.msg", "fs.mqueue.")


def sysctl_namespace(name: str) -> str | None:
    """"net", "ipc" or None (GetNamespace; '/' separators read as '.')."""
    name = name.replace("/", ".")
    if name.startswith("net."):
        return "net"
    if name == "kernel.sem" or name.startswith(_IPC_SYSCTL_PREFIXES):
        return "ipc"
    return None


def is_integer_string(value: str) -> bool:
    """strconv.ParseInt would accept it (Gt/Lt node selector values)."""
    return _INTEGER.fullmatch(value) is not None


# The fields an env var's fieldRef may name (validation.go validEnvDownwardAPIFieldPathExpressions) and
# the ones the v1 conversion knows at all (pkg/apis/core/v1 conversion.go ConvertDownwardAPIFieldLabel).
ENV_FIELD_PATHS = ("metadata.name", "metadata.namespace", "metadata.uid", "spec.nodeName",
                   "spec.serviceAccountName", "status.hostIP", "status.hostIPs", "status.podIP", "status.podIPs")
CONVERTIBLE_FIELD_PATHS = frozenset(ENV_FIELD_PATHS) | {
    "metadata.annotations", "metadata.labels", "spec.restartPolicy", "spec.schedulerName", "status.phase"}
ENV_RESOURCE_FIELDS = ("limits.cpu", "limits.ephemeral-storage", "limits.memory", "requests.cpu",
                       "requests.ephemeral-storage", "requests.memory")
_SUBSCRIPT = re.compile(r"(metadata\.(?:labels|annotations))\['(.*)'\]", re.S)


def env_field_path_problems(path: str, api_version: str = "v1") -> list[tuple[str, str]]:
    """(sub-path, message) for an env var's fieldRef (validateObjectFieldSelector with the env paths); the
    sub-path is "fieldPath" or "" (the selector itself, where upstream reports a bad subscript key)."""
    if api_version != "v1":
        return [("fieldPath", invalid(path, f"error converting fieldPath: unsupported pod version: {api_version}"))]
    m = _SUBSCRIPT.fullmatch(path)
    if m:
        subscript = m.group(2)
        errs = is_qualified_name(subscript.lower() if m.group(1).endswith("annotations") else subscript)
        return [("", invalid(subscript, e)) for e in errs]
    if path not in CONVERTIBLE_FIELD_PATHS:
        return [("fieldPath", invalid(path, f"error converting fieldPath: field label not supported: {path}"))]
    if path not in ENV_FIELD_PATHS:
        return [("fieldPath", not_supported(path, ENV_FIELD_PATHS))]
    return []
