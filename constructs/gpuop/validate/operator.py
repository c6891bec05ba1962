"""The GPU Operator's run-time rules, checked at compile time for `spec.delivery.mode: operator`.

Rules (validate/rules.py) over the typed profile, for operator mode only (`applies`); each message names the
upstream source of the rule, because the operator itself only reports these as a "not ready" state long
after the merge:

- overlapping NVIDIADriver selectors -- NVIDIA/gpu-operator controllers/nvidiadriver_controller.go refuses
  NVIDIADriver CRs whose nodeSelectors select the same node ("conflicting" CRs stay not ready);
- settings the operator has no field for, refused instead of dropped: spec.daemonsets.nodeSelector /
  nodeAffinity (the ClusterPolicy's spec.daemonsets has neither: NVIDIA's operands would also run on the nodes
  the profile excludes), upgradePolicy.gpuPodDeletion: false (fixed in the driver asset), a
  nodeStatusExporter ServiceMonitor (the operator writes its own), and `NOT_CARRIED` (containerdMajor, the
  digest lock, spec.driver's sidecars, toolkit args), each with its reason; what the chart cannot express is
  listed by plan/chartmap.py UNEXPRESSED;
- GDS / GDRCopy with precompiled drivers, and a driver digest with precompiled drivers -- NOTES.md §1
  ("Precompiled ... Not with GDS, GDRCopy or DTK"; the precompiled tag `<branch>-<kernel>-<os>` is
  computed per kernel, object_controls.go resolveDriverTag, so one digest cannot name it); GDS without the
  open kernel modules (transformGDSContainer). Each at spec.delivery.operator.<key> and at a pool's own
  spec.nodePools[i].driver.<key> (the pool's NVIDIADriver CR carries it: gds, gdrcopy, rdma of the
  NVIDIADriver CRD);
- a pool's sidecars on a pool without a driver from the operator (no CR to carry them), and pools with
  different sidecars under nvidiaDriverCRD: false (the ClusterPolicy holds one setting for all nodes);
- ClusterPolicy with GPUCluster -- the chart's templates/validations.yaml `fail`;
- device plugin and DRA on one plane -- NVIDIA's DRA driver for GPUs: its gpus kubelet plugin and the
  device plugin must not advertise the same GPUs; the operator's node labeler sets
  nvidia.com/gpu.deploy.device-plugin=true wherever it is missing, so a DRA pool needs gpuop's false label;
- settings the chosen operator version does not have -- the operator catalog (catalog/data/operator.yaml);
- MIG layouts the GPU cannot hold -- validate/mig.py runs for every profile, stack or operator mode alike.
"""

from __future__ import annotations

from gpuop.catalog import distributions as dist_catalog
from gpuop.catalog import dra as dra_catalog
from gpuop.catalog import versions
from gpuop.catalog import operator as operator_catalog
from gpuop.kube.components import COMPANION_OBJECT
from gpuop.kube.validation import invalid, too_long
from gpuop.plan import pools as plan_pools
from gpuop.plan.drivers import full_version, pools_overlap
from gpuop.plan.operator import (DEFAULT_INSTALL, RUNTIME_ENV_DISTRIBUTIONS, driver_groups, operator_sidecars,
                                 uses_driver_crd)
from gpuop.validate.distribution import gds_open_modules, no_driver_reason, sidecar_levels
from gpuop.validate.rules import Context, rule

OP = ("spec", "delivery", "operator")


def _fmt(sel) -> str:
    return "{" + ", ".join(f"{k}={v}" for k, v in sel) + "}" if sel else "{} (every GPU node)"


def _groups(ctx: Context):
    """The NVIDIADriver CRs the profile's pools make (plan/operator.py driver_groups)."""
    return ctx.derived("driver-groups", lambda: driver_groups(ctx.spec, ctx.cat))


@rule("nvidiadriver-selectors-overlap", source="NVIDIA/gpu-operator controllers/nvidiadriver_controller.go "
      "(conflicting NVIDIADriver CRs stay not ready)")
