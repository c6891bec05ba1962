"""Device plugin health policy rules: the XIDs of spec.devicePlugin.health and nodePools[].devicePluginHealth
against NVIDIA's XID catalog and against what the deployed device plugin reads.

Refuses, located: an XID NVIDIA's catalog does not list; an XID both ignored and fatal, listed twice, or ignored
with the checks off (entries that do nothing); DP_DISABLE_HEALTHCHECKS / DP_ENABLE_HEALTHCHECKS in
spec.devicePlugin.env beside a health policy (two writers of one variable); fatalXids on a device plugin older
than v0.18.0 (it never reads DP_ENABLE_HEALTHCHECKS) or beside checks false (the plugin then watches nothing); a policy on a DRA pool (no device plugin runs there); in
operator mode, pools whose policies differ (the ClusterPolicy has one devicePlugin.env for every node).
Warns: ignoring an XID whose immediate action in NVIDIA's catalog needs a GPU reset or a reboot (see
check_ignored_reset_required for why a warning), ignoring one the plugin already ignores, a policy with the
device plugin off.
Sources: catalog/data/xids.yaml (NVIDIA's XID catalog; k8s-device-plugin internal/rm/health.go per version).
"""

from __future__ import annotations

from gpuop.catalog import xids as xid_catalog
from gpuop.plan import chartmap
from gpuop.plan.pools import health_policy, pool_health
from gpuop.validate.rules import Context, Found, rule

HEALTH = ("spec", "devicePlugin", "health")
LISTS = ("ignoreXids", "fatalXids")


def _policies(ctx: Context):
    """(field path, DevicePluginHealth) of every policy the profile writes: the cluster's, then each pool's."""
    if ctx.spec.devicePlugin.health is not None:
        yield HEALTH, ctx.spec.devicePlugin.health
    for i, p in enumerate(ctx.spec.nodePools):
        if p.devicePluginHealth is not None:
            yield ("spec", "nodePools", i, "devicePluginHealth"), p.devicePluginHealth


def plugin_version(ctx: Context) -> str:
    """The device plugin version the cluster runs: spec.devicePlugin.version, else the operator chart's default
    (operator mode) or the stack release's."""
    spec = ctx.spec
    if spec.devicePlugin.version:
        return spec.devicePlugin.version
    if spec.delivery.mode == "operator":
        operator = spec.delivery.operator.version or ctx.release.operatorVersion
        return chartmap.chart_defaults(operator).get("devicePlugin", {}).get("version") or ""
    return ctx.release.components["devicePlugin"].version


@rule("xid-unknown", source="catalog/data/xids.yaml: NVIDIA's XID catalog (docs.nvidia.com/deploy/xid-errors/"
      "analyzing-xid-catalog.html)")
def check_known_xids(ctx: Context) -> list:
    """An XID NVIDIA's catalog does not list: the plugin would take it, but no GPU reports it (a typo)."""
    out = Found(ctx)
    cat = xid_catalog.load()
    top = max(x.xid for x in cat.xids)
    for loc, h in _policies(ctx):
        for field in LISTS:
            for j, code in enumerate(getattr(h, field)):
                if cat.get(code) is None:
                    out.error(loc + (field, j), f"Invalid value: {code}: not an XID of NVIDIA's XID catalog (codes 1 "
                              f"to {top}, catalog/data/xids.yaml)")
    return out


@rule("xid-lists-conflict", source="NVIDIA/k8s-device-plugin internal/rm/health.go getDisabledHealthCheckXids "
      "(DP_ENABLE_HEALTHCHECKS overrides DP_DISABLE_HEALTHCHECKS; `all` disables every XID)")
def check_conflicts(ctx: Context) -> list:
    """Entries that do nothing: an XID in both lists (fatal wins), one listed twice, ignored XIDs with the checks
    off; the plugin's env set both by spec.devicePlugin.env and by a policy; a policy on a DRA pool."""
    out = Found(ctx)
    for loc, h in _policies(ctx):
        for field in LISTS:
            seen: set[int] = set()
            for j, code in enumerate(getattr(h, field)):
                if code in seen:
                    out.error(loc + (field, j), f"Duplicate value: {code}")
                seen.add(code)
        fatal = set(h.fatalXids)
        for j, code in enumerate(h.ignoreXids):
            if code in fatal and code not in h.ignoreXids[:j]:     # a repeat is reported as a duplicate
                out.error(loc + ("ignoreXids", j), f"Invalid value: {code}: also in fatalXids, which wins "
                          "(DP_ENABLE_HEALTHCHECKS overrides DP_DISABLE_HEALTHCHECKS), so ignoring it does nothing")
        if not h.checks and h.ignoreXids:
            out.error(loc + ("ignoreXids",), "Forbidden: checks is false, so every XID is already ignored "
                      "(DP_DISABLE_HEALTHCHECKS=all); drop ignoreXids, or keep checks on")
    if any(True for _ in _policies(ctx)):
        for j, e in enumerate(ctx.spec.devicePlugin.env):
            if e.name in xid_catalog.HEALTH_ENV:
                out.error(("spec", "devicePlugin", "env", j, "name"), f"Forbidden: {e.name} is written from the "
                          "device plugin health policy (spec.devicePlugin.health, nodePools[].devicePluginHealth); "
                          "set the XIDs there")
    for i, p in enumerate(ctx.spec.nodePools):
        if p.devicePluginHealth is not None and p.allocation == "dra":
            out.error(("spec", "nodePools", i, "devicePluginHealth"), "Forbidden: allocation is dra, so no device "
                      "plugin runs on this pool's nodes to read the policy")
    return out


