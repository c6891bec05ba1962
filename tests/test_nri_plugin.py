"""The NRI plugin (spec.cdi.nriPluginEnabled): an operator-mode option that reaches NVIDIA's chart as
cdi.nriPluginEnabled and the ClusterPolicy NVIDIA's chart renders from it, compared by Argo CD and Flux while it is
on; refused, located, in stack mode and below the container runtime floors of catalog/data/distributions.yaml
(containerd 1.7.30+ of 1.7, 2.1, 2.2, 2.3; CRI-O 1.34+, CRI-O's minor being the cluster's Kubernetes minor) on every
distribution operator mode takes, and below the GPU Operator release that brought the plugin to the runtime
(containerd v26.3.0, CRI-O v26.3.2).
"""

from __future__ import annotations

from pathlib import Path

import helm_python as helm
import pytest

from conftest import REFS, write_profile
from gpuop import catalog
from gpuop.catalog import distributions as dist_catalog
from gpuop.errors import UserError
from gpuop.kube.yamlio import load_all
from gpuop.outputs import operator as operator_out
from gpuop.plan.build import build_plan
from gpuop.profile.load import load_profile
from gpuop.validate.runner import validate

CHART = REFS / "gpu-operator" / "chart"

NRI = """\
platform: {type: kubernetes, version: "1.34", containerdVersion: "2.1"}
os: ubuntu24.04
cdi: {nriPluginEnabled: true}
delivery: {mode: operator}
nodePools:
  - {name: train, gpu: H100-SXM5-80GB}
"""


def write(folder: Path, spec: str) -> Path:
    return write_profile(folder, spec)         # conftest's one profile builder (c1.yaml, spec from line 5)


@pytest.fixture
def errors(tmp_path, monkeypatch):
    """spec -> the located lines of the nri-plugin and containerd-major rules (the profile must be refused)."""
    monkeypatch.chdir(tmp_path)

    def check(spec: str) -> list[str]:
        with pytest.raises(UserError) as err:
            validate(load_profile(write(tmp_path, spec)))
        return [str(i).replace(f"{tmp_path}/", "") for i in err.value.issues
                if i.rule in ("nri-plugin", "containerd-major")]
    return check


def values_of(tmp_path: Path, spec: str) -> dict:
    return operator_out.chart_values(build_plan(validate(load_profile(write(tmp_path, spec))), catalog.load()))


def test_the_nri_plugin_reaches_nvidias_chart_and_the_cluster_policy_it_renders(tmp_path):
    values = values_of(tmp_path, NRI)
    assert values["cdi"] == {"enabled": True, "nriPluginEnabled": True}
    chart = helm.Chart.load(str(CHART))
    try:
        rendered = chart.render(values, name="gpu-operator", namespace="gpu-operator")
    finally:
        chart.close()
    policy = next(o for path in sorted(rendered) for o in load_all(rendered[path])
                  if isinstance(o, dict) and o.get("kind") == "ClusterPolicy")
    assert policy["spec"]["cdi"]["nriPluginEnabled"] is True
    off = values_of(tmp_path, NRI.replace("cdi: {nriPluginEnabled: true}\n", ""))
    assert off["cdi"] == {"enabled": True, "nriPluginEnabled": False}


def test_a_cluster_with_the_nri_plugin_on_compares_the_field_instead_of_ignoring_it():
    on = operator_out.ignore_differences(False, nri=True)
    off = operator_out.ignore_differences(False)
    assert on == [{"group": "nvidia.com", "kind": "ClusterPolicy", "jsonPointers": ["/spec/cdi/default"]}]
    assert off[0]["jsonPointers"] == ["/spec/cdi/default", "/spec/cdi/nriPluginEnabled"]


@pytest.mark.parametrize("version", ["1.7.30", "1.7.41", "2.1", "2.1.4", "2.2.0", "2.3"])
def test_containerd_versions_nvidia_lists_are_accepted(tmp_path, version):
    values_of(tmp_path, NRI.replace('"2.1"', f'"{version}"'))


SOURCE = dist_catalog.load().nri.source
ACCEPTED = "containerd 1.7.30+ of 1.7, 2.1.x, 2.2.x, 2.3.x"


@pytest.mark.parametrize("version, why", [
    ("2.0", "containerd 2.0 is not a version NVIDIA supports it on"),
    ("2.0.5", "containerd 2.0.5 is not a version NVIDIA supports it on"),
    ("1.7.29", "containerd 1.7.29 is not a version NVIDIA supports it on"),
    ("1.6.30", "containerd 1.6.30 is not a version NVIDIA supports it on"),
    ("2.4", "containerd 2.4 is not a version NVIDIA supports it on"),
    ("1.7", "containerd 1.7 does not say its patch level, and 1.7 needs 1.7.30 or later"),
])
def test_containerd_below_or_outside_the_floor_is_refused_at_the_version(errors, version, why):
    assert errors(NRI.replace('"2.1"', f'"{version}"')) == [
        f"c1.yaml:5:49: spec.platform.containerdVersion: the NRI plugin needs {ACCEPTED}: {why}; upgrade the nodes' "
        f"containerd, or leave spec.cdi.nriPluginEnabled off ({SOURCE})"]


