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
- mixed OS and per-pool drivers: `nvidia-driver-daemonset[-<version>][-<os tag>][-<sidecars>]`, selected by
  NFD's OS labels and, where one OS carries several drivers, by the pools' labels (one affinity term per pool);
  `<sidecars>` (rdma, hostmofed, gds, gdrcopy) where pools differ in them (plan/drivers.py).
Each split DaemonSet selects its pods by `app: <its name>` (upstream: only the DTK split does).

Differences from upstream, and why:
- The peermem, nvidia-fs and gdrcopy sidecars of the asset are added only to the variants whose pools have
  rdma.enabled, gds and gdrcopy (spec.driver or the pool's driver; the Operator removes them otherwise, per
  NVIDIADriver CR on its NVIDIADriver path): peermem with the driver's image, GPU_DIRECT_RDMA_ENABLED
  (and USE_HOST_MOFED) on the driver container and the driver manager; GDS_ENABLED / GDRCOPY_ENABLED on the
  driver container (`sidecar_env`, as the Operator sets them); nvidia-fs / gdrdrv images
  <version>-<os tag> from the release (catalog/data/driver-extras.yaml), with the repo / cert files mounted
  as on the driver container. Not on OpenShift (the Driver Toolkit variants of those sidecars are not built).
- `DRIVER_CONFIG_DIGEST` (on `k8s-driver-manager`, `nvidia-driver-ctr` and the Driver Toolkit sidecar,
  appended last, as TransformDriver) is computed at compile time by `config_digest`: the first 16 hex
  digits of SHA-256 over canonical JSON of the inputs of upstream's DriverInstallState
  (internal/config/driver_config_digest.go): the driver manager's image and literal env; the driver
  container's image, command, args, literal env (valueFrom skipped) sorted by name and volume mounts
  sorted; the DTK sidecar's image; every pod volume sorted by name (configMap/secret name, hostPath
  path); the host-root path. The driver manager and the driver container compare it with the one stored
  in /run/nvidia/nvidia-driver.state and skip the module unload/rebuild (and the GPU pod eviction) when
  it is unchanged. Only equality matters, so the value differs from upstream's FNV-32a of Go's spew
  format: moving a node from the Operator to gpuop costs one full reinstall. The image registry counts
  with its compile-time value (`image_registry`: the profile's or the release's), other value slots by
  their expression; a deploy-time Helm `imageRegistry` override does not change it (same driver, same
  tag, another mirror).
- RHEL (not OpenShift, runtime not CRI-O) and SLES / SL Micro nodes: the host's subscription and
  entitlement files are mounted read-only into the driver container as `subscription-config-<i>` (mount
  paths sorted, as transformDriverContainer), so the driver build reaches the entitled repositories;
  not for precompiled drivers (they build nothing), where SLES gets `/lib/modules` instead.
- Resources: the driver's on `nvidia-driver-ctr`, the DTK sidecar and the `k8s-driver-manager` init
  container (transformDriverManagerInitContainer gets config.Driver.Resources).
- Service account token: mounted (the default): the driver manager evicts pods, cordons and labels its
  node through the API.
- repoConfig / certConfig: upstream lists the keys of the live ConfigMap to mount each one;
  gpuop compiles without a cluster, so the profile names the keys (`repo_config` / `cert_config`), mounted
  one subPath each at the OS's path (REPO_CONFIG_PATHS / CERT_CONFIG_PATHS). Proxy env arrives through
  `env_overrides` (spec.proxy, then spec.driver.env), as the Operator's driver.env would carry it.
- `KERNEL_MODULE_TYPE` is always set (auto included), so the chosen module type is visible in git.
- `NVIDIA_VISIBLE_DEVICES=void` on the driver container, as the Operator's own golden renders (the
  NVIDIADriver path; the ClusterPolicy asset lacks it): the pod has no runtimeClass, so it changes
  nothing but keeps the two renders comparable.
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

import hashlib
import json
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from gpuop.kube.slots import slot
from gpuop.components import env_names
from gpuop.components.base import Component
from gpuop.components.props import DaemonSetProps
from gpuop.components.builders import (SCC_RULE, daemonset, env, host_path, merge_env, meta, mount, rbac,
                                       resources_slot, with_host_paths)
from gpuop.components.openshift import DTK_CONTAINER, DTK_SHARED, DTK_SHARED_PATH, dtk_container, dtk_image_stream

