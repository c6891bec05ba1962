"""Operator mode, planned: the inputs NVIDIA's GPU Operator needs for a profile (`spec.delivery.mode: operator`).

`build(spec, plan, cat) -> OperatorPlan` (called by build.py) turns the already-resolved stack plan (images,
driver version, pool configs, NFD mode) into:
- `values`: the values of NVIDIA's `gpu-operator` chart of the chosen version. Only keys the profile decides
  are set; everything else stays at the chart's own default, so an upgrade of NVIDIA's chart keeps its
  defaults. The device-plugin and MIG configs (plan/pools.py `pool_configs`) go in through the chart's
  `devicePlugin.config` / `migManager.config` (`create: true`), the custom DCGM metrics through
  `dcgmExporter.config`; the chart renders those ConfigMaps. Fields the ClusterPolicy CRD defaults are
  handled in outputs/operator.py (the drift table there).
- `drivers`: NVIDIADriver specs when drivers are managed by the NVIDIADriver CRD (pools with different
  drivers, or `delivery.operator.nvidiaDriverCRD: true`): one CR per distinct driver version and sidecar
  settings (a pool's rdma / gds / gdrcopy: the CRD has them per CR, spec.rdma / gds / gdrcopy). The cluster's
  default driver is the `default: true` CR without a nodeSelector (the CRD's CEL rule, and upstream's
  "fallback for nodes no other NVIDIADriver selects"); every other driver gets the labels all its pools share.
- the OLM facts (package, channel, CSV, source) from the operator catalog.

`driver_groups` is shared with validate/operator.py, so the rules check exactly the CRs that are emitted.
"""

from __future__ import annotations

import json

from gpuop.catalog import distributions
from gpuop.catalog import operator as operator_catalog
from gpuop.plan import chartmap
from gpuop.plan.drivers import pool_settings, version_resolver
from gpuop.plan.model import DriverGroup, OperatorPlan, Sidecars, StackPlan

DEFAULT_INSTALL = {"kubernetes": "helm", "openshift": "olm"}
DEFAULT_CR = "default"
PLUGIN_CONFIG_MAP = chartmap.PLUGIN_CONFIG_MAP      # the names gpuop's stack gives the same ConfigMaps
MIG_CONFIG_MAP = chartmap.MIG_CONFIG_MAP
DCGM_METRICS_MAP = chartmap.DCGM_METRICS_MAP


def _canon(obj) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"))


def uses_driver_crd(spec, groups: list[DriverGroup]) -> bool:
    op = spec.delivery.operator
    if op.gpuCluster:                    # the chart: a GPUCluster needs the NVIDIADriver CRD (validations.yaml)
        return True
    if op.nvidiaDriverCRD is not None:
        return op.nvidiaDriverCRD
    # a pool's own sidecars reach its nodes only through a CR of its own (the ClusterPolicy has the cluster's)
    return len(groups) > 1 or any(g.sidecars != operator_sidecars(spec) for g in groups)


def operator_sidecars(spec) -> Sidecars:
    """The sidecars of the default driver (ClusterPolicy / default NVIDIADriver): GDS and GDRCopy from
    spec.delivery.operator; RDMA off (spec.driver.rdma is refused in operator mode, the chart's default)."""
    op = spec.delivery.operator
    return Sidecars(gds=op.gds, gdrcopy=op.gdrcopy)


def driver_groups(spec, cat) -> list[DriverGroup]:
    """The NVIDIADriver CRs pools need: one per distinct driver version and sidecars (RDMA / GDS / GDRCopy,
    which the NVIDIADriver CRD has per CR); preinstalled pools get none. A CR is named driver-<version>,
    plus the sidecar tokens (or -nosidecars) where its sidecars are not the default driver's."""
    release = cat.release(spec.release)
    resolve = version_resolver(spec, release.components["driver"].version, cat)
    cluster = operator_sidecars(spec)
    default_key = (resolve(spec.driver.version), cluster) if spec.driver.enabled else None
    settings = pool_settings(spec, resolve, cluster)
    by_driver: dict[tuple, list[int]] = {}
    for i, s in enumerate(settings):
        if s.version is not None:
            by_driver.setdefault(s.driver, []).append(i)
    if default_key is not None:          # the default CR is the fallback for GPU nodes no pool selects, so it
        by_driver.setdefault(default_key, [])         # exists whenever the cluster's driver is on
    extra = tuple(sorted(spec.daemonsets.nodeSelector.items()))
    # before v26.7 the NVIDIADriver controller refuses every CR while two select one node (release.nvidiaDriverNodes
    # exclusive): the default CR is no fallback there, it selects its own pools' nodes and is left out without any
    exclusive = release.nvidiaDriverNodes == "exclusive"
    if exclusive and default_key in by_driver and not by_driver[default_key] and len(by_driver) > 1:
        del by_driver[default_key]
    out = []
    for key, idxs in sorted(by_driver.items(), key=lambda kv: (kv[0] != default_key, kv[0])):
        version, sidecars = key
        default = key == default_key
        common = set(settings[idxs[0]].selector) if idxs else set()
        for i in idxs[1:]:
            common &= set(settings[i].selector)
        selector = tuple(sorted(set(extra) | (set() if default and not exclusive else common)))
        name = f"driver-{version}" + ("" if sidecars == cluster else "-" + ("-".join(sidecars.tokens) or "nosidecars"))
        out.append(DriverGroup(DEFAULT_CR if default else name, version, default,
                               tuple(settings[i].pool for i in idxs), tuple(idxs), selector, sidecars))
    return out


