"""Stage 3, plan: a validated profile + the catalogs -> one frozen `StackPlan` per cluster.

Every contextual default is resolved here, once (namespace, runtime, NFD mode and ServiceMonitors from
the platform, driver version from the release or a branch, image tags from the OS, the driver
DaemonSets a cluster needs (drivers.py: per RHCOS build, kernel, OS, pool driver), per-component version
overrides, upstream tolerations, the upgrade policy, placement additions, monitoring, the NFD chart and
its values, the per-pool configs of pools.py), so components are pure functions of their props and never
look at the profile or the catalog themselves. The plan (model.py) also carries the chart's default
values (the value slots' defaults).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from gpuop.catalog import Catalog
from gpuop.plan import pools as pool_rules
from gpuop.plan.drivers import DEFAULT_RUNTIME, driver_variants, full_version, version_resolver
from gpuop.plan.model import (DcgmExporterPlan, Image, Monitor, NfdPlan, NodeStatusExporterPlan, OpenShiftPlan, Pool,
                              Scheduling, StackPlan, Upgrade)

if TYPE_CHECKING:      # the validate stage hands its result forward; the plan never calls it
    from gpuop.profile.models import ClusterProfile, Resources
    from gpuop.validate.runner import ValidProfile

UPSTREAM_TOLERATIONS = ({"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},)
DEFAULT_NAMESPACE = {"kubernetes": "gpu-operator", "openshift": "nvidia-gpu-operator"}
DEFAULT_NFD_MODE = {"kubernetes": "deploy", "openshift": "existing"}      # OpenShift: Red Hat's NFD Operator


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
    driver_version = full_version(spec.driver.version, comps["driver"].version, cat)
    os_tag = m.os[spec.os].tag
    images["driver"] = Image(comps["driver"].image, f"{driver_version}-{os_tag}")
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
    variants = driver_variants(spec, release, version_resolver(spec, comps["driver"].version, cat))
    if variants and "driver" not in values:      # the driver is off cluster-wide but on for some pools
        values["driver"] = _component_values(True, spec.driver.resources)
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
        mig_strategy=pool_rules.cluster_strategy(spec.nodePools) or "mixed",   # pools disagree: mixed (per pool)
        pools=tuple(Pool(pl.name, pl.gpu, tuple(sorted(pl.nodeSelector.items())),
                         pl.mig.strategy if pl.mig else "none",
                         tuple(sorted(pl.mig.layout.items())) if pl.mig else ()) for pl in spec.nodePools),
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
        driver_variants=variants,
        openshift=_openshift(release) if platform == "openshift" else None,
        pool_configs=pool_configs,
    )


def _openshift(release) -> OpenShiftPlan:
    o = release.openshift
    return OpenShiftPlan(o.driverToolkit.imageStream, o.driverToolkit.namespace, o.dtkLabel, o.dtkVersionLabel,
                         o.monitoringLabel, o.prometheus.serviceAccount, o.prometheus.namespace)
