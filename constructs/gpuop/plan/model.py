"""The plan model: one frozen `StackPlan` per cluster, every contextual default already resolved.

Built by build.py from a validated profile and the catalogs; read by stack/derive.py (component props)
and by the outputs (chart values, GitOps objects). Every data type the plan holds is defined here; the
builders (build.py, drivers.py, operator.py, pools.py, dra.py, capacity.py) import them, never the
reverse, and this module imports no other part of the plan, no profile and no validate code, so the
stages after planning never reach back to the input.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from gpuop.catalog import RuntimeFiles
from gpuop.kube.slots import slot


@dataclass(frozen=True)
class Image:
    """An image below the (overridable) registry: `<registry>/<path>:<tag>`."""
    path: str
    tag: str
    digest: str | None = None      # sha256:... from the digest lock (spec.images.digestLock)

    @property
    def key(self) -> str:
        """The lock file's key: the image below the registry, so one lock serves every mirror."""
        return f"{self.path}:{self.tag}"

    @property
    def ref(self) -> str:
        return f"{slot('imageRegistry')}/{self.key}" + (f"@{self.digest}" if self.digest else "")


@dataclass(frozen=True)
class Operand:
    """A component's pass-through knobs (spec.<component>.env / args)."""
    env: tuple[tuple[str, str], ...] = ()
    args: tuple[str, ...] | None = None          # None: gpuop's args


@dataclass(frozen=True)
class Pool:
    name: str
    gpu: str
    node_selector: tuple[tuple[str, str], ...]
    mig_strategy: str
    mig_layout: tuple[tuple[str, int], ...]
    sharing: str = ""            # "time-slicing 4", "MPS 2", "time-slicing nvidia.com/gpu x4"; "": none


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
class DeliveryPlan:
    """Where the engines deliver the cluster (spec.delivery.destination) and the Secrets, by name, holding the
    credentials of the chart repositories it pulls from (spec.delivery.credentials); None/"" where omitted."""
    argocd_name: str | None = None           # Argo CD destination.name
    argocd_server: str | None = None         # Argo CD destination.server
    flux_kubeconfig: str | None = None       # Flux spec.kubeConfig.secretRef.name
    credentials: tuple[tuple[str, str, str], ...] = ()   # (repository: nfd|operator|dra, engine: flux|argocd, Secret)

    def secret(self, repository: str, engine: str) -> str | None:
        return next((s for r, e, s in self.credentials if r == repository and e == engine), None)


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
    image: Image | None = None       # NFD's image below `image_registry` (deploy mode): the values' image
    image_registry: str = ""         # the profile's registry mirror, or NFD's own registry (registry.k8s.io)

    @property
    def values(self) -> dict:
        """The NFD chart's values, with its image set explicitly: through the registry mirror and pinned
        by the digest lock when the profile says so."""
        v = json.loads(self.values_json)
        if self.image is not None:
            v["image"] = {"repository": f"{self.image_registry}/{self.image.path}",
                          "tag": self.image.tag + (f"@{self.image.digest}" if self.image.digest else "")}
        return v

    @property
    def image_ref(self) -> str | None:
        """The image NFD's pods run (what images.txt lists), None when gpuop does not deploy NFD."""
        if self.image is None:
            return None
        v = self.values["image"]
        return f"{v['repository']}:{v['tag']}"


