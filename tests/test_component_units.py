"""Each component built from its props alone: no profile, no plan, no GpuStack (as cdk8s-plus tests its
constructs). Props are written out here by hand, so a test breaks when a component starts to need
anything its props do not give it. Upstream facts are checked elsewhere (test_fidelity, test_stack_full);
these tests pin what each prop does to the objects.
"""

from __future__ import annotations

import copy
import json

import cdk8s
import pytest

from gpuop.catalog import RuntimeFiles
from gpuop.components.base import Component
from gpuop.components.dashboards import Dashboards, DashboardsProps, PoolPanelProps
from gpuop.components.dcgm import Dcgm, DcgmProps
from gpuop.components.dcgm_exporter import DcgmExporter, DcgmExporterProps
from gpuop.components.device_plugin import DevicePlugin, DevicePluginProps
from gpuop.components.dra import (ClaimRequestProps, ClaimTemplateProps, DeviceClassProps, DraObjects,
                                  DraProps)
from gpuop.components.driver import Driver, DriverProps, Variant
from gpuop.components.gfd import GfdProps, GpuFeatureDiscovery
from gpuop.components.mig_manager import MigManager, MigManagerProps
from gpuop.components.mps_control_daemon import MpsControlDaemon, MpsControlDaemonProps
from gpuop.components.namespace import Namespace, NamespaceProps
from gpuop.components.node_labels import NodeLabels, NodeLabelsProps
from gpuop.components.node_status_exporter import NodeStatusExporter, NodeStatusExporterProps
from gpuop.components.plugin_config import PluginConfig, PluginConfigProps
from gpuop.components.props import Placement, ServiceMonitorProps
from gpuop.components.queues import FlavorProps, KueueQueues, QueuesProps
from gpuop.components.runtime_class import RuntimeClasses, RuntimeClassProps
from gpuop.components.gpu_alerts import GpuAlerts, GpuAlertsProps
from gpuop.components.health_gate import CheckProps, HealthGate, HealthGateProps, PoolGateProps
from gpuop.components.toolkit import ContainerToolkit, ToolkitProps
from gpuop.components.validator import OperatorValidator, ValidatorProps
from gpuop.kube.order import with_wave


NS = "gpu-ops"
IMG = "registry.test/nvidia/image:1.0"
VAL = "registry.test/nvidia/gpu-operator:v1"
CONTAINERD = RuntimeFiles(config="/etc/containerd/config.toml", configEnv="CONTAINERD_CONFIG",
                          dropIn="/etc/containerd/conf.d/99-nvidia.toml", socket="/run/containerd/containerd.sock",
                          socketEnv="CONTAINERD_SOCKET")
PLUGIN_CONFIG = "version: v1\nflags:\n  migStrategy: mixed\n"

