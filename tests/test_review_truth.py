"""What a reviewer approves a pull request from tells the truth about the nodes.

The scenario is the one a new user tries: an EKS fleet behind an ECR mirror, delivered by Argo CD, in
git. Cluster `train`: a p5 pool split into a MIG node group and a whole-GPU node group (same GPU model,
so their nvidia.com/mig.config labels come from the node groups), the driver preinstalled by the EKS
AMI. Cluster `infer`: 16 L4 nodes with time-slicing, the driver from gpuop. The pull request bumps
infer's driver and changes train's MIG layout; `gpuop diff` and `gpuop diff --impact --format json`
must show the driver reinstall with its nodes, waves and time bound first, and the MIG change with its
trigger (the node group, not the merge). Then: every image any output can pull is in images.txt and
comes from the mirror.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import textwrap
from pathlib import Path

import pytest

import helm_python as helm

from conftest import REFS, REPO, run_gpuop
from gpuop.kube.yamlio import load_all

pytestmark = pytest.mark.slow       # two compiles of a two-cluster fleet, git, helm renders

MIRROR = "123456789012.dkr.ecr.us-east-1.amazonaws.com/nvidia"
TRAIN = f"""\
apiVersion: gpuop/v1alpha1
kind: ClusterProfile
metadata: {{name: train, labels: {{region: us-east-1}}}}
spec:
  platform: {{type: kubernetes, version: "1.34", distribution: eks}}
  driver: {{enabled: false}}
  toolkit: {{enabled: false}}
  images: {{registry: {MIRROR}}}
  nodePools:
    - name: p5-mig
      gpu: H100-SXM5-80GB
      nodes: 4
      gpusPerNode: 8
      nodeGroup: p5-mig
      nodeSelector: {{eks.amazonaws.com/nodegroup: p5-mig}}
      mig: {{strategy: mixed, layout: {{"3g.40gb": 2}}}}
    - name: p5-whole
      gpu: H100-SXM5-80GB
      nodes: 4
      gpusPerNode: 8
      nodeGroup: p5-whole
      nodeSelector: {{eks.amazonaws.com/nodegroup: p5-whole}}
"""
INFER = f"""\
apiVersion: gpuop/v1alpha1
kind: ClusterProfile
metadata: {{name: infer, labels: {{region: us-east-1}}}}
spec:
  # EKS nodes from a plain Ubuntu AMI (not the accelerated one): gpuop installs the driver and toolkit
  platform: {{type: kubernetes, version: "1.34"}}
  os: ubuntu24.04
  driver: {{version: "580.173.02", upgradePolicy: {{maxParallelUpgrades: 2}}}}
  images: {{registry: {MIRROR}}}
  nodePools:
    - name: l4
      gpu: L4
      nodes: 16
      gpusPerNode: 4
      nodeSelector: {{node.kubernetes.io/instance-type: g6.12xlarge}}
      sharing: {{timeSlicing: {{replicas: 4}}}}
"""


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@example.com", *args], cwd=cwd,
                          check=True, capture_output=True, text=True).stdout


@pytest.fixture(scope="module")
def fleet(tmp_path_factory) -> Path:
    """The fleet compiled and committed, then the pull request's edits in the work tree."""
    w = tmp_path_factory.mktemp("fleet")
    (w / "profiles").mkdir()
    (w / "profiles" / "train.yaml").write_text(TRAIN)
    (w / "profiles" / "infer.yaml").write_text(INFER)
    shutil.copy(REPO / "gpuop.yaml", w / "gpuop.yaml")
    run_gpuop("synth", "--no-cache", cwd=w, check=True)
    git(w, "init", "-q", "-b", "main")
    git(w, "add", "profiles", "dist", "gpuop.yaml")
    git(w, "commit", "-q", "-m", "fleet")
    return w