def _release_images(plan: StackPlan) -> chartmap.ReleaseImages:
    """The images the plan resolved (release defaults, version overrides) in the table's shape."""
    base = chartmap.release_images(plan.operator_version, plan.release)
    images = dict(base.images)
    images.update({k: (img.path, img.tag) for k, img in plan.images})
    return chartmap.ReleaseImages(base.operator_version, base.registry, images, base.extras)


def chart_values(spec, plan: StackPlan, cat, groups: list[DriverGroup]) -> dict:
    """NVIDIA's chart values: every row of the mapping table (plan/chartmap.py), then its derived rows from the
    resolved plan (driver versions and CRs, MIG strategy, per-pool configs, NFD, sidecar images)."""
    op = spec.delivery.operator
    registry = plan.values["imageRegistry"]
    rel = _release_images(plan)
    settings = spec.model_dump(mode="json")
    settings["images"]["registry"] = registry
    settings["hostPaths"]["driverInstallDir"] = plan.driver_root      # the distribution's when the profile names none
    v = chartmap.profile_to_values(settings, rel)
    pc = plan.pool_configs
    # derived rows
    v.setdefault("nfd", {})["enabled"] = plan.nfd.mode == "deploy"     # beside the table's nodefeaturerules
    # always a strategy: for an empty one NVIDIA's template still writes `mig:`, a null spec.mig the CRD refuses
    # (and omitted, the chart's default is single). Pools that disagree: the plan's mixed, which on the GPUs of
    # `none` pools (MIG disabled) exposes whole GPUs as nvidia.com/gpu as none does; each pool's device-plugin
    # config carries its own flags.migStrategy as well
    v["mig"] = {"strategy": plan.mig_strategy}
    crd = uses_driver_crd(spec, groups)
    d = v["driver"]
    d["enabled"] = bool(groups)
    d["version"] = op.driverDigest or (groups[0].version if groups else plan.image("driver").tag.split("-")[0])
    d["nvidiaDriverCRD"] = {"enabled": crd, "deployDefaultCR": crd and any(g.default for g in groups)}
    default_selector = next((g.node_selector for g in groups if g.default), ())
    if crd and default_selector and cat.release(spec.release).nvidiaDriverNodes == "exclusive":
        d["nvidiaDriverCRD"]["nodeSelector"] = dict(default_selector)      # the chart's default CR: its pools'
    # the ConfigMap names and the default config come from the table's rows (the profile's
    # delivery.operator.*Config, gpuop's names when omitted); their content from the plan
    # delivery.operator.*Config, gpuop's names when omitted); their content from the plan. A name without
    # content of gpuop's (no pool needs a config) is a ConfigMap the user manages: the operator reads it as named
    plugin_cfg = v["devicePlugin"].pop("config", {})
    if pc.plugin_configs:
        v["devicePlugin"]["config"] = {"create": True, "name": plugin_cfg.get("name", chartmap.PLUGIN_CONFIG_MAP),
                                       "default": plugin_cfg.get("default", "default"),
                                       "data": {k: text for k, text in pc.plugin_configs}}
    elif plugin_cfg.get("name"):
        v["devicePlugin"]["config"] = {"name": plugin_cfg["name"], "default": plugin_cfg.get("default", "default")}
    mig_cfg = v["migManager"].pop("config", {})
    mig_name = mig_cfg.get("name", chartmap.MIG_CONFIG_MAP)
    v["migManager"]["config"] = ({"create": True, "name": mig_name, "default": "all-disabled",
                                  "data": {"config.yaml": pc.mig_parted}} if pc.mig_manager else
                                 # migManager.config.default: CRD default (drift)
                                 {"default": "all-disabled", **({"name": mig_cfg["name"]} if "name" in mig_cfg else {})})
    sm = plan.dcgm_exporter.service_monitor if plan.dcgm_exporter else None
    v["dcgmExporter"].setdefault("serviceMonitor", {})["enabled"] = sm is not None
    if sm is None:
        v["dcgmExporter"]["serviceMonitor"] = {"enabled": False}
    if not spec.driver.upgradePolicy.autoUpgrade:
        d["manager"]["env"] = manager_env(plan)
    for key, image in sidecar_images(registry, plan.release).items():
        v.setdefault(key, {}).update(image)
    v["operator"]["repository"] = rel.repository("validator", registry)     # the operator's own image
    nfd_image = nfd_repository(spec, plan, rel.registry)
    if nfd_image and not chartmap.get_path(v, "node-feature-discovery.image.repository"):
        v.setdefault("node-feature-discovery", {}).setdefault("image", {})["repository"] = nfd_image
    if plan.values["imagePullSecrets"]:
        v["operator"]["imagePullSecrets"] = [s["name"] for s in plan.values["imagePullSecrets"]]
    return v


