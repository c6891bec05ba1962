"""The rehearsal's simulated fleet and its expectations, from the plan alone (no control plane): what each
fake node carries and advertises, what nfd-worker would report for it, what the DRA kubelet plugin would
publish, and what the rehearsal must see per pool."""

from __future__ import annotations

import sys
from pathlib import Path

import celpy
import pytest
from hypothesis import given
from hypothesis import strategies as st

from conftest import REPO, run_gpuop
from gpuop.pipeline.run import plan_all
from gpuop.rehearse import expect, fleet, run

pytestmark = pytest.mark.fast

EXAMPLES = sorted(p for p in (REPO / "profiles").glob("*.yaml") if not p.name.startswith("_"))


def plan_of(name: str):
    plans, _ = plan_all([REPO / "profiles" / f"{name}.yaml"])
    return plans[0]


@pytest.fixture(scope="module")
def plans():
    found, _ = plan_all([REPO / "profiles"])
    return {p.name: p for p in found}


def test_every_pool_gets_its_node_count_or_its_max_or_the_default(plans):
    for plan in plans.values():
        fl = fleet.build(plan)
        for cap in plan.capacity.pools:
            want = fleet.DEFAULT_NODES if cap.nodes is None else max(1, min(fleet.MAX_NODES, cap.nodes[1]))
            assert len(fl.of_pool(cap.pool)) == want, (plan.name, cap.pool)


def test_fake_nodes_carry_the_pool_selector_and_kwok_annotation_and_advertise_nothing_at_first(plans):
    for plan in plans.values():
        for n in fleet.build(plan).nodes:
            obj = n.node()
            cap = next(c for c in plan.capacity.pools if c.pool == n.pool)
            assert set(cap.node_selector) <= set(obj["metadata"]["labels"].items())
            assert obj["metadata"]["labels"][fleet.POOL_LABEL] == n.pool
            assert obj["metadata"]["annotations"] == {"kwok.x-k8s.io/node": "fake"}
            assert not any(k.startswith("nvidia.com/") for k in obj["status"]["allocatable"])


def test_advertised_resources_are_the_plans_per_node_capacity():
    plan = plan_of("mig-sharing")
    for cap in plan.capacity.pools:
        for n in fleet.build(plan).of_pool(cap.pool):
            status = fleet.node_status(n, advertised=True)["allocatable"]
            assert {k: int(v) for k, v in status.items() if k.startswith("nvidia.com/")} == dict(cap.per_node)


def test_node_feature_reports_one_pci_device_per_gpu_with_the_catalogs_device_id_the_pool_rule_matches():
    plan = plan_of("prod-east")
    rule = next(r for r in plan.pool_configs.nfd_rules if r.gpu == "H100-SXM5-80GB")
    for n in fleet.build(plan).nodes:
        nf = n.node_feature()
        assert nf["metadata"]["labels"] == {fleet.NFD_NODE_LABEL: n.name}
        devices = nf["spec"]["features"]["instances"]["pci.device"]["elements"]
        assert len(devices) == 8                      # p5.48xlarge: 8 GPUs
        assert {d["attributes"]["device"] for d in devices} <= set(rule.device_ids)
        assert {d["attributes"]["vendor"] for d in devices} == {plan.pci_vendor}
        assert {d["attributes"]["class"] for d in devices} <= set(plan.pci_classes)


def test_openshift_nodes_are_dealt_the_rhcos_builds_the_driver_variants_select():
    plan = plan_of("openshift")
    key = "feature.node.kubernetes.io/system-os_release.OSTREE_VERSION"
    builds = {dict(v.node_selector)[key] for v in plan.driver_variants}
    for pool in ("train", "infer"):
        seen = {dict(n.worker_labels)[key] for n in fleet.build(plan).of_pool(pool)}
        assert seen == builds, pool


def _evaluate(expression: str, dev: dict) -> bool:
    env = celpy.Environment()
    return bool(env.program(env.compile(expression)).evaluate({"device": celpy.json_to_cel(dev)}))


def _cel_device(driver: str, d: dict) -> dict:
    return {"driver": driver, "attributes": {driver: {k: next(iter(v.values())) for k, v in d["attributes"].items()}},
            "capacity": {}}


