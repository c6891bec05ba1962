"""Driver: ServiceAccount/Role/RoleBinding/ClusterRole/ClusterRoleBinding `nvidia-driver`, ConfigMap
`nvidia-driver-startup-probe`, DaemonSet `nvidia-driver-daemonset` (or one per variant: see below); on
OpenShift also ImageStream `driver-toolkit` (and the SCC `nvidia-driver`, openshift.py); as the
Operator's state-driver (assets/state-driver, ClusterPolicy path) renders them.

Several driver DaemonSets (the plan's driver variants, platform.py), as the Operator splits the state:
- OpenShift: `nvidia-driver-daemonset-<RHCOS build>` per build, nodeSelector
  feature.node.kubernetes.io/system-os_release.OSTREE_VERSION=<build>, labels `app: <name>`,
  `openshift.driver-toolkit: "true"` (+ `openshift.driver-toolkit.rhcos: <build>` on the DaemonSet),
  image tag `<version>-rhcos<x.y>`, OPENSHIFT_VERSION env, and the Driver Toolkit sidecar
  `openshift-driver-toolkit-ctr` whose image OpenShift resolves (openshift.py says how);
- precompiled: `nvidia-driver-daemonset-<kernel>-<os>` per kernel, nodeSelector kernel-version.full,
  labels `nvidia.com/precompiled: "true"` and `nvidia.com/precompiled.kernel-version`, tag
  `<branch>-<kernel>-<os>` (golden/driver-precompiled.yaml);
- mixed OS and per-pool drivers: `nvidia-driver-daemonset[-<version>][-<os tag>]`, selected by NFD's OS
  labels and, where one OS carries several drivers, by the pools' labels (one affinity term per pool).
Each split DaemonSet selects its pods by `app: <its name>` (upstream: only the DTK split does).

Differences from upstream, and why:
- The peermem, nvidia-fs and gdrcopy sidecars of the asset are left out: the Operator removes them too
  unless RDMA, GDS or GDRCopy are on, and gpuop does not offer those yet.
- No `DRIVER_CONFIG_DIGEST` env: the Operator computes it at run time to skip needless restarts; a
  static stack changes the pod template only when the config changes, which has the same effect.
- `KERNEL_MODULE_TYPE` is always set (auto included), so the chosen module type is visible in git.
- Upgrades. Upstream keeps this DaemonSet on `OnDelete` and lets its upgrade controller pick the
  nodes (at most `maxParallelUpgrades` at a time), cordon, evict and delete the driver pods. gpuop has
  no controller, so the DaemonSet controller does the picking: `RollingUpdate` with
  `maxUnavailable = maxParallelUpgrades` and `maxSurge = 0` (two driver pods can never share a node).
  It deletes the old driver pod on at most that many nodes; the new pod's `k8s-driver-manager` init
  container then does what the upgrade controller would: pauses the node's operand deploy labels (the
  other GPU pods leave), cordons, deletes GPU pods (`gpuPodDeletion`), unloads the old modules
  (draining the node if that fails and `drain` is on), uncordons and restores the labels; the new driver
  container builds and loads the new modules and its startup probe (nvidia-smi) makes the pod Ready,
  and only then does the rollout move to the next node. A failing node therefore stops the rollout
  instead of spreading. `autoUpgrade: false` keeps upstream's `OnDelete`: a node gets the new driver
  when you delete its driver pod. The upgrade policy lands in the driver manager's env (the same
  variables the Operator documents for `driver.manager.env`); its single timeout serves both the GPU
  pod deletion and the drain, since the driver manager has one.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from gpuop.kube.slots import slot
from gpuop.components.base import Component
from gpuop.components.props import DaemonSetProps
from gpuop.components.builders import SCC_RULE, daemonset, env, host_path, meta, mount, rbac, resources_slot
from gpuop.components.openshift import DTK_SHARED, DTK_SHARED_PATH, dtk_container, dtk_image_stream

NAME = "nvidia-driver"
DS_NAME = "nvidia-driver-daemonset"
PROBE = (Path(__file__).parent / "scripts" / "driver-startup-probe.sh").read_text()

CLUSTER_RULES = [
    {"apiGroups": ["config.openshift.io"], "resources": ["clusterversions"], "verbs": ["get", "list"]},
    {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "patch", "update", "watch"]},
    {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]},
    {"apiGroups": [""], "resources": ["pods/eviction"], "verbs": ["create"]},
    {"apiGroups": ["resource.k8s.io"], "resources": ["resourceclaims"], "verbs": ["get", "list"]},
    {"apiGroups": ["apps"], "resources": ["daemonsets"], "verbs": ["get"]},
]
ROLE_RULES = [SCC_RULE]


class Variant(BaseModel):
    """One driver DaemonSet (a plan.DriverVariant)."""
    model_config = ConfigDict(extra="forbid", frozen=True)
    name: str = Field(DS_NAME, description="DaemonSet name. Omitted: nvidia-driver-daemonset.")
    tag: str = Field(description="Driver image tag. Required.")
    node_selector: dict[str, str] = Field(default_factory=dict, description="Extra nodeSelector labels. Omitted: none.")
    alternatives: tuple[tuple[tuple[str, str], ...], ...] = Field((), description=(
        "Node pools' label sets, one ORed affinity term each. Omitted: no pool restriction."))
    labels: dict[str, str] = Field(default_factory=dict, description="Extra DaemonSet labels. Omitted: none.")
    pod_labels: dict[str, str] = Field(default_factory=dict, description="Extra pod labels. Omitted: none.")
    rhcos: str | None = Field(None, description="RHCOS build: adds the Driver Toolkit sidecar. Omitted: none.")
    split: bool = Field(False, description="One of several DaemonSets: `app` is its name. Omitted: false.")


class DriverProps(DaemonSetProps):
    repository: str = Field(description="Driver image without tag (`<registry>/driver`). Required.")
    variants: tuple[Variant, ...] = Field(description="The driver DaemonSets, at least one. Required.")
    openshift_version: str | None = Field(None, description="OPENSHIFT_VERSION env (OpenShift). Omitted: not set.")
    dtk_image_stream: str = Field("driver-toolkit", description="Driver Toolkit ImageStream. Omitted: driver-toolkit.")
    dtk_namespace: str = Field("openshift", description="Namespace of its source tags. Omitted: openshift.")
    manager_image: str = Field(description="k8s-driver-manager image. Required.")
    kernel_module_type: Literal["auto", "open", "proprietary"] = Field(
        "auto", description="KERNEL_MODULE_TYPE of the driver container. Omitted: auto.")
    gpu_pod_eviction: bool = Field(True, description="Evict GPU pods before unloading the driver. Omitted: true.")
    auto_drain: bool = Field(False, description="Drain the node when eviction is not enough. Omitted: false.")
    drain_timeout: str = Field("0s", description="Eviction/drain timeout (0s: wait forever). Omitted: 0s.")
    drain_force: bool = Field(False, description="Delete unmanaged pods too. Omitted: false.")
    drain_delete_emptydir: bool = Field(False, description="Delete pods with emptyDir data too. Omitted: false.")
    drain_pod_selector: str = Field("", description="Drain only pods matching this selector. Omitted: all.")
    auto_upgrade: bool = Field(True, description="RollingUpdate (true) or OnDelete (false). Omitted: true.")
    max_parallel_upgrades: int = Field(1, ge=0, description="maxUnavailable of the rollout; 0: all. Omitted: 1.")


def _manager(p: DriverProps) -> dict:
    return {
        "name": "k8s-driver-manager", "image": p.manager_image, "imagePullPolicy": slot("imagePullPolicy"),
        "command": ["driver-manager"], "args": ["uninstall_driver"],
        "env": [
            env("NODE_NAME", field_path="spec.nodeName"),
            env("NVIDIA_VISIBLE_DEVICES", "void"),
            env("ENABLE_GPU_POD_EVICTION", str(p.gpu_pod_eviction).lower()),
            env("ENABLE_AUTO_DRAIN", str(p.auto_drain).lower()),
            env("DRAIN_USE_FORCE", str(p.drain_force).lower()),
            env("DRAIN_POD_SELECTOR_LABEL", p.drain_pod_selector),
            env("DRAIN_TIMEOUT_SECONDS", p.drain_timeout),
            env("DRAIN_DELETE_EMPTYDIR_DATA", str(p.drain_delete_emptydir).lower()),
            env("OPERATOR_NAMESPACE", field_path="metadata.namespace"),
        ],
        "securityContext": {"privileged": True},
        "volumeMounts": [
            mount("run-nvidia", "/run/nvidia", propagation="Bidirectional"),
            mount("host-root", "/host", propagation="HostToContainer", read_only=True),
            mount("host-sys", "/sys"),
            mount("run-mellanox-drivers", "/run/mellanox/drivers", propagation="HostToContainer"),
        ],
    }


def _driver_ctr(p: DriverProps, v: Variant) -> dict:
    e = [env("NVIDIA_VISIBLE_DEVICES", "void"),
         env("NODE_NAME", field_path="spec.nodeName"), env("NODE_IP", field_path="status.hostIP"),
         env("KERNEL_MODULE_TYPE", p.kernel_module_type)]
    if p.kernel_module_type == "open":
        e.append(env("OPEN_KERNEL_MODULES_ENABLED", "true"))
    if p.openshift_version:
        e.append(env("OPENSHIFT_VERSION", p.openshift_version))
    command, args = (["ocp_dtk_entrypoint"], ["nv-ctr-run-with-dtk"]) if v.rhcos else (["nvidia-driver"], ["init"])
    return {
        "name": "nvidia-driver-ctr", "image": f"{p.repository}:{v.tag}", "imagePullPolicy": slot("imagePullPolicy"),
        "command": command, "args": args, "env": e,
        "resources": resources_slot("driver"),
        "securityContext": {"privileged": True, "seLinuxOptions": {"level": "s0"}},
        "volumeMounts": [
            mount("run-nvidia", "/run/nvidia", propagation="Bidirectional"),
            mount("run-nvidia-fabricmanager", "/run/nvidia-fabricmanager"),
            mount("run-nvidia-topologyd", "/run/nvidia-topologyd"),
            mount("var-log", "/var/log"),
            mount("dev-log", "/dev/log"),
            mount("host-os-release", "/host-etc/os-release", read_only=True),
            mount("mlnx-ofed-usr-src", "/run/mellanox/drivers/usr/src", propagation="HostToContainer"),
            mount("run-mellanox-drivers", "/run/mellanox/drivers", propagation="HostToContainer"),
            mount("firmware-search-path", "/sys/module/firmware_class/parameters/path"),
            mount("host-sys-devices-system", "/sys/devices/system"),
            mount("nv-firmware", "/lib/firmware"),
            mount("driver-startup-probe-script", "/usr/local/bin/startup-probe.sh", sub_path="startup-probe.sh"),
        ] + ([mount(DTK_SHARED, DTK_SHARED_PATH)] if v.rhcos else []),
        "startupProbe": {"exec": {"command": ["sh", "/usr/local/bin/startup-probe.sh"]},
                         "initialDelaySeconds": 60, "failureThreshold": 120, "successThreshold": 1,
                         "periodSeconds": 10, "timeoutSeconds": 60},
        "lifecycle": {"preStop": {"exec": {"command": [
            "/bin/sh", "-c",
            "rm -f /run/nvidia/validations/.driver-ctr-ready /run/nvidia/validations/.driver-daemons-status"]}}},
    }


VOLUMES = [
    host_path("run-nvidia", "/run/nvidia", "DirectoryOrCreate"),
    host_path("var-log", "/var/log"),
    host_path("dev-log", "/dev/log"),
    host_path("host-os-release", "/etc/os-release"),
    host_path("run-nvidia-fabricmanager", "/run/nvidia-fabricmanager", "DirectoryOrCreate"),
    host_path("run-nvidia-topologyd", "/run/nvidia-topologyd", "DirectoryOrCreate"),
    host_path("mlnx-ofed-usr-src", "/run/mellanox/drivers/usr/src", "DirectoryOrCreate"),
    host_path("run-mellanox-drivers", "/run/mellanox/drivers", "DirectoryOrCreate"),
    host_path("run-nvidia-validations", "/run/nvidia/validations", "DirectoryOrCreate"),
    host_path("host-root", "/"),
    host_path("host-sys", "/sys", "Directory"),
    host_path("firmware-search-path", "/sys/module/firmware_class/parameters/path"),
    host_path("host-sys-devices-system", "/sys/devices/system", "Directory"),
    host_path("nv-firmware", "/run/nvidia/driver/lib/firmware", "DirectoryOrCreate"),
    {"name": "driver-startup-probe-script", "configMap": {"name": "nvidia-driver-startup-probe", "defaultMode": 0o755}},
]


def update_strategy(p: DriverProps) -> dict:
    if not p.auto_upgrade:
        return {"type": "OnDelete"}
    limit = p.max_parallel_upgrades or "100%"
    return {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": limit, "maxSurge": 0}}


class Driver(Component):
    name = "driver"
    values_key = "driver"
    props_type = DriverProps
    deploy_label = "driver"

    @classmethod
    def render(cls, p: DriverProps) -> list[dict]:
        objs = rbac(NAME, p.namespace, ROLE_RULES, CLUSTER_RULES) + [
            {"apiVersion": "v1", "kind": "ConfigMap",
             "metadata": meta("nvidia-driver-startup-probe", p.namespace,
                              {"app": DS_NAME, "app.kubernetes.io/component": NAME}),
             "data": {"startup-probe.sh": PROBE}}]
        builds = [v.rhcos for v in p.variants if v.rhcos]
        if builds:
            objs.append(dtk_image_stream(p.dtk_image_stream, p.namespace, p.dtk_namespace, sorted(set(builds)),
                                         {"app.kubernetes.io/component": NAME}))
        return objs + [cls._daemonset(p, v) for v in p.variants]

    @classmethod
    def _daemonset(cls, p: DriverProps, v: Variant) -> dict:
        app = v.name if v.split else DS_NAME
        labels = {"app": app, "app.kubernetes.io/component": NAME, "nvidia.com/precompiled": "false", **v.pod_labels}
        containers = [_driver_ctr(p, v)]
        volumes = VOLUMES
        if v.rhcos:
            containers.append(dtk_container(f"{p.dtk_image_stream}:{v.rhcos}", v.rhcos))
            volumes = VOLUMES + [{"name": DTK_SHARED, "emptyDir": {}}]
        pod_spec = {
            "affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{
                "labelSelector": {"matchExpressions": [{"key": "app.kubernetes.io/component", "operator": "In",
                                                        "values": [NAME]}]},
                "topologyKey": "kubernetes.io/hostname"}]}},
            "serviceAccountName": NAME,
            "hostPID": True,
            "initContainers": [_manager(p)],
            "containers": containers,
            "volumes": volumes,
        }
        ds = daemonset(v.name, p.namespace, app=app, labels=labels, deploy=cls.deploy_label,
                       placement=p.placement, annotations={"openshift.io/scc": NAME}, pod_spec=pod_spec,
                       pod_annotations={"kubectl.kubernetes.io/default-container": "nvidia-driver-ctr"},
                       update_strategy=update_strategy(p), node_selector=v.node_selector, alternatives=v.alternatives)
        ds["metadata"]["labels"] = {**labels, **v.labels}
        return ds
