"""Known-bad combinations (catalog/data/known-issues.yaml): for each entry a profile that hits it gets the
exact located message with its source links, and the same profile with the workaround applied (or just
outside the entry's versions) gets none.

The rules run through the real validate stage (validate.validate) on profiles written to a temporary
folder; one test goes through the CLI to show what a user reads. The peermem entry's test is in
tests/test_fleet_insight.py.
"""

from __future__ import annotations

import shutil
from functools import partial

import pytest

from conftest import REPO, run_main, spec_issues, write_profile
from gpuop import catalog
from gpuop.catalog import known_issues as known_catalog
from gpuop.profile.load import load_profile
from gpuop.profile.models import ClusterProfile
from gpuop.validate.known_issues import check_known_issues
from gpuop.validate.rules import Context
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
    """(spec (YAML under `spec:`), an entry id) -> that entry's located lines, errors and warnings, as the CLI
    prints them. A profile another rule refuses (an operator version the catalog lacks) still reports them."""
    monkeypatch.chdir(tmp_path)

    def check(spec: str, entry: str) -> list[str]:
        return [str(i).replace(f"{tmp_path}/", "") for i in spec_issues(tmp_path, spec)
                if f"known issue {entry}:" in i.message]
    return check


def test_gke_from_1_33_is_warned_the_toolkit_rewrites_containerd_config_until_it_reads_the_file(known):
    gke = partial(known, entry="gke-toolkit-rewrites-containerd-config")
    assert gke(GKE) == [f"c1.yaml:5:49: warning: spec.platform.distribution: {GKE_ISSUE}"]
    fixed = GKE.replace("driver: {enabled: false}", "driver: {enabled: false}\n"
                        "toolkit: {env: [{name: RUNTIME_CONFIG_SOURCE, value: file}]}")
    assert gke(fixed) == []
    assert gke(GKE.replace('"1.33"', '"1.32"')) == []              # containerd 1.7 on GKE 1.32
    assert gke(GKE.replace("distribution: gke", "distribution: eks")
                    .replace("driver: {enabled: false}", "driver: {enabled: false}\ntoolkit: {enabled: false}")) == []


def test_mig_manager_built_on_ubi9_is_refused_on_rhel8_nodes_with_a_host_driver(known):
    rhel8 = partial(known, entry="mig-parted-glibc-on-rhel8-host-driver")
    assert rhel8(RHEL8) == [f"c1.yaml:8:16: spec.migManager.version: {RHEL8_ISSUE}"]
    assert rhel8(RHEL8.replace("v0.14.0", "v0.13.1")) == [f"c1.yaml:8:16: spec.migManager.version: {RHEL8_ISSUE}"]
    assert rhel8(RHEL8.replace("v0.14.0", "v0.14.1")) == []                       # the UBI 8 build
    assert rhel8(RHEL8.replace("migManager: {version: v0.14.0}\n", "")) == []     # the release's v0.15.0
    assert rhel8(RHEL8.replace("driver: {enabled: false}", "driver: {enabled: true}")) == []   # gpuop's driver
    assert rhel8(RHEL8.replace("rhel8.10", "rhel9.6")) == []


def test_rhel8_mig_issue_needs_the_os_the_layout_and_the_host_driver_on_one_pool(known):
    rhel8 = partial(known, entry="mig-parted-glibc-on-rhel8-host-driver")
    # the RHEL 8 pool has no MIG layout; the MIG pool runs Ubuntu: no pool hits all three
    split = RHEL8.replace("os: rhel8.10\n", "os: ubuntu24.04\n") + (
        "  - {name: infer, gpu: L40S, os: rhel8.10}\n")
    assert rhel8(split) == []
    assert rhel8(split.replace("gpu: H100-SXM5-80GB\n", "gpu: H100-SXM5-80GB\n    os: rhel8.8\n")) == [
        f"c1.yaml:8:16: spec.migManager.version: {RHEL8_ISSUE}"]


