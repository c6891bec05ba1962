"""Known-bad combinations: a profile that matches an entry of catalog/data/known-issues.yaml gets a
located warning or error (the entry's severity) saying the effect, the workaround and the source links.

check_known_issues matches each entry's `when` (every key must match) against the typed profile. Cluster
keys: RDMA (spec.driver's or a pool's own, reported at each level that has it), the drivers it installs
(cluster and pools, branches and exact versions), the Kubernetes distribution and minor, whether GPU pods run in
user namespaces, the components
switched on, the DRA driver's feature gates, the MIG manager's version. Pool keys (MIG strategy or
layout, node OS, a preinstalled driver) must all hold for one pool. `unless` lifts an entry when the
profile applies the workaround (env values on the driver, the toolkit or the device plugin). Entries are
data; adding one needs no code (catalog/known_issues.py lists the keys).

`versions` names the affected releases per component ({operator: [...], devicePlugin: [...], ...}); one of
them running at a listed version matches. A component version the profile pins (spec.<component>.version)
decides for that component; otherwise operator mode runs what the operator's version deploys (the
`operator` list) and stack mode the stack release's versions. An entry matched by a pinned or operator
version is reported at that version's field, where the fix is made.
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


def _runs(ctx: Context, component: str) -> bool:
    """Whether gpuop runs `component` (the MIG manager only where a pool has a MIG layout)."""
    spec = ctx.spec
    if not getattr(spec, component).enabled:
        return False
    return component != "migManager" or any(defaulting.layout_of(p) for p in spec.nodePools)


def _operator_mode(ctx: Context) -> bool:
    return ctx.spec.delivery.mode == "operator"


OPERATOR_VERSION = ("spec", "delivery", "operator", "version")


def _version(ctx: Context, component: str) -> tuple[str | None, tuple | None]:
    """(the version `component` runs at, the field that sets it; None where it is a default). The operator's
    version in operator mode; a component's pinned version, else (stack mode) the release's; (None, None)
    where it does not run, or in operator mode where the operator's version stands for it."""
    spec = ctx.spec
    if component == "operator":
        if not _operator_mode(ctx):
            return None, None
        pinned = spec.delivery.operator.version
        return (pinned or ctx.release.operatorVersion), (OPERATOR_VERSION if pinned else None)
    if not _runs(ctx, component):
        return None, None
    pinned = getattr(spec, component).version
    if pinned:
        return pinned, ("spec", component, "version")
    if _operator_mode(ctx):
        return None, None                          # the operator's chart default: the `operator` list decides
    return ctx.release.components[component].version, None


def _version_match(versions: dict, ctx: Context) -> tuple[bool, list[tuple]]:
    """(whether a listed component runs at a listed version, the fields of the versions that matched). A
    component the profile pins decides by its pinned version, whatever the operator's version says."""
    pinned = {c: _version(ctx, c) for c in versions if c != "operator" and getattr(ctx.spec, c).version
              and _runs(ctx, c)}
    if pinned:
        hits = [(v, loc) for c, (v, loc) in pinned.items() if v in versions[c]]
        return bool(hits), [loc for _, loc in hits if loc is not None]
    components = [c for c in versions if c != "operator"]
    if components and not any(_runs(ctx, c) for c in components):
        return False, []                           # the operator's version, but none of the affected components runs
    hits = [(v, loc) for c in versions for v, loc in [_version(ctx, c)] if v is not None and v in versions[c]]
    return bool(hits), [loc for _, loc in hits if loc is not None]


def _mig_beside_full_gpus(pool, ctx: Context) -> bool:
    """Whether the pool's nodes may carry MIG devices next to whole GPUs: strategy mixed (the device plugin
    advertises both) with no layout of gpuop's, so each GPU's MIG mode stays as the node has it (the MIG
    manager off, or disableMigWithoutLayout: false). A gpuop layout applies to every GPU (`devices: all`)."""
    if not pool.mig or pool.mig.strategy != "mixed" or defaulting.layout_of(pool):
        return False
    mm = ctx.spec.migManager
    return not mm.enabled or not mm.disableMigWithoutLayout


