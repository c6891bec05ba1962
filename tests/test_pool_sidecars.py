"""RDMA, GDS and GDRCopy per node pool: a pool's `driver: {rdma, gds, gdrcopy}` overrides
spec.driver's, so an InfiniBand training pool gets nvidia-peermem and an inference pool does not. Pools with
other sidecars get a driver DaemonSet of their own (the one without sidecars keeps its name), in operator
mode an NVIDIADriver CR of their own (the CRD has rdma / gds / gdrcopy per CR); the Operator's rules refuse
bad combinations at the pool's field; the known RDMA issue is reported where RDMA is turned on; and
`gpuop diff --impact` names the pool whose driver is reinstalled. Compiled through the real stages, the
output checked by `gpuop validate dist` (strict schemas and the semantic check) and NVIDIA's chart + CRD."""

from __future__ import annotations

import shutil
import textwrap
from pathlib import Path

import pytest

from conftest import REFS, REPO, run_gpuop, run_main
from gpuop import catalog
from gpuop.kube.yamlio import load, load_all
from gpuop.profile.load import load_profile
from gpuop.validate.runner import validate
from gpuop.verify.crdschema import CrdValidator
from test_cli_errors import gpuop as cli, refused
from test_distributions import compile_objects, daemonsets, issues, write
from test_operator import render_nvidia

TRAIN = "{node.kubernetes.io/instance-type: p5.48xlarge}"
INFER = "{node.kubernetes.io/instance-type: g6e.12xlarge}"
HEAD = "apiVersion: gpuop/v1alpha1\nkind: ClusterProfile\n"


def containers(ds: dict) -> list[str]:
    return [c["name"] for c in ds["spec"]["template"]["spec"]["containers"]]


def env(ds: dict, container: str) -> dict[str, str]:
    pod = ds["spec"]["template"]["spec"]
    c = next(c for c in pod["containers"] + pod["initContainers"] if c["name"] == container)
    return {e["name"]: e.get("value") for e in c.get("env", [])}


