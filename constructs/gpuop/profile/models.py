"""The cluster profile contract (gpuop/v1alpha1, kind ClusterProfile) as frozen pydantic models.

Unknown fields are refused everywhere (`extra="forbid"`); every field's description says what
happens when it is omitted. The JSON Schema in schemas/profile.schema.json is generated from these
models (`gpuop schema`), and a test fails when it is stale. Facts that depend on the catalogs (which
OS, GPU model or driver version exists) are checked in the validate stage, not here.
"""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, JsonValue, WrapValidator, model_validator

from gpuop.kube import components
from gpuop.kube import validation as kv
from gpuop.profile.grammar import (Arg, DeliveryChartUrl, EnvValue, HostPath, ImageRepository, NodeGroupName,
                                   NoProxyEntry, ProxyUrl)
from gpuop.kube.types import Quantity, ResourceList, Resources, Taint, Toleration  # noqa: F401
from gpuop.kube.types import INT32_MAX, INT64_MAX  # noqa: F401
from gpuop.kube.types import dns_label as _dns_label, dns_subdomain as _dns_subdomain, label_key as _label_key
from gpuop.kube.types import label_key_problem, labels as _labels

# List and mapping lengths (docs/input-limits.md): far above any real cluster, low enough that a hostile
# profile is refused in milliseconds and the error names the limit.
MAX_POOLS = 100            # node pools of one cluster
MAX_TOLERATIONS = 64       # tolerations of the GPU DaemonSets
MAX_LABELS = 64            # entries of one labels / nodeSelector mapping
MAX_AFFINITY = 32          # node affinity requirements, and values of one requirement (x2)
MAX_MIG_PROFILES = 16      # distinct MIG profiles of one layout (the largest GPU has 8)
MAX_PULL_SECRETS = 16      # imagePullSecrets
MAX_KERNELS = 64           # precompiled driver kernels / RHCOS builds (one DaemonSet each)
MAX_METRICS = 512          # DCGM exporter metrics (DCGM has ~200 fields)
MAX_PATTERNS = 64          # podLabelAllowlist entries, shared resources

ClusterName = Annotated[str, AfterValidator(_dns_label(53)), Field(
    description="DNS-1123 label, at most 53 characters (Helm's release-name limit). Names the Helm chart, "
                "the release and the folder dist/<name>/. Required.")]
PoolName = Annotated[str, AfterValidator(_dns_label(40))]
def _every_label_problem(v, handler):
    """Every problem of one labels / nodeSelector mapping, not only the first: a value of the wrong type
    (a number) is reported with the invalid keys and values of the other entries, each one its own error,
    as the API server's ValidateLabels lists every bad label."""
    from pydantic import ValidationError
    from pydantic_core import InitErrorDetails, PydanticCustomError

    details = []
    try:
        out = handler(v)
    except ValidationError as exc:
        details = [InitErrorDetails(type=e["type"], loc=tuple(e["loc"]), input=e["input"],
                                    ctx={k: c for k, c in (e.get("ctx") or {}).items() if isinstance(c, (str, int, float))})
                   for e in exc.errors()]
        out = None
    if isinstance(v, dict):
        for key, value in v.items():
            if not isinstance(key, str):
                continue
            problem = label_key_problem(key) if isinstance(key, str) else None
            if problem is None and isinstance(value, str):
                try:
                    _labels({key: value})
                except ValueError as exc:
                    problem = str(exc)
            if problem:
                details.append(InitErrorDetails(type=PydanticCustomError("value_error", "Value error, {m}", {"m": problem}),
                                                loc=(), input=v))
    if details:
        raise ValidationError.from_exception_data("labels", details)
    return out


Labels = Annotated[dict[str, str], WrapValidator(_every_label_problem), Field(max_length=MAX_LABELS)]


class Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class Metadata(Model):
    name: ClusterName
    labels: Labels = Field(default_factory=dict, description=(
        "Free labels describing the cluster (region, environment); copied onto the Argo CD Application "
        "and Flux objects. Omitted: none."))


class Platform(Model):
    type: Literal["kubernetes", "openshift"] = Field(description="The distribution. Required.")
    version: str = Field(pattern=r"^\d+\.\d+$", description=(
        "Minor version, e.g. \"1.33\" for Kubernetes or \"4.19\" for OpenShift; pins the chart's "
        "kubeVersion and the schemas objects are validated against. Required."))
    distribution: Literal["generic", "k3s", "rke2", "k0s", "microk8s", "eks", "gke", "aks"] | None = Field(None, description=(
        "Kubernetes distribution or managed service (catalog/data/distributions.yaml): k3s, rke2, k0s and "
        "microk8s move the containerd config and socket the container toolkit edits; eks, gke and aks name "
        "what their GPU node images already install (the driver, and on eks/aks the toolkit), which gpuop "
        "then refuses to install a second time. Omitted: generic (the stack release's runtime paths)."))
    containerdMajor: Literal[1, 2] | None = Field(None, description=(
        "containerd major version of the GPU nodes; on k3s and rke2 it picks the config template "
        "(config.toml.tmpl for 1.x, config-v3.toml.tmpl for 2.x); elsewhere the toolkit reads either config "
        "version itself. Omitted: 1."))
    containerdVersion: str | None = Field(None, pattern=r"^[12]\.\d+(\.\d+)?$", description=(
        "containerd version of the GPU nodes, e.g. \"2.1\" or \"1.7.30\": what the NRI plugin's containerd "
        "floor (spec.cdi.nriPluginEnabled) is checked against. Omitted: unknown (the NRI plugin on containerd is "
        "then a warning: its floor cannot be checked)."))
    userNamespaces: bool = Field(False, description=(
        "Whether GPU workloads run in Kubernetes user namespaces (pods with spec.hostUsers: false, e.g. where an "
        "admission policy requires it). NVIDIA supports no GPU pod in its own user namespace: the container "
        "toolkit's CDI hook cannot read the container's OCI spec there, so true is refused (catalog/data/"
        "known-issues.yaml user-namespaces-with-cdi-hooks). Omitted: false (GPU pods keep the host's users)."))


class Cdi(Model):
    """The Container Device Interface settings of NVIDIA's GPU Operator (ClusterPolicy spec.cdi)."""
    nriPluginEnabled: bool = Field(False, description=(
        "Run the container toolkit as an NRI plugin (NVIDIA's chart cdi.nriPluginEnabled): it injects GPUs "
        "into GPU management containers itself, no `nvidia` RuntimeClass is created and the container "
        "runtime's config is left untouched. Needs containerd 1.7.30+ (of 1.7) or 2.1+, or CRI-O 1.34+ "
        "(catalog/data/distributions.yaml nri). Operator mode only (gpuop's stack configures the runtime with "
        "the toolkit). Omitted: false."))


class ComponentSettings(Model):
    enabled: bool = Field(True, description="Omitted: true. False removes every object of the component.")
    version: str | None = Field(None, pattern=r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$", description=(
        "Image tag override. Omitted: the stack release's version for this component."))
    resources: Resources | None = Field(None, description="Omitted: no requests or limits (as upstream).")


def _annotations(value: dict[str, str]) -> dict[str, str]:
    for key in value:
        _label_key(key)
    return value


AbsolutePath = HostPath            # a host path's grammar (profile/grammar.py)
Annotations = Annotated[dict[str, str], AfterValidator(_annotations), Field(max_length=MAX_LABELS)]
MAX_ENV = 64               # pass-through env entries / args of one component


def _kube_check(fn):
    """A pydantic validator from a kube/validation.py rule (its first message is the error)."""
    def check(v: str) -> str:
        errs = fn(v)
        if errs:
            raise ValueError(f"{v!r}: {errs[0]}")
        return v
    return check


class EnvVar(Model):
    # The pattern is for editors (the JSON schema); the check is Kubernetes' own rule, in its words.
    name: Annotated[str, AfterValidator(_kube_check(kv.is_env_var_name))] = Field(
        json_schema_extra={"pattern": kv.schema_pattern(kv.RELAXED_ENV_VAR_NAME_FMT)}, max_length=256, description=(
        "Environment variable name: printable ASCII without '=' (Kubernetes 1.33 and later; on older clusters "
        "letters, digits, '_', '-' and '.', not starting with a digit). Required."))
    value: EnvValue = Field("", description="Value: any text but control characters other than tab and newline. "
                            "Omitted: empty.")


class OperandSettings(ComponentSettings):
    """A component with the Operator's pass-through knobs (`<operand>.env`, `<operand>.args`)."""
    env: list[EnvVar] = Field(default_factory=list, max_length=MAX_ENV, description=(
        "Environment of the component's main container, merged over gpuop's by name: a new name is appended, a "
        "name gpuop sets itself is replaced (with a warning: gpuop set it for a reason). Omitted: gpuop's env."))
    args: list[Arg] | None = Field(None, max_length=MAX_ENV, description=(
        "Arguments of the component's main container; they replace gpuop's, as the Operator's `args` does (the "
        "container's command stays). Omitted: gpuop's args."))


