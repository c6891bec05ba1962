"""Knowing what a change does before merging: `gpuop diff --impact`, the driver lifecycle warning,
`gpuop capacity` and the fleet report (opened in a real headless Chromium).

Each impact test compiles a one-cluster project, changes one thing in its profile and reads the impact
of the next synth against the compiled folder, exactly as a reviewer's CI would.
"""

from __future__ import annotations

import datetime
import json
import os
import sys
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import REPO, run_gpuop, run_main

PROFILE = """\
apiVersion: gpuop/v1alpha1
kind: ClusterProfile
metadata:
  name: east
  labels: {region: us-east-1}
spec:
  platform: {type: kubernetes, version: "1.34"}
  os: ubuntu24.04
  driver: {version: "580.173.02", upgradePolicy: {maxParallelUpgrades: 2}}
  nodePools:
    - name: train
      gpu: H100-SXM5-80GB
      nodes: 5
      nodeSelector: {node.kubernetes.io/instance-type: p5.48xlarge}
      mig: {strategy: mixed, layout: {"3g.40gb": 2}}
    - name: infer
      gpu: L40S
      nodes: {min: 2, max: 6}
      nodeSelector: {node.kubernetes.io/instance-type: g6e.12xlarge}
"""


@pytest.fixture
def project(tmp_path) -> Path:
    (tmp_path / "profiles").mkdir()
    (tmp_path / "profiles" / "east.yaml").write_text(PROFILE)
    shutil.copy(REPO / "gpuop.yaml", tmp_path / "gpuop.yaml")
    run_gpuop("synth", "--no-cache", cwd=tmp_path, check=True)
    return tmp_path


def impact_of(project: Path, old: str, new: str, fmt: str = "text") -> subprocess.CompletedProcess:
    f = project / "profiles" / "east.yaml"
    text = f.read_text()
    assert old in text
    f.write_text(text.replace(old, new))
    return run_gpuop("diff", "--impact", "--exit-code", "--format", fmt, cwd=project)


def test_driver_version_change_reinstalls_each_pool_in_waves_with_a_time_bound(project):
    proc = impact_of(project, 'version: "580.173.02"', 'version: "595.91.07"')
    assert proc.returncode == 3, proc.stderr
    assert proc.stdout == (
        "!! 2 destructive effect(s): GPU workloads are interrupted\n"
        "cluster east:\n"
        "  !! pool infer: driver reinstall (580.173.02-ubuntu24.04 -> 595.91.07-ubuntu24.04): GPU pods evicted, no "
        "drain, 2 node(s) at a time, 6 node(s) -> 3 wave(s), each up to 21m (startup probe); up to 1h03m in all\n"
        "  !! pool train: driver reinstall (580.173.02-ubuntu24.04 -> 595.91.07-ubuntu24.04): GPU pods evicted, no "
        "drain, 2 node(s) at a time, 5 node(s) -> 3 wave(s), each up to 21m (startup probe); up to 1h03m in all\n")


def test_a_pool_driver_of_its_own_reinstalls_the_other_pool_at_once_because_its_daemonset_is_renamed(project):
    proc = impact_of(project, "      nodes: 5\n", "      nodes: 5\n      driver: {version: \"595.91.07\"}\n")
    assert proc.returncode == 3, proc.stderr
    assert proc.stdout.splitlines()[2] == (
        "  !! pool infer: driver DaemonSet nvidia-driver-daemonset replaced by nvidia-driver-daemonset-580.173.02 "
        "(pruned): driver reinstall on every node of the pool at once, no update strategy or upgrade policy paces a "
        "new DaemonSet; GPU pods evicted by the driver manager, 6 node(s) in 1 wave, up to 21m (startup probe)")


def test_mig_layout_change_reconfigures_only_that_pool(project):
    proc = impact_of(project, 'layout: {"3g.40gb": 2}', 'layout: {"1g.10gb": 7}')
    assert proc.returncode == 3, proc.stderr
    assert proc.stdout == (
        "!! 1 destructive effect(s): GPU workloads are interrupted\n"
        "cluster east:\n"
        "  !! pool train: MIG reconfiguration (2x3g.40gb -> 7x1g.10gb): the MIG manager evicts the GPU pods on the "
        "pool's nodes and repartitions every GPU; the pool's GPUs are unavailable until it is done (5 node(s), "
        "1 wave(s), no time bound: mig-parted has no timeout)\n")