def check_overlapping_driver_selectors(ctx: Context) -> list:
    """NVIDIADriver CRs whose nodeSelectors can select the same node."""
    at, spec, groups = ctx.at, ctx.spec, _groups(ctx)
    if not uses_driver_crd(spec, groups):
        return []
    out = []
    pools = spec.nodePools
    exclusive = ctx.cat.release(spec.release).nvidiaDriverNodes == "exclusive"
    for g in groups:
        if g.default and not exclusive:
            continue                     # the default CR is the fallback (v26.7 assigns owners): it never competes
        for other in groups:
            if other is g:
                continue
            for j in other.pool_indexes:
                if pools_overlap(g.node_selector, tuple(sorted(pools[j].nodeSelector.items()))):
                    where = (("spec", "nodePools", g.pool_indexes[0], "nodeSelector") if g.pool_indexes
                             else ("spec", "release"))
                    out.append(at(where,
                                  f"NVIDIADriver {g.name!r} (driver {g.version}, pools {', '.join(g.pools)}) selects "
                                  f"{_fmt(g.node_selector)}, which can match the nodes of pool {pools[j].name!r} "
                                  f"(driver {other.version}); the operator refuses NVIDIADriver CRs whose "
                                  "nodeSelectors overlap (NVIDIA/gpu-operator controllers/nvidiadriver_controller.go"
                                  + ("; before 26.7 the default CR is no fallback: it selects its own pools' nodes, "
                                     "internal/validator/validator.go" if exclusive else "") + "); "
                                  "give the pools of each driver a label the others do not have"))
                    break
    return out


@rule("operator-operand-placement", source="NVIDIA/gpu-operator nvidia.com_clusterpolicies.yaml spec.daemonsets "
      "(labels, annotations, tolerations, priorityClassName, updateStrategy only)")
def check_operand_placement(ctx: Context) -> list:
    """spec.daemonsets.nodeSelector / nodeAffinity in operator mode.

    The ClusterPolicy (v26.7) has no nodeSelector or affinity for its operands (spec.daemonsets has labels,
    annotations, tolerations, priorityClassName, update strategy only: nvidia.com_clusterpolicies.yaml): the
    operator runs them on every node it labels nvidia.com/gpu.present=true. Dropping the profile's placement
    would put NVIDIA's operands, the driver included, on the nodes the profile excludes."""
    at, spec = ctx.at, ctx.spec
    out = []
    for key, written in (("nodeSelector", spec.daemonsets.nodeSelector), ("nodeAffinity", spec.daemonsets.nodeAffinity)):
        if written:
            out.append(at(("spec", "daemonsets", key),
                          f"spec.daemonsets.{key} cannot be passed to NVIDIA's operator: the ClusterPolicy has no "
                          "nodeSelector or affinity for its operands (nvidia.com_clusterpolicies.yaml "
                          "spec.daemonsets), it runs them on every GPU node; keep the operands off nodes with the "
                          "label nvidia.com/gpu.deploy.operands=false on them, then remove spec.daemonsets."
                          f"{key}, or use spec.delivery.mode: stack"))
    return out


OPERATOR_DISTRIBUTIONS = ("generic", "eks", "aks", *RUNTIME_ENV_DISTRIBUTIONS)


# Profile settings gpuop does not pass to NVIDIA's operator (what the ClusterPolicy has -- host paths, operand
# labels and annotations, env / args of the driver, toolkit and device plugin, the proxy as their env, the driver's
# repo / cert ConfigMaps -- the rows of plan/chartmap.py write), each with the reason and what to do instead.
NOT_CARRIED = (
    (("spec", "platform", "containerdMajor"), "the toolkit env gpuop passes for k3s / RKE2 / MicroK8s names the "
     "containerd config of the distribution's default major (plan/chartmap.py distribution_env); remove it"),
    (("spec", "images", "digestLock"), "NVIDIA's operator builds the image references itself (the driver's tag per "
     "node OS and kernel), so a lock of gpuop's references would not pin what it pulls; pin the driver with "
     "spec.delivery.operator.driverDigest"),
    (("spec", "driver", "rdma"), "the operator's GPUDirect RDMA is per NVIDIADriver CR: set it per pool "
     "(spec.nodePools[].driver.rdma)"),
    (("spec", "driver", "gds"), "the ClusterPolicy's GDS is spec.delivery.operator.gds (per pool: "
     "spec.nodePools[].driver.gds)"),
    (("spec", "driver", "gdrcopy"), "the ClusterPolicy's GDRCopy is spec.delivery.operator.gdrcopy (per pool: "
     "spec.nodePools[].driver.gdrcopy)"),
    (("spec", "toolkit", "args"), "the ClusterPolicy has toolkit.args, but v26.7's TransformToolkit never applies "
     "them (controllers/object_controls.go: env only), so the toolkit would run its entrypoint's; remove it"),
)

@rule("operator-not-carried", source="NVIDIA/gpu-operator v26.7.0 ClusterPolicy / NVIDIADriver CRDs and "
      "controllers/object_controls.go: settings without a field the operator applies (NOT_CARRIED)")
def check_not_carried(ctx: Context) -> list:
    """A profile setting gpuop cannot pass to NVIDIA's operator, each with the reason and what to do instead."""
    return [ctx.at(path, f"{'.'.join(path)} cannot be passed to NVIDIA's operator: {why}, or use spec.delivery.mode: "
                   "stack") for path, why in NOT_CARRIED if _written(ctx.loaded, path)]