# An XID code as NVIDIA's device plugin reads it: a positive number (0 is the plugin's own marker for "every XID",
# so an entry 0 would turn every check off or make every XID fatal); validate/xid_policy.py checks it against
# NVIDIA's XID catalog (catalog/data/xids.yaml).
XidCode = Annotated[int, Field(ge=1, le=4294967295)]
MAX_XIDS = 64


class DevicePluginHealth(Model):
    """Which XIDs mark a GPU unhealthy in NVIDIA's device plugin (it stops advertising that GPU until the plugin
    restarts): NVIDIA's defaults -- every critical XID but the application errors the plugin ignores
    (13, 31, 43, 45, 68, 109; catalog/data/xids.yaml) -- and these overrides, given to the plugin as its env
    DP_DISABLE_HEALTHCHECKS / DP_ENABLE_HEALTHCHECKS."""
    checks: bool = Field(True, description=(
        "false: XID health checks off (DP_DISABLE_HEALTHCHECKS=all): no XID marks a GPU unhealthy (the device "
        "plugin then watches none, so fatalXids is refused beside it). Omitted: true (checks on)."))
    ignoreXids: list[XidCode] = Field(default_factory=list, max_length=MAX_XIDS, description=(
        "XIDs that leave the GPU healthy, in addition to the ones NVIDIA's plugin ignores by default "
        "(DP_DISABLE_HEALTHCHECKS=<list>); each must be in NVIDIA's XID catalog, and ignoring one NVIDIA says "
        "needs a GPU reset or a reboot is warned. Omitted: none beyond NVIDIA's defaults."))
    fatalXids: list[XidCode] = Field(default_factory=list, max_length=MAX_XIDS, description=(
        "XIDs that always mark the GPU unhealthy, even one the plugin ignores by default, e.g. 109 "
        "(DP_ENABLE_HEALTHCHECKS=<list>; device plugin v0.18.0 and later; not with checks false). Omitted: none."))


class DevicePluginSettings(OperandSettings):
    """The device plugin's settings: the Operator's pass-through knobs and its XID health policy."""
    health: DevicePluginHealth | None = Field(None, description=(
        "The cluster's device plugin health policy; a pool's devicePluginHealth replaces it on that pool's nodes "
        "(pools with different policies get device plugin DaemonSets of their own). Omitted: NVIDIA's defaults "
        "(no DP_DISABLE_HEALTHCHECKS / DP_ENABLE_HEALTHCHECKS env)."))


class ConfigMapFiles(Model):
    configMapName: Annotated[str, AfterValidator(_dns_subdomain)] = Field(description=(
        "A ConfigMap in the stack's namespace (you create it, e.g. next to the GitOps objects). Required."))
    files: list[Annotated[str, Field(pattern=kv.schema_pattern(kv.CONFIG_MAP_KEY_FMT), max_length=253),
                          AfterValidator(_kube_check(kv.is_config_map_key))]] = Field(
        default_factory=list, max_length=MAX_ENV, description=(
            "The ConfigMap's keys, each mounted as a file of that name (the Operator lists them from the live "
            "ConfigMap; gpuop's stack compiles without a cluster, so the profile names them). Required in stack "
            "mode. Omitted: operator mode only (the operator reads the keys of the live ConfigMap)."))


class Proxy(Model):
    """An HTTP(S) proxy the driver (package downloads) and the toolkit reach the outside through."""
    httpProxy: ProxyUrl | None = Field(None, description=(
        "HTTP_PROXY / http_proxy: http(s)://HOST[:PORT], never with credentials (the profile is committed in plain "
        "text). Omitted: unset."))
    httpsProxy: ProxyUrl | None = Field(None, description=(
        "HTTPS_PROXY / https_proxy: http(s)://HOST[:PORT], never with credentials. Omitted: unset."))
    noProxy: list[NoProxyEntry] = Field(
        default_factory=list, max_length=256, description=(
            "Hosts, domains and CIDRs reached directly: NO_PROXY / no_proxy, joined with commas. Omitted: unset."))


class HostPaths(Model):
    """The Operator's hostPaths: where the host keeps what the operands mount."""
    rootFS: AbsolutePath = Field("/", description=(
        "The host's root filesystem (every `host-root` volume; must be chroot-able). Omitted: /."))
    driverInstallDir: AbsolutePath | None = Field(None, description=(
        "Where the driver's files are on the host (every `driver-install-dir` volume). Omitted: /run/nvidia/driver "
        "(the driver container's), or the managed image's driver root (GKE: /home/kubernetes/bin/nvidia)."))
    kubeletRootDir: AbsolutePath = Field("/var/lib/kubelet", description=(
        "The kubelet's root directory; the device plugin registers its socket in <dir>/device-plugins. Omitted: "
        "/var/lib/kubelet."))


class UpgradePolicy(Model):
    """How a new driver reaches the nodes (k8s-driver-manager settings and the DaemonSet rollout)."""
    autoUpgrade: bool = Field(True, description=(
        "True: the driver DaemonSet rolls a new driver out by itself, maxParallelUpgrades nodes at a time "
        "(RollingUpdate). False: OnDelete, a node gets the new driver only when you delete its driver pod. "
        "Omitted: true."))
    maxParallelUpgrades: int = Field(1, ge=0, le=INT32_MAX, description=(
        "At most this many nodes replace their driver at the same time; 0 means all at once. Omitted: 1 "
        "(the Operator's default)."))
    gpuPodDeletion: bool = Field(True, description=(
        "Before unloading the old driver, cordon the node and delete the pods that use GPUs "
        "(ENABLE_GPU_POD_EVICTION). Omitted: true."))
    drain: bool = Field(False, description=(
        "Drain the whole node when deleting GPU pods is not enough to unload the driver (ENABLE_AUTO_DRAIN). "
        "Omitted: false."))
    timeoutSeconds: int = Field(0, ge=0, le=INT32_MAX, description=(
        "How long GPU pod deletion and drain may take before the driver pod gives up and retries "
        "(DRAIN_TIMEOUT_SECONDS); 0 waits forever. Omitted: 0 (as the Operator's driver asset)."))
    force: bool = Field(False, description=(
        "Also delete pods no controller manages (DRAIN_USE_FORCE). Omitted: false."))
    deleteEmptyDir: bool = Field(False, description=(
        "Also delete pods with emptyDir volumes, losing that data (DRAIN_DELETE_EMPTYDIR_DATA). Omitted: false."))
    podSelector: str = Field("", max_length=1024, description=(
        "Label selector limiting which pods a drain deletes, e.g. \"app!=critical\" (DRAIN_POD_SELECTOR_LABEL). "
        "Omitted: every pod."))


class Rdma(Model):
    enabled: bool = Field(False, description=(
        "GPUDirect RDMA: the nvidia-peermem sidecar in the driver pods loads nvidia_peermem (InfiniBand / RoCE "
        "pools). Omitted: false."))
    useHostMofed: bool = Field(False, description=(
        "MOFED / DOCA-OFED is installed on the host, not by the NVIDIA Network Operator's driver container. "
        "Omitted: false."))


class PoolRdma(Model):
    enabled: bool | None = Field(None, description=(
        "GPUDirect RDMA (nvidia-peermem sidecar) on this pool's nodes. Omitted: spec.driver.rdma.enabled."))
    useHostMofed: bool | None = Field(None, description=(
        "MOFED / DOCA-OFED is installed on this pool's hosts. Omitted: spec.driver.rdma.useHostMofed."))


class LicensingConfig(Model):
    """The NVIDIA License System client configuration of the vGPU guest driver, by reference: a Secret (or the
    deprecated ConfigMap) you create in the stack's namespace holding gridd.conf and client_configuration_token.tok.
    gpuop never reads, writes or prints the token."""
    secretName: Annotated[str, AfterValidator(_dns_subdomain)] | None = Field(None, description=(
        "The Secret holding gridd.conf and client_configuration_token.tok (NVIDIA's chart "
        "driver.licensingConfig.secretName). Omitted: configMapName must be set."))
    configMapName: Annotated[str, AfterValidator(_dns_subdomain)] | None = Field(None, description=(
        "The ConfigMap holding the same files (driver.licensingConfig.configMapName; NVIDIA deprecated it in favour "
        "of secretName: a ConfigMap is readable by anyone who may read the namespace). Omitted: secretName must be set."))
    nlsEnabled: bool = Field(True, description=(
        "The licence is served by the NVIDIA License System (NLS; false: the legacy license server). Omitted: true."))

    @model_validator(mode="after")
    def _one_reference(self):
        if (self.secretName is None) == (self.configMapName is None):
            raise ValueError("set exactly one of secretName, configMapName (the Secret or ConfigMap holding "
                             "gridd.conf and client_configuration_token.tok)")
        return self