def test_dra_passthrough_is_warned_of_double_allocation_while_the_gate_is_on(known):
    passthrough = partial(known, entry="dra-passthrough-double-allocation")
    assert passthrough(PASSTHROUGH) == [f"c1.yaml:8:24: warning: spec.dra.featureGates.PassthroughSupport: {PASSTHROUGH_ISSUE}"]
    assert passthrough(PASSTHROUGH.replace("PassthroughSupport: true", "PassthroughSupport: false")) == []
    # no pool allocates through DRA: the driver is not delivered, so no gate is on anywhere
    assert passthrough(PASSTHROUGH.replace(", allocation: dra", "")) == []


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


# ---- the entries from NVIDIA's release notes and trackers: each fires with its located message and stays quiet
# on a fixed version. Profiles pinned to operator versions the catalog cannot compile yet are refused by
# operator-version-catalog (and a refused profile reports no warnings), so those cases are checked through the
# rule itself (`fired`), on the same typed profile the validate stage builds.

def message(entry: str) -> str:
    known = next(e for e in known_catalog.load() if e.id == entry)
    return f"known issue {known.id}: {known.effect}; workaround: {known.workaround} (sources: {', '.join(known.sources)})"


@pytest.fixture
def fired(tmp_path, monkeypatch):
    """(spec, entry id) -> the entry's located lines from check_known_issues, whatever other rules say."""
    monkeypatch.chdir(tmp_path)

    def check(spec: str, entry: str) -> list[str]:
        write_profile(tmp_path, spec)
        loaded = load_profile(tmp_path / "c1.yaml")
        ctx = Context.of(loaded, ClusterProfile.model_validate(loaded.data), catalog.load())
        return [str(i).replace(f"{tmp_path}/", "") for i in check_known_issues(ctx)
                if f"known issue {entry}:" in i.message]
    return check


MIXED_570 = """\
platform: {type: kubernetes, version: "1.34"}
os: ubuntu24.04
driver: {version: "570.148.08"}
migManager: {disableMigWithoutLayout: false}
nodePools:
  - name: infer
    gpu: H100-SXM5-80GB
    mig: {strategy: mixed}
"""


def test_570_drivers_are_refused_on_pools_whose_nodes_mix_mig_devices_and_whole_gpus(known):
    entry = "driver-570-mig-beside-full-gpus-pending"
    error = f"c1.yaml:7:12: spec.driver.version: {message(entry)}"
    assert known(MIXED_570, entry) == [error]
    for bad in ("570.124.06", "570.133.20", "570.158.01"):
        assert known(MIXED_570.replace("570.148.08", bad), entry) == [error]
    assert known(MIXED_570.replace("570.148.08", "570.172.08"), entry) == []      # the fixed driver
    # gpuop's layout partitions every GPU of the node; the MIG manager returning GPUs to whole ones: no mix
    assert known(MIXED_570.replace("mig: {strategy: mixed}", 'mig: {strategy: mixed, layout: {"3g.40gb": 2}}'),
                 entry) == []
    assert known(MIXED_570.replace("migManager: {disableMigWithoutLayout: false}\n", ""), entry) == []
    assert known(MIXED_570.replace("strategy: mixed", "strategy: single"), entry) == []


def test_the_570_error_points_at_the_pool_driver_that_pins_the_version(known):
    entry = "driver-570-mig-beside-full-gpus-pending"
    spec = MIXED_570.replace('driver: {version: "570.148.08"}\n', "") + (
        '    driver: {version: "570.133.20"}\n'
        "  - {name: batch, gpu: L40S}\n")
    assert known(spec, entry) == [f"c1.yaml:12:16: spec.nodePools[0].driver.version: {message(entry)}"]


RDMA_DP = """\
platform: {type: kubernetes, version: "1.34"}
os: ubuntu24.04
driver: {rdma: {enabled: true}}
devicePlugin: {version: v0.19.2}
nodePools:
  - {name: train, gpu: H100-SXM5-80GB}
"""