@dataclass(frozen=True)
class OperandAssets:
    """How the release's operator renders its operands where that differs from v26.7 (catalog/data/releases.yaml
    `assets`, each fact with its source); the defaults are v26.7's."""
    config_digest: bool = True                   # DRIVER_CONFIG_DIGEST on the driver pod's containers
    inline_startup_probe: bool = False           # the driver's startup probe inline, no startup-probe ConfigMap
    driver_sidecar_env: bool = True              # GDS_ENABLED / GDRCOPY_ENABLED on the driver container
    host_engine_probes: bool = True              # DCGM's and the DCGM exporter's liveness / readiness probes
    validator_sidecar_checks: bool = False       # the validator's nvidia-fs / gdrcopy validations
    pod_resources_init: Image | None = None      # OpenShift: the DCGM exporter's SELinux relabel init container
    absent_env: tuple[tuple[str, tuple[str, ...]], ...] = ()   # container -> env names the release does not set


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
class OperatorPlan:
    """NVIDIA's GPU Operator inputs for `spec.delivery.mode: operator`, built by plan/operator.py."""
    version: str
    install: str                        # helm | olm
    namespace: str
    chart_repository: str
    chart: str
    olm_package: str
    olm_channel: str
    olm_csv: str
    olm_source: str
    olm_source_namespace: str
    install_plan_approval: str
    values_json: str
    drivers_json: str = "[]"            # NVIDIADriver specs: [{"name": ..., "spec": {...}}]
    node_rule_json: str = "null"        # gpuop's per-pool label NodeFeatureRule spec, or null

    @property
    def values(self) -> dict:
        return json.loads(self.values_json)

    @property
    def drivers(self) -> list[dict]:
        return json.loads(self.drivers_json)

    @property
    def node_rule(self) -> dict | None:
        return json.loads(self.node_rule_json)


# ---- the driver DaemonSets and NVIDIADriver CRs (built by drivers.py, operator.py) -----------------

@dataclass(frozen=True, order=True)
class Sidecars:
    """What runs beside the driver of a pool's nodes (spec.driver, or the pool's own driver settings)."""
    rdma: bool = False                                  # nvidia-peermem
    host_mofed: bool = False                            # USE_HOST_MOFED (only with rdma)
    gds: bool = False                                   # nvidia-fs
    gdrcopy: bool = False                               # gdrdrv

    @property
    def tokens(self) -> tuple[str, ...]:
        """Name parts of a DaemonSet / NVIDIADriver with these sidecars (none: ())."""
        return tuple(t for t, on in (("rdma", self.rdma), ("hostmofed", self.host_mofed), ("gds", self.gds),
                                     ("gdrcopy", self.gdrcopy)) if on)


@dataclass(frozen=True)
class DriverVariant:
    """One driver DaemonSet: its name, image tag and the node labels it requires beyond the deploy label."""
    name: str
    version: str                                        # driver version, or the branch (precompiled)
    tag: str                                            # image tag
    node_selector: tuple[tuple[str, str], ...] = ()     # added to nvidia.com/gpu.deploy.driver=true
    pool_terms: tuple[tuple[tuple[str, str], ...], ...] = ()   # ORed; () = no pool restriction
    labels: tuple[tuple[str, str], ...] = ()            # DaemonSet labels (upstream's identification labels)
    pod_labels: tuple[tuple[str, str], ...] = ()        # pod template labels
    rhcos: str | None = None                            # RHCOS build (Driver Toolkit)
    kernel: str | None = None                           # kernel (precompiled)
    split: bool = False                                 # one of several: `app` label is the name
    os_id: str = ""                                     # nodes' os-release ID (catalog select.osId): rhel, sles...
    sidecars: Sidecars = field(default_factory=Sidecars)   # RDMA / GDS / GDRCopy of its pools


@dataclass(frozen=True)
class DriverGroup:
    """One NVIDIADriver CR: a driver version with its sidecars, and the pools that run it."""
    name: str
    version: str
    default: bool
    pools: tuple[str, ...]
    pool_indexes: tuple[int, ...]
    node_selector: tuple[tuple[str, str], ...]
    sidecars: Sidecars = Sidecars()

    def describe(self) -> str:
        return f"{self.name}: {'+'.join(self.sidecars.tokens) or 'none'}"


# ---- per-pool configs and labels (built by pools.py) -----------------------------------------------

