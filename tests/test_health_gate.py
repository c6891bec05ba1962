"""The health gate: per pool, a Job per check on the pool's nodes (a CUDA sample per advertised resource, DCGM
diagnostics at the profile's level, the NCCL test across a node's GPUs), a hook of helm test / Flux's tests and of
Argo CD's PostSync; the pool's own fields override the cluster's; the rules refuse what could not run, located;
`gpuop diff` shows a gate change. The gate holding a wave on a real helm-controller: test_health_gate_rehearsal.py."""

from __future__ import annotations

import re
import shutil

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuop.components.health_gate import CheckProps, HealthGate, HealthGateProps, PoolGateProps, job_name

from conftest import REPO, run_main, write_profile

PROFILES = REPO / "profiles"
CLUSTERS = sorted(yaml.safe_load(p.read_text())["metadata"]["name"] for p in PROFILES.glob("*.yaml")
                  if not p.stem.startswith("_"))


@pytest.fixture(scope="module")
def dist(tmp_path_factory):
    out = tmp_path_factory.mktemp("dist")
    assert run_main("synth", str(PROFILES), "-o", str(out), cwd=REPO).returncode == 0
    return out


def _gate(dist, cluster: str) -> list[dict]:
    folder = dist / cluster / "manifests"
    if not (folder / "18-health-gate.yaml").is_file():
        folder = dist / cluster / "preview" / "manifests"       # operator mode: gpuop's own objects' preview
    return [d for d in yaml.safe_load_all((folder / "18-health-gate.yaml").read_text()) if d]


def _props(**pool) -> HealthGateProps:
    base = {"pool": "p", "checks": (CheckProps(kind="cuda", slug="cuda-gpu", image="r/cuda:1",
                                               resources={"nvidia.com/gpu": 1}, deadline=240),)}
    return HealthGateProps(pools=(PoolGateProps(**{**base, **pool}),))


def test_a_check_is_a_helm_test_and_an_argocd_postsync_hook_replaced_on_each_run():
    (job,) = HealthGate.render(_props())
    a = job["metadata"]["annotations"]
    assert a["helm.sh/hook"] == "test" and a["argocd.argoproj.io/hook"] == "PostSync"
    assert a["helm.sh/hook-delete-policy"] == "before-hook-creation"
    assert a["argocd.argoproj.io/hook-delete-policy"] == "BeforeHookCreation"
    assert job["spec"]["backoffLimit"] == 0 and job["spec"]["activeDeadlineSeconds"] == 240