def test_containerd_without_a_version_is_warned_at_the_switch(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    warnings = validate(load_profile(write(tmp_path, NRI.replace(', containerdVersion: "2.1"', "")))).warnings
    assert [str(w).replace(f"{tmp_path}/", "") for w in warnings if w.rule == "nri-plugin"] == [
        f"c1.yaml:7:9: warning: spec.cdi.nriPluginEnabled: the NRI plugin needs {ACCEPTED}; set "
        f"spec.platform.containerdVersion to the GPU nodes' containerd so the floor can be checked ({SOURCE})"]


def test_crio_below_1_34_is_refused_at_the_kubernetes_version_and_on_openshift_by_its_kubernetes(errors, tmp_path):
    crio = NRI.replace(', containerdVersion: "2.1"', "").replace("os: ubuntu24.04\n",
                                                                   "os: ubuntu24.04\ncontainerRuntime: crio\n")
    values_of(tmp_path, crio)                                         # Kubernetes 1.34: CRI-O 1.34
    assert errors(crio.replace('"1.34"', '"1.33"')) == [
        "c1.yaml:5:32: spec.platform.version: the NRI plugin needs CRI-O 1.34 or later; this cluster's CRI-O is 1.33 "
        "(CRI-O's minor is the Kubernetes minor it serves, Kubernetes 1.33); use Kubernetes 1.34 or later, or leave "
        f"spec.cdi.nriPluginEnabled off ({SOURCE})"]
    ocp = ("platform: {type: openshift, version: \"4.20\"}\nos: rhcos4.20\ndriver: {enabled: false}\n"
           "cdi: {nriPluginEnabled: true}\ndelivery: {mode: operator}\nnodePools:\n"
           "  - {name: train, gpu: H100-SXM5-80GB}\n")
    assert errors(ocp) == [
        "c1.yaml:5:31: spec.platform.version: the NRI plugin needs CRI-O 1.34 or later; this cluster's CRI-O is 1.33 "
        "(CRI-O's minor is the Kubernetes minor it serves, Kubernetes 1.33 (OpenShift 4.20)); use OpenShift 4.21 or "
        f"later, or leave spec.cdi.nriPluginEnabled off ({SOURCE})"]


def test_stack_mode_and_docker_refuse_the_nri_plugin(errors):
    assert errors(NRI.replace("delivery: {mode: operator}\n", "")) == [
        "c1.yaml:7:9: spec.cdi.nriPluginEnabled: the NRI plugin is run by NVIDIA's operator (its toolkit "
        "DaemonSet); gpuop's stack configures the container runtime with the toolkit and creates the nvidia "
        "RuntimeClass; remove it or use spec.delivery.mode: operator"]
    docker = NRI.replace(', containerdVersion: "2.1"', "").replace("os: ubuntu24.04\n",
                                                                     "os: ubuntu24.04\ncontainerRuntime: docker\n")
    assert [e for e in errors(docker) if "nriPluginEnabled" in e] == [
        f"c1.yaml:8:9: spec.cdi.nriPluginEnabled: the NRI plugin runs on containerd or CRI-O; this cluster runs "
        f"docker ({SOURCE})"]


def test_a_containerd_version_off_containerd_or_against_its_major_is_refused(errors):
    crio = NRI.replace("cdi: {nriPluginEnabled: true}\n", "").replace(
        "os: ubuntu24.04\n", "os: ubuntu24.04\ncontainerRuntime: crio\n")
    assert errors(crio) == ["c1.yaml:5:49: spec.platform.containerdVersion: containerdVersion is for containerd "
                            "nodes; this cluster runs crio; remove the field"]
    assert errors(NRI.replace('containerdVersion: "2.1"', 'containerdMajor: 1, containerdVersion: "2.1"')) == [
        "c1.yaml:5:69: spec.platform.containerdVersion: containerd 2.1 is not containerd 1.x "
        "(spec.platform.containerdMajor: 1); make the two agree"]


def test_the_nri_plugin_without_the_container_toolkit_is_refused_as_nvidias_chart_does(errors):
    assert errors(NRI.replace("cdi: {nriPluginEnabled: true}\n", "cdi: {nriPluginEnabled: true}\n"
                              "toolkit: {enabled: false}\n")) == [
        "c1.yaml:7:9: spec.cdi.nriPluginEnabled: the NRI plugin is the container toolkit's, and spec.toolkit.enabled "
        "is false: NVIDIA's chart refuses it (\"the NRI Plugin cannot be enabled when the Container Toolkit is "
        "disabled\", templates/validations.yaml); turn the toolkit on or leave the NRI plugin off"]


NRI_SOURCE_FLOOR = ("the NRI plugin on {rt} needs GPU Operator {first} or later; this cluster runs GPU Operator v25.10.1 "
                    "(stack release 25.10), whose chart and ClusterPolicy have no cdi.nriPluginEnabled; use GPU "
                    "Operator v26.3.3 (stack release 26.3) or later, or leave spec.cdi.nriPluginEnabled off ({source})")


def test_the_nri_plugin_is_refused_on_a_release_whose_operator_predates_it_at_the_version_that_picks_it(errors, tmp_path):
    old = NRI.replace("os: ubuntu24.04\n", 'os: ubuntu24.04\nrelease: "25.10"\n')
    floor = NRI_SOURCE_FLOOR.format(rt="containerd", first="v26.3.0", source=SOURCE)
    assert errors(old) == [f"c1.yaml:7:3: spec.release: {floor}"]
    pinned = old.replace("{mode: operator}", "{mode: operator, operator: {version: v25.10.1}}")
    assert errors(pinned) == [f"c1.yaml:9:41: spec.delivery.operator.version: {floor}"]
    # CRI-O came to the plugin in 26.3.2 (containerd in 26.3.0)
    crio = old.replace(', containerdVersion: "2.1"', "").replace("os: ubuntu24.04\n",
                                                                 "os: ubuntu24.04\ncontainerRuntime: crio\n")
    assert errors(crio) == [f"c1.yaml:8:3: spec.release: "
                            f"{NRI_SOURCE_FLOOR.format(rt='crio', first='v26.3.2', source=SOURCE)}"]
    for release in ("26.3", "26.7"):                                   # v26.3.3 and v26.7.0 have it on both
        values_of(tmp_path, NRI.replace("os: ubuntu24.04\n", f'os: ubuntu24.04\nrelease: "{release}"\n'))
        values_of(tmp_path, crio.replace('"25.10"', f'"{release}"'))


# the distributions operator mode takes (validate/operator.py) whose containerd is not the node image's own
@pytest.mark.parametrize("distribution", ["k3s", "rke2", "microk8s"])
def test_each_distribution_running_its_own_containerd_has_the_containerd_floor_checked(errors, tmp_path, distribution):
    spec = NRI.replace('version: "1.34",', f'version: "1.34", distribution: {distribution},')
    values_of(tmp_path, spec)                                      # containerd 2.1
    column = 49 + len(f" distribution: {distribution},")
    assert errors(spec.replace('"2.1"', '"2.0"')) == [
        f"c1.yaml:5:{column}: spec.platform.containerdVersion: the NRI plugin needs {ACCEPTED}: containerd 2.0 is "
        f"not a version NVIDIA supports it on; upgrade the nodes' containerd, or leave spec.cdi.nriPluginEnabled off "
        f"({SOURCE})"]


@pytest.mark.parametrize("distribution", ["eks", "aks"])
def test_managed_images_with_their_own_toolkit_refuse_the_nri_plugin_as_nvidias_chart_does(errors, distribution):
    spec = NRI.replace('version: "1.34",', f'version: "1.34", distribution: {distribution},').replace(
        "os: ubuntu24.04\n", "os: ubuntu24.04\ndriver: {enabled: false}\ntoolkit: {enabled: false}\n")
    assert [e.split(": ", 2)[1:] for e in errors(spec)] == [[
        "spec.cdi.nriPluginEnabled", "the NRI plugin is the container toolkit's, and spec.toolkit.enabled is false: "
        "NVIDIA's chart refuses it (\"the NRI Plugin cannot be enabled when the Container Toolkit is disabled\", "
        "templates/validations.yaml); turn the toolkit on or leave the NRI plugin off"]]


@pytest.mark.parametrize("openshift, kube, accepted", [("4.20", "1.33", False), ("4.21", "1.34", True)])
def test_openshift_has_the_crio_floor_checked_by_its_kubernetes(errors, tmp_path, openshift, kube, accepted):
    ocp = (f"platform: {{type: openshift, version: \"{openshift}\"}}\nos: rhcos{openshift}\ndriver: {{enabled: false}}\n"
           "cdi: {nriPluginEnabled: true}\ndelivery: {mode: operator}\nnodePools:\n"
           "  - {name: train, gpu: H100-SXM5-80GB}\n")
    if accepted:
        values_of(tmp_path, ocp)
    else:
        assert [e.split(": ", 2)[1] for e in errors(ocp)] == ["spec.platform.version"]
