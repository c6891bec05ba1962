"""Rollout budgets sized for GPU nodes: how long Flux waits for a stack upgrade, whether it rolls a
failed one back, and how Argo CD retries a sync — derived from the driver upgrade policy.

Why: a driver upgrade replaces the driver pod node by node (`maxParallelUpgrades` at a time, the
DaemonSet's maxUnavailable; components/driver.py). A node may take up to the driver's startup-probe
budget to come back (initialDelaySeconds 60 + failureThreshold 120 x periodSeconds 10 = 1,260 s, about
21 minutes: building and loading kernel modules), plus draining its GPU pods. Flux's defaults (wait 5
minutes, then remediate 3 times by rollback) roll a slow but healthy driver upgrade back — which is a
second node-by-node driver roll, in reverse. So:

- `spec.timeout` = waves x per-node budget, where waves = ceil(GPU nodes / maxParallelUpgrades): the sum of
  the pools' `nodes` (their max when autoscaled) when every pool says, else ASSUMED_GPU_NODES
  (1 wave when maxParallelUpgrades is 0, "all at once", or with autoUpgrade false: `OnDelete` rolls
  nothing during the upgrade, so Helm's wait only covers the apply and the new pods' start).
- Upgrades are never rolled back (`upgrade.remediation.retries: 0`, `remediateLastFailure: false`):
  a timed-out upgrade leaves the release failed and the DaemonSet still rolling; the HelmRelease reports
  it and the next change upgrades again. Installs keep Flux's retries (uninstalling a half-installed
  stack is harmless: no node has the new driver yet).
- Only what rolls counts: without a driver DaemonSet (the driver preinstalled, e.g. an EKS AMI, or
  `driver.enabled: false`) there are no driver waves, and Helm's wait covers the other DaemonSets,
  which roll one node at a time (their default maxUnavailable 1; they roll side by side, so the
  slowest is one node's operand start per node): `timeout` = max(driver waves x per-wave budget,
  GPU nodes x OPERAND_SECONDS). A release that cannot pull its images then fails within that, not
  after a driver roll's hours.
- Argo CD does not roll back; its sync retries back off up to one per-node budget (the driver's when
  the cluster has a driver DaemonSet, an operand's otherwise), so a retry that waits for a CRD or a
  node is not given up while a node rebuilds its driver.

Where a pool does not say how many nodes it has (`nodes`), the timeout assumes ASSUMED_GPU_NODES per
cluster; a larger cluster may then still time out, which with no rollback only marks the HelmRelease
failed until the roll finishes (docs/gitops.md).
"""

from __future__ import annotations

import math

from gpuop.plan.model import StackPlan

# The driver DaemonSet's startupProbe (components/driver.py): initialDelaySeconds + failureThreshold x
# periodSeconds. Outputs may not import components; tests/test_rollout.py checks the two agree.
DRIVER_STARTUP_SECONDS = 60 + 120 * 10
DRAIN_SECONDS = 300            # evicting GPU pods and pulling the new driver image, per wave
ASSUMED_GPU_NODES = 16         # nodes per cluster the Flux timeout is sized for (not known at compile time)
PER_WAVE_SECONDS = DRIVER_STARTUP_SECONDS + DRAIN_SECONDS
# one node's turn of an operand DaemonSet (toolkit, device plugin, GFD, DCGM exporter, validator...):
# pulling its image and passing its validation init containers, as the driver's per-wave budget the
# image pull allows for (DRAIN_SECONDS)
OPERAND_SECONDS = 120


def gpu_nodes(plan: StackPlan) -> int:
    """The cluster's GPU nodes: the pools' node counts (max of a range) when every pool has one."""
    pools = plan.capacity.pools
    if not pools or any(p.nodes is None for p in pools):
        return ASSUMED_GPU_NODES
    return max(1, sum(p.nodes[1] for p in pools))


def has_driver(plan: StackPlan) -> bool:
    """Whether gpuop renders a driver DaemonSet for the cluster (none: the driver is preinstalled)."""
    return bool(plan.driver_variants)


def waves(plan: StackPlan) -> int:
    """Driver waves Helm's wait covers: 0 without a driver DaemonSet."""
    if not has_driver(plan):
        return 0
    u = plan.upgrade
    if not u.auto or u.max_parallel == 0:
        return 1
    return math.ceil(gpu_nodes(plan) / u.max_parallel)