NAME = "nvidia-driver"
DS_NAME = "nvidia-driver-daemonset"
PROBE_CM = "nvidia-driver-startup-probe"         # a ConfigMap name gpuop writes (validate/reserved.py)
PROBE = (Path(__file__).parent / "scripts" / "driver-startup-probe.sh").read_text()
# v25.10's asset probes the driver inline (assets/state-driver/0500_daemonset.yaml at v25.10.1, L137-140)
INLINE_PROBE = ["sh", "-c", "[ -f /sys/module/nvidia/refcnt ] && nvidia-smi && touch /run/nvidia/validations/.driver-ctr-ready"]

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
    os_id: str = Field("", description=(
        "The nodes' os-release ID (rhel, sles, ...): decides the subscription mounts. Omitted: none known, "
        "no subscription mounts."))
    precompiled: bool = Field(False, description="A precompiled driver image (no build). Omitted: false.")
    digest: str | None = Field(None, description="Pin the image by this digest (<tag>@<digest>). Omitted: tag only.")
    os_tag: str = Field("", description="The OS part of the tag (GDS / GDRCopy sidecar tags). Omitted: none.")
    rdma: bool = Field(False, description="The nvidia-peermem sidecar (GPUDirect RDMA). Omitted: false.")
    use_host_mofed: bool = Field(False, description="USE_HOST_MOFED=true (host MOFED). Omitted: false.")
    gds: bool = Field(False, description="The nvidia-fs sidecar (needs the props' gds_image). Omitted: false.")
    gdrcopy: bool = Field(False, description=(
        "The nvidia-gdrcopy sidecar (needs the props' gdrcopy_image). Omitted: false."))


class DriverProps(DaemonSetProps):
    repository: str = Field(description="Driver image without tag (`<registry>/driver`). Required.")
    variants: tuple[Variant, ...] = Field(description="The driver DaemonSets, at least one. Required.")
    openshift_version: str | None = Field(None, description="OPENSHIFT_VERSION env (OpenShift). Omitted: not set.")
    dtk_image_stream: str = Field("driver-toolkit", description="Driver Toolkit ImageStream. Omitted: driver-toolkit.")
    dtk_namespace: str = Field("openshift", description="Namespace of its source tags. Omitted: openshift.")
    manager_image: str = Field(description="k8s-driver-manager image. Required.")
    image_registry: str = Field("", description=(
        "The image registry the `imageRegistry` slot defaults to, counted in DRIVER_CONFIG_DIGEST. Omitted: "
        "the slot's expression is counted instead."))
    runtime: str = Field("containerd", description=(
        "Container runtime of the nodes (CRI-O injects RHEL subscriptions itself). Omitted: containerd."))
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
    gds_image: tuple[str, str] | None = Field(None, description=(
        "(path below the registry, version) of the nvidia-fs sidecar of the variants with `gds`; tag "
        "<version>-<os tag>. Omitted: no variant may run GDS."))
    gdrcopy_image: tuple[str, str] | None = Field(None, description=(
        "(path below the registry, version) of the nvidia-gdrcopy sidecar of the variants with `gdrcopy`; tag "
        "<version>-<os tag>. Omitted: no variant may run GDRCopy."))
    sysfs_mount: tuple[str, str, str] = Field(
        ("host-sys-devices-system", "/sys/devices/system", "Directory"), description=(
            "The driver container's sysfs hostPath mount of the release's asset: (volume name, path on host and in "
            "the container, hostPath type or \"\"). Omitted: v26.7's, all of /sys/devices/system."))
    config_digest: bool = Field(True, description=(
        "DRIVER_CONFIG_DIGEST on the driver pod's containers, as v26.3's TransformDriver on; false: none, as the older "
        "releases (catalog/data/releases.yaml assets.driverConfigDigest). Omitted: true."))
    inline_startup_probe: bool = Field(False, description=(
        "The driver container's startup probe inline (nvidia-smi, then .driver-ctr-ready) and no startup-probe "
        "ConfigMap, as v25.10's asset (assets.driverStartupProbe). Omitted: false, the ConfigMap's script."))
    sidecar_env: bool = Field(True, description=(
        "GDS_ENABLED / GDRCOPY_ENABLED on the driver container of a variant with those sidecars, as v26.3's on; "
        "false: on the Driver Toolkit container only (assets.driverSidecarEnv). Omitted: true."))
    digests: dict[str, str] = Field(default_factory=dict, description=(
        "<path>:<tag> -> digest of sidecar images (pinned). Omitted: tags only."))
    repo_config: tuple[str, tuple[str, ...]] | None = Field(None, description=(
        "(ConfigMap, keys) of package repository files, each key mounted at REPO_CONFIG_PATHS[os ID]/<key>. "
        "Omitted: none."))
    cert_config: tuple[str, tuple[str, ...]] | None = Field(None, description=(
        "(ConfigMap, keys) of CA certificates, each key mounted at CERT_CONFIG_PATHS[os ID]/<key>. Omitted: none."))
    env_overrides: tuple[tuple[str, str], ...] = Field((), description=(
        "spec.driver.env merged over the driver container's env by name (builders.merge_env). Omitted: none."))
    args: tuple[str, ...] | None = Field(None, description=(
        "Replace the driver container's args (spec.driver.args). Omitted: the image's entrypoint args."))


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
        # the driver's, as v26.7's transformDriverManagerInitContainer; none before (p.init_resources)
        "resources": resources_slot("driver") if p.init_resources else {},
    }


