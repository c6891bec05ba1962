"""Known-bad combinations (catalog/data/known-issues.yaml): for each entry a profile that hits it gets the
exact located message with its source links, and the same profile with the workaround applied (or just
outside the entry's versions) gets none.

The rules run through the real validate stage (validate.validate) on profiles written to a temporary
folder; one test goes through the CLI to show what a user reads. The peermem entry's test is in
tests/test_fleet_insight.py.
"""

from __future__ import annotations

import shutil

import pytest

from conftest import REPO, run_main, spec_issues, write_profile
from gpuop import catalog
from gpuop.catalog import known_issues as known_catalog
from gpuop.profile.load import load_profile
from gpuop.validate.runner import validate


GKE = """\
platform: {type: kubernetes, version: "1.33", distribution: gke}
driver: {enabled: false}
nodePools:
  - {name: infer, gpu: L4, nodeSelector: {cloud.google.com/gke-accelerator: nvidia-l4}}
"""

RHEL8 = """\
platform: {type: kubernetes, version: "1.34"}
os: rhel8.10
driver: {enabled: false}
migManager: {version: v0.14.0}
nodePools:
  - name: train
    gpu: H100-SXM5-80GB
    mig: {strategy: mixed, layout: {"3g.40gb": 2}}
"""

PASSTHROUGH = """\
platform: {type: kubernetes, version: "1.34"}
os: ubuntu24.04
containerRuntime: containerd
dra: {featureGates: {PassthroughSupport: true}}
nodePools:
  - {name: vm, gpu: H100-SXM5-80GB, allocation: dra}
"""

GKE_ISSUE = (
    "known issue gke-toolkit-rewrites-containerd-config: on GKE 1.33 and later (containerd 2.0) the container "
    "toolkit can write a wrong containerd config.toml (a CNI bin_dir the GKE network plugin is not in), after "
    "which the GPU Operator's pods cannot create their sandboxes and never start; workaround: set "
    "RUNTIME_CONFIG_SOURCE=file in the toolkit's env (spec.toolkit.env), so the toolkit starts from the node's "
    "config file rather than from `containerd config dump` (sources: "
    "https://docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest/google-gke.html, "
    "https://docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest/release-notes.html#v25-10-0, "
    "https://github.com/NVIDIA/gpu-operator/issues/1577, https://github.com/NVIDIA/nvidia-container-toolkit/issues/1222, "
    "https://github.com/NVIDIA/cloud-native-docs/pull/312)")

RHEL8_ISSUE = (
    "known issue mig-parted-glibc-on-rhel8-host-driver: with the driver preinstalled on a RHEL 8 node, the MIG "
    "manager runs nvidia-mig-parted on the host through chroot, and the binary of MIG manager v0.13.1 and v0.14.0 "
    "(built on UBI 9) needs GLIBC_2.32 and GLIBC_2.34, which RHEL 8 (glibc 2.28) lacks: the MIG layout is never "
    "applied; workaround: use MIG manager v0.14.1 or later (built on UBI 8): drop spec.migManager.version for the "
    "release's v0.15.0 (NVIDIA's first workaround, v0.12.3, has no per-node generated MIG configs) (sources: "
    "https://docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest/release-notes.html#v26-3-0-known-issues, "
    "https://github.com/NVIDIA/mig-parted/issues/329, https://github.com/NVIDIA/mig-parted/pull/345)")

PASSTHROUGH_ISSUE = (
    "known issue dra-passthrough-double-allocation: with PassthroughSupport the DRA driver advertises each eligible "
    "GPU twice, as a container GPU and as a VFIO device; a container claim and a VFIO claim for the same GPU that "
    "are both allocated before either is prepared both get it, and the second preparation fails; workaround: "
    "submit container and VM workloads one after the other, waiting for device preparation, or keep container "
    "and VFIO workloads on separate nodes (labels and node selectors) (sources: "
    "https://docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest/release-notes.html#v26-7-0, "
    "https://docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest/gpu-operator-kubevirt-dra.html, "
    "https://dra-driver-nvidia-gpu.sigs.k8s.io/docs/guides/gpu-allocation/kubevirt-vfio-gpu-passthrough/"
    "#limitations-and-considerations)")


@pytest.fixture
def known(tmp_path, monkeypatch):
    """spec (YAML under `spec:`) -> the located known-issue lines, errors and warnings, as the CLI prints them."""
    monkeypatch.chdir(tmp_path)

    def check(spec: str) -> list[str]:
        return [str(i).replace(f"{tmp_path}/", "") for i in spec_issues(tmp_path, spec) if "known issue" in i.message]
    return check