class Licensing(Model):
    """The cluster's licence policy: which driver flavours it may run (catalog/data/licences.yaml), checked at
    compile time. A fleet sets it once in a partial every profile extends."""
    allowedDrivers: list[Literal["open", "proprietary", "precompiled", "vgpu-guest"]] | None = Field(
        None, min_length=1, max_length=4, description=(
            "The driver flavours this cluster may run: open (open kernel modules, MIT/GPLv2), proprietary (NVIDIA's "
            "proprietary kernel modules), precompiled (NVIDIA's precompiled driver images), vgpu-guest (the vGPU "
            "guest driver, NVIDIA AI Enterprise). A driver whose flavour is not listed is refused at the field that "
            "chooses it; kernelModuleType auto is refused when open or proprietary is left out (the node decides "
            "auto at run time). Omitted: every flavour."))


class Driver(OperandSettings):
    driverType: Literal["gpu", "vgpu"] = Field("gpu", description=(
        "gpu: NVIDIA's data-center driver. vgpu: the NVIDIA vGPU guest driver (GPU nodes that are virtual machines "
        "with a vGPU), licensed by the NVIDIA License System: needs licensingConfig and a driver image from a "
        "private or entitled registry (it is not published on a public one), operator mode only (NVIDIA's "
        "operator mounts the licensing files). Omitted: gpu."))
    licensingConfig: LicensingConfig | None = Field(None, description=(
        "The vGPU guest driver's licensing client configuration, by reference (NVIDIA's chart driver.licensingConfig). "
        "Required with driverType vgpu; refused otherwise. Omitted: none."))
    rdma: Rdma = Field(default_factory=Rdma, description="GPUDirect RDMA. Omitted: off.")
    gds: bool = Field(False, description=(
        "GPUDirect Storage: the nvidia-fs sidecar (image of the stack release) in the driver pods; needs "
        "kernelModuleType: open; not with precompiled drivers. Omitted: false."))
    gdrcopy: bool = Field(False, description=(
        "GDRCopy: the nvidia-gdrcopy sidecar (gdrdrv module) in the driver pods; not with precompiled drivers. "
        "Omitted: false."))
    repoConfig: ConfigMapFiles | None = Field(None, description=(
        "Package repository files for the driver build (air-gapped sites: a local mirror), mounted where the "
        "driver image's OS reads them: /etc/apt/sources.list.d (Ubuntu, Debian), /etc/yum.repos.d (RHEL, CentOS, "
        "RHCOS). Omitted: the image's own repositories."))
    certConfig: ConfigMapFiles | None = Field(None, description=(
        "CA certificates the driver build trusts (a TLS-intercepting proxy, a private mirror), mounted at "
        "/usr/local/share/ca-certificates (Ubuntu, Debian), /etc/pki/ca-trust/extracted/pem (RHEL, CentOS, RHCOS) "
        "or /etc/pki/trust/anchors (SLES, SL Micro). Omitted: the image's CA bundle."))
    version: str | None = Field(None, pattern=r"^\d{3}(\.\d+){0,2}$", description=(
        "Driver version (\"580.173.02\") or branch (\"580\", resolved to the catalog's newest in that "
        "branch). Omitted: the stack release's default driver."))
    kernelModuleType: Literal["auto", "open", "proprietary"] = Field("auto", description=(
        "Which kernel modules the driver container builds. Omitted: auto (the driver picks by GPU)."))
    upgradePolicy: UpgradePolicy = Field(default_factory=UpgradePolicy, description=(
        "How a driver version change rolls out. Omitted: one node at a time, GPU pods deleted first, no drain."))
    precompiled: bool = Field(False, description=(
        "Use NVIDIA's precompiled driver images (tag <branch>-<kernel>-<os>) instead of building the kernel "
        "modules on the node: one driver DaemonSet per kernel in `kernels`, selected by NFD's "
        "kernel-version.full label; `version` must then be a branch. Only where the stack release publishes "
        "them (Ubuntu). Omitted: false."))
    kernels: list[Annotated[str, Field(pattern=r"^[0-9]+\.[0-9]+\.[0-9]+-[A-Za-z0-9._-]+$", max_length=63)]] = Field(
        default_factory=list, max_length=MAX_KERNELS, description=(
            "Kernel versions of the GPU nodes (`uname -r`, NFD's feature.node.kubernetes.io/kernel-version.full "
            "label) to run precompiled drivers for; required with `precompiled`. Nodes on another kernel get no "
            "driver. Omitted: none."))
    rhcosVersions: list[Annotated[str, Field(pattern=r"^4[0-9]{1,2}\.[0-9]+\.[0-9]{12}-[0-9]+$")]] = Field(
        default_factory=list, max_length=MAX_KERNELS, description=(
            "OpenShift: the RHCOS builds of the GPU nodes (NFD's feature.node.kubernetes.io/system-os_release."
            "OSTREE_VERSION label, e.g. 419.96.202507091512-0). One driver DaemonSet per build, built with the "
            "Driver Toolkit image OpenShift ships for that build. List the old and the new build while an "
            "OpenShift update is rolling. Required on OpenShift with the driver enabled; not allowed elsewhere. "
            "Omitted: none."))


class ValidatorSettings(Model):
    version: str | None = Field(None, pattern=r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$", description=(
        "Image tag of the validator (also used by every validation init container). Omitted: the stack "
        "release's version."))
    resources: Resources | None = Field(None, description="Omitted: no requests or limits (as upstream).")


class ServiceMonitor(Model):
    enabled: bool | None = Field(None, description=(
        "Emit a Prometheus Operator ServiceMonitor (needs its CRD in the cluster). Omitted: true on OpenShift "
        "(the platform's monitoring stack has the CRD and scrapes the namespace), false elsewhere; the "
        "Service carries prometheus.io/scrape=true for annotation-based scraping either way."))
    interval: str = Field("15s", pattern=r"^([0-9]+(ms|s|m|h))+$", description="Scrape interval. Omitted: 15s.")
    honorLabels: bool = Field(False, description="Keep the exporter's labels on conflicts. Omitted: false.")
    additionalLabels: Labels = Field(default_factory=dict, description=(
        "Labels added to the ServiceMonitor, e.g. the one your Prometheus selects on. Omitted: none."))


def _regex(v: str) -> str:
    try:
        re.compile(v)
    except re.error as exc:
        raise ValueError(f"{v!r} is not a valid regular expression ({exc})")
    return v


class DcgmMetric(Model):
    field: str = Field(pattern=r"^DCGM_(FI|EXP)_[A-Z0-9_]+$", description="DCGM field name, e.g. DCGM_FI_DEV_GPU_UTIL. Required.")
    type: Literal["gauge", "counter", "label"] = Field(description="Prometheus metric type. Required.")
    help: str = Field(pattern=r"^[^\n\r]+$", max_length=512, description="Help text (one line). Required.")


class DcgmExporter(ComponentSettings):
    serviceMonitor: ServiceMonitor = Field(default_factory=ServiceMonitor, description="Omitted: no ServiceMonitor.")
    metrics: list[DcgmMetric] = Field(default_factory=list, max_length=MAX_METRICS, description=(
        "The metrics to export, written to a ConfigMap as dcgm-metrics.csv. Omitted: the exporter's built-in "
        "list (/etc/dcgm-exporter/dcp-metrics-included.csv), no ConfigMap."))
    podLabels: bool = Field(False, description=(
        "Add the labels of the pod using a GPU to its metrics (needs read access to pods: a ClusterRole and "
        "a ServiceAccount token). Omitted: false."))
    podUID: bool = Field(False, description="Add the UID of the pod using a GPU to its metrics. Omitted: false.")
    podLabelAllowlist: list[Annotated[str, AfterValidator(_regex)]] = Field(default_factory=list, max_length=MAX_PATTERNS, description=(
        "Regular expressions; only pod labels whose key matches one are exported (bounds the series count). "
        "Omitted: every label (when podLabels is on)."))


class Dcgm(ComponentSettings):
    enabled: bool = Field(False, description=(
        "Run the standalone DCGM host engine; the exporter then connects to it instead of its embedded "
        "engine. Omitted: false (the Operator's Helm default)."))


class MigManager(ComponentSettings):
    disableMigWithoutLayout: bool = Field(True, description=(
        "Apply the mig-parted config `all-disabled` on the nodes of MIG-capable pools without a layout, as "
        "NVIDIA's operator does on MIG-capable nodes without a config: a GPU that arrives with MIG mode on "
        "(a re-pooled node, a previous tenant) is returned to whole GPUs; the MIG manager is deployed for it. "
        "False: such GPUs are left as they are (no MIG manager unless some pool has a layout). Omitted: true."))


class NodeStatusExporter(ComponentSettings):
    enabled: bool = Field(False, description="Omitted: false (the Operator's default).")
    serviceMonitor: ServiceMonitor = Field(default_factory=ServiceMonitor, description="Omitted: no ServiceMonitor.")


