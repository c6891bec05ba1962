"""Operator validator: ServiceAccount/Role/RoleBinding/ClusterRole/ClusterRoleBinding
`nvidia-operator-validator`, DaemonSet `nvidia-operator-validator`; as the Operator's
state-operator-validation (assets/state-operator-validation) after TransformValidator (v26.7).

The validator is how the stack starts in the right order on a new node without a controller. Its
init containers run one after the other and each leaves a file in the host's /run/nvidia/validations:
- `driver-validation` waits for the driver (nvidia-smi through the driver root) -> driver-ready; the
  toolkit and device plugin entrypoints wait for that file;
- `toolkit-validation` checks the container toolkit (nvidia-smi through the `nvidia` runtime) ->
  toolkit-ready; the device plugin, GFD, DCGM and DCGM exporter wait for it in their own
  toolkit-validation init containers;
- `cuda-validation` runs a CUDA workload pod (the validator image, VALIDATOR_* env) -> cuda-ready;
- `plugin-validation` runs a pod that requests a GPU through the device plugin -> plugin-ready
  (left out when the device plugin is off, as upstream).
The main container then idles and removes the *-ready files when it stops (preStop), so a driver
restart re-runs the chain. The validator cannot be switched off: without it nothing writes
toolkit-ready and every component after the toolkit would wait forever.

Resources: the validator's on every container, the init containers included
(TransformValidatorComponent applies config.Validator.Resources to each). Service account token: mounted
(the default): driver-validation lists the driver DaemonSets (isDriverManagedByOperator), cuda- and
plugin-validation read the node and create their workload pods (cmd/nvidia-validator).

Differences from upstream, and why:
- `VALIDATOR_IMAGE_PULL_SECRETS` (for the workload pods) is written from the profile's pull secrets at
  compile time; overriding `imagePullSecrets` in Helm values at deploy time does not reach it.
- The nvidia-fs (GDS) and gdrcopy validation init containers: v26.x's asset has none (the driver's startup probe
  checks the sidecars); before v26.3 they follow driver-validation while spec.driver's gds / gdrcopy is on
  (`sidecar_checks`), as v25.10's TransformValidatorComponent keeps them.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from gpuop.kube.slots import slot
from gpuop.components.base import Component
from gpuop.components.props import DaemonSetProps
from gpuop.components.builders import VALIDATOR_RESOURCES, SCC_RULE, daemonset, env, host_path, mount, rbac

NAME = "nvidia-operator-validator"
LABELS = {"app": NAME, "app.kubernetes.io/part-of": "gpu-operator"}
ROLE_RULES = [
    SCC_RULE,
    {"apiGroups": [""], "resources": ["pods"], "verbs": ["create", "get", "list", "watch", "update", "patch", "delete"]},
    {"apiGroups": ["apps"], "resources": ["daemonsets"], "verbs": ["get", "list", "watch"]},
]
CLUSTER_RULES = [
    {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "watch"]},
    {"apiGroups": ["nvidia.com"], "resources": ["clusterpolicies/finalizers", "nvidiadrivers/finalizers"],
     "verbs": ["create", "get", "list", "watch", "update", "patch", "delete"]},
]
VALIDATIONS = mount("run-nvidia-validations", "/run/nvidia/validations", propagation="Bidirectional")


class ValidatorProps(DaemonSetProps):
    image: str = Field(description="gpu-operator (validator) image. Required.")
    device_plugin: bool = Field(True, description="Run plugin-validation. Omitted: true.")
    mig_strategy: Literal["none", "single", "mixed"] | None = Field("single", description=(
        "MIG_STRATEGY of plugin-validation; None: pools differ (each pool's plugin config carries its own), "
        "written empty as the operator passes the cluster's empty strategy (v26.7's validator picks the workload's "
        "resource from the node's allocatable either way). Omitted: single."))
    pull_secrets: tuple[str, ...] = Field((), description="Pull secrets of the workload pods. Omitted: none.")
    sidecar_checks: tuple[Literal["nvidia-fs", "gdrcopy"], ...] = Field((), description=(
        "The driver sidecars (nvidia-fs for GDS, gdrcopy) the validator checks in init containers of their own after "
        "driver-validation, as v25.10's (catalog/data/releases.yaml assets.validatorSidecarChecks; from v26.3 the "
        "driver's startup probe checks them). Omitted: none."))


def _step(component: str, p: ValidatorProps, env_: list[dict], mounts: list[dict], se_linux: bool = False) -> dict:
    sc: dict = {"privileged": True, "runAsUser": 0}
    if se_linux:
        sc["seLinuxOptions"] = {"level": "s0"}
    return {"name": f"{component}-validation", "image": p.image, "imagePullPolicy": slot("imagePullPolicy"),
            "command": ["sh", "-c"], "args": ["nvidia-validator"], "env": env_,
            "resources": VALIDATOR_RESOURCES if p.init_resources else {},
            "securityContext": sc, "volumeMounts": mounts}


def _workload_env(p: ValidatorProps) -> list[dict]:
    """What the cuda and plugin validations need to start their workload pods."""
    e = [env("VALIDATOR_IMAGE", p.image), env("VALIDATOR_IMAGE_PULL_POLICY", slot("imagePullPolicy"))]
    if p.pull_secrets:
        e.append(env("VALIDATOR_IMAGE_PULL_SECRETS", ",".join(p.pull_secrets)))
    return e + [env("VALIDATOR_RUNTIME_CLASS", "nvidia")]


def init_containers(p: ValidatorProps) -> list[dict]:
    node, ns = env("NODE_NAME", field_path="spec.nodeName"), env("OPERATOR_NAMESPACE", field_path="metadata.namespace")
    steps = [
        _step("driver", p, [env("WITH_WAIT", "true"), env("COMPONENT", "driver"), ns], [
            mount("host-root", "/host", propagation="HostToContainer", read_only=True),
            mount("driver-install-dir", "/run/nvidia/driver", propagation="HostToContainer"),
            VALIDATIONS, mount("host-dev-char", "/host-dev-char")], se_linux=True),
    ] + [  # v25.10.1 assets/state-operator-validation/0500_daemonset.yaml L59-98
        _step(c, p, [env("WITH_WAIT", "true"), env("COMPONENT", c), node], [VALIDATIONS], se_linux=True)
        for c in p.sidecar_checks
    ] + [
        _step("toolkit", p, [env("NVIDIA_VISIBLE_DEVICES", "all"), env("WITH_WAIT", "false"),
                                   env("COMPONENT", "toolkit")], [VALIDATIONS]),
        _step("cuda", p, [env("WITH_WAIT", "false"), env("COMPONENT", "cuda"), node, ns] + _workload_env(p),
              [VALIDATIONS]),
    ]
    if p.device_plugin:
        steps.append(_step("plugin", p, [env("COMPONENT", "plugin"), env("WITH_WAIT", "false"),
                                               env("WITH_WORKLOAD", "false"), env("MIG_STRATEGY", p.mig_strategy or ""),
                                               node, ns] + _workload_env(p), [VALIDATIONS]))
    return steps


class OperatorValidator(Component):
    name = "operator-validator"
    values_key = None            # always on; Helm values `validator.resources` still apply
    props_type = ValidatorProps
    deploy_label = "operator-validator"

    @classmethod
    def render(cls, p: ValidatorProps) -> list[dict]:
        container = {
            "name": NAME, "image": p.image, "imagePullPolicy": slot("imagePullPolicy"),
            "command": ["sh", "-c"], "args": ["echo all validations are successful; while true; do sleep 86400; done"],
            "resources": VALIDATOR_RESOURCES,
            "securityContext": {"privileged": True, "runAsUser": 0},
            "lifecycle": {"preStop": {"exec": {"command": ["sh", "-c", "rm -f /run/nvidia/validations/*-ready"]}}},
            "volumeMounts": [VALIDATIONS],
        }
        pod_spec = {
            "serviceAccountName": NAME,
            "runtimeClassName": "nvidia",
            "initContainers": init_containers(p),
            "containers": [container],
            "volumes": [host_path("run-nvidia-validations", "/run/nvidia/validations", "DirectoryOrCreate"),
                        host_path("driver-install-dir", "/run/nvidia/driver"), host_path("host-root", "/"),
                        host_path("host-dev-char", "/dev/char")],
        }
        return rbac(NAME, p.namespace, ROLE_RULES, CLUSTER_RULES) + [
            daemonset(NAME, p.namespace, app=NAME, labels=LABELS, selector=LABELS, deploy=cls.deploy_label,
                      placement=p.placement, annotations=None, pod_spec=pod_spec),
        ]