RUNTIME_ENV_DISTRIBUTIONS = chartmap.RUNTIME_ENV_DISTRIBUTIONS


def nfd_repository(spec, plan: StackPlan, release_registry: str) -> str | None:
    """The NFD subchart's image under spec.images.registry, as gpuop's stack runs NFD (plan.nfd: the mirror, then
    NFD's own path): an air-gapped cluster reaches no registry.k8s.io. None: no mirror (none, or the release's own
    registry, which serves no NFD image), or NFD not deployed (the subchart's own image);
    delivery.operator.nfdValues image.repository, where written, wins."""
    mirror = spec.images.registry
    if mirror in (None, "", release_registry) or plan.nfd.mode != "deploy" or plan.nfd.image is None:
        return None
    return f"{plan.nfd.image_registry}/{plan.nfd.image.path}"


def manager_env(plan: StackPlan) -> list[dict]:
    """Without the operator's upgrade controller (autoUpgrade: false) the k8s-driver-manager drains by itself;
    v26.7 gives it its drain settings only through driver.manager.env (the ClusterPolicy's upgradePolicy reaches
    the upgrade controller alone), so they go there, as gpuop's stack sets them on the same container."""
    u = plan.upgrade
    flag = {True: "true", False: "false"}
    return [{"name": "ENABLE_AUTO_DRAIN", "value": flag[u.drain]},
            {"name": "DRAIN_USE_FORCE", "value": flag[u.force]},
            {"name": "DRAIN_POD_SELECTOR_LABEL", "value": u.pod_selector},
            {"name": "DRAIN_TIMEOUT_SECONDS", "value": f"{u.timeout_seconds}s"},
            {"name": "DRAIN_DELETE_EMPTYDIR_DATA", "value": flag[u.delete_empty_dir]}]


def sidecar_images(registry: str, release: str) -> dict[str, dict]:
    """The GDS / GDRCopy images an NVIDIADriver CR names (repository, image, version): the operator reads them
    from the CR only (api/nvidia/v1alpha1 GPUDirectStorageSpec.GetImagePath: no operator-env fallback), as
    the chart's default CR renders them from its gds / gdrcopy values."""
    extras = distributions.driver_extras().get(release)
    if extras is None:
        return {}
    out = {}
    for key in ("gds", "gdrcopy"):
        side = getattr(extras, key)
        head, _, name = side.image.rpartition("/")
        out[key] = {"repository": f"{registry}/{head}" if head else registry, "image": name, "version": side.version}
    return out


def nvidia_drivers(values: dict, groups: list[DriverGroup], spec, images: dict | None = None,
                   upgrade_policy: bool = True) -> list[dict]:
    """The non-default NVIDIADriver CRs (the default one comes from the chart or, with OLM, from outputs);
    `upgrade_policy`: whether the operator's NVIDIADriver CRD has `spec.upgradePolicy` (v26.7 on)."""
    if not values["driver"]["nvidiaDriverCRD"]["enabled"]:
        return []
    out = []
    for g in groups:
        cr = driver_spec(values, g, images or {})
        if not upgrade_policy:
            # the older CRD has no such field: the API server would prune it without a word, so it is not written
            # (those operators roll every driver by the ClusterPolicy's driver.upgradePolicy)
            del cr["upgradePolicy"]
        out.append({"name": g.name, "spec": cr})
    return out


