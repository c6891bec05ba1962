"""Distribution rules: where `spec.os` is needed, what a Kubernetes distribution allows, and
what a managed node image already installs.

- os-required: a pool whose driver gpuop installs needs its OS (the driver image tag is
  <version>-<os tag>); with every driver preinstalled the OS is optional (EKS AL2023 / Bottlerocket
  profiles have nothing to name it for: the toolkit and the other operand images are the same on every OS).
- distribution-platform: distributions are Kubernetes ones (OpenShift is spec.platform.type).
- distribution-runtime: k3s, RKE2, k0s and MicroK8s run their own containerd.
- containerd-major: only meaningful with containerd.
- second-copy: eks, gke and aks node images install the driver (eks, aks: the toolkit too); a profile that
  would install another copy is refused with the reason, on the field that turns it on.
- operand-env: spec.{driver,toolkit,devicePlugin}.env may replace a name gpuop sets (warning; the names
  are each component's GPUOP_ENV), never the driver's DRIVER_CONFIG_DIGEST; no name twice.
- pod-labels: spec.daemonsets.labels never replaces a label the DaemonSets select their pods by.
- driver-config-files: repoConfig / certConfig only for driver OSes the Operator has a path for.
- nri-plugin: spec.cdi.nriPluginEnabled only in operator mode, on a runtime NVIDIA supports it on and at or
  above its floor (catalog distributions.yaml nri: containerd 1.7.30+ of 1.7, 2.1, 2.2, 2.3; CRI-O 1.34+,
  whose minor is the cluster's Kubernetes minor) and on a GPU Operator release that has it on that runtime (nri
  operator: containerd v26.3.0, CRI-O v26.3.2); a containerd version the profile does not give is a warning.
- stack-only: what operator mode cannot pass to NVIDIA's operator is refused by validate/operator.py.
- driver-sidecars: RDMA / GDS / GDRCopy (spec.driver's, and each pool's own, reported at the pool's field)
  need a driver DaemonSet; GDS and GDRCopy not with precompiled drivers, GDS only with the open kernel
  modules (the Operator's run-time errors, at compile time).
"""

from __future__ import annotations

from gpuop.catalog import distributions as dist_catalog
from gpuop.catalog import versions
from gpuop.components import env_names   # not the construct modules: they start Node
from gpuop.errors import Issue, field_path
from gpuop.plan import defaults as defaulting
from gpuop.plan.defaults import Defaults
from gpuop.validate.rules import Context, rule

WHAT = {"driver": "NVIDIA driver", "toolkit": "NVIDIA container toolkit"}


def _written(ctx: Context, *path) -> bool:
    node = ctx.loaded.data
    for part in path:
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node):
            node = node[part]
        else:
            return False
    return True


@rule("os-required", source="NVIDIA driver container images: tags <version>-<os tag> (nvcr.io/nvidia/driver)")
def check_os_required(ctx: Context) -> list:
    """A profile whose driver gpuop installs without spec.os (the driver image tag names the node OS)."""
    spec = ctx.spec
    if spec.os is not None or "driver" in dist_catalog.load().get(spec.platform.distribution).provides:
        return []       # a managed image's driver: second-copy says what is wrong, not the OS
    for pool in ctx.defaults.pools:
        if pool.os is None and pool.driver:
            why = (f"pool {pool.name!r} gets its driver from gpuop (spec.nodePools[].driver.enabled)"
                   if pool.driver_own else "spec.driver.enabled is true")
            return [ctx.at(("spec", "os"), f"spec.os is required: {why}, and the driver DaemonSet's image tag "
                           "names the node OS (<version>-<os tag>); set spec.os (e.g. ubuntu24.04), or "
                           "spec.driver.enabled: false where the nodes have a preinstalled driver")]
    return []


@rule("distribution-platform",
      source="catalog/data/distributions.yaml (Kubernetes distributions; OpenShift is a platform type)")