RDMA_OPERATOR = """\
platform: {type: kubernetes, version: "1.34"}
os: ubuntu24.04
delivery: {mode: operator, operator: {version: v26.3.2}}
nodePools:
  - {name: train, gpu: H100-SXM5-80GB, driver: {rdma: {enabled: true}}}
"""


def test_device_plugin_0_19_0_to_0_19_2_with_rdma_is_warned_it_injects_every_ibverbs_device(known):
    entry = "device-plugin-injects-every-ibverbs-device"
    assert known(RDMA_DP, entry) == [f"c1.yaml:8:18: warning: spec.devicePlugin.version: {message(entry)}"]
    assert known(RDMA_DP.replace("v0.19.2", "v0.19.0"), entry) != []
    assert known(RDMA_DP.replace("v0.19.2", "v0.19.3"), entry) == []             # the fixed plugin
    assert known(RDMA_DP.replace("devicePlugin: {version: v0.19.2}\n", ""), entry) == []   # the release's v0.20.0
    assert known(RDMA_DP.replace("{version: v0.19.2}", "{version: v0.19.2, env: [{name: MOFED_ENABLED, "
                                 "value: \"false\"}]}"), entry) == []           # the workaround
    assert known(RDMA_DP.replace("driver: {rdma: {enabled: true}}\n", ""), entry) == []    # no RDMA NICs known


def test_operator_26_3_0_to_26_3_2_with_rdma_is_warned_at_the_operator_version_and_26_3_3_is_not(fired):
    entry = "device-plugin-injects-every-ibverbs-device"
    warning = f"c1.yaml:7:41: warning: spec.delivery.operator.version: {message(entry)}"
    for bad in ("v26.3.0", "v26.3.1", "v26.3.2"):
        assert fired(RDMA_OPERATOR.replace("v26.3.2", bad), entry) == [warning]
    assert fired(RDMA_OPERATOR.replace("v26.3.2", "v26.3.3"), entry) == []
    assert fired(RDMA_OPERATOR.replace(", operator: {version: v26.3.2}", ""), entry) == []     # v26.7.0
    # the operator's version, but no device plugin of the operator's runs
    assert fired(RDMA_OPERATOR.replace("delivery:", "devicePlugin: {enabled: false}\ndelivery:"), entry) == []
    # a device plugin the profile pins decides for the plugin, whatever the operator's version
    pinned = RDMA_OPERATOR.replace("delivery:", "devicePlugin: {version: v0.19.3}\ndelivery:")
    assert fired(pinned, entry) == []
    assert fired(pinned.replace("v0.19.3", "v0.19.1"), entry) == [
        f"c1.yaml:7:18: warning: spec.devicePlugin.version: {message(entry)}"]


TOOLKIT_1_18_0 = """\
platform: {type: kubernetes, version: "1.34"}
os: ubuntu24.04
containerRuntime: containerd
toolkit: {version: v1.18.0}
nodePools:
  - {name: train, gpu: H100-SXM5-80GB}
"""


def test_toolkit_1_18_0_on_containerd_is_warned_it_drops_the_configs_imports(known, fired):
    entry = "toolkit-1-18-0-drops-containerd-imports"
    assert known(TOOLKIT_1_18_0, entry) == [f"c1.yaml:8:13: warning: spec.toolkit.version: {message(entry)}"]
    assert known(TOOLKIT_1_18_0.replace("v1.18.0", "v1.18.1"), entry) == []       # the fixed toolkit
    assert known(TOOLKIT_1_18_0.replace("containerd\n", "crio\n"), entry) == []   # CRI-O has no imports
    assert known(TOOLKIT_1_18_0.replace("{version: v1.18.0}", "{version: v1.18.0, enabled: false}"), entry) == []
    operator = TOOLKIT_1_18_0.replace("toolkit: {version: v1.18.0}", "delivery: {mode: operator, operator: "
                                      "{version: v25.10.0}}")
    assert fired(operator, entry) == [f"c1.yaml:8:41: warning: spec.delivery.operator.version: {message(entry)}"]
    assert fired(operator.replace("v25.10.0", "v25.10.1"), entry) == []


