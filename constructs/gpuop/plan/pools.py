"""Per-pool configuration: each node pool's MIG config and device-plugin config, the node labels that
select them, and the rules that refuse what the MIG manager and the device plugin would refuse.

`build(spec, cat) -> PoolConfigs` (called by build.py) decides, from the typed profile:
- the mig-parted v1 config (`mig_parted`): `all-disabled` plus one named config per distinct pool layout,
  each entry limited by `device-filter` to the PCI device ids of a GPU model the layout was checked for
  (catalog gpus.yaml `pciDeviceIds`), `devices: all`, `mig-enabled: true`. Names come from the layout
  (`1x3g.40gb_1x2g.20gb_2x1g.10gb`, '+' written '.' as upstream's `all-1g.10gb.me`), so a layout change
  changes the `nvidia.com/mig.config` label, which is what makes the MIG manager act (it watches the
  label, not the ConfigMap). MIG-capable pools without a layout get `all-disabled`.
- the device plugin's configs (`plugin_configs`, k8s-device-plugin config v1: version, flags.migStrategy,
  sharing.timeSlicing | sharing.mps), one key per distinct pool config plus `default` (no sharing), each
  named `<summary>-<6 hex of its content>` for the same reason: the config manager reloads on a label
  change only. A pool's `mig.configName` / `sharing.configName` replaces the derived name (a running
  cluster's names kept by `gpuop import`); in operator mode `delivery.operator.devicePluginConfig.default`
  naming a pool's config makes it the config of every unlabelled node (no `default` key, no label for it).
- the MIG strategy: one strategy for the cluster (MIG_STRATEGY on the device plugin and GFD, as upstream
  with `mig.strategy` set) when every MIG pool agrees; otherwise -- or when a mixed strategy would meet an
  MPS pool, which the plugin refuses ("using --mig-strategy=mixed is not supported with MPS") -- no
  MIG_STRATEGY env (upstream's "strategy unset") and each pool's config carries `flags.migStrategy`, since
  the env would override the config file.
- the labels (`pools`): NFD matches node features, not node labels, so a pool is told apart by its GPU's
  PCI device ids only. Per (GPU model, label key): if every pool of that model wants the same value, a
  NodeFeatureRule sets it (`nfd_rules`); if not, NFD cannot tell those nodes apart and the label must come
  from the node group template (`manual`, with a located warning; outputs/node_labels.py writes them to dist/).
- the planes (plan/dra.py): when any pool has `allocation: dra`, every pool wants
  `nvidia.com/gpu.deploy.device-plugin` (false on DRA pools, true elsewhere; the general deploy rule then
  leaves that label out, stack/derive.py) and DRA pools want `nvidia.com/gpu.deploy.dra-driver=true` and
  `nvidia.com/gpu.deploy.client=true` (the kubelet plugin's nodeSelector: plan/dra.py);
  DRA pools get no device-plugin config and do not count for the MIG strategy; under DynamicMIG they get
  no mig.config and `nvidia.com/gpu.deploy.mig-manager=false`. Same mechanism as above: a DRA pool that
  shares its GPU model with a device-plugin pool gets those labels from its node group (warned).

validate/pools.py (validate stage) refuses, located: sharing without the
device plugin, timeSlicing together with mps, MPS on a MIG pool ("sharing using MPS is not supported for
MIG devices"), sharing entries for resources the pool does not advertise; and warns where labels must come
from the node group. Sources: ../shared/refs/mig/FACTS.md §2, ../shared/refs/gpu-operator/NOTES.md §1-2,
NVIDIA/k8s-device-plugin api/config/v1 (replicas >= 2, flags precedence) and cmd/nvidia-device-plugin
validateFlags, ../shared/DESIGN.md "Node labels without a controller".
"""

from __future__ import annotations

import hashlib
import json

