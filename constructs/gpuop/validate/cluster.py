"""Cluster rules, the catalog pass: which release, OS, platform version, GPU models and driver branches
exist and fit together, read from the plain merged document (not the typed profile), so a profile with a
typo in one field still gets its catalog problems reported in the same run (PLAIN: validate/runner.py runs
these rules before the typed profile exists; ctx.profile is None). Unknown names get close suggestions
(case, prefix, spelling) and the full list of allowed ones. Fields of the wrong type are skipped: the model
pass reports them.
"""

from __future__ import annotations

import re

from gpuop.catalog.names import did_you_mean
from gpuop.errors import Issue
from gpuop.validate.rules import Context, rule

PLAIN = True
CATALOG = "catalog/data/releases.yaml (NVIDIA GPU Operator platform support matrix)"


def _one_of(value: str, allowed, what: str, plural: str | None = None) -> str:
    """`value` is not one of `allowed`: suggest close names (case, prefix, spelling) and list them all."""
    allowed = list(allowed)
    hint = did_you_mean(value, allowed, limit=4)
    hint = f" ({hint})" if hint else ""
    return f"{value!r} is not a known {what}{hint}; allowed: {', '.join(allowed)}"


def _get(node, *path):
    for part in path:
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node):
            node = node[part]
        else:
            return None
    return node


def _str(node, *path) -> str | None:
    value = _get(node, *path)
    return value if isinstance(value, str) else None


RESERVED_NAMES = frozenset({"charts", "fleet"})   # top-level folders of dist/ besides the clusters


def applies(ctx: Context) -> bool:
    return True


def _spec(ctx: Context):
    return _get(ctx.data, "spec")


def _release(ctx: Context):
    """The release the document names (the catalog's default when omitted); None: unknown or not a string."""
    name = _get(_spec(ctx), "release")
    return ctx.derived("plain-release", lambda: ctx.cat.release(None) if name is None else (
        ctx.cat.release(name) if isinstance(name, str) else None))


@rule("cluster-name-reserved", source="gpuop's output layout: dist/charts/ and dist/fleet/ hold fleet-wide output")
def check_reserved_cluster_name(ctx: Context) -> list[Issue]:
    """A cluster named like a fleet-wide folder of dist/ (charts, fleet)."""
    name = _str(ctx.data, "metadata", "name")
    if name in RESERVED_NAMES:
        return [ctx.at(("metadata", "name"), f"{name!r} is reserved: dist/{name}/ holds fleet-wide output; "
                       f"choose another cluster name (reserved: {', '.join(sorted(RESERVED_NAMES))})")]
    return []


@rule("release-known", source="catalog/data/releases.yaml (the stack releases gpuop knows)")
def check_release_known(ctx: Context) -> list[Issue]:
    """A spec.release the catalog does not have."""
    release_name = _get(_spec(ctx), "release")
    if isinstance(release_name, str) and _release(ctx) is None:
        return [ctx.at(("spec", "release"), _one_of(release_name, [r.name for r in ctx.cat.releases],
                                                    "stack release"))]
    return []


def _platform(ctx: Context):
    spec = _spec(ctx)
    return _str(spec, "platform", "type"), _str(spec, "platform", "version"), _str(spec, "os")


def _version_ok(release, ptype, pver) -> bool:
    m = release.matrix
    return not ((ptype == "openshift" and pver is not None and pver not in m.openshift)
                or (ptype == "kubernetes" and pver is not None and pver not in m.kubernetes))


@rule("platform-version-matrix", source=CATALOG)
def check_platform_version_in_matrix(ctx: Context) -> list[Issue]:
    """A Kubernetes or OpenShift version outside the release's support matrix."""
    release = _release(ctx)
    if release is None:
        return []
    ptype, pver, _ = _platform(ctx)
    m = release.matrix
    if ptype == "openshift" and pver is not None and pver not in m.openshift:
        return [ctx.at(("spec", "platform", "version"), f"OpenShift {pver} is outside stack release "
                       f"{release.name}'s support matrix; allowed: {', '.join(m.openshift)}")]
    if ptype == "kubernetes" and pver is not None and pver not in m.kubernetes:
        return [ctx.at(("spec", "platform", "version"), f"Kubernetes {pver} is outside stack release "
                       f"{release.name}'s support matrix; allowed: {', '.join(m.kubernetes)}")]
    return []