class Alerts(Model):
    enabled: bool = Field(True, description=(
        "Write Prometheus alerting rules for the cluster's GPUs: dist/<cluster>/alerts/gpu-alerts.rules.yaml "
        "(a plain rule file for a Prometheus without the Prometheus Operator) and, with prometheusRule, the same "
        "rules as a PrometheusRule in the stack. Per pool: GPUs visible to DCGM and allocatable per node below "
        "the plan's per-node counts (after MIG and sharing), XID, ECC, retired-page and row-remap events, thermal "
        "and power throttling, MIG configuration failures; per component: driver, device plugin, DCGM and "
        "exporter pods not ready. A rule whose DCGM field the exporter does not export is left out (the rule "
        "file says which and why). Omitted: true."))
    prometheusRule: bool | None = Field(None, description=(
        "Emit the rules as a PrometheusRule `gpuop-gpu-alerts` (needs the Prometheus Operator's CRD in the "
        "cluster). Omitted: true on OpenShift and where a ServiceMonitor is on (dcgmExporter or "
        "nodeStatusExporter: the CRDs are there), false elsewhere (the plain rule file only)."))
    additionalLabels: Labels = Field(default_factory=dict, description=(
        "Labels added to the PrometheusRule, e.g. the one your Prometheus's ruleSelector selects on. "
        "Omitted: none."))


class Nfd(Model):
    mode: Literal["deploy", "existing"] | None = Field(None, description=(
        "deploy: gpuop emits an Argo CD Application and Flux HelmRepository/HelmRelease for NFD's own "
        "Helm chart (pinned by the stack release), ordered before the GPU stack. existing: NFD is already "
        "installed (it must allow the nvidia.com label namespace). Omitted: existing on OpenShift (Red Hat's "
        "NFD Operator), deploy elsewhere."))
    rules: bool = Field(True, description=(
        "Emit the NodeFeatureRule that labels GPU nodes (nvidia.com/gpu.present and the deploy labels of the "
        "enabled components). False: you label the nodes yourself, e.g. in the node group template. "
        "Omitted: true."))
    chartRepository: DeliveryChartUrl | None = Field(None, description=(
        "Where NFD's chart is pulled from (deploy mode): an https:// chart repository or an oci:// registry "
        "path holding the chart `node-feature-discovery` (`helm pull` it from NFD's repository, `helm push` "
        "it there). NFD's image comes from spec.images.registry when that is set "
        "(<registry>/nfd/node-feature-discovery). Omitted: oci://<spec.images.registry> when a registry "
        "mirror is set (a mirror-only cluster reaches nothing else), else NFD's own repository "
        "(https://kubernetes-sigs.github.io/node-feature-discovery/charts)."))


class Images(Model):
    registry: ImageRepository | None = Field(None, description=(
        "Registry mirror that replaces the stack release's registry (nvcr.io/nvidia) for every image: the "
        "components', the chart's `helm test` image (<registry>/k8s/cuda-sample) and, in nfd mode deploy, "
        "NFD's image (<registry>/nfd/node-feature-discovery) and chart (spec.nfd.chartRepository). "
        "`gpuop images` lists every one. Omitted: the release's registry."))
    pullSecrets: list[Annotated[str, AfterValidator(_dns_subdomain)]] = Field(
        default_factory=list, max_length=MAX_PULL_SECRETS, description=(
            "Secret names (DNS-1123 subdomains) set as imagePullSecrets on every pod. Omitted: none."))
    pullPolicy: Literal["Always", "IfNotPresent", "Never"] = Field(
        "IfNotPresent", description="Omitted: IfNotPresent (as upstream).")
    digestLock: str | None = Field(None, min_length=1, max_length=4096, description=(
        "Pin every image by digest: a digest lock file (JSON, written by `gpuop images resolve --registry URL`), "
        "relative to the profile file named on the command line; every image the cluster uses must be in it. "
        "Images are then <registry>/<path>:<tag>@sha256:..., the same in any mirror. Omitted: tags only."))


class NodeSelectorRequirement(Model):
    key: Annotated[str, AfterValidator(_label_key)] = Field(description="Node label key. Required.")
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"] = Field(description="Required.")
    values: list[str] = Field(default_factory=list, max_length=2 * MAX_AFFINITY, description=(
        "Label values: one or more for In/NotIn, none for Exists/DoesNotExist, one integer for Gt/Lt. "
        "Omitted: none."))

    @model_validator(mode="after")
    def _values_fit_operator(self):
        n, op = len(self.values), self.operator
        if op in ("In", "NotIn") and n == 0:
            raise ValueError(f"operator {op} needs at least one value")
        if op in ("Exists", "DoesNotExist") and n:
            raise ValueError(f"operator {op} takes no values")
        if op in ("Gt", "Lt") and (n != 1 or not self.values[0].lstrip("-").isdigit()):
            raise ValueError(f"operator {op} takes exactly one integer value")
        return self


class DaemonSets(Model):
    tolerations: list[Toleration] | None = Field(None, max_length=MAX_TOLERATIONS, description=(
        "Tolerations for every GPU DaemonSet; replaces, not merges. Omitted: nvidia.com/gpu Exists "
        "NoSchedule (as upstream)."))
    priorityClassName: Annotated[str, AfterValidator(_dns_subdomain)] = Field("system-node-critical", description=(
        "PriorityClass name (DNS-1123 subdomain) of every GPU DaemonSet: a built-in one, or one the cluster has, "
        "declared in spec.clusterOwned.priorityClasses. Omitted: system-node-critical."))
    nodeSelector: Labels = Field(default_factory=dict, description=(
        "Labels every GPU DaemonSet additionally requires on a node (added to its deploy-label selector). "
        "Omitted: none."))
    nodeAffinity: list[NodeSelectorRequirement] = Field(default_factory=list, max_length=MAX_AFFINITY, description=(
        "Node affinity requirements every GPU DaemonSet additionally has (ANDed with the opt-out rules). "
        "Omitted: none."))
    labels: Labels = Field(default_factory=dict, description=(
        "Labels added to every GPU DaemonSet's pods (the Operator's daemonsets.labels); `app` and "
        "app.kubernetes.io/part-of are refused (the DaemonSets select their pods by them). Omitted: none."))
    annotations: Annotations = Field(default_factory=dict, description=(
        "Annotations added to every GPU DaemonSet's pods (daemonsets.annotations). Omitted: none."))


ConfigName = Annotated[str, Field(min_length=1, max_length=63, pattern=r"^[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?$")]


class Mig(Model):
    strategy: Literal["none", "single", "mixed"] = Field("single", description=(
        "How MIG devices are advertised. Omitted: single (the Operator's Helm default)."))
    layout: dict[str, Annotated[int, Field(ge=1, le=INT32_MAX)]] = Field(default_factory=dict, max_length=MAX_MIG_PROFILES, description=(
        "MIG profile -> instance count per GPU, e.g. {\"3g.40gb\": 1, \"1g.10gb\": 2}. Omitted: MIG off."))
    configName: ConfigName | None = Field(None, description=(
        "The name of this pool's MIG config: its key in the MIG manager's mig-parted config and the value of its "
        "nodes' nvidia.com/mig.config label (`gpuop import` keeps a running cluster's names, so no node changes "
        "config). Pools with the same name must have the same layout and GPU model. Omitted: named after the "
        "layout, e.g. 1x3g.40gb_1x2g.20gb_2x1g.10gb (a layout change then changes the label, which is what "
        "makes the MIG manager act)."))


class SharedResource(Model):
    name: str = Field(description=(
        "A resource this pool's device plugin advertises: nvidia.com/gpu, or nvidia.com/mig-<profile> ('+' "
        "written '.') for each profile of a mixed-strategy MIG layout. Required."))
    replicas: int = Field(ge=2, le=INT32_MAX, description=(
        "How many pods may share one device of this resource (the device plugin refuses fewer than 2). Required."))


class TimeSlicing(Model):
    replicas: int | None = Field(None, ge=2, le=INT32_MAX, description=(
        "How many pods may share each device the pool advertises (a GPU, or a MIG device) by time-slicing. "
        "Omitted: only the resources listed in `resources` are shared (one of the two is required)."))
    renameByDefault: bool = Field(False, description=(
        "Advertise shared devices as <resource>.shared (e.g. nvidia.com/gpu.shared), so pods opt in to sharing. "
        "Omitted: false (shared devices keep the plain resource name)."))
    failRequestsGreaterThanOne: bool = Field(False, description=(
        "Refuse pods that ask for more than one shared device (2 replicas are not 2x a GPU). Omitted: false "
        "(as the device plugin)."))
    resources: list[SharedResource] = Field(default_factory=list, max_length=MAX_PATTERNS, description=(
        "Per-resource replica counts; they override `replicas` for the resources they name. Omitted: every "
        "resource the pool advertises is shared with `replicas`."))


class Mps(Model):
    replicas: int = Field(ge=2, le=INT32_MAX, description=(
        "How many pods may share each full GPU of the pool through CUDA MPS (each gets 1/replicas of its memory "
        "and compute); MPS shares nvidia.com/gpu only, not MIG devices. Required."))
    renameByDefault: bool = Field(False, description=(
        "Advertise the shared GPUs as nvidia.com/gpu.shared. Omitted: false."))


