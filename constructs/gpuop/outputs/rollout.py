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
- Argo CD does not roll back; its sync retries back off up to one per-node budget, so a retry that
  waits for a CRD or a node is not given up while a node rebuilds its driver.

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


def gpu_nodes(plan: StackPlan) -> int:
    """The cluster's GPU nodes: the pools' node counts (max of a range) when every pool has one."""
    pools = plan.capacity.pools
    if not pools or any(p.nodes is None for p in pools):
        return ASSUMED_GPU_NODES
    return max(1, sum(p.nodes[1] for p in pools))


def waves(plan: StackPlan) -> int:
    u = plan.upgrade
    if not u.auto or u.max_parallel == 0:
        return 1
    return math.ceil(gpu_nodes(plan) / u.max_parallel)


def _duration(seconds: int) -> str:
    return f"{seconds // 60}m" if seconds % 60 == 0 else f"{seconds}s"


def flux_timeout(plan: StackPlan) -> str:
    """HelmRelease `spec.timeout`: Helm's wait for the stack's DaemonSets, sized for the driver roll."""
    return _duration(waves(plan) * PER_WAVE_SECONDS)


def flux_install(crds: str = "CreateReplace") -> dict:
    return {"crds": crds, "remediation": {"retries": 3}}


def flux_upgrade(crds: str = "CreateReplace") -> dict:
    """Wait for the roll, never roll a driver upgrade back (a rollback is a second driver roll)."""
    return {"crds": crds, "disableWait": False,
            "remediation": {"retries": 0, "remediateLastFailure": False, "strategy": "rollback"}}


def argocd_retry() -> dict:
    """Sync retries of the GPU stack's Application: back off up to one node's driver rebuild."""
    return {"limit": 10, "refresh": True, "backoff": {"duration": "30s", "factor": 2, "maxDuration": _duration(PER_WAVE_SECONDS)}}
