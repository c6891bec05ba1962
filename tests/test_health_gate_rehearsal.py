"""The health gate holds the next wave: Flux's own helm-controller runs the gate's checks (the GPU stack chart's
`helm test` hooks, HelmRelease spec.test.enable) on the rehearsal rig, whose kwok nodes complete each check's pods
as kwok's default stages do, or fail them for one chosen pool (a Stage of this test). A healthy gate lets the next
wave's HelmRelease (the DRA driver's, which dependsOn the GPU stack's) install; a failing one leaves the stack's
HelmRelease not Ready with the test failure as the reason, and the next wave waiting on its dependency.

Runs with the GitOps lane (it needs Flux's controllers): in `make test`, which builds them first, and `make test-gitops`."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import yaml

from gpuop.rehearse import fleet, objects, rig
from gpuop.rehearse.gitops import FLUX_NAMESPACE, HELM_LANE, Flux
from test_gitops_rehearsal import _fleet_on, _plans, bins, delivered, flux_bin  # noqa: F401  (fixtures)

pytestmark = [pytest.mark.slow]

HR = "helm.toolkit.fluxcd.io/v2"
CLUSTER = "dra"                  # NFD, then the GPU stack (gated), then the DRA driver (dependsOn the stack)
GATED_POOL = "batch"             # the pool whose gate Job runs a CUDA sample in the dra example
POOL_LABEL = "gpuop/pool"


def _stages(default: Path, failing_pool: str | None) -> str:
    """kwok's default stages; with `failing_pool`, that pool's gate pods fail (exit 1) instead of completing."""
    docs = [d for d in yaml.safe_load_all(default.read_text()) if d]
    if failing_pool is None:
        return yaml.safe_dump_all(docs, sort_keys=False)
    not_failing = {"key": f'.metadata.labels["{POOL_LABEL}"]', "operator": "NotIn", "values": [failing_pool]}
    for d in docs:
        if d["metadata"]["name"] == "pod-complete":
            d["spec"]["selector"]["matchExpressions"].append(not_failing)
    fail = {"apiVersion": "kwok.x-k8s.io/v1alpha1", "kind": "Stage", "metadata": {"name": "pod-fail-health-gate"},
            "spec": {"resourceRef": {"apiGroup": "v1", "kind": "Pod"},
                     "selector": {"matchExpressions": [
                         {"key": ".metadata.deletionTimestamp", "operator": "DoesNotExist"},
                         {"key": ".status.phase", "operator": "In", "values": ["Running"]},
                         {"key": f'.metadata.labels["{POOL_LABEL}"]', "operator": "In", "values": [failing_pool]}]},
                     "next": {"statusTemplate": (
                         "{{ $now := Now }}\n"
                         "containerStatuses:\n"
                         "{{ range .spec.containers }}\n"
                         "- image: {{ .image | Quote }}\n"
                         "  name: {{ .name | Quote }}\n"
                         "  ready: false\n"
                         "  restartCount: 0\n"
                         "  started: false\n"
                         "  state:\n"
                         "    terminated:\n"
                         "      exitCode: 1\n"
                         "      finishedAt: {{ $now | Quote }}\n"
                         "      reason: Error\n"
                         "      startedAt: {{ $now | Quote }}\n"
                         "{{ end }}\n"
                         "phase: Failed\n")}}}
    return yaml.safe_dump_all([*docs, fail], sort_keys=False)


def _rig_with_stages(bins: dict[str, Path], folder: Path, failing_pool: str | None) -> dict[str, Path]:
    """The rig's binaries, linked into `folder` beside a stages file of this test (kwok reads the one beside it)."""
    src = Path(bins["kwok"]).parent
    folder.mkdir(parents=True)
    for f in src.iterdir():
        if f.name != rig.KWOK_STAGES_FILE:
            (folder / f.name).symlink_to(f)
    (folder / rig.KWOK_STAGES_FILE).write_text(_stages(src / rig.KWOK_STAGES_FILE, failing_pool))
    return {name: folder / Path(path).name for name, path in bins.items()}