@dataclass(frozen=True)
class PoolLabels:
    index: int
    name: str
    gpu: str
    node_selector: tuple[tuple[str, str], ...]
    nfd: tuple[tuple[str, str], ...] = ()        # set by a NodeFeatureRule on the GPU's PCI device ids
    manual: tuple[tuple[str, str], ...] = ()     # must come from the node group template
    why: str = ""                                # why `manual` is not NFD's
    node_group: str = ""                         # the profile's nodeGroup: where `manual` comes from
    user: bool = False                           # labelsFrom user (or spec.nfd.rules false): the user labels

    def sources(self) -> dict[str, str]:
        """Where each label the pool's nodes need comes from: its selection labels (nodeSelector) from
        the node group or the user, the config and deploy labels from gpuop's NodeFeatureRule or, where
        no rule can set them, the node group / the user."""
        elsewhere = f"node group {self.node_group}" if self.node_group else "user" if self.user else "unknown"
        out = {k: (f"node group {self.node_group}" if self.node_group else "user") for k, _ in self.node_selector}
        out.update({k: "nfd rule" for k, _ in self.nfd})
        out.update({k: elsewhere for k, _ in self.manual})
        return dict(sorted(out.items()))


@dataclass(frozen=True)
class NfdPoolRule:
    gpu: str
    device_ids: tuple[str, ...]                  # NFD's pci.device `device` values: 4 lowercase hex digits
    labels: tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class PoolConfigs:
    mig_manager: bool = False
    mig_parted: str = ""                                  # config.yaml of the MIG manager's ConfigMap
    mig_capable_ids: tuple[str, ...] = ()                 # NFD device ids of every MIG-capable GPU
    per_pool_strategy: bool = False                       # no MIG_STRATEGY env; flags.migStrategy per config
    plugin_configs: tuple[tuple[str, str], ...] = ()      # (key, config.yaml); empty: no plugin config
    mps: bool = False
    pools: tuple[PoolLabels, ...] = ()
    nfd_rules: tuple[NfdPoolRule, ...] = ()
    # the device plugin's health env (DP_DISABLE_HEALTHCHECKS / DP_ENABLE_HEALTHCHECKS): the cluster's, on the
    # main DaemonSet, and one (label value, env) per other policy a pool has, each a DaemonSet of its own
    health_env: tuple[tuple[str, str], ...] = ()
    health_policies: tuple[tuple[str, tuple[tuple[str, str], ...]], ...] = ()

    @property
    def manual(self) -> tuple[PoolLabels, ...]:
        return tuple(p for p in self.pools if p.manual)


# ---- Dynamic Resource Allocation (built by dra.py) -------------------------------------------------

@dataclass(frozen=True)
class DeviceClassPlan:
    name: str
    pool: str
    device: str                  # "gpu" or a MIG profile
    expression: str              # the CEL selector
    config_json: str = ""        # opaque parameters (canonical JSON); "": none
    extended_resource: str = ""  # "": none
    per_gpu: int = 1             # devices of this class one GPU offers
    per_node: int | None = None  # ... one node (None: GPUs per node unknown)
    total: tuple[int, int] | None = None   # ... the pool at (min, max) nodes (None: nodes unknown)

    @property
    def config(self) -> dict | None:
        return json.loads(self.config_json) if self.config_json else None


@dataclass(frozen=True)
class ClaimRequest:
    name: str
    device_class: str
    count: int
    mig: bool


@dataclass(frozen=True)
class ClaimTemplatePlan:
    name: str
    namespace: str
    pool: str
    requests: tuple[ClaimRequest, ...]
    same_gpu: bool = False       # MIG requests constrained to one parent GPU (DynamicMIG)


@dataclass(frozen=True)
class DraPlan:
    version: str
    chart: str
    repository: str
    chart_version: str
    namespace: str
    release_name: str
    api_version: str
    driver: str
    pools: tuple[str, ...]
    dynamic_mig: bool
    device_classes: tuple[DeviceClassPlan, ...]
    claim_templates: tuple[ClaimTemplatePlan, ...]
    values_json: str
    image_ref: str = ""          # what the kubelet plugin and controller pods pull (images.txt)

    @property
    def values(self) -> dict:
        return json.loads(self.values_json)

    def capacity(self) -> list[dict]:
        """index.json / docs: per DeviceClass, what one GPU, one node and the pool offer."""
        return [{"deviceClass": c.name, "pool": c.pool, "device": c.device, "perGpu": c.per_gpu,
                 "perNode": c.per_node,
                 "total": None if c.total is None else {"min": c.total[0], "max": c.total[1]}}
                for c in self.device_classes]