# one set of props per component: what the registry would derive for a small cluster, written by hand
PROPS: dict[type[Component], object] = {
    Namespace: NamespaceProps(namespace=NS),
    NodeLabels: NodeLabelsProps(namespace=NS, pci_vendor="10de", pci_classes=("0300", "0302"),
                                deploy_labels=("driver", "device-plugin"), mig_capable_labels=("mig-manager",),
                                mig_capable_ids=("2330",)),
    RuntimeClasses: RuntimeClassProps(namespace=NS),
    GpuAlerts: GpuAlertsProps(namespace=NS, labels={"release": "prometheus"}, groups_json=(
        '[{"name":"gpuop.gpu","rules":[{"alert":"GpuopGPUXidError","expr":"DCGM_FI_DEV_XID_ERRORS > 0","for":"0m",'
        '"labels":{"severity":"warning"},"annotations":{"summary":"XID"}}]}]')),
    Driver: DriverProps(namespace=NS, repository="registry.test/nvidia/driver", manager_image=IMG,
                        variants=(Variant(tag="580.95.05-ubuntu24.04"),)),
    ContainerToolkit: ToolkitProps(namespace=NS, image=IMG, validator_image=VAL, runtime_files=CONTAINERD),
    OperatorValidator: ValidatorProps(namespace=NS, image=VAL),
    PluginConfig: PluginConfigProps(namespace=NS, configs=(("default", PLUGIN_CONFIG),)),
    DevicePlugin: DevicePluginProps(namespace=NS, image=IMG, validator_image=VAL),
    MpsControlDaemon: MpsControlDaemonProps(namespace=NS, image=IMG, validator_image=VAL),
    Dcgm: DcgmProps(namespace=NS, image=IMG, validator_image=VAL),
    DcgmExporter: DcgmExporterProps(namespace=NS, image=IMG, validator_image=VAL),
    GpuFeatureDiscovery: GfdProps(namespace=NS, image=IMG, validator_image=VAL),
    MigManager: MigManagerProps(namespace=NS, image=IMG, validator_image=VAL,
                                mig_parted_config="version: v1\nmig-configs:\n  all-disabled: []\n"),
    NodeStatusExporter: NodeStatusExporterProps(namespace=NS, image=VAL),
    DraObjects: DraProps(namespace=NS, device_classes=(DeviceClassProps(
        name="a.gpu.gpuop", pool="a", expression="device.driver == 'gpu.nvidia.com'"),), claim_templates=(
        ClaimTemplateProps(name="one-gpu", namespace=NS, pool="a", requests=(
            ClaimRequestProps(name="gpu", device_class="a.gpu.gpuop"),)),)),
    Dashboards: DashboardsProps(namespace=NS, cluster="c", pools=(
        PoolPanelProps(name="a", gpu="L40S", node_labels=(("pool", "a"),), per_node=(("nvidia.com/gpu", 4),),
                       nodes=(2, 2)),
        PoolPanelProps(name="m", gpu="H100-SXM5-80GB", per_node=(("nvidia.com/mig-1g.10gb", 56),), mig=True))),
    HealthGate: HealthGateProps(namespace=NS, pools=(PoolGateProps(pool="a", node_selector={"pool": "a"}, nodes=2, checks=(
        CheckProps(kind="cuda", slug="cuda-gpu", image="r/cuda:1", resources={"nvidia.com/gpu": 1}, deadline=240),)),)),
    KueueQueues: QueuesProps(namespace=NS, namespaces=(NS,), groups=(
        (("nvidia.com/gpu",), (FlavorProps(name="a", node_labels={"pool": "a"}, quota={"nvidia.com/gpu": 8},
                                           tolerations=(("nvidia.com/gpu", "", "NoSchedule"),)),)),)),
}


def by_kind(objs: list[dict]) -> dict[tuple[str, str], dict]:
    return {(o["kind"], o["metadata"]["name"]): o for o in objs}


def pod(objs: list[dict], name: str | None = None) -> dict:
    ds = [o for o in objs if o["kind"] == "DaemonSet" and (name is None or o["metadata"]["name"] == name)]
    assert len(ds) == 1, [o["metadata"]["name"] for o in ds]
    return ds[0]["spec"]["template"]["spec"]


def env_of(container: dict) -> dict:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container.get("env", [])}


def test_every_registered_component_has_props_here():
    from gpuop.stack.registry import COMPONENTS

    assert set(COMPONENTS) <= set(PROPS)


@pytest.mark.parametrize("component", list(PROPS), ids=lambda c: c.name)
def test_renders_from_its_props_alone_without_changing_them(component):
    props = PROPS[component]
    before = props.model_dump_json()
    first = component.render(props)
    second = component.render(props)
    assert first and first == second                    # a pure function of its props
    assert props.model_dump_json() == before
    for o in first:                                      # namespaced objects land in the props' namespace
        assert o["metadata"].get("namespace") in (None, NS), (o["kind"], o["metadata"]["name"])


@pytest.mark.parametrize("component", list(PROPS), ids=lambda c: c.name)
def test_construct_emits_what_objects_gives_with_its_sync_wave(component):
    """The construct in a bare cdk8s chart (no app of gpuop's) synthesizes exactly `objects(props)`, value
    slots kept as gpuop's own synth keeps them for the Helm writer (without that context or values, the
    chart refuses to synthesize the markers: tests/test_construct_api.py)."""
    from gpuop.components.construct import KEEP_SLOTS_CONTEXT

    props = PROPS[component]
    chart = cdk8s.Testing.chart()
    chart.node.set_context(KEEP_SLOTS_CONTEXT, True)
    component(chart, component.name, props)
    synthesized = json.loads(json.dumps(chart.to_json()))
    expected = json.loads(json.dumps([with_wave(o) for o in component.objects(props)]))
    key = lambda o: (o["kind"], o["metadata"]["name"])          # noqa: E731
    assert sorted(synthesized, key=key) == sorted(expected, key=key)


