"""Licence rules: what the licences of the driver and the images demand of a profile, and the cluster's own
licence policy (spec.licensing), checked against catalog/data/licences.yaml.

- the vGPU guest driver is licensed per client by the NVIDIA License System: it needs the licensing client
  configuration by reference (spec.driver.licensingConfig), comes only from a private or entitled registry (no
  public registry carries it), is not published precompiled, and is delivered by NVIDIA's operator (which mounts
  the licensing files into the driver pods);
- an image from an entitled registry (NVIDIA AI Enterprise) is pulled with an entitled account's key: a pull secret;
- spec.licensing.allowedDrivers: the driver flavours the cluster may run.
Every error is located at the field that decides it, in the API server's words.
"""

from __future__ import annotations

from gpuop.catalog import licences as licence_catalog
from gpuop.errors import Issue
from gpuop.validate.rules import Context, Found, rule

SOURCE = "catalog/data/licences.yaml (NVIDIA GPU Operator licence table, NVIDIA AI Enterprise vGPU guest driver docs)"


def _vgpu(ctx: Context) -> bool:
    return ctx.spec.driver.driverType == "vgpu" and ctx.defaults.any_driver


def _operator(ctx: Context) -> bool:
    return ctx.spec.delivery.mode == "operator"


def _driver_repository(ctx: Context) -> tuple[str, tuple]:
    """The repository the driver image is pulled from and the profile field that decides it (the driver's own
    operator repository, the common mirror, or the release's registry: then the driver type's field)."""
    own = ctx.spec.delivery.operator.repositories.get("driver") if _operator(ctx) else None
    if own:
        return own, ("spec", "delivery", "operator", "repositories", "driver")
    if ctx.spec.images.registry:
        return ctx.spec.images.registry, ("spec", "images", "registry")
    return ctx.release.registry, ("spec", "driver", "driverType")


@rule("licence-vgpu-licensing", source=SOURCE + "; NVIDIA's chart driver.licensingConfig (secretName, nlsEnabled)")
def check_vgpu_licensing(ctx: Context) -> list[Issue]:
    """A vGPU guest driver without its licensing client configuration (it would run unlicensed, throttled), or a
    licensing configuration on a driver that reads none."""
    out = Found(ctx)
    d = ctx.spec.driver
    if _vgpu(ctx) and d.licensingConfig is None:
        out.error(("spec", "driver", "licensingConfig"), "Required value: the vGPU guest driver checks out its licence "
                  "from the NVIDIA License System: name the Secret holding gridd.conf and client_configuration_token.tok "
                  "(spec.driver.licensingConfig.secretName)")
    if d.driverType != "vgpu" and d.licensingConfig is not None:
        out.error(("spec", "driver", "licensingConfig"), "Forbidden: only the vGPU guest driver (spec.driver.driverType: "
                  "vgpu) reads a licensing configuration")
    return out


@rule("licence-vgpu-delivery", source=SOURCE + "; NVIDIA GPU Operator: the operator mounts driver.licensingConfig "
      "into the driver pods")
def check_vgpu_delivery(ctx: Context) -> list[Issue]:
    """A vGPU guest driver in stack mode (gpuop's own driver DaemonSet does not mount the licensing files), or
    with precompiled driver images (NVIDIA publishes none for vGPU)."""
    out = Found(ctx)
    if not _vgpu(ctx):
        return out
    if not _operator(ctx):
        out.error(("spec", "driver", "driverType"), "Unsupported value: \"vgpu\": the vGPU guest driver is delivered "
                  "by NVIDIA's operator, which mounts its licensing configuration: set spec.delivery.mode: operator")
    if ctx.spec.driver.precompiled:
        out.error(("spec", "driver", "precompiled"), "Invalid value: true: precompiled driver containers do not "
                  "support NVIDIA vGPU; build the vGPU guest driver image into your registry")
    return out