# ---- capacity per pool (built by capacity.py) ------------------------------------------------------

Counts = tuple[tuple[str, int], ...]


@dataclass(frozen=True)
class PoolCapacity:
    pool: str
    gpu: str
    allocation: str                          # devicePlugin | dra
    per_gpu: Counts                          # extended resources one GPU advertises (device plugin)
    devices_per_gpu: Counts = ()             # DRA pools: devices one GPU offers (gpu, or MIG profiles)
    gpus_per_node: int | None = None
    gpus_source: str = ""                    # "profile", "instance type p5.48xlarge", or "" (unknown)
    nodes: tuple[int, int] | None = None     # (min, max); None: unknown
    note: str = ""
    node_selector: tuple[tuple[str, str], ...] = ()   # the pool's nodeSelector (impact previews match on it)

    @property
    def per_node(self) -> Counts | None:
        return None if self.gpus_per_node is None else _scale(self.per_gpu, self.gpus_per_node)

    @property
    def total(self) -> tuple[Counts, Counts] | None:
        """(at min nodes, at max nodes)."""
        per_node = self.per_node
        if per_node is None or self.nodes is None:
            return None
        return _scale(per_node, self.nodes[0]), _scale(per_node, self.nodes[1])

    def as_dict(self) -> dict:
        total = self.total
        out = {"pool": self.pool, "gpu": self.gpu, "allocation": self.allocation,
               "nodeSelector": dict(self.node_selector),
               "gpusPerNode": self.gpus_per_node, "gpusPerNodeFrom": self.gpus_source or None,
               "nodes": None if self.nodes is None else {"min": self.nodes[0], "max": self.nodes[1]},
               "perGpu": dict(self.per_gpu),
               "perNode": None if self.per_node is None else dict(self.per_node),
               "total": None if total is None else {"min": dict(total[0]), "max": dict(total[1])}}
        if self.devices_per_gpu:
            out["draDevicesPerGpu"] = dict(self.devices_per_gpu)
        if self.note:
            out["note"] = self.note
        return out


@dataclass(frozen=True)
class ClusterCapacity:
    pools: tuple[PoolCapacity, ...] = ()

    def total(self) -> tuple[Counts, Counts] | None:
        """The cluster's (min, max) totals; None when any pool's total is unknown."""
        totals = [p.total for p in self.pools if p.allocation == "devicePlugin" and p.per_gpu]
        if any(t is None for t in totals):
            return None
        return add([t[0] for t in totals]), add([t[1] for t in totals])

    def as_dict(self) -> dict:
        total = self.total()
        return {"pools": [p.as_dict() for p in self.pools],
                "total": None if total is None else {"min": dict(total[0]), "max": dict(total[1])}}


def _scale(counts: Counts, factor: int) -> Counts:
    return tuple((name, n * factor) for name, n in counts)


def add(many: list[Counts]) -> Counts:
    out: dict[str, int] = {}
    for counts in many:
        for name, n in counts:
            out[name] = out.get(name, 0) + n
    return tuple(sorted(out.items()))


# ---- Kueue queues and Grafana dashboards (built by queues.py) ---------------------------------------

@dataclass(frozen=True)
class Flavor:
    """One pool's Kueue ResourceFlavor and its nominal quota in the ClusterQueue."""
    name: str                                        # the ResourceFlavor's name: the pool's
    node_labels: tuple[tuple[str, str], ...]         # the pool's nodeSelector
    tolerations: tuple[tuple[str, str, str], ...]    # (key, value, effect) of each taint of the pool's nodes
    quota: Counts                                    # resource -> nominal quota (the pool's capacity)