def check_distribution_platform(ctx: Context) -> list:
    """A Kubernetes distribution named on an OpenShift platform."""
    p = ctx.spec.platform
    if p.type == "openshift" and p.distribution not in (None, "generic"):
        return [ctx.at(("spec", "platform", "distribution"), f"{p.distribution} is a Kubernetes distribution; "
                       "OpenShift is spec.platform.type: openshift; remove the field")]
    return []


@rule("distribution-runtime", source="catalog/data/distributions.yaml (k3s, RKE2, k0s and MicroK8s embed containerd)")
def check_distribution_runtime(ctx: Context) -> list:
    """A container runtime other than the one the distribution runs itself."""
    spec = ctx.spec
    d = dist_catalog.load().get(spec.platform.distribution)
    rt = spec.containerRuntime
    if d.runtimes and rt is not None and rt not in d.runtimes:
        return [ctx.at(("spec", "containerRuntime"), f"{spec.platform.distribution} runs its own "
                       f"{', '.join(d.runtimes)}, not {rt}; allowed: {', '.join(d.runtimes)} (or omit the field)")]
    return []


@rule("containerd-major", source="NVIDIA container toolkit: containerd config versions 2 and 3 (containerd 1.x, 2.x)")
def check_containerd_major(ctx: Context) -> list:
    """spec.platform.containerdMajor / containerdVersion on nodes that do not run containerd, or disagreeing."""
    spec = ctx.spec
    rt = ctx.defaults.runtime
    out = []
    for key in ("containerdMajor", "containerdVersion"):
        if getattr(spec.platform, key) is not None and rt != "containerd":
            out.append(ctx.at(("spec", "platform", key), f"{key} is for containerd nodes; this cluster runs {rt}; "
                              "remove the field"))
    major, version = spec.platform.containerdMajor, spec.platform.containerdVersion
    if rt == "containerd" and major is not None and version is not None and version.split(".")[0] != str(major):
        out.append(ctx.at(("spec", "platform", "containerdVersion"), f"containerd {version} is not containerd "
                          f"{major}.x (spec.platform.containerdMajor: {major}); make the two agree"))
    return out


@rule("second-copy",
      source="catalog/data/distributions.yaml (EKS, GKE and AKS GPU node images install the driver; EKS and AKS the "
             "toolkit too)")
def check_second_copy(ctx: Context) -> list:
    """A driver or toolkit gpuop would install beside the one a managed node image already has."""
    spec = ctx.spec
    name = spec.platform.distribution
    d = dist_catalog.load().get(name)
    if not d.managed:
        return []
    errors = []
    for comp in d.provides:
        reason = (f"{name}'s GPU node image ({d.image}) already installs the {WHAT[comp]}; gpuop would install "
                  "a second copy")
        if getattr(spec, comp).enabled:
            field = ("spec", comp, "enabled")
            # an omitted `enabled` (true by default) is shown on the distribution line that makes it wrong
            shown = field if _written(ctx, *field) else ("spec", "platform", "distribution")
            f, line, col = ctx.loaded.positions.of(shown)
            errors.append(Issue(f, line, col, field_path(field), f"{reason}: set spec.{comp}.enabled: false"))
        if comp != "driver":
            continue
        for i, pool in enumerate(spec.nodePools):
            if pool.driver is not None and pool.driver.enabled:
                errors.append(ctx.at(("spec", "nodePools", i, "driver", "enabled"),
                                     f"{reason} on pool {pool.name!r}: remove the field or set it to false"))
    return errors


OPERAND_ENV = {"driver": env_names.DRIVER, "toolkit": env_names.TOOLKIT, "devicePlugin": env_names.DEVICE_PLUGIN}
RESERVED_POD_LABELS = ("app", "app.kubernetes.io/component", "app.kubernetes.io/part-of")


@rule("operand-env", source="components/env_names.py (the env gpuop sets on each operand); Kubernetes keeps the "
      "last of duplicate env names")
