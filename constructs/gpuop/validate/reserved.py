"""Names gpuop writes itself, per kind of object, and the one rule that keeps user-given names off them.

A user-given name equal to one of gpuop's does not fail anywhere downstream: the second object of a name
silently replaces the first. A pool's device-plugin config named `default` becomes the config of every node
without a label (pools without sharing then time-slice); a MIG config named `all-disabled` turns MIG on where no
layout was given; a ConfigMap the user creates under the name of one gpuop writes is overwritten by the sync (or
overwrites it). `gpuop capacity` meanwhile reports the figures of the configs gpuop meant.

RESERVED is the registry: each kind of name gpuop writes, the names, taken from the constants that define them
where the objects are built (components/*, plan/pools.py, plan/chartmap.py), never typed twice.
`check_reserved_names` is the rule: every user-given name of each kind (found by the field's type, so a new
field of that type is covered), refused at its line when it is reserved, and the operator's ConfigMaps refused
when two of them get one name.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpuop.components import dashboards, dcgm_exporter, device_plugin, driver, mig_manager, plugin_config, toolkit
from gpuop.kube.validation import duplicate, invalid
from gpuop.plan import chartmap
from gpuop.plan.pools import (ALL_DISABLED, DEFAULT_PLUGIN_CONFIG, PLUGIN_CONFIG_LABEL, _layout_from_name, build,
                              layout_of, mig_config_name)
from gpuop.profile.models import ConfigMapFiles
from gpuop.validate.rules import Context, of_type, rule


@dataclass(frozen=True)
class Reserved:
    names: frozenset[str]
    what: str            # what gpuop writes under those names, for the message


CONFIG_MAP = "ConfigMap"
PLUGIN_CONFIG = "device-plugin config"
MIG_CONFIG = "mig-parted config"
SECRET = "Secret"

RESERVED: dict[str, Reserved] = {
    # in the stack's namespace: the stack's own ConfigMaps and, in operator mode, those NVIDIA's chart creates
    # under gpuop's names
    CONFIG_MAP: Reserved(frozenset({
        plugin_config.NAME, mig_manager.CONFIG_CM, mig_manager.CLIENTS_CM, mig_manager.ENTRYPOINT_CM,
        dcgm_exporter.METRICS_CM, dcgm_exporter.RELABEL_CM, toolkit.ENTRYPOINT_CM, driver.PROBE_CM,
        device_plugin.ENTRYPOINT_CM,
        chartmap.PLUGIN_CONFIG_MAP, chartmap.MIG_CONFIG_MAP, chartmap.DCGM_METRICS_MAP, dashboards.NAME}),
        "a ConfigMap gpuop writes in the stack's namespace"),
    # keys of the device plugin's ConfigMap, values of nvidia.com/device-plugin.config
    PLUGIN_CONFIG: Reserved(frozenset({DEFAULT_PLUGIN_CONFIG, plugin_config.DEFAULT}),   # the plan's and the component's
                            "gpuop's device-plugin config of every node without a nvidia.com/device-plugin.config "
                            "label (no sharing)"),
    # keys of the mig-parted config, values of nvidia.com/mig.config
    MIG_CONFIG: Reserved(frozenset({ALL_DISABLED}),
                         "gpuop's MIG config of MIG-capable nodes without a layout (MIG off)"),
    # gpuop writes no Secret: image pull secrets and credentials are the user's, by reference
    SECRET: Reserved(frozenset(), "a Secret gpuop writes"),
}


def derived_plugin_configs(spec, cat) -> dict[int, str]:
    """Each pool's device-plugin config name as gpuop derives it from the config's content (the profile's
    sharing.configName left out): the names gpuop writes for pools that name none, by pool index."""
    pools = [p.model_copy(update={"sharing": p.sharing.model_copy(update={"configName": None})})
             if p.sharing is not None and p.sharing.configName else p for p in spec.nodePools]
    built = build(spec.model_copy(update={"nodePools": pools}), cat)
    return {pl.index: name for pl in built.pools if (name := dict(pl.nfd + pl.manual).get(PLUGIN_CONFIG_LABEL))}


def reserved_problem(kind: str, name: str) -> str | None:
    """The message for a user-given `name` of `kind` that gpuop writes itself; None when the name is free."""
    entry = RESERVED[kind]
    if name in entry.names:
        return invalid(name, f"is the name of {entry.what}; a {kind} of yours under it would replace gpuop's (or be "
                             "replaced): choose another name")
    return None


# the operator's ConfigMaps (spec.delivery.operator.<field>): the name each gets when the profile names none
OPERATOR_CONFIG_MAPS = (("devicePluginConfig", chartmap.PLUGIN_CONFIG_MAP), ("migManagerConfig", chartmap.MIG_CONFIG_MAP),
                        ("dcgmMetricsConfig", chartmap.DCGM_METRICS_MAP))


@rule("reserved-names", source="NVIDIA/k8s-device-plugin config files and NVIDIA/mig-parted configs (one config per "
      "name); Kubernetes: one object per kind, namespace and name (the later apply replaces the earlier)")
def check_reserved_names(ctx: Context) -> list:
    """No user-given name is one gpuop writes for the same kind (RESERVED): pools' sharing.configName and
    mig.configName, the operator's ConfigMap names (also unique among themselves), ConfigMaps the user creates. A
    mig.configName that reads as gpuop's name of another layout is refused too (it would name that layout's config)."""
    out = []
    spec = ctx.spec
    named = [i for i, p in enumerate(spec.nodePools) if p.sharing is not None and p.sharing.configName]
    derived = derived_plugin_configs(spec, ctx.cat) if named else {}
    for i, p in enumerate(spec.nodePools):
        if p.sharing is not None and p.sharing.configName:
            name = p.sharing.configName
            problem = reserved_problem(PLUGIN_CONFIG, name)
            # another pool's derived name: one key of the ConfigMap, the later config silently replaces the other
            other = next((j for j, n in sorted(derived.items()) if n == name and j != i), None)
            if problem is None and other is not None and derived.get(i) != name:
                problem = invalid(name, f"is the device-plugin config gpuop writes for pool "
                                        f"{spec.nodePools[other].name!r} (other sharing or MIG settings); one name "
                                        "is one config: choose a name gpuop does not derive")
            if problem:
                out.append(ctx.at(("spec", "nodePools", i, "sharing", "configName"), problem))
        if p.mig is not None and p.mig.configName:
            name, loc = p.mig.configName, ("spec", "nodePools", i, "mig", "configName")
            problem = reserved_problem(MIG_CONFIG, name)
            other = _layout_from_name(name, ctx.cat.gpus.get(p.gpu))
            if problem:
                out.append(ctx.at(loc, problem))
            elif other and other != layout_of(p):
                out.append(ctx.at(loc, invalid(name, f"is gpuop's name of the MIG layout {mig_config_name(other)}, not "
                                                     "of this pool's; name the config after its own layout, or "
                                                     "choose a name that is no layout's")))
    operator = spec.delivery.operator
    taken: dict[str, tuple] = {}
    for field, default in OPERATOR_CONFIG_MAPS:
        name = getattr(operator, field).name
        loc = ("spec", "delivery", "operator", field, "name")
        effective = name or default
        if name is not None and name != default and reserved_problem(CONFIG_MAP, name):
            out.append(ctx.at(loc, reserved_problem(CONFIG_MAP, name)))
        elif effective in taken and name is not None:
            out.append(ctx.at(loc, f"{duplicate(effective)}: also the name of spec.delivery.operator."
                                   f"{taken[effective][3]}'s ConfigMap; each ConfigMap needs its own name"))
        taken.setdefault(effective, loc)
    for loc, files in of_type(spec, ConfigMapFiles, ("spec",)):    # every ConfigMap the user creates
        name = files.configMapName
        problem = reserved_problem(CONFIG_MAP, name)
        if problem is None and name in taken and spec.delivery.mode == "operator":
            problem = invalid(name, f"is the name of the ConfigMap spec.delivery.operator.{taken[name][3]} gives "
                                    "NVIDIA's operator; choose another name")
        if problem:
            out.append(ctx.at(loc + ("configMapName",), problem))
    return out


RULES = ((check_reserved_names,),)


def applies(ctx: Context) -> bool:
    return True