@dataclass(frozen=True)
class QueuesPlan:
    cluster_queue: str
    local_queue: str
    namespaces: tuple[str, ...]
    flavors: tuple[Flavor, ...]
    cohort: str | None = None

    def resource_groups(self) -> tuple[tuple[tuple[str, ...], tuple[Flavor, ...]], ...]:
        """Kueue's resource groups: a resource belongs to one group, and every flavor of a group lists every
        resource the group covers. Flavors sharing a resource are grouped (transitively); each group covers
        the union of its flavors' resources (a flavor's missing ones at quota 0)."""
        groups: list[tuple[set[str], list[Flavor]]] = []
        for f in self.flavors:
            names = {r for r, _ in f.quota}
            touching = [g for g in groups if g[0] & names]
            merged = (set(names), [])
            for g in touching:
                merged[0].update(g[0])
                merged[1].extend(g[1])
                groups.remove(g)
            merged[1].append(f)
            groups.append(merged)
        ordered = sorted(groups, key=lambda g: sorted(g[0]))
        return tuple((tuple(sorted(res)), tuple(sorted(fl, key=lambda f: f.name))) for res, fl in ordered)


@dataclass(frozen=True)
class GateCheck:
    """One check of a pool's health gate: a Job on each node of the pool (components/health_gate.py)."""
    kind: str                                        # dcgm | cuda | nccl
    slug: str                                        # its part of the Job's name: dcgm, cuda-mig-1g-10gb, nccl
    image: Image
    command: tuple[str, ...]                         # (): the image's entrypoint
    resources: tuple[tuple[str, int], ...]           # extended resources requested (and limited)
    deadline: int                                    # seconds: twice the catalog's duration (a pull and a start)


@dataclass(frozen=True)
class PoolGate:
    """One pool's health checks (plan/health_gate.py): what runs on its nodes after the stack rolls."""
    pool: str
    node_selector: tuple[tuple[str, str], ...]       # the pool's nodeSelector
    tolerations: tuple[tuple[str, str, str], ...]    # (key, value, effect) of each taint of the pool's nodes
    nodes: int                                       # nodes each check covers (one pod per node): min nodes, >= 1
    checks: tuple[GateCheck, ...]


@dataclass(frozen=True)
class HealthGatePlan:
    pools: tuple[PoolGate, ...]

    def images(self) -> list[Image]:
        return [c.image for p in self.pools for c in p.checks]

    def longest(self) -> int:
        """The longest check's deadline, in seconds."""
        return max(c.deadline for p in self.pools for c in p.checks)


@dataclass(frozen=True)
class DashboardsPlan:
    folder: str


# ---- alert rules (built by alerts.py) ---------------------------------------------------------------


@dataclass(frozen=True)
class AlertRule:
    """One Prometheus alerting rule; `labels` carry the pool (and resource) it watches."""
    alert: str
    expr: str
    duration: str                            # `for`
    severity: str                            # critical | warning
    summary: str
    description: str
    runbook: str
    labels: tuple[tuple[str, str], ...] = ()

    def as_dict(self, cluster: str) -> dict:
        return {"alert": self.alert, "expr": self.expr, "for": self.duration,
                "labels": {"severity": self.severity, "gpuop_cluster": cluster, **dict(self.labels)},
                "annotations": {"summary": self.summary, "description": self.description, "runbook": self.runbook}}


@dataclass(frozen=True)
class AlertsPlan:
    """spec.alerts, resolved: the rules, whether a PrometheusRule carries them, and the rules left out (why)."""
    rules: tuple[AlertRule, ...]
    prometheus_rule: bool
    rule_labels: tuple[tuple[str, str], ...] = ()   # the PrometheusRule's labels (spec.alerts.additionalLabels)
    skipped: tuple[tuple[str, str], ...] = ()       # (alert, why it is not emitted)
    node_label_keys: tuple[str, ...] = ()           # node labels kube-state-metrics must export (allowlist)

    GROUP = "gpuop.gpu"

    def groups(self, cluster: str) -> list[dict]:
        """The rule file's groups (a Prometheus rule file's `groups`, a PrometheusRule's `spec.groups`)."""
        return [{"name": self.GROUP, "rules": [r.as_dict(cluster) for r in self.rules]}]