@pytest.fixture(scope="module")
def pull_request(fleet) -> Path:
    infer, train = fleet / "profiles" / "infer.yaml", fleet / "profiles" / "train.yaml"
    infer.write_text(infer.read_text().replace('version: "580.173.02"', 'version: "595.91.07"'))
    train.write_text(train.read_text().replace('layout: {"3g.40gb": 2}', 'layout: {"1g.10gb": 7}'))
    return fleet


def test_plain_diff_puts_the_destructive_effects_first_with_nodes_waves_bounds_and_triggers(pull_request):
    proc = run_gpuop("diff", "--against", "HEAD", "--exit-code", cwd=pull_request)
    assert proc.returncode == 3, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[:4] == [
        "DESTRUCTIVE: 3 effect(s) interrupt GPU workloads or delete things on clusters",
        "  !! cluster infer: driver-reinstall: pool l4: driver reinstall (580.173.02-ubuntu24.04 -> "
        "595.91.07-ubuntu24.04): GPU pods evicted, no drain, 2 node(s) at a time, 16 node(s) -> 8 wave(s), "
        "each up to 21m (startup probe); up to 2h48m in all",
        "  !! cluster train: mig-repartition: pool p5-mig: MIG reconfiguration (2x3g.40gb -> 7x1g.10gb): nothing "
        "happens on merge; change the node group p5-mig to nvidia.com/mig.config=7x1g.10gb, then the MIG manager "
        "evicts the GPU pods on the pool's nodes and repartitions every GPU; the pool's GPUs are unavailable until "
        "it is done [trigger: node-group-change of p5-mig] (4 node(s), no time bound: mig-parted has no timeout)",
        "  !! cluster train: mig-repartition: pool p5-mig: config 2x3g.40gb leaves the MIG manager's ConfigMap while "
        "the pool's nodes still carry nvidia.com/mig.config=2x3g.40gb (from the node group p5-mig): a node whose "
        "MIG manager restarts (a reboot) cannot apply it and reports nvidia.com/mig.config.state=failed; keep it "
        "with keepMigConfigs: [2x3g.40gb] on the pool until the node group is relabelled [trigger: node-reboot] "
        "(4 node(s))",
    ]
    # the changes that cause them are marked where they are listed, and the MIG counts are readable
    assert "  !! ~ DaemonSet gpu-operator/nvidia-driver-daemonset  (driver-reinstall)" in lines
    assert "  !! ~ ConfigMap gpu-operator/custom-mig-parted-config  (mig-repartition)" in lines
    assert "      data.config.yaml: changed (multi-line value):" in lines
    assert "        -      3g.40gb: 2" in lines and "        +      1g.10gb: 7" in lines
    assert not any(line.endswith("...") for line in lines)            # no value is cut


def test_impact_json_carries_every_field_for_a_bot(pull_request):
    proc = run_gpuop("diff", "--impact", "--format", "json", "--against", "HEAD", cwd=pull_request)
    doc = json.loads(proc.stdout)
    assert doc["kind"] == "Impact" and doc["destructive"] == 3
    driver, mig, lost = doc["effects"][:3]
    assert {k: driver[k] for k in ("cluster", "pool", "type", "nodes", "waves", "per_node_seconds", "bound_seconds",
                                   "trigger", "destructive")} == {
        "cluster": "infer", "pool": "l4", "type": "driver-reinstall", "nodes": 16, "waves": 8,
        "per_node_seconds": 1260, "bound_seconds": 8 * 1260, "trigger": "merge", "destructive": True}
    assert "DaemonSet gpu-operator/nvidia-driver-daemonset" in driver["objects"]
    assert {k: mig[k] for k in ("cluster", "pool", "type", "nodes", "trigger", "node_group", "set_labels")} == {
        "cluster": "train", "pool": "p5-mig", "type": "mig-repartition", "nodes": 4, "trigger": "node-group-change",
        "node_group": "p5-mig", "set_labels": {"nvidia.com/mig.config": "7x1g.10gb"}}
    assert (lost["kind"], lost["trigger"]) == ("mig-config-lost", "node-reboot")
    # the operand restarts are there too, not destructive
    assert all(not e["destructive"] for e in doc["effects"][3:])


