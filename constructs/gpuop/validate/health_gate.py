"""The health gate (spec.healthGate, spec.nodePools[].healthGate): what its checks could not run.

Refuses, located at the field that asks for it (a pool's own, else the cluster's): a DCGM diagnostics level DCGM
does not have (dcgmi diag -r 1..4; 0: none); DCGM diagnostics without the standalone host engine (spec.dcgm.enabled
false: dcgmi needs an nv-hostengine on the node, and the exporter's embedded one serves no client); an NCCL test on a
pool that has no whole GPUs to span (fewer than 2 GPUs per node, GPUs per node unknown, MIG, sharing, DRA) or
without its image.
"""

from __future__ import annotations

from gpuop.catalog import health_gate as gate_catalog
from gpuop.plan.capacity import plan_capacity
from gpuop.plan.health_gate import effective
from gpuop.validate.rules import Context, Found, rule


def _layers(spec):
    """(field path, HealthGate) of each place a gate is set: the cluster's, then each pool's."""
    yield ("spec", "healthGate"), spec.healthGate
    for i, p in enumerate(spec.nodePools):
        if p.healthGate is not None:
            yield ("spec", "nodePools", i, "healthGate"), p.healthGate


def _where(spec, i: int, field: str) -> tuple:
    """The path of the field that gives pool i its value: the pool's own, else the cluster's."""
    own = spec.nodePools[i].healthGate
    if own is not None and getattr(own, field) is not None:
        return ("spec", "nodePools", i, "healthGate", field)
    return ("spec", "healthGate", field)


@rule("health-gate-dcgm-level", source="NVIDIA DCGM User Guide, Diagnostics: Run Levels (dcgmi diag -r 1..4); "
      "catalog health-gate.yaml")
def check_dcgm_level(ctx: Context) -> list:
    """A DCGM diagnostics level is 0 (none) or one of DCGM's run levels."""
    out = Found(ctx)
    levels = sorted(gate_catalog.load().dcgmDiag.levels)
    for path, g in _layers(ctx.spec):
        if g.dcgmDiagLevel is not None and g.dcgmDiagLevel != 0 and g.dcgmDiagLevel not in levels:
            shown = ", ".join(f'"{n}"' for n in [0, *levels])
            out.error((*path, "dcgmDiagLevel"), f"Unsupported value: {g.dcgmDiagLevel}: supported values: {shown}")
    return out


@rule("health-gate-dcgm-host-engine", source="NVIDIA DCGM User Guide, Getting Started (dcgmi connects to an "
      "nv-hostengine, --host); components/dcgm.py (the standalone host engine, spec.dcgm.enabled)")
def check_dcgm_host_engine(ctx: Context) -> list:
    """DCGM diagnostics need the standalone host engine on the nodes."""
    out = Found(ctx)
    if ctx.spec.dcgm.enabled:
        return out
    levels = gate_catalog.load().dcgmDiag.levels
    for path, g in _layers(ctx.spec):
        if g.dcgmDiagLevel in levels:         # a level DCGM lacks is health-gate-dcgm-level's
            out.error((*path, "dcgmDiagLevel"), (
                f"Invalid value: {g.dcgmDiagLevel}: DCGM diagnostics run against the node's standalone DCGM host "
                "engine, and spec.dcgm.enabled is false (the exporter's embedded engine serves no dcgmi); set "
                "spec.dcgm.enabled: true or dcgmDiagLevel: 0"))
    return out


@rule("health-gate-nccl", source="NVIDIA/nccl-tests README (all_reduce_perf -g <GPUs>: one process over a node's "
      "whole GPUs); gpuop's capacity (plan/capacity.py)")
def check_nccl(ctx: Context) -> list:
    """An NCCL test runs across 2 or more whole GPUs of a node, from an image the profile names."""
    out = Found(ctx)
    spec = ctx.spec
    caps = None
    for i, p in enumerate(spec.nodePools):
        g = effective(spec, p)
        if not (g["enabled"] and g["nccl"]):
            continue
        at = _where(spec, i, "nccl")
        why = ""
        if p.allocation == "dra":
            why = "the pool hands out its GPUs through DRA (no nvidia.com/gpu to request)"
        elif p.mig is not None and p.mig.layout and p.mig.strategy != "none":
            why = "the pool's GPUs are MIG-partitioned (no whole GPU to request)"
        elif p.sharing is not None:
            why = "the pool's GPUs are shared (nvidia.com/gpu replicas may be one GPU)"
        elif not spec.devicePlugin.enabled:
            why = "the device plugin is off (nothing advertises nvidia.com/gpu)"
        if why:
            out.error(at, f"Invalid value: true: an NCCL test needs whole GPUs of one node, and {why}")
            continue
        if caps is None:
            caps = {c.pool: c.gpus_per_node for c in plan_capacity(spec).pools}
        if caps.get(p.name) is None:
            out.error(("spec", "nodePools", i, "gpusPerNode"), (
                "Required value: the pool's health gate runs an NCCL test across a node's GPUs; say how many GPUs "
                "a node has (no well-known instance type in its nodeSelector tells)"))
        elif caps[p.name] < 2:
            out.error(at, (f"Invalid value: true: the pool's nodes have {caps[p.name]} GPU each, and an NCCL test "
                           "runs across 2 or more GPUs of a node"))
        if not g["ncclImage"]:
            out.error(at, (
                "Required value: ncclImage: NVIDIA publishes nccl-tests as source only; name the image you built "
                "(<path>:<tag> below spec.images.registry)"))
    return out


RULES = ((check_dcgm_level, check_dcgm_host_engine, check_nccl),)


def applies(ctx: Context) -> bool:
    return True
