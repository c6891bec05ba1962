"""The Helm chart's values contract: what a user may override at deploy time.

`ChartValues` generates each chart's values.schema.json (and schemas/values.schema.json); Helm
refuses values that break it at install, upgrade, lint and template time. The defaults of a given
chart come from its cluster plan (plan/build.py), so values.yaml differs per cluster but the schema
does not.

Each component the profile enables has a key (`driver`, `toolkit`, `devicePlugin`, `dcgm`,
`dcgmExporter`, `gfd`, `nodeStatusExporter`, `migManager`) with `enabled` and `resources`; a component the profile
leaves off has no key and no templates. The validator always runs, so its key has `resources` only.
Switching a component off here removes its objects at deploy time, and the validator's step that checks it
(plugin-validation follows `devicePlugin.enabled`; outputs/helm.py); other decisions components took at
compile time stay (docs/components.md). `global` is accepted (the chart can be a subchart) and ignored;
`createNamespace` decides whether the release owns its Namespace.
"""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from gpuop.kube.types import Resources, Toleration


class _Values(BaseModel):
    model_config = ConfigDict(extra="forbid")


class PullSecret(_Values):
    name: str = Field(min_length=1, description="Name of a Secret of type kubernetes.io/dockerconfigjson.")


class ComponentValues(_Values):
    enabled: bool = Field(True, description="False leaves every object of this component out of the release.")
    resources: Resources = Field(default_factory=Resources, description=(
        "Requests and limits for the component's containers; {} leaves them unset."))


class ValidatorValues(_Values):
    resources: Resources = Field(default_factory=Resources, description=(
        "Requests and limits for the validator's container; {} leaves them unset. The validator cannot be "
        "switched off: the other components wait for its checks."))


class ChartValues(_Values):
    imageRegistry: str = Field(min_length=1, pattern=r"^[a-z0-9.-]+(:[0-9]+)?(/[a-z0-9._-]+)*$", description=(
        "Registry (and path) every image is pulled from, e.g. a mirror of nvcr.io/nvidia."))
    imagePullPolicy: Literal["Always", "IfNotPresent", "Never"] = Field("IfNotPresent", description=(
        "Pull policy of every image."))
    imagePullSecrets: list[PullSecret] = Field(default_factory=list, description=(
        "Secrets (by name, in the release namespace) every GPU pod pulls its images with."))
    priorityClassName: str = Field("system-node-critical", description="Priority class of every GPU pod.")
    tolerations: list[Toleration] = Field(default_factory=list, description=(
        "Tolerations of every GPU DaemonSet (replace, not merge)."))
    driver: ComponentValues | None = None
    toolkit: ComponentValues | None = None
    devicePlugin: ComponentValues | None = None
    validator: ValidatorValues | None = None
    dcgm: ComponentValues | None = None
    dcgmExporter: ComponentValues | None = None
    gfd: ComponentValues | None = None
    nodeStatusExporter: ComponentValues | None = None
    migManager: ComponentValues | None = None
    createNamespace: bool = Field(False, description=(
        "Create the release namespace (with its pod-security labels) as part of the release. Omitted: false, "
        "for `helm install -n NS --create-namespace`; the Argo CD Application and Flux HelmRelease gpuop "
        "writes set true; the rendered manifests and overlay always include it."))
    smokeTestImage: str = Field("", description=(
        "Image of the `helm test` GPU smoke test. Empty: <imageRegistry>/k8s/cuda-sample:vectoradd-cuda12.5.0."))
    global_: dict[str, Any] = Field(default_factory=dict, alias="global", description=(
        "Values a parent chart shares with its subcharts (Helm's `global`); accepted so this chart can be a "
        "subchart, not read."))


@lru_cache(maxsize=1)
def _schema_json() -> str:
    schema = ChartValues.model_json_schema()
    schema["$schema"] = "http://json-schema.org/draft-07/schema#"
    return json.dumps(schema)


def values_schema() -> dict:
    """The JSON Schema of chart values (generated once per process)."""
    return json.loads(_schema_json())
