"""Compatibility rules from the catalogs: driver branch x GPU, kernel modules, driver floors, and the
OS / container runtime matrix of the stack release.

Rules (validate/rules.py) over the typed profile; cluster.py checks that the release, OS, Kubernetes
version, GPU model and driver branch exist and that OS and Kubernetes fit each other.

The facts live in the catalogs, not here: which architectures a driver branch drives and its versions
(drivers.yaml), each GPU's architecture, open-kernel-module requirement and driver floor (gpus.yaml),
which OS is only partner-validated and which runtimes the release supports (releases.yaml).

Rules (each has a test with a profile that breaks it and the exact message, tests/test_compat.py):
- pool-driver-fits-gpu (check_pool_driver_fits_gpu): the driver branch does not drive a pool's GPU
  architecture (535 on B200), the driver is older than the GPU's minimum (HGX B200 >= 570.133.20),
  kernelModuleType proprietary on a GPU that needs the open modules (Blackwell, GH200); each pool is
  checked against its own driver (`nodePools[i].driver`) or spec.driver. A full driver version the
  catalog does not list for its branch is a warning.
- os-partner-validated (check_os_support, warning): an OS the release marks partner-validated (SLES).
- driver-eol (check_driver_branch_lifecycle, warning): a driver branch past its end of life (drivers.yaml
  `eol`, a month): no more security or bug fixes. "Today" is SOURCE_DATE_EPOCH when set (reproducible
  builds), else the clock.
- runtime-matrix (check_runtime_matrix): a container runtime outside the release's matrix (error) or handled
  only in code (warning: docker).
"""

from __future__ import annotations

import datetime
import os

from gpuop.catalog import versions
from gpuop.errors import Issue
from gpuop.validate.rules import Context, rule


def _effective(at, version, loc, default, cat, warnings):
    """(branch, effective version, where it came from) of a profile driver version, or None if unknown."""
    branch = cat.branch(version or default)
    if branch is None:
        return None                        # unknown branch: cluster.py / platform.py report it
    field = "spec.driver.version" if len(loc) == 3 else f"spec.nodePools[{loc[2]}].driver.version"
    if version is None:
        return branch, default, "the stack release's default driver"
    if "." in version:
        if version not in branch.versions and version != branch.latest:
            warnings.append(at(loc, f"driver {version} is not a version the catalog lists for branch "
                               f"{branch.branch} (listed: {', '.join(branch.versions)}); the driver image with "
                               "this tag must exist in the registry", "warning"))
        return branch, version, field
    return branch, branch.latest, f"{field}, branch {branch.branch} -> {branch.latest}"


@rule("pool-driver-fits-gpu", source="catalog/data/drivers.yaml, catalog/data/gpus.yaml (NVIDIA data center "
      "driver release notes: supported architectures, minimum versions, open kernel modules)")
def check_pool_driver_fits_gpu(ctx: Context) -> list[Issue]:
    """Each pool's GPU against the driver it gets (the pool's own `driver` or spec.driver): architecture,
    the GPU's driver floor, open kernel modules; a full version the catalog does not list (warning)."""
    at, spec, release, cat = ctx.at, ctx.spec, ctx.release, ctx.cat
    errors: list[Issue] = []
    warnings: list[Issue] = []
    d = spec.driver
    if not cat.drivers:
        return []
    default = release.components["driver"].version
    cluster = _effective(at, d.version, ("spec", "driver", "version"), default, cat, warnings) if d.enabled else None
    for i, (pool, resolved) in enumerate(zip(spec.nodePools, ctx.defaults.pools)):
        own = resolved.driver_version if resolved.driver_version_own else None
        gpu = cat.gpus.get(pool.gpu)
        if not resolved.driver or gpu is None:
            continue                       # preinstalled driver, or unknown model (cluster.py reports it)
        loc = ("spec", "nodePools", i, "driver", "version") if own else ("spec", "driver", "version")
        found = _effective(at, own, loc, default, cat, warnings) if own else (
            cluster or _effective(at, d.version, loc, default, cat, warnings))
        if found is None:
            continue
        branch, effective, source = found
        field = f"spec.nodePools[{i}].driver.version" if own else "spec.driver.version"
        where = ("spec", "nodePools", i, "gpu")
        if gpu.architecture not in branch.architectures:
            fits = [b.branch for b in cat.drivers if gpu.architecture in b.architectures]
            errors.append(at(where, f"{pool.gpu} ({gpu.architecture}) is not supported by driver branch "
                             f"{branch.branch} ({source}); set {field} to a branch for "
                             f"{gpu.architecture}: {', '.join(fits)}"))
        else:
            floor = getattr(gpu, "minDriverVersion", None)
            if isinstance(floor, str) and versions.older(effective, floor):
                errors.append(at(where, f"{pool.gpu} needs driver {floor} or newer, but the driver is {effective} "
                                 f"({source}); allowed: a driver >= {floor}"))
        if d.kernelModuleType == "proprietary" and getattr(gpu, "openKernelModulesRequired", False):
            errors.append(at(("spec", "driver", "kernelModuleType"), f"{pool.gpu} (spec.nodePools[{i}]) needs "
                             "the open kernel modules; allowed: auto, open"))
    return errors + sorted(set(warnings))