class Sharing(Model):
    timeSlicing: TimeSlicing | None = Field(None, description=(
        "Time-slicing: pods take turns on the same device. Omitted: no time-slicing. Exclusive with mps."))
    mps: Mps | None = Field(None, description=(
        "CUDA Multi-Process Service: pods run on the same GPU at once, each with a fixed share; adds the MPS "
        "control daemon. Omitted: no MPS. Exclusive with timeSlicing."))
    configName: ConfigName | None = Field(None, description=(
        "The name of this pool's device-plugin config: its key in the device plugin's ConfigMap and the value "
        "of its nodes' nvidia.com/device-plugin.config label (`gpuop import` keeps a running cluster's names). "
        "Pools with the same name must have the same config. Omitted: <summary>-<6 hex digits of its content>, "
        "e.g. time-slicing-4-d71ebd (a changed config then changes the label, which is what makes the plugin "
        "reload)."))


class PoolDriver(Model):
    enabled: bool | None = Field(None, description=(
        "False: this pool's nodes have a preinstalled driver and get no driver DaemonSet. Omitted: "
        "spec.driver.enabled."))
    version: str | None = Field(None, pattern=r"^\d{3}(\.\d+){0,2}$", description=(
        "Driver version or branch for this pool's nodes; pools with different drivers get different driver "
        "DaemonSets, so their nodeSelectors must tell them apart. Omitted: spec.driver.version."))
    rdma: PoolRdma | None = Field(None, description=(
        "GPUDirect RDMA for this pool's nodes (e.g. on for an InfiniBand training pool, off for an inference "
        "pool); pools with different sidecar settings get different driver DaemonSets. Omitted: spec.driver.rdma."))
    gds: bool | None = Field(None, description=(
        "GPUDirect Storage (nvidia-fs sidecar) on this pool's nodes. Omitted: spec.driver.gds "
        "(operator mode: spec.delivery.operator.gds)."))
    gdrcopy: bool | None = Field(None, description=(
        "GDRCopy (gdrdrv sidecar) on this pool's nodes. Omitted: spec.driver.gdrcopy (operator mode: "
        "spec.delivery.operator.gdrcopy)."))


class DraComputeDomains(Model):
    enabled: bool = Field(False, description=(
        "ComputeDomains (IMEX channels for multi-node NVLink, GB200/GB300 class): the DRA driver's "
        "resources.computeDomains; needs GPU driver >= 570.158.01. Omitted: false."))


class Dra(Model):
    """NVIDIA's DRA driver for GPUs (docs/dra.md); needed when any pool uses allocation: dra."""
    version: str | None = Field(None, description=(
        "DRA driver version from the DRA catalog (catalog/data/dra.yaml), e.g. \"0.5.0\". Omitted: the newest."))
    featureGates: dict[str, bool] = Field(default_factory=dict, description=(
        "Driver feature gates (FEATURE_GATES), e.g. {DynamicMIG: false, MPSSupport: true}. Omitted gates: "
        "the driver's defaults."))
    computeDomains: DraComputeDomains = Field(default_factory=DraComputeDomains, description="Omitted: off.")
    extendedResources: bool = Field(False, description=(
        "The cluster runs Kubernetes' DRAExtendedResource gate (apiserver, scheduler, controller-manager, "
        "kubelet; KEP 5004, Kubernetes >= 1.35): gpuop's DeviceClasses then carry extendedResourceName, so "
        "unchanged nvidia.com/gpu and nvidia.com/mig-* pod requests are served by DRA. Omitted: false."))


class ClaimDevice(Model):
    profile: str = Field(description=(
        "\"gpu\" (a whole GPU) or a MIG profile of the pool's layout, e.g. \"3g.40gb\". Required."))
    count: int = Field(1, ge=1, description="How many such devices the claim asks for. Omitted: 1.")


class ClaimTemplate(Model):
    name: Annotated[str, AfterValidator(_dns_label(63))] = Field(description=(
        "ResourceClaimTemplate name (DNS-1123 label), unique per namespace. Required."))
    namespace: Annotated[str, AfterValidator(_dns_label(63))] = Field(description=(
        "The tenant namespace the template is created in (it must exist). Required."))
    pool: str = Field(description="A node pool with allocation: dra whose devices the claim takes. Required.")
    devices: list[ClaimDevice] = Field(min_length=1, description="One request per entry. Required.")


class NodeCount(Model):
    min: int = Field(ge=0, description="Fewest nodes (the autoscaler's minimum). Required.")
    max: int = Field(ge=0, description="Most nodes (the autoscaler's maximum). Required.")

    @model_validator(mode="after")
    def _ordered(self) -> "NodeCount":
        if self.max < self.min:
            raise ValueError(f"max ({self.max}) is below min ({self.min})")
        return self


class HealthGate(Model):
    """A GPU health check after the stack rolls (components/health_gate.py): `helm test` / Flux's HelmRelease
    tests and Argo CD's PostSync hooks run it, and a failed check holds the next wave. The same fields on a pool
    (spec.nodePools[].healthGate) override the cluster's (spec.healthGate) for that pool."""
    enabled: bool | None = Field(None, description=(
        "Run the health gate on the pool(s). Omitted: on a pool, the cluster's value; on the cluster, true (a "
        "stack that rolls onto broken GPUs must not let the next wave start)."))
    dcgmDiagLevel: int | None = Field(None, description=(
        "DCGM diagnostics level (`dcgmi diag -r <level>`, 1 quick ~1 min, 2 medium ~2 min, 3 long ~30 min, "
        "4 extended ~2 h per node; catalog health-gate.yaml), run against the node's standalone host engine "
        "(spec.dcgm.enabled). 0: no DCGM diagnostics. Omitted: on a pool, the cluster's value; on the cluster, 1 "
        "when spec.dcgm.enabled, else 0."))
    cudaSample: bool | None = Field(None, description=(
        "Run NVIDIA's CUDA vectorAdd sample once per resource the pool advertises (nvidia.com/gpu, each "
        "nvidia.com/mig-<profile>, shared replicas), requesting one of it. Omitted: on a pool, the cluster's "
        "value; on the cluster, true."))
    nccl: bool | None = Field(None, description=(
        "Run an NCCL all-reduce test (nccl-tests all_reduce_perf) across all GPUs of one node of the pool "
        "(needs gpusPerNode >= 2 and whole GPUs). Omitted: on a pool, the cluster's value; on the cluster, false."))
    ncclImage: Annotated[str, Field(min_length=3, max_length=255,
                                    pattern=r"^[a-z0-9]+([._/-][a-z0-9]+)*:[A-Za-z0-9_][A-Za-z0-9._-]{0,127}$")] | None = Field(
        None, description=(
            "The NCCL test image below spec.images.registry (<path>:<tag>, mirrored and locked like every image): "
            "NVIDIA publishes nccl-tests as source only, so you build it. Omitted: on a pool, the cluster's value; "
            "required where nccl is on."))