def test_keeping_the_old_config_key_keeps_the_nodes_working_until_the_node_group_changes(pull_request, tmp_path):
    w = tmp_path / "w"
    shutil.copytree(pull_request, w)
    train = w / "profiles" / "train.yaml"
    train.write_text(train.read_text().replace("      nodeGroup: p5-mig\n",
                                               "      nodeGroup: p5-mig\n      keepMigConfigs: [2x3g.40gb]\n"))
    proc = run_gpuop("diff", "--impact", "--format", "json", "--against", "HEAD", cwd=w)
    kinds = [(e["cluster"], e["kind"]) for e in json.loads(proc.stdout)["effects"]]
    assert ("train", "mig-config-lost") not in kinds and ("train", "mig-reconfigure") in kinds
    run_gpuop("synth", cwd=w, check=True)
    config = [o for o in load_all((w / "dist" / "train" / "manifests").joinpath(
        next(p.name for p in (w / "dist" / "train" / "manifests").glob("*mig-manager*.yaml"))).read_text())
        if o["kind"] == "ConfigMap" and o["metadata"]["name"] == "custom-mig-parted-config"][0]
    configs = load_all(config["data"]["config.yaml"])[0]["mig-configs"]
    assert sorted(configs) == ["2x3g.40gb", "7x1g.10gb", "all-disabled"]
    assert configs["2x3g.40gb"][0]["mig-devices"] == {"3g.40gb": 2}


def test_label_provenance_is_in_the_index_and_the_node_labels_file(fleet):
    index = json.loads((fleet / "dist" / "index.json").read_text())
    train = next(c for c in index["clusters"] if c["name"] == "train")
    assert train["labelSources"]["p5-mig"] == {
        "eks.amazonaws.com/nodegroup": "node group p5-mig", "nvidia.com/mig.config": "node group p5-mig"}
    infer = next(c for c in index["clusters"] if c["name"] == "infer")
    assert infer["labelSources"]["l4"]["nvidia.com/device-plugin.config"] == "nfd rule"
    labels = load_all((fleet / "dist" / "train" / "node-labels.yaml").read_text())[0]
    assert [(p["name"], p["nodeGroup"], p["labels"]) for p in labels["pools"]] == [
        ("p5-mig", "p5-mig", {"nvidia.com/mig.config": "2x3g.40gb"}),
        ("p5-whole", "p5-whole", {"nvidia.com/mig.config": "all-disabled"})]


# ---- every image any output can pull: in images.txt, and from the mirror ---------------------------

def _images_in(obj) -> set[str]:
    """Every `image` string anywhere in a document, and NFD-style {repository, tag} pairs."""
    out: set[str] = set()
    if isinstance(obj, dict):
        if isinstance(obj.get("image"), str):
            out.add(obj["image"])
        for v in obj.values():
            out |= _images_in(v)
    elif isinstance(obj, list):
        for v in obj:
            out |= _images_in(v)
    return out


def _render(chart_dir: Path, values: dict, name: str, namespace: str) -> list[dict]:
    chart = helm.Chart.load(str(chart_dir))
    try:
        out = chart.render(values, name=name, namespace=namespace)
    finally:
        chart.close()
    return [o for p in sorted(out) if p.endswith(".yaml") for o in load_all(out[p]) if isinstance(o, dict)]


NFD_CHART = REFS / "gpu-operator" / "chart" / "charts" / "node-feature-discovery"
DRA_CHART = REFS / "dra" / "chart"      # NVIDIA's DRA driver chart (0.5.0-dev at the pinned commit)
DELIVERED = {"node-feature-discovery": NFD_CHART, "dra-driver-nvidia-gpu": DRA_CHART}


