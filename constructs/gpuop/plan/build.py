"""Stage 3, plan: a validated profile + the catalogs -> one frozen `StackPlan` per cluster.

Every contextual default is resolved here, once (namespace, runtime, NFD mode and ServiceMonitors from
the platform, driver version from the release or a branch, image tags from the OS, the driver
DaemonSets a cluster needs (drivers.py: per RHCOS build, kernel, OS, pool driver and sidecars),
per-component version overrides, upstream tolerations, the upgrade policy, placement additions,
monitoring, the NFD chart and its values, the per-pool configs of pools.py), so components are pure
functions of their props and never look at the profile or the catalog themselves. The plan (model.py)
also carries the chart's default values (the value slots' defaults).
"""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path
from typing import Protocol

from gpuop.catalog import Catalog, distributions
from gpuop.errors import UserError
from gpuop.kube import components
from gpuop.catalog.distributions import distribution_runtime_files
from gpuop.plan import chartmap
from gpuop.plan import operator as operator_plan
from gpuop.plan import alerts as alerts_plan
from gpuop.plan import dra as dra_rules
from gpuop.plan import pools as pool_rules
from gpuop.plan.capacity import plan_capacity
from gpuop.plan import health_gate as gate_plan
from gpuop.plan import queues as queue_plan
from gpuop.plan import defaults as defaulting
from gpuop.plan.drivers import driver_variants, full_version, version_resolver
from gpuop.plan.model import (DashboardsPlan, DcgmExporterPlan, DeliveryPlan, Image, Monitor, NfdPlan, NodeStatusExporterPlan, OpenShiftPlan,
                              Operand, OperandAssets, Pool, Scheduling, StackPlan, Upgrade)
from gpuop.profile.models import ClusterProfile, Resources

