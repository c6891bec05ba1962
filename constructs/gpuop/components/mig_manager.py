"""MIG manager: ServiceAccount/Role/RoleBinding/ClusterRole/ClusterRoleBinding `nvidia-mig-manager`,
ConfigMaps `custom-mig-parted-config` (key config.yaml: the pools' mig-parted v1 config), `default-gpu-clients`
(key clients.yaml) and `nvidia-mig-manager-entrypoint`, DaemonSet `nvidia-mig-manager`; as the Operator's
state-mig-manager (assets/state-mig-manager) after TransformMIGManager (v26.7) with a custom config
(`migManager.config.name`): the mig-parted-config volume points at the custom ConfigMap and
CONFIG_FILE=/mig-parted-config/config.yaml is set (the Operator's TestMIGManager custom-config case; NOTES.md
§2), the gpu-clients volume at `default-gpu-clients`, CDI_ENABLED for CDI and NVIDIA_CDI_HOOK_PATH only
with an operator-installed toolkit (`if config.Toolkit.IsEnabled()`),
runtimeClassName `nvidia`, hostPID and hostIPC, the toolkit-validation init container (runAsUser 0).

What it does: on each node it watches the label `nvidia.com/mig.config` (set per pool through NFD or the
node group, pools.py) and applies that named config with mig-parted, pausing the GPU operands on the node
while it repartitions (their deploy labels go to `paused-for-mig-change`) and reporting
`nvidia.com/mig.config.state`. The config holds `all-disabled` and one config per distinct pool layout,
each entry limited by `device-filter` to the PCI ids of the GPU model the layout was checked for, so a
config can only hit that model.

Differences from upstream:
- The DaemonSet is rendered only when some pool has a MIG-capable GPU (upstream: whenever migManager is
  on): a pool with a layout, or one without, which gets `all-disabled` as upstream's default config
  unless spec.migManager.disableMigWithoutLayout is false (plan/pools.py); its deploy label `nvidia.com/gpu.deploy.mig-manager` is published by the NodeFeatureRule on nodes
  with a MIG-capable GPU (by PCI device id), as the Operator labels only MIG-capable nodes.
- `default-mig-parted-config` is not emitted: the Operator skips it too when a custom config is given.
- No `nvidia.com/mig.config=all-disabled` default for unlabelled nodes (the Operator's node-labeling
  controller sets it); gpuop labels every declared MIG-capable pool explicitly instead (`all-disabled`
  for a pool without a layout), through NFD or, where NFD cannot tell pools apart, the node group.
- NFD owns the deploy labels, so it may set a paused label back to `true` during a repartition (the same
  caveat as driver upgrades, docs/components.md).

Service account token: mounted (the default), since the manager labels its node
(`nvidia.com/mig.config.state`, the paused deploy labels) and deletes GPU client pods.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import Field

from gpuop.kube.slots import slot
from gpuop.components.base import Component
from gpuop.components.device_plugin import cdi_hook_env
from gpuop.components.props import ValidatedProps
from gpuop.components.builders import (SCC_RULE, daemonset, env, host_path, meta, mount, rbac, resources_slot,
                                       validation_init)

NAME = "nvidia-mig-manager"
CONFIG_CM = "custom-mig-parted-config"
CLIENTS_CM = "default-gpu-clients"
ENTRYPOINT_CM = "nvidia-mig-manager-entrypoint"
SCRIPTS = Path(__file__).parent / "scripts"
ENTRYPOINT = (SCRIPTS / "mig-manager-entrypoint.sh").read_text()
GPU_CLIENTS = (SCRIPTS / "mig-manager-gpu-clients.yaml").read_text()
LABELS = {"app": NAME}
ROLE_RULES = [
    SCC_RULE,
    {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch", "delete"]},
    {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["create", "get", "list", "update", "patch"]},
]
CLUSTER_RULES = [
    {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "watch", "update", "patch"]},
    {"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]},
]
VALIDATION_ARGS = ("until [ -f /run/nvidia/validations/toolkit-ready ]; do echo waiting for nvidia container "
                   "toolkit to be setup; sleep 5; done")


class MigManagerProps(ValidatedProps):
    image: str = Field(description="k8s-mig-manager image. Required.")
    mig_parted_config: str = Field(description="config.yaml: the mig-parted v1 config of the pools. Required.")
    toolkit_install_dir: str | None = Field("/usr/local/nvidia", description=(
        "Where the operator-installed toolkit put the CDI hook; None: a preinstalled toolkit (no "
        "NVIDIA_CDI_HOOK_PATH). Omitted: /usr/local/nvidia."))


class MigManager(Component):
    name = "mig-manager"
    values_key = "migManager"
    props_type = MigManagerProps
    deploy_label = "mig-manager"
    mig_capable_only = True      # node_labels.py publishes the deploy label on MIG-capable GPUs only

    @classmethod
    def render(cls, p: MigManagerProps) -> list[dict]:
        container = {
            "name": NAME, "image": p.image, "imagePullPolicy": slot("imagePullPolicy"),
            "command": ["/bin/sh", "-c"], "args": ["/bin/entrypoint.sh"],
            "env": [
                env("NODE_NAME", field_path="spec.nodeName"),
                env("POD_NAME", field_path="metadata.name"),
                env("POD_NAMESPACE", field_path="metadata.namespace"),
                env("GPU_CLIENTS_FILE", "/gpu-clients/clients.yaml"),
                env("DEFAULT_GPU_CLIENTS_NAMESPACE", field_path="metadata.namespace"),
                env("CONFIG_FILE", "/mig-parted-config/config.yaml"),
                env("CDI_ENABLED", "true"),
                *cdi_hook_env(p.toolkit_install_dir),
            ],
            "resources": resources_slot("migManager"),
            "securityContext": {"privileged": True},
            "volumeMounts": [
                mount(ENTRYPOINT_CM, "/bin/entrypoint.sh", read_only=True, sub_path="entrypoint.sh"),
                mount("run-nvidia-validations", "/run/nvidia/validations"),
                mount("host-sys", "/sys"),
                mount("host-root", "/host", propagation="HostToContainer"),
                mount("gpu-clients", "/gpu-clients"),
                mount("mig-parted-config", "/mig-parted-config"),
                mount("driver-install-dir", "/driver-root", propagation="HostToContainer"),
                mount("cdi-root", "/var/run/cdi"),
            ],
        }
        init = validation_init("toolkit", p, [
            mount("run-nvidia-validations", "/run/nvidia/validations", propagation="HostToContainer")],
            wait_for="toolkit")
        init["args"] = [VALIDATION_ARGS]
        pod_spec = {
            "serviceAccountName": NAME,
            "hostPID": True,
            "hostIPC": True,
            "runtimeClassName": "nvidia",
            "initContainers": [init],
            "containers": [container],
            "volumes": [
                {"name": ENTRYPOINT_CM, "configMap": {"name": ENTRYPOINT_CM, "defaultMode": 448}},
                host_path("host-sys", "/sys", "Directory"),
                host_path("run-nvidia-validations", "/run/nvidia/validations", "DirectoryOrCreate"),
                host_path("driver-install-dir", "/run/nvidia/driver", "DirectoryOrCreate"),
                host_path("host-root", "/"),
                {"name": "gpu-clients", "configMap": {"name": CLIENTS_CM}},
                {"name": "mig-parted-config", "configMap": {"name": CONFIG_CM}},
                host_path("cdi-root", "/var/run/cdi", "DirectoryOrCreate"),
            ],
        }
        return rbac(NAME, p.namespace, ROLE_RULES, CLUSTER_RULES) + [
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta(CONFIG_CM, p.namespace),
             "data": {"config.yaml": p.mig_parted_config}},
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta(CLIENTS_CM, p.namespace),
             "data": {"clients.yaml": GPU_CLIENTS}},
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta(ENTRYPOINT_CM, p.namespace, LABELS),
             "data": {"entrypoint.sh": ENTRYPOINT}},
            daemonset(NAME, p.namespace, app=NAME, labels=LABELS, deploy=cls.deploy_label, placement=p.placement,
                      annotations=None, pod_spec=pod_spec),
        ]