@rule("os-matrix", source=CATALOG)
def check_os_fits_platform(ctx: Context) -> list[Issue]:
    """An OS the release does not know, one of the other platform, or one not supported with the cluster's
    Kubernetes or OpenShift version."""
    release = _release(ctx)
    ptype, pver, os_name = _platform(ctx)
    if release is None or os_name is None:
        return []
    m = release.matrix
    version_ok = _version_ok(release, ptype, pver)
    at = ctx.at
    entry = m.os.get(os_name)
    if entry is None:
        known = [n for n, e in m.os.items() if ptype not in ("kubernetes", "openshift") or e.platform == ptype]
        return [at(("spec", "os"), _one_of(os_name, known, "operating system" + (f" for {ptype}" if ptype else "")))]
    if ptype in ("kubernetes", "openshift") and entry.platform != ptype:
        fitting = [n for n, e in m.os.items() if e.platform == ptype]
        return [at(("spec", "os"), f"{os_name} is an OS for {entry.platform}, not {ptype}; "
                   f"allowed: {', '.join(fitting)}")]
    if ptype == "openshift" and pver is not None and version_ok and pver not in entry.openshift:
        return [at(("spec", "os"), f"{os_name} is the OS of OpenShift {', '.join(entry.openshift)}, "
                   f"not {pver}; allowed with OpenShift {pver}: "
                   f"{', '.join(n for n, e in m.os.items() if pver in e.openshift)}")]
    if ptype == "kubernetes" and pver is not None and version_ok and pver not in entry.kubernetes:
        return [at(("spec", "os"), f"{os_name} is supported with Kubernetes "
                   f"{', '.join(entry.kubernetes)} in stack release {release.name}, not {pver}; "
                   f"allowed with Kubernetes {pver}: "
                   f"{', '.join(n for n, e in m.os.items() if pver in e.kubernetes)}")]
    return []


@rule("driver-branch-known", source="catalog/data/drivers.yaml (NVIDIA data center driver branches)")
def check_driver_branch_known(ctx: Context) -> list[Issue]:
    """A spec.driver.version whose branch the driver catalog does not have."""
    cat = ctx.cat
    dver = _str(_spec(ctx), "driver", "version")
    if dver is not None and re.fullmatch(r"\d{3}(\.\d+){0,2}", dver) and cat.drivers and cat.branch(dver) is None:
        return [ctx.at(("spec", "driver", "version"), _one_of(dver.split(".")[0],
                                                              [b.branch for b in cat.drivers], "driver branch"))]
    return []


def _pools(ctx: Context) -> list:
    pools = _get(_spec(ctx), "nodePools")
    return pools if isinstance(pools, list) else []


@rule("pool-name-unique", source="gpuop: a pool's name names its objects (NodeFeatureRule, configs, DeviceClasses)")
def check_pool_names_unique(ctx: Context) -> list[Issue]:
    """Two node pools with the same name."""
    out = []
    seen: dict[str, int] = {}
    for i, pool in enumerate(_pools(ctx)):
        name = _str(pool, "name")
        if name is None:
            continue
        if name in seen:
            out.append(ctx.at(("spec", "nodePools", i, "name"), f"duplicate pool name {name!r} "
                              f"(also spec.nodePools[{seen[name]}]); pool names must be unique"))
        seen.setdefault(name, i)
    return out


@rule("gpu-model-known", source="catalog/data/gpus.yaml (the GPU models gpuop knows)")
def check_gpu_model_known(ctx: Context) -> list[Issue]:
    """A pool's GPU model the catalog does not have (MIG layouts of known models: validate/mig.py)."""
    cat = ctx.cat
    if not cat.gpus:
        return []
    return [ctx.at(("spec", "nodePools", i, "gpu"), _one_of(gpu_name, cat.gpus, "GPU model"))
            for i, pool in enumerate(_pools(ctx))
            if (gpu_name := _str(pool, "gpu")) is not None and gpu_name not in cat.gpus]


RULES = ((check_reserved_cluster_name, check_release_known, check_platform_version_in_matrix, check_os_fits_platform,
          check_driver_branch_known, check_pool_names_unique, check_gpu_model_known),)
