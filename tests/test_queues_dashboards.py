"""Kueue queues and Grafana dashboards: the ClusterQueue's quotas are the plan's capacity (MIG slices, shared
replicas, DRA DeviceClasses), its resource groups follow Kueue's one-group-per-resource rule, every object passes
Kueue's own CRD schema; the dashboards decode as Grafana's typed dashboard model (grafana-foundation-sdk) and
compare what a pool's nodes advertise with what the plan says; the profile rules fire, located."""

from __future__ import annotations

import json
import re
import shutil

import pytest
import yaml
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models import dashboard as gmodel

from gpuop.components.dashboards import Dashboards, DashboardsProps, PoolPanelProps, dashboard
from gpuop.components.queues import FlavorProps, KueueQueues, QueuesProps
from gpuop.kube.promql import pool_nodes, prom_label, prom_resource
from gpuop.plan.model import Flavor, QueuesPlan
from gpuop.verify.output import check_kueue_schema

from conftest import REPO, run_main, write_profile

PROFILES = REPO / "profiles"
CLUSTERS = sorted(yaml.safe_load(p.read_text())["metadata"]["name"] for p in PROFILES.glob("*.yaml")
                  if not p.stem.startswith("_"))


def test_flavors_sharing_a_resource_are_one_group_covering_the_union():
    q = QueuesPlan("gpus", "gpus", (), (
        Flavor("a", (), (), (("nvidia.com/gpu", 8),)),
        Flavor("b", (), (), (("nvidia.com/gpu", 4), ("nvidia.com/gpu.shared", 16))),
        Flavor("m", (), (), (("nvidia.com/mig-1g.10gb", 56),))))
    assert q.resource_groups() == (
        (("nvidia.com/gpu", "nvidia.com/gpu.shared"), (q.flavors[0], q.flavors[1])),
        (("nvidia.com/mig-1g.10gb",), (q.flavors[2],)))


def test_a_flavor_lists_every_covered_resource_with_zero_for_those_it_lacks():
    props = QueuesProps(groups=((("nvidia.com/gpu", "nvidia.com/gpu.shared"), (
        FlavorProps(name="a", quota={"nvidia.com/gpu": 8}),
        FlavorProps(name="b", quota={"nvidia.com/gpu": 4, "nvidia.com/gpu.shared": 16}))),))
    cq = next(o for o in KueueQueues.render(props) if o["kind"] == "ClusterQueue")
    assert cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"] == [
        {"name": "nvidia.com/gpu", "nominalQuota": 8}, {"name": "nvidia.com/gpu.shared", "nominalQuota": 0}]


def test_taints_become_flavor_tolerations_exists_without_a_value():
    props = QueuesProps(groups=((("nvidia.com/gpu",), (FlavorProps(
        name="a", quota={"nvidia.com/gpu": 1}, tolerations=(("nvidia.com/gpu", "", "NoSchedule"),
                                                            ("dedicated", "ml", "NoExecute"))),)),))
    flavor = next(o for o in KueueQueues.render(props) if o["kind"] == "ResourceFlavor")
    assert flavor["spec"]["tolerations"] == [
        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
        {"key": "dedicated", "operator": "Equal", "value": "ml", "effect": "NoExecute"}]


def _objects(dist, cluster: str, name: str) -> list[dict]:
    return [d for d in yaml.safe_load_all((dist / cluster / "manifests" / name).read_text()) if d]


@pytest.fixture(scope="module")
def dist(tmp_path_factory):
    out = tmp_path_factory.mktemp("dist")
    assert run_main("synth", str(PROFILES), "-o", str(out), cwd=REPO).returncode == 0
    return out


