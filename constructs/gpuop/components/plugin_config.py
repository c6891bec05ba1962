"""Device plugin config: ConfigMap `device-plugin-config` (one key per distinct pool config, plus
`default`), and the pieces the Operator's handleDevicePluginConfig adds to the device plugin, GFD and MPS
control daemon DaemonSets when such a config exists (controllers/object_controls.go, v26.7):
- the `config-manager-init` init container and `config-manager` sidecar of the assets, on the device
  plugin image, with DEFAULT_CONFIG set to the default key and FALLBACK_STRATEGIES=empty appended; they
  copy the key named by the node label `nvidia.com/device-plugin.config` to /config/config.yaml and signal
  the main process when the label changes;
- CONFIG_FILE=/config/config.yaml on the main container, the `config` emptyDir at /config and the
  ConfigMap (a volume named like it) at /available-configs on every container that reads it;
- `shareProcessNamespace: true` (the sidecar signals the main process), except on a pod that already
  has `hostPID` (the MPS control daemon): upstream skips it there ("if hostPID is already set, we skip
  setting the shareProcessNamespace field"), and the API server refuses a pod with both
  ("ShareProcessNamespace and HostPID cannot both be enabled"), pkg/apis/core/validation;
- resources: the sidecar gets the component's (the Operator's all-containers loop) and so does
  `config-manager-init` (configManagerResourceRequirements: GFD's for the GFD DaemonSet, the device
  plugin's for the device plugin and the MPS control daemon);
- MIG env as applyMIGConfiguration: MIG_STRATEGY and NVIDIA_MIG_MONITOR_DEVICES=all, or with no cluster
  strategy ("unset": pools differ) only NVIDIA_MIG_MONITOR_DEVICES=all and each config's flags.migStrategy.

Upstream the ConfigMap is the user's (`devicePlugin.config.name`, created by the Helm chart with
`create: true`); gpuop generates it from the pools (pools.py) and always names it `device-plugin-config`.
It is its own always-on component, so switching the device plugin off at deploy time does not leave GFD
pointing at a missing ConfigMap.
"""

from __future__ import annotations

from pydantic import Field

from gpuop.kube.slots import slot
from gpuop.components.base import Component
from gpuop.components.props import Props
from gpuop.components.builders import env, meta, mount

NAME = "device-plugin-config"
LABEL = "nvidia.com/device-plugin.config"
DEFAULT = "default"


class PluginConfigProps(Props):
    configs: tuple[tuple[str, str], ...] = Field(description="(key, k8s-device-plugin config v1 YAML). Required.")


class PluginConfig(Component):
    name = "device-plugin-config"
    values_key = None
    props_type = PluginConfigProps

    @classmethod
    def render(cls, p: PluginConfigProps) -> list[dict]:
        return [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta(NAME, p.namespace),
                 "data": dict(p.configs)}]


# ---- what handleDevicePluginConfig adds to a DaemonSet ---------------------------------------------

def mig_env(strategy: str | None) -> list[dict]:
    """applyMIGConfiguration: unset strategy -> only NVIDIA_MIG_MONITOR_DEVICES (the config decides)."""
    if strategy is None:
        return [env("NVIDIA_MIG_MONITOR_DEVICES", "all")]
    return [env("MIG_STRATEGY", strategy)] + ([env("NVIDIA_MIG_MONITOR_DEVICES", "all")] if strategy != "none" else [])


def mounts() -> list[dict]:
    return [mount("config", "/config"), mount(NAME, "/available-configs")]


def volumes() -> list[dict]:
    return [{"name": NAME, "configMap": {"name": NAME}}, {"name": "config", "emptyDir": {}}]


def _env(oneshot: bool, process: str) -> list[dict]:
    return [
        env("ONESHOT", "true" if oneshot else "false"),
        env("KUBECONFIG", ""),
        env("NODE_NAME", field_path="spec.nodeName"),
        env("NODE_LABEL", LABEL),
        env("CONFIG_FILE_SRCDIR", "/available-configs"),
        env("CONFIG_FILE_DST", "/config/config.yaml"),
        env("DEFAULT_CONFIG", DEFAULT),
        env("SEND_SIGNAL", "false" if oneshot else "true"),
        env("SIGNAL", "" if oneshot else "1"),
        env("PROCESS_TO_SIGNAL", "" if oneshot else process),
        env("FALLBACK_STRATEGIES", "empty"),
    ]


def init_container(image: str, resources: str) -> dict:
    """`config-manager-init` as the assets declare it, after transformConfigManagerInitContainer (with
    configManagerResourceRequirements: the component's resources)."""
    return {"name": "config-manager-init", "image": image, "imagePullPolicy": slot("imagePullPolicy"),
            "command": ["config-manager"], "env": _env(True, ""), "resources": resources,
            "volumeMounts": mounts()}


def sidecar(image: str, process: str, resources: str) -> dict:
    """`config-manager` as the assets declare it, after transformConfigManagerSidecarContainer; the
    component's resources apply to it, as the Operator applies them to every container."""
    return {"name": "config-manager", "image": image, "imagePullPolicy": slot("imagePullPolicy"),
            "command": ["config-manager"], "env": _env(False, process), "resources": resources,
            "securityContext": {"privileged": True}, "volumeMounts": mounts()}


def config_file_env(on: bool) -> list[dict]:
    """CONFIG_FILE for the main container, placed where handleDevicePluginConfig puts it (before the MIG env)."""
    return [env("CONFIG_FILE", "/config/config.yaml")] if on else []


def apply(pod_spec: dict, main: dict, image: str, process: str, resources: str) -> None:
    """The rest of handleDevicePluginConfig, on a pod spec whose main container is `main`."""
    main["volumeMounts"] += mounts()
    if not pod_spec.get("hostPID"):       # upstream's condition; both set is refused by the API server
        pod_spec["shareProcessNamespace"] = True
    pod_spec["volumes"] += volumes()
    pod_spec["initContainers"].append(init_container(image, resources))
    pod_spec["containers"].append(sidecar(image, process, resources))
