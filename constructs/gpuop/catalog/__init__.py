"""The catalogs: facts about stack releases, GPUs, drivers and MIG geometry, kept as data (data/*.yaml).

Each data file names its sources. This package only reads them into frozen models (mig.py for the MIG
geometry) and imports nothing else of gpuop; the rules that use them live in validate/. `digest` (of
every data file, mig.yaml included) identifies the catalog content for build caches.
"""

from __future__ import annotations

import hashlib
from functools import lru_cache
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field

from gpuop.catalog.reads import Tracked, register, root

from gpuop.catalog import versions

DATA = Path(__file__).parent / "data"


class _Frozen(Tracked):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ImageRef(_Frozen):
    image: str
    version: str


class HostMount(_Frozen):
    """A hostPath volume mounted at the same path in an operand container; type "": no hostPath type."""
    name: str
    path: str
    type: str = ""


class OsEntry(_Frozen):
    tag: str
    platform: str
    kubernetes: tuple[str, ...] = ()
    openshift: tuple[str, ...] = ()
    support: Literal["supported", "partner-validated"] = "supported"
    note: str | None = None
    select: dict[str, str] = Field(default_factory=dict)   # nodeLabels key name -> value telling its nodes apart


class RuntimeSupport(_Frozen):
    support: Literal["supported", "code-only"] = "supported"
    versions: str | None = None
    note: str | None = None


class Matrix(_Frozen):
    kubernetes: tuple[str, ...]
    openshift: tuple[str, ...]
    containerRuntimes: tuple[str, ...]
    openshiftKubernetes: dict[str, str]
    os: dict[str, OsEntry]
    runtimeSupport: dict[str, RuntimeSupport] = Field(default_factory=dict)


class RuntimeFiles(_Frozen):
    config: str
    configEnv: str
    dropIn: str | None = None
    socket: str | None = None
    socketEnv: str | None = None
    hooks: dict[str, str] = Field(default_factory=dict)     # platform -> crio-hooks host dir (else the asset's)


class NfdImage(_Frozen):
    """NFD's one image (master, worker, gc and the post-delete job run it): <registry>/<path>:<tag>."""
    registry: str
    path: str
    tag: str


class NfdChart(_Frozen):
    """Node Feature Discovery's own Helm chart, as the stack release pins it (deploy mode)."""
    chart: str
    repository: str
    version: str
    image: NfdImage
    namespace: str
    releaseName: str
    source: str
    values: dict = Field(default_factory=dict)   # the settings the GPU stack needs, upstream's subchart values


class NodeLabels(_Frozen):
    """The NFD label keys driver DaemonSets select on (releases.yaml names the sources)."""
    osId: str
    osVersionId: str
    osVersionMajor: str
    kernel: str
    rhcosBuild: str


class ImageStreamRef(_Frozen):
    imageStream: str
    namespace: str


class ServiceAccountRef(_Frozen):
    serviceAccount: str
    namespace: str


class NamespaceRule(_Frozen):
    exact: tuple[str, ...] = ()
    prefixes: tuple[str, ...] = ()

    def matches(self, name: str) -> bool:
        return name in self.exact or name.startswith(self.prefixes)


class OpenShiftFacts(_Frozen):
    driverToolkit: ImageStreamRef
    dtkLabel: str
    dtkVersionLabel: str
    monitoringLabel: str
    prometheus: ServiceAccountRef
    noImageLookupNamespaces: NamespaceRule


class OperandAssets(_Frozen):
    """How the release's operator renders its operands where that differs from v26.7's assets and transforms (the
    defaults); releases.yaml cites each fact's file at the tag."""
    driverConfigDigest: bool = True       # DRIVER_CONFIG_DIGEST on the driver manager, driver and DTK containers
    driverStartupProbe: Literal["script", "inline"] = "script"   # the startup-probe ConfigMap's script, or inline
    driverSidecarEnv: bool = True         # GDS_ENABLED / GDRCOPY_ENABLED on the driver container (DTK: always)
    hostEngineProbes: bool = True         # DCGM's tcpSocket and the DCGM exporter's /health probes
    validatorSidecarChecks: bool = False  # the validator's nvidia-fs / gdrcopy validation init containers
    # OpenShift: the DCGM exporter's init container that relabels the kubelet's pod-resources socket (SELinux),
    # on the operator's initContainer image below the registry; None: no such init container
    openshiftPodResourcesInit: ImageRef | None = None
    absentEnv: dict[str, tuple[str, ...]] = Field(default_factory=dict)   # container -> env names it lacks