def driver_spec(values: dict, g: DriverGroup, images: dict | None = None) -> dict:
    """An NVIDIADriver spec from the chart values, as the chart's nvidiadriver.yaml renders the default CR."""
    d = values["driver"]
    up = d["upgradePolicy"]
    spec = {"default": g.default, "driverType": d["nvidiaDriverCRD"].get("driverType") or "gpu", "repository": d["repository"], "image": d["image"],
            "version": g.version if not g.default else d["version"], "kernelModuleType": d["kernelModuleType"],
            "usePrecompiled": d["usePrecompiled"], "imagePullPolicy": d["imagePullPolicy"],
            "upgradePolicy": {"autoUpgrade": up["autoUpgrade"], "maxParallelUpgrades": up["maxParallelUpgrades"],
                              "maxUnavailable": "25%", "waitForCompletion": {"timeoutSeconds": 0},
                              "podDeletion": dict(up["gpuPodDeletion"]), "drain": dict(up["drain"])},
            "tolerations": values["daemonsets"]["tolerations"],
            "priorityClassName": values["daemonsets"]["priorityClassName"]}
    if not spec["upgradePolicy"]["drain"]["podSelector"]:
        del spec["upgradePolicy"]["drain"]["podSelector"]
    if d.get("imagePullSecrets"):
        spec["imagePullSecrets"] = d["imagePullSecrets"]
    lic = d.get("licensingConfig") or {}
    if lic.get("secretName"):            # as the chart's nvidiadriver.yaml: the Secret, else the ConfigMap as `name`
        spec["licensingConfig"] = {"secretName": lic["secretName"], "nlsEnabled": lic.get("nlsEnabled", True)}
    elif lic.get("configMapName"):
        spec["licensingConfig"] = {"name": lic["configMapName"], "nlsEnabled": lic.get("nlsEnabled", True)}
    if d.get("manager"):                 # the chart's `manager: toYaml .Values.driver.manager` (the mirror)
        spec["manager"] = dict(d["manager"])
    if d.get("resources"):
        spec["resources"] = d["resources"]
    if g.node_selector:
        spec["nodeSelector"] = dict(g.node_selector)
    if g.sidecars.rdma:                  # the CRD's rdma (GPUDirectRDMA): the pool's own setting
        spec["rdma"] = {"enabled": True, "useHostMofed": g.sidecars.host_mofed}
    for key in ("gds", "gdrcopy"):
        if getattr(g.sidecars, key):
            spec[key] = {"enabled": True, **(images or {}).get(key, {})}
    return spec


def node_rule(plan: StackPlan) -> dict | None:
    """gpuop's NodeFeatureRule for the per-pool nvidia.com/mig.config and device-plugin.config labels (the
    operator labels nodes with mig.config=all-disabled only; per-pool values are gpuop's job)."""
    rules = []
    for r in plan.pool_configs.nfd_rules:
        rules.append({"name": f"gpuop.pool.{r.gpu}", "labels": dict(r.labels), "matchFeatures": [
            {"feature": "pci.device", "matchExpressions": {
                "vendor": {"op": "In", "value": [plan.pci_vendor]},
                "device": {"op": "In", "value": list(r.device_ids)},
                "class": {"op": "In", "value": list(plan.pci_classes)}}}]})
    return {"rules": rules} if rules else None


def build(spec, plan: StackPlan, cat) -> OperatorPlan | None:
    if spec.delivery.mode != "operator":
        return None
    op = spec.delivery.operator
    ocat = operator_catalog.load()
    version = op.version or plan.operator_version
    entry = ocat.get(version)
    install = op.install or DEFAULT_INSTALL[plan.platform]
    groups = driver_groups(spec, cat)
    values = chart_values(spec, plan, cat, groups)
    drivers = nvidia_drivers(values, groups, spec, sidecar_images(plan.values["imageRegistry"], plan.release),
                             upgrade_policy=entry is None or "nvidiaDriverUpgradePolicy" in entry.settings)
    return OperatorPlan(
        version=version, install=install, namespace=plan.namespace,
        chart_repository=op.chartRepository or ocat.helm.repository, chart=ocat.helm.chart,
        olm_package=ocat.olm.package, olm_channel=entry.channel if entry else "",
        olm_csv=entry.csv if entry else "", olm_source=ocat.olm.source,
        olm_source_namespace=ocat.olm.sourceNamespace, install_plan_approval=op.installPlanApproval,
        values_json=_canon(values), drivers_json=_canon(drivers), node_rule_json=_canon(node_rule(plan)))
