"""Container toolkit: ServiceAccount/Role/RoleBinding `nvidia-container-toolkit`, ConfigMap
`nvidia-container-toolkit-entrypoint`, DaemonSet `nvidia-container-toolkit-daemonset`; as the
Operator's state-container-toolkit after TransformToolkit and transformForRuntime (v26.7).

The runtime's config file, drop-in and socket directories are mounted under /runtime/... exactly as
the Operator does; which files a runtime uses comes from the stack release catalog (containerd: config,
conf.d drop-in, socket, CONTAINERD_RUNTIME_CLASS; CRI-O: /etc/crio/config.toml read, the drop-in
crio.conf.d/99-nvidia.conf written, no socket; docker: daemon.json and its socket). CDI is on (the
v26.7 default), so the `nvidia` runtime is not made the node's default and CRIO_CONFIG_MODE is
`config` (runtime handlers in the drop-in, no OCI prestart hook). The `crio-hooks` host directory is
the asset's /run/containers/oci/hooks.d, except CRI-O off OpenShift: /usr/share/containers/oci/hooks.d
(TransformToolkit; catalog `runtimes.crio.hooks`). On OpenShift the runtime is always CRI-O.

Distributions (catalog/distributions.py): k3s, RKE2, k0s and MicroK8s give their own config
file / template, drop-in and socket in `runtime_files`, mounted the same way; `config_source` adds
RUNTIME_CONFIG_SOURCE=file=<the file the distribution renders, seen in the container: through the config
directory's mount when it lies beside the template (k3s, RKE2), else through the read-only host-root
mount /host (k0s)> where the toolkit cannot `containerd config dump` the distribution's containerd. The upstream way is the
user's toolkit.env; gpuop derives it from `spec.platform.distribution`. `env_overrides` is the Operator's
toolkit.env (merged by name); `args` replaces the entrypoint's, which the ClusterPolicy's toolkit.args does not
(v26.7's TransformToolkit applies env only), so operator mode refuses it.

Service account token: mounted (the default): the `driver-validation` init container lists the driver
DaemonSets to learn whether the driver is the Operator's (cmd/nvidia-validator isDriverManagedByOperator;
hence the Role's `daemonsets list`). Its resources are the validator's (transformValidationInitContainer).
"""

from __future__ import annotations

import posixpath
from pathlib import Path

from pydantic import Field

from gpuop.catalog import RuntimeFiles
from gpuop.kube.slots import slot
from gpuop.components import env_names
from gpuop.components.base import Component
from gpuop.components.props import ValidatedProps
from gpuop.components.builders import (SCC_RULE, daemonset, env, host_path, merge_env, meta, mount, rbac,
                                       resources_slot, validation_init)

NAME = "nvidia-container-toolkit"
DS_NAME = "nvidia-container-toolkit-daemonset"
ENTRYPOINT_CM = "nvidia-container-toolkit-entrypoint"         # a ConfigMap name gpuop writes (validate/reserved.py)
ENTRYPOINT = (Path(__file__).parent / "scripts" / "toolkit-entrypoint.sh").read_text()
CONFIG_DIR, DROP_IN_DIR, SOCKET_DIR = "/runtime/config-dir/", "/runtime/config-dir.d/", "/runtime/sock-dir/"
ASSET_HOOKS_DIR = "/run/containers/oci/hooks.d"      # state-container-toolkit/0500_daemonset.yaml `crio-hooks`
# Every env name gpuop may set on the toolkit container (any runtime): spec.toolkit.env overriding one
# gets a warning (validate/distribution.py); tests/test_distributions.py checks renders stay inside it.
GPUOP_ENV = env_names.TOOLKIT


class ToolkitProps(ValidatedProps):
    image: str = Field(description="container-toolkit image. Required.")
    runtime: str = Field("containerd", description="containerd, crio or docker. Omitted: containerd.")
    runtime_files: RuntimeFiles = Field(description="The runtime's config/drop-in/socket host paths. Required.")
    runtime_class: str = Field("nvidia", description="Runtime handler registered in containerd. Omitted: nvidia.")
    hooks_dir: str = Field(ASSET_HOOKS_DIR, description="Host directory of the `crio-hooks` volume. Omitted: the asset's.")
    config_source: str | None = Field(None, description=(
        "Host path of the config file the toolkit reads the runtime's current config from (RUNTIME_CONFIG_SOURCE "
        "file=<path in the container>: the config directory's mount, or /host<path>), on distributions whose containerd cannot be asked "
        "with `containerd config dump` from the toolkit. Omitted: unset (the toolkit's default: the runtime's "
        "command, then the file)."))
    install_dir: str = Field("/usr/local/nvidia", description=(
        "Host directory the toolkit installs into (the `toolkit-install-dir` volume; toolkit.installDir). "
        "Omitted: /usr/local/nvidia (the CRD default; GKE COS: /home/kubernetes/bin/nvidia)."))
    env_overrides: tuple[tuple[str, str], ...] = Field((), description=(
        "spec.toolkit.env merged over the container's env by name (builders.merge_env). Omitted: none."))
    args: tuple[str, ...] | None = Field(None, description=(
        "Replace the container's args (spec.toolkit.args). Omitted: the entrypoint script."))