class NodePool(Model):
    name: PoolName = Field(description="DNS-1123 label, unique in the profile. Required.")
    allocation: Literal["devicePlugin", "dra"] = Field("devicePlugin", description=(
        "How pods get this pool's GPUs: the device plugin (extended resources nvidia.com/gpu, nvidia.com/mig-*) "
        "or DRA (ResourceClaims on gpuop's DeviceClasses; the DRA kubelet plugin runs on the pool's nodes and "
        "the device plugin does not). Omitted: devicePlugin."))
    nodes: Annotated[int, Field(ge=0)] | NodeCount | None = Field(None, description=(
        "How many nodes the pool has: a number, or {min, max} for an autoscaled pool; for the capacity of "
        "index.json and `gpuop capacity` (totals at both ends). Omitted: unknown (no totals)."))
    gpusPerNode: int | None = Field(None, ge=1, description=(
        "GPUs per node of this pool: what one node offers per DeviceClass (capacity, and the per-claim count "
        "check of DRA pools). Omitted: unknown (capacity is reported per GPU; claim counts are not checked)."))
    gpu: str = Field(description="GPU model, a canonical name of the GPU catalog (`gpuop mig gpus`). Required.")
    nodeSelector: Labels = Field(default_factory=dict, description=(
        "Labels that select this pool's nodes. Omitted: the pool is told apart by its GPU model only."))
    mig: Mig | None = Field(None, description="Omitted: MIG disabled on this pool.")
    os: str | None = Field(None, description=(
        "Node OS of this pool when it differs from spec.os (mixed-OS clusters, Kubernetes only): the pool's "
        "nodes get the driver image for their OS from a driver DaemonSet selected by NFD's OS labels. "
        "Omitted: spec.os."))
    driver: PoolDriver | None = Field(None, description="Omitted: spec.driver.")
    sharing: Sharing | None = Field(None, description=(
        "GPU sharing on this pool's nodes, written into the device plugin's config and selected by the node "
        "label nvidia.com/device-plugin.config. Omitted: no sharing (one pod per GPU or MIG device)."))
    nodeGroup: NodeGroupName | None = Field(None, description=(
        "The node group that carries this pool's nodes (EKS managed node group, Karpenter NodePool, GKE node "
        "pool, OpenShift MachineSet). Needed when the pool shares its GPU model with another pool whose MIG "
        "layout or sharing differs: no NodeFeatureRule can tell their nodes apart, so the pool's "
        "nvidia.com/mig.config and nvidia.com/device-plugin.config labels must come from this node group's "
        "template (dist/<cluster>/node-labels.yaml lists them; `gpuop diff --impact` and the report name the "
        "node group when a change needs it relabelled). Omitted: such a pool is refused unless labelsFrom "
        "is user."))
    labelsFrom: Literal["user"] | None = Field(None, description=(
        "user: you put the labels no NodeFeatureRule can set (node-labels.yaml) on the pool's nodes yourself, "
        "outside any node group gpuop knows of. Omitted: they come from nodeGroup (required then)."))
    taints: list[Taint] = Field(default_factory=list, max_length=MAX_TOLERATIONS, description=(
        "Taints the pool's nodes carry (the node group's). Every GPU DaemonSet must tolerate each of them "
        "(spec.daemonsets.tolerations), or the pool gets no driver, toolkit or device plugin; the pool's Kueue "
        "ResourceFlavor gives admitted workloads the matching tolerations; the rehearsal taints its nodes so. "
        "Omitted: none known."))
    devicePluginHealth: DevicePluginHealth | None = Field(None, description=(
        "This pool's device plugin health policy, replacing spec.devicePlugin.health as a whole on its nodes: pools "
        "whose policy differs from the cluster's get a device plugin DaemonSet of their own (the plugin reads its "
        "policy from its env only), selected by the node label nvidia.com/device-plugin.health. Not on a DRA pool. "
        "Operator mode: the ClusterPolicy has one device plugin env, so every pool must have the same policy. "
        "Omitted: spec.devicePlugin.health."))
    keepMigConfigs: list[Annotated[str, Field(min_length=1, max_length=63, pattern=r"^[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?$")]] = Field(
        default_factory=list, max_length=16, description=(
            "Names of former MIG configs (nvidia.com/mig.config values) of this pool that stay in the MIG "
            "manager's ConfigMap while nodes may still carry them: after a layout change on a pool whose "
            "labels come from its node group, nothing changes on the nodes until the node group's label is "
            "changed, and a node labelled with a config the ConfigMap lacks fails to apply it. Remove a name "
            "once every node of the group carries the new label. Omitted: none kept."))
    healthGate: HealthGate | None = Field(None, description=(
        "This pool's health gate: each field set here overrides spec.healthGate's. Omitted: spec.healthGate."))


class OperatorConfigMap(Model):
    name: Annotated[str, AfterValidator(_dns_subdomain)] | None = Field(None, description=(
        "The ConfigMap's name (NVIDIA's chart `<component>.config.name`): the chart creates it with gpuop's "
        "content, or, where no pool needs a config of gpuop's, the operator reads a ConfigMap of that name you "
        "manage. Omitted: gpuop's name (device-plugin-config, custom-mig-parted-config, dcgm-exporter-metrics)."))


class PluginConfigMap(OperatorConfigMap):
    default: ConfigName | Literal[""] | None = Field(None, description=(
        "The device-plugin config of every GPU node without a nvidia.com/device-plugin.config label "
        "(devicePlugin.config.default): a pool's sharing.configName (that pool's nodes, and those of every pool "
        "without a config of its own, then carry no label), or another name: gpuop's default config (no sharing) "
        "under that name. \"\": no default config (the chart's default). Omitted: gpuop's config `default` (no "
        "sharing), every pool with sharing labelled."))


class OperatorDelivery(Model):
    """How NVIDIA's GPU Operator is installed and what only it can run (spec.delivery.mode: operator)."""
    version: str | None = Field(None, pattern=r"^v\d+\.\d+\.\d+$", description=(
        "NVIDIA GPU Operator version, from the operator catalog (catalog/data/operator.yaml), e.g. v26.7.0. "
        "Omitted: the stack release's operator."))
    install: Literal["helm", "olm"] | None = Field(None, description=(
        "helm: NVIDIA's Helm chart of that version, with gpuop's values, installed by Argo CD / Flux. olm: the "
        "certified operator from OperatorHub (Namespace, OperatorGroup, Subscription, then the ClusterPolicy). "
        "Omitted: olm on OpenShift, helm elsewhere."))
    chartRepository: DeliveryChartUrl | None = Field(None, description=(
        "install helm: where NVIDIA's chart is pulled from, an https:// chart repository or an oci:// registry "
        "path holding the chart `gpu-operator` at the operator's version (`helm pull` it from NVIDIA's "
        "repository, `helm push` it there), for a cluster that reaches only its own mirror. Omitted: NVIDIA's "
        "repository (the operator catalog's, https://helm.ngc.nvidia.com/nvidia)."))
    installPlanApproval: Literal["Automatic", "Manual"] = Field("Manual", description=(
        "OLM only: whether OLM installs new operator versions of the channel by itself. Omitted: Manual (an "
        "operator upgrade is a reviewed change, as NVIDIA's OpenShift docs show)."))
    nvidiaDriverCRD: bool | None = Field(None, description=(
        "Manage drivers with NVIDIADriver CRs (one per distinct pool driver) instead of the ClusterPolicy's "
        "driver section. Omitted: on when pools have different drivers (versions, or their own RDMA / GDS / "
        "GDRCopy settings), off otherwise."))
    driverDigest: str | None = Field(None, pattern=r"^sha256:[a-f0-9]{64}$", description=(
        "Pin the driver image by digest instead of the <version>-<os> tag (the operator then skips a needless "
        "driver reload when only the tag moves). Not with precompiled drivers. Omitted: tag."))
    gds: bool = Field(False, description=(
        "GPUDirect Storage (nvidia-fs sidecar in the driver pods; operator mode only). Omitted: false."))
    gdrcopy: bool = Field(False, description=(
        "GDRCopy (gdrdrv sidecar in the driver pods; operator mode only). Omitted: false."))
    clusterPolicy: bool = Field(True, description=(
        "Deploy the ClusterPolicy CR. Omitted: true."))
    gpuCluster: bool = Field(False, description=(
        "Deploy the GPUCluster CR (DRA through the operator) instead of a ClusterPolicy; never both. Omitted: false."))
    repositories: dict[Literal[components.RELEASE_IMAGES], ImageRepository] = Field(
        default_factory=dict, description=(
            "The image repository of single components (NVIDIA's chart `<component>.repository`, the folder that "
            "holds the image), where a cluster pulls one component from elsewhere than spec.images.registry, e.g. "
            "{validator: registry.example.com/nvidia}. `gpuop import` writes it for a component that differs from "
            "the common mirror. Omitted: every image under spec.images.registry."))
    pullSecrets: dict[Literal[components.KEYS],
                      list[Annotated[str, AfterValidator(_dns_subdomain)]]] = Field(default_factory=dict, description=(
        "The image pull secrets of single components where they are not spec.images.pullSecrets (NVIDIA's chart "
        "`<component>.imagePullSecrets`; [] for none), e.g. {driver: [ngc-secret]}. `gpuop import` writes it for "
        "a component that differs from the rest. Operator mode only (refused in stack mode, whose components all "
        "pull with spec.images.pullSecrets). Omitted: spec.images.pullSecrets for every component."))
    env: dict[Literal[components.ENV_ONLY],
              list[EnvVar]] = Field(default_factory=dict, description=(
        "The environment of components the profile has no env setting for (NVIDIA's chart `<component>.env`, "
        "merged by the operator over its own by name), e.g. {dcgmExporter: [{name: DCGM_EXPORTER_INTERVAL, "
        "value: \"10000\"}]}. Operator mode only (refused in stack mode; the driver, toolkit and device plugin "
        "have spec.<component>.env in both modes). Omitted: the operator's env."))
    devicePluginConfig: PluginConfigMap = Field(default_factory=PluginConfigMap, description=(
        "The device plugin's ConfigMap as NVIDIA's operator reads it: its name and default config. Operator mode "
        "only (gpuop's stack names its ConfigMap and default config itself; refused there). Omitted: "
        "device-plugin-config, default config `default`."))
    migManagerConfig: OperatorConfigMap = Field(default_factory=OperatorConfigMap, description=(
        "The MIG manager's mig-parted ConfigMap as NVIDIA's operator reads it. Operator mode only (refused in "
        "stack mode). Omitted: custom-mig-parted-config."))
    dcgmMetricsConfig: OperatorConfigMap = Field(default_factory=OperatorConfigMap, description=(
        "The DCGM exporter's metrics ConfigMap (dcgmExporter.config.name) as NVIDIA's operator reads it: with "
        "spec.dcgmExporter.metrics the chart creates it; without, the exporter reads a ConfigMap of that name "
        "you manage. Operator mode only (refused in stack mode). Omitted: dcgm-exporter-metrics."))

    # ---- adoption: what a running install of NVIDIA's chart sets that gpuop builds nothing of its own for,
    # kept as it is so `gpuop import` changes nothing (plan/chartmap.py rows; operator mode only)
    gpuPodDeletionTimeoutSeconds: int | None = Field(None, ge=0, le=INT32_MAX, description=(
        "How long the operator's GPU pod deletion may take before a driver upgrade gives up (NVIDIA's chart "
        "driver.upgradePolicy.gpuPodDeletion.timeoutSeconds), where it differs from the drain's "
        "(spec.driver.upgradePolicy.timeoutSeconds). Operator mode only. Omitted: "
        "spec.driver.upgradePolicy.timeoutSeconds."))
    nvidiaNodeFeatureRules: bool = Field(False, description=(
        "Let NVIDIA's chart create its own NodeFeatureRules (nfd.nodefeaturerules: the kernel-module labels of "
        "its driver). Operator mode only. Omitted: false (the chart's default)."))
    nfdValues: dict[str, JsonValue] = Field(default_factory=dict, max_length=64, description=(
        "Values of NVIDIA's NFD subchart (the chart's `node-feature-discovery` key: its image mirror, worker "
        "config, tolerations ...), written as they are over the subchart's defaults. Operator mode only. "
        "Omitted: the subchart's defaults."))
    operatorValues: dict[Literal["imagePullPolicy", "env", "priorityClassName", "nodeSelector", "tolerations",
                                 "annotations", "affinity", "logging", "resources", "cleanupCRD", "upgradeCRD"],
                         JsonValue] = Field(default_factory=dict, description=(
        "Settings of the operator's own Deployment (NVIDIA's chart `operator.<key>`: its env, resources, "
        "scheduling, logging, the CRD jobs), written as they are. Its image follows spec.images.registry and "
        "spec.images.pullSecrets. Operator mode only. Omitted: the chart's defaults."))


