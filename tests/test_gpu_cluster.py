"""A GPUCluster (spec.delivery.operator.gpuCluster: NVIDIA's operator deploying the DRA driver) is checked against
its prerequisites (catalog/data/dra.yaml gpuCluster, from the GPU Operator v26.7.0 release notes): Kubernetes 1.34+,
GPU driver 580+, a CDI container runtime, and no DRA driver chart of gpuop's beside the operator's; and on an operator
that has it (v26.7.0: catalog/data/operator.yaml), the pinned one or the stack release's. Each refusal is located at
the field to change."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import write_profile

from gpuop.catalog import dra as dra_catalog
from gpuop.errors import UserError
from gpuop.profile.load import load_profile
from gpuop.validate.runner import validate

SOURCE = dra_catalog.load().gpuCluster.source
NEEDS = "the GPUCluster (spec.delivery.operator.gpuCluster) needs"

GPU_CLUSTER = """\
platform: {type: kubernetes, version: "1.34"}
os: ubuntu24.04
delivery: {mode: operator, operator: {gpuCluster: true, clusterPolicy: false}}
nodePools:
  - {name: train, gpu: H100-SXM5-80GB}
"""


def write(folder: Path, spec: str) -> Path:
    return write_profile(folder, spec)         # conftest's one profile builder (c1.yaml, spec from line 5)


@pytest.fixture
def gpu_cluster(tmp_path, monkeypatch):
    """spec -> the located lines of the operator-gpu-cluster rule ([] when the profile is accepted)."""
    monkeypatch.chdir(tmp_path)

    def check(spec: str) -> list[str]:
        try:
            validate(load_profile(write(tmp_path, spec)))
            return []
        except UserError as exc:
            return [str(i).replace(f"{tmp_path}/", "") for i in exc.issues if i.rule == "operator-gpu-cluster"]
    return check


def test_a_gpu_cluster_on_its_prerequisites_is_accepted(gpu_cluster):
    assert gpu_cluster(GPU_CLUSTER) == []
    assert gpu_cluster(GPU_CLUSTER.replace("os: ubuntu24.04\n", "os: ubuntu24.04\ndriver: {version: \"580\"}\n")) == []


def test_a_gpu_cluster_below_kubernetes_1_34_is_refused_at_the_version(gpu_cluster):
    assert gpu_cluster(GPU_CLUSTER.replace('"1.34"', '"1.33"')) == [
        f"c1.yaml:5:32: spec.platform.version: {NEEDS} Kubernetes 1.34 or later; this cluster is 1.33 ({SOURCE})"]


def test_a_gpu_cluster_with_a_driver_below_580_is_refused_at_the_driver_that_sets_it(gpu_cluster):
    old = GPU_CLUSTER.replace("os: ubuntu24.04\n", "os: ubuntu24.04\ndriver: {version: \"535\"}\n")
    assert gpu_cluster(old) == [
        f"c1.yaml:7:12: spec.driver.version: {NEEDS} GPU driver 580 or later; pool 'train' gets branch 535 ({SOURCE})"]
    own = GPU_CLUSTER.replace("{name: train, gpu: H100-SXM5-80GB}", "{name: train, gpu: H100-SXM5-80GB, "
                              "driver: {version: \"535\"}}")
    assert gpu_cluster(own) == [f"c1.yaml:9:51: spec.nodePools[0].driver.version: {NEEDS} GPU driver 580 or later; "
                                f"pool 'train' gets branch 535 ({SOURCE})"]
    # the host's driver is not the profile's to check
    assert gpu_cluster(old.replace('driver: {version: "535"}', "driver: {enabled: false}")) == []


def test_a_gpu_cluster_on_docker_is_refused_for_want_of_cdi(gpu_cluster):
    assert gpu_cluster(GPU_CLUSTER.replace("os: ubuntu24.04\n", "os: ubuntu24.04\ncontainerRuntime: docker\n")) == [
        f"c1.yaml:8:41: spec.delivery.operator.gpuCluster: {NEEDS} a CDI container runtime (containerd, crio); this "
        f"cluster runs docker ({SOURCE})"]


def test_gpuops_own_dra_driver_beside_the_gpu_clusters_is_refused_at_the_pool(gpu_cluster):
    dra = GPU_CLUSTER.replace("nodePools:", "dra: {}\nnodePools:").replace(
        "gpu: H100-SXM5-80GB}", "gpu: H100-SXM5-80GB, allocation: dra}")
    assert gpu_cluster(dra) == [
        "c1.yaml:10:42: spec.nodePools[0].allocation: the GPUCluster's DRA driver (NVIDIA's operator runs it on every "
        "GPU node) already allocates this pool's GPUs, and allocation: dra makes gpuop deliver its own DRA driver "
        "chart beside it: two gpu.nvidia.com drivers would publish the same GPUs; remove allocation: dra, or turn "
        "spec.delivery.operator.gpuCluster off"]



@pytest.mark.parametrize("release, operator", [("26.3", "v26.3.3"), ("25.10", "v25.10.1")])
def test_a_gpu_cluster_on_a_release_whose_operator_predates_it_is_refused_pinned_or_not(gpu_cluster, tmp_path,
                                                                                        release, operator):
    # GPUCluster came with GPU Operator v26.7.0 (its CRD is in no older chart): an older spec.release deploys its
    # own operator, so the setting is refused there whether or not spec.delivery.operator.version names it
    older = GPU_CLUSTER.replace("os: ubuntu24.04\n", f'os: ubuntu24.04\nrelease: "{release}"\n')
    assert f"c1.yaml:8:41: spec.delivery.operator.gpuCluster: {NEEDS} a GPU Operator that has it " \
           f"(catalog/data/operator.yaml); stack release {release} (spec.release) runs GPU Operator {operator}, whose " \
           "chart has no GPUCluster CRD; use a newer spec.release or turn it off" in gpu_cluster(older)
    pinned = older.replace("{gpuCluster: true,", f"{{version: {operator}, gpuCluster: true,")
    with pytest.raises(UserError) as err:
        validate(load_profile(write(tmp_path, pinned)))
    assert f"c1.yaml:8:{41 + len(f'version: {operator}, ')}: spec.delivery.operator.gpuCluster: GPU Operator " \
           f"{operator} does not have the setting gpuCluster (catalog/data/operator.yaml); use a newer " \
           "spec.delivery.operator.version or drop it" in [str(i).replace(f"{tmp_path}/", "") for i in err.value.issues]
    assert gpu_cluster(GPU_CLUSTER.replace("os: ubuntu24.04\n", 'os: ubuntu24.04\nrelease: "26.7"\n')) == []
