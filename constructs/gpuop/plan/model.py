"""The plan model: one frozen `StackPlan` per cluster, every contextual default already resolved.

Built by build.py from a validated profile and the catalogs; read by stack/derive.py (component props)
and by the outputs (chart values, GitOps objects). It imports no profile or validate code, so the stages
after planning never reach back to the input.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from gpuop.catalog import RuntimeFiles
from gpuop.kube.slots import slot
from gpuop.plan.drivers import DriverVariant
from gpuop.plan.pools import PoolConfigs


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
    pool_configs: PoolConfigs = field(default_factory=PoolConfigs)  # MIG / plugin configs, labels

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