def _runtime_wiring(p: ToolkitProps) -> tuple[list[dict], list[dict], list[dict]]:
    """(env, mounts, volumes) for the runtime, as transformForRuntime."""
    f, rt = p.runtime_files, p.runtime
    e = [env("RUNTIME", rt)]
    if rt == "containerd":
        e.append(env("CONTAINERD_RUNTIME_CLASS", p.runtime_class))
    target = CONFIG_DIR + posixpath.basename(f.config)
    e += [env("RUNTIME_CONFIG", target), env(f.configEnv, target)]
    mounts = [mount(f"{rt}-config", CONFIG_DIR)]
    vols = [host_path(f"{rt}-config", posixpath.dirname(f.config), "DirectoryOrCreate")]
    if f.dropIn:
        e += [env("RUNTIME_DROP_IN_CONFIG", DROP_IN_DIR + posixpath.basename(f.dropIn)),
              env("RUNTIME_DROP_IN_CONFIG_HOST_PATH", f.dropIn)]
        mounts.append(mount(f"{rt}-drop-in-config", DROP_IN_DIR))
        vols.append(host_path(f"{rt}-drop-in-config", posixpath.dirname(f.dropIn), "DirectoryOrCreate"))
    if f.socket:
        target = SOCKET_DIR + posixpath.basename(f.socket)
        e += [env("RUNTIME_SOCKET", target), env(f.socketEnv, target)]
        mounts.append(mount(f"{rt}-socket", SOCKET_DIR))
        vols.append(host_path(f"{rt}-socket", posixpath.dirname(f.socket)))
    if p.config_source:      # beside the config: through its mount; elsewhere: through the host-root mount
        same_dir = posixpath.dirname(p.config_source) == posixpath.dirname(f.config)
        source = CONFIG_DIR + posixpath.basename(p.config_source) if same_dir else f"/host{p.config_source}"
        e.append(env("RUNTIME_CONFIG_SOURCE", f"file={source}"))
    return e, mounts, vols


class ContainerToolkit(Component):
    name = "toolkit"
    values_key = "toolkit"
    deploy_label = "container-toolkit"
    props_type = ToolkitProps

    @classmethod
    def render(cls, p: ToolkitProps) -> list[dict]:
        rt_env, rt_mounts, rt_vols = _runtime_wiring(p)
        container = {
            "name": "nvidia-container-toolkit-ctr", "image": p.image, "imagePullPolicy": slot("imagePullPolicy"),
            "command": ["/bin/sh", "-c"], "args": ["/bin/entrypoint.sh"],
            "env": [
                env("ROOT", "/usr/local/nvidia"),
                env("NVIDIA_CONTAINER_RUNTIME_MODES_CDI_DEFAULT_KIND", "management.nvidia.com/gpu"),
                env("NVIDIA_VISIBLE_DEVICES", "void"),
                env("TOOLKIT_PID_FILE", "/run/nvidia/toolkit/toolkit.pid"),
                env("NRI_NAMESPACE", field_path="metadata.namespace"),
                env("CDI_ENABLED", "true"),
                env("NVIDIA_RUNTIME_SET_AS_DEFAULT", "false"),
                env("NVIDIA_CONTAINER_RUNTIME_MODE", "cdi"),
                env("CRIO_CONFIG_MODE", "config"),
            ] + rt_env,
            "resources": resources_slot("toolkit"),
            "securityContext": {"privileged": True, "seLinuxOptions": {"level": "s0"}},
            "volumeMounts": [
                mount("nvidia-container-toolkit-entrypoint", "/bin/entrypoint.sh", read_only=True,
                      sub_path="entrypoint.sh"),
                mount("toolkit-root", "/run/nvidia/toolkit"),
                mount("run-nvidia-validations", "/run/nvidia/validations"),
                mount("toolkit-install-dir", "/usr/local/nvidia"),
                mount("crio-hooks", "/usr/share/containers/oci/hooks.d"),
                mount("driver-install-dir", "/driver-root", propagation="HostToContainer"),
                mount("host-root", "/host", propagation="HostToContainer", read_only=True),
                mount("cdi-root", "/var/run/cdi"),
            ] + rt_mounts,
        }
        container["env"] = merge_env(container["env"], p.env_overrides)
        if p.args is not None:
            container["args"] = list(p.args)
        init = validation_init("driver", p, [
            mount("driver-install-dir", "/run/nvidia/driver", propagation="HostToContainer"),
            mount("run-nvidia-validations", "/run/nvidia/validations", propagation="Bidirectional"),
            mount("host-root", "/host", propagation="HostToContainer", read_only=True),
            mount("host-dev-char", "/host-dev-char"),
        ])
        pod_spec = {
            "serviceAccountName": NAME,
            "hostPID": True,
            "initContainers": [init],
            "containers": [container],
            "volumes": [
                {"name": "nvidia-container-toolkit-entrypoint",
                 "configMap": {"name": ENTRYPOINT_CM, "defaultMode": 448}},
                host_path("toolkit-root", "/run/nvidia/toolkit", "DirectoryOrCreate"),
                host_path("run-nvidia-validations", "/run/nvidia/validations", "DirectoryOrCreate"),
                host_path("driver-install-dir", "/run/nvidia/driver", "DirectoryOrCreate"),
                host_path("host-root", "/"),
                host_path("toolkit-install-dir", p.install_dir),
                host_path("crio-hooks", p.hooks_dir),
                host_path("host-dev-char", "/dev/char"),
                host_path("cdi-root", "/var/run/cdi", "DirectoryOrCreate"),
            ] + rt_vols,
        }
        labels = {"app": DS_NAME}
        rules = [SCC_RULE, {"apiGroups": ["apps"], "resources": ["daemonsets"], "verbs": ["list"]}]
        return rbac(NAME, p.namespace, rules) + [
            {"apiVersion": "v1", "kind": "ConfigMap",
             "metadata": meta(ENTRYPOINT_CM, p.namespace, labels),
             "data": {"entrypoint.sh": ENTRYPOINT}},
            daemonset(DS_NAME, p.namespace, app=DS_NAME, labels=labels, deploy=cls.deploy_label,
                      placement=p.placement, annotations={"openshift.io/scc": "hostmount-anyuid"}, pod_spec=pod_spec),
        ]