def check_operand_env(ctx: Context) -> list:
    """A name gpuop sets itself may be overridden, with a warning; DRIVER_CONFIG_DIGEST never; a name twice
    in one list is an error (the merge would keep the last silently)."""
    out = []
    for key, ours in OPERAND_ENV.items():
        seen: dict[str, int] = {}
        for i, e in enumerate(getattr(ctx.spec, key).env):
            where = ("spec", key, "env", i, "name")
            if e.name in seen:
                out.append(ctx.at(where, f"{e.name} is also spec.{key}.env[{seen[e.name]}]; each name once"))
                continue
            seen[e.name] = i
            if key == "driver" and e.name == env_names.DIGEST_ENV:
                out.append(ctx.at(where, f"{e.name} is computed by gpuop from the driver's install config (it "
                                  "decides whether a node rebuilds its modules); remove it"))
            elif e.name in ours and not (key == "toolkit" and e.name == "RUNTIME_CONFIG_SOURCE"
                                         and not _derives_config_source(ctx)):
                out.append(ctx.at(where, f"{e.name} is set by gpuop on the {key} container; your value replaces "
                                  "gpuop's (make sure the component still works with it)", "warning"))
    return out


def _derives_config_source(ctx: Context) -> bool:
    """gpuop sets RUNTIME_CONFIG_SOURCE only where the distribution names the file containerd is rendered
    from (k3s, RKE2, k0s): elsewhere (GKE's documented workaround among them) the name is the user's alone."""
    d = dist_catalog.load().get(ctx.spec.platform.distribution)
    return bool(d.containerd and d.containerd.configSource)


@rule("pod-labels", source="the GPU DaemonSets' selectors (app, app.kubernetes.io/component, part-of); a "
      "DaemonSet's spec.selector is immutable")
def check_pod_labels(ctx: Context) -> list:
    """spec.daemonsets.labels replacing a label the DaemonSets select their pods by."""
    return [ctx.at(("spec", "daemonsets", "labels", k), f"{k} is a label the GPU DaemonSets select their pods by or "
                   f"gpuop sets itself; reserved: {', '.join(RESERVED_POD_LABELS)}")
            for k in ctx.spec.daemonsets.labels if k in RESERVED_POD_LABELS]


@rule("driver-config-files", source="NVIDIA/gpu-operator object_controls.go (repoConfig / certConfig "
      "mount paths per OS)")
def check_driver_config_files(ctx: Context) -> list:
    """repoConfig / certConfig: every OS a driver DaemonSet runs on needs a known path; two ConfigMaps."""
    spec, out = ctx.spec, []
    d = spec.driver
    if d.repoConfig and d.certConfig and d.repoConfig.configMapName == d.certConfig.configMapName:
        out.append(ctx.at(("spec", "driver", "certConfig", "configMapName"), "repoConfig and certConfig name the "
                          "same ConfigMap; use two (each is mounted as its own volume)"))
    for field, paths in (("repoConfig", env_names.REPO_CONFIG_PATHS),
                         ("certConfig", env_names.CERT_CONFIG_PATHS)):
        if getattr(d, field) is None:
            continue
        if not getattr(d, field).files and spec.delivery.mode != "operator":
            out.append(ctx.at(("spec", "driver", field), f"{field}.files: required in stack mode (gpuop mounts "
                              "each listed key; only NVIDIA's operator reads the keys of the live ConfigMap)"))
        for pool in ctx.defaults.pools:
            os_name = pool.os
            entry = ctx.release.matrix.os.get(os_name) if os_name else None
            os_id = entry.select.get("osId") if entry else None
            if pool.driver and os_id is not None and os_id not in paths:
                out.append(ctx.at(("spec", "driver", field), f"the driver image for {os_name} (pool {pool.name!r}) "
                                  f"reads no {field} files: the Operator knows paths for {', '.join(sorted(paths))}"))
                break
    return out


