"""Pool taints and the Kueue queues: what would leave a pool without its operands, and what a ClusterQueue
cannot be given a quota for.

Refuses, located: a taint of a pool (spec.nodePools[].taints) with a NoSchedule or NoExecute effect that the
GPU DaemonSets' tolerations (spec.daemonsets.tolerations, or upstream's nvidia.com/gpu Exists NoSchedule) do not
tolerate: the DaemonSet controller would place no driver, toolkit or device plugin on the pool's nodes
(k8s.io/api core/v1 Toleration.ToleratesTaint, kube-controller-manager's daemon controller predicates). With
spec.queues.enabled: the device plugin off (nothing advertised to count), a device-plugin pool whose capacity is
unknown (no `nodes` or no GPUs per node: no nominal quota), a namespace listed twice.
"""

from __future__ import annotations

from gpuop.kube.types import Toleration, tolerates
from gpuop.plan.capacity import plan_capacity
from gpuop.plan.chartmap import UPSTREAM_TOLERATIONS
from gpuop.validate.rules import Context, rule


def daemonset_tolerations(spec) -> list[Toleration]:
    """The GPU DaemonSets' tolerations: the profile's (they replace upstream's), else upstream's."""
    if spec.daemonsets.tolerations is not None:
        return list(spec.daemonsets.tolerations)
    return [Toleration(**t) for t in UPSTREAM_TOLERATIONS]


@rule("pool-taints-tolerated", source="k8s.io/api core/v1 Toleration.ToleratesTaint; kube-controller-manager "
      "daemon controller (a DaemonSet pod is placed only where it tolerates every NoSchedule/NoExecute taint)")
def check_taints_tolerated(ctx: Context) -> list:
    """Every NoSchedule / NoExecute taint of a pool is tolerated by the GPU DaemonSets."""
    errors: list = []
    tolerations = daemonset_tolerations(ctx.spec)
    for i, p in enumerate(ctx.spec.nodePools):
        for j, taint in enumerate(p.taints):
            if taint.effect == "PreferNoSchedule" or any(tolerates(t, taint) for t in tolerations):
                continue
            shown = f"{taint.key}={taint.value or ''}:{taint.effect}"
            errors.append(ctx.at(("spec", "nodePools", i, "taints", j), (
                f"Invalid value: \"{shown}\": no toleration of the GPU DaemonSets (spec.daemonsets.tolerations) "
                f"tolerates this taint, so the pool's nodes would get no driver, toolkit or device plugin; add a "
                f"toleration for key {taint.key!r} with effect {taint.effect} to spec.daemonsets.tolerations")))
    return errors


@rule("queues-capacity", source="Kueue ClusterQueue v1beta2 (resourceGroups[].flavors[].resources[].nominalQuota); "
      "gpuop's capacity (plan/capacity.py)")
def check_queue_capacity(ctx: Context) -> list:
    """With queues on, every pool the ClusterQueue covers has a known capacity, and namespaces are unique."""
    spec = ctx.spec
    q = spec.queues
    if not q.enabled:
        return []
    errors: list = []
    if not spec.devicePlugin.enabled and all(p.allocation != "dra" for p in spec.nodePools):
        errors.append(ctx.at(("spec", "queues", "enabled"), (
            "Invalid value: true: the device plugin is off (spec.devicePlugin.enabled: false), so no pool advertises "
            "GPUs a ClusterQueue could give a quota; turn the device plugin on or the queues off")))
    for i, p in enumerate(spec.nodePools):
        if p.allocation != "dra" and not spec.devicePlugin.enabled:
            continue
        if p.nodes is None:
            errors.append(ctx.at(("spec", "nodePools", i, "nodes"), (
                "Required value: spec.queues.enabled sets the ClusterQueue's nominal quota of this pool from its "
                "capacity; say how many nodes it has (a number, or {min, max})")))
        elif p.gpusPerNode is None and ctx.derived("capacity", lambda: _capacity(spec)).get(p.name) is None:
            errors.append(ctx.at(("spec", "nodePools", i, "gpusPerNode"), (
                "Required value: spec.queues.enabled sets the ClusterQueue's nominal quota of this pool from its "
                "capacity; say how many GPUs a node has (no well-known instance type in its nodeSelector tells)")))
    seen: set[str] = set()
    for j, ns in enumerate(q.namespaces):
        if ns in seen:
            errors.append(ctx.at(("spec", "queues", "namespaces", j), f"Duplicate value: \"{ns}\""))
        seen.add(ns)
    return errors


def _capacity(spec) -> dict:
    return {p.pool: p.gpus_per_node for p in plan_capacity(spec).pools}


RULES = ((check_taints_tolerated, check_queue_capacity),)


def applies(ctx: Context) -> bool:
    return True