def pulled_images(dist: Path, cluster: str) -> set[str]:
    """What the outputs of a cluster can make a node pull: the manifests, its chart rendered with its
    defaults (the `helm test` pod included), NFD's chart rendered with the values of the Argo CD
    Application and of the Flux HelmRelease, and any image named in a GitOps object."""
    base = dist / cluster
    refs: set[str] = set()
    for f in sorted(base.rglob("*.yaml")):
        if "/chart/" in f.as_posix():
            continue
        for doc in load_all(f.read_text()):
            refs |= _images_in(doc)
            if not isinstance(doc, dict):
                continue
            if doc.get("kind") == "Application" and doc["spec"]["source"].get("chart") in DELIVERED:
                src = doc["spec"]["source"]
                refs |= _images_in(_render(DELIVERED[src["chart"]], src["helm"]["valuesObject"],
                                           src["helm"]["releaseName"], doc["spec"]["destination"]["namespace"]))
            if doc.get("kind") == "HelmRelease" and doc["spec"].get("chart", {}).get("spec", {}).get(
                    "chart") in DELIVERED:
                refs |= _images_in(_render(DELIVERED[doc["spec"]["chart"]["spec"]["chart"]], doc["spec"]["values"],
                                           doc["spec"]["releaseName"], doc["spec"]["targetNamespace"]))
    index = json.loads((dist / "index.json").read_text())
    entry = next(c for c in index["clusters"] if c["name"] == cluster)
    refs |= _images_in(_render(dist / entry["chart"], {}, entry["releaseName"], entry["namespace"]))
    return refs


def test_images_txt_covers_every_image_any_output_can_pull(fleet):
    for cluster in ("train", "infer"):
        listed = set((fleet / "dist" / cluster / "images.txt").read_text().split())
        pulled = pulled_images(fleet / "dist", cluster)
        assert any("node-feature-discovery" in r for r in pulled) and any("cuda-sample" in r for r in pulled)
        assert pulled <= listed, sorted(pulled - listed)


def test_the_bundled_profiles_images_txt_cover_what_they_pull(dist, index):
    for entry in index["clusters"]:
        if (dist / entry["name"] / "operator").is_dir():
            continue                 # NVIDIA's chart brings its own images
        listed = set((dist / entry["name"] / "images.txt").read_text().split())
        pulled = pulled_images(dist, entry["name"])
        if entry["name"] == "dra":   # the DRA driver's chart rendered: its image is pulled, and listed
            assert any("dra-driver-nvidia-gpu" in r for r in pulled), sorted(pulled)
        assert pulled <= listed, (entry["name"], sorted(pulled - listed))


# an image reference on a public registry, or NFD's public chart repository
PUBLIC = re.compile(r"(nvcr\.io|registry\.k8s\.io|docker\.io|quay\.io|ghcr\.io|gcr\.io)/[a-z0-9._/-]+(:[\w.-]+|@sha256)"
                    r"|kubernetes-sigs\.github\.io")


def test_a_mirror_only_cluster_references_nothing_outside_the_mirror(fleet):
    for cluster in ("train", "infer"):
        assert all(r.startswith(MIRROR + "/") for r in pulled_images(fleet / "dist", cluster))
        for f in sorted((fleet / "dist" / cluster).rglob("*")):
            if f.is_file() and f.suffix in (".yaml", ".json", ".txt"):
                hits = [line for line in f.read_text().splitlines() if PUBLIC.search(line)]
                assert hits == [], (f, hits)
        nfd = load_all((fleet / "dist" / cluster / "argocd" / "nfd-application.yaml").read_text())[0]
        assert nfd["spec"]["source"]["repoURL"] == MIRROR            # the chart through the mirror too
        repo = load_all((fleet / "dist" / cluster / "flux" / "nfd-helmrepository.yaml").read_text())[0]
        assert repo["spec"] == {"type": "oci", "url": f"oci://{MIRROR}", "interval": "10m"}