def test_gke_from_1_33_is_warned_the_toolkit_rewrites_containerd_config_until_it_reads_the_file(known):
    assert known(GKE) == [f"c1.yaml:5:49: warning: spec.platform.distribution: {GKE_ISSUE}"]
    fixed = GKE.replace("driver: {enabled: false}", "driver: {enabled: false}\n"
                        "toolkit: {env: [{name: RUNTIME_CONFIG_SOURCE, value: file}]}")
    assert known(fixed) == []
    assert known(GKE.replace('"1.33"', '"1.32"')) == []              # containerd 1.7 on GKE 1.32
    assert known(GKE.replace("distribution: gke", "distribution: eks")
                    .replace("driver: {enabled: false}", "driver: {enabled: false}\ntoolkit: {enabled: false}")) == []


def test_mig_manager_built_on_ubi9_is_refused_on_rhel8_nodes_with_a_host_driver(known):
    assert known(RHEL8) == [f"c1.yaml:8:16: spec.migManager.version: {RHEL8_ISSUE}"]
    assert known(RHEL8.replace("v0.14.0", "v0.13.1")) == [f"c1.yaml:8:16: spec.migManager.version: {RHEL8_ISSUE}"]
    assert known(RHEL8.replace("v0.14.0", "v0.14.1")) == []                       # the UBI 8 build
    assert known(RHEL8.replace("migManager: {version: v0.14.0}\n", "")) == []     # the release's v0.15.0
    assert known(RHEL8.replace("driver: {enabled: false}", "driver: {enabled: true}")) == []   # gpuop's driver
    assert known(RHEL8.replace("rhel8.10", "rhel9.6")) == []


def test_rhel8_mig_issue_needs_the_os_the_layout_and_the_host_driver_on_one_pool(known):
    # the RHEL 8 pool has no MIG layout; the MIG pool runs Ubuntu: no pool hits all three
    split = RHEL8.replace("os: rhel8.10\n", "os: ubuntu24.04\n") + (
        "  - {name: infer, gpu: L40S, os: rhel8.10}\n")
    assert known(split) == []
    assert known(split.replace("gpu: H100-SXM5-80GB\n", "gpu: H100-SXM5-80GB\n    os: rhel8.8\n")) == [
        f"c1.yaml:8:16: spec.migManager.version: {RHEL8_ISSUE}"]


def test_dra_passthrough_is_warned_of_double_allocation_while_the_gate_is_on(known):
    assert known(PASSTHROUGH) == [f"c1.yaml:8:24: warning: spec.dra.featureGates.PassthroughSupport: {PASSTHROUGH_ISSUE}"]
    assert known(PASSTHROUGH.replace("PassthroughSupport: true", "PassthroughSupport: false")) == []
    # no pool allocates through DRA: the driver is not delivered, so no gate is on anywhere
    assert known(PASSTHROUGH.replace(", allocation: dra", "")) == []


def test_a_known_error_stops_the_cli_with_its_located_message_and_links(tmp_path):
    (tmp_path / "profiles").mkdir()
    write_profile(tmp_path, RHEL8, "profiles/rhel8.yaml")
    shutil.copy(REPO / "gpuop.yaml", tmp_path / "gpuop.yaml")
    proc = run_main("validate", cwd=tmp_path)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.splitlines() == [f"profiles/rhel8.yaml:8:16: spec.migManager.version: {RHEL8_ISSUE}",
                                        "gpuop: 1 error; nothing written"]


def test_every_entry_has_links_a_reported_field_and_a_unique_id():
    entries = known_catalog.load()
    assert len({e.id for e in entries}) == len(entries) >= 4
    for e in entries:
        assert e.sources and all(s.startswith("https://") for s in e.sources), e.id
        assert e.field[0] == "spec" and e.effect and e.workaround, e.id


def test_the_bundled_example_profiles_hit_no_known_issue():
    proc = run_main("validate", "profiles", cwd=REPO)
    assert proc.returncode == 0, proc.stderr
    assert "known issue" not in proc.stderr


def test_gke_workaround_is_not_warned_as_overriding_a_toolkit_env_gpuop_sets(tmp_path, monkeypatch):
    # gpuop derives RUNTIME_CONFIG_SOURCE only for distributions that render containerd's config (k3s, RKE2,
    # k0s); on GKE the name is the user's, so applying the known issue's workaround must warn about nothing
    monkeypatch.chdir(tmp_path)
    fixed = GKE.replace("driver: {enabled: false}", "driver: {enabled: false}\n"
                        "toolkit: {env: [{name: RUNTIME_CONFIG_SOURCE, value: file}]}")
    write_profile(tmp_path, fixed)
    assert [str(w) for w in validate(load_profile(tmp_path / "c1.yaml"), catalog.load()).warnings] == []
    k3s = fixed.replace("distribution: gke", "distribution: k3s")
    write_profile(tmp_path, k3s)
    assert any("RUNTIME_CONFIG_SOURCE is set by gpuop on the toolkit container" in str(w)
               for w in validate(load_profile(tmp_path / "c1.yaml"), catalog.load()).warnings)