class Release(_Frozen):
    name: str
    operatorVersion: str
    registry: str
    source: str
    components: dict[str, ImageRef]
    runtimes: dict[str, RuntimeFiles]
    matrix: Matrix
    nfd: NfdChart | None = None
    smokeTest: ImageRef | None = None            # the chart's `helm test` image, below `registry`
    nodeLabels: NodeLabels | None = None
    precompiled: dict[str, tuple[str, ...]] = Field(default_factory=dict)   # os -> driver branches
    openshift: OpenShiftFacts | None = None
    crds: dict[str, str] = Field(default_factory=dict)   # CRD name -> git blob of the release chart's copy
    driverSysfs: HostMount | None = None                 # the driver container's sysfs mount (assets/state-driver)
    initContainerResources: bool = True   # validation / driver-manager init containers take their operand's resources
    # how NVIDIA's NVIDIADriver controller gives GPU nodes to CRs: "owners" (each node to one CR, a CR's own
    # nodeSelector before the default CR's), "exclusive" (no two CRs may select one node, or none is rendered)
    nvidiaDriverNodes: Literal["owners", "exclusive"] = "owners"
    assets: OperandAssets = Field(default_factory=OperandAssets)   # omitted: v26.7's assets


class UpgradeRule(_Frozen):
    """Which moves between releases NVIDIA supports: to the same major or the next one (releases in order)."""
    rule: str
    source: str


class Gpu(_Frozen):
    model_config = ConfigDict(extra="allow", frozen=True)
    name: str
    architecture: str
    memoryGiB: float | None = None
    pciDeviceIds: tuple[str, ...] = ()
    migCapable: bool = False


class DriverBranch(_Frozen):
    model_config = ConfigDict(extra="allow", frozen=True)
    branch: str
    latest: str
    versions: tuple[str, ...] = ()
    architectures: tuple[str, ...] = ()


class PciIdentity(_Frozen):
    vendor: str
    displayClasses: tuple[str, ...]


class Catalog(_Frozen):
    releases: tuple[Release, ...]
    gpus: dict[str, Gpu]
    pci: PciIdentity
    drivers: tuple[DriverBranch, ...] = Field(default=())
    digest: str
    upgrades: UpgradeRule | None = None

    def unsupported_move(self, old: str, new: str) -> str | None:
        """Why NVIDIA does not support moving a cluster from release `old` to `new` (the releases it skips and the
        documented path through them), or None: the same or the next release, a downgrade (documented nowhere,
        left to the review), or a release gpuop does not know."""
        names = [r.name for r in self.releases]
        if self.upgrades is None or old not in names or new not in names:
            return None
        i, j = names.index(old), names.index(new)
        if j - i <= 1:
            return None
        path = " -> ".join(names[i:j + 1])
        return (f"moving from release {old} to {new} skips {', '.join(names[i + 1:j])}: NVIDIA supports upgrades only "
                f"within a major release or to the next one ({self.upgrades.source}); move through each: {path}")

    def release(self, name: str | None) -> Release | None:
        if name is None:
            return self.releases[-1]
        return next((r for r in self.releases if r.name == name), None)

    def branch(self, version: str) -> DriverBranch | None:
        return next((b for b in self.drivers if b.branch == version.split(".")[0]), None)


def _read(name: str) -> tuple[dict, bytes]:
    raw = (DATA / name).read_bytes()
    return yaml.load(raw, Loader=yaml.CSafeLoader), raw


@lru_cache(maxsize=1)
def load() -> Catalog:
    h = hashlib.sha256()
    rel, raw = _read("releases.yaml")
    h.update(raw)
    gpus: dict[str, Gpu] = {}
    pci = None
    drivers: tuple[DriverBranch, ...] = ()
    if (DATA / "gpus.yaml").exists():
        doc, raw = _read("gpus.yaml")
        h.update(raw)
        gpus = {g["name"]: Gpu(**g) for g in doc["gpus"]}
        pci = PciIdentity(**doc["pci"])
    if (DATA / "drivers.yaml").exists():
        doc, raw = _read("drivers.yaml")
        h.update(raw)
        drivers = tuple(DriverBranch(**b) for b in doc["branches"])
    for extra in sorted(DATA.glob("*.yaml")):       # every other catalog too (mig.yaml, dra.yaml, ...): a fact
        if extra.name not in ("releases.yaml", "gpus.yaml", "drivers.yaml"):   # change invalidates caches
            h.update(extra.name.encode() + b"\0" + extra.read_bytes())
    releases = tuple(sorted((Release(**r) for r in rel["releases"]), key=lambda r: versions.key(r.name)))
    upgrades = UpgradeRule(**rel["upgrades"]) if "upgrades" in rel else None
    return register("catalog", Catalog(releases=releases, gpus=gpus, drivers=drivers, pci=pci, digest=h.hexdigest(),
                                       upgrades=upgrades))


root("catalog", load)
