"""DRA rules: what the DRA driver, the API server or the hardware would refuse in a profile's
`spec.dra`, its `allocation: dra` pools and `spec.claimTemplates`, refused at compile time, located, each
message with its reason and source (the DRA catalog, catalog/data/dra.yaml, names where each fact comes from).

Rules (validate/rules.py) over the typed profile, for profiles with a DRA pool, spec.dra or claim templates
(`applies`); the rules of spec.dra return nothing without it. The CEL selectors of gpuop's DeviceClasses are parsed
with cel-python (celpy) and type-checked here against the ResourceSlice attribute schema of the DRA
catalog: celpy evaluates but does not type-check, so `typecheck` walks celpy's parse tree
(`device.attributes['gpu.nvidia.com'].<name>` must be a published attribute of the device type, and a
comparison's literal must have the attribute's type).
"""

from __future__ import annotations

from gpuop.catalog import dra as dra_catalog
from gpuop.catalog import versions
from gpuop.kube import validation as kv
from gpuop.mig import geometry
from gpuop.plan import defaults as defaulting
from gpuop.plan import dra as dra_plan
from gpuop.plan.drivers import full_version
from gpuop.validate.rules import Context, Found, rule

SOURCE = "catalog/data/dra.yaml"
CHART_CLASSES = frozenset({"gpu.nvidia.com", "mig.nvidia.com", "vfio.gpu.nvidia.com",
                           "compute-domain-daemon.nvidia.com", "compute-domain-default-channel.nvidia.com"})


def _dra(ctx: Context) -> dra_catalog.DraCatalog:
    return ctx.derived("dra-catalog", dra_catalog.load)


def _dra_pools(ctx: Context) -> list:
    return ctx.derived("dra-pools", lambda: [(i, p) for i, p in enumerate(ctx.spec.nodePools) if dra_plan.is_dra(p)])


def _gates(ctx: Context) -> dict[str, bool]:
    return _dra(ctx).gates(ctx.spec.dra.featureGates if ctx.spec.dra else {})


def _version(ctx: Context):
    return _dra(ctx).version(ctx.spec.dra.version if ctx.spec.dra else None)


def _kube(ctx: Context) -> str | None:
    p = ctx.spec.platform
    if p.type == "openshift":
        release = ctx.cat.release(ctx.spec.release)
        return release.matrix.openshiftKubernetes.get(p.version) if release else None
    return p.version


# ----------------------------------------------------------------------------------- rules

@rule("dra-declared",
      source="NVIDIA DRA driver for GPUs (k8s-dra-driver-gpu publishes ResourceSlices and serves the claims)")
def check_dra_declared(ctx: Context):
    """allocation: dra (or claim templates) need spec.dra: the driver is what serves the claims."""
    out, dra = Found(ctx), _dra(ctx)
    if ctx.spec.dra is not None:
        if not _dra_pools(ctx):
            out.warn(("spec", "dra"), "no pool uses allocation: dra, so the DRA driver is not delivered and no "
                     "DeviceClass is written")
        return out
    for i, _ in _dra_pools(ctx):
        out.error(("spec", "nodePools", i, "allocation"), "allocation: dra needs spec.dra (the NVIDIA DRA driver "
                  "that publishes this pool's GPUs as ResourceSlices); add spec.dra: {version: "
                  f"\"{dra.version(None).version}\"}} or use allocation: devicePlugin")
    if ctx.spec.claimTemplates and not _dra_pools(ctx):
        out.error(("spec", "claimTemplates"), "claim templates need a pool with allocation: dra "
                  "(no pool uses DRA, so no DeviceClass would serve them)")
    return out


@rule("dra-version", source="catalog/data/dra.yaml (the DRA driver versions gpuop knows)")
def check_version(ctx: Context):
    """A DRA driver version the DRA catalog does not have."""
    out, dra = Found(ctx), _dra(ctx)
    if ctx.spec.dra is None:
        return out
    v = ctx.spec.dra.version
    if v is not None and dra.version(v) is None:
        out.error(("spec", "dra", "version"), f"{v!r} is not a DRA driver version of the DRA catalog; allowed: "
                  f"{', '.join(x.version for x in dra.versions)} ({SOURCE})")
    return out


