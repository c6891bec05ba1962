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
from gpuop.plan.capacity import ClusterCapacity
from gpuop.plan.dra import DraPlan
from gpuop.plan.drivers import DriverVariant
from gpuop.plan.operator import OperatorPlan
from gpuop.plan.pools import PoolConfigs


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
class OpenShiftPlan:
    """OpenShift facts the components need (catalog releases.yaml `openshift`)."""
    dtk_image_stream: str = "driver-toolkit"     # the Driver Toolkit ImageStream (and tag source) ...
    dtk_namespace: str = "openshift"             # ... in this namespace
    dtk_label: str = "openshift.driver-toolkit"
    dtk_version_label: str = "openshift.driver-toolkit.rhcos"
    monitoring_label: str = "openshift.io/cluster-monitoring"
    prometheus_sa: str = "prometheus-k8s"
    prometheus_namespace: str = "openshift-monitoring"


# Profile fields naming an object "you create it" (profile/models.py descriptions), as (kind, StackPlan
# field holding (name, keys)): the stack mounts them from the stack's namespace, gpuop never writes them.
USER_CREATED: tuple[tuple[str, str], ...] = (
    ("ConfigMap", "driver_repo_config"),      # spec.driver.repoConfig.configMapName
    ("ConfigMap", "driver_cert_config"),      # spec.driver.certConfig.configMapName
)


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
    driver_variants: tuple[DriverVariant, ...] = ()   # the driver DaemonSets (platform.py); () = none
    pci_vendor: str = ""                                # how NFD recognises NVIDIA GPUs (GPU catalog)
    pci_classes: tuple[str, ...] = ()
    openshift: OpenShiftPlan | None = None            # None: not OpenShift
    pool_configs: PoolConfigs = field(default_factory=PoolConfigs)  # MIG / plugin configs, labels
    dra: DraPlan | None = None                        # None: no pool uses allocation: dra (plan/dra.py)
    smoke_test: Image | None = None                   # the chart's `helm test` image (below imageRegistry)
    operator: OperatorPlan | None = None              # spec.delivery.mode: operator (plan/operator.py)
    capacity: ClusterCapacity = field(default_factory=ClusterCapacity)   # per pool resources (plan/capacity.py)
    distribution: str = "generic"                      # spec.platform.distribution (catalog/distributions.py)
    runtime_config_source: str | None = None          # toolkit RUNTIME_CONFIG_SOURCE (None: the toolkit's default)
    driver_root: str = "/run/nvidia/driver"           # hostPaths.driverInstallDir (GKE: Google's installer's)
    root_fs: str = "/"                                  # hostPaths.rootFS
    toolkit_install_dir: str = "/usr/local/nvidia"      # toolkit.installDir (GKE COS: /home/kubernetes/bin/nvidia)
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

    def operand(self, key: str) -> Operand:
        return dict(self.operands).get(key, Operand())

    @property
    def user_created(self) -> dict[str, list[str]]:
        """The objects the stack references that the profile says the user creates (kind -> sorted
        `namespace/name`): external references for the semantic check, never "not found"."""
        out: dict[str, set[str]] = {}
        for kind, attr in USER_CREATED:
            ref = getattr(self, attr)
            if ref is not None:
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