SIDECAR_NAMES = {"gds": "GPUDirect Storage driver (nvidia-fs)", "gdrcopy": "GDRCopy"}


def sidecar_levels(spec) -> list[tuple[tuple, list[str], object]]:
    """(where, the sidecars turned on there, the pool or None) for spec.driver and every pool's driver: a
    pool's rule is reported at the pool's own field, on what the pool itself turns on."""
    d = spec.driver
    out = [(("spec", "driver"), [f for f, on in (("rdma", d.rdma.enabled), ("gds", d.gds), ("gdrcopy", d.gdrcopy))
                                 if on], None)]
    for i, pool in enumerate(spec.nodePools):
        pd = pool.driver
        if pd is None:
            continue
        on = [f for f, v in (("rdma", pd.rdma.enabled if pd.rdma else None), ("gds", pd.gds), ("gdrcopy", pd.gdrcopy))
              if v]
        out.append((("spec", "nodePools", i, "driver"), on, pool))
    return out


def no_driver_reason(spec, pool, defaults: Defaults | None = None) -> str | None:
    """Why sidecars at this level have no driver to run beside (None: some driver DaemonSet runs there);
    `defaults`: the defaulting pass's result (Context.defaults), computed here when omitted."""
    defaults = defaults or defaulting.of(spec)
    if pool is None:
        return None if defaults.any_driver else "no pool gets one (driver.enabled is false everywhere)"
    if next(p for p in defaults.pools if p.name == pool.name).driver:
        return None
    d = dist_catalog.load().get(spec.platform.distribution)
    if "driver" in d.provides:
        return f"pool {pool.name!r} gets none: {spec.platform.distribution}'s GPU node image installs it ({d.image})"
    return f"pool {pool.name!r} gets none (its driver.enabled is false: a preinstalled driver)"


def gds_open_modules(at, where: tuple, spec, extras) -> list:
    """GDS from openFrom on loads only beside the open kernel modules (transformGDSContainer refuses others)."""
    if extras is None or spec.driver.kernelModuleType == "open":
        return []
    return [at(where + ("gds",), f"GPUDirect Storage {extras.gds.version} needs the open kernel modules (from "
               f"{extras.gds.openFrom} on): set spec.driver.kernelModuleType: open")]


def driver_sidecar_issues(ctx: Context, where: tuple, wanted: list[str], pool) -> list:
    """One level's RDMA / GDS / GDRCopy (spec.driver, or a pool's driver): the same rules at both levels."""
    spec = ctx.spec
    if not wanted:
        return []
    reason = no_driver_reason(spec, pool, ctx.defaults)
    if reason is not None:
        return [ctx.at(where + (f,), f"{f} runs beside the driver gpuop installs, and {reason}") for f in wanted]
    out = []
    modules = [f for f in wanted if f in SIDECAR_NAMES]
    if spec.platform.type == "openshift":
        out += [ctx.at(where + (f,), f"{f} on OpenShift builds with the Driver Toolkit sidecar, which gpuop does not "
                       "render for it; use spec.delivery.mode: operator") for f in modules]
    if spec.driver.precompiled:
        out += [ctx.at(where + (f,), f"{SIDECAR_NAMES[f]} is not supported along with precompiled NVIDIA drivers "
                       "(it builds its module against the driver's sources)") for f in modules]
    extras = dist_catalog.driver_extras().get(ctx.release.name)
    if "gds" in wanted:
        out += gds_open_modules(ctx.at, where, spec, extras)
    if extras is None and modules:
        out.append(ctx.at(where, f"stack release {ctx.release.name} names no GDS / GDRCopy images "
                          "(catalog/data/driver-extras.yaml)"))
    return out


@rule("driver-sidecars", source="NVIDIA/gpu-operator object_controls.go transformGDSContainer / "
      "transformGDRCopyContainer; catalog/data/driver-extras.yaml")