def test_resource_slices_offer_what_each_device_class_selects_on_its_pool_only():
    plan = plan_of("dra")
    fl = fleet.build(plan)
    slices = {n.pool: n.resource_slice(plan.dra.driver) for n in fl.nodes}
    assert slices["batch"] is None                     # device-plugin pool: no DRA devices
    for c in plan.dra.device_classes:
        devices = slices[c.pool]["spec"]["devices"]
        matched = [d for d in devices if _evaluate(c.expression, _cel_device(plan.dra.driver, d))]
        assert len(matched) == c.per_node, c.name
        assert len({d["name"] for d in devices}) == len(devices)


def test_expected_labels_keep_the_device_plugin_off_dra_pools_and_the_dra_driver_on():
    plan = plan_of("dra")
    exp = {e.pool: e for e in expect.expectations(plan, fleet.build(plan))}
    assert dict(exp["infer"].labels)["nvidia.com/gpu.deploy.device-plugin"] == "false"
    assert dict(exp["infer"].labels)["nvidia.com/gpu.deploy.dra-driver"] == "true"
    assert dict(exp["infer"].operands)["device-plugin"] == 0
    assert dict(exp["batch"].operands)["device-plugin"] == 10
    assert [c.template for c in exp["infer"].claims] == ["h100-3g", "h100-small"]
    assert not exp["infer"].probes                    # DRA: claimed, not advertised


def test_mps_control_daemon_is_expected_on_mps_pools_only_and_mig_manager_on_mig_capable_gpus():
    plan = plan_of("mig-sharing")
    exp = {e.pool: dict(e.operands) for e in expect.expectations(plan, fleet.build(plan))}
    assert exp["batch"][expect.MPS] == 4
    assert exp["train"][expect.MPS] == exp["infer"][expect.MPS] == 0
    assert exp["infer"]["mig-manager"] == 0           # L40S: not MIG-capable
    assert exp["train"]["mig-manager"] == 6


def test_probes_are_pinned_only_where_another_pool_advertises_the_same_resource():
    plan = plan_of("mig-sharing")
    probes = {(p.pool, p.resource): p.pinned for e in expect.expectations(plan, fleet.build(plan)) for p in e.probes}
    assert probes[("train", "nvidia.com/mig-3g.40gb")] == ()
    assert probes[("infer", "nvidia.com/gpu")] == (("node.kubernetes.io/instance-type", "g6e.12xlarge"),)
    names = [p.name for e in expect.expectations(plan, fleet.build(plan)) for p in e.probes]
    assert len(names) == len(set(names))


def test_pools_told_apart_by_their_gpu_alone_pin_a_shared_resource_to_their_own_nodes():
    plan = plan_of_file(REPO / "tests" / "data" / "operator-corpus" / "xid-health-policy.yaml")
    nodes = fleet.build(plan)
    probes = {(p.pool, p.resource): p for e in expect.expectations(plan, nodes) for p in e.probes}
    for pool in ("train", "infer"):                   # both advertise nvidia.com/gpu, neither has a nodeSelector
        probe = probes[(pool, "nvidia.com/gpu")]
        assert probe.pinned == () and probe.hosts == tuple(n.name for n in nodes.of_pool(pool)) != ()
    pod = run.probe_pod("p", "ns", {}, {"nvidia.com/gpu": "1"}, ("train-1",))
    assert pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"] == {
        "nodeSelectorTerms": [{"matchExpressions": [
            {"key": "kubernetes.io/hostname", "operator": "In", "values": ["train-1"]}]}]}


def test_preinstalled_driver_pools_expect_no_driver_pods():
    plan = plan_of("eks-al2023")
    for e in expect.expectations(plan, fleet.build(plan)):
        assert dict(e.operands).get("driver", 0) == 0


def test_fleet_and_expectations_are_deterministic(plans):
    for plan in plans.values():
        assert fleet.build(plan) == fleet.build(plan)
        assert expect.expectations(plan, fleet.build(plan)) == expect.expectations(plan, fleet.build(plan))


