"""Distribution rules (issue 16): where `spec.os` is needed, what a Kubernetes distribution allows, and
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
- stack-only: those of issue 16's fields the operator mode does not translate are refused there.
- driver-sidecars: RDMA / GDS / GDRCopy need a driver DaemonSet; GDS and GDRCopy not with precompiled
  drivers, GDS only with the open kernel modules (the Operator's run-time errors, at compile time).
"""

from __future__ import annotations

from gpuop.catalog import distributions as dist_catalog
from gpuop.components import device_plugin as device_plugin_component
from gpuop.components import driver as driver_component
from gpuop.components import toolkit as toolkit_component
from gpuop.errors import Issue, field_path
from gpuop.validate.rules import Context, run

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


def _pool_driver_on(spec, pool) -> bool:
    d = pool.driver
    return d.enabled if d is not None and d.enabled is not None else spec.driver.enabled


def check_os_required(ctx: Context) -> list:
    spec = ctx.spec
    if spec.os is not None or "driver" in dist_catalog.load().get(spec.platform.distribution).provides:
        return []       # a managed image's driver: second-copy says what is wrong, not the OS
    for pool in spec.nodePools:
        if pool.os is None and _pool_driver_on(spec, pool):
            why = (f"pool {pool.name!r} gets its driver from gpuop (spec.nodePools[].driver.enabled)"
                   if pool.driver is not None and pool.driver.enabled else "spec.driver.enabled is true")
            return [ctx.at(("spec", "os"), f"spec.os is required: {why}, and the driver DaemonSet's image tag "
                           "names the node OS (<version>-<os tag>); set spec.os (e.g. ubuntu24.04), or "
                           "spec.driver.enabled: false where the nodes have a preinstalled driver")]
    return []


def check_distribution_platform(ctx: Context) -> list:
    p = ctx.spec.platform
    if p.type == "openshift" and p.distribution not in (None, "generic"):
        return [ctx.at(("spec", "platform", "distribution"), f"{p.distribution} is a Kubernetes distribution; "
                       "OpenShift is spec.platform.type: openshift; remove the field")]
    return []


def check_distribution_runtime(ctx: Context) -> list:
    spec = ctx.spec
    d = dist_catalog.load().get(spec.platform.distribution)
    rt = spec.containerRuntime
    if d.runtimes and rt is not None and rt not in d.runtimes:
        return [ctx.at(("spec", "containerRuntime"), f"{spec.platform.distribution} runs its own "
                       f"{', '.join(d.runtimes)}, not {rt}; allowed: {', '.join(d.runtimes)} (or omit the field)")]
    return []


def check_containerd_major(ctx: Context) -> list:
    spec = ctx.spec
    rt = spec.containerRuntime or ("crio" if spec.platform.type == "openshift" else "containerd")
    if spec.platform.containerdMajor is not None and rt != "containerd":
        return [ctx.at(("spec", "platform", "containerdMajor"), f"containerdMajor is for containerd nodes; this "
                       f"cluster runs {rt}; remove the field")]
    return []


def check_second_copy(ctx: Context) -> list:
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


OPERAND_ENV = {"driver": driver_component.GPUOP_ENV, "toolkit": toolkit_component.GPUOP_ENV,
               "devicePlugin": device_plugin_component.GPUOP_ENV}
RESERVED_POD_LABELS = ("app", "app.kubernetes.io/component", "app.kubernetes.io/part-of")


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
            if key == "driver" and e.name == driver_component.DIGEST_ENV:
                out.append(ctx.at(where, f"{e.name} is computed by gpuop from the driver's install config (it "
                                  "decides whether a node rebuilds its modules); remove it"))
            elif e.name in ours:
                out.append(ctx.at(where, f"{e.name} is set by gpuop on the {key} container; your value replaces "
                                  "gpuop's (make sure the component still works with it)", "warning"))
    return out


def check_pod_labels(ctx: Context) -> list:
    return [ctx.at(("spec", "daemonsets", "labels", k), f"{k} is a label the GPU DaemonSets select their pods by or "
                   f"gpuop sets itself; reserved: {', '.join(RESERVED_POD_LABELS)}")
            for k in ctx.spec.daemonsets.labels if k in RESERVED_POD_LABELS]


