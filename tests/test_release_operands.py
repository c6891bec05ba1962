"""What NVIDIA's operator deploys differently per release, as gpuop's catalog says (catalog/data/releases.yaml) and
NVIDIA's controller code at each tag shows (tests/test_operator_differential.py): the driver's sysfs mount, the
resources of the init containers the operator adds, and how NVIDIADriver CRs share the GPU nodes."""

from __future__ import annotations

import shutil

import pytest
import yaml

from gpuop.errors import UserError
from gpuop.outputs import operator as operator_out
from gpuop.pipeline.run import plan_all
from gpuop.profile.load import load_profile
from gpuop.validate.runner import validate

from conftest import REPO, run_main, write_profile
from gpuop.stack.registry import component_props
from operator_differential import stack_daemonsets

RESOURCES = """\
platform: {type: kubernetes, version: "1.33"}
os: ubuntu22.04
release: "%s"
driver: {resources: {limits: {memory: 2Gi}}}
validator: {resources: {limits: {cpu: 104m}}}
nodePools:
  - {name: infer, gpu: L40S}
"""

PER_POOL = """\
platform: {type: kubernetes, version: "1.33"}
os: ubuntu22.04
release: "%s"
delivery: {mode: operator}
driver: {version: "580.173.02"}
nodePools:
  - {name: old, gpu: A100-SXM4-80GB, nodeSelector: {gen: ampere}}
  - {name: new, gpu: L40S, nodeSelector: {gen: ada}, driver: {version: "595.91.07"}}
"""


def _stack(tmp_path, spec: str) -> dict[str, dict]:
    (plan,), _ = plan_all([write_profile(tmp_path, spec)])
    return stack_daemonsets(plan)


def _pod(daemonsets: dict, prefix: str) -> dict:
    return next(ds for name, ds in daemonsets.items() if name.startswith(prefix))["spec"]["template"]["spec"]


@pytest.mark.parametrize("release,name,path,type_", [
    ("26.7", "host-sys-devices-system", "/sys/devices/system", "Directory"),
    ("26.3", "sysfs-memory-online", "/sys/devices/system/memory/auto_online_blocks", None),
    ("25.10", "sysfs-memory-online", "/sys/devices/system/memory/auto_online_blocks", None),
])
def test_the_driver_mounts_the_sysfs_path_of_its_release(tmp_path, release, name, path, type_):
    pod = _pod(_stack(tmp_path, RESOURCES % release), "nvidia-driver-daemonset")
    volumes = {v["name"]: v for v in pod["volumes"]}
    ctr = next(c for c in pod["containers"] if c["name"] == "nvidia-driver-ctr")
    assert volumes[name]["hostPath"] == {"path": path, **({"type": type_} if type_ else {})}
    assert {m["name"]: m["mountPath"] for m in ctr["volumeMounts"]}[name] == path
    other = {"host-sys-devices-system", "sysfs-memory-online"} - {name}
    assert not other & set(volumes)


@pytest.mark.parametrize("release,given", [("26.7", True), ("26.3", False), ("25.10", False)])
def test_init_containers_take_their_operands_resources_from_26_7_on(tmp_path, release, given):
    daemonsets = _stack(tmp_path, RESOURCES % release)
    toolkit = _pod(daemonsets, "nvidia-container-toolkit-daemonset")["initContainers"]
    validator = _pod(daemonsets, "nvidia-operator-validator")
    manager = next(c for c in _pod(daemonsets, "nvidia-driver-daemonset")["initContainers"]
                   if c["name"] == "k8s-driver-manager")
    inits = [c for c in toolkit + validator["initContainers"] if c["name"].endswith("-validation")]
    assert inits and all(bool(c["resources"]) == given for c in inits)
    assert bool(manager["resources"]) == given
    assert validator["containers"][0]["resources"]          # the validator's own container: every release