def test_an_unknown_cluster_is_bad_input_located_before_any_control_plane(tmp_path):
    proc = run_gpuop("rehearse", "nope", "--profiles", str(REPO / "profiles"), "-o", str(tmp_path), cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.startswith("nope: no such cluster in the profiles; known: dra, edge-k3s,")
    assert proc.stderr.endswith("gpuop: 1 error; nothing written\n")


def test_a_cluster_without_compiled_output_is_bad_input_located(tmp_path):
    proc = run_gpuop("rehearse", "prod-east", "--profiles", str(REPO / "profiles"), "-o", str(tmp_path / "dist"),
                     cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr == (f"{tmp_path}/dist/prod-east/manifests: not found: compile the cluster first (gpuop synth)\n"
                           "gpuop: 1 error; nothing written\n")


def test_a_kubebuilder_assets_folder_with_envtests_two_binaries_only_is_bad_input_said_before_any_start(
        tmp_path, monkeypatch):
    assets = tmp_path / "assets"
    assets.mkdir()
    for name in ("kube-apiserver", "etcd"):          # never run: the check comes before any start
        (assets / name).write_text("#!/bin/sh\nexit 1\n")
        (assets / name).chmod(0o755)
    monkeypatch.setenv("KUBEBUILDER_ASSETS", str(assets))
    proc = run_gpuop("rehearse", "prod-east", "--profiles", str(REPO / "profiles"), "-o", str(REPO / "dist"),
                     cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr == (f"gpuop rehearse: {assets}: no kube-controller-manager, kube-scheduler, kwok, nfd-master (a "
                           "rehearsal runs all of kube-apiserver, kube-controller-manager, kube-scheduler, etcd, kwok, "
                           "nfd-master; `make rig` builds them, or KUBEBUILDER_ASSETS names a folder with all of them)\n"
                           "gpuop: 1 error; nothing written\n")


def test_the_operand_table_names_the_component_registrys_daemonsets_for_every_example_and_corpus_profile(plans):
    from gpuop.stack.registry import component_props

    corpus, _ = plan_all([REPO / "tests" / "data" / "semantic-corpus", REPO / "tests" / "data" / "operator-corpus"])
    for plan in [*plans.values(), *corpus]:
        registry = tuple(sorted((c.deploy_label, c.mig_capable_only) for c, _ in component_props(plan)
                                if c.deploy_label))
        assert tuple(sorted(expect.components(plan))) == registry, plan.name


def test_the_report_locates_each_difference_and_exits_3_only_on_one():
    import json

    from gpuop.rehearse.report import ClusterResult, Finding, exit_code, render

    good = ClusterResult("a", nodes=2, findings=[
        Finding("a", "labels", True, "labels as planned", pool="p", kind="Node", name="p-0"),
        Finding("a", "not-rehearsed", True, "monitoring.coreos.com/v1 ServiceMonitor is served by no CRD installed "
                "here", kind="ServiceMonitor", namespace="gpu-operator", name="m")])
    bad = ClusterResult("b", nodes=1, findings=[
        Finding("b", "operand", False, "runs on 0 of the pool's 1 nodes, the plan says 1", pool="q",
                kind="DaemonSet", name="device-plugin", expected=1, actual=0)])
    assert exit_code([good]) == 0
    assert exit_code([good, bad]) == 3
    text = render([good, bad], "table")
    assert "a (stack, 2 fake nodes): 1 checks, as planned\n" in text
    assert "  not rehearsed (no CRD here): 1 object(s) of ServiceMonitor\n" in text
    assert ("  b pool q DaemonSet/device-plugin: operand: runs on 0 of the pool's 1 nodes, the plan says 1\n"
            in text)
    doc = json.loads(render([good, bad], "json"))
    assert doc["ok"] is False and doc["clusters"]["a"]["ok"] is True
    assert doc["clusters"]["b"]["findings"] == [{"check": "operand", "cluster": "b", "ok": False, "pool": "q",
                                                "kind": "DaemonSet", "name": "device-plugin", "expected": 1,
                                                "actual": 0, "message": "runs on 0 of the pool's 1 nodes, the "
                                                "plan says 1"}]
    assert render([good, bad], "json") == render([good, bad], "json")


def test_nodes_carry_labels_satisfying_the_profiles_daemonset_placement():
    plan = plan_of_file(REPO / "tests" / "data" / "semantic-corpus" / "everything.yaml")
    labels = dict(fleet.build(plan).nodes[0].labels)
    assert labels["example.com/gpu"] == "y" and labels["example.com/zone"] == "y"
    assert int(labels["example.com/rank"]) > 3
    assert "node.example.com/gpu-maintenance" not in labels


def plan_of_file(path: Path):
    plans, _ = plan_all([path])
    return plans[0]


# ---- a CRD read back before the API server has set its status --------------------------------------------

_JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=12),
                     lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4),
                     max_leaves=12)