def test_the_digest_lock_pins_nfd_and_the_smoke_test_image(fleet, tmp_path):
    w = tmp_path / "w"
    shutil.copytree(fleet / "profiles", w / "profiles")
    shutil.copy(fleet / "gpuop.yaml", w / "gpuop.yaml")
    listing = run_gpuop("images", "profiles/infer.yaml", cwd=w, check=True).stdout.split()
    keys = [ref.removeprefix(MIRROR + "/") for ref in listing if ref != "infer"]
    lock = {"apiVersion": "gpuop/v1alpha1", "kind": "ImageDigests",
            "images": {k: "sha256:" + format(i, "064x") for i, k in enumerate(keys)}}
    (w / "images.lock.json").write_text(json.dumps(lock))
    infer = w / "profiles" / "infer.yaml"
    infer.write_text(infer.read_text().replace(f"registry: {MIRROR}}}", f"registry: {MIRROR}, "
                                               "digestLock: ../images.lock.json}"))
    run_gpuop("synth", "profiles/infer.yaml", "-o", "dist", cwd=w, check=True)
    listed = (w / "dist" / "infer" / "images.txt").read_text().split()
    assert len(listed) == len(keys) and all("@sha256:" in r for r in listed)
    assert pulled_images(w / "dist", "infer") <= set(listed)
    nfd = lock["images"]["nfd/node-feature-discovery:v0.19.0"]
    smoke = lock["images"]["k8s/cuda-sample:vectoradd-cuda12.5.0"]
    assert f"{MIRROR}/nfd/node-feature-discovery:v0.19.0@{nfd}" in listed
    assert f"{MIRROR}/k8s/cuda-sample:vectoradd-cuda12.5.0@{smoke}" in listed
    # a lock without NFD's image is refused, located
    del lock["images"]["nfd/node-feature-discovery:v0.19.0"]
    (w / "images.lock.json").write_text(json.dumps(lock))
    proc = run_gpuop("synth", "--no-cache", "profiles/infer.yaml", "-o", "dist", cwd=w)
    assert proc.returncode == 2 and "nfd/node-feature-discovery:v0.19.0" in proc.stderr, proc.stderr


def test_wait_budgets_follow_what_rolls(fleet):
    """train has no driver DaemonSet (the EKS AMI's driver): its Flux wait is the operands' roll of its 8
    nodes (8 x 2 minutes), not driver waves; infer rolls 16 nodes' drivers 2 at a time."""
    def timeout(cluster):
        hr = load_all((fleet / "dist" / cluster / "flux" / "helmrelease.yaml").read_text())[0]
        return hr["spec"]["timeout"]
    assert timeout("train") == "16m"
    assert timeout("infer") == f"{8 * 26}m"
    app = load_all((fleet / "dist" / "train" / "argocd" / "application.yaml").read_text())[0]
    assert app["spec"]["syncPolicy"]["retry"]["backoff"]["maxDuration"] == "2m"


# ---- the fleet report against the revision ---------------------------------------------------------

@pytest.fixture(scope="module")
def report(pull_request) -> str:
    run_gpuop("report", "--against", "HEAD", cwd=pull_request, check=True)
    return (pull_request / "report" / "index.html").read_text()


def test_report_shows_sharing_and_physical_apart_from_advertised_devices(report):
    infer = report[report.index('id="c-infer"'):]
    start = infer.index('data-pool="l4"')
    row = infer[start:infer.index("</tr>", start)]
    assert '<td class="sharing">4 GPUs x time-slicing 4</td>' in row
    assert '<td class="physical">64</td>' in row                   # 16 nodes x 4 GPUs
    assert "nvidia.com/gpu: 256" in row                           # what the device plugin advertises
    train = report[report.index('id="c-train"'):]
    assert '<td class="sharing">8 GPUs x MIG 7x1g.10gb</td>' in train
    # the fleet total: 64 + 2 x 32 physical GPUs, the replicas and MIG devices apart
    assert '<span id="fleet-physical">128</span> physical GPU(s)' in report
    assert "nvidia.com/gpu: 288" in report[report.index('id="fleet-advertised"'):]