def _written(loaded, path: tuple) -> bool:
    node = loaded.data
    for part in path:
        if not isinstance(node, dict) or part not in node:
            return False
        node = node[part]
    return True


@rule("operator-kubelet-root-dir", source="NVIDIA/gpu-operator v26.7.0 controllers/object_controls.go "
      "TransformDCGMExporter (the only operand that reads hostPaths.kubeletRootDir)")
def check_kubelet_root_dir(ctx: Context) -> list:
    """A kubeletRootDir other than /var/lib/kubelet: v26.7 moves only the DCGM exporter's pod-resources there, so
    its device plugin keeps registering under /var/lib/kubelet/device-plugins, where that kubelet never looks."""
    root = ctx.spec.hostPaths.kubeletRootDir
    if root == "/var/lib/kubelet":
        return []
    return [ctx.at(("spec", "hostPaths", "kubeletRootDir"),
                   f"kubeletRootDir {root} cannot be honoured by NVIDIA's operator: v26.7 moves only the DCGM "
                   "exporter's pod-resources volume there (TransformDCGMExporter); its device plugin would still "
                   "register under /var/lib/kubelet/device-plugins, which this kubelet does not watch, and no GPU "
                   "would be advertised; use spec.delivery.mode: stack")]


@rule("operator-distribution", source="NVIDIA/gpu-operator chart values (hostPaths.driverInstallDir, "
      "toolkit.installDir, toolkit env RUNTIME_DROP_IN_CONFIG); catalog/data/distributions.yaml")
def check_distribution_fit(ctx: Context) -> list:
    """A distribution (GKE, k0s) whose paths gpuop does not pass to NVIDIA's operator.

    Managed images that bring the driver and the toolkit (EKS, AKS; second-copy makes the profile turn both
    off) need nothing but driver.enabled / toolkit.enabled false, which the values carry; k3s, RKE2 and MicroK8s
    get their containerd's paths through toolkit.env (plan/chartmap.py distribution_env). k0s (its containerd.d
    drop-in) and GKE (Google's driver root) need values gpuop does not write in operator mode: refused rather
    than deployed with the wrong paths."""
    at, d = ctx.at, ctx.spec.platform.distribution
    if d is None or d in OPERATOR_DISTRIBUTIONS:
        return []
    what = ("Google's driver under /home/kubernetes/bin/nvidia (hostPaths.driverInstallDir, toolkit.installDir)"
            if d == "gke" else "its containerd's runtime config in a containerd.d drop-in (the toolkit's "
            "RUNTIME_DROP_IN_CONFIG)")
    return [at(("spec", "platform", "distribution"),
               f"{d} keeps {what}, which gpuop does not pass to NVIDIA's operator; allowed in operator mode: "
               f"{', '.join(OPERATOR_DISTRIBUTIONS)} (or use spec.delivery.mode: stack)")]


@rule("operator-gpu-pod-deletion", source="NVIDIA/gpu-operator assets/state-driver/0500_daemonset.yaml "
      "(ENABLE_GPU_POD_EVICTION=true)")
def check_gpu_pod_deletion_off(ctx: Context) -> list:
    """upgradePolicy.gpuPodDeletion: false in operator mode.

    ENABLE_GPU_POD_EVICTION is fixed to true in the operator's driver asset (assets/state-driver
    0500_daemonset.yaml k8s-driver-manager env); neither the ClusterPolicy nor the NVIDIADriver CRD has a
    setting for it."""
    at, spec = ctx.at, ctx.spec
    if spec.driver.upgradePolicy.gpuPodDeletion:
        return []
    return [at(("spec", "driver", "upgradePolicy", "gpuPodDeletion"),
               "gpuPodDeletion: false cannot be passed to NVIDIA's operator: its driver manager always deletes GPU "
               "pods before a driver reload (ENABLE_GPU_POD_EVICTION=true in assets/state-driver/0500_daemonset.yaml, "
               "no ClusterPolicy or NVIDIADriver field); remove it or use spec.delivery.mode: stack")]


@rule("operator-node-status-monitor", source="NVIDIA/gpu-operator "
      "assets/state-node-status-exporter/0600_service_monitor.yaml")
def check_node_status_exporter_monitor(ctx: Context) -> list:
    """A node status exporter ServiceMonitor in operator mode.

    The operator creates the node status exporter's ServiceMonitor itself whenever the Prometheus Operator's
    CRD exists (assets/state-node-status-exporter/0600_service_monitor.yaml); the chart has no setting for it."""
    at, data = ctx.at, ctx.data
    node = data.get("spec", {}) if isinstance(data, dict) else {}
    written = isinstance(node.get("nodeStatusExporter"), dict) and "serviceMonitor" in node["nodeStatusExporter"]
    if not written:
        return []
    return [at(("spec", "nodeStatusExporter", "serviceMonitor"),
               "spec.nodeStatusExporter.serviceMonitor cannot be passed to NVIDIA's operator: it creates that "
               "ServiceMonitor itself, with its own settings, whenever the Prometheus Operator's CRD exists "
               "(assets/state-node-status-exporter/0600_service_monitor.yaml; the chart has no value for it); "
               "remove it or use spec.delivery.mode: stack")]