_CONDITION = st.fixed_dictionaries({"type": st.sampled_from(["Established", "NamesAccepted", "Other"]),
                                    "status": st.sampled_from(["True", "False", "Unknown"])})


@pytest.mark.parametrize("crd", [
    None, {}, {"status": None}, {"status": {}}, {"status": {"conditions": None}},
    {"status": {"conditions": [None]}}, {"status": {"conditions": ["Established"]}},
    {"status": {"conditions": [{"type": "NamesAccepted", "status": "True"}]}},
    {"status": {"conditions": [{"type": "Established", "status": "False"}]}},
])
def test_a_crd_without_an_established_condition_yet_is_not_established_and_no_error(crd):
    from gpuop.rehearse.rig import established

    assert established(crd) is False


def test_a_crd_whose_established_condition_is_true_is_established():
    from gpuop.rehearse.rig import established

    assert established({"status": {"conditions": [{"type": "NamesAccepted", "status": "True"},
                                                  {"type": "Established", "status": "True"}]}})


@given(status=_JSON, conditions=st.lists(_CONDITION | _JSON, max_size=5))
def test_established_reads_any_status_shape_and_is_true_only_with_an_established_true_condition(status, conditions):
    from gpuop.rehearse.rig import established

    assert established({"status": status}) is False or (
        isinstance(status, dict) and isinstance(status.get("conditions"), list))
    want = any(isinstance(c, dict) and c.get("type") == "Established" and c.get("status") == "True"
               for c in conditions)
    assert established({"status": {"conditions": conditions}}) is want


# ---- tools/rehearsal/build.py: a module built under another rig digest is copied, not built again ---------

