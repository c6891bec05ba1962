"""Profile rules for the platform variants: OpenShift, per-pool OS and drivers, precompiled drivers.

Rules (validate/rules.py) over the typed profile; cluster.py checks the platform version, the cluster OS
and the release. Every broken rule is a located Issue with what is allowed (tests/test_openshift.py and
tests/test_platform_variants.py give each one a profile that breaks it):

- openshift-runtime: OpenShift runs CRI-O only (NOTES.md §3 "Forced to crio").
- openshift-nfd: OpenShift gets NFD from Red Hat's NFD Operator; `nfd.mode: deploy` is refused.
- rhcos-builds: with the driver on, OpenShift needs `driver.rhcosVersions` (one Driver Toolkit build per
  RHCOS build); each build's OpenShift minor must be in the release's matrix and not newer than the
  cluster; no duplicates; the field is OpenShift-only.
- openshift-namespace: image stream lookups (how the Driver Toolkit image is resolved) do not work in
  `default`, `openshift`, `openshift-*` or `kube-*` (catalog `noImageLookupNamespaces`).
- pool-os: a pool's `os` must be in the matrix, for the platform and its Kubernetes version; OpenShift
  pools follow their RHCOS build instead.
- precompiled: needs `driver.kernels`, branches only, and an OS/branch the release publishes
  precompiled images for; `kernels` without `precompiled` is refused.
- pool-driver: a pool's driver branch must be known (compat.py checks it against the pool's GPU).
- disjoint-pools: pools on the same OS with different drivers (versions, or RDMA / GDS / GDRCopy
  sidecars) must have nodeSelectors that cannot match the same node (a shared label key with different
  values), so no node matches two driver DaemonSets.
- daemonset-names: a driver DaemonSet name (its `app` label) must fit 63 characters.
"""

from __future__ import annotations

from gpuop.catalog import versions
from gpuop.plan.drivers import driver_variants, pool_settings, pools_overlap, rhcos_minor, version_resolver
from gpuop.plan.operator import operator_sidecars
from gpuop.validate.rules import Context, rule


@rule("openshift", source="GPU Operator on OpenShift docs (CRI-O only, Red Hat's NFD Operator, the Driver "
      "Toolkit per RHCOS build, image stream lookups); catalog/data/releases.yaml")
def check_openshift(ctx: Context) -> list:
    """On OpenShift: another runtime than CRI-O, nfd.mode deploy, a pool OS, missing or out-of-matrix RHCOS
    builds, a namespace image stream lookups do not work in."""
    at, spec, release = ctx.at, ctx.spec, ctx.release
    errors: list = []
    if spec.platform.type != "openshift":
        return errors
    if spec.containerRuntime not in (None, "crio"):
        errors.append(at(("spec", "containerRuntime"), f"OpenShift runs CRI-O only, the toolkit cannot configure "
                         f"{spec.containerRuntime} there; allowed: crio (or omit the field)"))
    if spec.nfd.mode == "deploy":
        errors.append(at(("spec", "nfd", "mode"), "on OpenShift NFD comes from Red Hat's NFD Operator (namespace "
                         "openshift-nfd), not from NFD's upstream chart; gpuop's NodeFeatureRule still applies; "
                         "allowed: existing (or omit the field)"))
    for i, pool in enumerate(spec.nodePools):
        if pool.os is not None:
            errors.append(at(("spec", "nodePools", i, "os"), "OpenShift nodes run RHCOS; a pool's driver image "
                             "follows its RHCOS build (spec.driver.rhcosVersions); remove the field"))
    if not _driver_on(spec):
        return errors
    builds = spec.driver.rhcosVersions
    if not builds and spec.delivery.mode != "operator":   # the operator finds each node's Driver Toolkit itself
        errors.append(at(("spec", "driver", "rhcosVersions"), "OpenShift builds the driver with the Driver Toolkit "
                         "of each RHCOS build: list the GPU nodes' builds (`oc get nodes -L "
                         "feature.node.kubernetes.io/system-os_release.OSTREE_VERSION`), e.g. "
                         "[\"419.96.202507091512-0\"]"))
    known = {e.tag.removeprefix("rhcos") for e in release.matrix.os.values() if e.platform == "openshift"}
    seen: dict[str, int] = {}
    for j, build in enumerate(builds):
        where = ("spec", "driver", "rhcosVersions", j)
        minor = rhcos_minor(build)
        if build in seen:
            errors.append(at(where, f"duplicate RHCOS build {build!r} (also spec.driver.rhcosVersions[{seen[build]}])"))
        seen.setdefault(build, j)
        if minor not in known:
            errors.append(at(where, f"{build} is an RHCOS {minor} build, outside stack release {release.name}'s "
                             f"support matrix; allowed: builds of RHCOS {', '.join(sorted(known))}"))
        elif spec.platform.version in release.matrix.openshift and versions.older(spec.platform.version, minor):
            errors.append(at(where, f"{build} is an RHCOS {minor} build, newer than the cluster (OpenShift "
                             f"{spec.platform.version}); allowed: builds of OpenShift {spec.platform.version} or "
                             "older (nodes not yet updated)"))
    rule = release.openshift.noImageLookupNamespaces
    if spec.namespace and rule.matches(spec.namespace):
        errors.append(at(("spec", "namespace"), f"{spec.namespace!r}: OpenShift resolves the Driver Toolkit image "
                         "through an image stream lookup, which does not work in default, openshift, openshift-* "
                         "or kube-* namespaces; allowed: another namespace (omitted: nvidia-gpu-operator)"))
    return errors


