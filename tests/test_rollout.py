"""Rollouts sized for GPU nodes (issue 12): Flux must not roll back a slow driver upgrade, and the
budgets are derived from the driver upgrade policy and the driver's own startup probe."""

from __future__ import annotations

import math
import re
from types import SimpleNamespace

import pytest

from gpuop.outputs import rollout
from gpuop.plan.capacity import ClusterCapacity, PoolCapacity
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


def expected_timeout(ds_strategy: dict, entry: dict) -> int:
    if ds_strategy["type"] == "OnDelete" or ds_strategy["rollingUpdate"]["maxUnavailable"] == "100%":
        return rollout.PER_WAVE_SECONDS
    k = ds_strategy["rollingUpdate"]["maxUnavailable"]
    pools = entry["capacity"]["pools"]
    nodes = sum(p["nodes"]["max"] for p in pools) if all(p["nodes"] for p in pools) else rollout.ASSUMED_GPU_NODES
    return math.ceil(nodes / k) * rollout.PER_WAVE_SECONDS


def test_stack_helmrelease_waits_for_the_driver_roll_and_never_rolls_it_back(dist, index, crds):
    """Issue 12: the HelmRelease waited 5 minutes and rolled back after 3 retries, while a driver roll
    takes up to ~21 minutes per node."""
    checked = 0
    for entry in index["clusters"]:
        if (dist / entry["name"] / "operator").is_dir():     # operator mode: NVIDIA's chart, not gpuop's stack
            continue
        drivers = [o for o in load_dir(dist / entry["manifests"])
                   if o["kind"] == "DaemonSet" and o["metadata"]["name"].startswith("nvidia-driver-daemonset")]
        (hr,) = [o for o in load_dir(dist / entry["flux"]) if o["metadata"]["name"] == f"gpuop-{entry['name']}"]
        spec = hr["spec"]
        assert crds.errors(hr) == []
        if drivers:
            assert seconds(spec["timeout"]) == expected_timeout(drivers[0]["spec"]["updateStrategy"], entry)
            checked += 1
        assert seconds(spec["timeout"]) >= rollout.DRIVER_STARTUP_SECONDS > 5 * 60
        assert spec["upgrade"]["remediation"] == {"retries": 0, "remediateLastFailure": False, "strategy": "rollback"}
        assert spec["upgrade"]["disableWait"] is False
        assert spec["install"]["remediation"] == {"retries": 3}
        (ks,) = [o for o in load_dir(dist / entry["fluxOverlay"]) if o["metadata"]["name"] == f"gpuop-{entry['name']}"]
        assert ks["spec"]["timeout"] == spec["timeout"] and crds.errors(ks) == []
    assert checked >= 3


def test_argocd_retries_back_off_up_to_one_driver_rebuild(dist, index, crds):
    for entry in index["clusters"]:
        if (dist / entry["name"] / "operator").is_dir():
            continue
        (app,) = [a for a in load_dir(dist / entry["argocd"]) if a["metadata"]["name"] == f"gpuop-{entry['name']}"]
        retry = app["spec"]["syncPolicy"]["retry"]
        assert retry == rollout.argocd_retry() and crds.errors(app) == []
        assert seconds(retry["backoff"]["maxDuration"]) >= rollout.DRIVER_STARTUP_SECONDS


@pytest.mark.parametrize("upgrade, minutes", [
    (Upgrade(max_parallel=1), 16 * 26),          # one node at a time: 16 waves of 21 + 5 minutes
    (Upgrade(max_parallel=4), 4 * 26),
    (Upgrade(max_parallel=5), 4 * 26),           # ceil(16 / 5)
    (Upgrade(max_parallel=0), 26),               # 0: all nodes at once
    (Upgrade(auto=False, max_parallel=1), 26),   # OnDelete: nothing rolls during the upgrade
])
def test_timeout_follows_max_parallel_upgrades(upgrade, minutes):
    assert rollout.flux_timeout(SimpleNamespace(upgrade=upgrade, capacity=ClusterCapacity())) == f"{minutes}m"


def pool(nodes):
    return PoolCapacity(pool="p", gpu="L4", allocation="devicePlugin", per_gpu=(("nvidia.com/gpu", 1),), nodes=nodes)


@pytest.mark.parametrize("nodes, minutes", [
    (((40, 40),), 20 * 26),                      # 40 nodes, 2 at a time: 20 waves
    (((3, 3), (2, 10)), 7 * 26),                 # 3 + max 10 nodes = 13, 2 at a time: 7 waves
    (((3, 3), None), 8 * 26),                    # a pool without a count: the 16-node assumption
])
def test_timeout_counts_the_pools_nodes_when_every_pool_says(nodes, minutes):
    capacity = ClusterCapacity(tuple(pool(n) for n in nodes))
    plan = SimpleNamespace(upgrade=Upgrade(max_parallel=2), capacity=capacity)
    assert rollout.flux_timeout(plan) == f"{minutes}m"