def _sidecar_levels(spec) -> list[tuple[tuple, list[str], object]]:
    """(where, sidecars turned on there, pool or None): spec.delivery.operator's gds / gdrcopy (the ClusterPolicy
    and the default NVIDIADriver) and each pool's own driver settings (its NVIDIADriver CR)."""
    op = spec.delivery.operator
    out = [(OP, [k for k in ("gds", "gdrcopy") if getattr(op, k)], None)]
    return out + [lvl for lvl in sidecar_levels(spec) if lvl[2] is not None]


def _driven_levels(spec) -> list[tuple[tuple, list[str], object]]:
    """The levels whose sidecars have a driver to run beside (pool_sidecars_without_driver reports the rest)."""
    return [lvl for lvl in _sidecar_levels(spec) if lvl[2] is None or no_driver_reason(spec, lvl[2]) is None]


@rule("operator-sidecar-precompiled", source="GPU Operator precompiled drivers docs ('Not with GDS, GDRCopy or DTK')")
def check_gds_with_precompiled(ctx: Context) -> list:
    """GPUDirect Storage or GDRCopy with precompiled drivers in operator mode."""
    at, spec = ctx.at, ctx.spec
    out = []
    if not spec.driver.precompiled:
        return out
    for where, wanted, _ in _driven_levels(spec):
        for key, name in (("gds", "GPUDirect Storage"), ("gdrcopy", "GDRCopy")):
            if key in wanted:
                out.append(at(where + (key,), f"{name} cannot run with precompiled drivers: the operator has no "
                              f"precompiled {key} sidecar (NOTES.md §1 'Precompiled ... Not with GDS, GDRCopy "
                              "or DTK'); turn off spec.driver.precompiled or " + key))
    return out


@rule("operator-gds-open-modules", source="NVIDIA/gpu-operator object_controls.go transformGDSContainer")
def check_gds_without_open_modules(ctx: Context) -> list:
    """GPUDirect Storage without the open kernel modules in operator mode.

    transformGDSContainer refuses GDS beside the proprietary modules; with precompiled drivers
    gds_with_precompiled already says GDS cannot run at all."""
    at, spec = ctx.at, ctx.spec
    if spec.driver.precompiled:
        return []
    extras = dist_catalog.driver_extras().get(ctx.release.name)
    return [i for where, wanted, _ in _driven_levels(spec) if "gds" in wanted
            for i in gds_open_modules(at, where, spec, extras)]


@rule("operator-pool-sidecars-driver", source="NVIDIA/gpu-operator NVIDIADriver CRD (gds, gdrcopy, rdma run "
      "beside the driver it installs)")
def check_pool_sidecars_without_driver(ctx: Context) -> list:
    """A pool's sidecars on a pool without a driver from the operator: no NVIDIADriver CR carries them."""
    at, spec = ctx.at, ctx.spec
    out = []
    for where, wanted, pool in _sidecar_levels(spec):
        reason = no_driver_reason(spec, pool) if pool is not None and wanted else None
        if reason is not None:
            out += [at(where + (f,), f"{f} runs beside the driver the operator installs, and {reason}")
                    for f in wanted]
    return out


@rule("operator-pool-sidecars-crd", source="NVIDIA/gpu-operator nvidia.com_clusterpolicies.yaml spec.driver "
      "(one setting for every node)")
def check_pool_sidecars_without_driver_crd(ctx: Context) -> list:
    """Pools with different sidecars under nvidiaDriverCRD: false.

    Pools with other sidecars than the cluster's need NVIDIADriver CRs of their own: the ClusterPolicy's
    driver section holds one setting for every node."""
    at, spec, groups = ctx.at, ctx.spec, _groups(ctx)
    cluster = operator_sidecars(spec)
    if uses_driver_crd(spec, groups) or all(g.sidecars == cluster for g in groups):
        return []
    return [at(OP + ("nvidiaDriverCRD",), "pools have different RDMA / GDS / GDRCopy settings "
               f"({', '.join(g.describe() for g in groups)}), which only NVIDIADriver CRs carry per pool (the "
               "ClusterPolicy's driver section holds one setting for every node); remove nvidiaDriverCRD: false "
               "or give every pool the same settings")]


@rule("operator-digest-precompiled", source="NVIDIA/gpu-operator object_controls.go resolveDriverTag "
      "(<branch>-<kernel>-<os> per kernel)")
