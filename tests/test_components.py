"""Each component against what NVIDIA's GPU Operator v26.7 renders (its assets and golden renders in
../shared/refs/gpu-operator), plus golden files per component for the bundled scenarios.

Set GPUOP_UPDATE_GOLDEN=1 to rewrite tests/golden/ after an intended change, then review the diff."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml

from gpuop.stack.registry import COMPONENTS, component_props
from gpuop.kube.yamlio import dump, load_all

from conftest import ASSETS, REFS, by_key, load_dir

GOLDEN = Path(__file__).parent / "golden"
SCRIPTS = Path(__file__).resolve().parents[1] / "constructs" / "gpuop" / "components" / "scripts"


def asset(path: str) -> dict:
    return yaml.safe_load((ASSETS / path).read_text())


@pytest.fixture(scope="module")
def prod(dist, index) -> dict:
    entry = next(e for e in index["clusters"] if e["name"] == "prod-east")
    return by_key(load_dir(dist / entry["manifests"]))


def ds(objs, name):
    return objs[("DaemonSet", "gpu-operator", name)]


@pytest.mark.parametrize("script, state", [
    ("driver-startup-probe.sh", "state-driver/0400_configmap.yaml"),
    ("toolkit-entrypoint.sh", "state-container-toolkit/0400_configmap.yaml"),
    ("device-plugin-entrypoint.sh", "state-device-plugin/0400_configmap.yaml"),
    ("mig-manager-entrypoint.sh", "state-mig-manager/0420_configmap.yaml"),
    ("mig-manager-gpu-clients.yaml", "state-mig-manager/0410_configmap.yaml"),
])
def test_operand_scripts_are_upstreams_bytes(script, state):
    data = asset(state)["data"]
    assert (SCRIPTS / script).read_text() == next(iter(data.values()))


@pytest.mark.parametrize("state, name", [
    ("state-driver", "nvidia-driver-daemonset"),
    ("state-container-toolkit", "nvidia-container-toolkit-daemonset"),
    ("state-device-plugin", "nvidia-device-plugin-daemonset"),
])
def test_daemonset_keeps_upstream_names_labels_selectors_and_host_paths(prod, state, name):
    up = asset(f"{state}/0500_daemonset.yaml")
    ours = ds(prod, name)
    assert ours["metadata"]["labels"] == up["metadata"]["labels"]
    assert ours["spec"]["selector"] == up["spec"]["selector"]
    assert ours["metadata"]["annotations"] == up["metadata"]["annotations"]
    up_pod, pod = up["spec"]["template"]["spec"], ours["spec"]["template"]["spec"]
    for field in ("nodeSelector", "tolerations", "priorityClassName", "serviceAccountName"):
        assert pod[field] == up_pod[field], field
    assert pod.get("hostPID") == up_pod.get("hostPID")
    up_vols = {v["name"]: v for v in up_pod["volumes"]}
    for v in pod["volumes"]:
        if v["name"] in up_vols:
            assert v == up_vols[v["name"]] | ({"configMap": v["configMap"]} if "configMap" in v else {}), v["name"]
    main = pod["containers"][0]
    up_main = next(c for c in up_pod["containers"] if c["name"] == main["name"])
    ours_mounts = {(m["name"], m["mountPath"]) for m in main["volumeMounts"]}
    assert {(m["name"], m["mountPath"]) for m in up_main["volumeMounts"]} <= ours_mounts
    up_env = {e["name"] for e in up_main.get("env", [])}
    assert up_env <= {e["name"] for e in main["env"]}
    assert main["command"] == up_main["command"] and main["args"] == up_main["args"]
    assert main["securityContext"]["privileged"] is True


def test_driver_matches_the_operators_golden_render(prod):
    """golden/driver-minimal.yaml is the Operator's own expected driver render (NVIDIADriver path, so
    its object names differ); the pod's volumes, driver-manager env and probes must be the same."""
    golden = [o for o in load_all((REFS / "gpu-operator" / "golden" / "driver-minimal.yaml").read_text())]
    g = next(o for o in golden if o["kind"] == "DaemonSet")["spec"]["template"]["spec"]
    pod = ds(prod, "nvidia-driver-daemonset")["spec"]["template"]["spec"]
    assert pod["volumes"] == g["volumes"]
    manager, g_manager = pod["initContainers"][0], g["initContainers"][0]
    # DRIVER_CONFIG_DIGEST last on both, as TransformDriver appends it; gpuop's value is its own digest
    # (driver.py config_digest: only equality with the node's stored value matters)
    assert manager["env"][:-1] == [e for e in g_manager["env"] if e["name"] != "DRIVER_CONFIG_DIGEST"]
    assert manager["env"][-1]["name"] == g_manager["env"][-1]["name"] == "DRIVER_CONFIG_DIGEST"
    assert manager["volumeMounts"] == g_manager["volumeMounts"]
    ctr, g_ctr = pod["containers"][0], g["containers"][0]
    assert ctr["volumeMounts"] == g_ctr["volumeMounts"]
    assert ctr["env"][:3] == [e for e in g_ctr["env"] if e["name"] != "DRIVER_CONFIG_DIGEST"]
    assert ctr["env"][-1] == {"name": "DRIVER_CONFIG_DIGEST", "value": manager["env"][-1]["value"]}
    assert ctr["startupProbe"] == g_ctr["startupProbe"] and ctr["lifecycle"] == g_ctr["lifecycle"]
    assert pod["affinity"]["podAntiAffinity"] == {"requiredDuringSchedulingIgnoredDuringExecution": [{
        "labelSelector": {"matchExpressions": [{"key": "app.kubernetes.io/component", "operator": "In",
                                                "values": ["nvidia-driver"]}]},
        "topologyKey": "kubernetes.io/hostname"}]}
    # Upstream keeps OnDelete and its upgrade controller replaces driver pods; gpuop has no controller,
    # so the DaemonSet rolls itself, maxParallelUpgrades (default 1) nodes at a time (driver.py).
    assert ds(prod, "nvidia-driver-daemonset")["spec"]["updateStrategy"] == {
        "type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}}
    g_rules = next(o for o in golden if o["kind"] == "ClusterRole")["rules"]
    assert prod[("ClusterRole", "", "nvidia-driver")]["rules"] == g_rules


def test_images_come_from_the_stack_release(prod):
    images = {c["name"]: c["image"] for d in ("nvidia-driver-daemonset", "nvidia-container-toolkit-daemonset",
                                                "nvidia-device-plugin-daemonset")
              for c in ds(prod, d)["spec"]["template"]["spec"]["containers"]
              + ds(prod, d)["spec"]["template"]["spec"]["initContainers"]}
    assert images == {
        "nvidia-driver-ctr": "nvcr.io/nvidia/driver:580.173.02-ubuntu24.04",
        "k8s-driver-manager": "nvcr.io/nvidia/cloud-native/k8s-driver-manager:v0.12.0",
        "nvidia-container-toolkit-ctr": "nvcr.io/nvidia/k8s/container-toolkit:v1.20.0",
        "driver-validation": "nvcr.io/nvidia/gpu-operator:v26.7.0",
        "nvidia-device-plugin": "nvcr.io/nvidia/k8s-device-plugin:v0.20.0",
        "toolkit-validation": "nvcr.io/nvidia/gpu-operator:v26.7.0",
    }


def test_toolkit_is_wired_to_containerd_as_the_operator_does(prod):
    c = ds(prod, "nvidia-container-toolkit-daemonset")["spec"]["template"]["spec"]["containers"][0]
    env = {e["name"]: e.get("value") for e in c["env"]}
    assert env["RUNTIME"] == "containerd" and env["CONTAINERD_RUNTIME_CLASS"] == "nvidia"
    assert env["RUNTIME_CONFIG"] == env["CONTAINERD_CONFIG"] == "/runtime/config-dir/config.toml"
    assert env["RUNTIME_DROP_IN_CONFIG"] == "/runtime/config-dir.d/99-nvidia.toml"
    assert env["RUNTIME_DROP_IN_CONFIG_HOST_PATH"] == "/etc/containerd/conf.d/99-nvidia.toml"
    assert env["CONTAINERD_SOCKET"] == "/runtime/sock-dir/containerd.sock"
    assert env["CDI_ENABLED"] == "true" and env["NVIDIA_RUNTIME_SET_AS_DEFAULT"] == "false"


def test_device_plugin_mig_strategy_and_runtime_class(prod):
    pod = ds(prod, "nvidia-device-plugin-daemonset")["spec"]["template"]["spec"]
    env = {e["name"]: e.get("value") for e in pod["containers"][0]["env"]}
    assert env["MIG_STRATEGY"] == "mixed"          # prod-east's pool asks for mixed
    assert env["DEVICE_LIST_STRATEGY"] == "cdi-annotations,cdi-cri"
    assert pod["runtimeClassName"] == "nvidia"
    assert [c["name"] for c in pod["initContainers"]] == ["toolkit-validation"]


def test_namespace_and_runtime_classes(prod):
    ns = prod[("Namespace", "", "gpu-operator")]
    assert ns["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "privileged"
    assert {k[2] for k in prod if k[0] == "RuntimeClass"} == {"nvidia", "nvidia-cdi", "nvidia-legacy"}


def test_disabling_a_component_removes_all_its_objects():
    from gpuop.components.device_plugin import DevicePlugin
    from gpuop.components.toolkit import ContainerToolkit

    assert DevicePlugin in COMPONENTS and ContainerToolkit in COMPONENTS
    # a component the plan leaves off gets no props: checked on a plan built from a profile below
    from test_plan_helpers import plan_for

    plan = plan_for({"devicePlugin": {"enabled": False}, "driver": {"enabled": False}})
    assert dict(component_props(plan)).get(DevicePlugin) is None
    names = [c.name for c, _ in component_props(plan)]
    assert names == ["namespace", "node-labels", "runtime-class", "toolkit", "operator-validator",
                     "dcgm-exporter", "gpu-feature-discovery", "mig-manager", "dashboards"]   # all-disabled on the H100 pool


@pytest.mark.parametrize("cluster", ["prod-east", "lab-west", "full-stack", "mig-sharing", "openshift"])
def test_golden_files_per_component(dist, index, cluster):
    entry = next(e for e in index["clusters"] if e["name"] == cluster)
    objs = load_dir(dist / entry["manifests"])
    by_component: dict[str, list] = {}
    for obj in objs:
        comp = obj["metadata"]["name"].replace("-daemonset", "").replace("-startup-probe", "").replace("-entrypoint", "")
        comp = comp.removesuffix("-read-pods").removesuffix("-metrics")          # dcgm-exporter's extra objects
        comp = {"gpu-feature-discovery": "nvidia-gpu-feature-discovery"}.get(comp, comp)   # upstream's DS name
        comp = comp.removesuffix("-alerts")                                   # node-status-exporter's PrometheusRule
        if comp.startswith("nvidia-driver-") or comp == "driver-toolkit":    # driver variants, the DTK ImageStream
            comp = "nvidia-driver"
        by_component.setdefault(f"{obj['kind'].lower()}" if obj["kind"] in ("Namespace", "RuntimeClass") else comp,
                                []).append(obj)
    for comp, items in sorted(by_component.items()):
        text = "---\n".join(dump(o) for o in items)
        path = GOLDEN / cluster / f"{comp}.yaml"
        if os.environ.get("GPUOP_UPDATE_GOLDEN"):
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        assert path.exists(), f"missing golden {path}; run with GPUOP_UPDATE_GOLDEN=1"
        assert path.read_text() == text, f"{path} differs; review and run with GPUOP_UPDATE_GOLDEN=1"