UPSTREAM_TOLERATIONS = ({"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},)
DEFAULT_NAMESPACE = {"kubernetes": "gpu-operator", "openshift": "nvidia-gpu-operator"}
DEFAULT_NFD_MODE = {"kubernetes": "deploy", "openshift": "existing"}      # OpenShift: Red Hat's NFD Operator



def driver_flavours(spec, any_driver: bool) -> tuple[str, ...]:
    """The driver flavours (catalog/data/licences.yaml) the cluster installs: the vGPU guest driver, or the data-center
    driver's kernel modules (auto: either, the driver picks on the node), precompiled or not."""
    if not any_driver:
        return ()
    d = spec.driver
    if d.driverType == "vgpu":
        return ("vgpu-guest",)
    kinds = ("open", "proprietary") if d.kernelModuleType == "auto" else (d.kernelModuleType,)
    return (("precompiled",) if d.precompiled else ()) + kinds

def _component_values(enabled: bool, resources: Resources | None) -> dict | None:
    if not enabled:
        return None
    return {"enabled": True, "resources": resources.model_dump(exclude_none=True) if resources else {}}


# Profile sections with a per-component version override (each also names its image in the catalog), with the
# Operator's env / args pass-through, and the Helm values keys a user can switch off at deploy time.
VERSIONED, OPERANDS, SWITCHABLE = components.VERSIONED, components.OPERANDS, components.VALUES_SWITCHABLE
CONTROL_PLANE_TOLERATION = {"key": "node-role.kubernetes.io/control-plane", "operator": "Equal", "value": "",
                            "effect": "NoSchedule"}


def _sharing_text(pool) -> str:
    """How the pool's GPUs are shared, for the report: 'time-slicing 4', 'MPS 2', '' (none)."""
    s = pool.sharing
    if s is None:
        return ""
    if s.mps is not None:
        return f"MPS {s.mps.replicas}"
    ts = s.timeSlicing
    if ts is None:
        return ""
    if ts.replicas and not ts.resources:
        return f"time-slicing {ts.replicas}"
    return "time-slicing " + ", ".join([f"{r.name} x{r.replicas}" for r in ts.resources]
                                       + ([f"others x{ts.replicas}"] if ts.replicas else []))


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
    if spec.images.pullSecrets:                    # NFD's chart: imagePullSecrets of every NFD pod
        nfd_values["imagePullSecrets"] = [{"name": s} for s in spec.images.pullSecrets]
    # a registry mirror serves NFD's image and chart too: an air-gapped cluster reaches nothing else
    mirror = spec.images.registry
    repository = spec.nfd.chartRepository or (f"oci://{mirror}" if mirror else chart.repository)
    return NfdPlan(mode="deploy", rules=spec.nfd.rules, chart=chart.chart, repository=repository,
                   version=chart.version, namespace=chart.namespace, release_name=chart.releaseName,
                   values_json=json.dumps(nfd_values, sort_keys=True, separators=(",", ":")),
                   image=Image(chart.image.path, chart.image.tag), image_registry=mirror or chart.image.registry)


class Validated(Protocol):
    """What the plan reads of the validate stage's result (profile/valid.py ValidProfile): the checked
    profile. A protocol, so the plan never imports validate and the stage arrows point one way."""
    profile: ClusterProfile


def build_plan(valid: Validated, cat: Catalog) -> StackPlan:
    p = valid.profile
    spec = p.spec
    release = cat.release(spec.release)
    m = release.matrix
    platform = spec.platform.type
    kube_version = m.openshiftKubernetes[spec.platform.version] if platform == "openshift" else spec.platform.version
    defaults = defaulting.of(spec)        # the defaulting pass: each pool's effective settings, once
    runtime = defaults.runtime
    dist = distributions.load().get(spec.platform.distribution)
    comps = release.components
    images = {name: Image(ref.image, ref.version) for name, ref in comps.items()}
    driver_version = full_version(spec.driver.version, comps["driver"].version, cat)
    os_tag = m.os[spec.os].tag if spec.os else None      # no OS: every driver is preinstalled (no driver image)
    images["driver"] = Image(comps["driver"].image, f"{driver_version}-{os_tag}" if os_tag else driver_version)
    for key in VERSIONED:
        version = getattr(spec, key).version
        if version:
            images[key] = Image(comps[key].image, version)
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
    variants = driver_variants(spec, release, version_resolver(spec, comps["driver"].version, cat), defaults)
    if variants and "driver" not in values:      # the driver is off cluster-wide but on for some pools
        values["driver"] = _component_values(True, spec.driver.resources)
    plan = StackPlan(
        pci_vendor=cat.pci.vendor,
        pci_classes=tuple(cat.pci.displayClasses),
        name=p.metadata.name,
        labels=tuple(sorted(p.metadata.labels.items())),
        namespace=spec.namespace or DEFAULT_NAMESPACE[platform],
        platform=platform,
        platform_version=spec.platform.version,
        kube_version=kube_version,
        runtime=runtime,
        runtime_files=distribution_runtime_files(dist, release.runtimes[runtime], runtime,
                                                 spec.platform.containerdMajor),
        distribution=spec.platform.distribution or "generic",
        runtime_config_source=dist.containerd.configSource if dist.containerd and runtime == "containerd" else None,
        driver_root=spec.hostPaths.driverInstallDir or dist.driverRoot or "/run/nvidia/driver",
        **({"driver_sysfs": (release.driverSysfs.name, release.driverSysfs.path, release.driverSysfs.type)}
           if release.driverSysfs else {}),
        init_resources=release.initContainerResources,
        assets=_assets(release),
        root_fs=spec.hostPaths.rootFS,
        toolkit_install_dir=dist.toolkitInstallDir or "/usr/local/nvidia",
        kubelet_root_dir=spec.hostPaths.kubeletRootDir,
        pod_labels=tuple(sorted(ds.labels.items())),
        pod_annotations=tuple(sorted(ds.annotations.items())),
        operands=tuple((key, Operand(_proxy_env(spec.proxy, key) + tuple((e.name, e.value) for e in getattr(spec, key).env),
                                     tuple(a) if (a := getattr(spec, key).args) is not None else None))
                       for key in OPERANDS),
        driver_repo_config=_files(spec.driver.repoConfig),
        gds=_sidecar(release.name, "gds") if any(v.sidecars.gds for v in variants) else None,
        gdrcopy=_sidecar(release.name, "gdrcopy") if any(v.sidecars.gdrcopy for v in variants) else None,
        device_sidecars=tuple(k for k in ("gds", "gdrcopy") if getattr(defaults.sidecars, k)),
        driver_cert_config=_files(spec.driver.certConfig),
        owned_priority_classes=tuple(sorted(set(spec.clusterOwned.priorityClasses))),
        os=spec.os,
        os_tag=os_tag,
        release=release.name,
        operator_version=release.operatorVersion,
        images=tuple(sorted(images.items())),
        driver_version=driver_version if variants else None,
        kernel_module_type=spec.driver.kernelModuleType,
        driver_flavours=driver_flavours(spec, defaults.any_driver),
        toolkit=spec.toolkit.enabled,
        device_plugin=spec.devicePlugin.enabled,
        mig_strategy=pool_rules.cluster_strategy([p for p in spec.nodePools if not dra_rules.is_dra(p)]) or "mixed",   # pools disagree: mixed (per pool)
        pools=tuple(Pool(pl.name, pl.gpu, tuple(sorted(pl.nodeSelector.items())),
                         pl.mig.strategy if pl.mig else "none",
                         tuple(sorted(pl.mig.layout.items())) if pl.mig else (), _sharing_text(pl))
                    for pl in spec.nodePools),
        values_json=json.dumps(values, sort_keys=True, separators=(",", ":")),
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
        delivery=_delivery(spec.delivery),
        driver_variants=variants,
        openshift=_openshift(release) if platform == "openshift" else None,
        pool_configs=pool_configs,
        capacity=plan_capacity(spec),
        dra=dra_rules.build(spec, defaults, tolerations=values["tolerations"], priority_class=values["priorityClassName"]),
        smoke_test=Image(release.smokeTest.image, release.smokeTest.version) if release.smokeTest else None,
    )
    plan = dataclasses.replace(plan, health_gate=gate_plan.build(spec, plan))
    plan = pin_digests(valid, plan)
    return dataclasses.replace(plan, operator=operator_plan.build(spec, plan, cat),   # None in stack mode
                               move_from=spec.delivery.moveFrom, alerts=alerts_plan.build(spec, plan),
                               queues=queue_plan.build(spec, plan.capacity, plan.dra),
                               dashboards=DashboardsPlan(spec.dashboards.folder) if spec.dashboards.enabled else None)


PROXIED = components.PROXIED      # the containers that fetch from outside (packages; the toolkit's image pulls none,
                                   # but its runtime config reload may reach a registry mirror)


def _proxy_env(proxy, key: str) -> tuple[tuple[str, str], ...]:
    """spec.proxy as env, both cases (tools differ in which they read), before the component's own env."""
    if proxy is None or key not in PROXIED:
        return ()
    # the mapping table's entries: operator mode writes the same, and its import reads them back
    return tuple((e["name"], e["value"]) for e in chartmap.proxy_env(proxy.model_dump(mode="json")))


def _sidecar(release: str, name: str) -> Image:
    side = getattr(distributions.driver_extras()[release], name)
    return Image(side.image, side.version)


def _files(c) -> tuple[str, tuple[str, ...]] | None:
    return (c.configMapName, tuple(c.files)) if c is not None else None


LOCK_KIND = "ImageDigests"
DIGEST = re.compile(r"^sha256:[a-f0-9]{64}$")


def read_lock(path: Path) -> dict[str, str]:
    """A digest lock file -> {"<path>:<tag>": "sha256:..."}; ValueError says what is wrong with it."""
    try:
        doc = json.loads(path.read_text())
    except FileNotFoundError:
        raise ValueError(f"{path} does not exist; write it with `gpuop images resolve --registry URL --lock {path}`")
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"{path} is not a readable JSON digest lock ({exc})")
    images = doc.get("images") if isinstance(doc, dict) and doc.get("kind") == LOCK_KIND else None
    if not isinstance(images, dict) or not all(isinstance(v, str) and DIGEST.match(v) for v in images.values()):
        raise ValueError(f"{path} is not a digest lock (kind {LOCK_KIND}, images: {{<path>:<tag>: sha256:<64 hex>}})")
    return images


def pin_digests(valid, plan: StackPlan) -> StackPlan:
    """spec.images.digestLock: every image the plan uses pinned from the lock; a located UserError names
    the images the lock lacks."""
    lock_name = valid.profile.spec.images.digestLock
    if lock_name is None:
        return plan
    where = ("spec", "images", "digestLock")
    try:
        lock = read_lock(valid.loaded.path.parent / lock_name)
    except ValueError as exc:
        raise UserError([valid.loaded.positions.issue(where, str(exc))])
    missing = [k for k in plan.image_keys() if k not in lock]
    if missing:
        raise UserError([valid.loaded.positions.issue(where, f"the digest lock has no digest for {', '.join(missing)}; "
                                                      "run `gpuop images resolve --registry URL` for this profile")])
    pin = lambda i: None if i is None else dataclasses.replace(i, digest=lock.get(i.key))   # noqa: E731
    return dataclasses.replace(
        plan, images=tuple((n, pin(i)) for n, i in plan.images),
        driver_digests=tuple(sorted((k, lock[k]) for k in plan.driver_pod_keys())),
        smoke_test=pin(plan.smoke_test), nfd=dataclasses.replace(plan.nfd, image=pin(plan.nfd.image)),
        health_gate=gate_plan.pin(plan.health_gate, pin),
        assets=dataclasses.replace(plan.assets, pod_resources_init=pin(plan.assets.pod_resources_init)))


def _delivery(d) -> DeliveryPlan:
    dest = d.destination
    creds = tuple((repo, engine, name) for repo in ("nfd", "operator", "dra") for engine in ("flux", "argocd")
                  if (name := getattr(getattr(d.credentials, repo), engine)) is not None)
    return DeliveryPlan(dest.name, dest.server, dest.kubeConfigSecret, creds)


def _assets(release) -> OperandAssets:
    """The release's operand assets (catalog releases.yaml `assets`), the OpenShift init image below the registry."""
    a = release.assets
    init = a.openshiftPodResourcesInit
    return OperandAssets(config_digest=a.driverConfigDigest, inline_startup_probe=a.driverStartupProbe == "inline",
                         driver_sidecar_env=a.driverSidecarEnv, host_engine_probes=a.hostEngineProbes,
                         validator_sidecar_checks=a.validatorSidecarChecks,
                         pod_resources_init=Image(init.image, init.version) if init else None,
                         absent_env=tuple(sorted(a.absentEnv.items())))


def _openshift(release) -> OpenShiftPlan:
    o = release.openshift
    return OpenShiftPlan(o.driverToolkit.imageStream, o.driverToolkit.namespace, o.dtkLabel, o.dtkVersionLabel,
                         o.monitoringLabel, o.prometheus.serviceAccount, o.prometheus.namespace)
