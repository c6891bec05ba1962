"""What NVIDIA's operator deploys differently per release, as gpuop's catalog says (catalog/data/releases.yaml) and
NVIDIA's controller code at each tag shows (tests/test_operator_differential.py): the driver's sysfs mount, the
resources of the init containers the operator adds, and how NVIDIADriver CRs share the GPU nodes."""

from __future__ import annotations

import pytest

from gpuop.errors import UserError
from gpuop.outputs import operator as operator_out
from gpuop.pipeline.run import plan_all
from gpuop.profile.load import load_profile
from gpuop.validate.runner import validate

from conftest import write_profile
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
