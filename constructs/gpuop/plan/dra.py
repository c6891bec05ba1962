"""The DRA plan: what a cluster's DRA pools need, decided once from the typed profile and the catalogs.

`build(spec, cat) -> DraPlan | None` (called by build.py; None when no pool uses `allocation: dra`):
- the DRA driver's delivery: its upstream chart (DRA catalog: chart, OCI repository, version) and the
  values gpuop pins: `resourceApiVersion` (resource.k8s.io/v1, so the output does not depend on what the
  Helm client's capabilities say), `gpuResourcesEnabledOverride: true` (the chart refuses to render
  without it, because it cannot know that the device plugin is kept off its nodes; gpuop does that with
  the node labels of plan/pools.py), the feature gates the profile sets (omitted ones: the driver's
  defaults), ComputeDomains on/off, `nvidiaDriverRoot` (/run/nvidia/driver where gpuop's driver DaemonSet
  installs the driver, / where the host has it), and the kubelet plugin restricted to
  `nvidia.com/gpu.deploy.dra-driver=true` nodes (the GPU Operator's own selector, FACTS §7) and to
  `nvidia.com/gpu.deploy.client=true` ones (NVIDIA's GPU client contract: the MIG manager and the driver
  manager pause that label, so the plugin is stopped for a MIG change or a driver reload and restarted
  after it), with the stack's tolerations and priority class.
- gpuop's DeviceClasses, one per DRA pool x device: the whole GPU (pools without a static MIG layout) and
  each MIG profile of the pool's layout (under DynamicMIG: every profile of the GPU's MIG family, since
  the driver creates them on demand). Names `<pool>.<device>.gpuop` never collide with the chart's
  (`gpu.nvidia.com`, `mig.nvidia.com`, ...). The CEL selector names the driver, the device type, the MIG
  profile and the pool's GPU model by its NVML `productName` (DRA catalog `products`); a GPU without a
  known product name is selected by driver/type/profile only (validate/dra.py warns). Pool sharing
  becomes the driver's opaque config on the class (GpuConfig / MigDeviceConfig); time-slicing is not put on
  MIG classes (the driver accepts it there but it has no effect, FACTS §6). `extendedResourceName`
  (nvidia.com/gpu, nvidia.com/mig-<profile>) only with `spec.dra.extendedResources`.
- the ResourceClaimTemplates of `spec.claimTemplates`, in their namespaces, each request on the pool's
  class; under DynamicMIG the MIG requests of one claim share `matchAttribute: gpu.nvidia.com/parentUUID`,
  because validate/dra.py proves that combination fits one GPU, not several.
- capacity: per DeviceClass the devices one GPU and one node offer, and the cluster total with `nodes:`.

Upstream differences on purpose: the chart's own DeviceClasses stay (the chart always renders them);
gpuop's classes are the pool-aware ones tenants should use. Sources: ../shared/refs/dra/FACTS.md.
"""

from __future__ import annotations

import json
import re

from gpuop.catalog import dra as dra_catalog
from gpuop.catalog import instances as instance_catalog
from gpuop.mig import geometry
from gpuop.plan import defaults as defaulting
from gpuop.plan.defaults import Defaults, PoolDefaults
from gpuop.plan.model import ClaimRequest, ClaimTemplatePlan, DeviceClassPlan, DraPlan

NAMESPACE = "dra-driver-nvidia-gpu"        # the upstream docs' namespace (docs/install.md); not "default" (chart refuses)
RELEASE = "dra-driver-nvidia-gpu"
WHOLE_GPU = "gpu"
PARENT_UUID = "gpu.nvidia.com/parentUUID"


def is_dra(pool) -> bool:
    return getattr(pool, "allocation", "devicePlugin") == "dra"


def dynamic_mig(spec) -> bool:
    return bool(spec.dra and spec.dra.featureGates.get(
        "DynamicMIG", dra_catalog.load().featureGates["DynamicMIG"].default))