def _run(delivered, bins, flux_bin, workdir: Path, failing_pool: str | None) -> dict:
    plan = _plans(delivered["root"])[CLUSTER]
    folder = delivered["dist"] / CLUSTER / "flux"
    seen: dict = {}
    with rig.ControlPlane(workdir / "cp", binaries=_rig_with_stages(bins, workdir / "bin", failing_pool)) as cp:
        fl = _fleet_on(cp, plan)
        # the dra example's queue objects: Kueue's CRDs, and the tenants' namespaces its LocalQueues live in
        assert cp.apply(objects.kueue_crds()) == []
        cp.wait_established([c["metadata"]["name"] for c in objects.kueue_crds()])
        made = {n["metadata"]["name"] for n in cp.list_objects("v1", "Namespace")}
        for ns in sorted(set(plan.queues.namespaces if plan.queues else ()) - made):
            cp.request("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
        for n in fl.nodes:          # what the device plugin would advertise (kwok's nodes run no plugin)
            cp.request("PATCH", f"/api/v1/nodes/{n.name}/status", {"status": fleet.node_status(n, advertised=True)},
                       content_type="application/merge-patch+json")
        with Flux(cp, workdir / "flux", folder=flux_bin, ca=delivered["lo"].ca, controllers=HELM_LANE) as flux:
            seen["refused"] = [str(p) for p in flux.apply([folder])]
            stack, nxt = f"gpuop-{CLUSTER}", f"gpuop-{CLUSTER}-dra"
            # the stack's release settles: Ready, or not Ready once its test ran (TestSuccess False)
            deadline = time.monotonic() + 600
            while time.monotonic() < deadline:
                flux.check_alive()
                ready = flux.condition(HR, "HelmRelease", stack)
                tested = flux.condition(HR, "HelmRelease", stack, type_="TestSuccess")
                if tested.get("status") in ("True", "False") and ready.get("status") in ("True", "False"):
                    break
                time.sleep(2)
            seen["stack"] = (ready.get("status"), ready.get("reason"), ready.get("message", ""))
            seen["tested"] = (tested.get("status"), tested.get("reason"), tested.get("message", ""))
            if ready.get("status") == "True":
                c = flux.wait_ready(HR, "HelmRelease", nxt, FLUX_NAMESPACE, timeout=300)
            else:
                time.sleep(30)      # the next wave's reconciles in this time: it must still wait
                c = flux.condition(HR, "HelmRelease", nxt)
            hr = cp.read(HR, "HelmRelease", nxt, FLUX_NAMESPACE) or {}
            seen["next"] = (c.get("status"), c.get("reason"), c.get("message", ""))
            seen["next_installed"] = bool(hr.get("status", {}).get("history"))
            seen["jobs"] = {j["metadata"]["name"]: {k: j.get("status", {}).get(k) for k in ("succeeded", "failed")}
                            for j in cp.list_objects("batch/v1", "Job")
                            if j["metadata"].get("labels", {}).get("app.kubernetes.io/component") == "health-gate"}
            seen["stack_history"] = [h.get("status") for h in
                                     (cp.read(HR, "HelmRelease", stack, FLUX_NAMESPACE) or {}).get("status", {}).get("history", [])]
    return seen


def test_a_healthy_gate_lets_the_next_waves_helmrelease_install(delivered, bins, flux_bin, tmp_path):
    seen = _run(delivered, bins, flux_bin, tmp_path, failing_pool=None)
    print(seen)
    assert seen["refused"] == []
    assert seen["tested"][:2] == ("True", "TestSucceeded"), seen
    assert seen["stack"][0] == "True", seen
    assert seen["jobs"] and all(j["succeeded"] and not j["failed"] for j in seen["jobs"].values()), seen
    assert seen["next"][0] == "True" and seen["next_installed"], seen


def test_a_failing_check_leaves_the_stack_not_ready_and_the_next_wave_waiting(delivered, bins, flux_bin, tmp_path):
    seen = _run(delivered, bins, flux_bin, tmp_path, failing_pool=GATED_POOL)
    print(seen)
    assert seen["refused"] == []
    assert seen["stack"][:2] == ("False", "TestFailed"), seen
    assert f"gpuop-gate-{GATED_POOL}-" in seen["stack"][2], seen            # the failed check, named
    assert seen["jobs"][f"gpuop-gate-{GATED_POOL}-cuda-gpu"]["failed"], seen
    # the stack stays installed: a failed check never uninstalls or rolls back the GPU stack
    assert seen["stack_history"] and seen["stack_history"][0] == "deployed", seen
    assert seen["next"][0] == "False" and seen["next"][1] == "DependencyNotReady", seen
    assert not seen["next_installed"], seen
