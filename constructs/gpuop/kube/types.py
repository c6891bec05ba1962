"""Kubernetes-shaped value types and the API server's syntax rules for them, shared by the stages:
DNS-1123 labels and subdomains, label keys and values (k8s.io/apimachinery pkg/util/validation:
IsDNS1123Label, IsDNS1123Subdomain, IsQualifiedName, IsValidLabelValue), tolerations (core/v1
Toleration; the combination rules of k8s.io/kubernetes pkg/apis/core/validation ValidateTolerations),
resource quantities (k8s.io/apimachinery pkg/api/resource, the subset gpuop accepts) and integer ranges
(the Go types of the API fields: int32 for ports, replicas and most seconds, int64 for tolerationSeconds).

The syntax itself is gpuop/kube/validation.py's and gpuop/kube/quantity.py's (the one kernel every stage
uses); this module turns it into pydantic types and profile-facing messages. On purpose stricter than
upstream: a quantity must fit int64 in milli-units (the API server accepts larger ones, and the kubelet
then overflows).

The profile models (profile/models.py) use them for input; the chart's values contract
(outputs/values.py) uses the same types, so what a profile accepts and what Helm accepts agree.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from gpuop.kube import quantity
from gpuop.kube import validation as kv


class Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


# The PriorityClasses every API server creates (k8s.io/kubernetes pkg/apis/scheduling SystemPriorityClasses); any
# other name must exist in the cluster (the Priority admission plugin refuses a pod naming one that does not).
SYSTEM_PRIORITY_CLASSES = ("system-node-critical", "system-cluster-critical")
INT32_MAX = 2**31 - 1    # Go int32: replicas, ports, most *Seconds fields, maxUnavailable as a number
INT64_MAX = quantity.INT64_MAX    # Go int64: tolerationSeconds


def is_dns_label(v: str, max_len: int = 63) -> bool:
    """IsDNS1123Label (at most 63; callers may pass a smaller limit the name has to leave room under)."""
    return len(v) <= max_len and not kv.is_dns1123_label(v)


def is_dns_subdomain(v: str) -> bool:
    """IsDNS1123Subdomain: at most 253 characters. Secret, PriorityClass and most object names."""
    return not kv.is_dns1123_subdomain(v)


def is_label_value(v: str) -> bool:
    """IsValidLabelValue: at most 63 characters, empty allowed."""
    return not kv.is_valid_label_value(v)


def label_key_problem(key: str) -> str | None:
    """IsQualifiedName: an optional DNS-subdomain prefix (<= 253) and '/', then a name (<= 63)."""
    if kv.is_qualified_name(key):
        return (f"{key!r} is not a valid label key (optional DNS prefix '/', then a name of "
                "at most 63 characters: letters, digits, '-', '_', '.')")
    return None


LABEL_VALUE_RULE = "at most 63 characters: letters, digits, '-', '_', '.', starting and ending alphanumeric"
DNS_SUBDOMAIN_RULE = ("lowercase letters, digits, '-' and '.', starting and ending with a letter or digit, "
                      "at most 253 characters")


def dns_label(max_len: int):
    def check(v: str) -> str:
        if not is_dns_label(v, max_len):
            raise ValueError(f"{v!r} is not a DNS-1123 label: lowercase letters, digits and '-', "
                             f"starting and ending with a letter or digit, at most {max_len} characters")
        return v
    return check


def dns_subdomain(v: str) -> str:
    if not is_dns_subdomain(v):
        raise ValueError(f"{v!r} is not a DNS-1123 subdomain: {DNS_SUBDOMAIN_RULE}")
    return v


def labels(v: dict[str, str]) -> dict[str, str]:
    for key, value in v.items():
        problem = label_key_problem(key)
        if problem:
            raise ValueError(problem)
        if not is_label_value(value):
            raise ValueError(f"label {key!r}: value {value!r} is not a valid label value ({LABEL_VALUE_RULE})")
    return v


def label_key(k: str) -> str:
    labels({k: ""})
    return k


class Toleration(Model):
    key: str | None = Field(None, description="Taint key; omitted with operator Exists matches every taint.")
    operator: Literal["Exists", "Equal"] = Field("Equal", description="Omitted: Equal.")
    value: str | None = Field(None, description="Taint value for operator Equal. Omitted: empty.")
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] | None = Field(
        None, description="Omitted: matches every effect.")
    tolerationSeconds: int | None = Field(None, ge=0, description="Only with NoExecute. Omitted: forever.")


def _taint_value(v: str) -> str:
    if not is_label_value(v):
        raise ValueError(f"{v!r} is not a valid taint value ({LABEL_VALUE_RULE})")
    return v


class Taint(Model):
    key: Annotated[str, AfterValidator(label_key)] = Field(description="Taint key (a qualified name). Required.")
    value: Annotated[str, AfterValidator(_taint_value)] | None = Field(None, description="Omitted: empty.")
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] = Field(description="Required.")


def tolerates(t: Toleration, taint: Taint) -> bool:
    """Whether the toleration tolerates the taint (k8s.io/api core/v1 Toleration.ToleratesTaint): the effects
    agree (an empty toleration effect matches every effect), the keys agree (an empty key with Exists matches
    every key), and Exists ignores the value while Equal compares it."""
    if t.effect is not None and t.effect != taint.effect:
        return False
    if t.key and t.key != taint.key:
        return False
    if t.operator == "Exists":
        return True
    return (t.value or "") == (taint.value or "")


def toleration_problems(t: Toleration) -> list[tuple[str, str]]:
    """(field, message) for each rule of ValidateTolerations (k8s.io/kubernetes pkg/apis/core/validation/
    validation.go) the toleration breaks; the pydantic model only knows each field alone."""
    out: list[tuple[str, str]] = []
    if t.key:
        problem = label_key_problem(t.key)
        if problem:
            out.append(("key", problem.replace("label key", "toleration key")))
    elif t.operator != "Exists":
        out.append(("operator", "an empty key matches every taint and needs operator Exists; set a key or "
                    "operator: Exists"))
    if t.operator == "Exists" and t.value:
        out.append(("value", "operator Exists takes no value; remove the value or use operator: Equal"))
    if t.operator == "Equal" and t.value is not None and not is_label_value(t.value):
        out.append(("value", f"{t.value!r} is not a valid taint value ({LABEL_VALUE_RULE})"))
    if t.tolerationSeconds is not None and t.tolerationSeconds > INT64_MAX:   # checked here, not as `le=`:
        # the chart's values.schema.json is generated from this model and stays as it was
        out.append(("tolerationSeconds", f"must be at most {INT64_MAX} (int64), got {t.tolerationSeconds}"))
    elif t.tolerationSeconds is not None and t.effect != "NoExecute":
        out.append(("tolerationSeconds", "only a NoExecute toleration has tolerationSeconds (how long the pod stays "
                    "after the taint appears); set effect: NoExecute or remove it"))
    return out


quantity_in_range = quantity.in_int64_milli


def _quantity(v: str) -> str:
    if not quantity_in_range(v):
        raise ValueError(f"{v!r} is beyond the largest quantity ({INT64_MAX} in thousandths of the unit)")
    return v


Quantity = Annotated[str, Field(pattern=quantity.SUBSET_PATTERN), AfterValidator(_quantity)]


class ResourceList(Model):
    cpu: Quantity | None = Field(None, description="CPU quantity, e.g. 200m. Omitted: not set.")
    memory: Quantity | None = Field(None, description="Memory quantity, e.g. 256Mi. Omitted: not set.")


class Resources(Model):
    requests: ResourceList | None = Field(None, description="Omitted: no requests.")
    limits: ResourceList | None = Field(None, description="Omitted: no limits.")