def device_class_name(pool: str, device: str) -> str:
    """`infer` x `3g.40gb` -> `infer.3g.40gb.gpuop` ('+' of a profile written '-': DNS subdomains have none)."""
    return f"{pool}.{device.replace('+', '-')}.gpuop"


def request_name(device: str, taken: set[str]) -> str:
    """A claim request name (DNS label): `gpu`, `mig-3g-40gb`; `-2`, `-3` ... when repeated."""
    base = WHOLE_GPU if device == WHOLE_GPU else "mig-" + re.sub(r"[^a-z0-9]+", "-", device.lower()).strip("-")
    name, n = base, 1
    while name in taken:
        n += 1
        name = f"{base}-{n}"
    taken.add(name)
    return name


def selector(driver: str, device_type: str, profile: str | None, product: str | None) -> str:
    """The CEL expression of one DeviceClass (the chart's form, FACTS §1, plus profile and product)."""
    attr = f"device.attributes['{driver}']"
    parts = [f"device.driver == '{driver}'", f"{attr}.type == '{device_type}'"]
    if profile is not None:
        parts.append(f"{attr}.profile == '{profile}'")
    if product is not None:
        parts.append(f"{attr}.productName == '{product}'")
    return " && ".join(parts)


def pool_devices(pool, dynamic: bool) -> dict[str, int]:
    """The devices one GPU of a DRA pool offers: {device: count}. Static MIG: the layout (a GPU in MIG
    mode is not offered whole, FACTS §5); DynamicMIG: each profile of the GPU at its max count; else the GPU."""
    layout = defaulting.layout_of(pool)
    if dynamic:
        family = geometry.family_of(pool.gpu)
        if family is not None and not layout:
            return {WHOLE_GPU: 1, **{p.name: p.max for p in family.profiles}}
    return layout or {WHOLE_GPU: 1}


def _opaque(cat, pool, device: str) -> dict | None:
    s = pool.sharing
    if s is None:
        return None
    oc = cat.opaqueConfig
    if s.mps is not None:
        kind = oc.gpu if device == WHOLE_GPU else oc.mig
        return {"apiVersion": oc.apiVersion, "kind": kind, "sharing": {"strategy": "MPS"}}
    if s.timeSlicing is not None and device == WHOLE_GPU:    # no effect on MIG devices (FACTS §6)
        return {"apiVersion": oc.apiVersion, "kind": oc.gpu,
                "sharing": {"strategy": "TimeSlicing", "timeSlicingConfig": {"interval": "Default"}}}
    return None


def _extended(device: str) -> str:
    return "nvidia.com/gpu" if device == WHOLE_GPU else "nvidia.com/mig-" + device.replace("+", ".")


def _canonical(obj) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"))


def gpus_per_node(pool) -> int | None:
    """The profile's gpusPerNode, else the well-known instance type's (as plan/capacity.py), else None."""
    if pool.gpusPerNode is not None:
        return pool.gpusPerNode
    cat = instance_catalog.load()
    known = cat.types.get(dict(pool.nodeSelector).get(cat.label, ""))
    return known.gpus if known is not None and known.gpu == pool.gpu else None


def node_range(pool) -> tuple[int, int] | None:
    """`nodes: N` -> (N, N); `{min, max}` -> (min, max); omitted -> None."""
    n = pool.nodes
    return None if n is None else (n, n) if isinstance(n, int) else (n.min, n.max)


def driver_root(pool: PoolDefaults) -> str:
    """Where the DRA driver finds the GPU driver on a pool's nodes: gpuop's driver container or the host."""
    roots = dra_catalog.load().driverRoot
    return roots.gpuop if pool.driver else roots.host