def check_driver_config_files(ctx: Context) -> list:
    """repoConfig / certConfig: every OS a driver DaemonSet runs on needs a known path; two ConfigMaps."""
    spec, out = ctx.spec, []
    d = spec.driver
    if d.repoConfig and d.certConfig and d.repoConfig.configMapName == d.certConfig.configMapName:
        out.append(ctx.at(("spec", "driver", "certConfig", "configMapName"), "repoConfig and certConfig name the "
                          "same ConfigMap; use two (each is mounted as its own volume)"))
    for field, paths in (("repoConfig", driver_component.REPO_CONFIG_PATHS),
                         ("certConfig", driver_component.CERT_CONFIG_PATHS)):
        if getattr(d, field) is None:
            continue
        for pool in spec.nodePools:
            os_name = pool.os or spec.os
            entry = ctx.release.matrix.os.get(os_name) if os_name else None
            os_id = entry.select.get("osId") if entry else None
            if _pool_driver_on(spec, pool) and os_id is not None and os_id not in paths:
                out.append(ctx.at(("spec", "driver", field), f"the driver image for {os_name} (pool {pool.name!r}) "
                                  f"reads no {field} files: the Operator knows paths for {', '.join(sorted(paths))}"))
                break
    return out


def check_driver_sidecars(ctx: Context) -> list:
    """RDMA / GDS / GDRCopy: the Operator's run-time refusals (transformGDSContainer,
    transformGDRCopyContainer) at compile time, and what gpuop does not build."""
    spec, out = ctx.spec, []
    d = spec.driver
    wanted = [f for f, on in (("rdma", d.rdma.enabled), ("gds", d.gds), ("gdrcopy", d.gdrcopy)) if on]
    if not wanted:
        return out
    if not any(_pool_driver_on(spec, p) for p in spec.nodePools):
        return [ctx.at(("spec", "driver", f), f"{f} runs beside the driver gpuop installs, and no pool gets one "
                       "(driver.enabled is false everywhere)") for f in wanted]
    if spec.platform.type == "openshift" and ("gds" in wanted or "gdrcopy" in wanted):
        out += [ctx.at(("spec", "driver", f), f"{f} on OpenShift builds with the Driver Toolkit sidecar, which gpuop "
                       "does not render for it; use spec.delivery.mode: operator") for f in wanted if f != "rdma"]
    if d.precompiled:
        names = {"gds": "GPUDirect Storage driver (nvidia-fs)", "gdrcopy": "GDRCopy"}
        out += [ctx.at(("spec", "driver", f), f"{names[f]} is not supported along with precompiled NVIDIA drivers "
                       "(it builds its module against the driver's sources)") for f in wanted if f in names]
    extras = dist_catalog.driver_extras().get(ctx.release.name)
    if d.gds and extras is not None and d.kernelModuleType != "open":
        out.append(ctx.at(("spec", "driver", "gds"), f"GPUDirect Storage {extras.gds.version} needs the open kernel "
                          f"modules (from {extras.gds.openFrom} on): set spec.driver.kernelModuleType: open"))
    if extras is None and ("gds" in wanted or "gdrcopy" in wanted):
        out.append(ctx.at(("spec", "driver"), f"stack release {ctx.release.name} names no GDS / GDRCopy images "
                          "(catalog/data/driver-extras.yaml)"))
    return out


# Issue 16's fields that gpuop renders in its own stack but does not (yet) translate into the Operator's
# inputs: in operator mode they would be dropped silently, so they are refused.
STACK_ONLY = (("spec", "platform", "distribution"), ("spec", "platform", "containerdMajor"), ("spec", "proxy"),
              ("spec", "hostPaths"), ("spec", "daemonsets", "labels"), ("spec", "daemonsets", "annotations"),
              ("spec", "images", "digestLock"), ("spec", "driver", "env"), ("spec", "driver", "args"),
              ("spec", "driver", "repoConfig"), ("spec", "driver", "certConfig"), ("spec", "driver", "rdma"),
              ("spec", "driver", "gds"), ("spec", "driver", "gdrcopy"), ("spec", "toolkit", "env"),
              ("spec", "toolkit", "args"), ("spec", "devicePlugin", "env"), ("spec", "devicePlugin", "args"))


def check_stack_only_in_operator_mode(ctx: Context) -> list:
    if ctx.spec.delivery.mode != "operator":
        return []
    return [ctx.at(path, f"{'.'.join(path)} is rendered by gpuop's own stack; with spec.delivery.mode: operator "
                   "gpuop does not pass it to the operator (GDS / GDRCopy: spec.delivery.operator.gds / gdrcopy); "
                   "remove it or use mode: stack") for path in STACK_ONLY if _written(ctx, *path)]


RULES = ((check_os_required, check_distribution_platform, check_distribution_runtime, check_containerd_major,
          check_second_copy, check_operand_env, check_pod_labels, check_driver_config_files,
          check_driver_sidecars, check_stack_only_in_operator_mode),)


def check(loaded, profile, cat) -> tuple[list, list]:
    ctx = Context.of(loaded, profile, cat)
    if ctx.release is None:
        return [], []
    return run(RULES, ctx)