def check_driver_sidecars(ctx: Context) -> list:
    """RDMA / GDS / GDRCopy, cluster-wide and per pool: they need a driver DaemonSet; GDS and GDRCopy not with
    precompiled drivers, GDS only with the open kernel modules (the Operator's run-time refusals,
    transformGDSContainer / transformGDRCopyContainer, at compile time), and what gpuop does not build.
    Operator mode: validate/operator.py (spec.driver's are refused there, pools' go into NVIDIADriver CRs)."""
    if ctx.spec.delivery.mode == "operator":
        return []
    return [i for where, wanted, pool in sidecar_levels(ctx.spec)
            for i in driver_sidecar_issues(ctx, where, wanted, pool)]


# what only NVIDIA's operator reads: gpuop's stack names its ConfigMaps and its default device-plugin config
# itself (components/), so in stack mode these would change nothing: refused rather than ignored
OPERATOR_ONLY = (("spec", "delivery", "operator", "pullSecrets"), ("spec", "delivery", "operator", "env"),
                 ("spec", "delivery", "operator", "devicePluginConfig"),
                 ("spec", "delivery", "operator", "migManagerConfig"),
                 ("spec", "delivery", "operator", "dcgmMetricsConfig"),
                 ("spec", "delivery", "operator", "gpuPodDeletionTimeoutSeconds"),
                 ("spec", "delivery", "operator", "nvidiaNodeFeatureRules"),
                 ("spec", "delivery", "operator", "nfdValues"), ("spec", "delivery", "operator", "operatorValues"))


@rule("operator-only-field", source="NVIDIA/gpu-operator ClusterPolicy CRD: names and settings only the "
      "operator reads (OPERATOR_ONLY)")
def check_operator_only_in_stack_mode(ctx: Context) -> list:
    """A setting only NVIDIA's operator reads (its ConfigMap names, per-component secrets and env) in stack mode,
    where it would change nothing."""
    if ctx.spec.delivery.mode == "operator":
        return []
    return [ctx.at(path, f"{'.'.join(path)} names what NVIDIA's operator reads; gpuop's stack names its "
                   "ConfigMaps and the device plugin's default config (`default`) itself, pulls every image "
                   "with spec.images.pullSecrets and sets its operands' env; remove it or use "
                   "spec.delivery.mode: operator")
            for path in OPERATOR_ONLY if _written(ctx, *path)]


NRI = ("spec", "cdi", "nriPluginEnabled")


def _nri_operator_floor(ctx: Context, runtime: str, operator: str, first: str, source: str) -> Issue:
    """The NRI plugin on a GPU Operator release older than the first with it on this runtime, located at the
    version that picks the operator (its pin, else spec.release, else the switch)."""
    spec = ctx.spec
    at = (("spec", "delivery", "operator", "version") if spec.delivery.operator.version
          else ("spec", "release") if spec.release else NRI)
    fit = sorted((r for r in ctx.cat.releases if not versions.older(r.operatorVersion, first)),
                 key=lambda r: versions.key(r.operatorVersion))
    use = f"GPU Operator {fit[0].operatorVersion} (stack release {fit[0].name}) or later" if fit else f"GPU Operator {first} or later"
    return ctx.at(at, f"the NRI plugin on {runtime} needs GPU Operator {first} or later; this cluster runs GPU Operator "
                  f"{operator} (stack release {ctx.release.name}), whose chart and ClusterPolicy have no "
                  f"cdi.nriPluginEnabled; use {use}, or leave {'.'.join(NRI)} off ({source})")


@rule("nri-plugin", source="catalog/data/distributions.yaml nri (NVIDIA cloud-native-docs gpu-operator/cdi.rst "
      "Enabling the NRI Plugin; GPU Operator release notes 26.3.0, 26.3.2; cri-o compatibility matrix)")
