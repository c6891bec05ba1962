"""Capacity: the resources each node pool advertises, per GPU, per node and in total, from what the
profile says about the pool (GPU model, MIG layout and strategy, sharing, `gpusPerNode`, `nodes`).

What a GPU advertises (NVIDIA/k8s-device-plugin's resource naming; ../shared/refs/mig/FACTS.md §2):
- no MIG layout (or strategy none): `nvidia.com/gpu` = 1;
- MIG `single`: every instance is an `nvidia.com/gpu` (one profile kind per GPU), so the layout's count;
- MIG `mixed`: `nvidia.com/mig-<profile>` per profile (a `+` in a name is written `.`), its count;
- sharing multiplies: time-slicing `replicas` (every advertised resource, or the listed `resources`),
  MPS `replicas` on `nvidia.com/gpu`; with `renameByDefault` the shared resource is `<name>.shared`;
- a DRA pool (`allocation: dra`) advertises no extended resource: its devices (whole GPUs or MIG
  instances) are listed under `devices`, the DeviceClasses that select them are the DRA plan's.
- with the device plugin off nothing is advertised (the pool's GPUs are not schedulable resources).

Per node = per GPU x gpusPerNode (the profile's, or the well-known instance type's in
catalog/data/instances.yaml when the pool's nodeSelector names `node.kubernetes.io/instance-type`).
Totals = per node x nodes (`nodes: N`, or `{min, max}` for an autoscaled pool: both ends). Unknown
inputs stay unknown (None) rather than guessed.
"""

from __future__ import annotations

from gpuop.catalog import instances as instance_catalog
from gpuop.plan import defaults as defaulting
from gpuop.plan.model import ClusterCapacity, PoolCapacity


def _layout(pool) -> dict[str, int]:
    mig = pool.mig
    return dict(mig.layout) if mig is not None and mig.layout and mig.strategy != "none" else {}


def _advertised(pool) -> dict[str, int]:
    layout = _layout(pool)
    if not layout:
        return {"nvidia.com/gpu": 1}
    if pool.mig.strategy == "single":
        return {"nvidia.com/gpu": sum(layout.values())}
    return {"nvidia.com/mig-" + name.replace("+", "."): n for name, n in sorted(layout.items())}


def _shared(pool, advertised: dict[str, int]) -> dict[str, int]:
    s = pool.sharing
    if s is None:
        return advertised
    if s.mps is not None:
        name = "nvidia.com/gpu.shared" if s.mps.renameByDefault else "nvidia.com/gpu"
        return {name if k == "nvidia.com/gpu" else k: v * s.mps.replicas if k == "nvidia.com/gpu" else v
                for k, v in advertised.items()}
    ts = s.timeSlicing
    if ts is None:
        return advertised
    replicas = {k: ts.replicas for k in advertised} if ts.replicas else {}
    replicas.update({r.name: r.replicas for r in ts.resources})
    out = {}
    for k, v in advertised.items():
        r = replicas.get(k)
        out[(k + ".shared") if r and ts.renameByDefault else k] = v * r if r else v
    return out


def _gpus_per_node(pool, label: str, types) -> tuple[int | None, str]:
    if pool.gpusPerNode is not None:
        return pool.gpusPerNode, "profile"
    itype = dict(pool.nodeSelector).get(label)
    known = types.get(itype) if itype else None
    if known is not None and known.gpu == pool.gpu:
        return known.gpus, f"instance type {itype}"
    return None, ""


def _nodes(pool) -> tuple[int, int] | None:
    n = getattr(pool, "nodes", None)
    if n is None:
        return None
    if isinstance(n, int):
        return n, n
    return n.min, n.max


def plan_capacity(spec) -> ClusterCapacity:
    """Capacity of every pool of a validated profile spec (profile.models.ClusterSpec)."""
    cat = instance_catalog.load()
    pools = []
    for pool in spec.nodePools:
        gpus, source = _gpus_per_node(pool, cat.label, cat.types)
        allocation = getattr(pool, "allocation", "devicePlugin")
        note, per_gpu, devices = "", (), ()
        if allocation == "dra":
            layout = defaulting.layout_of(pool)
            devices = tuple(sorted(layout.items())) if layout else (("gpu", 1),)
            note = "DRA: devices are claimed through DeviceClasses, not advertised as extended resources"
        elif not spec.devicePlugin.enabled:
            note = "device plugin off: nothing is advertised"
        else:
            per_gpu = tuple(sorted(_shared(pool, _advertised(pool)).items()))
        pools.append(PoolCapacity(pool=pool.name, gpu=pool.gpu, allocation=allocation, per_gpu=per_gpu,
                                  devices_per_gpu=devices, gpus_per_node=gpus, gpus_source=source,
                                  nodes=_nodes(pool), note=note,
                                  node_selector=tuple(sorted(pool.nodeSelector.items()))))
    return ClusterCapacity(tuple(pools))