@rule("os-partner-validated", severity="warning", source="catalog/data/releases.yaml (GPU Operator platform "
      "support: partner-validated operating systems)")
def check_os_support(ctx: Context) -> list[Issue]:
    """An OS the release marks partner-validated (warning)."""
    at, spec, release = ctx.at, ctx.spec, ctx.release
    warnings: list[Issue] = []
    m = release.matrix
    entry = m.os.get(spec.os)
    if entry is not None and entry.platform == spec.platform.type and entry.support == "partner-validated":
        warnings.append(at(("spec", "os"), f"{spec.os} is partner-validated in stack release {release.name}: a "
                           "partner validates it, NVIDIA does not test it; supported by NVIDIA: "
                           + ", ".join(n for n, e in m.os.items()
                                       if e.platform == spec.platform.type and e.support == "supported"), "warning"))
    return warnings


@rule("runtime-matrix", severity="warning",
      source="catalog/data/releases.yaml (GPU Operator platform support: container runtimes)")
def check_runtime_matrix(ctx: Context) -> list[Issue]:
    """The container runtime against the release's matrix: outside it (error), code-only (warning)."""
    at, spec, release = ctx.at, ctx.spec, ctx.release
    errors: list[Issue] = []
    warnings: list[Issue] = []
    m = release.matrix
    runtime = ctx.defaults.runtime
    support = m.runtimeSupport.get(runtime)
    supported = [f"{n} {s.versions}" if s.versions else n for n, s in m.runtimeSupport.items() if s.support == "supported"]
    if runtime not in m.containerRuntimes:
        errors.append(at(("spec", "containerRuntime"), f"container runtime {runtime} is outside stack release "
                         f"{release.name}'s support matrix; allowed: {', '.join(m.containerRuntimes)}"))
    elif support is not None and support.support == "code-only":
        warnings.append(at(("spec", "containerRuntime"), f"container runtime {runtime} is not in stack release "
                           f"{release.name}'s support matrix ({support.note or 'handled in code only'}); "
                           f"supported: {', '.join(supported)}", "warning"))
    return errors + warnings


LIFECYCLE_SOURCE = ("https://docs.nvidia.com/datacenter/tesla/drivers/index.html "
                    "(data center driver branches and their end of life; ../shared/refs/gpu-operator/NOTES.md §4)")


def today() -> datetime.date:
    epoch = os.environ.get("SOURCE_DATE_EPOCH", "")
    if epoch.isdigit():
        return datetime.datetime.fromtimestamp(int(epoch), datetime.timezone.utc).date()
    return datetime.date.today()


@rule("driver-eol", severity="warning", source="https://docs.nvidia.com/datacenter/tesla/drivers/index.html (data "
      "center driver branches and their end of life); catalog/data/drivers.yaml eol")
def check_driver_branch_lifecycle(ctx: Context) -> list[Issue]:
    """Each driver the profile installs, on a branch past its end of life (warning, with the source)."""
    spec, cat = ctx.spec, ctx.cat
    if not cat.drivers:
        return []
    now = today().strftime("%Y-%m")
    default = ctx.release.components["driver"].version
    wanted = []
    if spec.driver.enabled:
        wanted.append((("spec", "driver", "version"), spec.driver.version or default))
    for i, pool in enumerate(ctx.defaults.pools):
        if pool.driver and pool.driver_version_own:      # a pool's own version, on a driver gpuop deploys
            wanted.append((("spec", "nodePools", i, "driver", "version"), pool.driver_version))
    out = []
    for loc, version in wanted:
        branch = cat.branch(version)
        eol = getattr(branch, "eol", None) if branch is not None else None
        if isinstance(eol, str) and eol < now:
            at = loc if loc in ctx.loaded.positions.table or len(loc) > 3 else ("spec", "driver")
            supported = [b.branch for b in cat.drivers if isinstance(getattr(b, "eol", None), str) and b.eol >= now]
            named = branch.branch if version == branch.branch else f"{branch.branch} ({version})"
            out.append(ctx.at(at, f"driver branch {named} reached its end of life in {eol}: "
                              f"no more security or bug fixes; branches still supported: {', '.join(supported)} "
                              f"(source: {LIFECYCLE_SOURCE})", "warning"))
    return out


RULES = ((check_pool_driver_fits_gpu, check_os_support, check_driver_branch_lifecycle, check_runtime_matrix),)


def applies(ctx: Context) -> bool:
    return ctx.release is not None         # unknown release: cluster.py reports it