def check_digest_with_precompiled(ctx: Context) -> list:
    """A driver image digest with precompiled drivers."""
    at, spec = ctx.at, ctx.spec
    if spec.driver.precompiled and spec.delivery.operator.driverDigest:
        return [at(OP + ("driverDigest",), "a driver image digest cannot be used with precompiled drivers: the "
                   "operator computes one tag per kernel (<branch>-<kernel>-<os>, object_controls.go "
                   "resolveDriverTag), which one digest cannot name; remove driverDigest or spec.driver.precompiled")]
    return []


@rule("operator-one-cr", source="NVIDIA/gpu-operator chart templates/validations.yaml")
def check_cluster_policy_with_gpu_cluster(ctx: Context) -> list:
    """A ClusterPolicy and a GPUCluster deployed together."""
    at, op = ctx.at, ctx.spec.delivery.operator
    if op.clusterPolicy and op.gpuCluster:
        return [at(OP + ("gpuCluster",), "clusterPolicy.deployCR and gpuCluster.deployCR cannot both be true; "
                   "only one CR can exist (NVIDIA's chart templates/validations.yaml); set "
                   "spec.delivery.operator.clusterPolicy: false to deploy the GPUCluster alone")]
    return []


@rule("operator-gpu-cluster", source="catalog/data/dra.yaml gpuCluster (GPU Operator v26.7.0 release notes: "
      "the GPUCluster workflow's prerequisites); catalog/data/operator.yaml (the operators that have it)")
def check_gpu_cluster_prerequisites(ctx: Context) -> list:
    """A GPUCluster (NVIDIA's operator deploying the DRA driver) on a stack release whose operator lacks it, below its
    Kubernetes or driver floor, on a runtime without CDI, or beside gpuop's own DRA driver chart."""
    spec = ctx.spec
    if not spec.delivery.operator.gpuCluster:
        return []
    floors = dra_catalog.load().gpuCluster
    why = "the GPUCluster (spec.delivery.operator.gpuCluster) needs"
    out = []
    release = ctx.release
    entry = operator_catalog.load().get(release.operatorVersion)
    # a pinned version without it is operator-version-settings'; unpinned, the stack release's operator runs
    if spec.delivery.operator.version is None and entry is not None and "gpuCluster" not in entry.settings:
        out.append(ctx.at(OP + ("gpuCluster",), f"{why} a GPU Operator that has it (catalog/data/operator.yaml); "
                          f"stack release {release.name} (spec.release) runs GPU Operator {release.operatorVersion}, "
                          "whose chart has no GPUCluster CRD; use a newer spec.release or turn it off"))
    p = spec.platform
    kube = ctx.release.matrix.openshiftKubernetes.get(p.version) if p.type == "openshift" else p.version
    if kube is not None and versions.older(kube, floors.kubernetesMin):
        out.append(ctx.at(("spec", "platform", "version"), f"{why} Kubernetes {floors.kubernetesMin} or later; this "
                          f"cluster is {kube} ({floors.source})"))
    if ctx.defaults.runtime not in floors.cdiRuntimes:
        out.append(ctx.at(OP + ("gpuCluster",), f"{why} a CDI container runtime ({', '.join(floors.cdiRuntimes)}); "
                          f"this cluster runs {ctx.defaults.runtime} ({floors.source})"))
    default = ctx.release.components["driver"].version
    for i, d in enumerate(ctx.defaults.pools):
        if not d.driver:
            continue                                          # the host's driver: its version is not the profile's
        branch = full_version(d.driver_version, default, ctx.cat).split(".")[0]
        if versions.older(branch, floors.driverMin):
            where = ("spec", "nodePools", i, "driver", "version") if d.driver_version_own else ("spec", "driver", "version")
            issue = ctx.at(where, f"{why} GPU driver {floors.driverMin} or later; pool {d.name!r} gets branch "
                           f"{branch} ({floors.source})")
            if issue not in out:
                out.append(issue)
    for i, pool in enumerate(spec.nodePools):
        if plan_pools.dra_rules.is_dra(pool):
            out.append(ctx.at(("spec", "nodePools", i, "allocation"), "the GPUCluster's DRA driver (NVIDIA's "
                              "operator runs it on every GPU node) already allocates this pool's GPUs, and "
                              "allocation: dra makes gpuop deliver its own DRA driver chart beside it: two "
                              "gpu.nvidia.com drivers would publish the same GPUs; remove allocation: dra, or turn "
                              "spec.delivery.operator.gpuCluster off"))
    return out


@rule("operator-mig-strategy", source="NVIDIA/gpu-operator nvidia.com_clusterpolicies.yaml spec.mig.strategy (one "
      "per cluster, set as MIG_STRATEGY on the device plugin and GFD); NVIDIA/k8s-device-plugin (an env variable "
      "overrides the config file's flags.migStrategy)")