def pool_terms(ds: dict) -> list[dict]:
    """The pool labels of each required node-affinity term (the deploy-label expressions left out)."""
    terms = ds["spec"]["template"]["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    return [{e["key"]: e["values"] for e in t["matchExpressions"] if e["operator"] == "In"} for t in terms]


def drivers_of(tmp_path, body: str) -> dict[str, dict]:
    return {n: d for n, d in daemonsets(compile_objects(write(tmp_path, body))).items() if "driver" in n}


# ------------------------------------------------------------------------------------ the stack

def test_an_infiniband_pool_gets_peermem_and_the_inference_pool_does_not(tmp_path):
    ds = drivers_of(tmp_path, f"""\
        platform: {{type: kubernetes, version: "1.33"}}
        os: ubuntu24.04
        driver: {{version: "580", kernelModuleType: open}}
        nodePools:
          - {{name: infer, gpu: L40S, nodeSelector: {INFER}}}
          - {{name: train, gpu: H100-SXM5-80GB, nodeSelector: {TRAIN}, driver: {{rdma: {{enabled: true}}}}}}
        """)
    assert set(ds) == {"nvidia-driver-daemonset", "nvidia-driver-daemonset-rdma"}
    infer, train = ds["nvidia-driver-daemonset"], ds["nvidia-driver-daemonset-rdma"]
    assert containers(infer) == ["nvidia-driver-ctr"]
    assert containers(train) == ["nvidia-driver-ctr", "nvidia-peermem-ctr"]
    assert pool_terms(infer) == [{"node.kubernetes.io/instance-type": ["g6e.12xlarge"]}]
    assert pool_terms(train) == [{"node.kubernetes.io/instance-type": ["p5.48xlarge"]}]
    for name in ("nvidia-driver-ctr", "k8s-driver-manager"):
        assert env(train, name)["GPU_DIRECT_RDMA_ENABLED"] == "true"
        assert "GPU_DIRECT_RDMA_ENABLED" not in env(infer, name)
    assert train["spec"]["selector"]["matchLabels"] == {"app": "nvidia-driver-daemonset-rdma"}
    assert infer["spec"]["selector"]["matchLabels"] == {"app": "nvidia-driver-daemonset"}


def test_each_pool_field_overrides_the_clusters_and_omitted_ones_inherit(tmp_path):
    ds = drivers_of(tmp_path, f"""\
        platform: {{type: kubernetes, version: "1.33"}}
        os: ubuntu24.04
        driver: {{version: "580", kernelModuleType: open, rdma: {{enabled: true, useHostMofed: true}}, gds: true,
                 gdrcopy: true}}
        nodePools:
          - {{name: infer, gpu: L40S, nodeSelector: {INFER}, driver: {{rdma: {{enabled: false}}, gds: false}}}}
          - {{name: train, gpu: H100-SXM5-80GB, nodeSelector: {TRAIN}}}
          - name: roce
            gpu: H200-SXM5-141GB
            nodeSelector: {{node.kubernetes.io/instance-type: p5en.48xlarge}}
            driver: {{rdma: {{useHostMofed: false}}, gdrcopy: false}}
        """)
    assert {n: containers(d) for n, d in ds.items()} == {
        "nvidia-driver-daemonset-gdrcopy": ["nvidia-driver-ctr", "nvidia-gdrcopy-ctr"],
        "nvidia-driver-daemonset-rdma-gds": ["nvidia-driver-ctr", "nvidia-peermem-ctr", "nvidia-fs-ctr"],
        "nvidia-driver-daemonset-rdma-hostmofed-gds-gdrcopy": ["nvidia-driver-ctr", "nvidia-peermem-ctr",
                                                               "nvidia-fs-ctr", "nvidia-gdrcopy-ctr"]}
    assert pool_terms(ds["nvidia-driver-daemonset-gdrcopy"]) == [{"node.kubernetes.io/instance-type": ["g6e.12xlarge"]}]
    assert pool_terms(ds["nvidia-driver-daemonset-rdma-gds"]) == [
        {"node.kubernetes.io/instance-type": ["p5en.48xlarge"]}]
    assert "USE_HOST_MOFED" not in env(ds["nvidia-driver-daemonset-rdma-gds"], "nvidia-driver-ctr")
    mofed = ds["nvidia-driver-daemonset-rdma-hostmofed-gds-gdrcopy"]
    assert env(mofed, "nvidia-peermem-ctr") == {"USE_HOST_MOFED": "true"}


def test_pools_that_restate_the_clusters_sidecars_share_its_one_daemonset(tmp_path):
    ds = drivers_of(tmp_path, f"""\
        platform: {{type: kubernetes, version: "1.33"}}
        os: ubuntu24.04
        driver: {{version: "580", kernelModuleType: open, gdrcopy: true}}
        nodePools:
          - {{name: infer, gpu: L40S, nodeSelector: {INFER}, driver: {{gdrcopy: true, rdma: {{enabled: false}}}}}}
          - {{name: train, gpu: H100-SXM5-80GB, nodeSelector: {TRAIN}}}
        """)
    assert {n: containers(d) for n, d in ds.items()} == {
        "nvidia-driver-daemonset": ["nvidia-driver-ctr", "nvidia-gdrcopy-ctr"]}
    assert pool_terms(ds["nvidia-driver-daemonset"]) == [{}]          # no pool restriction: every GPU node


def test_sidecars_split_beside_versions_and_oses_with_each_sidecar_image_per_os(tmp_path):
    ds = drivers_of(tmp_path, f"""\
        platform: {{type: kubernetes, version: "1.33"}}
        os: ubuntu24.04
        driver: {{version: "580", kernelModuleType: open}}
        nodePools:
          - {{name: infer, gpu: L40S, nodeSelector: {INFER}, os: rhel9.6, driver: {{gdrcopy: true}}}}
          - {{name: train, gpu: H100-SXM5-80GB, nodeSelector: {TRAIN}, driver: {{gdrcopy: true}}}}
          - name: old
            gpu: A100-SXM4-80GB
            nodeSelector: {{node.kubernetes.io/instance-type: p4d.24xlarge}}
            driver: {{version: "595"}}
        """)
    images = {n: [c["image"].rpartition(":")[2] for c in d["spec"]["template"]["spec"]["containers"]]
              for n, d in ds.items()}
    assert images == {
        "nvidia-driver-daemonset-595.91.07-ubuntu24.04": ["595.91.07-ubuntu24.04"],
        "nvidia-driver-daemonset-580.173.02-rhel9-gdrcopy": ["580.173.02-rhel9", "v2.6-rhel9"],
        "nvidia-driver-daemonset-580.173.02-ubuntu24.04-gdrcopy": ["580.173.02-ubuntu24.04", "v2.6-ubuntu24.04"]}


def test_a_digest_lock_needs_only_the_sidecar_images_some_pool_runs(tmp_path):
    from gpuop.plan.build import build_plan

    cat = catalog.load()
    plan = build_plan(validate(load_profile(write(tmp_path, f"""\
        platform: {{type: kubernetes, version: "1.33"}}
        os: ubuntu24.04
        driver: {{version: "580", kernelModuleType: open}}
        nodePools:
          - {{name: infer, gpu: L40S, nodeSelector: {INFER}, os: rhel9.6}}
          - {{name: train, gpu: H100-SXM5-80GB, nodeSelector: {TRAIN}, driver: {{gds: true}}}}
        """)), cat), cat)
    assert [k for k in plan.driver_pod_keys() if "nvidia-fs" in k] == ["cloud-native/nvidia-fs:2.29.4-ubuntu24.04"]


# ------------------------------------------------------------------------------------ refusals at the pool

POOLS = textwrap.dedent(f"""\
    nodePools:
      - {{name: infer, gpu: L40S, nodeSelector: {INFER}}}
      - {{name: train, gpu: H100-SXM5-80GB, nodeSelector: {TRAIN}, driver: %s}}
    """)


def test_refuses_a_pools_gds_and_gdrcopy_with_precompiled_drivers(tmp_path):
    f = write(tmp_path, textwrap.dedent("""\
        platform: {type: kubernetes, version: "1.33"}
        os: ubuntu24.04
        driver: {version: "580", kernelModuleType: open, precompiled: true, kernels: [6.8.0-1-aws]}
        """) + POOLS % "{gds: true, gdrcopy: true}")
    assert issues(f) == [
        ("spec.nodePools[1].driver.gds", 10, "GPUDirect Storage driver (nvidia-fs) is not supported along with "
         "precompiled NVIDIA drivers (it builds its module against the driver's sources)"),
        ("spec.nodePools[1].driver.gdrcopy", 10, "GDRCopy is not supported along with precompiled NVIDIA drivers (it "
         "builds its module against the driver's sources)")]


def test_refuses_a_pools_gds_without_open_kernel_modules(tmp_path):
    f = write(tmp_path, textwrap.dedent("""\
        platform: {type: kubernetes, version: "1.33"}
        os: ubuntu24.04
        driver: {version: "580"}
        """) + POOLS % "{gds: true}")
    assert issues(f) == [("spec.nodePools[1].driver.gds", 10, "GPUDirect Storage 2.29.4 needs the open kernel "
                          "modules (from 2.17.5 on): set spec.driver.kernelModuleType: open")]


def test_refuses_a_pools_gds_on_openshift_but_takes_its_rdma(tmp_path):
    f = write(tmp_path, textwrap.dedent("""\
        platform: {type: openshift, version: "4.19"}
        os: rhcos4.19
        driver: {version: "580", kernelModuleType: open, rhcosVersions: ["419.96.202507091512-0"]}
        """) + POOLS % "{gds: true, rdma: {enabled: true}}")
    assert issues(f) == [("spec.nodePools[1].driver.gds", 10, "gds on OpenShift builds with the Driver Toolkit "
                          "sidecar, which gpuop does not render for it; use spec.delivery.mode: operator")]
    f.write_text(f.read_text().replace("gds: true, ", ""))
    ds = daemonsets(compile_objects(f))
    assert containers(ds["nvidia-driver-daemonset-419.96.202507091512-0-rdma"]) == [
        "nvidia-driver-ctr", "nvidia-peermem-ctr", "openshift-driver-toolkit-ctr"]
    assert containers(ds["nvidia-driver-daemonset-419.96.202507091512-0"]) == [
        "nvidia-driver-ctr", "openshift-driver-toolkit-ctr"]


def test_refuses_sidecars_on_a_pool_with_a_preinstalled_driver(tmp_path):
    f = write(tmp_path, textwrap.dedent("""\
        platform: {type: kubernetes, version: "1.33"}
        os: ubuntu24.04
        """) + POOLS % "{enabled: false, rdma: {enabled: true}}")
    assert issues(f) == [("spec.nodePools[1].driver.rdma", 9, "rdma runs beside the driver gpuop installs, and "
                          "pool 'train' gets none (its driver.enabled is false: a preinstalled driver)")]


def test_refuses_sidecars_on_a_managed_images_pool(tmp_path):
    f = write(tmp_path, """\
        platform: {type: kubernetes, version: "1.33", distribution: eks}
        driver: {enabled: false}
        toolkit: {enabled: false}
        nodePools:
          - {name: train, gpu: H100-SXM5-80GB, driver: {gdrcopy: true}}
        """)
    assert issues(f) == [("spec.nodePools[0].driver.gdrcopy", 9, "gdrcopy runs beside the driver gpuop installs, "
                          "and pool 'train' gets none: eks's GPU node image installs it (EKS-optimized accelerated "
                          "AMIs (AL2023 NVIDIA, Bottlerocket NVIDIA))")]


def test_refuses_pools_with_other_sidecars_whose_selectors_overlap(tmp_path):
    f = write(tmp_path, f"""\
        platform: {{type: kubernetes, version: "1.33"}}
        os: ubuntu24.04
        driver: {{version: "580"}}
        nodePools:
          - {{name: infer, gpu: L40S, nodeSelector: {INFER}}}
          - {{name: train, gpu: H100-SXM5-80GB, driver: {{rdma: {{enabled: true}}}}}}
        """)
    assert issues(f) == [("spec.nodePools[1].nodeSelector", 10, "pool 'train' (driver 580.173.02 with rdma) and pool "
                          "'infer' (driver 580.173.02 with no sidecars) run different drivers on ubuntu24.04, but their "
                          "nodeSelectors could match the same node, which would then get two driver DaemonSets; give "
                          "both pools a label key with different values (e.g. node.kubernetes.io/instance-type)")]


def test_the_cli_refuses_a_bad_pool_combination_located_in_the_file(tmp_path):
    project = tmp_path / "project"
    (project / "profiles").mkdir(parents=True)
    shutil.copy(REPO / "gpuop.yaml", project / "gpuop.yaml")
    (project / "profiles" / "ib.yaml").write_text(HEAD + textwrap.dedent(f"""\
        metadata: {{name: ib}}
        spec:
          platform: {{type: kubernetes, version: "1.33"}}
          os: ubuntu24.04
          driver: {{version: "580"}}
          nodePools:
            - {{name: infer, gpu: L40S, nodeSelector: {INFER}}}
            - name: train
              gpu: H100-SXM5-80GB
              nodeSelector: {TRAIN}
              driver:
                rdma: {{enabled: true}}
                gds: true
        """))
    refused(cli(project, "validate"), """\
        profiles/ib.yaml:15:9: spec.nodePools[1].driver.gds: GPUDirect Storage 2.29.4 needs the open kernel modules (from 2.17.5 on): set spec.driver.kernelModuleType: open
        gpuop: 1 error; nothing written
        """)


def test_the_known_rdma_issue_is_reported_at_the_pool_that_turns_rdma_on(tmp_path):
    f = write(tmp_path, textwrap.dedent("""\
        platform: {type: kubernetes, version: "1.33"}
        os: ubuntu24.04
        driver: {version: "580", kernelModuleType: open}
        """) + POOLS % "{rdma: {enabled: true}}")
    warned = [(w.path, w.line) for w in validate(load_profile(f)).warnings
              if "known issue peermem-restart-without-reboot" in w.message]
    assert warned == [("spec.nodePools[1].driver.rdma.enabled", 10)]
    f.write_text(f.read_text().replace("{rdma: {enabled: true}}", "{rdma: {enabled: false}}"))
    assert not [w for w in validate(load_profile(f)).warnings if "peermem" in w.message]


# ------------------------------------------------------------------------------------ operator mode

OPERATOR = textwrap.dedent("""\
    platform: {type: kubernetes, version: "1.33"}
    os: ubuntu24.04
    driver: {version: "580", kernelModuleType: open%s}
    delivery: {mode: operator%s}
    """)


def test_refuses_a_pools_gds_with_precompiled_drivers_in_operator_mode(tmp_path):
    f = write(tmp_path, OPERATOR % (", precompiled: true, kernels: [6.8.0-60-generic]", "") + POOLS % "{gds: true}")
    assert issues(f) == [("spec.nodePools[1].driver.gds", 11, "GPUDirect Storage cannot run with precompiled drivers: "
                          "the operator has no precompiled gds sidecar (NOTES.md §1 'Precompiled ... Not with GDS, "
                          "GDRCopy or DTK'); turn off spec.driver.precompiled or gds")]


def test_refuses_pool_sidecars_without_nvidiadriver_crs(tmp_path):
    f = write(tmp_path, OPERATOR % ("", ", operator: {nvidiaDriverCRD: false}") + POOLS % "{rdma: {enabled: true}}")
    assert issues(f) == [("spec.delivery.operator.nvidiaDriverCRD", 8, "pools have different RDMA / GDS / GDRCopy "
                          "settings (default: none, driver-580.173.02-rdma: rdma), which only NVIDIADriver CRs carry per "
                          "pool (the ClusterPolicy's driver section holds one setting for every node); remove "
                          "nvidiaDriverCRD: false or give every pool the same settings")]


def test_refuses_sidecars_on_a_preinstalled_pool_in_operator_mode(tmp_path):
    f = write(tmp_path, OPERATOR % ("", "") + POOLS % "{enabled: false, gds: true}")
    assert issues(f) == [("spec.nodePools[1].driver.gds", 11, "gds runs beside the driver the operator installs, and "
                          "pool 'train' gets none (its driver.enabled is false: a preinstalled driver)")]


# ------------------------------------------------------------------------------------ compiled output

STACK_PROFILE = f"""\
metadata: {{name: ib}}
spec:
  platform: {{type: kubernetes, version: "1.34"}}
  os: ubuntu24.04
  driver: {{version: "580.173.02", kernelModuleType: open, upgradePolicy: {{maxParallelUpgrades: 2}}}}
  nodePools:
    - name: train
      gpu: H100-SXM5-80GB
      nodes: 5
      nodeSelector: {TRAIN}
      driver: {{rdma: {{enabled: true, useHostMofed: true}}, gds: true, gdrcopy: true}}
    - name: infer
      gpu: L40S
      nodes: {{min: 2, max: 6}}
      nodeSelector: {INFER}
"""
OPERATOR_PROFILE = STACK_PROFILE.replace("{name: ib}", "{name: ib-operator}").replace(
    "  nodePools:", "  delivery: {mode: operator}\n  nodePools:")


@pytest.fixture(scope="module")
def compiled(tmp_path_factory) -> Path:
    w = tmp_path_factory.mktemp("pool-sidecars")
    (w / "profiles").mkdir()
    shutil.copy(REPO / "gpuop.yaml", w / "gpuop.yaml")
    (w / "profiles" / "ib.yaml").write_text(HEAD + STACK_PROFILE)
    (w / "profiles" / "ib-operator.yaml").write_text(HEAD + OPERATOR_PROFILE)
    run_gpuop("synth", "--no-cache", cwd=w, check=True)
    return w


def test_the_compiled_output_passes_the_strict_schema_and_semantic_check(compiled):
    proc = run_main("validate", "dist", cwd=compiled)
    assert proc.returncode == 0, proc.stderr
    driver = load_all((compiled / "dist" / "ib" / "manifests" / "03-driver.yaml").read_text())   # the driver's file
    assert sorted(o["metadata"]["name"] for o in driver if o["kind"] == "DaemonSet") == [
        "nvidia-driver-daemonset", "nvidia-driver-daemonset-rdma-hostmofed-gds-gdrcopy"]


def test_operator_mode_gives_the_pool_an_nvidiadriver_with_its_sidecars_that_passes_the_crd(compiled):
    values = load((compiled / "dist" / "ib-operator" / "operator" / "values.yaml").read_text())
    assert values["driver"]["nvidiaDriverCRD"] == {"enabled": True, "deployDefaultCR": True}
    crd = CrdValidator.from_files([REFS / "gpu-operator" / "nvidia.com_nvidiadrivers.yaml"])
    drivers = {o["metadata"]["name"]: o for o in render_nvidia(values) if o["kind"] == "NVIDIADriver"}
    assert sorted(drivers) == ["default", "driver-580.173.02-rdma-hostmofed-gds-gdrcopy"]
    for d in drivers.values():
        assert crd.errors(d) == [], d["metadata"]["name"]
    train = drivers["driver-580.173.02-rdma-hostmofed-gds-gdrcopy"]["spec"]
    assert train["nodeSelector"] == {"node.kubernetes.io/instance-type": "p5.48xlarge"}
    assert train["rdma"] == {"enabled": True, "useHostMofed": True}
    assert train["gds"] == {"enabled": True, "repository": "nvcr.io/nvidia/cloud-native", "image": "nvidia-fs",
                            "version": "2.29.4"}
    assert train["gdrcopy"] == {"enabled": True, "repository": "nvcr.io/nvidia/cloud-native", "image": "gdrdrv",
                                "version": "v2.6"}
    default = drivers["default"]["spec"]
    assert default["rdma"] == {"enabled": False, "useHostMofed": False} and "gds" not in default


def test_impact_of_a_sidecar_change_is_a_reinstall_of_that_pool_only(compiled, tmp_path):
    w = tmp_path / "w"
    shutil.copytree(compiled, w)
    f = w / "profiles" / "ib.yaml"
    f.write_text(f.read_text().replace("gds: true, gdrcopy: true}", "gds: true}"))
    proc = run_gpuop("diff", "--impact", "--exit-code", cwd=w)
    assert proc.returncode == 3, proc.stderr
    assert proc.stdout == (
        "!! 1 destructive effect(s): GPU workloads are interrupted\n"
        "cluster ib:\n"
        "  !! pool train: driver DaemonSet nvidia-driver-daemonset-rdma-hostmofed-gds-gdrcopy replaced by "
        "nvidia-driver-daemonset-rdma-hostmofed-gds (pruned): driver reinstall on every node of the pool at once, no "
        "update strategy or upgrade policy paces a new DaemonSet; GPU pods evicted by the driver manager, 5 node(s) "
        "in 1 wave, up to 21m (startup probe)\n")


def test_impact_of_a_first_pool_with_sidecars_restarts_the_others_driver_pods_without_reinstall(tmp_path):
    w = tmp_path / "w"
    (w / "profiles").mkdir(parents=True)
    shutil.copy(REPO / "gpuop.yaml", w / "gpuop.yaml")
    f = w / "profiles" / "ib.yaml"
    f.write_text(HEAD + STACK_PROFILE.replace(
        "      driver: {rdma: {enabled: true, useHostMofed: true}, gds: true, gdrcopy: true}\n", ""))
    run_gpuop("synth", "--no-cache", cwd=w, check=True)
    f.write_text(HEAD + STACK_PROFILE.replace("useHostMofed: true}, gds: true, gdrcopy: true", "useHostMofed: true}"))
    proc = run_gpuop("diff", "--impact", "--exit-code", cwd=w)
    assert proc.returncode == 3, proc.stderr
    assert proc.stdout == (
        "!! 1 destructive effect(s): GPU workloads are interrupted\n"
        "cluster ib:\n"
        "  !! pool train: driver DaemonSet nvidia-driver-daemonset replaced by nvidia-driver-daemonset-rdma-hostmofed "
        "(pruned): driver reinstall on every node of the pool at once, no update strategy or upgrade policy paces a "
        "new DaemonSet; GPU pods evicted by the driver manager, 5 node(s) in 1 wave, up to 21m (startup probe)\n"
        "     pool infer: driver pods of nvidia-driver-daemonset restart with the same install config "
        "(DRIVER_CONFIG_DIGEST): the driver manager keeps the loaded driver; GPU pods keep running\n")