def test_before_26_7_the_default_nvidiadriver_selects_its_own_pools(tmp_path):
    # NVIDIA's NVIDIADriver controller before v26.7 refuses every CR while two select one node: the default CR
    # (the chart's, without a nodeSelector: every GPU node) would take the 595 pool's node too
    (old,), _ = plan_all([write_profile(tmp_path / "a", PER_POOL % "26.3")])
    (new,), _ = plan_all([write_profile(tmp_path / "b", PER_POOL % "26.7")])
    assert operator_out.chart_values(old)["driver"]["nvidiaDriverCRD"]["nodeSelector"] == {"gen": "ampere"}
    assert "nodeSelector" not in operator_out.chart_values(new)["driver"]["nvidiaDriverCRD"]


@pytest.mark.parametrize("release,written", [("26.7", True), ("26.3", False)])
def test_a_pools_nvidiadriver_carries_an_upgrade_policy_only_where_its_crd_has_one(tmp_path, release, written):
    # v26.3.3's NVIDIADriver CRD has no spec.upgradePolicy: the API server would prune it without a word
    (plan,), _ = plan_all([write_profile(tmp_path, PER_POOL % release)])
    crs = plan.operator.drivers
    assert crs and all(("upgradePolicy" in cr["spec"]) == written for cr in crs)


def test_before_26_7_a_default_nvidiadriver_whose_pools_share_no_label_is_refused(tmp_path):
    # two pools on the cluster's driver, told apart by their labels: the default CR can select only what they
    # share (nothing: every GPU node), so before v26.7 it also selects the 595 pool's node and no CR is rendered
    spec = PER_POOL + "  - {name: hopper, gpu: H100-SXM5-80GB, nodeSelector: {gen: hopper}}\n"
    with pytest.raises(UserError) as err:
        validate(load_profile(write_profile(tmp_path / "a", spec % "26.3")))
    assert [(i.path, i.message) for i in err.value.issues] == [(
        "spec.nodePools[0].nodeSelector",
        "NVIDIADriver 'default' (driver 580.173.02, pools old, hopper) selects {} (every GPU node), which can match "
        "the nodes of pool 'new' (driver 595.91.07); the operator refuses NVIDIADriver CRs whose nodeSelectors "
        "overlap (NVIDIA/gpu-operator controllers/nvidiadriver_controller.go; before 26.7 the default CR is no "
        "fallback: it selects its own pools' nodes, internal/validator/validator.go); give the pools of each "
        "driver a label the others do not have")]
    validate(load_profile(write_profile(tmp_path / "b", spec % "26.7")))     # v26.7 assigns owners: accepted


# ---- v25.10.1's operand assets (catalog/data/releases.yaml `assets`) -------------------------------------------

ASSETS = """\
platform: {type: %s, version: "%s"}
os: %s
release: "%s"
driver: {gds: true, gdrcopy: true, kernelModuleType: open}
dcgm: {enabled: true}
nodePools:
  - {name: train, gpu: A100-SXM4-80GB, mig: {strategy: single, layout: {1g.10gb: 7}}}
"""
KUBERNETES_25 = ("kubernetes", "1.33", "ubuntu22.04")


def _container(pod: dict, name: str) -> dict:
    return next(c for c in pod.get("initContainers", []) + pod["containers"] if c["name"] == name)


def _env(c: dict) -> dict:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in c.get("env", [])}


@pytest.mark.parametrize("release", ["26.3", "25.10"])
def test_the_driver_pod_of_each_release(tmp_path, release):
    (plan,), _ = plan_all([write_profile(tmp_path, ASSETS % (*KUBERNETES_25, release))])
    pod = _pod(stack_daemonsets(plan), "nvidia-driver-daemonset")
    driver, manager = _container(pod, "nvidia-driver-ctr"), _container(pod, "k8s-driver-manager")
    old = release == "25.10"
    # v25.10.1: no DRIVER_CONFIG_DIGEST, GDS_ENABLED / GDRCOPY_ENABLED on the Driver Toolkit container only
    assert ("DRIVER_CONFIG_DIGEST" in _env(driver), "DRIVER_CONFIG_DIGEST" in _env(manager)) == (not old, not old)
    assert ({"GDS_ENABLED", "GDRCOPY_ENABLED"} <= set(_env(driver))) == (not old)
    # its asset's inline startup probe, and no startup-probe ConfigMap, volume or mount
    probe = driver["startupProbe"]["exec"]["command"]
    assert probe == (["sh", "-c", "[ -f /sys/module/nvidia/refcnt ] && nvidia-smi && touch "
                      "/run/nvidia/validations/.driver-ctr-ready"] if old else ["sh", "/usr/local/bin/startup-probe.sh"])
    assert ("driver-startup-probe-script" in {v["name"] for v in pod["volumes"]}) == (not old)


