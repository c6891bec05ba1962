"""Rollouts sized for GPU nodes: Flux must not roll back a slow driver upgrade, and the
budgets are derived from the driver upgrade policy and the driver's own startup probe."""

from __future__ import annotations

import math
import re
from types import SimpleNamespace

import pytest

from gpuop.outputs import rollout
from gpuop.plan.model import ClusterCapacity, PoolCapacity
from gpuop.plan.model import Upgrade
from gpuop.verify.crdschema import CrdValidator

from conftest import CRDS, load_dir


def seconds(duration: str) -> int:
    units = {"h": 3600, "m": 60, "s": 1}
    return sum(int(n) * units[u] for n, u in re.findall(r"(\d+)([hms])", duration))


@pytest.fixture(scope="module")
def crds() -> CrdValidator:
    return CrdValidator.from_files([CRDS / "helm.toolkit.fluxcd.io_helmreleases.yaml",
                                    CRDS / "kustomize.toolkit.fluxcd.io_kustomizations.yaml",
                                    CRDS / "argoproj.io_applications.yaml"])


def test_per_node_budget_is_the_driver_daemonsets_startup_probe(dist, index):
    for entry in index["clusters"]:
        for ds in load_dir(dist / entry["manifests"]):
            if ds["kind"] != "DaemonSet" or not ds["metadata"]["name"].startswith("nvidia-driver-daemonset"):
                continue
            (ctr,) = [c for c in ds["spec"]["template"]["spec"]["containers"] if c["name"] == "nvidia-driver-ctr"]
            p = ctr["startupProbe"]
            assert p["initialDelaySeconds"] + p["failureThreshold"] * p["periodSeconds"] == \
                rollout.DRIVER_STARTUP_SECONDS == 1260


def expected_timeout(ds_strategy: dict | None, entry: dict) -> int:
    """The driver roll (none without a driver DaemonSet) or the operands' node-by-node roll, the longer."""
    pools = entry["capacity"]["pools"]
    nodes = sum(p["nodes"]["max"] for p in pools) if all(p["nodes"] for p in pools) else rollout.ASSUMED_GPU_NODES
    operands = nodes * rollout.OPERAND_SECONDS
    if ds_strategy is None:
        return operands
    if ds_strategy["type"] == "OnDelete" or ds_strategy["rollingUpdate"]["maxUnavailable"] == "100%":
        return max(rollout.PER_WAVE_SECONDS, operands)
    k = ds_strategy["rollingUpdate"]["maxUnavailable"]
    return max(math.ceil(nodes / k) * rollout.PER_WAVE_SECONDS, operands)


def test_stack_helmrelease_waits_for_the_driver_roll_and_never_rolls_it_back(dist, index, crds):
    """Flux's defaults (wait 5 minutes, roll back after 3 retries) would undo a driver roll, which takes up
    to ~21 minutes per node: the HelmRelease waits for it and never rolls it back."""
    checked = without = 0
    for entry in index["clusters"]:
        if (dist / entry["name"] / "operator").is_dir():     # operator mode: NVIDIA's chart, not gpuop's stack
            continue
        drivers = [o for o in load_dir(dist / entry["manifests"])
                   if o["kind"] == "DaemonSet" and o["metadata"]["name"].startswith("nvidia-driver-daemonset")]
        (hr,) = [o for o in load_dir(dist / entry["flux"]) if o["metadata"]["name"] == f"gpuop-{entry['name']}"]
        spec = hr["spec"]
        assert crds.errors(hr) == []
        assert seconds(spec["timeout"]) == expected_timeout(drivers[0]["spec"]["updateStrategy"] if drivers else None,
                                                            entry)
        if drivers:
            assert seconds(spec["timeout"]) >= rollout.DRIVER_STARTUP_SECONDS > 5 * 60
            checked += 1
        else:                                   # nothing rebuilds a driver: no driver-sized wait
            assert seconds(spec["timeout"]) < rollout.PER_WAVE_SECONDS * 2
            without += 1
        # the health gate's test failures hold the release without remediating it (docs/health-gate.md)
        gate = {"ignoreTestFailures": True} if spec.get("test", {}).get("enable") else {}
        assert spec["upgrade"]["remediation"] == {"retries": 0, "remediateLastFailure": False, "strategy": "rollback",
                                                  **gate}
        assert spec["upgrade"]["disableWait"] is False
        assert spec["install"]["remediation"] == {"retries": 3, **gate}
        (ks,) = [o for o in load_dir(dist / entry["fluxOverlay"]) if o["metadata"]["name"] == f"gpuop-{entry['name']}"]
        assert ks["spec"]["timeout"] == spec["timeout"] and crds.errors(ks) == []
    assert checked >= 3 and without >= 1