def build(spec, defaults: Defaults | None = None, *, tolerations=(),
          priority_class: str = "system-node-critical") -> DraPlan | None:
    defaults = defaults or defaulting.of(spec)
    resolved = {d.name: d for d in defaults.pools}
    pools = [p for p in spec.nodePools if is_dra(p)]
    if not pools or spec.dra is None:
        return None
    cat = dra_catalog.load()
    version = cat.version(spec.dra.version) or cat.version(None)
    dynamic = dynamic_mig(spec)
    classes: list[DeviceClassPlan] = []
    by_pool: dict[str, dict[str, DeviceClassPlan]] = {}
    for pool in pools:
        product = cat.products.get(pool.gpu)
        for device, per_gpu in sorted(pool_devices(pool, dynamic).items(),
                                      key=lambda kv: (kv[0] != WHOLE_GPU, kv[0])):
            mig = device != WHOLE_GPU
            config = _opaque(cat, pool, device)
            gpus, nodes = gpus_per_node(pool), node_range(pool)
            per_node = per_gpu * gpus if gpus else None
            c = DeviceClassPlan(
                name=device_class_name(pool.name, device), pool=pool.name, device=device,
                expression=selector(cat.driver, "mig" if mig else "gpu", device if mig else None,
                                    product.productName if product else None),
                config_json=_canonical(config) if config else "",
                extended_resource=_extended(device) if spec.dra.extendedResources else "",
                per_gpu=per_gpu, per_node=per_node,
                total=(per_node * nodes[0], per_node * nodes[1]) if per_node is not None and nodes else None)
            classes.append(c)
            by_pool.setdefault(pool.name, {})[device] = c
    templates = []
    for t in spec.claimTemplates:
        offered = by_pool.get(t.pool, {})
        taken: set[str] = set()
        requests = tuple(ClaimRequest(request_name(d.profile, taken), offered[d.profile].name, d.count,
                                      d.profile != WHOLE_GPU)
                         for d in t.devices if d.profile in offered)
        templates.append(ClaimTemplatePlan(t.name, t.namespace, t.pool, requests,
                                           same_gpu=dynamic and sum(r.count for r in requests if r.mig) > 1))
    roots = sorted({driver_root(resolved[p.name]) for p in pools})
    values = {
        "gpuResourcesEnabledOverride": True,
        "resourceApiVersion": cat.apiVersion,
        "nvidiaDriverRoot": roots[0],
        "featureGates": dict(sorted(spec.dra.featureGates.items())),
        "resources": {"gpus": {"enabled": True},
                      "computeDomains": {"enabled": spec.dra.computeDomains.enabled}},
        # the client label: the MIG manager and the driver manager stop the plugin before a MIG change or a
        # driver reload and start it again afterwards (it holds GPU handles; dra.yaml clientLabel)
        "kubeletPlugin": {"nodeSelector": {cat.clientLabel: "true", cat.deployLabel: "true"},
                          "priorityClassName": priority_class,
                          "tolerations": [dict(t) for t in tolerations]},
    }
    # a registry mirror serves the DRA driver's image and chart too, as it does NFD's: an air-gapped
    # cluster reaches nothing else
    mirror = spec.images.registry
    image = f"{mirror or version.image.registry}/{version.image.path}"
    # the tag pinned, not left to the chart's appVersion: what images.txt and the digest lock list is what runs
    values["image"] = {"repository": image, "tag": version.image.tag}
    if spec.images.pullSecrets:
        values["imagePullSecrets"] = [{"name": s} for s in spec.images.pullSecrets]
    return DraPlan(version=version.version, chart=version.chart,
                   repository=f"oci://{mirror}" if mirror else version.repository,
                   chart_version=version.chartVersion, namespace=NAMESPACE, release_name=RELEASE,
                   api_version=cat.apiVersion, driver=cat.driver, pools=tuple(p.name for p in pools),
                   dynamic_mig=dynamic, device_classes=tuple(classes), claim_templates=tuple(templates),
                   values_json=_canonical(values), image_ref=f"{image}:{version.image.tag}")