MIG_LAYOUT = """\
platform: {type: kubernetes, version: "1.34"}
os: ubuntu24.04
nodePools:
  - name: train
    gpu: H100-SXM5-80GB
    mig: {strategy: mixed, layout: {"3g.40gb": 2}}
  - {name: infer, gpu: L40S}
"""


def test_mig_managers_from_0_13_0_to_0_14_5_are_warned_they_can_wedge_a_node_in_paused_for_mig_change(known, fired):
    entry = "mig-manager-wedged-in-paused-for-mig-change"
    # the release's v0.15.0 carries the same code but is left out until a fixed release is in the catalog
    assert known(MIG_LAYOUT, entry) == []
    pinned = MIG_LAYOUT.replace("nodePools:", "migManager: {version: v0.14.0}\nnodePools:")
    assert known(pinned, entry) == [f"c1.yaml:7:16: warning: spec.migManager.version: {message(entry)}"]
    # v0.12.3 still runs reconfigure-mig.sh, not the Go Run() with the two failure paths
    assert known(pinned.replace("v0.14.0", "v0.12.3"), entry) == []
    assert known(MIG_LAYOUT.replace(', layout: {"3g.40gb": 2}', ""), entry) == []      # no MIG change to make
    operator = MIG_LAYOUT.replace("nodePools:", "delivery: {mode: operator, operator: {version: v26.3.3}}\n"
                                  "nodePools:")
    assert fired(operator, entry) == [f"c1.yaml:7:41: warning: spec.delivery.operator.version: {message(entry)}"]


DRA_OPERATOR = """\
platform: {type: kubernetes, version: "1.34"}
os: ubuntu24.04
dra: {computeDomains: {enabled: true}}
delivery: {mode: operator}
nodePools:
  - {name: train, gpu: GB200-186GB, allocation: dra}
"""


def test_operator_26_7_0_beside_gpuops_dra_driver_is_warned_two_charts_own_the_computedomains_crd(known, fired):
    entry = "computedomains-crd-owned-by-two-charts"
    assert known(DRA_OPERATOR, entry) == [f"c1.yaml:8:3: warning: spec.delivery: {message(entry)}"]
    assert known(DRA_OPERATOR.replace("{mode: operator}", "{mode: operator, operator: {version: v26.7.0}}"),
                 entry) == [f"c1.yaml:8:41: warning: spec.delivery.operator.version: {message(entry)}"]
    # v26.3.3's chart ships no computedomains CRD
    assert fired(DRA_OPERATOR.replace("{mode: operator}", "{mode: operator, operator: {version: v26.3.3}}"),
                 entry) == []
    assert known(DRA_OPERATOR.replace("delivery: {mode: operator}\n", ""), entry) == []    # stack: one chart
    assert known(DRA_OPERATOR.replace(", allocation: dra", "").replace(
        "dra: {computeDomains: {enabled: true}}\n", ""), entry) == []                        # no DRA driver of gpuop's


