"""Every example cluster rehearsed on a real control plane (kube-apiserver, etcd, controller-manager,
scheduler, kwok, nfd-master from rig.py) with its simulated GPU fleet: nothing refused, every expectation of
the plan met; and one compiled output broken per kind of failure the rehearsal exists to catch, each caught
for its own reason.

Skipped when the rig's binaries are not built and CI is unset; with CI=true they are built (Go module proxy)
and their absence fails."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
import yaml

from conftest import REPO, run_gpuop
from gpuop.pipeline.run import plan_all

pytestmark = pytest.mark.slow

EXAMPLES = sorted(p.name for p in plan_all([REPO / "profiles"])[0])     # every example cluster
CI = os.environ.get("CI") == "true"


@pytest.fixture(scope="module")
def binaries():
    try:
        from gpuop.rehearse import rig

        return rig.binaries(build=CI)
    except Exception as exc:               # not built here (ImportError, FileNotFoundError, a build error)
        if CI:
            pytest.fail(f"the rehearsal rig's binaries are needed with CI=true: {type(exc).__name__}: {exc}")
        pytest.skip(f"the rehearsal rig's binaries are not built: {type(exc).__name__}: {exc}")


@pytest.fixture(scope="module")
def plans():
    found, _ = plan_all([REPO / "profiles"])
    return {p.name: p for p in found}


def rehearse(plan, output: Path, binaries, tmp_path: Path):
    from gpuop.rehearse import run

    return run.rehearse([plan], output, binaries=binaries, workdir=tmp_path)[0]


def failures(result) -> list[str]:
    return [f.line() for f in result.failures]


@pytest.fixture(scope="module")
def kueue():
    """Kueue's controller manager (`make kueue`): required with CI=true, else its absence is a note."""
    from gpuop.rehearse import rig

    found = rig.kueue_binary()
    if found is None and CI:
        pytest.fail("Kueue's controller manager is needed with CI=true: `make kueue` builds it")
    return found


@pytest.mark.parametrize("cluster", EXAMPLES)
def test_every_example_cluster_rehearses_as_planned(cluster, binaries, kueue, plans, dist, tmp_path):
    result = rehearse(plans[cluster], dist, binaries, tmp_path)
    assert result.ok, "\n".join(failures(result))
    checks = {f.check for f in result.findings}
    assert "labels" in checks and "operand" in checks
    assert checks & {"probe", "claim"}, "no resource was probed"
    queued = plans[cluster].queues is not None
    if queued and kueue is not None:     # every device-plugin flavor of the ClusterQueue admitted by Kueue itself
        flavors = {f.pool for f in result.findings if f.check == "queue"}
        assert flavors == {q.name for q in plans[cluster].queues.flavors if any("/" in r and n for r, n in q.quota)}, flavors
    assert ("queue" in checks) == (queued and kueue is not None)


# ---- a corpus of our own: every platform, distribution, MIG and sharing mode, DRA, operator mode (helm, OLM) --

CORPUS_DIRS = (REPO / "tests" / "data" / "semantic-corpus", REPO / "tests" / "data" / "operator-corpus")
CORPUS = sorted(p.name for p in plan_all(list(CORPUS_DIRS))[0])


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    w = tmp_path_factory.mktemp("corpus")
    shutil.copy(REPO / "gpuop.yaml", w / "gpuop.yaml")
    run_gpuop("synth", *map(str, CORPUS_DIRS), "-o", "dist", cwd=w, check=True)
    plans, _ = plan_all(list(CORPUS_DIRS))
    return w / "dist", {p.name: p for p in plans}


@pytest.mark.parametrize("cluster", CORPUS)
def test_every_corpus_cluster_rehearses_as_planned(cluster, binaries, corpus, tmp_path):
    out, plans = corpus
    result = rehearse(plans[cluster], out, binaries, tmp_path)
    assert result.ok, "\n".join(failures(result))


# ---- one broken output per kind of failure --------------------------------------------------------------

def broken(dist: Path, cluster: str, tmp_path: Path, file: str, mutate) -> Path:
    out = tmp_path / "dist"
    shutil.copytree(dist / cluster, out / cluster)
    path = out / cluster / "manifests" / file
    docs = [d for d in yaml.safe_load_all(path.read_text()) if d]
    for d in docs:
        mutate(d)
    path.write_text(yaml.safe_dump_all(docs, sort_keys=False))
    return out


def failed_checks(result) -> set[tuple[str, str, str]]:
    return {(f.check, f.pool, f.name) for f in result.failures}


def test_an_object_the_api_server_refuses_is_reported_with_its_message(binaries, plans, dist, tmp_path):
    def bad_pull_policy(d):
        if d["kind"] == "DaemonSet":
            d["spec"]["template"]["spec"]["containers"][0]["imagePullPolicy"] = "Sometimes"

    out = broken(dist, "edge-k3s", tmp_path, "07-device-plugin.yaml", bad_pull_policy)
    result = rehearse(plans["edge-k3s"], out, binaries, tmp_path)
    refused = [f for f in result.failures if f.check == "refused"]
    assert [(f.kind, f.namespace, f.name) for f in refused] == [
        ("DaemonSet", plans["edge-k3s"].namespace, "nvidia-device-plugin-daemonset")]
    assert 'Unsupported value: "Sometimes"' in refused[0].message
    # the DaemonSet never existed, so the pool misses its device plugin and its GPUs stay unadvertised
    assert ("operand", "edge", "device-plugin") in failed_checks(result)


