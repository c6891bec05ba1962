"""Device plugin: ServiceAccount/Role/RoleBinding/ClusterRole/ClusterRoleBinding `nvidia-device-plugin`,
ConfigMap `nvidia-device-plugin-entrypoint`, DaemonSet `nvidia-device-plugin-daemonset`; as the
Operator's state-device-plugin after TransformDevicePlugin (v26.7, CDI on).

Without a plugin config the Operator removes the config-manager containers; so does gpuop. When pools
share GPUs (time-slicing, MPS) or differ in MIG strategy, the generated config (ConfigMap
`device-plugin-config`, plugin_config.py) brings them back exactly as handleDevicePluginConfig does:
config-manager init and sidecar, CONFIG_FILE, the config volumes, shareProcessNamespace. The MIG env is
applyMIGConfiguration's: `MIG_STRATEGY` (the pools' common strategy) and NVIDIA_MIG_MONITOR_DEVICES=all
unless it is none; with no common strategy, no MIG_STRATEGY and each pool's config carries
flags.migStrategy (the env would override the file). CDI switches the device list strategy to
`cdi-annotations,cdi-cri`; `NVIDIA_CDI_HOOK_PATH` (the operator-installed toolkit's
`<installDir>/toolkit/nvidia-cdi-hook`) is set only when the toolkit is operator-installed, as
transformDevicePluginCtrForCDI (`if config.Toolkit.IsEnabled()`): with a preinstalled toolkit the plugin
falls back to its own default (the host's packaged hook), since /usr/local/nvidia/toolkit does not exist.

Service account token: not mounted (`automountServiceAccountToken: false`) without a plugin config: the
plugin itself never calls the Kubernetes API (k8s-device-plugin: only cmd/config-manager and GFD build a
client). With a plugin config the `config-manager` sidecar watches the node's label, so it is mounted.

GDS / GDRCopy cluster-wide (`gds`, `gdrcopy`): GDS_ENABLED + MOFED_ENABLED and GDRCOPY_ENABLED, as
TransformDevicePlugin sets them for the ClusterPolicy's gds / gdrcopy.

XID health policy (spec.devicePlugin.health, nodePools[].devicePluginHealth; catalog/xids.py): the cluster's policy
as DP_DISABLE_HEALTHCHECKS / DP_ENABLE_HEALTHCHECKS on this DaemonSet; each other policy a pool has gets a
DaemonSet `nvidia-device-plugin-<policy name>` of its own on the nodes labelled
nvidia.com/device-plugin.health=<policy name> (the plugin reads the policy from its env only), and this one stays
off them. The Operator has one devicePlugin.env, so it has no such split (operator mode refuses differing pools).

Pass-through: `env_overrides` / `args` are the Operator's devicePlugin.env / args;
`kubelet_root_dir` moves the `device-plugin` volume to <hostPaths.kubeletRootDir>/device-plugins (the
container keeps /var/lib/kubelet/device-plugins, where the plugin registers).

Differences from upstream: the token (upstream's asset leaves it to the default, mounted); a
deploy-time Helm `toolkit.enabled=false` does not drop NVIDIA_CDI_HOOK_PATH (the env is decided at
compile time from the profile's `toolkit.enabled`).
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from gpuop.kube.slots import slot
from gpuop.components import env_names
from gpuop.components import plugin_config
from gpuop.components.base import Component
from gpuop.components.props import ValidatedProps
from gpuop.components.builders import (SCC_RULE, daemonset, env, host_path, merge_env, meta, mount, rbac,
                                       resources_slot, validation_init)

NAME = "nvidia-device-plugin"
DS_NAME = "nvidia-device-plugin-daemonset"
ENTRYPOINT_CM = "nvidia-device-plugin-entrypoint"         # a ConfigMap name gpuop writes (validate/reserved.py)
ENTRYPOINT = (Path(__file__).parent / "scripts" / "device-plugin-entrypoint.sh").read_text()
# Every env name gpuop may set on the plugin container: spec.devicePlugin.env overriding one gets a warning.
GPUOP_ENV = env_names.DEVICE_PLUGIN


class HealthPolicyProps(BaseModel):
    """One pool health policy other than the cluster's: its DaemonSet's label value and env."""
    model_config = ConfigDict(extra="forbid", frozen=True)
    name: str = Field(description="Label value and DaemonSet name suffix (health-<6 hex>). Required.")
    env: tuple[tuple[str, str], ...] = Field(description="DP_DISABLE_HEALTHCHECKS / DP_ENABLE_HEALTHCHECKS. Required.")


class DevicePluginProps(ValidatedProps):
    image: str = Field(description="k8s-device-plugin image. Required.")
    mig_strategy: Literal["none", "single", "mixed"] | None = Field("single", description=(
        "MIG_STRATEGY; None: unset, each pool's plugin config decides. Omitted: single."))
    plugin_config: bool = Field(False, description="Mount ConfigMap device-plugin-config with the config manager. "
                                "Omitted: no plugin config, no config-manager containers.")
    toolkit_install_dir: str | None = Field("/usr/local/nvidia", description=(
        "Where the operator-installed toolkit put the CDI hook; None: a preinstalled toolkit (no "
        "NVIDIA_CDI_HOOK_PATH, the plugin's own default). Omitted: /usr/local/nvidia."))
    env_overrides: tuple[tuple[str, str], ...] = Field((), description=(
        "spec.devicePlugin.env merged over the plugin container's env by name (builders.merge_env). Omitted: none."))
    args: tuple[str, ...] | None = Field(None, description=(
        "Replace the plugin container's args (spec.devicePlugin.args). Omitted: the entrypoint script."))
    kubelet_root_dir: str = Field("/var/lib/kubelet", description=(
        "The kubelet's root directory: the `device-plugin` volume is its device-plugins/ (hostPaths."
        "kubeletRootDir). Omitted: /var/lib/kubelet."))
    gds: bool = Field(False, description=(
        "GPUDirect Storage cluster-wide (spec.driver.gds): GDS_ENABLED and MOFED_ENABLED, so that the plugin "
        "injects /dev/nvidia-fs* and /dev/infiniband into GPU containers. Omitted: false."))
    gdrcopy: bool = Field(False, description=(
        "GDRCopy cluster-wide (spec.driver.gdrcopy): GDRCOPY_ENABLED, so that the plugin injects /dev/gdrdrv. "
        "Omitted: false."))
    health_env: tuple[tuple[str, str], ...] = Field((), description=(
        "The cluster's XID health policy as the plugin's env (DP_DISABLE_HEALTHCHECKS / DP_ENABLE_HEALTHCHECKS, "
        "catalog/xids.py policy_env), before env_overrides. Omitted: none (NVIDIA's defaults)."))
    health_policies: tuple[HealthPolicyProps, ...] = Field((), description=(
        "The other policies pools have: one more DaemonSet each, on the nodes labelled health_label=<name>; the "
        "main DaemonSet then stays off those nodes. Omitted: none (one DaemonSet)."))
    health_label: str = Field("nvidia.com/device-plugin.health", description=(
        "The node label that selects a policy's DaemonSet (plan/pools.py HEALTH_LABEL). Omitted: "
        "nvidia.com/device-plugin.health."))


def cdi_hook_env(install_dir: str | None) -> list[dict]:
    """NVIDIA_CDI_HOOK_PATH, only for an operator-installed toolkit (TransformDevicePlugin and
    TransformMIGManager: `if config.Toolkit.IsEnabled()`)."""
    return [env("NVIDIA_CDI_HOOK_PATH", f"{install_dir}/toolkit/nvidia-cdi-hook")] if install_dir else []


def sidecar_env(gds: bool, gdrcopy: bool) -> list[dict]:
    """The device nodes of the cluster's GDS / GDRCopy modules, injected by the plugin (TransformDevicePlugin:
    `if config.GPUDirectStorage.IsEnabled()` GDS_ENABLED and MOFED_ENABLED, `if config.GDRCopy.IsEnabled()`
    GDRCOPY_ENABLED; pools with sidecars of their own only reach their driver pods, as NVIDIADriver CRs do)."""
    return ([env("GDS_ENABLED", "true"), env("MOFED_ENABLED", "true")] if gds else []) + (
        [env("GDRCOPY_ENABLED", "true")] if gdrcopy else [])


class DevicePlugin(Component):
    name = "device-plugin"
    values_key = "devicePlugin"
    deploy_label = "device-plugin"
    props_type = DevicePluginProps

    @classmethod
    def render(cls, p: DevicePluginProps) -> list[dict]:
        container = {
            "name": "nvidia-device-plugin", "image": p.image, "imagePullPolicy": slot("imagePullPolicy"),
            "command": ["/bin/sh", "-c"], "args": ["/bin/entrypoint.sh"],
            "env": [
                env("PASS_DEVICE_SPECS", "true"),
                env("FAIL_ON_INIT_ERROR", "true"),
                env("DEVICE_LIST_STRATEGY", "cdi-annotations,cdi-cri"),
                env("DEVICE_ID_STRATEGY", "uuid"),
                env("NVIDIA_VISIBLE_DEVICES", "all"),
                env("NVIDIA_DRIVER_CAPABILITIES", "all"),
                env("MPS_ROOT", "/run/nvidia/mps"),
                *plugin_config.config_file_env(p.plugin_config),
                *plugin_config.mig_env(p.mig_strategy),
                env("CDI_ENABLED", "true"),
                env("CDI_ANNOTATION_PREFIX", "cdi.k8s.io/"),
                *cdi_hook_env(p.toolkit_install_dir),
                *sidecar_env(p.gds, p.gdrcopy),
                *(env(n, v) for n, v in p.health_env),
            ],
            "resources": resources_slot("devicePlugin"),
            "securityContext": {"privileged": True},
            "volumeMounts": [
                mount("nvidia-device-plugin-entrypoint", "/bin/entrypoint.sh", read_only=True, sub_path="entrypoint.sh"),
                mount("device-plugin", "/var/lib/kubelet/device-plugins"),
                mount("run-nvidia-validations", "/run/nvidia/validations"),
                mount("driver-install-dir", "/driver-root", propagation="HostToContainer"),
                mount("host-root", "/host", propagation="HostToContainer", read_only=True),
                mount("cdi-root", "/var/run/cdi"),
                mount("mps-shm", "/dev/shm"),
                mount("mps-root", "/mps"),
            ],
        }
        container["env"] = merge_env(container["env"], p.env_overrides)
        if p.args is not None:
            container["args"] = list(p.args)
        init = validation_init("toolkit", p, [
            mount("run-nvidia-validations", "/run/nvidia/validations", propagation="HostToContainer")],
            wait_for="toolkit")
        pod_spec = {
            "serviceAccountName": NAME,
            "automountServiceAccountToken": p.plugin_config,    # only the config-manager sidecar calls the API
            "runtimeClassName": "nvidia",
            "initContainers": [init],
            "containers": [container],
            "volumes": [
                {"name": "nvidia-device-plugin-entrypoint",
                 "configMap": {"name": ENTRYPOINT_CM, "defaultMode": 448}},
                host_path("device-plugin", f"{p.kubelet_root_dir}/device-plugins"),
                host_path("run-nvidia-validations", "/run/nvidia/validations", "DirectoryOrCreate"),
                host_path("driver-install-dir", "/run/nvidia/driver", "DirectoryOrCreate"),
                host_path("host-root", "/"),
                host_path("cdi-root", "/var/run/cdi", "DirectoryOrCreate"),
                host_path("mps-root", "/run/nvidia/mps", "DirectoryOrCreate"),
                host_path("mps-shm", "/run/nvidia/mps/shm"),
            ],
        }
        if p.plugin_config:
            plugin_config.apply(pod_spec, container, p.image, "nvidia-device-plugin", resources_slot("devicePlugin"))
        labels = {"app": DS_NAME}
        cluster_rules = [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "watch"]}]
        placement = p.placement
        if p.health_policies:      # the nodes of another policy get that policy's DaemonSet, never this one
            placement = placement.model_copy(update={"node_affinity": (
                *placement.node_affinity, (p.health_label, "DoesNotExist", ()))})
        return rbac(NAME, p.namespace, [SCC_RULE], cluster_rules) + [
            {"apiVersion": "v1", "kind": "ConfigMap",
             "metadata": meta(ENTRYPOINT_CM, p.namespace, labels),
             "data": {"entrypoint.sh": ENTRYPOINT}},
            daemonset(DS_NAME, p.namespace, app=DS_NAME, labels=labels, deploy=cls.deploy_label,
                      placement=placement, annotations={"openshift.io/scc": "hostmount-anyuid"},
                      pod_spec=copy.deepcopy(pod_spec)),
            *(cls._policy_daemonset(p, pod_spec, h) for h in p.health_policies),
        ]

    @classmethod
    def _policy_daemonset(cls, p: DevicePluginProps, pod_spec: dict, h: HealthPolicyProps) -> dict:
        """The DaemonSet of one pool policy: the main one's pod, its own app label, the policy's env in place of
        the cluster's (env_overrides still win by name), on the nodes labelled with the policy's name."""
        name = f"{NAME}-{h.name}"
        spec = copy.deepcopy(pod_spec)
        plugin = next(c for c in spec["containers"] if c["name"] == "nvidia-device-plugin")
        cluster = {n for n, _ in p.health_env}
        own = [e for e in plugin["env"] if e["name"] not in cluster or e["name"] in dict(p.env_overrides)]
        plugin["env"] = merge_env(own, tuple((n, v) for n, v in h.env if n not in dict(p.env_overrides)))
        return daemonset(name, p.namespace, app=name, labels={"app": name}, deploy=cls.deploy_label,
                         placement=p.placement, annotations={"openshift.io/scc": "hostmount-anyuid"}, pod_spec=spec,
                         node_selector={p.health_label: h.name})