# Host subscription/entitlement paths per os-release ID (object_controls.go SubscriptionPathMap):
# mount path -> (host path, hostPath type). Mounted read-only, in sorted mount-path order.
SUBSCRIPTIONS = {
    "rhel": {"/run/secrets/etc-pki-entitlement": ("/etc/pki/entitlement", "Directory"),
             "/run/secrets/redhat.repo": ("/etc/yum.repos.d/redhat.repo", "File"),
             "/run/secrets/rhsm": ("/etc/rhsm", "Directory")},
    "sles": {"/etc/zypp/credentials.d": ("/etc/zypp/credentials.d", "Directory"),
             "/etc/SUSEConnect": ("/etc/SUSEConnect", "FileOrCreate")},
}
SUBSCRIPTIONS["sl-micro"] = SUBSCRIPTIONS["sles"]
SUSE = ("sles", "sl-micro")


def host_mounts(p: DriverProps, v: Variant) -> tuple[list[dict], list[dict]]:
    """(driver container mounts, pod volumes) for the node OS, as the end of transformDriverContainer."""
    if v.precompiled:                      # precompiled images build nothing; SUSE needs the host's modules
        if v.os_id in SUSE:
            return [mount("lib-modules", "/run/host/lib/modules", read_only=True)], [
                host_path("lib-modules", "/lib/modules", "Directory")]
        return [], []
    entitled = (v.os_id == "rhel" and not p.placement.openshift and p.runtime != "crio") or v.os_id in SUSE
    if not entitled:                       # CRI-O and OpenShift inject RHEL subscriptions themselves
        return [], []
    paths = SUBSCRIPTIONS[v.os_id]
    mounts, volumes = [], []
    for i, path in enumerate(sorted(paths)):
        name = f"subscription-config-{i}"
        mounts.append(mount(name, path, read_only=True))
        volumes.append(host_path(name, *paths[path]))
    return mounts, volumes


# where the driver image of each OS reads repository files and CA certificates (sourced in env_names.py)
REPO_CONFIG_PATHS, CERT_CONFIG_PATHS = env_names.REPO_CONFIG_PATHS, env_names.CERT_CONFIG_PATHS


def config_map_files(config: tuple[str, tuple[str, ...]] | None, dest: str) -> tuple[list[dict], list[dict]]:
    """(mounts, volumes) of a ConfigMap whose keys become files in `dest`, as createConfigMapVolumeMounts /
    createConfigMapVolume: one read-only subPath mount per key, the volume named after the ConfigMap."""
    if config is None:
        return [], []
    name, keys = config
    mounts = [mount(name, f"{dest}/{k}", read_only=True, sub_path=k) for k in keys]
    return mounts, [{"name": name, "configMap": {"name": name, "items": [{"key": k, "path": k} for k in keys]}}]


DIGEST_ENV = env_names.DIGEST_ENV
# Every env name gpuop may set on the driver container: spec.driver.env overriding one gets a warning;
# DIGEST_ENV is computed from the rest and cannot be overridden.
GPUOP_ENV = env_names.DRIVER
DIGESTED_CONTAINERS = ("k8s-driver-manager", "nvidia-driver-ctr", DTK_CONTAINER)