def test_toolkit_change_reconfigures_the_container_runtime_without_evictions(project):
    proc = impact_of(project, "  nodePools:\n", "  toolkit: {version: v1.18.1}\n  nodePools:\n")
    assert proc.returncode == 3, proc.stderr
    assert proc.stdout == (
        "cluster east:\n"
        "     all GPU nodes: container runtime reconfiguration: the toolkit rewrites the runtime config and restarts "
        "the runtime; running containers keep running, new pods wait for the restart\n")


def test_label_only_change_reaches_no_node(project):
    proc = impact_of(project, "region: us-east-1", "region: us-east-2")
    assert proc.stdout == ("cluster east:\n     cluster: labels, annotations or delivery objects only: nothing on "
                           "the nodes\n")
    assert proc.returncode == 0          # --exit-code: nothing reaches a node


def test_impact_as_json_for_ci_bots(project):
    proc = impact_of(project, 'layout: {"3g.40gb": 2}', 'layout: {"1g.10gb": 7}', fmt="json")
    doc = json.loads(proc.stdout)
    assert doc["kind"] == "Impact" and doc["destructive"] == 1
    assert doc["effects"] == [{"cluster": "east", "scope": "pool train", "kind": "mig-reconfigure", "destructive": True,
                               "type": "mig-repartition", "pool": "train", "nodes": 5, "waves": 1,
                               "per_node_seconds": None, "bound_seconds": None, "trigger": "merge",
                               "node_group": None, "set_labels": {},
                               "objects": ["ConfigMap gpu-operator/custom-mig-parted-config",
                                           "NodeFeatureRule nvidia-gpu-node-labels"],
                               "text": "MIG reconfiguration (2x3g.40gb -> 7x1g.10gb): the MIG manager evicts the GPU "
                                       "pods on the pool's nodes and repartitions every GPU; the pool's GPUs are "
                                       "unavailable until it is done"}]


def test_a_hand_broken_manifest_in_the_last_output_is_no_traceback(project):
    broken = project / "dist" / "east" / "manifests" / "03-driver.yaml"
    broken.write_text("kind: [unclosed\n")
    proc = impact_of(project, 'version: "580.173.02"', 'version: "595.91.07"')
    assert proc.returncode == 3 and "Traceback" not in proc.stderr, proc.stderr
    assert "pool train: driver reinstall" in proc.stdout


def test_unchanged_profiles_have_no_impact(project):
    proc = run_gpuop("diff", "--impact", "--exit-code", cwd=project)
    assert (proc.returncode, proc.stdout) == (0, "gpuop: no change reaches a node\n")


# ---- known-bad: driver branches past their end of life --------------------------------------------

def test_driver_branch_past_end_of_life_is_flagged_with_its_source(project):
    f = project / "profiles" / "east.yaml"
    f.write_text(f.read_text().replace('version: "580.173.02"', 'version: "535"'))
    env_day = str(int(datetime.datetime(2026, 12, 1, tzinfo=datetime.timezone.utc).timestamp()))
    proc = subprocess.run([sys.executable, "-m", "gpuop.cli", "validate"], cwd=project, capture_output=True,
                          text=True, env={**os.environ, "SOURCE_DATE_EPOCH": env_day})
    assert proc.returncode == 0
    assert ("profiles/east.yaml:9:12: warning: spec.driver.version: driver branch 535 reached its end of life in "
            "2026-06: no more security or bug fixes; branches still supported: 595, 580 (source: "
            "https://docs.nvidia.com/datacenter/tesla/drivers/index.html (data center driver branches and their end "
            "of life; ../shared/refs/gpu-operator/NOTES.md §4))") in proc.stderr.splitlines()
    before = str(int(datetime.datetime(2026, 5, 1, tzinfo=datetime.timezone.utc).timestamp()))
    earlier = subprocess.run([sys.executable, "-m", "gpuop.cli", "validate"], cwd=project, capture_output=True,
                             text=True, env={**os.environ, "SOURCE_DATE_EPOCH": before})
    assert "end of life" not in earlier.stderr