def test_a_check_covers_each_node_once_pinned_to_the_pool():
    (job,) = HealthGate.render(_props(nodes=3, node_selector={"pool": "p"},
                                      tolerations=(("dedicated", "ml", "NoSchedule"),)))
    spec = job["spec"]["template"]["spec"]
    assert job["spec"]["completions"] == job["spec"]["parallelism"] == 3
    (term,) = spec["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert term == {"labelSelector": {"matchLabels": {"batch.kubernetes.io/job-name": "gpuop-gate-p-cuda-gpu"}},
                    "topologyKey": "kubernetes.io/hostname"}
    assert spec["nodeSelector"] == {"nvidia.com/gpu.present": "true", "pool": "p"}
    assert {"key": "dedicated", "operator": "Equal", "value": "ml", "effect": "NoSchedule"} in spec["tolerations"]
    assert spec["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == 1
    assert spec["runtimeClassName"] == "nvidia"


def test_one_node_needs_no_anti_affinity_and_the_dcgm_check_requests_no_gpu():
    (job,) = HealthGate.render(_props(checks=(CheckProps(kind="dcgm", slug="dcgm", image="r/dcgm:1",
                                                         command=("dcgmi", "diag", "-r", "1"), deadline=120),)))
    spec = job["spec"]["template"]["spec"]
    assert "affinity" not in spec and "runtimeClassName" not in spec
    assert "nvidia.com/gpu" not in spec["containers"][0]["resources"]["limits"]


def test_on_openshift_the_pods_take_their_user_id_from_the_scc_and_elsewhere_run_as_10001(dist):
    (job,) = HealthGate.render(_props())
    assert job["spec"]["template"]["spec"]["securityContext"]["runAsUser"] == 10001
    (job,) = HealthGate.render(HealthGateProps(openshift=True, pools=_props().pools))
    sc = job["spec"]["template"]["spec"]["securityContext"]
    # restricted-v2 (MustRunAsRange) refuses a user id outside the namespace's range and assigns one itself
    assert "runAsUser" not in sc and sc["runAsNonRoot"] is True
    assert all("runAsUser" not in j["spec"]["template"]["spec"]["securityContext"] for j in _gate(dist, "openshift"))


def test_long_job_names_stay_dns_labels_and_apart():
    a, b = job_name("p" * 40, "cuda-mig-1g-10gb"), job_name("p" * 40, "cuda-mig-2g-20gb")
    assert len(a) <= 63 and len(b) <= 63 and a != b
    assert job_name("train", "dcgm") == "gpuop-gate-train-dcgm"


@pytest.mark.parametrize("cluster", CLUSTERS)
def test_every_example_cluster_has_its_gate(dist, cluster):
    jobs = _gate(dist, cluster)
    assert jobs and all(j["kind"] == "Job" for j in jobs)
    assert all(j["metadata"]["annotations"]["helm.sh/hook"] == "test" for j in jobs)


def test_a_mig_pool_runs_a_sample_per_profile_and_a_shared_pool_on_its_replicas(dist):
    jobs = {j["metadata"]["name"]: j for j in _gate(dist, "mig-sharing")}
    assert {"gpuop-gate-train-cuda-mig-1g-10gb", "gpuop-gate-train-cuda-mig-2g-20gb",
            "gpuop-gate-train-cuda-mig-3g-40gb"} <= set(jobs)
    limits = jobs["gpuop-gate-train-cuda-mig-2g-20gb"]["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]
    assert limits["nvidia.com/mig-2g.20gb"] == 1


def test_dcgm_diagnostics_run_where_the_host_engine_runs_against_its_service(dist):
    jobs = {j["metadata"]["name"]: j for j in _gate(dist, "full-stack")}
    c = jobs["gpuop-gate-train-dcgm"]["spec"]["template"]["spec"]["containers"][0]
    assert c["command"][:4] == ["dcgmi", "diag", "-r", "2"] and c["command"][-2:] == ["--host", "nvidia-dcgm:5555"]
    # the frontier pool's own level over the cluster's
    assert jobs["gpuop-gate-frontier-dcgm"]["spec"]["template"]["spec"]["containers"][0]["command"][3] == "1"
    assert "/cloud-native/dcgm:" in c["image"]


def test_the_gate_images_are_in_the_images_list(dist):
    for cluster in CLUSTERS:
        if not (dist / cluster / "images.txt").is_file():
            continue                    # operator mode: NVIDIA's chart lists its images (docs/operator.md)
        listed = (dist / cluster / "images.txt").read_text().split()
        for j in _gate(dist, cluster):
            assert j["spec"]["template"]["spec"]["containers"][0]["image"] in listed, (cluster, j["metadata"]["name"])


def test_flux_runs_the_gate_as_the_stack_releases_test_and_never_remediates_a_failed_one(dist):
    hr = yaml.safe_load((dist / "mig-sharing" / "flux" / "helmrelease.yaml").read_text())
    assert hr["spec"]["test"] == {"enable": True, "timeout": "6m",
                                  "filters": [{"name": "mig-sharing-gpu-smoke-test", "exclude": True}]}
    assert hr["spec"]["install"]["remediation"]["ignoreTestFailures"] is True
    assert hr["spec"]["upgrade"]["remediation"]["ignoreTestFailures"] is True


GATED = """\
platform: {type: kubernetes, version: "1.33"}
os: ubuntu24.04
dcgm: {enabled: true}
healthGate: {dcgmDiagLevel: 2}
nodePools:
  - name: a
    gpu: H100-SXM5-80GB
    nodes: 3
    gpusPerNode: 8
    healthGate: {dcgmDiagLevel: 3, nccl: true, ncclImage: "team/nccl-tests:2.13"}
  - name: b
    gpu: L40S
    healthGate: {cudaSample: false}
  - name: c
    gpu: L4
    healthGate: {enabled: false}
"""


def _compile(tmp_path, text: str):
    path = write_profile(tmp_path, text)
    shutil.copy(REPO / "gpuop.yaml", tmp_path / "gpuop.yaml")
    r = run_main("synth", str(path), "-o", str(tmp_path / "out"), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    return {d["metadata"]["name"]: d for d in yaml.safe_load_all(
        (tmp_path / "out" / "c1" / "manifests" / "18-health-gate.yaml").read_text()) if d}


def test_a_pools_fields_override_the_clusters(tmp_path):
    jobs = _compile(tmp_path, GATED)
    assert sorted(jobs) == ["gpuop-gate-a-cuda-gpu", "gpuop-gate-a-dcgm", "gpuop-gate-a-nccl", "gpuop-gate-b-dcgm"]
    cmd = lambda n: jobs[n]["spec"]["template"]["spec"]["containers"][0]["command"]   # noqa: E731
    assert cmd("gpuop-gate-a-dcgm")[3] == "3" and cmd("gpuop-gate-b-dcgm")[3] == "2"
    nccl = jobs["gpuop-gate-a-nccl"]["spec"]
    assert nccl["completions"] == 3
    assert cmd("gpuop-gate-a-nccl")[-2:] == ["-g", "8"]
    assert nccl["template"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == 8
    assert nccl["template"]["spec"]["containers"][0]["image"].endswith("/team/nccl-tests:2.13")
    # level 3 is ~30 min per node: the Job's budget is twice that
    assert jobs["gpuop-gate-a-dcgm"]["spec"]["activeDeadlineSeconds"] == 3600


def test_a_cluster_with_the_gate_off_everywhere_writes_no_gate_and_flux_runs_no_test(tmp_path):
    path = write_profile(tmp_path, """\
        platform: {type: kubernetes, version: "1.33"}
        os: ubuntu24.04
        healthGate: {enabled: false}
        nodePools:
          - name: a
            gpu: L40S
          - name: b
            gpu: L4
            healthGate: {cudaSample: false, enabled: true}
        """)
    shutil.copy(REPO / "gpuop.yaml", tmp_path / "gpuop.yaml")
    assert run_main("synth", str(path), "-o", str(tmp_path / "out"), cwd=tmp_path).returncode == 0
    assert not (tmp_path / "out" / "c1" / "manifests" / "18-health-gate.yaml").exists()
    hr = yaml.safe_load((tmp_path / "out" / "c1" / "flux" / "helmrelease.yaml").read_text())
    assert "test" not in hr["spec"] and "ignoreTestFailures" not in hr["spec"]["install"]["remediation"]


BAD = """\
platform: {type: kubernetes, version: "1.33"}
os: ubuntu24.04
healthGate: {dcgmDiagLevel: 5}
nodePools:
  - name: a
    gpu: H100-SXM5-80GB
    gpusPerNode: 1
    healthGate: {nccl: true, dcgmDiagLevel: 2}
  - name: b
    gpu: A100-SXM4-80GB
    mig: {strategy: mixed, layout: {1g.10gb: 7}}
    healthGate: {nccl: true, ncclImage: "team/nccl-tests:2.13"}
  - name: c
    gpu: L40S
    healthGate: {nccl: true, ncclImage: "team/nccl-tests:2.13"}
"""


def test_impossible_checks_are_refused_located(tmp_path):
    path = write_profile(tmp_path, BAD)
    shutil.copy(REPO / "gpuop.yaml", tmp_path / "gpuop.yaml")
    r = run_main("synth", str(path), "-o", str(tmp_path / "out"), cwd=tmp_path)
    assert r.returncode == 2, r.stderr
    assert r.stderr.splitlines() == [
        'c1.yaml:7:16: spec.healthGate.dcgmDiagLevel: Unsupported value: 5: supported values: "0", "1", "2", "3", "4"',
        "c1.yaml:12:20: spec.nodePools[0].healthGate.nccl: Invalid value: true: the pool's nodes have 1 GPU each, and "
        "an NCCL test runs across 2 or more GPUs of a node",
        "c1.yaml:12:20: spec.nodePools[0].healthGate.nccl: Required value: ncclImage: NVIDIA publishes nccl-tests as "
        "source only; name the image you built (<path>:<tag> below spec.images.registry)",
        "c1.yaml:12:32: spec.nodePools[0].healthGate.dcgmDiagLevel: Invalid value: 2: DCGM diagnostics run against "
        "the node's standalone DCGM host engine, and spec.dcgm.enabled is false (the exporter's embedded engine "
        "serves no dcgmi); set spec.dcgm.enabled: true or dcgmDiagLevel: 0",
        "c1.yaml:16:20: spec.nodePools[1].healthGate.nccl: Invalid value: true: an NCCL test needs whole GPUs of one "
        "node, and the pool's GPUs are MIG-partitioned (no whole GPU to request)",
        "c1.yaml:17:7: spec.nodePools[2].gpusPerNode: Required value: the pool's health gate runs an NCCL test "
        "across a node's GPUs; say how many GPUs a node has (no well-known instance type in its nodeSelector tells)",
        "gpuop: 6 errors; nothing written"], r.stderr
    assert not (tmp_path / "out").exists()


def test_diff_shows_a_gate_change_as_its_job_changed(tmp_path):
    shutil.copytree(PROFILES, tmp_path / "profiles")
    shutil.copy(REPO / "gpuop.yaml", tmp_path / "gpuop.yaml")
    assert run_main("synth", "profiles/full-stack.yaml", "-o", "dist", cwd=tmp_path).returncode == 0
    p = tmp_path / "profiles" / "full-stack.yaml"
    text = p.read_text()
    assert "\n  healthGate: {dcgmDiagLevel: 2}\n" in text
    p.write_text(text.replace("\n  healthGate: {dcgmDiagLevel: 2}\n", "\n  healthGate: {dcgmDiagLevel: 3}\n"))
    r = run_main("diff", "profiles/full-stack.yaml", "-o", "dist", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert "  ~ Job gpu-operator/gpuop-gate-train-dcgm" in lines, r.stdout
    assert "      spec.activeDeadlineSeconds: 240 -> 3600" in lines, r.stdout
    assert "      spec.template.spec.containers[dcgm].command[3]: 2 -> 3" in lines, r.stdout
    assert "      spec.test.timeout: 6m -> 62m" in lines, r.stdout          # Flux waits for the longer check


def test_the_flux_overlay_waits_for_the_gate_jobs_and_recreates_a_changed_one(dist):
    k = yaml.safe_load((dist / "mig-sharing" / "flux-overlay" / "stack-kustomization.yaml").read_text())
    jobs = sorted(j["metadata"]["name"] for j in _gate(dist, "mig-sharing"))
    assert sorted(c["name"] for c in k["spec"]["healthChecks"] if c["kind"] == "Job") == jobs
    assert all(j["metadata"]["annotations"]["kustomize.toolkit.fluxcd.io/force"] == "enabled"
               for j in _gate(dist, "mig-sharing"))


_LABEL = "abcdefghijklmnopqrstuvwxyz0123456789-"


@settings(max_examples=300, deadline=None)
@given(pool=st.text(_LABEL, min_size=1, max_size=63).filter(lambda s: s[0] != "-" and s[-1] != "-"),
       slug=st.sampled_from(["dcgm", "nccl", "cuda-gpu", "cuda-gpu-shared", "cuda-mig-1g-10gb", "cuda-mig-7g-80gb"]))
def test_a_job_name_is_a_dns_label_and_names_one_pool_and_check(pool, slug):
    name = job_name(pool, slug)
    assert 1 <= len(name) <= 63 and re.fullmatch(r"[a-z0-9]([a-z0-9-]*[a-z0-9])?", name), name
    other = job_name(pool + "x" if len(pool) < 63 else pool[:-1] + "x", slug)
    assert other != name