def config_digest(pod_spec: dict, image_registry: str = "") -> str:
    """A stable digest of the driver's install config (upstream: extractDriverInstallConfig +
    GetObjectHashIgnoreEmptyKeys): what, when changed, needs the modules rebuilt. Module docstring.
    `image_registry` stands for the `imageRegistry` slot in the images (its compile-time value)."""
    ctrs = {c["name"]: c for c in pod_spec["initContainers"] + pod_spec["containers"]}
    manager, driver, dtk = ctrs["k8s-driver-manager"], ctrs["nvidia-driver-ctr"], ctrs.get(DTK_CONTAINER)

    def literal_env(c: dict) -> list:
        return sorted((e["name"], e.get("value", "")) for e in c.get("env", []) if "valueFrom" not in e)

    def volume(v: dict) -> list:
        return [v["name"], v.get("configMap", {}).get("name", ""), v.get("secret", {}).get("secretName", ""),
                v.get("hostPath", {}).get("path", "")]

    state = {
        "manager": {"image": manager["image"], "env": literal_env(manager)},
        "driver": {"image": driver["image"], "command": driver.get("command", []), "args": driver.get("args", []),
                   "env": literal_env(driver),
                   "mounts": sorted([m["name"], m["mountPath"], m.get("subPath", ""), bool(m.get("readOnly"))]
                                    for m in driver["volumeMounts"])},
        "dtk": {"image": dtk["image"]} if dtk else None,
        "volumes": sorted(volume(v) for v in pod_spec["volumes"]),
        "hostRoot": next((v["hostPath"]["path"] for v in pod_spec["volumes"] if v["name"] == "host-root"), ""),
    }
    text = json.dumps(state, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    if image_registry:                     # a registry change in the profile changes the image: reinstall
        text = text.replace(slot("imageRegistry"), image_registry)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def set_digest(pod_spec: dict, image_registry: str = "") -> None:
    """DRIVER_CONFIG_DIGEST appended last on the containers that compare it (setContainerEnv)."""
    digest = config_digest(pod_spec, image_registry)
    for c in pod_spec["initContainers"] + pod_spec["containers"]:
        if c["name"] in DIGESTED_CONTAINERS:
            c["env"] = [*c.get("env", []), env(DIGEST_ENV, digest)]


def sidecar_env(v: Variant) -> list[dict]:
    """GDS_ENABLED / GDRCOPY_ENABLED on the driver (and Driver Toolkit) container of a variant with the nvidia-fs /
    gdrdrv sidecar: the driver builds those modules' prerequisites (TransformDriver and
    transformOpenShiftDriverToolkitContainer for the ClusterPolicy's gds / gdrcopy, manifests/state-driver for
    an NVIDIADriver's)."""
    return ([env("GDS_ENABLED", "true")] if v.gds else []) + ([env("GDRCOPY_ENABLED", "true")] if v.gdrcopy else [])


def _driver_ctr(p: DriverProps, v: Variant) -> dict:
    e = [env("NVIDIA_VISIBLE_DEVICES", "void"),
         env("NODE_NAME", field_path="spec.nodeName"), env("NODE_IP", field_path="status.hostIP"),
         env("KERNEL_MODULE_TYPE", p.kernel_module_type)]
    if p.kernel_module_type == "open":
        e.append(env("OPEN_KERNEL_MODULES_ENABLED", "true"))
    if p.sidecar_env:
        e += sidecar_env(v)
    if p.openshift_version:
        e.append(env("OPENSHIFT_VERSION", p.openshift_version))
    command, args = (["ocp_dtk_entrypoint"], ["nv-ctr-run-with-dtk"]) if v.rhcos else (["nvidia-driver"], ["init"])
    return {
        "name": "nvidia-driver-ctr", "image": f"{p.repository}:{v.tag}" + (f"@{v.digest}" if v.digest else ""),
        "imagePullPolicy": slot("imagePullPolicy"),
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
            mount(p.sysfs_mount[0], p.sysfs_mount[1]),
            mount("nv-firmware", "/lib/firmware"),
        ] + ([] if p.inline_startup_probe else [mount("driver-startup-probe-script", "/usr/local/bin/startup-probe.sh",
                                                      sub_path="startup-probe.sh")])
          + ([mount(DTK_SHARED, DTK_SHARED_PATH)] if v.rhcos else []),
        "startupProbe": {"exec": {"command": INLINE_PROBE if p.inline_startup_probe else
                                  ["sh", "/usr/local/bin/startup-probe.sh"]},
                         "initialDelaySeconds": 60, "failureThreshold": 120, "successThreshold": 1,
                         "periodSeconds": 10, "timeoutSeconds": 60},
        "lifecycle": {"preStop": {"exec": {"command": [
            "/bin/sh", "-c", "rm -f /run/nvidia/validations/.driver-ctr-ready" + (
                "" if p.inline_startup_probe else " /run/nvidia/validations/.driver-daemons-status")]}}},
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
    host_path("nv-firmware", "/run/nvidia/driver/lib/firmware", "DirectoryOrCreate"),
]
PROBE_VOLUME = {"name": "driver-startup-probe-script", "configMap": {"name": PROBE_CM, "defaultMode": 0o755}}


