"""Pool rules: what the device plugin and the MIG manager would refuse in a pool's sharing and MIG
settings, and where a pool's labels must come from its node group.

Refuses, located: sharing without the device plugin, timeSlicing together with mps, MPS on a MIG pool
("sharing using MPS is not supported for MIG devices"), sharing entries for resources the pool does not
advertise; warns when MIG layouts have no MIG manager, and where labels must come from the node group
(plan/pools.py decides which). Sources: ../shared/refs/mig/FACTS.md §2, NVIDIA/k8s-device-plugin
api/config/v1 (replicas >= 2, flags precedence) and cmd/nvidia-device-plugin validateFlags.
"""

from __future__ import annotations

from gpuop.plan.pools import WHERE, _layout_from_name, advertised, build, layout_of
from gpuop.validate.rules import Context, rule


@rule("pool-sharing", source="NVIDIA/k8s-device-plugin api/config/v1 (sharing, replicas) and "
      "cmd/nvidia-device-plugin validateFlags (MPS not with MIG)")
def check_sharing(ctx: Context) -> list:
    """Sharing needs the device plugin; timeSlicing xor mps; no MPS on MIG; only advertised resources."""
    errors: list = []
    at, spec = ctx.at, ctx.spec
    for i, p in enumerate(spec.nodePools):
        s = p.sharing
        if s is None or p.allocation == "dra":      # DRA pools: the driver's opaque config, validate/dra.py
            continue
        where = ("spec", "nodePools", i, "sharing")
        if not spec.devicePlugin.enabled:
            errors.append(at(where, "sharing needs the device plugin (its config does the sharing), but "
                             "spec.devicePlugin.enabled is false"))
            continue
        if s.timeSlicing is not None and s.mps is not None:
            errors.append(at(where, "timeSlicing and mps are exclusive (the device plugin would use mps and "
                             "silently ignore timeSlicing); keep one"))
            continue
        if s.timeSlicing is None and s.mps is None:
            errors.append(at(where, "sharing needs timeSlicing or mps"))
            continue
        if s.mps is not None and layout_of(p):
            errors.append(at(where + ("mps",), "sharing using MPS is not supported for MIG devices "
                             "(k8s-device-plugin), and this pool has a MIG layout; use timeSlicing or drop the layout"))
        ts = s.timeSlicing
        if ts is not None:
            if ts.replicas is None and not ts.resources:
                errors.append(at(where + ("timeSlicing",), "set replicas (every device the pool advertises) or "
                                 "resources (only those)"))
            allowed, seen = advertised(p), set()
            for j, r in enumerate(ts.resources):
                loc = where + ("timeSlicing", "resources", j, "name")
                if r.name in seen:
                    errors.append(at(loc, f"{r.name!r} is listed twice"))
                elif r.name not in allowed:
                    errors.append(at(loc, f"{r.name!r} is not a resource this pool advertises, so the entry would "
                                     f"never apply; allowed: {', '.join(allowed)}"))
                seen.add(r.name)
    return errors


@rule("mig-manager-off", severity="warning", source="NVIDIA/mig-parted: the MIG manager applies "
      "nvidia.com/mig.config layouts")
def check_mig_manager_present(ctx: Context) -> list:
    """MIG layouts with the MIG manager off: nothing would apply them."""
    if ctx.spec.migManager.enabled or not any(layout_of(p) for p in ctx.spec.nodePools):
        return []
    return [ctx.at(("spec", "migManager", "enabled"), "pools declare MIG layouts but the MIG manager is off: "
                   "nothing applies them on the nodes (partition the GPUs yourself)", "warning")]


@rule("pool-labels-source", source="plan/pools.py: the labels a NodeFeatureRule cannot set (NFD "
      "nfd.k8s-sigs.io/v1alpha1 NodeFeatureRule matches node features, not pools)")