def _build_script():
    import importlib.util

    spec = importlib.util.spec_from_file_location("rig_build", REPO / "tools" / "rehearsal" / "build.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod           # its dataclasses look their module up there
    spec.loader.exec_module(mod)
    return mod


GO = "go version go1.26.8 linux/amd64"


def _built_folder(build, folder: Path, module) -> None:
    folder.mkdir(parents=True)
    for name in build.files_of(module):
        (folder / name).write_text(f"{name} as built\n")
    build.stamp(folder, module, GO).write_text(GO + "\n")


def _beside_a_built_folder(tmp_path: Path, folder: str):
    """(build.py, its module `folder`, a new rig folder) beside an old rig folder where that module is built."""
    build = _build_script()
    module = next(m for m in build.MODULES if m.folder == folder)
    _built_folder(build, tmp_path / "rig" / "old" / "bin", module)
    out = tmp_path / "rig" / "new" / "bin"
    out.mkdir(parents=True)
    return build, module, out


def test_a_module_whose_digest_is_unchanged_is_copied_from_another_rig_folder_with_its_stamp(tmp_path):
    build, etcd, out = _beside_a_built_folder(tmp_path, "etcd")
    assert build.reuse(out, etcd, GO) == tmp_path / "rig" / "old" / "bin"
    assert build.built(out, etcd, GO)
    assert (out / "etcd").read_text() == "etcd as built\n"


def test_a_module_built_with_another_go_or_pin_is_not_copied(tmp_path):
    build, kwok, out = _beside_a_built_folder(tmp_path, "kwok")
    assert build.reuse(out, kwok, "go version go1.27.0 linux/amd64") is None
    assert not any(out.iterdir())


def test_the_rig_builds_no_kubectl():
    build = _build_script()
    assert "kubectl" not in build.BINARIES
    assert set(build.BINARIES) == {"kube-apiserver", "kube-controller-manager", "kube-scheduler", "etcd", "kwok",
                                   "nfd-master"}


# ---- the queues step's probe Workloads (rehearse/queues.py), from the compiled queue objects ----------------

def _queue_objects(name: str) -> list[dict]:
    import yaml

    path = REPO / "dist" / name / "manifests" / "17-queues.yaml"
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def test_a_probe_workload_per_device_plugin_flavor_pinned_and_tolerating_as_its_flavor():
    from gpuop.rehearse import queues

    workloads, skipped, added = queues.probes(_queue_objects("mig-sharing"), "gpuop-rehearse")
    got = {w["metadata"]["labels"]["gpuop.dev/probe-flavor"]: w for w in workloads}
    assert sorted(got) == ["batch", "infer", "train"] and skipped == []
    train = got["train"]["spec"]["podSets"][0]["template"]["spec"]
    assert train["nodeSelector"] == {"node.kubernetes.io/instance-type": "p5.48xlarge"}
    assert train["tolerations"] == [{"effect": "NoSchedule", "key": "nvidia.com/gpu", "operator": "Equal",
                                     "value": "true"}]
    assert train["containers"][0]["resources"]["requests"] == {"nvidia.com/mig-1g.10gb": "1"}
    # queued where a user's job would be: a LocalQueue of the output feeding the ClusterQueue
    lq = next(d for d in _queue_objects("mig-sharing") if d["kind"] == "LocalQueue")
    assert {(w["metadata"]["namespace"], w["spec"]["queueName"]) for w in workloads} == {
        (lq["metadata"]["namespace"], lq["metadata"]["name"])}
    assert added == []


def test_a_dra_flavor_is_noted_not_probed_and_a_queue_without_local_queue_gets_the_rehearsals_own():
    from gpuop.rehearse import queues

    objs = [d for d in _queue_objects("dra") if d["kind"] != "LocalQueue"]
    workloads, skipped, added = queues.probes(objs, "gpuop-rehearse")
    assert [f for f, _ in skipped] == ["infer"] and "DynamicResourceAllocation" in skipped[0][1]
    assert [w["metadata"]["labels"]["gpuop.dev/probe-flavor"] for w in workloads] == ["batch"]
    assert added == [{"apiVersion": queues.API, "kind": "LocalQueue",
                      "metadata": {"name": "gpuop-probe-gpus", "namespace": "gpuop-rehearse"},
                      "spec": {"clusterQueue": "gpus"}}]
    assert workloads[0]["spec"]["queueName"] == "gpuop-probe-gpus"


@pytest.mark.parametrize("status, want", [
    ({"conditions": [{"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved", "message": "ok"},
                     {"type": "Admitted", "status": "True", "reason": "Admitted", "message": "The workload is admitted"}],
      "admission": {"podSetAssignments": [{"name": "main", "flavors": {"nvidia.com/gpu": "batch"}}]}},
     (True, "nvidia.com/gpu on flavor batch")),
    ({"conditions": [{"type": "QuotaReserved", "status": "False", "reason": "Pending",
                      "message": "ClusterQueue gpus is inactive"}]},
     (False, "QuotaReserved: Pending: ClusterQueue gpus is inactive")),
    ({}, (False, "no condition yet")),
])
def test_admission_is_read_from_kueues_conditions_and_its_flavor_assignment(status, want):
    from gpuop.rehearse import queues

    assert queues.admitted({"status": status}) == want


def test_the_certificates_are_mounted_only_once_kueue_wrote_both(tmp_path):
    import base64

    from gpuop.rehearse import queues

    assert not queues.mount_certs({"data": {"tls.crt": base64.b64encode(b"c").decode()}}, tmp_path / "c")
    assert not (tmp_path / "c").exists()
    data = {k: base64.b64encode(k.encode()).decode() for k in ("tls.crt", "tls.key", "ca.crt")}
    assert queues.mount_certs({"data": data}, tmp_path / "c")
    assert sorted(p.name for p in (tmp_path / "c").iterdir()) == ["tls.crt", "tls.key"]
    assert (tmp_path / "c" / "tls.key").read_bytes() == b"tls.key"