SIDECAR_MOUNTS = [mount("run-nvidia", "/run/nvidia", propagation="HostToContainer"), mount("var-log", "/var/log"),
                  mount("dev-log", "/dev/log", read_only=True)]


def _probe(command: str, **timing) -> dict:
    return {"exec": {"command": ["sh", "-c", command]}, **timing}


STARTUP = {"initialDelaySeconds": 10, "failureThreshold": 120, "successThreshold": 1, "periodSeconds": 10,
           "timeoutSeconds": 10}
WAIT = ("until [ -d /run/nvidia/driver/usr/src ] && lsmod | grep nvidia; do echo  Waiting for nvidia-driver to be "
        "installed...; sleep 10; done; exec ")


def peermem_ctr(image: str, host_mofed: bool) -> dict:
    """nvidia-peermem-ctr as the asset, with the driver's image (transformPeerMemoryContainer)."""
    c = {"name": "nvidia-peermem-ctr", "image": image, "imagePullPolicy": slot("imagePullPolicy"),
         "command": ["nvidia-driver"], "args": ["reload_nvidia_peermem"],
         "securityContext": {"privileged": True, "seLinuxOptions": {"level": "s0"}},
         "volumeMounts": [mount("run-nvidia", "/run/nvidia", propagation="Bidirectional"), mount("var-log", "/var/log"),
                          mount("dev-log", "/dev/log", read_only=True),
                          mount("run-mellanox-drivers", "/run/mellanox/drivers", propagation="HostToContainer")],
         "startupProbe": _probe("nvidia-driver probe_nvidia_peermem", **STARTUP),
         "livenessProbe": _probe("nvidia-driver probe_nvidia_peermem", periodSeconds=30, initialDelaySeconds=30,
                                 failureThreshold=1, successThreshold=1, timeoutSeconds=10)}
    if host_mofed:
        c["env"] = [env("USE_HOST_MOFED", "true")]
    return c


def module_sidecar(name: str, image: str, installer: str, module: str, extra_mounts: list[dict]) -> dict:
    """nvidia-fs-ctr / nvidia-gdrcopy-ctr as the asset (transformGDSContainer / transformGDRCopyContainer)."""
    return {"name": name, "image": image, "imagePullPolicy": slot("imagePullPolicy"),
            "command": ["bash", "-xc"], "args": [WAIT + f"{installer} install"],
            "securityContext": {"privileged": True, "seLinuxOptions": {"level": "s0"}},
            "volumeMounts": SIDECAR_MOUNTS + extra_mounts,
            "startupProbe": _probe(f"lsmod | grep {module}", **STARTUP)}