from gpuop.catalog import xids as xid_catalog
from gpuop.mig import geometry
from gpuop.plan import defaults as defaulting
from gpuop.plan import dra as dra_rules
from gpuop.plan.model import NfdPoolRule, PoolConfigs, PoolLabels
from gpuop.kube.yamlio import dump_plain

MIG_CONFIG_LABEL = "nvidia.com/mig.config"
PLUGIN_CONFIG_LABEL = "nvidia.com/device-plugin.config"
DEVICE_PLUGIN_LABEL = "nvidia.com/gpu.deploy.device-plugin"   # with DRA pools: per pool, not for every GPU node
DRA_LABEL = "nvidia.com/gpu.deploy.dra-driver"                # the DRA kubelet plugin's nodeSelector
CLIENT_LABEL = "nvidia.com/gpu.deploy.client"                 # and the GPU client contract's (catalog dra.yaml)
MIG_MANAGER_LABEL = "nvidia.com/gpu.deploy.mig-manager"
# gpuop's own label (NVIDIA defines none): selects the device plugin DaemonSet of a pool whose health policy is not
# the cluster's, its value naming the policy (the plugin reads its policy from its env only: one DaemonSet per
# policy). Under nvidia.com because NFD's master accepts only that extra namespace (extraLabelNs) from gpuop's rule.
HEALTH_LABEL = "nvidia.com/device-plugin.health"
ALL_DISABLED = "all-disabled"
DEFAULT_PLUGIN_CONFIG = "default"
WHERE = "node group template (cloud node group, Karpenter NodePool or OpenShift MachineSet labels)"


def nfd_id(pci: str) -> str:
    """mig-parted device-filter form 0x<DEVICE><VENDOR> -> NFD's device attribute ('0x233010DE' -> '2330')."""
    return pci[2:6].lower()


def _digest(obj) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()).hexdigest()[:6]


def _label_value(name: str, content) -> str:
    return name if len(name) <= 63 else f"{name[:56].rstrip('._-')}-{_digest(content)}"


def _compute(profile: str) -> int:
    m = geometry.NAME.match(profile)
    return int(m["g"]) if m else 0


def mig_config_name(layout) -> str:
    """{'3g.40gb': 1, '2g.20gb': 1, '1g.10gb': 2} -> '1x3g.40gb_1x2g.20gb_2x1g.10gb' (largest first)."""
    items = sorted(dict(layout).items(), key=lambda kv: (-_compute(kv[0]), kv[0]))
    return _label_value("_".join(f"{n}x{p.replace('+', '.')}" for p, n in items), dict(layout))


def _layout_from_name(name: str, gpu) -> dict:
    """A config name back to its layout ('2x3g.40gb_1x1g.10gb' -> {'3g.40gb': 2, '1g.10gb': 1}), the
    profiles matched against the GPU's catalog profiles ('.' in a name may stand for '+'); {} when the
    name is not one mig_config_name writes for this GPU."""
    family = geometry.load_mig().families.get(gpu.migFamily) if gpu is not None and gpu.migCapable else None
    known = {p.name.replace("+", "."): p.name for p in family.profiles} if family else {}
    out = {}
    for part in name.split("_"):
        count, x, profile = part.partition("x")
        if not (x and count.isdigit() and profile in known):
            return {}
        out[known[profile]] = int(count)
    return out if mig_config_name(out) == name else {}


layout_of = defaulting.layout_of


def states_strategy(pool) -> bool:
    """Whether the pool has a say in the MIG strategy: a layout, or `mig.strategy` written out (a pool
    whose GPUs are partitioned outside gpuop: `strategy: none` must reach the device plugin as none)."""
    return bool(layout_of(pool)) or (pool.mig is not None and "strategy" in pool.mig.model_fields_set)


def pool_strategy(pool) -> str:
    """The MIG strategy that matters for a pool: its own with a layout or when stated; none without MIG."""
    return pool.mig.strategy if states_strategy(pool) else "none"


