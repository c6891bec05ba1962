"""MPS control daemon: ServiceAccount/Role/RoleBinding/ClusterRole/ClusterRoleBinding
`nvidia-device-plugin-mps-control-daemon`, DaemonSet `nvidia-device-plugin-mps-control-daemon`; as the
Operator's state-mps-control-daemon (assets/state-mps-control-daemon) after TransformMPSControlDaemon
(v26.7): the device plugin's image for the `mps-control-daemon-mounts` init container and the
`mps-control-daemon-ctr` container, the device plugin's resources on every container, the config
manager (handleDevicePluginConfig, plugin_config.py), runtimeClassName `nvidia`, the MIG env of
applyMIGConfiguration, the default MPS root /run/nvidia/mps.

It runs on nodes labelled `nvidia.com/gpu.deploy.device-plugin=true` and `nvidia.com/mps.capable=true`;
GFD sets the latter from the node's device plugin config when it shares GPUs through MPS.

The pod has `hostPID: true` (the asset's: the config-manager sidecar signals `/usr/bin/mps-control-daemon`
through the host PID namespace) and therefore no `shareProcessNamespace` (handleDevicePluginConfig skips
it when hostPID is set; plugin_config.py). Resources: the device plugin's on every container, the
`mps-control-daemon-mounts` and `config-manager-init` init containers included (TransformMPSControlDaemon,
configManagerResourceRequirements); the validator's on `toolkit-validation`. The service account token
is mounted: the config-manager sidecar watches the node's `nvidia.com/device-plugin.config` label
(k8s-device-plugin cmd/config-manager), and gpuop renders this DaemonSet only with a plugin config.

Differences from upstream, and why:
- Upstream renders this state whenever the device plugin is on; gpuop emits it only when some pool uses
  MPS (elsewhere it could never be scheduled). Its Helm values key is the device plugin's
  (`devicePlugin.enabled` removes both, as upstream's state follows the device plugin).
- The pods run as ServiceAccount `nvidia-device-plugin-mps-control-daemon` (the asset creates it and its
  RBAC, but its DaemonSet names the device plugin's `nvidia-device-plugin`). On OpenShift gpuop gives
  each ServiceAccount its own SCC sized to its pods (openshift.py); sharing the device plugin's would
  emit two SCCs `nvidia-device-plugin` with different `allowHostPID`, one overwriting the other, and the
  MPS pods would be refused whenever the device plugin's (no host PID) won.
"""

from __future__ import annotations

from pydantic import Field

from gpuop.kube.slots import slot
from gpuop.components import plugin_config
from gpuop.components.base import Component
from gpuop.components.props import Placement, ValidatedProps
from gpuop.components.builders import (SCC_RULE, daemonset, env, host_path, mount, rbac, resources_slot,
                                       validation_init)

NAME = "nvidia-device-plugin-mps-control-daemon"
LABELS = {"app": NAME}
CLUSTER_RULES = [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "watch"]}]


class MpsControlDaemonProps(ValidatedProps):
    image: str = Field(description="k8s-device-plugin image (the daemon ships in it). Required.")
    mig_strategy: str | None = Field("single", description="MIG_STRATEGY; None: unset. Omitted: single.")


class MpsControlDaemon(Component):
    name = "mps-control-daemon"
    values_key = "devicePlugin"
    props_type = MpsControlDaemonProps
    deploy_label = None          # selects the device plugin's deploy label (and nvidia.com/mps.capable)

    @classmethod
    def render(cls, p: MpsControlDaemonProps) -> list[dict]:
        resources = resources_slot("devicePlugin")
        main = {
            "name": "mps-control-daemon-ctr", "image": p.image, "imagePullPolicy": slot("imagePullPolicy"),
            "command": ["mps-control-daemon"],
            "env": [{"name": "NODE_NAME", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "spec.nodeName"}}},
                    env("NVIDIA_VISIBLE_DEVICES", "all"), env("NVIDIA_DRIVER_CAPABILITIES", "compute,utility"),
                    *plugin_config.config_file_env(True), *plugin_config.mig_env(p.mig_strategy)],
            "resources": resources,
            "securityContext": {"privileged": True},
            "volumeMounts": [mount("mps-shm", "/dev/shm"), mount("mps-root", "/mps")],
        }
        mounts_init = {"name": "mps-control-daemon-mounts", "image": p.image, "imagePullPolicy": slot("imagePullPolicy"),
                       "command": ["mps-control-daemon", "mount-shm"], "resources": resources,
                       "securityContext": {"privileged": True},
                       "volumeMounts": [mount("mps-root", "/mps", propagation="Bidirectional")]}
        validation = validation_init("toolkit", p,
                                     [mount("run-nvidia", "/run/nvidia", propagation="HostToContainer")], wait_for="toolkit")
        pod_spec = {
            "serviceAccountName": NAME,          # its own (docstring): one SCC per ServiceAccount on OpenShift
            "hostPID": True,
            "runtimeClassName": "nvidia",
            "initContainers": [validation, mounts_init],
            "containers": [main],
            "volumes": [host_path("run-nvidia", "/run/nvidia", "Directory"),
                        host_path("mps-root", "/run/nvidia/mps", "DirectoryOrCreate"),
                        host_path("mps-shm", "/run/nvidia/mps/shm")],
        }
        plugin_config.apply(pod_spec, main, p.image, "/usr/bin/mps-control-daemon", resources)
        placement = Placement(node_selector={**p.placement.node_selector, "nvidia.com/mps.capable": "true"},
                              node_affinity=p.placement.node_affinity)
        return rbac(NAME, p.namespace, [SCC_RULE], CLUSTER_RULES) + [
            daemonset(NAME, p.namespace, app=NAME, labels=LABELS, deploy="device-plugin", placement=placement,
                      annotations={"openshift.io/scc": "hostmount-anyuid"}, pod_spec=pod_spec),
        ]