def check_one_mig_strategy(ctx: Context) -> list:
    """A `single` pool beside pools of other MIG strategies: the ClusterPolicy's one strategy is then mixed, set
    as MIG_STRATEGY over each pool's config, so the pool's MIG devices would be advertised per profile
    (nvidia.com/mig-<profile>) and not as nvidia.com/gpu as its plan and `gpuop capacity` say."""
    pools = [p for p in ctx.spec.nodePools if not plan_pools.dra_rules.is_dra(p)]
    if plan_pools.cluster_strategy(pools) is not None:
        return []
    return [ctx.at(("spec", "nodePools", i, "mig", "strategy"), invalid("single", (
                "NVIDIA's operator has one MIG strategy for the cluster (ClusterPolicy spec.mig.strategy, set as "
                "MIG_STRATEGY on the device plugin and GFD over each pool's config); beside pools of other "
                "strategies it is mixed, which advertises this pool's MIG devices as nvidia.com/mig-<profile>, not "
                "nvidia.com/gpu: give every MIG pool strategy mixed, or compile the cluster in stack mode")))
            for i, p in enumerate(ctx.spec.nodePools)
            if p in pools and plan_pools.pool_strategy(p) == "single"]


@rule("operator-device-plugin-dra", source="NVIDIA DRA driver for GPUs (never beside the device plugin on one "
      "node); NVIDIA/gpu-operator node labeler (nvidia.com/gpu.deploy.device-plugin)")
def check_device_plugin_and_dra(ctx: Context) -> list:
    """A DRA pool whose nodes gpuop cannot keep the operator's device plugin off.

    The planes are node labels (plan/pools.py): DRA pools get nvidia.com/gpu.deploy.device-plugin=false from
    gpuop's NodeFeatureRule. The operator sets that label to true on every GPU node where it is missing, so a
    DRA pool whose false label gpuop cannot set (NFD cannot tell it from a device-plugin pool) would run both."""
    at, spec, cat = ctx.at, ctx.spec, ctx.cat
    if not spec.devicePlugin.enabled or not any(getattr(p, "allocation", "devicePlugin") == "dra"
                                                for p in spec.nodePools):
        return []
    pc = ctx.derived("pool-configs", lambda: plan_pools.build(spec, cat))      # shared with validate/pools.py
    out = []
    for pl in pc.pools:
        pool = spec.nodePools[pl.index]
        if getattr(pool, "allocation", "devicePlugin") == "dra" and plan_pools.DEVICE_PLUGIN_LABEL in dict(pl.manual):
            out.append(at(("spec", "nodePools", pl.index, "allocation"),
                          f"pool {pool.name!r} uses DRA, but gpuop cannot label its nodes "
                          f"{plan_pools.DEVICE_PLUGIN_LABEL}=false ({pl.why}); the operator labels every GPU node "
                          "without it device-plugin=true, so the device plugin and the DRA kubelet plugin would "
                          "advertise the same GPUs (NVIDIA's DRA driver for GPUs: never both on one node); give the "
                          "DRA pool its own GPU model, or set spec.devicePlugin.enabled: false"))
    return out


def features(spec, groups) -> list[tuple[tuple, str]]:
    """(location, catalog setting name) of every setting the profile uses that not every operator has."""
    op = spec.delivery.operator
    out = []
    if uses_driver_crd(spec, groups):
        out.append((OP + ("nvidiaDriverCRD",), "nvidiaDriverCRD"))
        out.append((("spec", "driver", "upgradePolicy"), "nvidiaDriverUpgradePolicy"))
    for key in ("driverDigest", "gds", "gdrcopy", "gpuCluster"):
        if getattr(op, key):
            out.append((OP + (key,), key))
    for where, wanted, _ in _sidecar_levels(spec)[1:]:      # a pool's GDS / GDRCopy: the same operator settings
        out += [(where + (key,), key) for key in ("gds", "gdrcopy") if key in wanted]
    if spec.driver.precompiled:
        out.append((("spec", "driver", "precompiled"), "precompiled"))
    return out


