"""Known-bad combinations: a profile that matches an entry of catalog/data/known-issues.yaml gets a
located warning or error (the entry's severity) saying the effect, the workaround and the source links.

check_known_issues matches each entry's `when` (every key must match) against the typed profile: RDMA,
the drivers it installs (cluster and pools, branches and exact versions), the pools' MIG strategies and
the node OS. Entries are data; adding one needs no code (catalog/known_issues.py lists the keys).
"""

from __future__ import annotations

from gpuop.catalog import known_issues as known_catalog
from gpuop.errors import Issue
from gpuop.plan.drivers import full_version
from gpuop.validate.rules import Context, run


def _drivers(ctx: Context) -> set[str]:
    spec, release = ctx.spec, ctx.release
    default = release.components["driver"].version
    found = set()
    if spec.driver.enabled:
        found.add(full_version(spec.driver.version, default, ctx.cat))
    for pool in spec.nodePools:
        if pool.driver is not None and pool.driver.version is not None and pool.driver.enabled is not False:
            found.add(full_version(pool.driver.version, default, ctx.cat))
    return found


def _matches(when, ctx: Context) -> bool:
    spec = ctx.spec
    if when.rdma is not None and bool(getattr(getattr(spec.driver, "rdma", None), "enabled", False)) != when.rdma:
        return False
    drivers = _drivers(ctx)
    if when.driverVersions and not drivers & set(when.driverVersions):
        return False
    if when.driverBranches and not {v.split(".")[0] for v in drivers} & set(when.driverBranches):
        return False
    if when.migStrategy and not any(p.mig and p.mig.layout and p.mig.strategy == when.migStrategy
                                    for p in spec.nodePools):
        return False
    oses = {spec.os} | {p.os for p in spec.nodePools if p.os}
    if when.os and not oses & set(when.os):
        return False
    return True


def _worked_around(unless, ctx: Context) -> bool:
    env = {e.name: e.value for e in getattr(ctx.spec.driver, "env", [])}
    return bool(unless.driverEnv) and all(env.get(k) == v for k, v in unless.driverEnv.items())


def check_known_issues(ctx: Context) -> list[Issue]:
    out = []
    for known in known_catalog.load():
        if _matches(known.when, ctx) and not _worked_around(known.unless, ctx):
            loc = tuple(known.field)
            while loc and loc not in ctx.loaded.positions.table:     # the nearest field the profile sets
                loc = loc[:-1]
            out.append(ctx.at(loc or ("spec",), f"known issue {known.id}: {known.effect}; workaround: "
                              f"{known.workaround} (sources: {', '.join(known.sources)})", known.severity))
    return out


RULES = ((check_known_issues,),)


def check(loaded, profile, cat) -> tuple[list[Issue], list[Issue]]:
    ctx = Context.of(loaded, profile, cat)
    if ctx.release is None:
        return [], []
    return run(RULES, ctx)