@rule("dra-kubernetes",
      source="catalog/data/dra.yaml (resource.k8s.io/v1 served from 1.34; each driver release's Kubernetes floor)")
def check_kubernetes(ctx: Context):
    """resource.k8s.io/v1 is GA (served) from 1.34; the driver has its own floor."""
    out, dra = Found(ctx), _dra(ctx)
    if ctx.spec.dra is None:
        return out
    kube, version = _kube(ctx), _version(ctx)
    if kube is None or version is None:
        return out
    floor = versions.newest(dra.apiVersionSince, version.kubernetesMin)
    if versions.older(kube, floor):
        where = ("spec", "platform", "version")
        shown = f"Kubernetes {kube}" + (f" (OpenShift {ctx.spec.platform.version})" if ctx.spec.platform.type ==
                                        "openshift" else "")
        out.error(where, f"DRA needs Kubernetes >= {floor}, this cluster is {shown}: gpuop emits "
                  f"{dra.apiVersion} objects (GA, served from {dra.apiVersionSince}) and DRA driver "
                  f"{version.version} requires Kubernetes >= {version.kubernetesMin} (docs/prerequisites.md; {SOURCE})")
    return out


@rule("dra-driver-floor", source="catalog/data/dra.yaml (k8s-dra-driver-gpu docs/prerequisites.md: GPU driver floors)")
def check_driver_floor(ctx: Context):
    """GPU driver branch floors of DRA pools with gpuop's driver: 565 for GPUs, 570.158.01 for ComputeDomains."""
    out, dra = Found(ctx), _dra(ctx)
    if ctx.spec.dra is None:
        return out
    version = _version(ctx)
    if version is None:
        return out
    release = ctx.cat.release(ctx.spec.release)
    if release is None:
        return out
    default = release.components["driver"].version
    for i, p in _dra_pools(ctx):
        d = ctx.defaults.pools[i]
        if dra_plan.driver_root(d) == dra.driverRoot.host:
            continue                                      # the host's driver: gpuop cannot know its version
        where = ("spec", "nodePools", i, "driver", "version") if d.driver_version_own else ("spec", "driver", "version")
        full = full_version(d.driver_version, default, ctx.cat)
        if versions.older(full, version.driverMin):
            out.error(where, f"pool {p.name!r} (allocation: dra) gets GPU driver {full}, but DRA driver "
                      f"{version.version} needs >= {version.driverMin} for GPU allocation "
                      f"(docs/prerequisites.md; {SOURCE})")
        elif ctx.spec.dra.computeDomains.enabled and versions.older(full, version.computeDomainDriverMin):
            out.error(where, f"pool {p.name!r} gets GPU driver {full}, but ComputeDomains need >= "
                      f"{version.computeDomainDriverMin} (IMEXDaemonsWithDNSNames; docs/prerequisites.md; {SOURCE})")
    return out


@rule("dra-cdi", source="catalog/data/dra.yaml (k8s-dra-driver-gpu injects devices through CDI)")
def check_cdi(ctx: Context):
    """A container runtime without CDI, through which the DRA driver injects devices."""
    out, dra = Found(ctx), _dra(ctx)
    if ctx.spec.dra is None:
        return out
    rt = ctx.defaults.runtime
    if rt not in dra.cdiRuntimes:
        out.error(("spec", "containerRuntime"), f"the DRA driver injects devices through CDI, which {rt} does "
                  f"not enable; use {' or '.join(dra.cdiRuntimes)} (containerd 2.0+ / CRI-O 1.27+ have CDI on "
                  f"by default; docs/prerequisites.md; {SOURCE})")
    return out


