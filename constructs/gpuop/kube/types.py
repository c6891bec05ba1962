"""Kubernetes-shaped value types and the API server's syntax rules for them, shared by the stages:
DNS-1123 labels, label keys and values (k8s.io/apimachinery pkg/util/validation: IsDNS1123Label,
IsQualifiedName, IsValidLabelValue), tolerations (core/v1 Toleration) and resource quantities
(k8s.io/apimachinery pkg/api/resource, the subset gpuop accepts).

The profile models (profile/models.py) use them for input; the chart's values contract
(outputs/values.py) uses the same types, so what a profile accepts and what Helm accepts agree.
"""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field


class Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
LABEL_KEY = re.compile(r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
                       r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
LABEL_VALUE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$")


def dns_label(max_len: int):
    def check(v: str) -> str:
        if len(v) > max_len or not DNS_LABEL.match(v):
            raise ValueError(f"{v!r} is not a DNS-1123 label: lowercase letters, digits and '-', "
                             f"starting and ending with a letter or digit, at most {max_len} characters")
        return v
    return check


def labels(v: dict[str, str]) -> dict[str, str]:
    for key, value in v.items():
        prefix, _, name = key.rpartition("/")
        if not LABEL_KEY.match(key) or len(name) > 63 or len(prefix) > 253:
            raise ValueError(f"{key!r} is not a valid label key (optional DNS prefix '/', then a name of "
                             "at most 63 characters: letters, digits, '-', '_', '.')")
        if len(value) > 63 or not LABEL_VALUE.match(value):
            raise ValueError(f"label {key!r}: value {value!r} is not a valid label value (at most 63 "
                             "characters: letters, digits, '-', '_', '.', starting and ending alphanumeric)")
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


Quantity = Annotated[str, Field(pattern=r"^[0-9]+(\.[0-9]+)?(m|k|Ki|M|Mi|G|Gi|T|Ti)?$")]


class ResourceList(Model):
    cpu: Quantity | None = Field(None, description="CPU quantity, e.g. 200m. Omitted: not set.")
    memory: Quantity | None = Field(None, description="Memory quantity, e.g. 256Mi. Omitted: not set.")


class Resources(Model):
    requests: ResourceList | None = Field(None, description="Omitted: no requests.")
    limits: ResourceList | None = Field(None, description="Omitted: no limits.")
