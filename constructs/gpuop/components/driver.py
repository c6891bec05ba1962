"""Driver: ServiceAccount/Role/RoleBinding/ClusterRole/ClusterRoleBinding `nvidia-driver`, ConfigMap
`nvidia-driver-startup-probe`, DaemonSet `nvidia-driver-daemonset`; as the Operator's state-driver
(assets/state-driver, ClusterPolicy path) renders them for a vanilla cluster.

Differences from upstream, and why:
- The peermem, nvidia-fs, gdrcopy and Driver Toolkit sidecars of the asset are left out: the Operator
  removes them too unless RDMA, GDS, GDRCopy or OpenShift DTK are on, and gpuop does not offer those yet.
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

from pydantic import Field

from ..slots import slot
from .base import SCC_RULE, Component, DaemonSetProps, Placement, daemonset, env, host_path, meta, mount, rbac, resources_slot

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


class DriverProps(DaemonSetProps):
    image: str = Field(description="Driver image with its `<version>-<os>` tag. Required: no default is "
                                   "computable without the OS.")
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


def _driver_ctr(p: DriverProps) -> dict:
    e = [env("NVIDIA_VISIBLE_DEVICES", "void"),
         env("NODE_NAME", field_path="spec.nodeName"), env("NODE_IP", field_path="status.hostIP"),
         env("KERNEL_MODULE_TYPE", p.kernel_module_type)]
    if p.kernel_module_type == "open":
        e.append(env("OPEN_KERNEL_MODULES_ENABLED", "true"))
    return {
        "name": "nvidia-driver-ctr", "image": p.image, "imagePullPolicy": slot("imagePullPolicy"),
        "command": ["nvidia-driver"], "args": ["init"], "env": e,
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
        ],
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
    def from_plan(cls, plan) -> DriverProps | None:
        if plan.driver_version is None:
            return None
        u = plan.upgrade
        return DriverProps(namespace=plan.namespace, image=plan.image("driver").ref,
                           manager_image=plan.image("driverManager").ref,
                           kernel_module_type=plan.kernel_module_type, placement=Placement.of(plan),
                           gpu_pod_eviction=u.gpu_pod_deletion, auto_drain=u.drain,
                           drain_timeout=f"{u.timeout_seconds}s", drain_force=u.force,
                           drain_delete_emptydir=u.delete_empty_dir, drain_pod_selector=u.pod_selector,
                           auto_upgrade=u.auto, max_parallel_upgrades=u.max_parallel)

    @classmethod
    def render(cls, p: DriverProps) -> list[dict]:
        labels = {"app": DS_NAME, "app.kubernetes.io/component": NAME, "nvidia.com/precompiled": "false"}
        pod_spec = {
            "affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{
                "labelSelector": {"matchExpressions": [{"key": "app.kubernetes.io/component", "operator": "In",
                                                        "values": [NAME]}]},
                "topologyKey": "kubernetes.io/hostname"}]}},
            "serviceAccountName": NAME,
            "hostPID": True,
            "initContainers": [_manager(p)],
            "containers": [_driver_ctr(p)],
            "volumes": VOLUMES,
        }
        return rbac(NAME, p.namespace, ROLE_RULES, CLUSTER_RULES) + [
            {"apiVersion": "v1", "kind": "ConfigMap",
             "metadata": meta("nvidia-driver-startup-probe", p.namespace,
                              {"app": DS_NAME, "app.kubernetes.io/component": NAME}),
             "data": {"startup-probe.sh": PROBE}},
            daemonset(DS_NAME, p.namespace, app=DS_NAME, labels=labels, deploy=cls.deploy_label,
                      placement=p.placement, annotations={"openshift.io/scc": NAME}, pod_spec=pod_spec,
                      pod_annotations={"kubectl.kubernetes.io/default-container": "nvidia-driver-ctr"},
                      update_strategy=update_strategy(p)),
        ]