@rule("dra-feature-gates", source="k8s-dra-driver-gpu pkg/featuregates/featuregates.go; catalog/data/dra.yaml")
def check_gates(ctx: Context):
    """Unknown DRA driver feature gates, gates newer than the driver, exclusive gates, gates without the ones
    they need."""
    out, dra = Found(ctx), _dra(ctx)
    if ctx.spec.dra is None:
        return out
    version = _version(ctx)
    set_ = ctx.spec.dra.featureGates
    for name in set_:
        gate = dra.featureGates.get(name)
        where = ("spec", "dra", "featureGates", name)
        if gate is None:
            out.error(where, f"{name!r} is not a feature gate of the DRA driver; allowed: "
                      f"{', '.join(dra.featureGates)} ({SOURCE}, pkg/featuregates/featuregates.go)")
        elif version is not None and versions.older(version.version, gate.since):
            out.error(where, f"{name} exists since DRA driver {gate.since}, not in {version.version} ({SOURCE})")
    gates = _gates(ctx)
    for ex in dra.exclusions:
        a, b = ex.gates
        if gates.get(a) and gates.get(b):
            where = ("spec", "dra", "featureGates", b if b in set_ else a)
            text = (f"feature gates {a} and {b} are mutually exclusive: "
                    + ("the docs say so, though the driver does not check it yet" if ex.docsOnly
                       else "the driver's binaries refuse to start") + f" ({ex.source})")
            (out.warn if ex.docsOnly else out.error)(where, text)
    for dep in dra.dependencies:
        if gates.get(dep.gate) and not gates.get(dep.needs):
            where = ("spec", "dra", "featureGates", dep.needs if dep.needs in set_ else dep.gate)
            out.error(where, f"feature gate {dep.gate} needs {dep.needs} on ({dep.source})")
    kube = _kube(ctx)
    if gates.get("DynamicMIG") and kube and versions.older(kube, "1.36"):
        out.warn(("spec", "dra", "featureGates", "DynamicMIG"), f"DynamicMIG on Kubernetes {kube} needs the "
                 "Kubernetes feature gate DRAPartitionableDevices on kube-apiserver and kube-scheduler (on by "
                 "default from 1.36); gpuop cannot see the control plane's gates (docs/guides/gpu-allocation/mig.md)")
    return out


@rule("dra-extended-resources",
      source="Kubernetes KEP 5004 (DRAExtendedResource); k8s-dra-driver-gpu chart templates/validation.yaml")
def check_extended_resources(ctx: Context):
    """spec.dra.extendedResources on a Kubernetes version without extended resources for DRA."""
    out, dra = Found(ctx), _dra(ctx)
    if ctx.spec.dra is None:
        return out
    kube = _kube(ctx)
    if ctx.spec.dra.extendedResources and kube and versions.older(kube, dra.extendedResourceSince):
        out.error(("spec", "dra", "extendedResources"), f"extendedResourceName (KEP 5004) needs Kubernetes >= "
                  f"{dra.extendedResourceSince} with the DRAExtendedResource gate on kube-apiserver, "
                  f"kube-scheduler, kube-controller-manager and kubelet; this cluster is Kubernetes {kube} "
                  f"(chart/templates/validation.yaml; {SOURCE})")
    return out