def _driver_on(spec) -> bool:
    return spec.driver.enabled or any(p.driver is not None and p.driver.enabled for p in spec.nodePools)


@rule("rhcos-builds-openshift-only", source="OpenShift Driver Toolkit (RHCOS builds exist on OpenShift only)")
def check_rhcos_builds_only_on_openshift(ctx: Context) -> list:
    """spec.driver.rhcosVersions on Kubernetes."""
    if ctx.spec.platform.type == "openshift" or not ctx.spec.driver.rhcosVersions:
        return []
    return [ctx.at(("spec", "driver", "rhcosVersions"), "RHCOS builds are for OpenShift (Driver Toolkit builds); "
                   "remove the field on Kubernetes")]


@rule("pool-os", source="catalog/data/releases.yaml (GPU Operator platform support matrix)")
def check_pool_os(ctx: Context) -> list:
    """A pool's OS outside the release's matrix for the cluster's Kubernetes version."""
    at, spec, release = ctx.at, ctx.spec, ctx.release
    errors = []
    ptype, m = spec.platform.type, release.matrix
    for i, pool in enumerate(spec.nodePools):
        if pool.os is None or ptype != "kubernetes":
            continue
        entry = m.os.get(pool.os)
        fitting = [n for n, e in m.os.items() if e.platform == ptype and spec.platform.version in e.kubernetes]
        if entry is None or entry.platform != ptype or spec.platform.version not in entry.kubernetes:
            errors.append(at(("spec", "nodePools", i, "os"), f"{pool.os!r} is not an OS stack release "
                             f"{release.name} supports with Kubernetes {spec.platform.version}; allowed: "
                             f"{', '.join(fitting)}"))
    return errors


def _variants_known(ctx: Context) -> bool:
    """Driver DaemonSets can be computed: every OS and the cluster driver branch are known."""
    spec, cat = ctx.spec, ctx.cat
    oses = {p.os for p in ctx.defaults.pools} | {spec.os}
    return all(o in ctx.release.matrix.os for o in oses) and not (
        cat.drivers and spec.driver.version and cat.branch(spec.driver.version) is None)


@rule("precompiled", source="GPU Operator precompiled driver containers (one per branch, kernel and OS); "
      "catalog/data/releases.yaml precompiled")
def check_precompiled(ctx: Context) -> list:
    """Precompiled drivers without kernels, with full versions, or for an OS / branch NVIDIA publishes no
    images for; kernels without precompiled."""
    at, spec, release = ctx.at, ctx.spec, ctx.release
    errors: list = []
    if not _variants_known(ctx):
        return errors
    d = spec.driver
    if not d.precompiled:
        if d.kernels:
            errors.append(at(("spec", "driver", "kernels"), "kernels are for precompiled drivers only; set "
                             "spec.driver.precompiled: true or remove the field"))
        return errors
    if not d.kernels:
        errors.append(at(("spec", "driver", "precompiled"), "precompiled drivers run one DaemonSet per kernel: list "
                         "the GPU nodes' kernels (`uname -r`) in spec.driver.kernels"))
    if len(set(d.kernels)) != len(d.kernels):
        errors.append(at(("spec", "driver", "kernels"), "duplicate kernel versions"))
    default_branch = release.components["driver"].version.split(".")[0]
    versions = [(("spec", "driver", "version"), d.version)] + [
        (("spec", "nodePools", i, "driver", "version"), p.driver.version)
        for i, p in enumerate(spec.nodePools) if p.driver is not None and p.driver.version is not None]
    for where, v in versions:
        if v is not None and "." in v:
            errors.append(at(where, f"precompiled drivers are published per branch, not per version; allowed: a "
                             f"branch such as \"{v.split('.')[0]}\""))
    for i, pool in enumerate(ctx.defaults.pools):
        os_name = pool.os
        version = pool.driver_version or default_branch
        branch = version.split(".")[0]
        where = ("spec", "nodePools", i, "os") if pool.os_own else ("spec", "os")
        branches = release.precompiled.get(os_name)
        if branches is None:
            errors.append(at(where, f"stack release {release.name} publishes no precompiled driver images for "
                             f"{os_name}; allowed with spec.driver.precompiled: {', '.join(release.precompiled)}"))
        elif branch not in branches:
            errors.append(at(where, f"precompiled driver images for {os_name} exist for branches "
                             f"{', '.join(branches)}, not {branch} (spec.nodePools[{i}] '{pool.name}')"))
    return errors