@pytest.mark.parametrize("entry, versions", [
    ("driver-570-mig-beside-full-gpus-pending", {"driver": ("570.124.06", "570.133.20", "570.148.08", "570.158.01")}),
    ("device-plugin-injects-every-ibverbs-device", {"operator": ("v26.3.0", "v26.3.1", "v26.3.2"),
                                                    "devicePlugin": ("v0.19.0", "v0.19.1", "v0.19.2")}),
    ("toolkit-1-18-0-drops-containerd-imports", {"operator": ("v25.10.0",), "toolkit": ("v1.18.0",)}),
    ("mig-manager-wedged-in-paused-for-mig-change", {
        "operator": ("v25.10.0", "v25.10.1", "v26.3.0", "v26.3.1", "v26.3.2", "v26.3.3"),
        "migManager": ("v0.13.0", "v0.13.1", "v0.14.0", "v0.14.1", "v0.14.2", "v0.14.3", "v0.14.4", "v0.14.5")}),
    ("computedomains-crd-owned-by-two-charts", {"operator": ("v26.7.0",)}),
    ("user-namespaces-with-cdi-hooks", {}),                # every release: NVIDIA never supported it
])
def test_each_entry_covers_exactly_the_versions_its_sources_give(entry, versions):
    known = next(e for e in known_catalog.load() if e.id == entry)
    got = dict(known.when.versions)
    if known.when.driverVersions:
        got["driver"] = known.when.driverVersions
    assert got == versions


USERNS = """\
platform: {type: kubernetes, version: "1.34", userNamespaces: true}
os: ubuntu24.04
nodePools:
  - {name: train, gpu: H100-SXM5-80GB}
"""

USERNS_ISSUE = (
    "known issue user-namespaces-with-cdi-hooks: pods that set spec.hostUsers: false (their own user namespace) "
    "cannot start on GPU nodes: the NVIDIA Container Toolkit's createContainer hook (nvidia-cdi-hook) runs as the "
    "remapped user inside the pod's user namespace, cannot read the OCI bundle's config.json to find the container "
    "root, and container creation fails (`read status from sync socket: No such process`); no GPU Operator or "
    "container toolkit release supports it; workaround: run GPU pods and the GPU Operator's pods in the host's user "
    "namespace (omit spec.hostUsers or set it to true) and set spec.platform.userNamespaces to false (sources: "
    "https://docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest/release-notes.html#v26-3-1-known-issues, "
    "https://github.com/NVIDIA/nvidia-container-toolkit/issues/648, https://github.com/NVIDIA/cloud-native-docs/pull/403)")


@pytest.mark.parametrize("release, operator", [("25.10", "v25.10.1"), ("26.3", "v26.3.3"), ("26.7", "v26.7.0")])
def test_gpu_pods_in_user_namespaces_are_refused_on_every_release_for_the_toolkits_cdi_hook(known, release, operator):
    entry = "user-namespaces-with-cdi-hooks"
    spec = USERNS.replace("os: ubuntu24.04\n", f'os: ubuntu24.04\nrelease: "{release}"\n')
    error = f"c1.yaml:5:49: spec.platform.userNamespaces: {USERNS_ISSUE}"
    assert known(spec, entry) == [error]
    # operator mode, with the NRI plugin (it injects the same CDI hooks) and a node's own toolkit alike
    operator_mode = spec.replace("nodePools:", f"delivery: {{mode: operator, operator: {{version: {operator}}}}}\n"
                                 "nodePools:")
    assert known(operator_mode, entry) == [error]
    assert known(spec.replace("os: ubuntu24.04\n", "os: ubuntu24.04\ntoolkit: {enabled: false}\n"), entry) == [error]
    # no release fixes it: GPU pods in the host's user namespace, as NVIDIA supports them, are not reported
    assert known(spec.replace(", userNamespaces: true", ", userNamespaces: false"), entry) == []
    assert known(spec.replace(", userNamespaces: true", ""), entry) == []


def test_gpu_pods_in_user_namespaces_stop_the_cli_with_the_located_error(tmp_path):
    (tmp_path / "profiles").mkdir()
    write_profile(tmp_path, USERNS, "profiles/userns.yaml")
    shutil.copy(REPO / "gpuop.yaml", tmp_path / "gpuop.yaml")
    proc = run_main("validate", cwd=tmp_path)
    assert (proc.returncode, proc.stdout) == (2, "")
    assert proc.stderr.splitlines() == [f"profiles/userns.yaml:5:49: spec.platform.userNamespaces: {USERNS_ISSUE}",
                                        "gpuop: 1 error; nothing written"]