@rule("dra-pools", source="k8s-dra-driver-gpu api/nvidia.com/resource/v1beta1/validate.go; catalog/data/dra.yaml")
def check_pools(ctx: Context):
    """Per DRA pool: sharing gates, DynamicMIG vs the MIG manager, the GPU known to selectors."""
    out, dra = Found(ctx), _dra(ctx)
    if ctx.spec.dra is None:
        return out
    gates, dynamic = _gates(ctx), _gates(ctx).get("DynamicMIG", False)
    roots = {}
    for i, p in _dra_pools(ctx):
        base = ("spec", "nodePools", i)
        s = p.sharing
        if s is not None:
            for kind in ("timeSlicing", "mps"):
                gate = dra.sharingGates[kind]
                if getattr(s, kind) is not None and not gates.get(gate):
                    out.error(base + ("sharing", kind), f"{kind} on a DRA pool becomes the driver's opaque "
                              f"config, which it rejects without feature gate {gate}; set "
                              f"spec.dra.featureGates.{gate}: true (api/nvidia.com/resource/v1beta1/validate.go; "
                              f"{SOURCE})")
            if s.timeSlicing is not None and s.mps is not None:
                out.error(base + ("sharing",), "timeSlicing and mps cannot be active on the same GPU "
                          "(docs/guides/gpu-allocation/time-slicing.md); keep one")
        layout = p.mig.layout if p.mig else {}
        if dynamic and layout and ctx.spec.migManager.enabled:
            out.error(base + ("mig", "layout"), f"DynamicMIG is on, so the DRA driver creates and destroys MIG "
                      f"devices on pool {p.name!r} itself and destroys partitions it did not create at startup, "
                      "but this layout would be applied by the MIG manager; drop the layout (the claims pick "
                      "profiles) or turn DynamicMIG off (FACTS §5, docs/concepts/gpu-allocation.md)")
        if p.gpu in ctx.cat.gpus and p.gpu not in dra.products:
            out.warn(base + ("gpu",), f"the DRA catalog has no NVML product name for {p.gpu}, so the pool's "
                     "DeviceClasses select on driver, device type and MIG profile only: they also match other "
                     f"GPU models' devices ({SOURCE} products)")
        roots.setdefault(dra_plan.driver_root(ctx.defaults.pools[i]), i)
    if len(roots) > 1:
        i = max(roots.values())
        out.error(("spec", "nodePools", i, "driver", "enabled"), "DRA pools disagree on where the GPU driver "
                  "is (gpuop's driver container at /run/nvidia/driver vs the host's /), but the DRA driver's "
                  "chart has one nvidiaDriverRoot; give every allocation: dra pool the same driver setting")
    by_gpu: dict[str, list[int]] = {}
    for i, p in _dra_pools(ctx):
        by_gpu.setdefault(p.gpu, []).append(i)
    for gpu, idxs in by_gpu.items():
        if len(idxs) > 1:
            names = ", ".join(ctx.spec.nodePools[j].name for j in idxs)
            out.warn(("spec", "nodePools", idxs[1], "gpu"), f"DRA pools {names} have the same GPU model ({gpu}); "
                     "a DeviceClass selects devices, not nodes, so each of their classes matches the other "
                     "pools' devices too")
    return out


def _compatible(a: dict, b: dict) -> bool:
    """Some node can carry both selectors: no label key with two different values."""
    return all(a[k] == b[k] for k in a.keys() & b.keys())


@rule("dra-double-allocation", source="NVIDIA DRA driver for GPUs: never beside the device plugin on one node")
def check_double_allocation(ctx: Context):
    """No node may match a DRA pool and a device-plugin pool: both would hand out its GPUs."""
    out = Found(ctx)
    pools = ctx.spec.nodePools
    for i, p in _dra_pools(ctx):
        for j, q in enumerate(pools):
            if dra_plan.is_dra(q) or q.gpu != p.gpu or not _compatible(p.nodeSelector, q.nodeSelector):
                continue
            out.error(("spec", "nodePools", i, "nodeSelector"), f"pool {p.name!r} (allocation: dra) and pool "
                      f"{q.name!r} (device plugin) can select the same nodes: both have GPU {p.gpu} and their "
                      "nodeSelectors do not exclude each other (no label key with different values), so such a "
                      "node would run the device plugin and the DRA kubelet plugin and hand out its GPUs twice; "
                      "give the pools nodeSelectors that differ in one label's value")
    return out


@rule("dra-claim-templates",
      source="Kubernetes resource.k8s.io/v1 ResourceClaimTemplate; catalog/data/mig.yaml; catalog/data/dra.yaml")