@rule("licence-vgpu-private-registry", source=SOURCE)
def check_vgpu_registry(ctx: Context) -> list[Issue]:
    """A vGPU guest driver image from a public registry: the driver is licensed to NVIDIA AI Enterprise / vGPU
    customers only, so no public registry carries it, and a copy must stay in a private one."""
    out = Found(ctx)
    if not _vgpu(ctx):
        return out
    table = licence_catalog.load()
    repository, loc = _driver_repository(ctx)
    reg = table.registry(repository)
    if reg is not None and reg.kind == "public":
        shown = "the release's registry " if loc[-1] == "driverType" else ""
        out.error(loc, f"Invalid value: \"{repository}\": {shown}{reg.prefix} is a public registry and does not carry "
                  "the vGPU guest driver (licensed to NVIDIA AI Enterprise customers only: it may be pulled only from an "
                  "entitled registry such as nvcr.io/nvaie or your private registry); set spec.images.registry or "
                  "spec.delivery.operator.repositories.driver to the private registry holding it")
    return out


def _pulls(ctx: Context) -> list[tuple[str, tuple, list[str]]]:
    """(repository, its field, the pull secrets its pods use) of every repository the profile names."""
    spec = ctx.spec
    common = list(spec.images.pullSecrets)
    out = []
    if spec.images.registry:
        out.append((spec.images.registry, ("spec", "images", "registry"), common))
    if _operator(ctx):
        own = spec.delivery.operator.pullSecrets
        for key, repo in spec.delivery.operator.repositories.items():
            out.append((repo, ("spec", "delivery", "operator", "repositories", key), list(own.get(key, common))))
    return out


@rule("licence-entitled-pull-secret", source=SOURCE + "; NGC: nvcr.io/nvaie is pulled with an NGC API key "
      "(docker-registry Secret)")
def check_entitled_pull_secrets(ctx: Context) -> list[Issue]:
    """An image from an entitled registry (catalog: NVIDIA AI Enterprise's nvcr.io/nvaie) pulled without a pull
    secret: only an entitled account's key may pull it."""
    out = Found(ctx)
    table = licence_catalog.load()
    for repository, loc, secrets in _pulls(ctx):
        reg = table.registry(repository)
        if reg is not None and reg.kind == "entitled" and not secrets:
            out.error(loc, f"Required value: {reg.prefix} is an entitled registry ({reg.entitlement}): its images are "
                      "pulled with an entitled account's key; name the docker-registry Secret holding it in "
                      "spec.images.pullSecrets")
    return out


@rule("licence-allowed-drivers", source=SOURCE + "; NVIDIA driver installation guide: open kernel modules are MIT/GPLv2, "
      "auto picks the flavour on the node")
def check_allowed_drivers(ctx: Context) -> list[Issue]:
    """A driver whose flavour (open, proprietary, precompiled, vgpu-guest) the cluster's licence policy
    (spec.licensing.allowedDrivers) leaves out, at the field that chooses it."""
    out = Found(ctx)
    allowed = ctx.spec.licensing.allowedDrivers
    if allowed is None or not ctx.defaults.any_driver:
        return out
    d = ctx.spec.driver
    said = f"the licence policy (spec.licensing.allowedDrivers) allows {', '.join(allowed)}"
    if d.driverType == "vgpu":
        if "vgpu-guest" not in allowed:
            out.error(("spec", "driver", "driverType"), f"Unsupported value: \"vgpu\": {said}, not vgpu-guest")
        return out
    if d.precompiled and "precompiled" not in allowed:
        out.error(("spec", "driver", "precompiled"), f"Unsupported value: true: {said}, not precompiled")
    kmt = d.kernelModuleType
    if kmt == "auto" and not {"open", "proprietary"} <= set(allowed):
        only = "open" if "open" in allowed else "proprietary" if "proprietary" in allowed else None
        fix = f"set kernelModuleType: {only}" if only else "the policy allows neither kernel module flavour"
        out.error(("spec", "driver", "kernelModuleType"), f"Unsupported value: \"auto\": auto lets the driver choose "
                  f"open or proprietary kernel modules on the node; {said}: {fix}")
    elif kmt != "auto" and kmt not in allowed:
        out.error(("spec", "driver", "kernelModuleType"), f"Unsupported value: \"{kmt}\": {said}, not {kmt}")
    return out


RULES = ((check_vgpu_licensing, check_vgpu_delivery, check_vgpu_registry, check_entitled_pull_secrets,
          check_allowed_drivers),)


def applies(ctx: Context) -> bool:
    return ctx.release is not None