def check_nri_plugin(ctx: Context) -> list:
    """The NRI plugin in stack mode, without the container toolkit, on a GPU Operator release older than the
    first with it on the runtime, on Docker, on CRI-O below 1.34, or on a containerd NVIDIA does not list."""
    spec = ctx.spec
    if not spec.cdi.nriPluginEnabled:
        return []
    floors = dist_catalog.load().nri
    if spec.delivery.mode != "operator":
        return [ctx.at(NRI, "the NRI plugin is run by NVIDIA's operator (its toolkit DaemonSet); gpuop's stack "
                       "configures the container runtime with the toolkit and creates the nvidia RuntimeClass; "
                       "remove it or use spec.delivery.mode: operator")]
    if not spec.toolkit.enabled:        # NVIDIA's chart: templates/validations.yaml
        return [ctx.at(NRI, "the NRI plugin is the container toolkit's, and spec.toolkit.enabled is false: NVIDIA's "
                       "chart refuses it (\"the NRI Plugin cannot be enabled when the Container Toolkit is "
                       "disabled\", templates/validations.yaml); turn the toolkit on or leave the NRI plugin off")]
    rt = ctx.defaults.runtime
    operator = spec.delivery.operator.version or ctx.release.operatorVersion
    first = floors.operator.get(rt)
    if first is not None and versions.older(operator, first):
        return [_nri_operator_floor(ctx, rt, operator, first, floors.source)]
    if rt == "crio":
        p = spec.platform
        kube = ctx.release.matrix.openshiftKubernetes.get(p.version) if p.type == "openshift" else p.version
        if kube is not None and versions.older(kube, floors.crio):
            shown, use = f"Kubernetes {kube}", f"Kubernetes {floors.crio}"
            if p.type == "openshift":
                shown += f" (OpenShift {p.version})"
                fit = sorted((o for o, k in ctx.release.matrix.openshiftKubernetes.items()
                              if not versions.older(k, floors.crio)), key=versions.key)
                use = f"OpenShift {fit[0]}" if fit else use
            return [ctx.at(("spec", "platform", "version"), f"the NRI plugin needs CRI-O {floors.crio} or later; "
                           f"this cluster's CRI-O is {kube} (CRI-O's minor is the Kubernetes minor it serves, "
                           f"{shown}); use {use} or later, or leave {'.'.join(NRI)} off ({floors.source})")]
        return []
    if rt != "containerd":
        return [ctx.at(NRI, f"the NRI plugin runs on containerd or CRI-O; this cluster runs {rt} ({floors.source})")]
    accepted = ", ".join(f"{first}+ of {line}" if first != f"{line}.0" else f"{line}.x"
                         for line, first in floors.containerd.items())
    given = spec.platform.containerdVersion
    if given is None:
        # unknown is not below the floor (an imported cluster says nothing of its containerd): a warning
        return [ctx.at(NRI, f"the NRI plugin needs containerd {accepted}; set spec.platform.containerdVersion to "
                       f"the GPU nodes' containerd so the floor can be checked ({floors.source})", "warning")]
    line = ".".join(given.split(".")[:2])
    first = floors.containerd.get(line)
    patch_unknown = given == line and first is not None and first != f"{line}.0"
    if first is None or versions.older(given, first) or patch_unknown:
        why = (f"containerd {given} does not say its patch level, and {line} needs {first} or later" if patch_unknown
               else f"containerd {given} is not a version NVIDIA supports it on")
        return [ctx.at(("spec", "platform", "containerdVersion"), f"the NRI plugin needs containerd {accepted}: "
                       f"{why}; upgrade the nodes' containerd, or leave {'.'.join(NRI)} off ({floors.source})")]
    return []


RULES = ((check_os_required, check_distribution_platform, check_distribution_runtime, check_containerd_major,
          check_second_copy, check_operand_env, check_pod_labels, check_driver_config_files,
          check_driver_sidecars, check_operator_only_in_stack_mode, check_nri_plugin),)     # operator mode's refusals: validate/operator.py


def applies(ctx: Context) -> bool:
    return ctx.release is not None