def check_claims(ctx: Context):
    """Claim templates declared twice, on a pool without DRA, or asking for MIG profiles or counts the pool
    does not offer."""
    out = Found(ctx)
    if ctx.spec.dra is None:
        return out
    dynamic = _gates(ctx).get("DynamicMIG", False)
    pools = {p.name: (i, p) for i, p in enumerate(ctx.spec.nodePools)}
    seen: dict[tuple[str, str], int] = {}
    for k, t in enumerate(ctx.spec.claimTemplates):
        base = ("spec", "claimTemplates", k)
        if (t.namespace, t.name) in seen:
            out.error(base + ("name",), f"claim template {t.namespace}/{t.name} is declared twice (also "
                      f"spec.claimTemplates[{seen[(t.namespace, t.name)]}]); names are unique per namespace")
        seen.setdefault((t.namespace, t.name), k)
        found = pools.get(t.pool)
        if found is None or not dra_plan.is_dra(found[1]):
            dra_names = [p.name for _, p in _dra_pools(ctx)]
            out.error(base + ("pool",), f"{t.pool!r} is not a pool with allocation: dra; allowed: "
                      f"{', '.join(dra_names) or 'none'}")
            continue
        _, pool = found
        offered = dra_plan.pool_devices(pool, dynamic)
        family = geometry.family_of(pool.gpu, ctx.cat.gpus)
        layout = defaulting.layout_of(pool)
        mig_counts: dict[str, int] = {}
        for n, d in enumerate(t.devices):
            where = base + ("devices", n, "profile")
            if d.profile == dra_plan.WHOLE_GPU:
                if layout and not dynamic:
                    out.error(where, f"pool {pool.name!r} partitions its GPUs with static MIG "
                              f"({geometry.describe(layout)}), and a GPU in MIG mode is offered as its MIG devices, "
                              "never whole (FACTS §5); ask for a profile of the layout")
                continue
            if family is None or family.profile(d.profile) is None:
                allowed = ", ".join(family.names) if family else f"none ({pool.gpu} is not MIG-capable)"
                out.error(where, f"{d.profile!r} is not a MIG profile of {pool.gpu}; allowed: gpu, {allowed} "
                          "(catalog/data/mig.yaml)")
                continue
            if not dynamic and d.profile not in layout:
                out.error(where, f"{d.profile!r} is not in the static MIG layout of pool {pool.name!r} "
                          f"({geometry.describe(layout) if layout else 'none'}): the DRA driver only offers the MIG "
                          "devices that exist when its kubelet plugin starts (FACTS §5); add it to the layout or "
                          "turn on DynamicMIG")
                continue
            mig_counts[d.profile] = mig_counts.get(d.profile, 0) + d.count
        if dynamic and mig_counts:
            result = geometry.check_layout(pool.gpu, mig_counts, gpus=ctx.cat.gpus)
            if not result.ok:
                out.error(base + ("devices",), f"under DynamicMIG a claim's MIG devices are created on one GPU, "
                          f"and {geometry.describe(mig_counts)} has no placement on one {pool.gpu}: "
                          + "; ".join(result.reasons))
        gpus = dra_plan.gpus_per_node(pool)
        if gpus:
            for n, d in enumerate(t.devices):
                per_node = offered.get(d.profile, 0) * gpus
                total = sum(x.count for x in t.devices if x.profile == d.profile)
                if d.profile in offered and total > per_node:
                    out.error(base + ("devices", n, "count"), f"the claim asks for {total} x {d.profile}, but one "
                              f"node of pool {pool.name!r} offers {per_node} ({offered[d.profile]} per GPU x "
                              f"{gpus} GPUs); a claim's devices all come from one node")
                    break
    return out


@rule("dra-device-classes",
      source="k8s.io/apimachinery IsDNS1123Subdomain; the DRA driver chart's DeviceClasses; the ResourceSlice "
             "attributes of catalog/data/dra.yaml")
def check_device_classes(ctx: Context):
    """Names valid DNS subdomains, unique, never the chart's; selectors parse and type-check."""
    out = Found(ctx)
    if ctx.spec.dra is None:
        return out
    plan = dra_plan.build(ctx.spec, ctx.defaults)
    if plan is None:
        return out
    index = {p.name: i for i, p in enumerate(ctx.spec.nodePools)}
    seen: dict[str, str] = {}
    ext: dict[str, str] = {}
    for c in plan.device_classes:
        where = ("spec", "nodePools", index[c.pool], "name")
        if kv.is_dns1123_subdomain(c.name):
            out.error(where, f"DeviceClass name {c.name!r} is not a valid DNS-1123 subdomain (lowercase "
                      "alphanumerics, '-' and '.', at most 253 characters)")
        if c.name in CHART_CLASSES:
            out.error(where, f"DeviceClass {c.name!r} is one the DRA driver's chart creates")
        if c.name in seen:
            out.error(where, f"DeviceClass {c.name!r} would be emitted twice (pools {seen[c.name]!r} and {c.pool!r})")
        seen.setdefault(c.name, c.pool)
        if c.extended_resource:
            if c.extended_resource in ext and ext[c.extended_resource] != c.pool:
                out.error(where, f"extendedResourceName {c.extended_resource} would be served by the DeviceClasses "
                          f"of pools {ext[c.extended_resource]!r} and {c.pool!r}; Kubernetes maps one extended "
                          "resource to one DeviceClass, so set spec.dra.extendedResources only with one DRA pool "
                          "per device")
            ext.setdefault(c.extended_resource, c.pool)
        for problem in typecheck(c.expression, "mig" if c.device != dra_plan.WHOLE_GPU else "gpu", _dra(ctx)):
            out.error(where, f"DeviceClass {c.name!r} selector: {problem}")
    return out


