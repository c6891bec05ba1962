"""Stage 3, plan: a validated profile + the catalogs -> one frozen `StackPlan` per cluster.

Every contextual default is resolved here, once (namespace, runtime, NFD mode and ServiceMonitors from
the platform, driver version from the release or a branch, image tags from the OS, the driver
DaemonSets a cluster needs (platform.py: per RHCOS build, kernel, OS, pool driver), per-component version overrides,
upstream tolerations, the upgrade policy, placement additions, monitoring, the NFD chart and its
values), so components are pure functions of their props and never look at the profile or the catalog
themselves.
The plan also carries the chart's default values (the value slots' defaults).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field

from . import __version__
from . import pools as pool_rules
from .catalog import Catalog, RuntimeFiles
from .platform import DriverVariant, driver_variants, version_resolver
from .profile.models import ClusterProfile, Resources
from .slots import slot
from .validate import ValidProfile

UPSTREAM_TOLERATIONS = ({"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},)
DEFAULT_NAMESPACE = {"kubernetes": "gpu-operator", "openshift": "nvidia-gpu-operator"}
DEFAULT_RUNTIME = {"kubernetes": "containerd", "openshift": "crio"}
DEFAULT_NFD_MODE = {"kubernetes": "deploy", "openshift": "existing"}      # OpenShift: Red Hat's NFD Operator


@dataclass(frozen=True)
class Image:
    """An image below the (overridable) registry: `<registry>/<path>:<tag>`."""
    path: str
    tag: str

    @property
    def ref(self) -> str:
        return f"{slot('imageRegistry')}/{self.path}:{self.tag}"


@dataclass(frozen=True)
class Pool:
    name: str
    gpu: str
    node_selector: tuple[tuple[str, str], ...]
    mig_strategy: str
    mig_layout: tuple[tuple[str, int], ...]


@dataclass(frozen=True)
class Scheduling:
    """Placement every GPU DaemonSet gets on top of its deploy-label selector (spec.daemonsets)."""
    node_selector: tuple[tuple[str, str], ...] = ()
    node_affinity: tuple[tuple[str, str, tuple[str, ...]], ...] = ()   # (key, operator, values)


@dataclass(frozen=True)
class Upgrade:
    """spec.driver.upgradePolicy, resolved."""
    auto: bool = True
    max_parallel: int = 1
    gpu_pod_deletion: bool = True
    drain: bool = False
    timeout_seconds: int = 0
    force: bool = False
    delete_empty_dir: bool = False
    pod_selector: str = ""


@dataclass(frozen=True)
class Monitor:
    """A ServiceMonitor to emit (None where the profile leaves it off)."""
    interval: str = "15s"
    honor_labels: bool = False
    labels: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class DcgmExporterPlan:
    service_monitor: Monitor | None = None
    metrics: tuple[tuple[str, str, str], ...] = ()   # (DCGM field, Prometheus type, help)
    pod_labels: bool = False
    pod_uid: bool = False
    pod_label_allowlist: tuple[str, ...] = ()


@dataclass(frozen=True)
class NodeStatusExporterPlan:
    service_monitor: Monitor | None = None


@dataclass(frozen=True)
class NfdPlan:
    mode: str = "deploy"             # deploy | existing
    rules: bool = True               # emit the NodeFeatureRule
    chart: str = ""
    repository: str = ""
    version: str = ""
    namespace: str = ""
    release_name: str = ""
    values_json: str = "{}"          # the NFD chart's values (deploy mode), canonical JSON

    @property
    def values(self) -> dict:
        return json.loads(self.values_json)


@dataclass(frozen=True)
class OpenShiftPlan:
    """OpenShift facts the components need (catalog releases.yaml `openshift`)."""
    dtk_image_stream: str = "driver-toolkit"     # the Driver Toolkit ImageStream (and tag source) ...
    dtk_namespace: str = "openshift"             # ... in this namespace
    dtk_label: str = "openshift.driver-toolkit"
    dtk_version_label: str = "openshift.driver-toolkit.rhcos"
    monitoring_label: str = "openshift.io/cluster-monitoring"
    prometheus_sa: str = "prometheus-k8s"
    prometheus_namespace: str = "openshift-monitoring"


@dataclass(frozen=True)
class StackPlan:
    name: str
    labels: tuple[tuple[str, str], ...]
    namespace: str
    platform: str
    platform_version: str
    kube_version: str            # Kubernetes minor the objects are validated against ("1.33")
    runtime: str
    runtime_files: RuntimeFiles
    os: str
    os_tag: str
    release: str
    operator_version: str
    images: tuple[tuple[str, Image], ...]
    driver_version: str | None   # None: driver component off (preinstalled drivers)
    kernel_module_type: str
    toolkit: bool
    device_plugin: bool
    mig_strategy: str
    pools: tuple[Pool, ...]
    values_json: str             # the chart's default values, canonical JSON
    inputs_digest: str           # profile files + catalogs + gpuop version
    sources: tuple[str, ...] = field(default=())
    scheduling: Scheduling = field(default_factory=Scheduling)
    upgrade: Upgrade = field(default_factory=Upgrade)
    pull_secrets: tuple[str, ...] = ()
    gfd: bool = True
    dcgm: bool = False
    dcgm_exporter: DcgmExporterPlan | None = None    # None: exporter off
    node_status_exporter: NodeStatusExporterPlan | None = None
    nfd: NfdPlan = field(default_factory=NfdPlan)
    driver_variants: tuple[DriverVariant, ...] = ()   # the driver DaemonSets (platform.py); () = none
    pci_vendor: str = ""                                # how NFD recognises NVIDIA GPUs (GPU catalog)
    pci_classes: tuple[str, ...] = ()
    openshift: OpenShiftPlan | None = None            # None: not OpenShift
    pool_configs: pool_rules.PoolConfigs = field(default_factory=pool_rules.PoolConfigs)  # MIG / plugin configs, labels

    @property
    def uses_crd_kinds(self) -> bool:
        """Whether the stack holds custom resources (NodeFeatureRule, ServiceMonitor) whose CRDs come
        from elsewhere (NFD, the Prometheus Operator)."""
        monitors = (self.dcgm_exporter and self.dcgm_exporter.service_monitor) or (
            self.node_status_exporter and self.node_status_exporter.service_monitor)
        return bool(self.nfd.rules or monitors)

    def image(self, component: str) -> Image:
        return dict(self.images)[component]

    @property
    def values(self) -> dict:
        return json.loads(self.values_json)


def _resolve_driver(version: str | None, default: str, cat: Catalog) -> str:
    if version is None:
        return default
    if "." not in version:
        branch = cat.branch(version)
        return branch.latest if branch else version
    return version


def _component_values(enabled: bool, resources: Resources | None) -> dict | None:
    if not enabled:
        return None
    return {"enabled": True, "resources": resources.model_dump(exclude_none=True) if resources else {}}


# Profile sections with a per-component version override (each also names its image in the catalog).
VERSIONED = ("toolkit", "devicePlugin", "gfd", "dcgm", "dcgmExporter", "validator", "nodeStatusExporter", "migManager")
# Profile section -> Helm values key, for components a user can switch off at deploy time.
SWITCHABLE = ("driver", "toolkit", "devicePlugin", "dcgm", "dcgmExporter", "gfd", "nodeStatusExporter")
CONTROL_PLANE_TOLERATION = {"key": "node-role.kubernetes.io/control-plane", "operator": "Equal", "value": "",
                            "effect": "NoSchedule"}


def _monitor(sm, platform: str) -> Monitor | None:
    if not (sm.enabled if sm.enabled is not None else platform == "openshift"):
        return None
    return Monitor(sm.interval, sm.honorLabels, tuple(sorted(sm.additionalLabels.items())))


def _nfd(spec, release, values: dict) -> NfdPlan:
    chart = release.nfd
    mode = spec.nfd.mode or DEFAULT_NFD_MODE[spec.platform.type]
    if chart is None or mode == "existing":
        return NfdPlan(mode=mode, rules=spec.nfd.rules)
    nfd_values = json.loads(json.dumps(chart.values))
    nfd_values["priorityClassName"] = values["priorityClassName"]
    nfd_values.setdefault("worker", {})["tolerations"] = [CONTROL_PLANE_TOLERATION] + values["tolerations"]
    return NfdPlan(mode="deploy", rules=spec.nfd.rules, chart=chart.chart, repository=chart.repository,
                   version=chart.version, namespace=chart.namespace, release_name=chart.releaseName,
                   values_json=json.dumps(nfd_values, sort_keys=True, separators=(",", ":")))


def build_plan(valid: ValidProfile, cat: Catalog) -> StackPlan:
    p: ClusterProfile = valid.profile
    spec = p.spec
    release = cat.release(spec.release)
    m = release.matrix
    platform = spec.platform.type
    kube_version = m.openshiftKubernetes[spec.platform.version] if platform == "openshift" else spec.platform.version
    runtime = spec.containerRuntime or DEFAULT_RUNTIME[platform]
    comps = release.components
    images = {name: Image(ref.image, ref.version) for name, ref in comps.items()}
    driver_version = _resolve_driver(spec.driver.version, comps["driver"].version, cat)
    os_tag = m.os[spec.os].tag
    images["driver"] = Image(comps["driver"].image, f"{driver_version}-{os_tag}")
    for key in VERSIONED:
        version = getattr(spec, key).version
        if version:
            images[key] = Image(comps[key].image, version)
    strategies = {pool.mig.strategy for pool in spec.nodePools if pool.mig and pool.mig.layout}
    values = {
        "imageRegistry": spec.images.registry or release.registry,
        "imagePullPolicy": spec.images.pullPolicy,
        "imagePullSecrets": [{"name": s} for s in spec.images.pullSecrets],
        "priorityClassName": spec.daemonsets.priorityClassName,
        "tolerations": ([t.model_dump(exclude_none=True) for t in spec.daemonsets.tolerations]
                        if spec.daemonsets.tolerations is not None else list(UPSTREAM_TOLERATIONS)),
    }
    for key in SWITCHABLE:
        settings = getattr(spec, key)
        v = _component_values(settings.enabled, settings.resources)
        if v is not None:
            values[key] = v
    pool_configs = pool_rules.build(spec, cat)
    if pool_configs.mig_manager:                 # a key only where the component exists
        values["migManager"] = _component_values(True, spec.migManager.resources)
    values["validator"] = {"resources": spec.validator.resources.model_dump(exclude_none=True)
                           if spec.validator.resources else {}}
    ds, up, dx, nse = spec.daemonsets, spec.driver.upgradePolicy, spec.dcgmExporter, spec.nodeStatusExporter
    variants = driver_variants(spec, release, version_resolver(spec, comps["driver"].version, cat))
    if variants and "driver" not in values:      # the driver is off cluster-wide but on for some pools
        values["driver"] = _component_values(True, spec.driver.resources)
    h = hashlib.sha256()
    for src in valid.loaded.sources:
        h.update(src.read_bytes())
    h.update(cat.digest.encode())
    h.update(__version__.encode())
    return StackPlan(
        pci_vendor=cat.pci.vendor,
        pci_classes=tuple(cat.pci.displayClasses),
        name=p.metadata.name,
        labels=tuple(sorted(p.metadata.labels.items())),
        namespace=spec.namespace or DEFAULT_NAMESPACE[platform],
        platform=platform,
        platform_version=spec.platform.version,
        kube_version=kube_version,
        runtime=runtime,
        runtime_files=release.runtimes[runtime],
        os=spec.os,
        os_tag=os_tag,
        release=release.name,
        operator_version=release.operatorVersion,
        images=tuple(sorted(images.items())),
        driver_version=driver_version if variants else None,
        kernel_module_type=spec.driver.kernelModuleType,
        toolkit=spec.toolkit.enabled,
        device_plugin=spec.devicePlugin.enabled,
        mig_strategy=(strategies.pop() if len(strategies) == 1 else ("mixed" if strategies else "single")),
        pools=tuple(Pool(pl.name, pl.gpu, tuple(sorted(pl.nodeSelector.items())),
                         pl.mig.strategy if pl.mig else "none",
                         tuple(sorted(pl.mig.layout.items())) if pl.mig else ()) for pl in spec.nodePools),
        values_json=json.dumps(values, sort_keys=True, separators=(",", ":")),
        inputs_digest=h.hexdigest(),
        sources=tuple(str(s) for s in valid.loaded.sources),
        scheduling=Scheduling(tuple(sorted(ds.nodeSelector.items())),
                              tuple((r.key, r.operator, tuple(r.values)) for r in ds.nodeAffinity)),
        upgrade=Upgrade(up.autoUpgrade, up.maxParallelUpgrades, up.gpuPodDeletion, up.drain, up.timeoutSeconds,
                        up.force, up.deleteEmptyDir, up.podSelector),
        pull_secrets=tuple(spec.images.pullSecrets),
        gfd=spec.gfd.enabled,
        dcgm=spec.dcgm.enabled,
        dcgm_exporter=DcgmExporterPlan(_monitor(dx.serviceMonitor, platform), tuple((m.field, m.type, m.help) for m in dx.metrics),
                                       dx.podLabels, dx.podUID, tuple(dx.podLabelAllowlist)) if dx.enabled else None,
        node_status_exporter=NodeStatusExporterPlan(_monitor(nse.serviceMonitor, platform)) if nse.enabled else None,
        nfd=_nfd(spec, release, values),
        driver_variants=variants,
        openshift=_openshift(release) if platform == "openshift" else None,
        pool_configs=pool_configs,
    )


def _openshift(release) -> OpenShiftPlan:
    o = release.openshift
    return OpenShiftPlan(o.driverToolkit.imageStream, o.driverToolkit.namespace, o.dtkLabel, o.dtkVersionLabel,
                         o.monitoringLabel, o.prometheus.serviceAccount, o.prometheus.namespace)