def _objects(plan) -> list[dict]:
    return [o for component, props in component_props(plan) for o in component.objects(props)]


@pytest.mark.parametrize("release", ["26.3", "25.10"])
def test_the_release_s_operands_as_its_assets_render_them(tmp_path, release):
    (plan,), _ = plan_all([write_profile(tmp_path, ASSETS % (*KUBERNETES_25, release))])
    objs = _objects(plan)
    daemonsets = {o["metadata"]["name"]: o for o in objs if o["kind"] == "DaemonSet"}
    old = release == "25.10"
    assert any(o["kind"] == "ConfigMap" and o["metadata"]["name"] == "nvidia-driver-startup-probe"
               for o in objs) == (not old)
    # DCGM and its exporter: v25.10.1's assets have no probes
    for name, ctr in (("nvidia-dcgm", "nvidia-dcgm-ctr"), ("nvidia-dcgm-exporter", "nvidia-dcgm-exporter")):
        c = _container(daemonsets[name]["spec"]["template"]["spec"], ctr)
        assert ("livenessProbe" in c, "readinessProbe" in c) == (not old, not old)
    # env v25.10.1's assets do not set
    gfd = _container(daemonsets["gpu-feature-discovery"]["spec"]["template"]["spec"], "gpu-feature-discovery")
    mig = _container(daemonsets["nvidia-mig-manager"]["spec"]["template"]["spec"], "nvidia-mig-manager")
    toolkit = _container(daemonsets["nvidia-container-toolkit-daemonset"]["spec"]["template"]["spec"],
                         "nvidia-container-toolkit-ctr")
    assert ("POD_NAME" in _env(gfd), {"POD_NAME", "POD_NAMESPACE"} <= set(_env(mig)),
            "NRI_NAMESPACE" in _env(toolkit)) == (not old, not old, not old)
    assert "NODE_NAME" in _env(gfd) and "NODE_NAME" in _env(mig)
    # the validator checks the GDS / GDRCopy sidecars itself before v26.3, after driver-validation
    inits = [c["name"] for c in daemonsets["nvidia-operator-validator"]["spec"]["template"]["spec"]["initContainers"]]
    assert inits[:3] == (["driver-validation", "nvidia-fs-validation", "gdrcopy-validation"] if old else
                         ["driver-validation", "toolkit-validation", "cuda-validation"])


def test_on_openshift_25_10_relabels_the_pod_resources_socket_for_the_dcgm_exporter(tmp_path):
    spec = ASSETS.replace("driver: {gds: true, gdrcopy: true, kernelModuleType: open}",
                          'driver: {rhcosVersions: ["419.96.202507091512-0"]}')
    (old,), _ = plan_all([write_profile(tmp_path / "a", spec % ("openshift", "4.19", "rhcos4.19", "25.10"))])
    (new,), _ = plan_all([write_profile(tmp_path / "b", spec % ("openshift", "4.19", "rhcos4.19", "26.3"))])
    for plan, present in ((old, True), (new, False)):
        objs = _objects(plan)
        pod = next(o for o in objs if o["kind"] == "DaemonSet" and o["metadata"]["name"] == "nvidia-dcgm-exporter"
                   )["spec"]["template"]["spec"]
        inits = {c["name"]: c for c in pod["initContainers"]}
        assert ("init-pod-nvidia-node-status-exporter" in inits) == present
        relabel = [o for o in objs if o["kind"] == "ConfigMap" and o["metadata"]["name"] == "nvidia-dcgm-exporter"]
        assert bool(relabel) == present
        assert ("cuda:13.0.1-base-ubi9" in plan.image_keys()) == present       # a digest lock must pin it
        if present:
            init = inits["init-pod-nvidia-node-status-exporter"]
            assert init["command"] == ["/bin/entrypoint.sh"] and init["image"].endswith("/cuda:13.0.1-base-ubi9")
            assert "chcon -t  container_file_t /var/lib/kubelet/pod-resources" in relabel[0]["data"]["entrypoint.sh"]