def wait_seconds(plan: StackPlan) -> int:
    """How long Helm's wait may take: the driver roll, or the operands' node-by-node roll if longer."""
    return max(waves(plan) * PER_WAVE_SECONDS, gpu_nodes(plan) * OPERAND_SECONDS)


def _duration(seconds: int) -> str:
    return f"{seconds // 60}m" if seconds % 60 == 0 else f"{seconds}s"


def flux_timeout(plan: StackPlan) -> str:
    """HelmRelease `spec.timeout`: Helm's wait for the stack's DaemonSets, sized for what rolls."""
    return _duration(wait_seconds(plan))


def flux_install(crds: str = "CreateReplace") -> dict:
    return {"crds": crds, "remediation": {"retries": 3}}


def flux_upgrade(crds: str = "CreateReplace") -> dict:
    """Wait for the roll, never roll a driver upgrade back (a rollback is a second driver roll)."""
    return {"crds": crds, "disableWait": False,
            "remediation": {"retries": 0, "remediateLastFailure": False, "strategy": "rollback"}}


def argocd_retry(plan: StackPlan | None = None) -> dict:
    """Sync retries of the GPU stack's Application: back off up to one node's driver rebuild (None: a
    fleet-wide template, any cluster may have a driver), or one operand start without a driver."""
    most = PER_WAVE_SECONDS if plan is None or has_driver(plan) else OPERAND_SECONDS
    return {"limit": 10, "refresh": True, "backoff": {"duration": "30s", "factor": 2, "maxDuration": _duration(most)}}


# A planned move between the delivery modes (spec.delivery.moveFrom): the same Application / HelmRelease
# gpuop-<cluster> switches from one delivery's objects to the other's. Without these, Argo CD prunes, and
# Flux uninstalls, the old delivery's objects in the same sync, and deleting NVIDIA's ClusterPolicy (or
# gpuop's DaemonSets) takes every operand it owns off every GPU node at once.
MOVE_SYNC_OPTIONS = ("PruneLast=true",                  # the old objects go after the new ones are synced and healthy
                     "PrunePropagationPolicy=orphan")   # ...and what they own (operands, pods) stays


def move_sync_options(plan: StackPlan) -> list[str]:
    """Argo CD sync options of the cluster's Application during a planned move; [] otherwise."""
    return list(MOVE_SYNC_OPTIONS) if plan.move_from else []


def move_uninstall(plan: StackPlan) -> dict:
    """HelmRelease spec fields during a planned move: Flux uninstalls the old release (its chart and release name
    change) orphaning what its objects own; {} otherwise."""
    return {"uninstall": {"deletionPropagation": "orphan"}} if plan.move_from else {}


# The health gate (components/health_gate.py): Flux runs the chart's test hooks after each install and upgrade
# (`spec.test.enable`); a failed check leaves the HelmRelease Ready=False (reason TestFailed), which holds every
# HelmRelease that dependsOn it. Test failures never remediate (`ignoreTestFailures` on install and upgrade):
# uninstalling or rolling back the stack because a GPU failed its check would take the driver off every pool.
def gate_seconds(plan: StackPlan) -> int:
    """Helm runs the test hooks one after another, each within the test timeout: the longest check's deadline,
    and one operand start for the pod to be scheduled and report."""
    return plan.health_gate.longest() + OPERAND_SECONDS


def flux_test(plan: StackPlan) -> dict:
    """HelmRelease spec fields of the health gate; {} without one."""
    if plan.health_gate is None:
        return {}
    # the chart's smoke-test pod is for people (`helm test`): it requests a whole nvidia.com/gpu anywhere, which a
    # cluster of MIG or DRA pools never offers, so it would fail the gate where every pool is healthy
    return {"test": {"enable": True, "timeout": _duration(gate_seconds(plan)),
                     "filters": [{"name": f"{plan.name}-gpu-smoke-test", "exclude": True}]}}


def flux_gate_remediation(remediation: dict, plan: StackPlan) -> dict:
    return {**remediation, "ignoreTestFailures": True} if plan.health_gate is not None else remediation
