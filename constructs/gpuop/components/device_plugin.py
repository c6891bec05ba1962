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
`cdi-annotations,cdi-cri`. Differences from upstream: none in the objects.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field

from gpuop.kube.slots import slot
from gpuop.components import plugin_config
from gpuop.components.base import Component
from gpuop.components.props import ValidatedProps
from gpuop.components.builders import (SCC_RULE, daemonset, env, host_path, meta, mount, rbac, resources_slot,
                                       validation_init)

NAME = "nvidia-device-plugin"
DS_NAME = "nvidia-device-plugin-daemonset"
ENTRYPOINT = (Path(__file__).parent / "scripts" / "device-plugin-entrypoint.sh").read_text()


class DevicePluginProps(ValidatedProps):
    image: str = Field(description="k8s-device-plugin image. Required.")
    mig_strategy: Literal["none", "single", "mixed"] | None = Field("single", description=(
        "MIG_STRATEGY; None: unset, each pool's plugin config decides. Omitted: single."))
    plugin_config: bool = Field(False, description="Mount ConfigMap device-plugin-config with the config manager. "
                                "Omitted: no plugin config, no config-manager containers.")
    toolkit_install_dir: str = Field("/usr/local/nvidia", description="Where the toolkit installed the CDI "
                                     "hook. Omitted: /usr/local/nvidia.")



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
                env("NVIDIA_CDI_HOOK_PATH", f"{p.toolkit_install_dir}/toolkit/nvidia-cdi-hook"),
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
        init = validation_init("toolkit", p.validator_image, [
            mount("run-nvidia-validations", "/run/nvidia/validations", propagation="HostToContainer")],
            wait_for="toolkit")
        pod_spec = {
            "serviceAccountName": NAME,
            "runtimeClassName": "nvidia",
            "initContainers": [init],
            "containers": [container],
            "volumes": [
                {"name": "nvidia-device-plugin-entrypoint",
                 "configMap": {"name": "nvidia-device-plugin-entrypoint", "defaultMode": 448}},
                host_path("device-plugin", "/var/lib/kubelet/device-plugins"),
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
        return rbac(NAME, p.namespace, [SCC_RULE], cluster_rules) + [
            {"apiVersion": "v1", "kind": "ConfigMap",
             "metadata": meta("nvidia-device-plugin-entrypoint", p.namespace, labels),
             "data": {"entrypoint.sh": ENTRYPOINT}},
            daemonset(DS_NAME, p.namespace, app=DS_NAME, labels=labels, deploy=cls.deploy_label,
                      placement=p.placement, annotations={"openshift.io/scc": "hostmount-anyuid"}, pod_spec=pod_spec),
        ]