@rule("pool-driver-branch", source="catalog/data/drivers.yaml (NVIDIA data center driver branches)")
def check_pool_driver_branch(ctx: Context) -> list:
    """A pool's driver version whose branch the driver catalog does not have."""
    at, spec, cat = ctx.at, ctx.spec, ctx.cat
    errors = []
    for i, pool in enumerate(spec.nodePools):
        v = pool.driver.version if pool.driver else None
        if v is not None and cat.drivers and cat.branch(v) is None:
            errors.append(at(("spec", "nodePools", i, "driver", "version"), f"{v.split('.')[0]!r} is not a known "
                             f"driver branch; allowed: {', '.join(b.branch for b in cat.drivers)}"))
    return errors


@rule("disjoint-driver-pools", source="Kubernetes DaemonSet scheduling: a node matching two driver DaemonSets "
      "runs both (NVIDIA driver container: one driver per node)")
def check_disjoint_driver_pools(ctx: Context) -> list:
    """Pools on one OS image with different driver settings must be told apart by their labels."""
    at, spec, release, cat = ctx.at, ctx.spec, ctx.release, ctx.cat
    errors: list = []
    if not _variants_known(ctx):
        return errors
    cluster = operator_sidecars(spec) if spec.delivery.mode == "operator" else None    # what a pool inherits
    settings = pool_settings(spec, version_resolver(spec, release.components["driver"].version, cat), cluster,
                             ctx.defaults)
    tag = {s.pool: release.matrix.os[s.os].tag for s in settings}
    for i, a in enumerate(settings):
        for b in settings[:i]:
            if tag[a.pool] != tag[b.pool] or a.driver == b.driver:
                continue
            if pools_overlap(a.selector, b.selector):
                same_version = a.version == b.version         # then only the RDMA / GDS / GDRCopy sidecars differ

                def what(s) -> str:
                    if not s.version:
                        return "a preinstalled driver"
                    return f"driver {s.version}" + (f" with {'+'.join(s.sidecars.tokens) or 'no sidecars'}"
                                                     if same_version else "")
                errors.append(at(("spec", "nodePools", i, "nodeSelector"), f"pool {a.pool!r} ({what(a)}) and pool "
                                 f"{b.pool!r} ({what(b)}) run different drivers on {tag[a.pool]}, but their "
                                 "nodeSelectors could match the same node, which would then get two driver "
                                 "DaemonSets; give both pools a label key with different values (e.g. "
                                 "node.kubernetes.io/instance-type)"))
    return errors


@rule("driver-daemonset-name", source="k8s.io/apimachinery pkg/util/validation IsValidLabelValue (63 characters)")
def check_driver_daemonset_names(ctx: Context) -> list:
    """A driver DaemonSet name (its `app` label) longer than 63 characters."""
    if not _variants_known(ctx):
        return []
    spec, release, cat = ctx.spec, ctx.release, ctx.cat
    return [ctx.at(("spec", "driver"), f"driver DaemonSet name {v.name!r} is {len(v.name)} characters; "
                   "its `app` label allows 63: use shorter kernel names, fewer distinct versions or fewer distinct "
                   "RDMA / GDS / GDRCopy settings among the pools")
            for v in driver_variants(spec, release, version_resolver(spec, release.components["driver"].version, cat),
                                     ctx.defaults)
            if len(v.name) > 63]


RULES = (
    (check_openshift, check_rhcos_builds_only_on_openshift, check_pool_os, check_pool_driver_branch),
    (check_precompiled, check_disjoint_driver_pools),      # need known OS and driver branches
    (check_driver_daemonset_names,),                       # needs valid driver settings
)


def applies(ctx: Context) -> bool:
    return ctx.release is not None and ctx.release.nodeLabels is not None