def test_a_node_feature_rule_that_labels_the_wrong_nodes_is_caught_per_node(binaries, plans, dist, tmp_path):
    plan = plans["mig-sharing"]
    h100 = next(r for r in plan.pool_configs.nfd_rules if r.gpu == "H100-SXM5-80GB")
    l40s = next(r for r in plan.pool_configs.nfd_rules if r.gpu == "L40S")

    def h100_rule_on_l40s(d):
        for rule in d["spec"]["rules"]:
            if rule["name"] == "gpuop.pool.H100-SXM5-80GB":
                rule["matchFeatures"][0]["matchExpressions"]["device"]["value"] = list(l40s.device_ids)

    out = broken(dist, "mig-sharing", tmp_path, "01-node-labels.yaml", h100_rule_on_l40s)
    result = rehearse(plan, out, binaries, tmp_path)
    labels = [f for f in result.failures if f.check == "labels"]
    assert {f.pool for f in labels} == {"train", "infer"}
    train = next(f for f in labels if f.pool == "train")
    assert train.expected["nvidia.com/mig.config"] == dict(h100.labels)["nvidia.com/mig.config"]
    infer = next(f for f in labels if f.pool == "infer")
    assert "nvidia.com/mig.config" in infer.actual or "nvidia.com/device-plugin.config" in (infer.expected or {})


def test_a_daemonset_that_misses_a_pool_is_caught_with_its_counts(binaries, plans, dist, tmp_path):
    def only_inference(d):
        if d["kind"] == "DaemonSet":
            d["spec"]["template"]["spec"]["nodeSelector"]["node.kubernetes.io/instance-type"] = "g6e.12xlarge"

    out = broken(dist, "lab-west", tmp_path, "07-device-plugin.yaml", only_inference)
    result = rehearse(plans["lab-west"], out, binaries, tmp_path)
    miss = [f for f in result.failures if f.check == "operand"]
    assert [(f.pool, f.name, f.expected, f.actual) for f in miss] == [("training", "device-plugin", 4, 0)]
    # what that costs: the training pool's GPUs are advertised nowhere
    assert {(f.check, f.pool) for f in result.failures} == {("operand", "training"), ("probe", "training")}


def test_a_resource_nobody_can_schedule_is_caught_by_its_probe(binaries, plans, dist, tmp_path):
    def no_such_profile(d):
        if d["kind"] == "DeviceClass" and d["metadata"]["name"] == "infer.3g.40gb.gpuop":
            sel = d["spec"]["selectors"][0]["cel"]
            sel["expression"] = sel["expression"].replace("'3g.40gb'", "'3g.41gb'")

    out = broken(dist, "dra", tmp_path, "14-dra.yaml", no_such_profile)
    result = rehearse(plans["dra"], out, binaries, tmp_path)
    assert failed_checks(result) == {("claim", "infer", "h100-3g")}
    claim = result.failures[0]
    assert "is not scheduled" in claim.message


def test_the_command_reports_json_and_exits_3_on_a_difference(binaries, plans, dist, tmp_path):
    import json

    def only_inference(d):
        if d["kind"] == "DaemonSet":
            d["spec"]["template"]["spec"]["nodeSelector"]["node.kubernetes.io/instance-type"] = "g6e.12xlarge"

    out = broken(dist, "lab-west", tmp_path, "07-device-plugin.yaml", only_inference)
    proc = run_gpuop("rehearse", "lab-west", "--profiles", str(REPO / "profiles"), "-o", str(out),
                     "--format", "json", cwd=tmp_path)
    assert proc.returncode == 3, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["ok"] is False and doc["clusters"]["lab-west"]["ok"] is False
    assert any(f["check"] == "operand" and f["pool"] == "training" and not f["ok"]
               for f in doc["clusters"]["lab-west"]["findings"])


def test_a_cluster_queue_naming_a_flavor_that_does_not_exist_admits_nothing(binaries, kueue, plans, dist, tmp_path):
    if kueue is None:
        pytest.skip("Kueue's controller manager is not built (`make kueue`)")

    def rename_train(d):
        if d["kind"] == "ResourceFlavor" and d["metadata"]["name"] == "train":
            d["metadata"]["name"] = "training"

    out = broken(dist, "mig-sharing", tmp_path, "17-queues.yaml", rename_train)
    result = rehearse(plans["mig-sharing"], out, binaries, tmp_path)
    # Kueue holds the whole ClusterQueue inactive while a flavor it names is missing: nothing is admitted
    assert {(f.check, f.pool) for f in result.failures} == {("queue", "batch"), ("queue", "infer"), ("queue", "train")}
    assert all("is not admitted by Kueue" in f.message for f in result.failures)