# ---- capacity ---------------------------------------------------------------------------------------

def test_capacity_of_mig_time_slicing_and_mps_pools_matches_hand_computed_numbers():
    proc = run_gpuop("capacity", "profiles/mig-sharing.yaml", "--format", "json", cwd=REPO, check=True)
    pools = {p["pool"]: p for p in json.loads(proc.stdout)["clusters"]["mig-sharing"]["pools"]}
    # train: p5.48xlarge = 8 H100; per GPU 3g.40gb x1, 2g.20gb x1, 1g.10gb x2 time-sliced 2 ways
    assert pools["train"]["gpusPerNode"] == 8 and pools["train"]["gpusPerNodeFrom"] == "instance type p5.48xlarge"
    assert pools["train"]["perNode"] == {"nvidia.com/mig-1g.10gb": 2 * 2 * 8, "nvidia.com/mig-2g.20gb": 8,
                                         "nvidia.com/mig-3g.40gb": 8}
    # infer: g6e.12xlarge = 4 L40S, time-sliced 4 ways
    assert pools["infer"]["perNode"] == {"nvidia.com/gpu": 4 * 4}
    # batch: p4de.24xlarge = 8 A100 80GB, MPS 2 ways
    assert pools["batch"]["perNode"] == {"nvidia.com/gpu": 8 * 2}


def test_capacity_totals_with_node_counts_and_autoscaled_ranges(project):
    proc = run_gpuop("capacity", "--format", "json", cwd=project, check=True)
    doc = json.loads(proc.stdout)
    east = doc["clusters"]["east"]
    assert east["total"] == {"min": {"nvidia.com/gpu": 2 * 4, "nvidia.com/mig-3g.40gb": 5 * 8 * 2},
                             "max": {"nvidia.com/gpu": 6 * 4, "nvidia.com/mig-3g.40gb": 5 * 8 * 2}}
    assert doc["fleet"] == east["total"]
    table = run_gpuop("capacity", cwd=project, check=True).stdout
    assert "nvidia.com/gpu=8 .. nvidia.com/gpu=24" in table
    index = json.loads((project / "dist" / "index.json").read_text())
    assert index["clusters"][0]["capacity"] == east


# ---- the fleet report --------------------------------------------------------------------------------

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--enable-logging=stderr", "--v=0"]


@pytest.mark.skipif(CHROMIUM is None, reason="chromium not installed (.ci/run installs Debian's chromium)")
def test_report_opens_in_chromium_without_console_errors_and_shows_every_cluster(workdir, dist, tmp_path):
    w = tmp_path / "w"                     # a copy: the session's compiled dist/ stays as synth left it
    shutil.copytree(workdir / "profiles", w / "profiles")
    shutil.copy(workdir / "gpuop.yaml", w / "gpuop.yaml")
    shutil.copytree(dist, w / "dist")
    dist = w / "dist"
    run_gpuop("report", "-o", "dist", cwd=w, check=True)
    page = w / "report" / "index.html"                     # outside the output GitOps applies
    assert not (dist / "report").exists()
    html = page.read_text()
    for external in ("<link", " src=", 'href="http', "url(http", "@import"):      # no external assets
        assert external not in html
    profile = tmp_path / "chromium"
    dom = subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={profile}", "--dump-dom", page.as_uri()],
                         capture_output=True, text=True, timeout=120)
    assert dom.returncode == 0, dom.stderr[-2000:]
    console = [line for line in dom.stderr.splitlines() if "CONSOLE" in line or "Uncaught" in line]
    assert console == []
    assert 'data-ready="yes"' in dom.stdout                   # the page's script ran to its end
    index = json.loads((dist / "index.json").read_text())
    for entry in index["clusters"]:
        assert f'id="c-{entry["name"]}"' in dom.stdout
    artifacts = Path(os.environ.get("GPUOP_ARTIFACTS", tmp_path))
    artifacts.mkdir(parents=True, exist_ok=True)
    shot = subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={profile}", "--window-size=1300,1800",
                           f"--screenshot={artifacts / 'report.png'}", page.as_uri()],
                          capture_output=True, text=True, timeout=120)
    assert shot.returncode == 0 and (artifacts / "report.png").stat().st_size > 10_000