def test_builders_leave_their_inputs_alone():
    props = PROPS[DevicePlugin].model_copy(update={"placement": Placement(node_selector={"pool": "a"})})
    frozen = copy.deepcopy(props.placement.node_selector)
    DevicePlugin.render(props)
    assert props.placement.node_selector == frozen


def test_namespace_props_set_name_labels_and_prometheus_access():
    plain = by_kind(Namespace.render(NamespaceProps(namespace=NS)))
    assert plain[("Namespace", NS)]["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "privileged"
    assert not any(k == "RoleBinding" for k, _ in plain)
    ocp = by_kind(Namespace.render(NamespaceProps(namespace=NS, labels={"openshift.io/cluster-monitoring": "true"},
                                                  prometheus=("openshift-monitoring", "prometheus-k8s"))))
    assert ocp[("Namespace", NS)]["metadata"]["labels"]["openshift.io/cluster-monitoring"] == "true"
    (binding,) = [o for (k, _), o in ocp.items() if k == "RoleBinding"]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "prometheus-k8s",
                                    "namespace": "openshift-monitoring"}]


def test_node_labels_props_become_nodefeaturerule_rules():
    (rule,) = NodeLabels.render(PROPS[NodeLabels])
    rules = {r["name"]: r for r in rule["spec"]["rules"]}
    assert rules["nvidia.com/gpu.deploy"]["labels"] == {"nvidia.com/gpu.deploy.driver": "true",
                                                          "nvidia.com/gpu.deploy.device-plugin": "true"}
    mig = rules["nvidia.com/gpu.deploy.mig-capable"]
    assert mig["labels"] == {"nvidia.com/gpu.deploy.mig-manager": "true"}
    assert mig["matchFeatures"][0]["matchExpressions"]["device"] == {"op": "In", "value": ["2330"]}
    with_pools = NodeLabels.render(PROPS[NodeLabels].model_copy(update={
        "pool_rules": (("H100-SXM5-80GB", ("2330",), (("nvidia.com/mig.config", "all-1g.10gb"),)),)}))
    pool_rule = {r["name"]: r for r in with_pools[0]["spec"]["rules"]}["gpuop.pool.H100-SXM5-80GB"]
    assert pool_rule["labels"] == {"nvidia.com/mig.config": "all-1g.10gb"}


def test_runtime_classes_name_their_handlers():
    objs = by_kind(RuntimeClasses.render(PROPS[RuntimeClasses]))
    assert {name: o["handler"] for (kind, name), o in objs.items() if kind == "RuntimeClass"} == {
        "nvidia": "nvidia", "nvidia-cdi": "nvidia-cdi", "nvidia-legacy": "nvidia-legacy"}


def test_driver_variants_become_daemonsets_with_their_selectors_and_upgrade_policy():
    two = PROPS[Driver].model_copy(update={
        "variants": (Variant(name="nvidia-driver-a", tag="580.95.05-ubuntu24.04", node_selector={"pool": "a"}, split=True),
                     Variant(name="nvidia-driver-b", tag="570.195.03-ubuntu24.04", node_selector={"pool": "b"}, split=True)),
        "max_parallel_upgrades": 3})
    objs = Driver.render(two)
    ds = {o["metadata"]["name"]: o for o in objs if o["kind"] == "DaemonSet"}
    assert set(ds) == {"nvidia-driver-a", "nvidia-driver-b"}
    assert ds["nvidia-driver-a"]["spec"]["template"]["spec"]["nodeSelector"]["pool"] == "a"
    image = ds["nvidia-driver-b"]["spec"]["template"]["spec"]["containers"][0]["image"]
    assert image == "registry.test/nvidia/driver:570.195.03-ubuntu24.04"
    strategy = ds["nvidia-driver-a"]["spec"]["updateStrategy"]
    assert strategy["type"] == "RollingUpdate" and strategy["rollingUpdate"]["maxUnavailable"] == 3
    manual = Driver.render(two.model_copy(update={"auto_upgrade": False}))
    assert {o["spec"]["updateStrategy"]["type"] for o in manual if o["kind"] == "DaemonSet"} == {"OnDelete"}