def chart_features(ctx: Context) -> list[tuple[tuple, str, str]]:
    """(location, catalog setting name, what its absence loses) of what gpuop's values carry that only some
    operator charts render: the ClusterPolicy's DCGM exporter pod-label fields, and `extraObjects` (a chart
    without the template drops them without a word) for the per-pool NVIDIADriver CRs and gpuop's
    NodeFeatureRule (with OLM gpuop applies those itself)."""
    spec = ctx.spec
    dx = spec.dcgmExporter
    out = [(("spec", "dcgmExporter", key), "dcgmExporterPodLabels",
            "its ClusterPolicy's dcgmExporter has no pod-label fields, so the exporter would export no pod labels; "
            "drop it")
           for key, on in (("podLabels", dx.podLabels), ("podUID", dx.podUID),
                           ("podLabelAllowlist", bool(dx.podLabelAllowlist))) if on]
    if (spec.delivery.operator.install or DEFAULT_INSTALL[spec.platform.type]) != "helm":
        return out
    groups = _groups(ctx)
    if uses_driver_crd(spec, groups):
        for g in groups:
            for i in () if g.default else g.pool_indexes:
                where = ("spec", "nodePools", i) + (("driver",) if spec.nodePools[i].driver is not None else ())
                out.append((where, "extraObjects", f"its chart has no extraObjects template, so the NVIDIADriver CR "
                            f"{g.name!r} this pool's driver needs would be dropped and the pool's nodes get no driver; "
                            "give the pool the cluster's driver"))
    pc = ctx.derived("pool-configs", lambda: plan_pools.build(spec, ctx.cat))      # shared with validate/pools.py
    # the operator labels MIG-capable nodes without a MIG config all-disabled itself while its MIG manager runs
    # (controllers/state_manager.go, v25.10.1 L539-546; gpuop's values set migManager.config.default all-disabled)
    own = {(plan_pools.MIG_CONFIG_LABEL, plan_pools.ALL_DISABLED)} if spec.migManager.enabled else set()
    for pl in pc.pools:
        lost = [kv for kv in pl.nfd if kv not in own]
        if lost:
            labels = ", ".join(f"{k}={v}" for k, v in lost)
            out.append((("spec", "nodePools", pl.index), "extraObjects",
                        f"its chart has no extraObjects template, so gpuop's NodeFeatureRule labelling this pool's "
                        f"nodes {labels} would be dropped; set spec.nfd.rules: false and label the pool's nodes "
                        "yourself"))
    return out


@rule("operator-version-settings", source="catalog/data/operator.yaml (the settings of each GPU Operator version)")
def check_version_settings(ctx: Context) -> list:
    """An unknown GPU Operator version, or a setting the chosen version does not have; what only some charts render
    (chart_features) against the stack release's operator version too when none is pinned."""
    at, spec, groups = ctx.at, ctx.spec, _groups(ctx)
    op = spec.delivery.operator
    ocat = operator_catalog.load()
    version = op.version
    if version is not None and ocat.get(version) is None:
        return [at(OP + ("version",), f"{version!r} is not a known GPU Operator version; allowed: "
                   f"{', '.join(o.version for o in ocat.operators)}")]
    out = []
    entry = ocat.get(version) if version is not None else None
    for where, name in features(spec, groups) if entry is not None else ():
        if name not in entry.settings:
            out.append(at(where, f"GPU Operator {version} does not have the setting {name} "
                          "(catalog/data/operator.yaml); use a newer spec.delivery.operator.version or drop it"))
    chart = ocat.get(version or ctx.release.operatorVersion)
    for where, name, loss in chart_features(ctx) if chart is not None else ():
        if name not in chart.settings:
            out.append(at(where, f"GPU Operator {chart.version} does not have the setting {name} "
                          f"(catalog/data/operator.yaml): {loss}, or {_release_with(ctx, name)}"))
    return out


def _release_with(ctx: Context, name: str) -> str:
    """The move that brings a setting: the first newer stack release whose operator has it."""
    ocat, names = operator_catalog.load(), [r.name for r in ctx.cat.releases]
    for r in ctx.cat.releases[names.index(ctx.release.name) + 1:]:
        entry = ocat.get(r.operatorVersion)
        if entry is not None and name in entry.settings:
            return f"move to spec.release {r.name} (GPU Operator {r.operatorVersion} has it)"
    return "move to a newer spec.release"


@rule("operator-version-catalog", source="catalog/data/operator-chart/ (NVIDIA's chart defaults per operator "
      "version) and catalog/data/releases.yaml (each stack release's operatorVersion)")
def check_version_catalog(ctx: Context) -> list:
    """A pinned GPU Operator version gpuop has no chart defaults of, or whose operands are not the stack
    release's: the values would carry another release's operand versions into that version's chart."""
    version = ctx.spec.delivery.operator.version
    ocat = operator_catalog.load()
    if version is None or ocat.get(version) is None:       # unknown versions: check_version_settings
        return []
    known = operator_catalog.compiled_versions()
    release = ctx.release
    supported = ", ".join(f'"{v}"' for v in known)
    if version not in known:
        return [ctx.at(OP + ("version",), f'Unsupported value: "{version}": gpuop has no catalog data (chart '
                       f"defaults, operand versions) for GPU Operator {version}, so its values would carry GPU "
                       f"Operator {release.operatorVersion}'s operand versions (stack release {release.name}) into "
                       f"the {version} chart; supported values: {supported}")]
    if version != release.operatorVersion:
        return [ctx.at(OP + ("version",), f'Unsupported value: "{version}": stack release {release.name} '
                       f"(spec.release) ships the operands of GPU Operator {release.operatorVersion}, not {version}; "
                       f"pin the release that ships {version} or drop spec.delivery.operator.version")]
    return []


