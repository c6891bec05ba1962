"""DRA objects gpuop owns: DeviceClasses (cluster scoped) and ResourceClaimTemplates (in tenant
namespaces), resource.k8s.io/v1 (Kubernetes >= 1.34).

The DRA driver itself (controller, kubelet plugin, its own DeviceClasses `gpu.nvidia.com`,
`mig.nvidia.com`, ...) comes from its upstream chart (outputs/dra.py); this construct adds the pool-aware
classes the driver leaves to the admin ("nothing is automated by the driver today"): one per pool x device,
whose CEL selector names the driver, the device type, the MIG profile and the GPU model, with the pool's
sharing as the driver's opaque config (class configs apply first, claim configs override them, FACTS §6)
and, where the cluster serves it, `extendedResourceName`. Built from its props alone; the names,
selectors and checks are decided in plan/dra.py and validate/dra.py.

Differences from upstream: none in the object shapes (the demo class `mig-1g-12gb.gpu.nvidia.com` of
demo/specs/extended-resources is the model); the names end in `.gpuop` so they never collide with the chart's.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from gpuop.components.base import Component
from gpuop.components.builders import meta
from gpuop.components.props import Props

API_VERSION = "resource.k8s.io/v1"
TENANT_NAMESPACE = "gpuop/tenant-namespace"   # verify/semantic.py: the namespace is the tenant's, not the stack's
LABELS = {"app.kubernetes.io/managed-by": "gpuop", "app.kubernetes.io/component": "dra"}


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class DeviceClassProps(_Frozen):
    name: str = Field(description="DeviceClass name (DNS subdomain). Required.")
    pool: str = Field(description="The node pool it serves (label gpuop/pool). Required.")
    expression: str = Field(description="CEL selector over the driver's ResourceSlice devices. Required.")
    driver: str = Field("gpu.nvidia.com", description="Driver of the opaque config. Omitted: gpu.nvidia.com.")
    config: dict | None = Field(None, description="Opaque driver parameters (GpuConfig / MigDeviceConfig). "
                                "Omitted: none (the driver's defaults: exclusive devices).")
    extended_resource: str = Field("", description="extendedResourceName. Omitted: none.")


class ClaimRequestProps(_Frozen):
    name: str = Field(description="Request name (DNS label). Required.")
    device_class: str = Field(description="DeviceClass name. Required.")
    count: int = Field(1, ge=1, description="Devices. Omitted: 1.")


class ClaimTemplateProps(_Frozen):
    name: str = Field(description="ResourceClaimTemplate name. Required.")
    namespace: str = Field(description="Tenant namespace. Required.")
    pool: str = Field(description="The node pool its devices come from (label gpuop/pool). Required.")
    requests: tuple[ClaimRequestProps, ...] = Field(description="One per device entry. Required.")
    same_gpu: tuple[str, ...] = Field((), description=(
        "Requests that must land on one physical GPU (matchAttribute gpu.nvidia.com/parentUUID). Omitted: none."))


class DraProps(Props):
    device_classes: tuple[DeviceClassProps, ...] = Field((), description="Omitted: none.")
    claim_templates: tuple[ClaimTemplateProps, ...] = Field((), description="Omitted: none.")


def device_class(c: DeviceClassProps) -> dict:
    spec: dict = {"selectors": [{"cel": {"expression": c.expression}}]}
    if c.config is not None:
        spec["config"] = [{"opaque": {"driver": c.driver, "parameters": c.config}}]
    if c.extended_resource:
        spec["extendedResourceName"] = c.extended_resource
    return {"apiVersion": API_VERSION, "kind": "DeviceClass",
            "metadata": meta(c.name, labels={**LABELS, "gpuop/pool": c.pool}), "spec": spec}


def claim_template(t: ClaimTemplateProps) -> dict:
    devices: dict = {"requests": [{"name": r.name, "exactly": {"deviceClassName": r.device_class,
                                                               "allocationMode": "ExactCount", "count": r.count}}
                                  for r in t.requests]}
    if t.same_gpu:
        devices["constraints"] = [{"requests": list(t.same_gpu), "matchAttribute": "gpu.nvidia.com/parentUUID"}]
    return {"apiVersion": API_VERSION, "kind": "ResourceClaimTemplate",
            "metadata": meta(t.name, t.namespace, {**LABELS, "gpuop/pool": t.pool},
                             {TENANT_NAMESPACE: "true"}),   # not gpuop's namespace: never created or pruned by it
            "spec": {"spec": {"devices": devices}}}


class DraObjects(Component):
    name = "dra"
    values_key = None
    props_type = DraProps

    @classmethod
    def render(cls, p: DraProps) -> list[dict]:
        return [device_class(c) for c in p.device_classes] + [claim_template(t) for t in p.claim_templates]