def test_mig_and_shared_pools_get_their_capacity_as_nominal_quota(dist):
    cq = next(o for o in _objects(dist, "mig-sharing", "17-queues.yaml") if o["kind"] == "ClusterQueue")
    quota = {(f["name"], r["name"]): r["nominalQuota"] for g in cq["spec"]["resourceGroups"]
             for f in g["flavors"] for r in f["resources"]}
    index = {c["name"]: c for c in json.loads((dist / "index.json").read_text())["clusters"]}
    for pool in index["mig-sharing"]["capacity"]["pools"]:
        for resource, n in pool["total"]["max"].items():
            assert quota[(pool["pool"], resource)] == n
    # 6 p5.48xlarge nodes x 8 H100 x two 1g.10gb slices, each time-sliced twice
    assert quota[("train", "nvidia.com/mig-1g.10gb")] == 6 * 8 * 2 * 2
    assert quota[("batch", "nvidia.com/gpu")] == 4 * 8 * 2          # MPS, two replicas


def test_dra_pools_are_counted_per_device_class(dist):
    cq = next(o for o in _objects(dist, "dra", "17-queues.yaml") if o["kind"] == "ClusterQueue")
    index = {c["name"]: c for c in json.loads((dist / "index.json").read_text())["clusters"]}
    classes = {c["deviceClass"]: c["total"]["max"] for c in index["dra"]["dra"]["capacity"]}
    quota = {r["name"]: r["nominalQuota"] for g in cq["spec"]["resourceGroups"] for f in g["flavors"]
             if f["name"] == "infer" for r in f["resources"]}
    assert quota == {name: n for name, n in classes.items() if name in quota} and quota
    assert cq["spec"]["cohortName"] == "gpu-fleet"


@pytest.mark.parametrize("cluster", ["mig-sharing", "dra"])
def test_every_queue_object_passes_kueues_crd_schema(dist, cluster):
    objs = _objects(dist, cluster, "17-queues.yaml")
    assert {o["kind"] for o in objs} == {"ResourceFlavor", "ClusterQueue", "LocalQueue"}
    assert [m for o in objs for m in check_kueue_schema(o)] == []


def test_queues_are_off_unless_enabled(dist):
    assert not (dist / "prod-east" / "manifests" / "17-queues.yaml").exists()


def _roundtrip(body: dict) -> dict:
    typed = gmodel.Dashboard.from_json(body)
    return json.loads(json.dumps(typed, cls=JSONEncoder, sort_keys=True))


@pytest.mark.parametrize("cluster", CLUSTERS)
def test_every_example_cluster_has_a_dashboard_grafanas_model_reads_back_unchanged(dist, cluster):
    files = sorted((dist / cluster / "dashboards").glob("*.json"))
    assert [f.name for f in files] == [f"{cluster}-gpus.json"]
    body = json.loads(files[0].read_text())
    assert _roundtrip(body) == body
    ids = [p["id"] for p in body["panels"]]
    assert len(ids) == len(set(ids))