def _pool_matches(when, pool, resolved, ctx: Context) -> bool:
    layout = bool(defaulting.layout_of(pool))
    if when.migStrategy and not (layout and pool.mig.strategy == when.migStrategy):
        return False
    if when.mig is not None and layout != when.mig:
        return False
    if when.os and resolved.os not in when.os:
        return False
    if when.driverPreinstalled is not None and (not resolved.driver) != when.driverPreinstalled:
        return False
    if when.migBesideFullGpus is not None and _mig_beside_full_gpus(pool, ctx) != when.migBesideFullGpus:
        return False
    if when.driverVersions or when.driverBranches:         # that pool's own driver (gpuop installs it)
        if not resolved.driver:
            return False
        full = full_version(resolved.driver_version, ctx.release.components["driver"].version, ctx.cat)
        if when.driverVersions and full not in when.driverVersions:
            return False
        if when.driverBranches and full.split(".")[0] not in when.driverBranches:
            return False
    return True


def _pool_keys(when) -> bool:
    return any(k is not None for k in (when.migStrategy, when.mig, when.os or None, when.driverPreinstalled,
                                       when.migBesideFullGpus))


def _matching_pools(when, ctx: Context) -> list[int]:
    return [i for i, (p, d) in enumerate(zip(ctx.spec.nodePools, ctx.defaults.pools)) if _pool_matches(when, p, d, ctx)]


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
    if not _pool_keys(when):                 # with pool keys, the drivers are matched per pool
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
    if when.runtimes and ctx.defaults.runtime not in when.runtimes:
        return False
    if when.userNamespaces is not None and spec.platform.userNamespaces != when.userNamespaces:
        return False
    delivered = spec.dra is not None and any(dra_plan.is_dra(p) for p in spec.nodePools)
    if when.draStandalone is not None and delivered != when.draStandalone:
        return False                         # gpuop delivers NVIDIA's DRA driver chart itself (a DRA pool)
    if when.draFeatureGates:             # the DRA driver runs (a pool allocates through it) with these gates on
        on = dra_catalog.load().gates(spec.dra.featureGates) if delivered else {}
        if not all(on.get(g) for g in when.draFeatureGates):
            return False
    if when.versions and not _version_match(when.versions, ctx)[0]:
        return False
    if _pool_keys(when) and not _matching_pools(when, ctx):
        return False
    return True


def _worked_around(unless, ctx: Context) -> bool:
    wanted = {"driver": unless.driverEnv, "toolkit": unless.toolkitEnv, "devicePlugin": unless.devicePluginEnv}
    if not any(wanted.values()):
        return False
    for section, values in wanted.items():
        env = {e.name: e.value for e in getattr(ctx.spec, section).env}
        if any(env.get(k) != v for k, v in values.items()):
            return False
    return True


def _locations(known, ctx: Context) -> list[tuple]:
    """Where an issue is reported: the fields of the pinned or operator versions that matched `versions`;
    with `rdma` in `when`, the field at each driver level (spec.driver or a pool's driver) where RDMA is as
    `when` says; a field under spec.nodePools["*"] at each matching pool; a spec.driver field of an entry matched per pool, at each matching pool's own driver
    setting where it has one; else the entry's field."""
    field = tuple(known.field)
    when = known.when
    if when.versions:
        located = _version_match(when.versions, ctx)[1]
        if located:
            return list(dict.fromkeys(located))
    if when.rdma is not None and field[:2] == ("spec", "driver"):
        return [level + field[2:] for level in _rdma_levels(ctx, when.rdma)]
    if field[:3] == ("spec", "nodePools", "*"):
        return [field[:2] + (i,) + field[3:] for i in _matching_pools(when, ctx)]
    if _pool_keys(when) and field[:2] == ("spec", "driver"):
        out: list[tuple] = []
        for i in _matching_pools(when, ctx):
            own = ("spec", "nodePools", i, "driver") + field[2:]
            loc = own if own in ctx.loaded.positions.table else field
            if loc not in out:
                out.append(loc)
        return out
    return [field]


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
