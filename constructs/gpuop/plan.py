"""Stage 3, plan: a validated profile + the catalogs -> one frozen `StackPlan` per cluster.

Every contextual default is resolved here, once (namespace and runtime from the platform, driver
version from the release or a branch, image tags from the OS, upstream tolerations), so components
are pure functions of their props and never look at the profile or the catalog themselves.
The plan also carries the chart's default values (the value slots' defaults).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field

from . import __version__
from .catalog import Catalog, RuntimeFiles
from .profile.models import ClusterProfile, Resources
from .slots import slot
from .validate import ValidProfile

UPSTREAM_TOLERATIONS = ({"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},)
DEFAULT_NAMESPACE = {"kubernetes": "gpu-operator", "openshift": "nvidia-gpu-operator"}
DEFAULT_RUNTIME = {"kubernetes": "containerd", "openshift": "crio"}


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
    for name, settings in (("toolkit", spec.toolkit), ("devicePlugin", spec.devicePlugin)):
        if settings.version:
            images[name] = Image(comps[name].image, settings.version)
    strategies = {pool.mig.strategy for pool in spec.nodePools if pool.mig and pool.mig.layout}
    values = {
        "imageRegistry": spec.images.registry or release.registry,
        "imagePullPolicy": spec.images.pullPolicy,
        "imagePullSecrets": [{"name": s} for s in spec.images.pullSecrets],
        "priorityClassName": spec.daemonsets.priorityClassName,
        "tolerations": ([t.model_dump(exclude_none=True) for t in spec.daemonsets.tolerations]
                        if spec.daemonsets.tolerations is not None else list(UPSTREAM_TOLERATIONS)),
    }
    for key, settings in (("driver", spec.driver), ("toolkit", spec.toolkit), ("devicePlugin", spec.devicePlugin)):
        v = _component_values(settings.enabled, settings.resources)
        if v is not None:
            values[key] = v
    h = hashlib.sha256()
    for src in valid.loaded.sources:
        h.update(src.read_bytes())
    h.update(cat.digest.encode())
    h.update(__version__.encode())
    return StackPlan(
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
        driver_version=driver_version if spec.driver.enabled else None,
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
    )