def advertised(pool) -> list[str]:
    """The resources the device plugin advertises on the pool's nodes (k8s-device-plugin rm:
    mixed -> nvidia.com/mig-<profile> with '+' as '.'; single and none -> nvidia.com/gpu)."""
    layout = layout_of(pool)
    if layout and pool.mig.strategy == "mixed":
        items = sorted(layout, key=lambda p: (_compute(p), p))
        return ["nvidia.com/mig-" + p.replace("+", ".") for p in items]
    return ["nvidia.com/gpu"]


def _sharing(pool) -> tuple[str, dict] | None:
    """(summary, the config's `sharing` section) of a pool, None without (valid) sharing."""
    s = pool.sharing
    if s is None or (s.timeSlicing is None) == (s.mps is None):
        return None
    if s.mps is not None:
        return f"mps-{s.mps.replicas}", {"mps": {"renameByDefault": s.mps.renameByDefault, "resources": [
            {"name": "nvidia.com/gpu", "replicas": s.mps.replicas}]}}
    ts = s.timeSlicing
    replicas = {r: ts.replicas for r in advertised(pool)} if ts.replicas else {}
    replicas.update({r.name: r.replicas for r in ts.resources})
    summary = f"time-slicing-{ts.replicas}" if ts.replicas and not ts.resources else "time-slicing"
    return summary, {"timeSlicing": {"renameByDefault": ts.renameByDefault,
                                     "failRequestsGreaterThanOne": ts.failRequestsGreaterThanOne,
                                     "resources": [{"name": n, "replicas": r} for n, r in replicas.items()]}}


def cluster_strategy(pools) -> str | None:
    """The cluster's one MIG strategy: the one every pool with a layout or a stated strategy agrees on
    (upstream's MIG_STRATEGY=<mig.strategy>, `none` included), `single` (upstream's default) when no pool
    has either, None when pools disagree (then each pool's config carries its own)."""
    strategies = {p.mig.strategy for p in pools if states_strategy(p)}
    return strategies.pop() if len(strategies) == 1 else (None if strategies else "single")


def plugin_default(spec) -> str | None:
    """The device-plugin config of nodes without a config label when the profile names one (operator mode:
    spec.delivery.operator.devicePluginConfig.default, "" for none); None: gpuop's `default`."""
    if spec.delivery.mode != "operator":
        return None
    return spec.delivery.operator.devicePluginConfig.default


def health_policy(health) -> xid_catalog.Policy:
    """A profile DevicePluginHealth (None: NVIDIA's defaults) as the catalog's Policy."""
    if health is None:
        return xid_catalog.Policy()
    return xid_catalog.Policy(health.checks, tuple(dict.fromkeys(health.ignoreXids)),
                              tuple(dict.fromkeys(health.fatalXids)))


def pool_health(spec, pool) -> xid_catalog.Policy:
    """The policy on a pool's nodes: its own devicePluginHealth, else the cluster's spec.devicePlugin.health."""
    return health_policy(pool.devicePluginHealth if pool.devicePluginHealth is not None else spec.devicePlugin.health)


def health_name(env: tuple[tuple[str, str], ...]) -> str:
    """The label value (and DaemonSet name suffix) of a policy: `health-<6 hex of its env>`, so a policy change
    relabels its pools and rolls only the DaemonSet of that policy."""
    return f"health-{_digest([list(e) for e in env])}"


