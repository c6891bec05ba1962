"""GPU feature discovery: ServiceAccount/Role/RoleBinding/ClusterRole/ClusterRoleBinding
`nvidia-gpu-feature-discovery`, DaemonSet `gpu-feature-discovery`; as the Operator's state
gpu-feature-discovery (assets/gpu-feature-discovery) after TransformGPUDiscoveryPlugin (v26.7).

GFD labels each GPU node with what it finds (`nvidia.com/gpu.product`, `.count`, `.memory`, `cuda.*`,
`mig.*`, ...). It publishes them through NFD: as NodeFeature objects (the NodeFeature API, hence the
Role on nodefeatures.nfd.k8s-sigs.io) and as a feature file under
/etc/kubernetes/node-feature-discovery/features.d; NFD's master turns either into node labels, which is
why NFD must allow the `nvidia.com` label namespace (spec.nfd).

As the Operator does without a device-plugin config, the asset's `config-manager-init` init container
and `config-manager` sidecar are removed; with one (pools that share GPUs or differ in MIG strategy)
they stay, as handleDevicePluginConfig renders them (plugin_config.py): GFD reads the pool's config to
label `nvidia.com/gpu.replicas`, the sharing strategy and `nvidia.com/mps.capable` (which the MPS control
daemon selects on). `MIG_STRATEGY` (and `NVIDIA_MIG_MONITOR_DEVICES=all` unless the strategy is none)
comes from the pools, or only the latter when pools differ; the pod runs with runtimeClassName `nvidia`;
the toolkit-validation init container waits for the validator's toolkit check (runAsUser 0, as
transformValidationInitContainer sets it).

On OpenShift, labels go through NFD's feature files, not the NodeFeature API (USE_NODE_FEATURE_API=false,
set before CONFIG_FILE and the MIG env as TransformGPUDiscoveryPlugin does; NOTES.md §3).

Resources: GFD's on every container, `config-manager-init` included (configManagerResourceRequirements
picks gfd.resources for a DaemonSet with a `gpu-feature-discovery` container); the validator's on
`toolkit-validation`.

Service account token: GFD builds a Kubernetes client only for the NodeFeature API
(k8s-device-plugin cmd/gpu-feature-discovery: `if UseNodeFeatureAPI`), the config-manager sidecar always.
So it is not mounted (`automountServiceAccountToken: false`) on OpenShift without a plugin config, and
mounted otherwise.

Differences from upstream: the token as above (the asset leaves it mounted). The image is the device
plugin's (k8s-device-plugin), as upstream, but versioned on its own (`spec.gfd.version`).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from gpuop.kube.slots import slot
from gpuop.components import plugin_config
from gpuop.components.base import Component
from gpuop.components.props import ValidatedProps
from gpuop.components.builders import (SCC_RULE, daemonset, env, host_path, mount, rbac, resources_slot,
                                       validation_init)

NAME = "nvidia-gpu-feature-discovery"
DS_NAME = "gpu-feature-discovery"
LABELS = {"app": DS_NAME, "app.kubernetes.io/part-of": "nvidia-gpu"}
ROLE_RULES = [
    SCC_RULE,
    {"apiGroups": ["nfd.k8s-sigs.io"], "resources": ["nodefeatures"],
     "verbs": ["get", "list", "watch", "create", "update"]},
    {"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]},
]
CLUSTER_RULES = [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "watch"]}]
FEATURES_DIR = "/etc/kubernetes/node-feature-discovery/features.d"


class GfdProps(ValidatedProps):
    image: str = Field(description="k8s-device-plugin image (GFD ships in it). Required.")
    mig_strategy: Literal["none", "single", "mixed"] | None = Field("single", description=(
        "MIG_STRATEGY; None: unset, each pool's plugin config decides. Omitted: single."))
    plugin_config: bool = Field(False, description="Read the pools' device plugin config through the config "
                                "manager. Omitted: no config.")
    config_manager_image: str = Field("", description="Image of the config-manager containers (the device "
                                      "plugin's, as upstream). Omitted: none (only needed with plugin_config).")


class GpuFeatureDiscovery(Component):
    name = "gpu-feature-discovery"
    values_key = "gfd"
    props_type = GfdProps
    deploy_label = "gpu-feature-discovery"

    @classmethod
    def render(cls, p: GfdProps) -> list[dict]:
        mig = plugin_config.config_file_env(p.plugin_config) + plugin_config.mig_env(p.mig_strategy)
        nfd_api = not p.placement.openshift     # OpenShift: feature files (USE_NODE_FEATURE_API=false)
        container = {
            "name": "gpu-feature-discovery", "image": p.image, "imagePullPolicy": slot("imagePullPolicy"),
            "command": ["gpu-feature-discovery"],
            "env": [
                env("GFD_SLEEP_INTERVAL", "60s"),
                env("GFD_FAIL_ON_INIT_ERROR", "true"),
                env("NAMESPACE", field_path="metadata.namespace"),
                env("NODE_NAME", field_path="spec.nodeName"),
                env("POD_NAME", field_path="metadata.name"),
            ] + ([] if nfd_api else [env("USE_NODE_FEATURE_API", "false")]) + mig,
            "resources": resources_slot("gfd"),
            "securityContext": {"privileged": True},
            "volumeMounts": [mount("output-dir", FEATURES_DIR), mount("host-sys", "/sys", read_only=True)],
        }
        init = validation_init("toolkit", p,
                               [mount("run-nvidia", "/run/nvidia", propagation="HostToContainer")], wait_for="toolkit")
        pod_spec = {
            "serviceAccountName": NAME,
            "automountServiceAccountToken": nfd_api or p.plugin_config,   # who calls the API: docstring
            "runtimeClassName": "nvidia",
            "initContainers": [init],
            "containers": [container],
            "volumes": [host_path("output-dir", FEATURES_DIR), host_path("host-sys", "/sys"),
                        host_path("run-nvidia", "/run/nvidia", "Directory")],
        }
        if p.plugin_config:
            plugin_config.apply(pod_spec, container, p.config_manager_image, "gpu-feature-discovery", resources_slot("gfd"))
        return rbac(NAME, p.namespace, ROLE_RULES, CLUSTER_RULES) + [
            daemonset(DS_NAME, p.namespace, app=DS_NAME, labels=LABELS, selector=LABELS, deploy=cls.deploy_label,
                      placement=p.placement, annotations=None, pod_spec=pod_spec),
        ]