@rule("dra-gpu-client-contract", severity="warning",
      source="NVIDIA GPU Operator v26.7.0 release notes (nvidia.com/gpu.deploy.client, PR 2607); mig-parted PR 426 "
      "(v0.15.0); k8s-driver-manager v0.12.0; catalog/data/dra.yaml clientLabel")
def check_gpu_client_contract(ctx: Context):
    """A DRA pool under a MIG manager (with a MIG layout it applies) or a driver manager (with gpuop's driver) older
    than the one that stops GPU clients (DaemonSets selecting nvidia.com/gpu.deploy.client): the pinned MIG manager,
    else the stack release's managers (an older spec.release). The DRA kubelet plugin keeps its GPU handles through
    the MIG change or the driver reload."""
    out, dra, spec = Found(ctx), _dra(ctx), ctx.spec
    release = ctx.release
    picked = ("spec", "release") if spec.release else ("spec",)
    pinned = spec.migManager.version
    mig = (spec.migManager.enabled and not dra_plan.dynamic_mig(spec)     # DynamicMIG: the DRA driver partitions
           and any(p.mig and p.mig.layout for _, p in _dra_pools(ctx)))
    running = pinned or release.components["migManager"].version
    if mig and versions.older(running, dra.clientMigManagerSince):
        fix = (f"use {dra.clientMigManagerSince} or later (drop spec.migManager.version for the release's)" if pinned
               else f"use a stack release whose MIG manager is {dra.clientMigManagerSince} or later (spec.release)")
        out.warn(("spec", "migManager", "version") if pinned else picked,
                 f"MIG manager {running}{'' if pinned else f' (stack release {release.name})'} does not stop the DRA "
                 f"kubelet plugin for a MIG change: only MIG managers from {dra.clientMigManagerSince} pause "
                 f"{dra.clientLabel}, the label the plugin's nodeSelector carries, so the plugin keeps its GPU handles "
                 f"and the GPU reset of a MIG mode change can fail; {fix}")
    manager = release.components["driverManager"].version
    gpuops_driver = any(ctx.defaults.pools[i].driver for i, _ in _dra_pools(ctx))
    if gpuops_driver and versions.older(manager, dra.clientDriverManagerSince):
        out.warn(picked, f"driver manager {manager} (stack release {release.name}) does not stop the DRA kubelet "
                 f"plugin for a driver reload: only driver managers from {dra.clientDriverManagerSince} pause "
                 f"{dra.clientLabel}, so the plugin keeps its GPU handles while the driver is unloaded and the reload "
                 f"can fail; use a stack release whose driver manager is {dra.clientDriverManagerSince} or later "
                 "(spec.release)")
    return out


def applies(ctx: Context) -> bool:
    spec = ctx.spec
    return bool(_dra_pools(ctx)) or spec.dra is not None or bool(spec.claimTemplates)


RULES = (
    (check_version,),             # an unknown version: every other rule would read a missing catalog entry
    (check_dra_declared, check_kubernetes, check_driver_floor, check_cdi, check_gates, check_extended_resources,
     check_pools, check_double_allocation, check_claims, check_device_classes, check_gpu_client_contract),
)


# ----------------------------------------------------------------------------------- CEL

_TYPES = {"string": "string", "int": "int", "bool": "bool", "version": "version"}
_WRAPPERS = {"expr", "conditionalor", "conditionaland", "relation", "addition", "multiplication", "unary",
             "member", "primary"}
_ENV: list = []