def build(spec, cat) -> PoolConfigs:
    pools = spec.nodePools
    gpus = {i: cat.gpus.get(p.gpu) for i, p in enumerate(pools)}
    layouts = [p for p in pools if layout_of(p)]
    cluster = cluster_strategy([p for p in pools if not dra_rules.is_dra(p)])   # DRA pools: no device plugin
    mps = spec.devicePlugin.enabled and any(_sharing(p) and p.sharing.mps for p in pools if not dra_rules.is_dra(p))
    per_pool = cluster is None or (cluster == "mixed" and mps)
    wanted: dict[int, dict[str, str]] = {i: {} for i in range(len(pools))}
    dynamic = dra_rules.dynamic_mig(spec)
    if any(dra_rules.is_dra(p) for p in pools):   # the two planes (plan/dra.py): never both on one node
        for i, p in enumerate(pools):
            dra = dra_rules.is_dra(p)
            wanted[i][DEVICE_PLUGIN_LABEL] = "false" if dra else "true"
            if dra:
                wanted[i][DRA_LABEL] = "true"
                wanted[i][CLIENT_LABEL] = "true"      # what the MIG / driver manager pause to stop the plugin

    # MIG-capable pools without a layout: `all-disabled` enforced (the operator's default on MIG-capable
    # nodes without a config), so a GPU that arrives with MIG mode on is returned to whole GPUs
    bare = [p for i, p in enumerate(pools) if gpus[i] is not None and gpus[i].migCapable and not layout_of(p)
            and not (dynamic and dra_rules.is_dra(p))]
    mig_manager = spec.migManager.enabled and bool(layouts or (bare and spec.migManager.disableMigWithoutLayout))
    mig_parted = ""
    if mig_manager:
        configs: dict[str, list] = {ALL_DISABLED: [{"devices": "all", "mig-enabled": False}]}
        for i, p in enumerate(pools):
            if gpus[i] is None or not gpus[i].migCapable:
                continue
            if dynamic and dra_rules.is_dra(p):    # DynamicMIG: the DRA driver partitions, not the MIG manager
                wanted[i][MIG_MANAGER_LABEL] = "false"
                continue
            layout = layout_of(p)
            name = (p.mig.configName or mig_config_name(layout)) if layout else ALL_DISABLED
            if layout:
                entry = {"device-filter": list(gpus[i].pciDeviceIds), "devices": "all", "mig-enabled": True,
                         "mig-devices": {k: layout[k] for k in sorted(layout, key=lambda k: (_compute(k), k))}}
                if entry not in configs.setdefault(name, []):
                    configs[name].append(entry)
            elif not spec.migManager.disableMigWithoutLayout:
                continue                           # left as it is: no label, the MIG manager does nothing here
            wanted[i][MIG_CONFIG_LABEL] = name
            for kept in p.keepMigConfigs:          # nodes of the group may still carry a former config
                old = _layout_from_name(kept, gpus[i])
                if old and kept != name:
                    entry = {"device-filter": list(gpus[i].pciDeviceIds), "devices": "all", "mig-enabled": True,
                             "mig-devices": {k: old[k] for k in sorted(old, key=lambda k: (_compute(k), k))}}
                    if entry not in configs.setdefault(kept, []):
                        configs[kept].append(entry)
        ordered = {ALL_DISABLED: configs.pop(ALL_DISABLED), **dict(sorted(configs.items()))}
        mig_parted = dump_plain({"version": "v1", "mig-configs": ordered})

    plugin: dict[str, str] = {}
    sharing = {i: _sharing(p) for i, p in enumerate(pools) if not dra_rules.is_dra(p)} if spec.devicePlugin.enabled else {}
    # the operator's devicePlugin.config.default naming a pool's config (a running cluster's `default: any`):
    # that config is the one of every node without a label, so neither it nor the pools gpuop's `default`
    # would serve get a label, and gpuop's `default` is not written
    chosen = plugin_default(spec)
    if (spec.devicePlugin.enabled or spec.gfd.enabled) and (per_pool or any(sharing.values())):
        default = {"version": "v1", "flags": {"migStrategy": "none" if per_pool else cluster}}
        if chosen is None:
            plugin[DEFAULT_PLUGIN_CONFIG] = dump_plain(default)
        for i, p in enumerate(pools):
            if dra_rules.is_dra(p):                # the device plugin's config never targets DRA pools
                continue
            strategy = pool_strategy(p) if per_pool else cluster
            content = {"version": "v1", "flags": {"migStrategy": strategy}}
            summary, section = sharing.get(i) or (f"mig-{strategy}", None)
            if section:
                content["sharing"] = section
            if content == default:
                continue
            name = (p.sharing.configName if p.sharing is not None and p.sharing.configName else
                    _label_value(f"{summary}-{_digest(content)}", content))
            plugin[name] = dump_plain(content)
            if name != chosen:
                wanted[i][PLUGIN_CONFIG_LABEL] = name
        if chosen and plugin and chosen not in plugin:   # a name of no pool's config: gpuop's default so named
            plugin[chosen] = dump_plain(default)        # (no config at all: the ConfigMap is the user's)

    cluster_env = xid_catalog.policy_env(health_policy(spec.devicePlugin.health))
    policies: dict[str, tuple] = {}
    if spec.devicePlugin.enabled:
        for i, p in enumerate(pools):
            env = xid_catalog.policy_env(pool_health(spec, p))
            if dra_rules.is_dra(p) or env == cluster_env:     # DRA pools run no device plugin
                continue
            name = health_name(env)
            policies[name] = env
            wanted[i][HEALTH_LABEL] = name

    labels, rules = _labels(pools, gpus, wanted, spec.nfd.rules)
    mig_ids = tuple(sorted({nfd_id(x) for g in cat.gpus.values() if g.migCapable for x in g.pciDeviceIds}))
    return PoolConfigs(mig_manager=mig_manager, mig_parted=mig_parted,
                       mig_capable_ids=mig_ids if mig_manager else (), per_pool_strategy=per_pool,
                       plugin_configs=tuple(sorted(plugin.items())), mps=bool(mps), pools=labels, nfd_rules=rules,
                       health_env=cluster_env, health_policies=tuple(sorted(policies.items())))