# ---- what v25.10.1's chart cannot carry, refused where the profile says it --------------------------------------

OLD_CHART = """\
platform: {type: kubernetes, version: "1.33"}
os: ubuntu22.04
release: "25.10"
delivery: {mode: operator}
dcgmExporter: {podLabels: true}
nodePools:
  - {name: old, gpu: A100-SXM4-80GB, nodeSelector: {gen: ampere}}
  - name: new
    gpu: L40S
    nodeSelector: {gen: ada}
    driver: {version: "595.91.07"}
  - {name: share, gpu: H100-SXM5-80GB, nodeSelector: {gen: ampere}, sharing: {timeSlicing: {replicas: 4}}}
"""


def test_what_v25_10_1_s_chart_would_drop_is_refused_located_by_the_cli(tmp_path):
    # no extraObjects template (the per-pool NVIDIADriver CR, gpuop's NodeFeatureRule) and no DCGM exporter pod-label
    # fields in v25.10.1's chart: each refused at the setting that needs it, with the release that has it
    write_profile(tmp_path / "profiles", OLD_CHART)
    shutil.copy(REPO / "gpuop.yaml", tmp_path / "gpuop.yaml")
    proc = run_main("synth", "profiles", "-o", "dist", cwd=tmp_path)
    assert (proc.returncode, proc.stdout) == (2, "")
    assert proc.stderr == (
        "profiles/c1.yaml:9:18: spec.dcgmExporter.podLabels: GPU Operator v25.10.1 does not have the setting "
        "dcgmExporterPodLabels (catalog/data/operator.yaml): its ClusterPolicy's dcgmExporter has no pod-label fields, "
        "so the exporter would export no pod labels; drop it, or move to spec.release 26.3 (GPU Operator v26.3.3 has "
        "it)\n"
        "profiles/c1.yaml:15:7: spec.nodePools[1].driver: GPU Operator v25.10.1 does not have the setting extraObjects "
        "(catalog/data/operator.yaml): its chart has no extraObjects template, so the NVIDIADriver CR "
        "'driver-595.91.07' this pool's driver needs would be dropped and the pool's nodes get no driver; give the "
        "pool the cluster's driver, or move to spec.release 26.3 (GPU Operator v26.3.3 has it)\n"
        "profiles/c1.yaml:16:7: spec.nodePools[2]: GPU Operator v25.10.1 does not have the setting extraObjects "
        "(catalog/data/operator.yaml): its chart has no extraObjects template, so gpuop's NodeFeatureRule labelling "
        "this pool's nodes nvidia.com/device-plugin.config=time-slicing-4-d71ebd would be dropped; set "
        "spec.nfd.rules: false and label the pool's nodes yourself, or move to spec.release 26.3 (GPU Operator "
        "v26.3.3 has it)\n"
        "gpuop: 3 errors; nothing written\n")
    assert not (tmp_path / "dist").exists()


def test_the_same_profile_on_26_3_compiles_with_its_extra_objects(tmp_path):
    write_profile(tmp_path / "profiles", OLD_CHART.replace('release: "25.10"', 'release: "26.3"'))
    shutil.copy(REPO / "gpuop.yaml", tmp_path / "gpuop.yaml")
    run_main("synth", "profiles", "-o", "dist", cwd=tmp_path, check=True)
    values = yaml.safe_load((tmp_path / "dist" / "c1" / "operator" / "values.yaml").read_text())
    assert [o["kind"] for o in values["extraObjects"]] == ["NVIDIADriver", "NodeFeatureRule"]
    assert values["dcgmExporter"]["enablePodLabels"] is True
