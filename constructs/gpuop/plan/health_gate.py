"""The health gate plan: per pool, which checks run after the stack rolls (components/health_gate.py).

Each pool's settings are spec.healthGate with the pool's own healthGate fields over it (a field the pool sets
wins). Defaults: on; DCGM diagnostics level 1 where the standalone host engine runs (spec.dcgm.enabled), none
otherwise (dcgmi needs a host engine on the node; the exporter's embedded one serves no client); a CUDA sample
per resource the pool advertises (plan/capacity.py: nvidia.com/gpu, nvidia.com/mig-<profile>, shared replicas;
DRA pools and pools without the device plugin advertise none); no NCCL test. Each check covers the pool's `nodes`
(the min of an autoscaled pool: the nodes that are always there), one pod per node; 1 node when unknown.
validate/health_gate.py refuses what the plan cannot run (a level out of range, diagnostics without a host engine,
an NCCL test on a pool without whole GPUs to span).
"""

from __future__ import annotations

import dataclasses

from gpuop.plan.model import HealthGatePlan, Image, PoolGate, StackPlan

FIELDS = ("enabled", "dcgmDiagLevel", "cudaSample", "nccl", "ncclImage")


def effective(spec, pool) -> dict:
    """The pool's gate settings: the cluster's, the pool's fields over them, defaults for what neither sets."""
    out = {"enabled": True, "dcgmDiagLevel": 1 if spec.dcgm.enabled else 0, "cudaSample": True, "nccl": False,
           "ncclImage": None}
    for layer in (spec.healthGate, pool.healthGate):
        if layer is None:
            continue
        out.update({f: getattr(layer, f) for f in FIELDS if getattr(layer, f) is not None})
    return out


def _image(ref: str | None) -> Image | None:
    if not ref:
        return None
    path, _, tag = ref.rpartition(":")
    return Image(path, tag)


def build(spec, plan: StackPlan) -> HealthGatePlan | None:
    caps = {c.pool: c for c in plan.capacity.pools}
    pools = []
    for pool in spec.nodePools:
        g = effective(spec, pool)
        if not g["enabled"]:
            continue
        cap = caps[pool.name]
        samples = tuple(r for r, _ in cap.per_gpu) if g["cudaSample"] and plan.smoke_test is not None else ()
        nccl = (cap.gpus_per_node or 0) if g["nccl"] else 0
        level = g["dcgmDiagLevel"]
        if not (level or samples or nccl):
            continue                    # nothing to run on this pool
        pools.append(PoolGate(pool=pool.name, node_selector=tuple(sorted(pool.nodeSelector.items())),
                              tolerations=tuple((t.key, t.value or "", t.effect) for t in pool.taints),
                              nodes=max(1, cap.nodes[0]) if cap.nodes else 1, dcgm_level=level, samples=samples,
                              nccl_gpus=nccl, nccl_image=_image(g["ncclImage"]) if nccl else None))
    if not pools:
        return None
    return HealthGatePlan(pools=tuple(pools),
                          dcgm_image=plan.image("dcgm") if any(p.dcgm_level for p in pools) else None,
                          sample_image=plan.smoke_test if any(p.samples for p in pools) else None)


def pin(gate: HealthGatePlan | None, pin) -> HealthGatePlan | None:
    """The gate with its images pinned by the digest lock (`pin`: an Image -> the Image with its digest)."""
    if gate is None:
        return None
    return dataclasses.replace(gate, dcgm_image=pin(gate.dcgm_image), sample_image=pin(gate.sample_image),
                               pools=tuple(dataclasses.replace(p, nccl_image=pin(p.nccl_image)) for p in gate.pools))
