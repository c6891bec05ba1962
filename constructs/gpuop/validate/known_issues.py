"""Known-bad combinations: a profile that matches an entry of catalog/data/known-issues.yaml gets a
located warning or error (the entry's severity) saying the effect, the workaround and the source links.

check_known_issues matches each entry's `when` (every key must match) against the typed profile. Cluster
keys: RDMA (spec.driver's or a pool's own, reported at each level that has it), the drivers it installs
(cluster and pools, branches and exact versions), the Kubernetes distribution and minor, the components
switched on, the DRA driver's feature gates, the MIG manager's version. Pool keys (MIG strategy or
layout, node OS, a preinstalled driver) must all hold for one pool. `unless` lifts an entry when the
profile applies the workaround (env values on the driver or the toolkit). Entries are data; adding one
needs no code (catalog/known_issues.py lists the keys).
"""

from __future__ import annotations

from gpuop.catalog import dra as dra_catalog
from gpuop.catalog import known_issues as known_catalog
from gpuop.catalog import versions
from gpuop.errors import Issue
from gpuop.plan import defaults as defaulting
from gpuop.plan import dra as dra_plan
from gpuop.plan.drivers import full_version
from gpuop.validate.rules import Context, rule


def _drivers(ctx: Context) -> set[str]:
    """The drivers gpuop deploys: each pool's whose effective driver.enabled is true (as the plan's)."""
    default = ctx.release.components["driver"].version
    return {full_version(pool.driver_version, default, ctx.cat) for pool in ctx.defaults.pools if pool.driver}


def _kubernetes(ctx: Context) -> str | None:
    p = ctx.spec.platform
    return ctx.release.matrix.openshiftKubernetes.get(p.version) if p.type == "openshift" else p.version


def _mig_manager_version(ctx: Context) -> str | None:
    spec = ctx.spec
    if not spec.migManager.enabled or not any(defaulting.layout_of(p) for p in spec.nodePools):
        return None                                  # no MIG manager runs
    return spec.migManager.version or ctx.release.components["migManager"].version


def _pool_matches(when, pool, resolved) -> bool:
    layout = bool(defaulting.layout_of(pool))
    if when.migStrategy and not (layout and pool.mig.strategy == when.migStrategy):
        return False
    if when.mig is not None and layout != when.mig:
        return False
    if when.os and resolved.os not in when.os:
        return False
    if when.driverPreinstalled is not None and (not resolved.driver) != when.driverPreinstalled:
        return False
    return True


def _rdma_levels(ctx: Context, wanted: bool) -> list[tuple]:
    """Where RDMA is `wanted` (on or off) for some pool: ("spec", "nodePools", i, "driver") for a pool that sets
    rdma.enabled itself, ("spec", "driver") for the pools that inherit spec.driver.rdma.enabled."""
    out: list[tuple] = []
    for i, pool in enumerate(ctx.defaults.pools):
        level = ("spec", "nodePools", i, "driver") if pool.rdma_own else ("spec", "driver")
        if pool.sidecars.rdma == wanted and level not in out:
            out.append(level)
    return out


def _matches(when, ctx: Context) -> bool:
    spec = ctx.spec
    if when.rdma is not None and not _rdma_levels(ctx, when.rdma):
        return False
    drivers = _drivers(ctx)
    if when.driverVersions and not drivers & set(when.driverVersions):
        return False
    if when.driverBranches and not {v.split(".")[0] for v in drivers} & set(when.driverBranches):
        return False
    if when.distribution and (spec.platform.distribution or "generic") not in when.distribution:
        return False
    if when.kubernetesFrom:
        kube = _kubernetes(ctx)
        if kube is None or versions.older(kube, when.kubernetesFrom):
            return False
    if any(not getattr(spec, c).enabled for c in when.enabled):
        return False
    if when.draFeatureGates:             # the DRA driver runs (a pool allocates through it) with these gates on
        delivered = spec.dra is not None and any(dra_plan.is_dra(p) for p in spec.nodePools)
        on = dra_catalog.load().gates(spec.dra.featureGates) if delivered else {}
        if not all(on.get(g) for g in when.draFeatureGates):
            return False
    if when.migManagerVersions and _mig_manager_version(ctx) not in when.migManagerVersions:
        return False
    pool_keys = (when.migStrategy, when.mig, when.os or None, when.driverPreinstalled)
    if any(k is not None for k in pool_keys) and not any(_pool_matches(when, p, d) for p, d in zip(spec.nodePools, ctx.defaults.pools)):
        return False
    return True


def _worked_around(unless, ctx: Context) -> bool:
    wanted = {"driver": unless.driverEnv, "toolkit": unless.toolkitEnv}
    if not any(wanted.values()):
        return False
    for section, values in wanted.items():
        env = {e.name: e.value for e in getattr(ctx.spec, section).env}
        if any(env.get(k) != v for k, v in values.items()):
            return False
    return True


def _locations(known, ctx: Context) -> list[tuple]:
    """Where an issue is reported: its field, or with `rdma` in `when`, that field at each driver level
    (spec.driver or a pool's driver) where RDMA is as `when` says."""
    field = tuple(known.field)
    if known.when.rdma is None or field[:2] != ("spec", "driver"):
        return [field]
    return [level + field[2:] for level in _rdma_levels(ctx, known.when.rdma)]


@rule("known-issue", severity="warning", source="catalog/data/known-issues.yaml (each entry names its sources: "
      "NVIDIA release notes, GitHub issues)")
def check_known_issues(ctx: Context) -> list[Issue]:
    """A profile matching a known-bad combination of the known-issues catalog (the entry's severity)."""
    out = []
    for known in known_catalog.load():
        if not _matches(known.when, ctx) or _worked_around(known.unless, ctx):
            continue
        for loc in _locations(known, ctx):
            while loc and loc not in ctx.loaded.positions.table:     # the nearest field the profile sets
                loc = loc[:-1]
            out.append(ctx.at(loc or ("spec",), f"known issue {known.id}: {known.effect}; workaround: "
                              f"{known.workaround} (sources: {', '.join(known.sources)})", known.severity))
    return out


RULES = ((check_known_issues,),)


def applies(ctx: Context) -> bool:
    return ctx.release is not None