def test_toolkit_points_the_runtime_at_its_config_and_socket():
    spec = pod(ContainerToolkit.render(PROPS[ContainerToolkit]))
    env = env_of(spec["containers"][0])
    assert env["RUNTIME"] == "containerd"
    assert env["CONTAINERD_CONFIG"].endswith("config.toml") and env["CONTAINERD_SOCKET"].endswith("containerd.sock")
    assert spec["initContainers"][0]["name"] == "driver-validation"
    assert spec["initContainers"][0]["image"] == VAL


def test_validator_runs_plugin_validation_only_with_the_device_plugin():
    with_plugin = [c["name"] for c in pod(OperatorValidator.render(PROPS[OperatorValidator]))["initContainers"]]
    without = [c["name"] for c in pod(OperatorValidator.render(
        PROPS[OperatorValidator].model_copy(update={"device_plugin": False})))["initContainers"]]
    assert "plugin-validation" in with_plugin and "plugin-validation" not in without
    assert set(without) < set(with_plugin)


def test_plugin_config_is_one_configmap_with_every_key():
    (cm,) = PluginConfig.render(PluginConfigProps(namespace=NS, configs=(("default", PLUGIN_CONFIG),
                                                                         ("mps-2", "version: v1\n"))))
    assert cm["kind"] == "ConfigMap" and set(cm["data"]) == {"default", "mps-2"}


@pytest.mark.parametrize("strategy, expected", [("single", "single"), ("mixed", "mixed"), (None, None)])
def test_device_plugin_mig_strategy_env_follows_its_prop(strategy, expected):
    spec = pod(DevicePlugin.render(PROPS[DevicePlugin].model_copy(update={"mig_strategy": strategy})))
    assert env_of(spec["containers"][0]).get("MIG_STRATEGY") == expected


def test_device_plugin_mounts_its_config_only_when_told():
    plain = pod(DevicePlugin.render(PROPS[DevicePlugin]))
    configured = pod(DevicePlugin.render(PROPS[DevicePlugin].model_copy(update={"plugin_config": True})))
    names = lambda s: [c["name"] for c in s["containers"]]      # noqa: E731
    assert "config-manager" not in names(plain) and "config-manager" in names(configured)


@pytest.mark.parametrize("gds, gdrcopy, expected", [
    (False, False, {}), (True, False, {"GDS_ENABLED": "true", "MOFED_ENABLED": "true"}),
    (False, True, {"GDRCOPY_ENABLED": "true"}),
    (True, True, {"GDS_ENABLED": "true", "MOFED_ENABLED": "true", "GDRCOPY_ENABLED": "true"})])
def test_device_plugin_injects_the_cluster_s_gds_and_gdrcopy_devices(gds, gdrcopy, expected):
    spec = pod(DevicePlugin.render(PROPS[DevicePlugin].model_copy(update={"gds": gds, "gdrcopy": gdrcopy})))
    e = env_of(spec["containers"][0])
    assert {k: e[k] for k in ("GDS_ENABLED", "MOFED_ENABLED", "GDRCOPY_ENABLED") if k in e} == expected


def test_driver_variants_with_sidecars_tell_the_driver_container():
    props = PROPS[Driver].model_copy(update={
        "gds_image": ("cloud-native/nvidia-fs", "2.29.4"), "gdrcopy_image": ("cloud-native/gdrdrv", "v2.6"),
        "variants": (Variant(name="plain", tag="580.95.05-ubuntu24.04", os_tag="ubuntu24.04"),
                     Variant(name="gds", tag="580.95.05-ubuntu24.04", os_tag="ubuntu24.04", gds=True, gdrcopy=True))})
    ds = {o["metadata"]["name"]: o for o in Driver.render(props) if o["kind"] == "DaemonSet"}
    envs = {n: env_of(next(c for c in d["spec"]["template"]["spec"]["containers"] if c["name"] == "nvidia-driver-ctr"))
            for n, d in ds.items()}
    assert "GDS_ENABLED" not in envs["plain"] and "GDRCOPY_ENABLED" not in envs["plain"]
    assert envs["gds"]["GDS_ENABLED"] == envs["gds"]["GDRCOPY_ENABLED"] == "true"
    assert "MOFED_ENABLED" not in envs["gds"]            # the device plugin's, not the driver's