# ---- Delivery: where a hub's engines deliver this cluster, and the credentials they use (by reference only) --
# Names, never values: a Secret's content never reaches a profile, dist/ or a log. Each name is checked by the
# Kubernetes rule for the field it lands in (an Argo CD cluster name by the grammar below).

_ARGO_CLUSTER = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:/@-]{0,252}")


def _argo_cluster_name(v: str) -> str:
    # Argo CD cluster names are free text (`argocd cluster add` names an EKS cluster by its ARN); gpuop allows
    # what those names hold and nothing a Go template, YAML or a shell could read as syntax
    if not _ARGO_CLUSTER.fullmatch(v):
        raise ValueError(f"{v[:80]!r} is not an Argo CD cluster name gpuop accepts: 1 to 253 characters of letters, "
                         "digits and . _ : / @ -, starting with a letter or digit")
    return v


_SERVER = re.compile(r"https://([A-Za-z0-9.-]{1,253})(?::([0-9]{1,5}))?(/[A-Za-z0-9._~/-]*)?")


def _https_server(v: str) -> str:
    # an API server URL: https, a host, a port, a path; no credentials, query, fragment or template syntax
    from gpuop.profile.bounded import host_problem

    m = _SERVER.fullmatch(v) if len(v) <= 2048 else None
    problem = ("is not https://HOST[:PORT][/PATH] (no credentials, query or fragment)" if m is None else
               host_problem(m.group(1)) or (None if m.group(2) is None or 1 <= int(m.group(2)) <= 65535
                                            else "has a port outside 1..65535"))
    if problem:
        shown = re.sub(r"(?<=://)[^/]*@", "***@", v)          # never echo a password into a CI log
        shown = shown if len(shown) <= 80 else shown[:80] + "..."
        raise ValueError(f"{shown!r} is not an API server URL gpuop accepts: it {problem}")
    return v


SecretName = Annotated[str, AfterValidator(_dns_subdomain)]


class Destination(Model):
    """Where Argo CD and Flux deliver this cluster's objects (the GPU stack or NVIDIA's operator, NFD, the DRA
    driver): every Application and HelmRelease / Kustomization of the cluster, the fleet ApplicationSets' too."""
    name: Annotated[str, AfterValidator(_argo_cluster_name)] | None = Field(None, description=(
        "Argo CD: the name the cluster is registered under in Argo CD (its cluster Secret's `name`), set as every "
        "Application's destination.name. Omitted: `server` when set; else per-cluster Applications go to "
        "gpuop.yaml's gitops.argocd.server and the fleet ApplicationSets to the Argo CD cluster named like the "
        "profile (metadata.name)."))
    server: Annotated[str, AfterValidator(_https_server)] | None = Field(None, description=(
        "Argo CD: the cluster's API server URL (https://), set as every Application's destination.server; exclusive "
        "with name. Omitted: `name` when set; else as name says."))
    kubeConfigSecret: SecretName | None = Field(None, description=(
        "Flux: a Secret in Flux's namespace holding the cluster's kubeconfig (key `value`), set as "
        "spec.kubeConfig.secretRef of every HelmRelease and Kustomization of the cluster, so a Flux hub delivers "
        "to it. Omitted: Flux applies to the cluster it runs in."))

    @model_validator(mode="after")
    def _name_or_server(self):
        if self.name is not None and self.server is not None:
            raise ValueError("name and server are exclusive (Argo CD refuses a destination with both); keep one")
        return self


class RepositoryCredentials(Model):
    """The Secrets holding a chart repository's credentials, by name; gpuop never reads or writes their content."""
    flux: SecretName | None = Field(None, description=(
        "Flux: a Secret in Flux's namespace (username/password, or .dockerconfigjson for an OCI registry) set as "
        "the HelmRepository's spec.secretRef. Omitted: no secretRef (a public repository)."))
    argocd: SecretName | None = Field(None, description=(
        "Argo CD: the repository Secret or credential template (label argocd.argoproj.io/secret-type: repository "
        "or repo-creds) you keep in Argo CD's namespace for this repository's URL. Argo CD finds it by URL; gpuop "
        "lists the name in index.json and params (so `gpuop report` and a review can see which Secret each "
        "Application needs) and writes no Secret. Omitted: none (a public repository)."))


class Credentials(Model):
    """Credentials of the chart repositories this cluster's delivery pulls from, by reference."""
    nfd: RepositoryCredentials = Field(default_factory=RepositoryCredentials, description=(
        "NFD's chart repository (spec.nfd.chartRepository). Omitted: none."))
    operator: RepositoryCredentials = Field(default_factory=RepositoryCredentials, description=(
        "NVIDIA's operator chart repository (operator mode, install helm). Omitted: none."))
    dra: RepositoryCredentials = Field(default_factory=RepositoryCredentials, description=(
        "The DRA driver's chart repository. Omitted: none."))


class Delivery(Model):
    mode: Literal["stack", "operator"] = Field("stack", description=(
        "stack: gpuop renders every operand itself (no controller in the cluster). operator: gpuop compiles the "
        "inputs of NVIDIA's GPU Operator (chart values or OLM objects, ClusterPolicy, NVIDIADriver CRs, the "
        "ConfigMaps they reference), checked against the operator's run-time rules. Omitted: stack."))
    operator: OperatorDelivery = Field(default_factory=OperatorDelivery, description=(
        "Operator mode settings. Omitted: the stack release's operator, helm (olm on OpenShift)."))
    moveFrom: Literal["stack", "operator"] | None = Field(None, description=(
        "The delivery the cluster runs today, when `mode` moves it to the other one (a planned move): the Argo CD "
        "Application prunes the old delivery's objects last (PruneLast) and orphans what they own "
        "(PrunePropagationPolicy=orphan), Flux uninstalls the old release with deletionPropagation orphan, so "
        "the switch deletes no operand and the new delivery takes the nodes over by its own pace "
        "(docs/operator.md). Remove it once the move is done. Omitted: no move (the old delivery's objects, and "
        "every operand they own, are deleted in the same sync)."))
    destination: Destination = Field(default_factory=Destination, description=(
        "Where Argo CD and Flux deliver this cluster (a hub managing many clusters). Omitted: the engine's own "
        "cluster for per-cluster objects, the Argo CD cluster named like the profile for the fleet ApplicationSets."))
    credentials: Credentials = Field(default_factory=Credentials, description=(
        "The Secrets (by name) holding the credentials of the chart repositories this cluster pulls from. "
        "Omitted: none (public repositories)."))

    @model_validator(mode="after")
    def _a_move(self) -> "Delivery":
        if self.moveFrom is not None and self.moveFrom == self.mode:
            raise ValueError(f"moveFrom: {self.moveFrom} names the mode itself; a move comes from the other mode, "
                             "drop moveFrom once the move is done")
        return self