def _pinned(p: DriverProps, path: str, tag: str) -> str:
    """A sidecar image below the registry slot, pinned where the plan has its digest."""
    key = f"{path}:{tag}"
    return f"{slot('imageRegistry')}/{key}" + (f"@{p.digests[key]}" if key in p.digests else "")


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
        objs = rbac(NAME, p.namespace, ROLE_RULES, CLUSTER_RULES) + ([] if p.inline_startup_probe else [
            {"apiVersion": "v1", "kind": "ConfigMap",
             "metadata": meta(PROBE_CM, p.namespace,
                              {"app": DS_NAME, "app.kubernetes.io/component": NAME}),
             "data": {"startup-probe.sh": PROBE}}])
        builds = [v.rhcos for v in p.variants if v.rhcos]
        if builds:
            objs.append(dtk_image_stream(p.dtk_image_stream, p.namespace, p.dtk_namespace, sorted(set(builds)),
                                         {"app.kubernetes.io/component": NAME}))
        return objs + [cls._daemonset(p, v) for v in p.variants]

    @classmethod
    def _daemonset(cls, p: DriverProps, v: Variant) -> dict:
        app = v.name if v.split else DS_NAME
        labels = {"app": app, "app.kubernetes.io/component": NAME, "nvidia.com/precompiled": "false", **v.pod_labels}
        driver = _driver_ctr(p, v)
        driver["env"] = merge_env(driver["env"], p.env_overrides)
        if p.args is not None:
            driver["args"] = list(p.args)
        os_mounts, os_volumes = host_mounts(p, v)
        config_mounts = []              # repo / cert files: the driver and the module sidecars build from packages
        for config, paths in ((p.repo_config, REPO_CONFIG_PATHS), (p.cert_config, CERT_CONFIG_PATHS)):
            if config is not None:      # validate/distribution.py refuses an OS ID without a path
                m, vols = config_map_files(config, paths[v.os_id])
                config_mounts, os_volumes = config_mounts + m, os_volumes + vols
        os_mounts = os_mounts + config_mounts
        if v.rdma:                      # transformDriverContainer / transformDriverManagerInitContainer
            rdma_env = [env("GPU_DIRECT_RDMA_ENABLED", "true")] + (
                [env("USE_HOST_MOFED", "true")] if v.use_host_mofed else [])
            driver["env"] = merge_env(driver["env"], tuple((e["name"], e["value"]) for e in rdma_env))
        driver["volumeMounts"] += os_mounts
        containers = [driver]
        if v.rdma:
            containers.append(peermem_ctr(driver["image"], v.use_host_mofed))
        if v.gds and p.gds_image:
            containers.append(module_sidecar("nvidia-fs-ctr",
                                             _pinned(p, p.gds_image[0], f"{p.gds_image[1]}-{v.os_tag}"),
                                             "nvidia-gds-driver", "nvidia_fs", config_mounts))
        if v.gdrcopy and p.gdrcopy_image:
            containers.append(module_sidecar("nvidia-gdrcopy-ctr",
                                             _pinned(p, p.gdrcopy_image[0], f"{p.gdrcopy_image[1]}-{v.os_tag}"),
                                             "nvidia-gdrcopy-driver", "gdrdrv", config_mounts))
        # the release's sysfs mount where v26.7's asset lists it, after the firmware search path
        at = next(i for i, x in enumerate(VOLUMES) if x["name"] == "firmware-search-path") + 1
        volumes = (VOLUMES[:at] + [host_path(*p.sysfs_mount)] + VOLUMES[at:]
                   + ([] if p.inline_startup_probe else [PROBE_VOLUME]) + os_volumes)
        if v.rhcos:
            containers.append(dtk_container(f"{p.dtk_image_stream}:{v.rhcos}", v.rhcos, sidecar_env(v)))
            volumes = volumes + [{"name": DTK_SHARED, "emptyDir": {}}]
        manager = _manager(p)
        if v.rdma:
            manager["env"] = merge_env(manager["env"], (("GPU_DIRECT_RDMA_ENABLED", "true"),) + (
                (("USE_HOST_MOFED", "true"),) if v.use_host_mofed else ()))
        pod_spec = {
            "affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{
                "labelSelector": {"matchExpressions": [{"key": "app.kubernetes.io/component", "operator": "In",
                                                        "values": [NAME]}]},
                "topologyKey": "kubernetes.io/hostname"}]}},
            "serviceAccountName": NAME,
            "hostPID": True,
            "initContainers": [manager],
            "containers": containers,
            "volumes": with_host_paths(volumes, p.placement),    # before the digest: it counts the host root
        }
        if p.config_digest:
            set_digest(pod_spec, p.image_registry)
        ds = daemonset(v.name, p.namespace, app=app, labels=labels, deploy=cls.deploy_label,
                       placement=p.placement, annotations={"openshift.io/scc": NAME}, pod_spec=pod_spec,
                       pod_annotations={"kubectl.kubernetes.io/default-container": "nvidia-driver-ctr"},
                       update_strategy=update_strategy(p), node_selector=v.node_selector, alternatives=v.alternatives)
        ds["metadata"]["labels"] = {**labels, **v.labels}
        return ds