def test_the_sidecar_configmap_holds_the_same_json_as_the_file(dist):
    cm = _objects(dist, "prod-east", "16-dashboards.yaml")[0]
    assert cm["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert cm["data"]["prod-east-gpus.json"] == (dist / "prod-east" / "dashboards" / "prod-east-gpus.json").read_text()


def test_the_planned_series_is_the_plans_per_node_count_for_mig_and_shared_pools(dist):
    body = json.loads((dist / "mig-sharing" / "dashboards" / "mig-sharing-gpus.json").read_text())
    exprs = [t["expr"] for p in body["panels"] for t in p.get("targets", [])]
    train = pool_nodes((("node.kubernetes.io/instance-type", "p5.48xlarge"),))
    assert f"count({train}) * 32" in exprs           # 8 GPUs x two 1g.10gb slices, time-sliced twice
    assert f"count({pool_nodes((('node.kubernetes.io/instance-type', 'p4de.24xlarge'),))}) * 16" in exprs   # MPS x2


def test_fleet_dashboard_reads_back_and_names_every_resource_planned(dist):
    body = json.loads((dist / "fleet" / "dashboards" / "fleet-gpus.json").read_text())
    assert _roundtrip(body) == body
    titles = {p["title"] for p in body["panels"]}
    assert "nvidia.com/mig-1g.10gb: advertised vs planned" in titles


def test_the_fleet_dashboard_is_also_a_sidecar_configmap_holding_the_same_json(dist):
    from gpuop.verify.kubeschema import KubeValidator

    index = json.loads((dist / "index.json").read_text())
    folder = dist / "fleet" / "dashboards"
    (cm,) = [d for d in yaml.safe_load_all((folder / "fleet-gpus-configmap.yaml").read_text()) if d]
    assert cm["metadata"]["labels"]["grafana_dashboard"] == "1" and "namespace" not in cm["metadata"]
    assert cm["data"] == {"fleet-gpus.json": (folder / "fleet-gpus.json").read_text()}
    newest = max(index["clusters"], key=lambda e: tuple(map(int, e["kubeVersion"].split("."))))["kubeVersion"]
    assert KubeValidator(newest).errors(cm) == []


def test_kube_state_metrics_names():
    assert prom_label("node.kubernetes.io/instance-type") == "label_node_kubernetes_io_instance_type"
    assert prom_resource("nvidia.com/mig-1g.10gb") == "nvidia_com_mig_1g_10gb"
    assert pool_nodes(()) == 'kube_node_labels{label_nvidia_com_gpu_present="true"}'


def test_a_mig_pool_plots_engine_activity_not_gpu_util():
    d = dashboard(DashboardsProps(cluster="c", pools=(PoolPanelProps(name="m", gpu="H100", mig=True),)))
    exprs = " ".join(t["expr"] for p in d["panels"] for t in p.get("targets", []))
    assert "DCGM_FI_PROF_GR_ENGINE_ACTIVE" in exprs and "DCGM_FI_DEV_GPU_UTIL" not in exprs


QUEUED = """\
platform: {type: kubernetes, version: "1.33"}
os: ubuntu24.04
queues: {enabled: true, namespaces: [a, a]}
nodePools:
  - name: a
    gpu: L40S
    nodeSelector: {pool: a}
    taints: [{key: dedicated, value: gpu, effect: NoSchedule}]
"""


def test_unknown_capacity_untolerated_taint_and_duplicate_namespace_are_refused_located(tmp_path):
    path = write_profile(tmp_path, QUEUED)
    r = run_main("synth", str(path), "-o", str(tmp_path / "out"), cwd=tmp_path)
    assert r.returncode == 2, r.stderr
    err = r.stderr
    assert 'c1.yaml:7:43: spec.queues.namespaces[1]: Duplicate value: "a"' in err, err
    assert "spec.nodePools[0].nodes: Required value: spec.queues.enabled sets the ClusterQueue's nominal quota" in err
    assert ('c1.yaml:12:16: spec.nodePools[0].taints[0]: Invalid value: "dedicated=gpu:NoSchedule": no toleration '
            "of the GPU DaemonSets") in err, err
    assert not (tmp_path / "out").exists()


def test_a_tolerated_taint_and_known_capacity_compile(tmp_path):
    text = (QUEUED.replace("namespaces: [a, a]", "namespaces: [a]")
            .replace("key: dedicated, value: gpu", "key: nvidia.com/gpu, value: present")
            .replace("    nodeSelector: {pool: a}\n", "    nodeSelector: {pool: a}\n    nodes: 2\n    gpusPerNode: 4\n"))
    path = write_profile(tmp_path, text)
    shutil.copy(REPO / "gpuop.yaml", tmp_path / "gpuop.yaml")
    r = run_main("synth", str(path), "-o", str(tmp_path / "out"), cwd=tmp_path)
    assert r.returncode == 0, r.stderr


def test_queues_in_operator_mode_are_delivered_by_the_companion_chart_not_only_previewed(tmp_path):
    text = (QUEUED.replace("namespaces: [a, a]", "namespaces: [a]")
            .replace("key: dedicated, value: gpu", "key: nvidia.com/gpu, value: present")
            .replace("    nodeSelector: {pool: a}\n", "    nodeSelector: {pool: a}\n    nodes: 2\n    gpusPerNode: 4\n")
            + "delivery: {mode: operator}\n")
    path = write_profile(tmp_path, text)
    shutil.copy(REPO / "gpuop.yaml", tmp_path / "gpuop.yaml")
    out = tmp_path / "out"
    r = run_main("synth", str(path), "-o", str(out), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    delivered = [d for d in yaml.safe_load_all((out / "c1" / "addons" / "manifests" / "17-queues.yaml").read_text()) if d]
    previewed = [d for d in yaml.safe_load_all((out / "c1" / "preview" / "manifests" / "17-queues.yaml").read_text()) if d]
    assert delivered == previewed and {o["kind"] for o in delivered} == {"ResourceFlavor", "ClusterQueue", "LocalQueue"}
    assert [m for o in delivered for m in check_kueue_schema(o)] == []
    release = yaml.safe_load((out / "c1" / "flux" / "addons-helmrelease.yaml").read_text())
    assert release["spec"]["chart"]["spec"]["chart"].endswith("/c1/addons/chart")


# ------------------------------------------------------------------------------------------ gpuop diff

@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    """The examples compiled into a project folder of their own; each test copies it and edits a profile."""
    w = tmp_path_factory.mktemp("compiled")
    shutil.copytree(REPO / "profiles", w / "profiles")
    shutil.copy(REPO / "gpuop.yaml", w / "gpuop.yaml")
    assert run_main("synth", "profiles", "-o", "dist", cwd=w).returncode == 0
    return w


def _diff_after(compiled, tmp_path, old: str, new: str) -> str:
    w = tmp_path / "w"
    shutil.copytree(compiled, w, symlinks=True)
    f = w / "profiles" / "mig-sharing.yaml"
    assert old in f.read_text()
    f.write_text(f.read_text().replace(old, new))
    done = run_main("diff", "--exit-code", cwd=w)
    assert done.returncode == 3, done.stderr
    return done.stdout


def _block(out: str, head: str) -> list[str]:
    """The lines under one `  ~ FILE` / `  ~ KIND NAME` entry of a cluster's diff."""
    lines = out.splitlines()
    start = lines.index(head)
    end = next((i for i in range(start + 1, len(lines)) if not lines[i].startswith("      ")), len(lines))
    return lines[start + 1:end]


def test_diff_shows_a_dashboard_change_in_the_file_the_sidecar_configmap_and_the_fleet(compiled, tmp_path):
    out = _diff_after(compiled, tmp_path, "timeSlicing: {replicas: 4,", "timeSlicing: {replicas: 2,")
    board = _block(out, "  ~ dashboards/mig-sharing-gpus.json")
    assert any(re.fullmatch(r"      panels\[\d+\]\.targets\[\d+\]\.legendFormat: nvidia\.com/gpu planned \(16 per node\) "
                            r"-> nvidia\.com/gpu planned \(8 per node\)", line) for line in board), board
    assert "      data.mig-sharing-gpus.json: changed (multi-line value):" in _block(
        out, "  ~ ConfigMap gpu-operator/gpuop-dashboards")
    assert "      ~ ConfigMap gpu-operator/gpuop-dashboards" in _block(out, "  ~ chart/templates/16-dashboards.yaml")
    assert _block(out, "  ~ fleet/dashboards/fleet-gpus.json")      # the fleet's planned totals move too


def test_diff_shows_a_queue_quota_change_and_a_new_local_queue(compiled, tmp_path):
    out = _diff_after(compiled, tmp_path, "timeSlicing: {replicas: 4,", "timeSlicing: {replicas: 2,")
    assert _block(out, "  ~ ClusterQueue gpus") == [
        "      spec.resourceGroups[0].flavors[infer].resources[nvidia.com/gpu].nominalQuota: 160 -> 80"]
    out = _diff_after(compiled, tmp_path / "2", "namespaces: [ml-training, ml-inference]",
                      "namespaces: [ml-training, ml-inference, ml-serving]")
    assert "  + LocalQueue ml-serving/gpus" in out.splitlines()
    assert _block(out, "  ~ chart/templates/17-queues.yaml") == ["      + LocalQueue ml-serving/gpus"]