class ClusterOwned(Model):
    """Objects the cluster already has, which you create and own: gpuop never writes them and takes them as
    present (as the built-in ones), in `gpuop validate`, `gpuop synth` and `gpuop validate DIST` alike."""
    priorityClasses: list[Annotated[str, AfterValidator(_dns_subdomain)]] = Field(
        default_factory=list, max_length=MAX_PULL_SECRETS, description=(
            "PriorityClass names (DNS-1123 subdomains) the cluster has (you create them; gpuop never writes one), which "
            "spec.daemonsets.priorityClassName may "
            "name. Omitted: none (only the built-in system-node-critical and system-cluster-critical)."))


class Queues(Model):
    enabled: bool = Field(False, description=(
        "Write Kueue objects for the GPU pools: a ResourceFlavor per device-plugin pool (its nodeSelector as "
        "nodeLabels, its taints as tolerations), one ClusterQueue whose nominal quotas per flavor are the pool's "
        "capacity (`gpuop capacity`: full GPUs, MIG profiles, shared replicas), and a LocalQueue per namespace "
        "below. Needs Kueue (v1beta2 API, Kueue >= 0.15) installed. Omitted: false (no queue objects)."))
    clusterQueue: Annotated[str, AfterValidator(_dns_subdomain)] = Field("gpus", description=(
        "The ClusterQueue's name. Omitted: gpus."))
    cohort: Annotated[str, AfterValidator(_dns_subdomain)] | None = Field(None, description=(
        "Kueue cohort the ClusterQueue borrows and lends in. Omitted: none."))
    localQueue: Annotated[str, AfterValidator(_dns_subdomain)] = Field("gpus", description=(
        "The name of the LocalQueue written in each namespace (the `kueue.x-k8s.io/queue-name` a workload "
        "names). Omitted: gpus."))
    namespaces: list[Annotated[str, AfterValidator(_dns_label(63))]] = Field(
        default_factory=list, max_length=MAX_POOLS, description=(
            "Namespaces that get a LocalQueue pointing at the ClusterQueue (they must exist: gpuop does not write "
            "them). Omitted: none (only the cluster-scoped objects)."))
    quota: Literal["min", "max"] = Field("max", description=(
        "Which end of an autoscaled pool (`nodes: {min, max}`) sets the nominal quota: max admits what the "
        "autoscaler can add nodes for, min only what is always there. Omitted: max."))


class Dashboards(Model):
    enabled: bool = Field(True, description=(
        "Write Grafana dashboards for the cluster (dist/<cluster>/dashboards/*.json) and, in the stack, a "
        "ConfigMap per dashboard for the Grafana sidecar (label grafana_dashboard: \"1\"): per pool, the GPUs "
        "and MIG devices the plan expects beside those the nodes advertise, utilization, memory, temperature, "
        "power and XID errors. Omitted: true."))
    folder: Annotated[str, Field(min_length=1, max_length=63, pattern=r"^[A-Za-z0-9][A-Za-z0-9 ._-]*$")] = Field(
        "GPU", description="The Grafana folder the sidecar puts the dashboards in (annotation grafana_folder). "
                           "Omitted: GPU.")


class ClusterSpec(Model):
    platform: Platform
    os: str | None = Field(None, description="Node OS with version, e.g. ubuntu24.04, rhel9.6 or rhcos4.19 "
                           "(rhcos<platform version> on OpenShift); must be in the stack release's support matrix. "
                           "Pools may set their own. Required where a driver DaemonSet runs (its image tag names the "
                           "OS). Omitted: allowed only where no pool gets a driver from gpuop (preinstalled drivers, "
                           "managed node images).")
    containerRuntime: Literal["containerd", "crio", "docker"] | None = Field(None, description=(
        "The runtime the container toolkit configures (config files and host paths per runtime). OpenShift "
        "runs CRI-O only. Omitted: crio on OpenShift, containerd elsewhere."))
    namespace: Annotated[str, AfterValidator(_dns_label(63))] | None = Field(None, description=(
        "Where the stack is installed. Omitted: nvidia-gpu-operator on OpenShift, gpu-operator elsewhere."))
    release: str | None = Field(None, description=(
        "Stack release (component versions) from the catalog, e.g. \"26.7\". Omitted: the newest."))
    driver: Driver = Field(default_factory=Driver, description="Omitted: enabled, release default version.")
    cdi: Cdi = Field(default_factory=Cdi, description="Omitted: CDI on, the NRI plugin off.")
    toolkit: OperandSettings = Field(default_factory=OperandSettings, description="Omitted: enabled.")
    devicePlugin: DevicePluginSettings = Field(default_factory=DevicePluginSettings, description="Omitted: enabled.")
    proxy: Proxy | None = Field(None, description=(
        "Proxy env for the driver and the toolkit containers (spec.<component>.env entries of the same name win). "
        "Omitted: no proxy."))
    hostPaths: HostPaths = Field(default_factory=HostPaths, description=(
        "Host paths the operands mount (the Operator's hostPaths). Omitted: /, /run/nvidia/driver, /var/lib/kubelet."))
    validator: ValidatorSettings = Field(default_factory=ValidatorSettings, description=(
        "The operator validator always runs (the other components wait for its checks). Omitted: release "
        "version, no resources."))
    dcgm: Dcgm = Field(default_factory=Dcgm, description="Standalone DCGM host engine. Omitted: disabled.")
    dcgmExporter: DcgmExporter = Field(default_factory=DcgmExporter, description=(
        "Omitted: enabled, built-in metrics, no ServiceMonitor, no pod labels."))
    gfd: ComponentSettings = Field(default_factory=ComponentSettings, description=(
        "GPU feature discovery. Omitted: enabled."))
    nodeStatusExporter: NodeStatusExporter = Field(default_factory=NodeStatusExporter, description=(
        "Omitted: disabled."))
    migManager: MigManager = Field(default_factory=MigManager, description=(
        "MIG manager: applies each pool's MIG layout on its nodes, and `all-disabled` on MIG-capable pools "
        "without a layout; deployed when some pool has a MIG-capable GPU. False: nothing applies the layouts "
        "(partition the GPUs yourself). Omitted: enabled."))
    alerts: Alerts = Field(default_factory=Alerts, description=(
        "Prometheus alerting rules for the GPUs and the stack. Omitted: on (the plain rule file; the "
        "PrometheusRule where the Prometheus Operator's CRD is expected)."))
    nfd: Nfd = Field(default_factory=Nfd, description=(
        "Node Feature Discovery and the GPU node labels. Omitted: deploy NFD, emit the NodeFeatureRule."))
    images: Images = Field(default_factory=Images, description="Omitted: release registry, no pull secrets.")
    daemonsets: DaemonSets = Field(default_factory=DaemonSets, description="Omitted: upstream defaults.")
    clusterOwned: ClusterOwned = Field(default_factory=ClusterOwned, description=(
        "Objects of the cluster's own the stack references (a PriorityClass). Omitted: none."))
    licensing: Licensing = Field(default_factory=Licensing, description=(
        "Licence policy: the driver flavours the cluster may run. Omitted: every flavour."))
    nodePools: list[NodePool] = Field(min_length=1, max_length=MAX_POOLS, description=(
        "At least one GPU node pool. Required."))
    dra: Dra | None = Field(None, description=(
        "The NVIDIA DRA driver, delivered from its upstream chart after the GPU stack. Omitted: no DRA (every "
        "pool must use the device plugin)."))
    claimTemplates: list[ClaimTemplate] = Field(default_factory=list, description=(
        "Tenant-facing ResourceClaimTemplates on DRA pools' DeviceClasses. Omitted: none."))
    delivery: Delivery = Field(default_factory=Delivery, description=(
        "What gpuop compiles the profile into: its own static stack, or NVIDIA's operator's inputs. Omitted: stack."))
    queues: Queues = Field(default_factory=Queues, description=(
        "Kueue queues for the GPU pools. Omitted: none written."))
    dashboards: Dashboards = Field(default_factory=Dashboards, description=(
        "Grafana dashboards of the cluster. Omitted: written."))
    healthGate: HealthGate = Field(default_factory=HealthGate, description=(
        "The GPU health gate after a rollout, for every pool (a pool's healthGate overrides it). Omitted: on, "
        "CUDA samples per advertised resource, DCGM diagnostics level 1 where spec.dcgm.enabled, no NCCL test."))


class ClusterProfile(Model):
    apiVersion: Literal["gpuop/v1alpha1"]
    kind: Literal["ClusterProfile"]
    metadata: Metadata
    spec: ClusterSpec


def profile_json_schema() -> dict:
    """schemas/profile.schema.json: these models' schema, plus `extends` and partials (profile/schema.py)."""
    from gpuop.profile.schema import editor_schema

    schema = ClusterProfile.model_json_schema()
    schema["properties"]["extends"] = {
        "type": "string", "description": "Relative path of a parent profile, deep-merged under this one "
        "(child wins; lists replace). Omitted: none."}
    return editor_schema(schema)