def _labels(pools, gpus, wanted, nfd_rules: bool):
    """Per (GPU model, label key): NFD when every pool of the model wants the same value, else manual."""
    by_gpu: dict[str, list[int]] = {}
    for i, p in enumerate(pools):
        if gpus[i] is not None:
            by_gpu.setdefault(p.gpu, []).append(i)
    nfd: dict[int, dict] = {i: {} for i in range(len(pools))}
    manual: dict[int, dict] = {i: {} for i in range(len(pools))}
    why: dict[int, str] = {}
    rules = []
    for gpu, idxs in sorted(by_gpu.items()):
        rule: dict[str, str] = {}
        for key in sorted({k for i in idxs for k in wanted[i]}):
            values = {wanted[i].get(key) for i in idxs}
            if nfd_rules and len(values) == 1 and None not in values:
                rule[key] = values.pop()
                for i in idxs:
                    nfd[i][key] = rule[key]
                continue
            for i in idxs:
                if key in wanted[i]:
                    manual[i][key] = wanted[i][key]
                    others = [pools[j].name for j in idxs if j != i]
                    why[i] = ("spec.nfd.rules is false, so no NodeFeatureRule sets them" if not nfd_rules else
                              f"pool(s) {', '.join(others)} have the same GPU model ({gpu}) with other labels, and "
                              "NFD tells nodes apart by hardware (PCI device ids), not by node labels, so no "
                              "NodeFeatureRule can set them")
        if rule:
            rules.append(NfdPoolRule(gpu, tuple(sorted({nfd_id(x) for x in gpus[idxs[0]].pciDeviceIds})),
                                     tuple(sorted(rule.items()))))
    out = tuple(PoolLabels(i, p.name, p.gpu, tuple(sorted(p.nodeSelector.items())), tuple(sorted(nfd[i].items())),
                           tuple(sorted(manual[i].items())), why.get(i, ""), p.nodeGroup or "",
                           p.labelsFrom == "user" or not nfd_rules) for i, p in enumerate(pools))
    return out, tuple(rules)