def test_argocd_retries_back_off_up_to_one_driver_rebuild(dist, index, crds):
    for entry in index["clusters"]:
        if (dist / entry["name"] / "operator").is_dir():
            continue
        (app,) = [a for a in load_dir(dist / entry["argocd"]) if a["metadata"]["name"] == f"gpuop-{entry['name']}"]
        retry = app["spec"]["syncPolicy"]["retry"]
        assert crds.errors(app) == []
        drivers = [o for o in load_dir(dist / entry["manifests"])
                   if o["kind"] == "DaemonSet" and o["metadata"]["name"].startswith("nvidia-driver-daemonset")]
        if drivers:
            assert seconds(retry["backoff"]["maxDuration"]) >= rollout.DRIVER_STARTUP_SECONDS
        else:
            assert seconds(retry["backoff"]["maxDuration"]) == rollout.OPERAND_SECONDS


@pytest.mark.parametrize("upgrade, minutes", [
    (Upgrade(max_parallel=1), 16 * 26),          # one node at a time: 16 waves of 21 + 5 minutes
    (Upgrade(max_parallel=4), 4 * 26),
    (Upgrade(max_parallel=5), 4 * 26),           # ceil(16 / 5)
    (Upgrade(max_parallel=0), 32),               # 0: all nodes at once; the operands' 16 x 2 minutes are longer
    (Upgrade(auto=False, max_parallel=1), 32),   # OnDelete: no driver rolls during the upgrade
])
def test_timeout_follows_max_parallel_upgrades(upgrade, minutes):
    plan = SimpleNamespace(upgrade=upgrade, capacity=ClusterCapacity(), driver_variants=("v",))
    assert rollout.flux_timeout(plan) == f"{minutes}m"


def test_no_driver_daemonset_means_no_driver_waves():
    """The driver preinstalled (an EKS AMI): a broken release fails within the operands' roll (16 nodes x
    2 minutes), not after 16 driver waves of 26 minutes."""
    plan = SimpleNamespace(upgrade=Upgrade(max_parallel=1), capacity=ClusterCapacity(), driver_variants=())
    assert rollout.waves(plan) == 0 and rollout.flux_timeout(plan) == "32m"
    assert rollout.argocd_retry(plan)["backoff"]["maxDuration"] == "2m"


def pool(nodes):
    return PoolCapacity(pool="p", gpu="L4", allocation="devicePlugin", per_gpu=(("nvidia.com/gpu", 1),), nodes=nodes)


@pytest.mark.parametrize("nodes, minutes", [
    (((40, 40),), 20 * 26),                      # 40 nodes, 2 at a time: 20 waves
    (((3, 3), (2, 10)), 7 * 26),                 # 3 + max 10 nodes = 13, 2 at a time: 7 waves
    (((3, 3), None), 8 * 26),                    # a pool without a count: the 16-node assumption
])
def test_timeout_counts_the_pools_nodes_when_every_pool_says(nodes, minutes):
    capacity = ClusterCapacity(tuple(pool(n) for n in nodes))
    plan = SimpleNamespace(upgrade=Upgrade(max_parallel=2), capacity=capacity, driver_variants=("v",))
    assert rollout.flux_timeout(plan) == f"{minutes}m"