def check_labels_nfd_cannot_set(ctx: Context) -> list:
    """Each pool whose labels no NodeFeatureRule can set (plan/pools.py decides which) must say where they
    come from (nodeGroup, or labelsFrom: user): unlabelled, a MIG pool silently advertises whole GPUs and
    a sharing pool advertises one pod per GPU. Named: a warning saying what to put on the node group."""
    out = []
    for pool in ctx.derived("pool-configs", lambda: build(ctx.spec, ctx.cat)).manual:
        labels = ", ".join(f"{k}={v}" for k, v in pool.manual)
        if pool.node_group or pool.user:
            group = f" (node group {pool.node_group})" if pool.node_group else ""
            out.append(ctx.at(("spec", "nodePools", pool.index), f"label this pool's nodes {labels} through its "
                              f"{WHERE}{group}: {pool.why}", "warning"))
            continue
        out.append(ctx.at(("spec", "nodePools", pool.index), f"this pool's nodes need {labels}, and no "
                          f"NodeFeatureRule can set them ({pool.why}); without them the nodes get no MIG layout "
                          f"and no sharing config. Set nodeGroup to the node group whose {WHERE} carries them, "
                          "or labelsFrom: user if you label the nodes yourself"))
    return out


@rule("keep-mig-configs", source="NVIDIA/mig-parted config names (nvidia.com/mig.config values gpuop writes)")
def check_keep_mig_configs(ctx: Context) -> list:
    """keepMigConfigs names a config gpuop can rebuild for the pool's GPU (a name mig_config_name writes)."""
    out = []
    for i, p in enumerate(ctx.spec.nodePools):
        gpu = ctx.cat.gpus.get(p.gpu)
        for j, name in enumerate(p.keepMigConfigs):
            if not _layout_from_name(name, gpu):
                out.append(ctx.at(("spec", "nodePools", i, "keepMigConfigs", j), f"{name!r} is not a MIG config "
                                  f"name of {p.gpu} (names read like 2x3g.40gb or 1x3g.40gb_2x1g.10gb: count x "
                                  "profile, largest first, as nvidia.com/mig.config values gpuop writes)"))
    return out


@rule("pool-config-names", source="NVIDIA/k8s-device-plugin config files and NVIDIA/mig-parted configs: one "
      "ConfigMap key / config name per node label value (nvidia.com/device-plugin.config, nvidia.com/mig.config)")
def check_config_names(ctx: Context) -> list:
    """A pool's mig.configName / sharing.configName is a key of one ConfigMap and a node label value: pools that
    share a name must share what it names."""
    out, seen_mig, seen_plugin = [], {}, {}
    spec = ctx.spec
    for i, p in enumerate(spec.nodePools):
        if p.mig is not None and p.mig.configName:
            what = (p.gpu, tuple(sorted(layout_of(p).items())))
            first = seen_mig.setdefault(p.mig.configName, (i, what))
            if first[1] != what:
                out.append(ctx.at(("spec", "nodePools", i, "mig", "configName"), f"{p.mig.configName!r} is the "
                                  f"MIG config of pool {spec.nodePools[first[0]].name!r} with another GPU model or "
                                  "layout; one name is one mig-parted config"))
        if p.sharing is not None and p.sharing.configName:
            what = (p.sharing.model_dump(exclude={"configName"}), p.mig.strategy if p.mig else None,
                    tuple(sorted(layout_of(p).items())))
            first = seen_plugin.setdefault(p.sharing.configName, (i, what))
            if first[1] != what:
                out.append(ctx.at(("spec", "nodePools", i, "sharing", "configName"), f"{p.sharing.configName!r} "
                                  f"is the device-plugin config of pool {spec.nodePools[first[0]].name!r} with "
                                  "other sharing or MIG settings; one name is one config"))
    return out


RULES = (
    (check_sharing, check_mig_manager_present, check_config_names),
    (check_labels_nfd_cannot_set, check_keep_mig_configs),          # the pool configs need valid sharing settings
)


def applies(ctx: Context) -> bool:
    return True