def test_mps_control_daemon_runs_only_on_mps_capable_nodes():
    spec = pod(MpsControlDaemon.render(PROPS[MpsControlDaemon]))
    assert spec["nodeSelector"]["nvidia.com/mps.capable"] == "true"
    assert spec.get("hostPID") is True


def test_dcgm_serves_the_hostengine_port_to_the_local_node():
    objs = by_kind(Dcgm.render(PROPS[Dcgm]))
    svc = objs[("Service", "nvidia-dcgm")]
    assert svc["spec"]["internalTrafficPolicy"] == "Local" and svc["spec"]["ports"][0]["port"] == 5555


def test_dcgm_exporter_service_monitor_and_remote_hostengine_follow_props():
    plain = by_kind(DcgmExporter.render(PROPS[DcgmExporter]))
    assert not any(kind == "ServiceMonitor" for kind, _ in plain)
    assert "DCGM_REMOTE_HOSTENGINE_INFO" not in env_of(pod(list(plain.values()))["containers"][0])
    full = DcgmExporter.render(PROPS[DcgmExporter].model_copy(update={
        "remote_hostengine": True, "service_monitor": ServiceMonitorProps(interval="30s", labels=(("team", "gpu"),))}))
    (sm,) = [o for o in full if o["kind"] == "ServiceMonitor"]
    assert sm["spec"]["endpoints"][0]["interval"] == "30s" and sm["metadata"]["labels"]["team"] == "gpu"
    assert env_of(pod(full)["containers"][0])["DCGM_REMOTE_HOSTENGINE_INFO"] == "nvidia-dcgm:5555"


def test_gfd_config_manager_comes_with_a_plugin_config():
    plain = pod(GpuFeatureDiscovery.render(PROPS[GpuFeatureDiscovery]))
    configured = pod(GpuFeatureDiscovery.render(PROPS[GpuFeatureDiscovery].model_copy(
        update={"plugin_config": True, "config_manager_image": "registry.test/nvidia/k8s-device-plugin:v9"})))
    assert len(configured["containers"]) == len(plain["containers"]) + 1
    assert any(c["image"] == "registry.test/nvidia/k8s-device-plugin:v9" for c in configured["containers"])


def test_mig_manager_carries_the_mig_parted_config():
    objs = MigManager.render(PROPS[MigManager])
    configs = [o for o in objs if o["kind"] == "ConfigMap" and "config.yaml" in o.get("data", {})]
    assert [c["data"]["config.yaml"] for c in configs] == [PROPS[MigManager].mig_parted_config]


def test_node_status_exporter_service_monitor_only_when_given():
    plain = NodeStatusExporter.render(PROPS[NodeStatusExporter])
    with_sm = NodeStatusExporter.render(PROPS[NodeStatusExporter].model_copy(
        update={"service_monitor": ServiceMonitorProps()}))
    assert [o["kind"] for o in with_sm if o["kind"] not in {x["kind"] for x in plain}] == ["ServiceMonitor"]


def test_placement_adds_selectors_affinity_and_openshift_sccs():
    placement = Placement(node_selector={"pool": "gpu"}, node_affinity=(("zone", "In", ("a", "b")),), openshift=True)
    props = PROPS[DevicePlugin].model_copy(update={"placement": placement})
    objs = DevicePlugin.objects(props)
    spec = pod(objs)
    assert spec["nodeSelector"] == {"nvidia.com/gpu.deploy.device-plugin": "true", "pool": "gpu"}
    terms = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert {"key": "zone", "operator": "In", "values": ["a", "b"]} in terms[0]["matchExpressions"]
    assert any(o["kind"] == "SecurityContextConstraints" for o in objs)
    assert not any(o["kind"] == "SecurityContextConstraints" for o in DevicePlugin.render(props))


def test_gpu_alerts_render_one_prometheus_rule_with_the_given_groups_and_labels():
    (rule,) = GpuAlerts.render(PROPS[GpuAlerts])
    assert (rule["kind"], rule["metadata"]["name"], rule["metadata"]["namespace"]) == ("PrometheusRule", "gpuop-gpu-alerts", NS)
    assert rule["metadata"]["labels"] == {"release": "prometheus", "app": "gpuop-gpu-alerts"}
    assert rule["spec"]["groups"][0]["rules"][0]["alert"] == "GpuopGPUXidError"