@rule("xid-ignored-reset-required", severity="warning", source="catalog/data/xids.yaml actions (NVIDIA's XID "
      "catalog, Resolution Bucket (Immediate Action)); NVIDIA/k8s-device-plugin#1974")
def check_ignored_reset_required(ctx: Context) -> list:
    """Ignoring an XID whose immediate action in NVIDIA's catalog is a GPU reset, a reboot or a workflow that ends
    in one: the plugin keeps offering that GPU and new pods land on it. A warning, not an error: the plugin's
    unhealthy mark is never cleared until it restarts, so clusters whose own remediation (a node health checker
    that drains and resets, DCGM policies) acts on these XIDs ignore them here on purpose, and NVIDIA's own
    default already ignores one such XID (109). Also warns an XID the plugin ignores by default (no effect)."""
    out = Found(ctx)
    cat = xid_catalog.load()
    plugin = cat.plugin(plugin_version(ctx))
    for loc, h in _policies(ctx):
        for j, code in enumerate(h.ignoreXids):
            x = cat.get(code)
            if x is None:
                continue                                   # xid-unknown's
            if plugin is not None and code in plugin.ignoredByDefault:
                out.warn(loc + ("ignoreXids", j), f"XID {code} ({x.description}) is already ignored by the device "
                         f"plugin {plugin_version(ctx)} by default; the entry changes nothing")
            elif cat.reset_required(code):
                out.warn(loc + ("ignoreXids", j), f"XID {code} ({x.mnemonic}: {x.description}): NVIDIA's immediate "
                         f"action is {x.action} ({cat.actions[x.action].meaning}); ignored, the GPU stays allocatable "
                         "and new pods are scheduled on it until something else takes it out of service")
    return out


@rule("xid-fatal-unsupported", source="NVIDIA/k8s-device-plugin internal/rm/health.go: DP_ENABLE_HEALTHCHECKS from "
      "v0.18.0 (commit 0900fac41, PR #1443), checkHealth's IsAllDisabled return; catalog/data/xids.yaml devicePlugin")
def check_version_supports(ctx: Context) -> list:
    """fatalXids the deployed device plugin would not act on: before v0.18.0 it never reads DP_ENABLE_HEALTHCHECKS;
    with checks false it watches no XID at all, the listed ones included (catalog fatalWithChecksOff)."""
    version = plugin_version(ctx)
    plugin = xid_catalog.load().plugin(version)
    if plugin is None:
        return []
    out = Found(ctx)
    for loc, h in _policies(ctx):
        if not h.fatalXids:
            continue
        if not plugin.enableEnv:
            out.error(loc + ("fatalXids",), f"Forbidden: the device plugin {version} does not read "
                      "DP_ENABLE_HEALTHCHECKS (from v0.18.0 on), so these XIDs would not mark a GPU unhealthy; "
                      "use a release whose device plugin is v0.18.0 or later, or drop fatalXids")
        elif not h.checks and not plugin.fatalWithChecksOff:
            out.error(loc + ("fatalXids",), f"Forbidden: with checks false the device plugin {version} watches no "
                      "XID at all (DP_DISABLE_HEALTHCHECKS=all: checkHealth returns on IsAllDisabled before "
                      "DP_ENABLE_HEALTHCHECKS counts), so these XIDs would not mark a GPU unhealthy; keep checks on "
                      "and list the XIDs to leave out in ignoreXids")
    return out


@rule("operator-device-plugin-health", source="NVIDIA/gpu-operator nvidia.com_clusterpolicies.yaml "
      "spec.devicePlugin.env (one env for the device plugin of every node)")
def check_operator_one_policy(ctx: Context) -> list:
    """Operator mode: a pool whose policy differs from the cluster's. NVIDIA's operator runs one device plugin
    DaemonSet with the ClusterPolicy's devicePlugin.env on every GPU node, so it cannot give a pool its own."""
    spec = ctx.spec
    if spec.delivery.mode != "operator":
        return []
    cluster = health_policy(spec.devicePlugin.health)
    out = Found(ctx)
    for i, p in enumerate(spec.nodePools):
        if p.devicePluginHealth is not None and p.allocation != "dra" and pool_health(spec, p) != cluster:
            out.error(("spec", "nodePools", i, "devicePluginHealth"), "Forbidden: NVIDIA's ClusterPolicy has one "
                      "devicePlugin.env for the device plugin of every node, so a pool cannot have a health policy "
                      "of its own in operator mode; set it in spec.devicePlugin.health for every pool, or use "
                      "spec.delivery.mode: stack")
    return out


@rule("device-plugin-health-off", severity="warning", source="the device plugin reads the policy (spec.devicePlugin)")
def check_plugin_on(ctx: Context) -> list:
    """A health policy with the device plugin off: nothing reads it."""
    if ctx.spec.devicePlugin.enabled:
        return []
    return [ctx.at(loc, "the device plugin is off (spec.devicePlugin.enabled: false), so nothing reads this policy",
                   "warning") for loc, _ in _policies(ctx)]


RULES = ((check_known_xids, check_conflicts, check_version_supports, check_operator_one_policy, check_plugin_on),
         (check_ignored_reset_required,))


def applies(ctx: Context) -> bool:
    # the catalog pass reports an unknown release; no policy, nothing to check
    return ctx.release is not None and (ctx.spec.devicePlugin.health is not None
                                        or any(p.devicePluginHealth is not None for p in ctx.spec.nodePools))