@rule("operator-olm", source="Red Hat certified-operators catalog: the GPU Operator bundle's "
      "com.redhat.openshift.versions")
def check_olm_fit(ctx: Context) -> list:
    """install: olm off OpenShift, or for an OpenShift version the operator's bundle is not published for."""
    at, spec, release_operator = ctx.at, ctx.spec, ctx.release.operatorVersion
    op = spec.delivery.operator
    install = op.install or DEFAULT_INSTALL[spec.platform.type]
    if install != "olm":
        return []
    if spec.platform.type != "openshift":
        return [at(OP + ("install",), "install: olm subscribes to Red Hat's certified-operators catalog, which "
                   "only OpenShift serves; use install: helm on Kubernetes")]
    ocat = operator_catalog.load()
    entry = ocat.get(op.version or release_operator)
    if entry is None:
        return []
    if spec.platform.version not in entry.openshift:
        allowed = ", ".join(entry.openshift) or "none known (not in the reference bundle)"
        return [at(("spec", "platform", "version"), f"GPU Operator {entry.version} (OLM channel {entry.channel}) "
                   f"is not published for OpenShift {spec.platform.version} (bundle com.redhat.openshift.versions); "
                   f"allowed: {allowed}")]
    return []


@rule("operator-preinstalled-driver", severity="warning", source="NVIDIA/gpu-operator node labels "
      "(nvidia.com/gpu.deploy.driver=false skips a node)")
def check_preinstalled_driver_label(ctx: Context) -> list:
    """A pool with a preinstalled driver in operator mode: its nodes need the label that keeps the operator's
    driver off."""
    return [ctx.at(("spec", "nodePools", i, "driver", "enabled"),
                   f"pool {p.name!r} has a preinstalled driver: label its nodes nvidia.com/gpu.deploy.driver=false "
                   "(the operator skips nodes with that label), or the operator's driver pods run there too",
                   "warning")
            for i, p in enumerate(ctx.spec.nodePools) if p.driver is not None and p.driver.enabled is False]


LABEL_VALUE = 63      # k8s.io/apimachinery validation.LabelValueMaxLength
COMPANION_NAME_MAX = LABEL_VALUE - sum(len(p) for p in COMPANION_OBJECT)


@rule("operator-companion-name", source="Flux helm-controller (labels every object of a release "
      "helm.toolkit.fluxcd.io/name: <HelmRelease>), Argo CD (app.kubernetes.io/instance: <Application> under label "
      "tracking); k8s.io/apimachinery validation.LabelValueMaxLength (63)")
def check_companion_name(ctx: Context) -> list:
    """A cluster name too long for the companion's HelmRelease / Application `gpuop-<name>-addons`, which the
    engines write as a label value, when some companion object (alerts, dashboards, queues) may be written."""
    spec, name = ctx.spec, ctx.profile.metadata.name
    companion = spec.dashboards.enabled or spec.queues.enabled or (spec.alerts.enabled and spec.alerts.prometheusRule
                                                                   is not False)
    if not companion or len(name) <= COMPANION_NAME_MAX:
        return []
    shown = f"{COMPANION_OBJECT[0]}{name}{COMPANION_OBJECT[1]}"
    return [ctx.at(("metadata", "name"), invalid(name, (
        f"{too_long(COMPANION_NAME_MAX)} in operator mode: gpuop's own objects (alerts, dashboards, queues) are "
        f"delivered beside NVIDIA's operator by the Flux HelmRelease and Argo CD Application \"{shown}\", a name the "
        f"engines write as a label value (at most {LABEL_VALUE} characters); choose a shorter cluster name, or turn "
        "spec.dashboards, spec.queues and spec.alerts.prometheusRule off")))]


def applies(ctx: Context) -> bool:
    # the catalog pass reports an unknown release
    return ctx.spec.delivery.mode == "operator" and ctx.release is not None


RULES = ((check_overlapping_driver_selectors, check_operand_placement, check_distribution_fit,
          check_gpu_pod_deletion_off, check_node_status_exporter_monitor, check_gds_with_precompiled,
          check_gds_without_open_modules, check_pool_sidecars_without_driver, check_pool_sidecars_without_driver_crd,
          check_digest_with_precompiled, check_cluster_policy_with_gpu_cluster, check_gpu_cluster_prerequisites, check_one_mig_strategy, check_device_plugin_and_dra,
          check_version_settings, check_version_catalog, check_olm_fit, check_not_carried, check_kubelet_root_dir,
          check_preinstalled_driver_label, check_companion_name),)
