"""The health gate plan: per pool, which checks run after the stack rolls (components/health_gate.py).

Each pool's settings are spec.healthGate with the pool's own healthGate fields over it (a field the pool sets
wins). Defaults: on; DCGM diagnostics level 1 where the standalone host engine runs (spec.dcgm.enabled), none
otherwise (dcgmi needs a host engine on the node; the exporter's embedded one serves no client); a CUDA sample
per resource the pool advertises (plan/capacity.py: nvidia.com/gpu, nvidia.com/mig-<profile>, shared replicas;
DRA pools and pools without the device plugin advertise none); no NCCL test. Each check covers the pool's `nodes`
(the min of an autoscaled pool: the nodes that are always there), one pod per node; 1 node when unknown. Each
check's deadline is twice the catalog's duration of it (catalog health-gate.yaml), for an image pull and a start.
validate/health_gate.py refuses what the plan cannot run (a level out of range, diagnostics without a host engine,
an NCCL test on a pool without whole GPUs to span).
"""

from __future__ import annotations

import dataclasses

from gpuop.catalog import health_gate as gate_catalog
from gpuop.plan.model import GateCheck, HealthGatePlan, Image, PoolGate, StackPlan

FIELDS = ("enabled", "dcgmDiagLevel", "cudaSample", "nccl", "ncclImage")
DCGM_SERVICE = "nvidia-dcgm"        # components/dcgm.py's Service (internalTrafficPolicy Local: the node's own engine)


def effective(spec, pool) -> dict:
    """The pool's gate settings: the cluster's, the pool's fields over them, defaults for what neither sets."""
    out = {"enabled": True, "dcgmDiagLevel": 1 if spec.dcgm.enabled else 0, "cudaSample": True, "nccl": False,
           "ncclImage": None}
    for layer in (spec.healthGate, pool.healthGate):
        if layer is None:
            continue
        out.update({f: getattr(layer, f) for f in FIELDS if getattr(layer, f) is not None})
    return out


def _image(ref: str) -> Image:
    path, _, tag = ref.rpartition(":")
    return Image(path, tag)


def _checks(g: dict, cap, plan: StackPlan) -> tuple[GateCheck, ...]:
    cat = gate_catalog.load()
    out = []
    if g["dcgmDiagLevel"]:
        level = g["dcgmDiagLevel"]
        out.append(GateCheck("dcgm", "dcgm", plan.image("dcgm"), (
            "dcgmi", "diag", "-r", str(level), "--host", f"{DCGM_SERVICE}:{cat.dcgmDiag.hostenginePort}"), (),
            2 * cat.dcgmDiag.levels[level].seconds))
    if g["cudaSample"] and plan.smoke_test is not None:
        for r, _ in cap.per_gpu:
            out.append(GateCheck("cuda", "cuda-" + r.removeprefix("nvidia.com/").replace(".", "-"), plan.smoke_test,
                                 tuple(cat.cudaSample.command), ((r, 1),), 2 * cat.cudaSample.seconds))
    if g["nccl"] and cap.gpus_per_node:
        n = cap.gpus_per_node
        out.append(GateCheck("nccl", "nccl", _image(g["ncclImage"]), (*cat.nccl.command, "-g", str(n)),
                             (("nvidia.com/gpu", n),), 2 * cat.nccl.seconds))
    return tuple(out)


def build(spec, plan: StackPlan) -> HealthGatePlan | None:
    caps = {c.pool: c for c in plan.capacity.pools}
    pools = []
    for pool in spec.nodePools:
        g = effective(spec, pool)
        if not g["enabled"]:
            continue
        cap = caps[pool.name]
        checks = _checks(g, cap, plan)
        if not checks:
            continue                    # nothing to run on this pool
        pools.append(PoolGate(pool=pool.name, node_selector=tuple(sorted(pool.nodeSelector.items())),
                              tolerations=tuple((t.key, t.value or "", t.effect) for t in pool.taints),
                              nodes=max(1, cap.nodes[0]) if cap.nodes else 1, checks=checks))
    return HealthGatePlan(pools=tuple(pools)) if pools else None


def pin(gate: HealthGatePlan | None, pin) -> HealthGatePlan | None:
    """The gate with its images pinned by the digest lock (`pin`: an Image -> the Image with its digest)."""
    if gate is None:
        return None
    return dataclasses.replace(gate, pools=tuple(
        dataclasses.replace(p, checks=tuple(dataclasses.replace(c, image=pin(c.image)) for c in p.checks))
        for p in gate.pools))