def _cel():
    """celpy and its Environment, made on first use: building lark's CEL parser costs ~1 s, and only
    profiles with DRA selectors need it (every process of a fleet compile imports this module)."""
    if not _ENV:
        import celpy

        _ENV.extend((celpy, celpy.Environment()))
    return _ENV


def _tree(t) -> bool:
    """A node of celpy's parse tree (a lark Tree: `data` names the grammar rule), not a token."""
    return hasattr(t, "data") and hasattr(t, "children")


def _unwrap(t):
    while _tree(t) and t.data in _WRAPPERS and len(t.children) == 1:
        t = t.children[0]
    return t


def _literal(t) -> tuple[str, object] | None:
    t = _unwrap(t)
    if _tree(t) and t.data == "literal":
        tok = str(t.children[0])
        if tok[:1] in "'\"":
            return "string", tok[1:-1]
        if tok in ("true", "false"):
            return "bool", tok == "true"
        if kv.is_integer_string(tok) and not tok.startswith("+"):
            return "int", int(tok)
        return "other", tok
    return None


def typecheck(expression: str, device_type: str, cat: dra_catalog.DraCatalog) -> list[str]:
    """Parse `expression` with celpy and check it against the ResourceSlice schema for `device_type`:
    every `device.attributes['<driver>'].<name>` is an attribute the driver publishes on that device type,
    every `device.capacity['<driver>'].<name>` a capacity it publishes, the only variable is `device`, and
    an attribute compared with a literal has the literal's type. Returns the problems (empty: ok)."""
    celpy, env = _cel()
    try:
        tree = env.compile(expression)
    except celpy.CELParseError as exc:
        return [f"does not parse as CEL: {str(exc).splitlines()[0]}"]
    problems: list[str] = []

    def attr_type(t) -> str | None:
        """The schema type of `device.<...>` access `t`, None when `t` is not one."""
        t = _unwrap(t)
        if not (_tree(t) and t.data == "member_dot"):
            return None
        inner, name = _unwrap(t.children[0]), str(t.children[1])
        if _tree(inner) and inner.data == "ident" and str(inner.children[0]) == "device":
            return "string" if name == "driver" else None
        if _tree(inner) and inner.data == "member_index":
            owner, key = _unwrap(inner.children[0]), _literal(inner.children[1])
            if _tree(owner) and owner.data == "member_dot" and key and key[0] == "string":
                base, section = _unwrap(owner.children[0]), str(owner.children[1])
                if _tree(base) and base.data == "ident" and str(base.children[0]) == "device":
                    if key[1] != cat.driver:
                        problems.append(f"{section}[{key[1]!r}] names another driver than {cat.driver}")
                        return None
                    table = cat.attributes if section == "attributes" else cat.capacity if section == "capacity" else None
                    if table is None:
                        problems.append(f"device.{section} is not a field of a ResourceSlice device")
                        return None
                    entry = table.get(name)
                    if entry is None or device_type not in entry.devices:
                        problems.append(f"{section} {name!r} is not published on {device_type} devices by "
                                        f"{cat.driver} (allowed: "
                                        f"{', '.join(n for n, e in table.items() if device_type in e.devices)})")
                        return None
                    return _TYPES.get(getattr(entry, "type", "quantity"), "quantity")
        return None

    for node in tree.iter_subtrees():
        if node.data == "ident" and str(node.children[0]) != "device":
            problems.append(f"unknown variable {str(node.children[0])!r} (a DeviceClass selector sees `device` only)")
        if node.data == "relation" and len(node.children) == 2 and _tree(node.children[0]) \
                and node.children[0].data in ("relation_eq", "relation_ne"):
            left, right = node.children[0].children[0], node.children[1]
            for a, b in ((left, right), (right, left)):
                typ, lit = attr_type(a), _literal(b)
                if typ and lit and lit[0] != typ:
                    problems.append(f"compares {typ} with a {lit[0]} literal {lit[1]!r}"
                                    + (" (versions compare with semver(), e.g. "
                                       "device.attributes['gpu.nvidia.com'].driverVersion.compareTo(semver('580.0.0')) >= 0)"
                                       if typ == "version" else ""))
                    break
        if node.data == "member_dot":
            attr_type(node)
    return list(dict.fromkeys(problems))