def test_report_against_a_revision_has_before_after_columns_and_destructive_effects_on_top(report):
    top = report.index('id="destructive"')
    assert top < report.index('id="fleet"') < report.index('id="c-infer"')
    section = report[top:report.index("</section>")]
    assert section.count("<li") == 3 and "driver reinstall" in section
    assert "change the node group p5-mig to nvidia.com/mig.config=7x1g.10gb" in section
    assert 'data-trigger="node-group-change"' in section
    train = report[report.index('id="c-train"'):]
    assert "<th>Config labels: before &rarr; after</th>" in train
    assert ('<span class="muted">nvidia.com/mig.config=2x3g.40gb</span> &rarr; nvidia.com/mig.config=7x1g.10gb'
            in train)
    assert '<span class="muted">0.1.0</span> &rarr; 0.1.1' in train      # the chart version, before -> after
    # in each cluster, the destructive effects come before its pool table and first in its list
    assert train.index("Next synth: impact") < train.index('<table class="pools">')


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--enable-logging=stderr", "--v=0"]


@pytest.mark.skipif(CHROMIUM is None, reason="chromium not installed (.ci/run installs Debian's chromium)")
def test_report_in_chromium_shows_the_destructive_effects_first(pull_request, report, tmp_path):
    import os

    page = pull_request / "report" / "index.html"
    profile = tmp_path / "chromium"
    dom = subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={profile}", "--dump-dom", page.as_uri()],
                         capture_output=True, text=True, timeout=120)
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert [line for line in dom.stderr.splitlines() if "CONSOLE" in line or "Uncaught" in line] == []
    html = dom.stdout
    assert 'data-ready="yes"' in html
    assert html.index('id="destructive"') < html.index('id="fleet"')
    assert '<td class="sharing">4 GPUs x time-slicing 4</td>' in html
    artifacts = Path(os.environ.get("GPUOP_ARTIFACTS", tmp_path))
    artifacts.mkdir(parents=True, exist_ok=True)
    shot = subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={profile}", "--window-size=1400,1800",
                           f"--screenshot={artifacts / 'report-against.png'}", page.as_uri()],
                          capture_output=True, text=True, timeout=120)
    assert shot.returncode == 0 and (artifacts / "report-against.png").stat().st_size > 10_000


def test_a_mirror_only_dra_cluster_pulls_the_dra_driver_from_the_mirror(tmp_path):
    w = tmp_path / "w"
    shutil.copytree(REPO / "profiles", w / "profiles")
    shutil.copy(REPO / "gpuop.yaml", w / "gpuop.yaml")
    for f in (w / "profiles").glob("*.yaml"):
        if f.name not in ("dra.yaml", "_base.yaml"):
            f.unlink()
    dra = w / "profiles" / "dra.yaml"
    dra.write_text(dra.read_text().replace("  containerRuntime: containerd\n",
                                           f"  containerRuntime: containerd\n  images: {{registry: {MIRROR}}}\n"))
    run_gpuop("synth", "-o", "dist", cwd=w, check=True)
    pulled = pulled_images(w / "dist", "dra")
    assert f"{MIRROR}/dra-driver-nvidia-gpu:v0.5.0" in pulled
    assert all(r.startswith(MIRROR + "/") for r in pulled), sorted(pulled)
    assert pulled <= set((w / "dist" / "dra" / "images.txt").read_text().split())
    for f in sorted((w / "dist" / "dra").rglob("*")):
        if f.is_file() and f.suffix in (".yaml", ".json", ".txt"):
            hits = [line for line in f.read_text().splitlines() if PUBLIC.search(line)]
            assert hits == [], (f, hits)
    app = load_all((w / "dist" / "dra" / "argocd" / "dra-application.yaml").read_text())[0]
    assert app["spec"]["source"]["repoURL"] == MIRROR                 # the chart through the mirror too
    repo = load_all((w / "dist" / "dra" / "flux" / "dra-helmrepository.yaml").read_text())[0]
    assert repo["spec"]["url"] == f"oci://{MIRROR}"