def test_report_shows_the_impact_of_the_next_synth(project):
    f = project / "profiles" / "east.yaml"
    f.write_text(f.read_text().replace('layout: {"3g.40gb": 2}', 'layout: {"1g.10gb": 7}'))
    run_gpuop("report", "--against", "dist", cwd=project, check=True)
    html = (project / "report" / "index.html").read_text()
    assert "east</a> <span class=\"bad\">1 destructive</span>" in html
    assert "!! east: pool train: MIG reconfiguration (2x3g.40gb -&gt; 7x1g.10gb)" in html


# ---- progressive fleet rollout ---------------------------------------------------------------------

def test_rollout_waves_become_an_applicationset_rolling_sync_valid_against_the_crd(tmp_path):
    from conftest import CRDS
    from gpuop.kube.yamlio import load_all
    from gpuop.verify.crdschema import CrdValidator

    (tmp_path / "profiles").mkdir()
    shutil.copy(REPO / "gpuop.yaml", tmp_path / "gpuop.yaml")
    for name, wave in (("edge-a", "canary"), ("edge-b", "1"), ("edge-c", "2"), ("edge-d", None), ("edge-e", "1")):
        labels = f"{{region: eu, gpuop/rollout-wave: \"{wave}\"}}" if wave else "{region: eu}"
        (tmp_path / "profiles" / f"{name}.yaml").write_text(
            PROFILE.replace("name: east", f"name: {name}").replace("labels: {region: us-east-1}", f"labels: {labels}"))
    run_gpuop("synth", "--no-cache", cwd=tmp_path, check=True)
    (appset,) = load_all((tmp_path / "dist" / "fleet" / "argocd" / "applicationset.yaml").read_text())
    assert appset["spec"]["strategy"] == {"type": "RollingSync", "rollingSync": {"steps": [
        {"matchExpressions": [{"key": "gpuop/rollout-wave", "operator": "In", "values": [w]}]}
        for w in ("canary", "1", "2", "default")]}}
    assert appset["spec"]["template"]["metadata"]["labels"]["gpuop/rollout-wave"] == "{{.wave}}"
    assert CrdValidator.from_files([CRDS / "argoproj.io_applicationsets.yaml"]).errors(appset) == []
    params = {p.parent.parent.name: json.loads(p.read_text())["wave"]
              for p in (tmp_path / "dist").glob("*/params/cluster.json")}
    assert params == {"edge-a": "canary", "edge-b": "1", "edge-c": "2", "edge-d": "default", "edge-e": "1"}


def test_a_fleet_with_one_wave_keeps_the_plain_applicationset(dist):
    from gpuop.kube.yamlio import load_all

    (appset,) = load_all((dist / "fleet" / "argocd" / "applicationset.yaml").read_text())
    assert "strategy" not in appset["spec"]


def test_known_bad_combination_is_flagged_with_its_links_until_the_workaround_is_applied(project):
    f = project / "profiles" / "east.yaml"
    f.write_text(f.read_text().replace("upgradePolicy: {maxParallelUpgrades: 2}}",
                                       "upgradePolicy: {maxParallelUpgrades: 2}, rdma: {enabled: true}}"))
    proc = run_main("validate", cwd=project)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.splitlines()[0] == (
        "profiles/east.yaml:9:83: warning: spec.driver.rdma.enabled: known issue peermem-restart-without-reboot: the "
        "nvidia-peermem container may fail to restart when the driver pod restarts without a node reboot (the driver "
        "pod deleted or evicted with an unchanged driver config): the kernel state is not cleared; workaround: set "
        "FORCE_REINSTALL=true in the driver's env (spec.driver.env), so a restarted driver pod reinstalls the modules "
        "(sources: https://docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest/release-notes.html"
        "#v26-3-0-known-issues, https://github.com/NVIDIA/gpu-operator/issues/2844, "
        "https://github.com/NVIDIA/cloud-native-docs/pull/372)")
    f.write_text(f.read_text().replace("rdma: {enabled: true}}",
                                       'rdma: {enabled: true}, env: [{name: FORCE_REINSTALL, value: "true"}]}'))
    quiet = run_main("validate", cwd=project)
    assert quiet.returncode == 0 and "known issue" not in quiet.stderr