# Profile fields naming an object "you create it" (profile/models.py descriptions), as (kind, StackPlan
# field holding (name, keys)): the stack mounts them from the stack's namespace, gpuop never writes them.
USER_CREATED: tuple[tuple[str, str], ...] = (
    ("ConfigMap", "driver_repo_config"),      # spec.driver.repoConfig.configMapName
    ("ConfigMap", "driver_cert_config"),      # spec.driver.certConfig.configMapName
    ("PriorityClass", "owned_priority_classes"),   # spec.clusterOwned.priorityClasses: cluster-scoped, names only
)
CLUSTER_SCOPED_USER_CREATED = frozenset({"PriorityClass"})


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
    os: str | None               # None: no pool gets a driver from gpuop (validate/distribution.py)
    os_tag: str | None
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
    delivery: DeliveryPlan = field(default_factory=DeliveryPlan)   # destination and credential references
    driver_variants: tuple[DriverVariant, ...] = ()   # the driver DaemonSets (platform.py); () = none
    pci_vendor: str = ""                                # how NFD recognises NVIDIA GPUs (GPU catalog)
    pci_classes: tuple[str, ...] = ()
    openshift: OpenShiftPlan | None = None            # None: not OpenShift
    pool_configs: PoolConfigs = field(default_factory=PoolConfigs)  # MIG / plugin configs, labels
    dra: DraPlan | None = None                        # None: no pool uses allocation: dra (plan/dra.py)
    smoke_test: Image | None = None                   # the chart's `helm test` image (below imageRegistry)
    operator: OperatorPlan | None = None              # spec.delivery.mode: operator (plan/operator.py)
    move_from: str | None = None                      # spec.delivery.moveFrom: the delivery moved from (None: no move)
    capacity: ClusterCapacity = field(default_factory=ClusterCapacity)   # per pool resources (plan/capacity.py)
    queues: QueuesPlan | None = None                  # None: spec.queues.enabled false (plan/queues.py)
    dashboards: DashboardsPlan | None = None
    health_gate: HealthGatePlan | None = None         # None: no pool runs a check (plan/health_gate.py)          # None: spec.dashboards.enabled false
    alerts: AlertsPlan | None = None                  # spec.alerts (plan/alerts.py); None: alerts off
    distribution: str = "generic"                      # spec.platform.distribution (catalog/distributions.py)
    runtime_config_source: str | None = None          # toolkit RUNTIME_CONFIG_SOURCE (None: the toolkit's default)
    driver_root: str = "/run/nvidia/driver"           # hostPaths.driverInstallDir (GKE: Google's installer's)
    driver_sysfs: tuple[str, str, str] = ("host-sys-devices-system", "/sys/devices/system", "Directory")
                                                        # the release's driver sysfs mount (name, path, hostPath type)
    init_resources: bool = True                       # the release's operator gives its init containers resources
    assets: OperandAssets = field(default_factory=OperandAssets)   # the release's operand assets (v26.7's: default)
    root_fs: str = "/"                                  # hostPaths.rootFS
    toolkit_install_dir: str = "/usr/local/nvidia"      # toolkit.installDir (GKE COS: /home/kubernetes/bin/nvidia)
    driver_flavours: tuple[str, ...] = ()               # the driver flavours it installs (catalog/data/licences.yaml);
                                                        # kernelModuleType auto: open and proprietary (the node picks)
    kubelet_root_dir: str = "/var/lib/kubelet"          # hostPaths.kubeletRootDir
    pod_labels: tuple[tuple[str, str], ...] = ()        # spec.daemonsets.labels
    pod_annotations: tuple[tuple[str, str], ...] = ()   # spec.daemonsets.annotations
    operands: tuple[tuple[str, Operand], ...] = ()      # env / args pass-through per component (profile section)
    driver_digests: tuple[tuple[str, str], ...] = ()    # <path>:<tag> -> digest of driver-pod images (pinned)
    gds: Image | None = None                            # nvidia-fs sidecar (tag: <version>, + -<os tag> per variant),
                                                        # where some driver variant runs it (variant.sidecars)
    gdrcopy: Image | None = None                        # gdrdrv sidecar, likewise
    device_sidecars: tuple[str, ...] = ()               # "gds" / "gdrcopy" of spec.driver: the device plugin
                                                        # injects their device nodes (as the ClusterPolicy's)
    driver_repo_config: tuple[str, tuple[str, ...]] | None = None   # (ConfigMap, keys): spec.driver.repoConfig
    driver_cert_config: tuple[str, tuple[str, ...]] | None = None   # (ConfigMap, keys): spec.driver.certConfig
    owned_priority_classes: tuple[str, ...] = ()        # spec.clusterOwned.priorityClasses

    def operand(self, key: str) -> Operand:
        return dict(self.operands).get(key, Operand())

    @property
    def user_created(self) -> dict[str, list[str]]:
        """The objects the stack references that the profile says the user creates (kind -> sorted
        `namespace/name`): external references for the semantic check, never "not found"."""
        out: dict[str, set[str]] = {}
        for kind, attr in USER_CREATED:
            ref = getattr(self, attr)
            if kind in CLUSTER_SCOPED_USER_CREATED:      # cluster-scoped: names only
                if ref:
                    out.setdefault(kind, set()).update(ref)
            elif ref is not None:
                out.setdefault(kind, set()).add(f"{self.namespace}/{ref[0]}")
        return {kind: sorted(names) for kind, names in out.items()}

    @property
    def uses_crd_kinds(self) -> bool:
        """Whether the stack holds custom resources (NodeFeatureRule, ServiceMonitor) whose CRDs come
        from elsewhere (NFD, the Prometheus Operator)."""
        monitors = (self.dcgm_exporter and self.dcgm_exporter.service_monitor) or (
            self.node_status_exporter and self.node_status_exporter.service_monitor)
        return bool(self.nfd.rules or monitors)

    def image(self, component: str) -> Image:
        return dict(self.images)[component]

    def image_keys(self) -> list[str]:
        """Every image (<path>:<tag>, below the registry) the stack's components run: what a digest lock must
        hold, with the chart's `helm test` image and NFD's (deploy mode; the DRA driver's chart brings its own)."""
        pc = self.pool_configs
        used = {"validator": True, "toolkit": self.toolkit, "gfd": self.gfd, "dcgm": self.dcgm,
                "devicePlugin": self.device_plugin or (self.gfd and bool(pc.plugin_configs)),
                "dcgmExporter": self.dcgm_exporter is not None, "migManager": pc.mig_manager,
                "nodeStatusExporter": self.node_status_exporter is not None,
                "driverManager": bool(self.driver_variants)}
        keys = {i.key for name, i in self.images if used.get(name)}
        keys |= {i.key for i in (self.smoke_test, self.nfd.image) if i is not None}
        keys |= {i.key for i in (self.health_gate.images() if self.health_gate else ())}
        if self.dcgm_exporter is not None and self.openshift is not None and self.assets.pod_resources_init:
            keys.add(self.assets.pod_resources_init.key)
        return sorted(keys | set(self.driver_pod_keys()))

    def driver_pod_keys(self) -> list[str]:
        """<path>:<tag> of the images a driver DaemonSet runs besides the manager: the driver per variant and
        its GDS / GDRCopy sidecars (<version>-<os tag> of the variant, as resolveDriverTag)."""
        keys = []
        for v in self.driver_variants:
            keys.append(f"{self.image('driver').path}:{v.tag}")
            for side, on in ((self.gds, v.sidecars.gds), (self.gdrcopy, v.sidecars.gdrcopy)):
                if side is not None and on:
                    keys.append(f"{side.path}:{side.tag}-{sidecar_os_tag(v)}")
        return list(dict.fromkeys(keys))        # variants differing in sidecars only share the driver image

    @property
    def values(self) -> dict:
        return json.loads(self.values_json)


def sidecar_os_tag(v: DriverVariant) -> str:
    """The OS tag of a (non-precompiled) driver variant: its image tag is <version>-<os tag>."""
    return v.tag.removeprefix(f"{v.version}-")
