"""The one mapping between a gpuop profile and NVIDIA's gpu-operator chart (operator mode), read both ways.

Every row names a profile path (below `spec`), the chart value paths it decides, the ClusterPolicy spec paths
NVIDIA's chart renders those to (templates/clusterpolicy.yaml), the transform profile -> values and its
inverse values -> profile. Export (plan/operator.py `chart_values`) and import (ops/importer.py) both read
this table, so the two directions cannot drift.

Semantics of defaults:
- a profile path left out means the profile's own default (the field description in profile/models.py);
  export writes the value that default means, explicitly, so an operand does not change when NVIDIA changes
  a chart default;
- a chart value path left out of the values means the chart's default of that operator version
  (catalog/data/operator-chart/<version>.yaml): the inverse reads values merged over those defaults
  (`effective`), so an import needs no copy of NVIDIA's values.yaml;
- the inverse leaves a profile path out when its value is the profile's default.

Kinds of rows:
- `field`: one profile setting <-> one or more chart values (`to_values` / `to_profile`);
- `image`: the images (`images.registry` <-> every component's `repository`; `<component>.version` <->
  `<component>.version`; the image names are the release's);
- `fixed`: a chart value gpuop always writes with one value (the profile has no setting for it); the inverse
  reports any other value as not expressible;
- `derived`: values computed from the resolved plan (driver versions and NVIDIADriver CRs, MIG strategy,
  per-pool device-plugin / MIG configs, NFD): export computes them in plan/operator.py; the inverse is the
  importer's pool reconstruction, which reads the same value paths (`DERIVED_PATHS`).
Everything else in the chart's values is listed by `UNEXPRESSED` (value path prefix, why), or -- a leaf under
no row nor prefix -- reported by `values_to_profile` as not expressible when it differs from the chart default.

Public API (stable: the importer and `gpuop import --check` call it):
- `ROWS: tuple[Row, ...]`, `UNEXPRESSED: tuple[tuple[str, str], ...]`, `DERIVED_PATHS: tuple[str, ...]`
- `chart_defaults(version: str = DEFAULT_VERSION) -> dict`  (a copy; KeyError-free: {} when unknown)
- `effective(values: dict, version: str = DEFAULT_VERSION) -> dict`  (values merged over the chart defaults)
- `release_images(version: str = DEFAULT_VERSION, release: str | None = None) -> ReleaseImages`  (what the inverse compares against)
- `profile_to_values(settings: dict, images: ReleaseImages) -> dict`  (every row but `derived`; `settings` is
  the profile's `spec` as a plain dict, e.g. `spec.model_dump()`, missing keys meaning the defaults)
- `values_to_profile(values: dict, version: str = DEFAULT_VERSION) -> tuple[dict, list[tuple[str, str]]]`
  (a nested profile `spec` fragment with every non-default setting the rows cover -- no nodePools, which the
  importer builds from the derived paths -- and (values path, reason) for each value the profile cannot
  express)
- `policy_paths(values_path: str) -> tuple[str, ...]`  (ClusterPolicy spec paths a value path renders to)
- `get_path(tree, dotted, default)`, `set_path(tree, dotted, value)`, `leaves(tree)`  (dotted paths; a key
  holding dots is not used by any row)
- `proxy_env(proxy: dict | None) -> list[dict]` (spec.proxy as the driver's / toolkit's env entries),
  `split_proxy(driver_env, toolkit_env) -> (proxy | None, driver env, toolkit env)` (the inverse: a proxy only
  when writing it back gives both lists exactly)
- `distribution_env(distribution: str | None) -> list[dict]` (toolkit.env of k3s / RKE2 / MicroK8s,
  `RUNTIME_ENV_DISTRIBUTIONS`), `parse_metrics(csv: str) -> list[dict]` (dcgm-metrics.csv -> profile metrics)
- `Unexpressible(reason, value=None, paths=())`: what an inverse raises; constants `DEFAULT_VERSION`,
  `COMPONENTS` (values key -> (profile section, release component)), `PLUGIN_CONFIG_MAP`, `MIG_CONFIG_MAP`,
  `DCGM_METRICS_MAP` (the ConfigMap names gpuop writes), `KUBELET_ROOT`

A row's `merge` list is merged over the rows' before by name (its entries win); a `fill` list is appended for
the names they lack (theirs win: the proxy after a component's own env).
"""

from __future__ import annotations

import copy
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable

from gpuop import catalog as catalog_mod
from gpuop.catalog import operator as operator_catalog
from gpuop.catalog import xids as xid_catalog
from gpuop.catalog.reads import memo
from gpuop.kube import components

DEFAULT_VERSION = "v26.7.0"
UPSTREAM_TOLERATIONS = ({"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},)
MISSING = object()

# values key -> (profile section or None, release component): every operand image the chart names.
COMPONENTS = components.CHART_IMAGES
# components whose ClusterPolicy section takes imagePullSecrets and resources (templates/clusterpolicy.yaml;
# driver.manager pulls with the driver's)
PULL_SECRETS = RESOURCES = components.KEYS
SWITCHABLE = components.OPERATOR_SWITCHABLE
VERSIONED = components.VERSIONED


class Unexpressible(Exception):
    """Raised by an inverse: the values hold something the profile has no way to say. `value`: the profile value
    the inverse still gives (the closest one), `paths`: the values paths at fault (default: those that differ from
    the chart default, or all of the row's)."""

    def __init__(self, reason: str, value=None, paths: tuple[str, ...] = ()):
        super().__init__(reason)
        self.reason, self.value, self.paths = reason, value, tuple(paths)


# ------------------------------------------------------------------------------------------ dotted paths

def get_path(tree, dotted: str, default=None):
    node = tree
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return default
        node = node[part]
    return node


def set_path(tree: dict, dotted: str, value) -> None:
    parts = dotted.split(".")
    node = tree
    for part in parts[:-1]:
        node = node.setdefault(part, {})
    node[parts[-1]] = value


def leaves(tree, prefix: str = ""):
    """(dotted path, value) of every leaf; an empty mapping is a leaf."""
    if isinstance(tree, dict) and tree:
        for k, v in tree.items():
            yield from leaves(v, f"{prefix}.{k}" if prefix else str(k))
    else:
        yield prefix, tree


def omit_nulls(tree):
    """`tree` without the mapping keys whose value is None, at any depth: a profile's unset optional field
    (a toleration's value, a resource limit) is left out, never written as null. NVIDIA's templates copy such
    values into the ClusterPolicy as they are, where the CRD refuses a null (no field of it is nullable), and
    Helm's coalescing drops a null only where the chart's own values have the key."""
    if isinstance(tree, dict):
        return {k: omit_nulls(v) for k, v in tree.items() if v is not None}
    if isinstance(tree, list):
        return [omit_nulls(v) for v in tree]
    return tree


def _merge(base: dict, over: dict) -> dict:
    out = dict(base)
    for k, v in over.items():
        out[k] = _merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else copy.deepcopy(v)
    return out


# ------------------------------------------------------------------------------------------ release facts

@dataclass(frozen=True)
class ReleaseImages:
    """The stack release an operator version ships: its registry and each component's (path, tag)."""
    operator_version: str
    registry: str
    images: dict                     # component -> (catalog path e.g. "k8s/container-toolkit", tag)
    extras: dict = field(default_factory=dict)   # gds / gdrcopy -> (path, version)

    def repository(self, component: str, registry: str) -> str:
        head = self.images[component][0].rpartition("/")[0]
        return f"{registry}/{head}" if head else registry

    def name(self, component: str) -> str:
        return self.images[component][0].rpartition("/")[2]

    def tag(self, component: str) -> str:
        return self.images[component][1]


@memo(maxsize=16)     # not lru_cache: a hit must note the catalog reads it stands for (catalog/reads.py)
def release_images(version: str = DEFAULT_VERSION, release: str | None = None) -> ReleaseImages:
    """The stack release `release`, or the one whose operator is `version` (the newest release when none is)."""
    from gpuop.catalog import distributions
    cat = catalog_mod.load()
    rel = (cat.release(release) if release else None) or next(
        (r for r in cat.releases if r.operatorVersion == version), None) or cat.release(None)
    extras = distributions.driver_extras().get(rel.name)
    return ReleaseImages(
        operator_version=rel.operatorVersion, registry=rel.registry,
        images={k: (c.image, c.version) for k, c in rel.components.items()},
        extras={k: (getattr(extras, k).image, getattr(extras, k).version) for k in ("gds", "gdrcopy")} if extras else {})


def chart_defaults(version: str = DEFAULT_VERSION) -> dict:
    return operator_catalog.chart_defaults(version) or {}


def effective(values: dict, version: str = DEFAULT_VERSION) -> dict:
    return _merge(chart_defaults(version), values or {})


# ------------------------------------------------------------------------------------------ rows

@dataclass(frozen=True)
class Row:
    profile: str                          # path below spec ("" for fixed / derived rows)
    values: tuple[str, ...]               # chart value paths the row decides
    policy: tuple[str, ...]               # ClusterPolicy spec paths the chart renders them to
    default: Any = None                   # the profile's value when the path is left out
    to_values: Callable | None = None     # (profile value, ReleaseImages) -> tuple of values, one per path
    to_profile: Callable | None = None    # (tuple of effective values, ReleaseImages) -> profile value
    kind: str = "field"                   # field | image | fixed | derived
    why: str = ""
    merge: bool = False                   # a list of name/value entries merged by name over the rows' before
    fill: bool = False                    # a list of name/value entries appended for the names the rows before lack


def _same(*paths):
    """One profile value written to every path; the inverse needs them all equal."""
    def fwd(v, _):
        return tuple(copy.deepcopy(v) for _ in paths)

    def inv(vals, _):
        first = vals[0]
        if any(v != first for v in vals[1:]):
            raise Unexpressible(f"{', '.join(paths)} differ ({', '.join(repr(v) for v in vals)}); the profile has "
                                "one setting for all of them")
        return copy.deepcopy(first)
    return fwd, inv


def field_row(profile: str, values: str | tuple, default=None, policy=None, fwd=None, inv=None, why="") -> Row:
    paths = (values,) if isinstance(values, str) else tuple(values)
    f, i = _same(*paths)
    return Row(profile, paths, tuple(policy) if policy is not None else paths, default,
               fwd or f, inv or i, "field", why)


def fixed_row(path: str, value, why: str, policy=None, absent: tuple = ()) -> Row:
    """`absent`: values that mean the same as `value` (the chart's empty default)."""
    def fwd(_, __):
        return (copy.deepcopy(value),)

    def inv(vals, _):
        if vals[0] != value and vals[0] not in absent:
            raise Unexpressible(f"gpuop always sets {path}: {value!r} ({why})")
        return None
    return Row("", (path,), (policy or path,), None, fwd, inv, "fixed", why)


def derived_row(paths: tuple[str, ...], why: str, policy=None) -> Row:
    return Row("", paths, tuple(policy) if policy is not None else paths, None, None, None, "derived", why)


def _registry_rows() -> list[Row]:
    keys = tuple(COMPONENTS)
    paths = tuple(f"{k}.repository" for k in keys)

    def fwd(registry, rel: ReleaseImages):
        reg = registry or rel.registry
        return tuple(rel.repository(COMPONENTS[k][1], reg) for k in keys)

    def inv(vals, rel: ReleaseImages):
        common, _ = _split_registry(keys, vals, rel)
        return common if common != rel.registry else None

    def fwd_over(overrides, rel: ReleaseImages):
        overrides = overrides or {}
        return tuple(overrides.get(OVERRIDE_KEYS.get(k, k)) for k in keys)

    def inv_over(vals, rel: ReleaseImages):
        return _split_registry(keys, vals, rel)[1]
    rows = [Row("images.registry", paths, paths, None, fwd, inv, "image",
                "one registry (a mirror) for every operand image, driver manager included"),
            # after images.registry: a component's own repository replaces the one under the common registry
            Row("delivery.operator.repositories", paths, paths, {}, fwd_over, inv_over, "image",
                "a component pulled from elsewhere than the common registry")]
    for k in keys:
        comp = COMPONENTS[k][1]
        rows.append(Row("", (f"{k}.image",), (f"{k}.image",), None,
                        (lambda _, rel, c=comp: (rel.name(c),)),
                        (lambda vals, rel, c=comp, p=f"{k}.image": _fixed_name(vals[0], rel.name(c), p)),
                        "image", "the release's image name"))
    return rows


OVERRIDE_KEYS = {"driver.manager": "driverManager"}     # values key -> key of delivery.operator.repositories


def _split_registry(keys, vals, rel: ReleaseImages) -> tuple[str, dict]:
    """Component repositories -> (the common registry: the one most components are under, the release's when
    none is; {component: repository} of those that are not under it)."""
    regs = []
    for k, repo in zip(keys, vals):
        head = rel.images[COMPONENTS[k][1]][0].rpartition("/")[0]
        suffix = f"/{head}" if head else ""
        regs.append(repo[: -len(suffix)] if suffix and isinstance(repo, str) and repo.endswith(suffix)
                    else repo if not suffix and isinstance(repo, str) else None)
    known = [r for r in regs if r]
    common = Counter(known).most_common(1)[0][0] if known else rel.registry
    odd = {OVERRIDE_KEYS.get(k, k): v for k, v, r in zip(keys, vals, regs)
           if r != common and v not in (None, "") and v != rel.repository(COMPONENTS[k][1], common)}
    return common, odd


def _fixed_name(value, want, path):
    if value != want:
        raise Unexpressible(f"{path} {value!r} is not the release's image {want!r}")
    return None


def _version_row(key: str) -> Row:
    def fwd(v, rel):
        return (v or rel.tag(key),)

    def inv(vals, rel):
        v = vals[0]
        if v in (None, ""):
            return None
        return None if str(v) == rel.tag(key) else str(v)
    return Row(f"{key}.version", (f"{key}.version",), (f"{key}.version",), None, fwd, inv, "image",
               "omitted: the release's version")


def _manager_version_row() -> Row:
    def fwd(_, rel):
        return (rel.tag("driverManager"),)

    def inv(vals, rel):
        if str(vals[0]) != rel.tag("driverManager"):
            raise Unexpressible(f"driver.manager.version {vals[0]!r} is not the release's "
                                f"{rel.tag('driverManager')!r} (gpuop pins the release's driver manager)")
        return None
    return Row("", ("driver.manager.version",), ("driver.manager.version",), None, fwd, inv, "image",
               "the release's k8s-driver-manager")


def _pull_secrets_row() -> Row:
    paths = tuple(f"{k}.imagePullSecrets" for k in PULL_SECRETS)
    fwd_all, inv_all = _same(*paths)

    def fwd(v, rel):
        return fwd_all(list(v) if v else None, rel)

    def inv(vals, rel):
        return _split_secrets(vals)[0] or None

    def fwd_over(overrides, rel):
        overrides = overrides or {}
        return tuple(list(overrides[k]) if k in overrides else None for k in PULL_SECRETS)

    def inv_over(vals, rel):
        return _split_secrets(vals)[1]
    return [Row("images.pullSecrets", paths, paths, None, fwd, inv, "field",
                "the secrets most components pull with"),
            # after images.pullSecrets: a component's own secrets replace the common ones
            Row("delivery.operator.pullSecrets", paths, paths, {}, fwd_over, inv_over, "field",
                "a component pulling with other secrets than the rest")]


def _split_secrets(vals) -> tuple[list, dict]:
    """Each component's imagePullSecrets -> (the list most components have, {component: its list} of the others)."""
    lists = []
    for k, v in zip(PULL_SECRETS, vals):
        items = list(v or [])
        if not all(isinstance(x, str) for x in items):
            raise Unexpressible(f"{k}.imagePullSecrets: secret names (strings) only")
        lists.append(tuple(items))
    common = Counter(lists).most_common(1)[0][0] if lists else ()
    return list(common), {k: list(x) for k, x in zip(PULL_SECRETS, lists) if x != common}


def _tolerations_row() -> Row:
    def fwd(v, _):
        return (copy.deepcopy(v) if v is not None else [dict(t) for t in UPSTREAM_TOLERATIONS],)

    def inv(vals, _):
        v = vals[0]
        return None if v is None or list(v) == [dict(t) for t in UPSTREAM_TOLERATIONS] else copy.deepcopy(v)
    return Row("daemonsets.tolerations", ("daemonsets.tolerations",), ("daemonsets.tolerations",), None, fwd, inv,
               "field", "omitted: the operator's nvidia.com/gpu toleration")


def _upgrade_rows() -> list[Row]:
    up = "driver.upgradePolicy"
    return [
        field_row("driver.upgradePolicy.autoUpgrade", f"{up}.autoUpgrade", True),
        field_row("driver.upgradePolicy.maxParallelUpgrades", f"{up}.maxParallelUpgrades", 1),
        field_row("driver.upgradePolicy.drain", f"{up}.drain.enable", False),
        field_row("driver.upgradePolicy.force", (f"{up}.drain.force", f"{up}.gpuPodDeletion.force"), False,
                  policy=(f"{up}.drain.force", f"{up}.podDeletion.force")),
        field_row("driver.upgradePolicy.timeoutSeconds", (f"{up}.drain.timeoutSeconds",
                                                          f"{up}.gpuPodDeletion.timeoutSeconds"), 0,
                  policy=(f"{up}.drain.timeoutSeconds", f"{up}.podDeletion.timeoutSeconds"),
                  # the drain's: a GPU pod deletion timeout of its own is the row below
                  inv=lambda vals, _: copy.deepcopy(vals[0])),
        _pod_deletion_timeout_row(),
        field_row("driver.upgradePolicy.deleteEmptyDir", (f"{up}.drain.deleteEmptyDir",
                                                          f"{up}.gpuPodDeletion.deleteEmptyDir"), False,
                  policy=(f"{up}.drain.deleteEmptyDir", f"{up}.podDeletion.deleteEmptyDir")),
        field_row("driver.upgradePolicy.podSelector", f"{up}.drain.podSelector", ""),
    ]


def _pod_deletion_timeout_row() -> Row:
    """After the timeout row: a GPU pod deletion timeout other than the drain's replaces the one it wrote."""
    up = "driver.upgradePolicy"
    paths = (f"{up}.gpuPodDeletion.timeoutSeconds", f"{up}.drain.timeoutSeconds")

    def fwd(v, _):
        return (v, None)

    def inv(vals, _):
        return None if vals[0] == vals[1] else copy.deepcopy(vals[0])
    return Row("delivery.operator.gpuPodDeletionTimeoutSeconds", paths, (f"{up}.podDeletion.timeoutSeconds",
               f"{up}.drain.timeoutSeconds"), None, fwd, inv, "field",
               "the GPU pod deletion timeout where it is not the drain's")


def _tree_delta(value, default):
    """What of `value` differs from `default` (mappings by key, anything else whole); None when nothing does."""
    if isinstance(value, dict) and isinstance(default, dict):
        out = {}
        for k, v in value.items():
            d = _tree_delta(v, default.get(k, MISSING))
            if d is not None:
                out[k] = d
        return out or None
    return None if value == default else copy.deepcopy(value)


def _passthrough_row(profile: str, key: str, subkeys: tuple[str, ...] | None, why: str) -> Row:
    """A part of NVIDIA's chart gpuop builds nothing of its own for, kept as written: the profile holds what
    differs from the chart's defaults (`subkeys`: the keys of `key` the row covers; None: all of them)."""
    paths = (key,) if subkeys is None else tuple(f"{key}.{k}" for k in subkeys)

    def fwd(v, _):
        v = v or {}
        if subkeys is None:
            return (copy.deepcopy(v) or None,)
        return tuple(copy.deepcopy(v[k]) if k in v else None for k in subkeys)

    def inv(vals, rel):
        defaults = chart_defaults(rel.operator_version)
        if subkeys is None:
            return _tree_delta(vals[0] or {}, get_path(defaults, key, {})) or {}
        out = {}
        for k, v in zip(subkeys, vals):
            default = get_path(defaults, f"{key}.{k}", MISSING)
            if v in (None, {}, [], "") and default is MISSING:
                continue
            delta = _tree_delta(v, default)          # Helm merges a mapping over the chart's: what differs
            if delta is not None:
                out[k] = delta
        return out
    return Row(profile, paths, (), {}, fwd, inv, "field", why)


OPERATOR_KEYS = ("imagePullPolicy", "env", "priorityClassName", "nodeSelector", "tolerations", "annotations",
                 "affinity", "logging", "resources", "cleanupCRD", "upgradeCRD")     # profile/models.py operatorValues


def _service_monitor_rows() -> list[Row]:
    sm = "dcgmExporter.serviceMonitor"
    return [
        # enabled: the profile's "omitted" depends on the platform (true on OpenShift); the plan resolves it
        derived_row((f"{sm}.enabled",), "the profile's dcgmExporter.serviceMonitor.enabled, omitted: true on "
                    "OpenShift, false elsewhere (plan/build.py); the importer writes it whenever it differs"),
        field_row(f"{sm}.interval", f"{sm}.interval", "15s"),
        field_row(f"{sm}.honorLabels", f"{sm}.honorLabels", False),
        field_row(f"{sm}.additionalLabels", f"{sm}.additionalLabels", {},
                  inv=lambda vals, _: dict(vals[0] or {})),
    ]


def _allowlist_row() -> Row:
    def fwd(v, _):
        return (list(v or []) or None,)

    def inv(vals, _):
        return list(vals[0] or [])
    return Row("dcgmExporter.podLabelAllowlist", ("dcgmExporter.podLabelAllowlistRegex",),
               ("dcgmExporter.podLabelAllowlistRegex",), [], fwd, inv, "field",
               "omitted: every pod label (the key is left out of the values, as the chart's default)")


def _metrics_row() -> Row:
    paths = ("dcgmExporter.config.create", "dcgmExporter.config.name", "dcgmExporter.config.data")

    def fwd(metrics, _):
        if not metrics:
            return (None, None, None)
        return (True, DCGM_METRICS_MAP, "".join(f"{m['field']}, {m['type']}, {m['help']}\n" for m in metrics))

    def inv(vals, _):
        create, name, data = vals
        if not data:                 # a name alone: a ConfigMap the user manages (delivery.operator.dcgmMetricsConfig)
            return []
        return parse_metrics(data)
    return Row("dcgmExporter.metrics", paths, ("dcgmExporter.config.name",), [], fwd, inv, "field",
               "the metrics CSV in a ConfigMap the chart renders (config.create)")


def _config_map_row(profile: str, key: str, ours: str, with_default: bool = False) -> Row:
    """A ConfigMap the operator reads by name (and, for the device plugin, the config of unlabelled nodes):
    omitted means gpuop's name; the inverse keeps any other, so adopting a cluster orphans no ConfigMap."""
    paths = (f"{key}.config.name",) + ((f"{key}.config.default",) if with_default else ())

    def fwd(v, _):
        v = {k: x for k, x in (v or {}).items() if x is not None}
        if not v:                        # omitted: gpuop's names (plan/operator.py chart_values writes them)
            return (None,) + ((None,) if with_default else ())
        # what an omitted half means, explicitly: the chart's own defaults ("" for both) are not gpuop's
        return (v.get("name", ours),) + ((v.get("default", "default"),) if with_default else ())

    def inv(vals, _):
        name = vals[0]
        if name in (None, ""):           # no ConfigMap: the default config has nothing to name
            return None
        out = {} if name == ours else {"name": str(name)}
        if with_default and vals[1] is not None and vals[1] != "default":
            out["default"] = str(vals[1])
        return out or None
    return Row(profile, paths, paths, None, fwd, inv, "field",
               f"the {key} ConfigMap's name" + (" and its config for nodes without a label" if with_default else "")
               + f"; omitted: {ours}" + (", config `default`" if with_default else ""))


def _str_list(v, path: str) -> list:
    items = list(v or [])
    if not all(isinstance(x, str) for x in items):
        raise Unexpressible(f"{path}: every entry must be a string")
    return items


def _env_row(profile: str, path: str) -> Row:
    def inv(vals, _):
        env = _env_list(vals[0])
        for e in env:
            if not (isinstance(e, dict) and set(e) <= {"name", "value"} and isinstance(e.get("name"), str)
                    and isinstance(e.get("value", ""), str)):
                raise Unexpressible(f"{path}: only name / value entries (no valueFrom) are a profile's "
                                    f"{profile}", value=None)
        return [{"name": e["name"], "value": e.get("value", "")} for e in env] or []
    return field_row(profile, path, [], fwd=lambda v, _: ([dict(e) for e in v] if v else None,), inv=inv,
                     why="merged over the operand's env by name, as gpuop's stack does")


def _env_list(v) -> list:
    return list(v) if isinstance(v, list) else list(v or [])


# spec.proxy as the driver's and the toolkit's env (plan/build.py PROXIED: the containers that fetch from outside),
# in this order, both cases (tools differ in which they read), after the component's own env, which wins by name
PROXY_ENV = (("httpProxy", ("HTTP_PROXY", "http_proxy")), ("httpsProxy", ("HTTPS_PROXY", "https_proxy")),
             ("noProxy", ("NO_PROXY", "no_proxy")))
PROXY_NAMES = tuple(n for _, names in PROXY_ENV for n in names)
PROXY_URL = re.compile(r"^https?://[^\s]+$")            # profile/models.py Proxy
NO_PROXY_ITEM = re.compile(r"^[^\s,]+$")


def proxy_env(proxy) -> list[dict]:
    """The env entries spec.proxy (a plain dict, missing keys or None meaning unset) gives the driver and the
    toolkit, as gpuop's stack sets them (plan/build.py)."""
    proxy = proxy or {}
    out = []
    for key, names in PROXY_ENV:
        value = ",".join(proxy.get(key) or []) if key == "noProxy" else proxy.get(key)
        if value:
            out += [{"name": n, "value": value} for n in names]
    return out


def _fill(env: list, extra: list) -> list:
    names = {e.get("name") for e in env if isinstance(e, dict)}
    return list(env) + [e for e in extra if e["name"] not in names]


def _proxy_of(tail: list) -> dict | None:
    """The spec.proxy a run of proxy env entries says, or None when they are not one (cases that disagree, a value
    the profile's Proxy refuses)."""
    found: dict = {}
    for e in tail:
        if not (isinstance(e, dict) and set(e) <= {"name", "value"} and e.get("name") in PROXY_NAMES
                and isinstance(e.get("value", ""), str)):
            return None
        key = next(k for k, names in PROXY_ENV if e["name"] in names)
        if found.setdefault(key, e.get("value", "")) != e.get("value", ""):
            return None
    out: dict = {}
    for key, value in found.items():
        if key == "noProxy":
            items = value.split(",")
            if not value or not all(NO_PROXY_ITEM.match(i) for i in items):
                return None
            out[key] = items
        elif PROXY_URL.match(value or ""):
            out[key] = value
        else:
            return None
    return out or None


def split_proxy(driver_env, toolkit_env) -> tuple[dict | None, list, list]:
    """driver.env, toolkit.env -> (the spec.proxy they carry, or None; the driver's env without it; the toolkit's
    without it). A proxy is read only when writing it back over the rest gives both lists exactly (the proxy's
    entries the last of the driver's env, in gpuop's order, and the same in the toolkit's), so a driver env
    that merely names a proxy, or only the driver's, stays the component's env: the import keeps it as it is."""
    d, t = _env_list(driver_env), _env_list(toolkit_env)
    for k in range(min(len(PROXY_NAMES), len(d)), 0, -1):
        tail = d[-k:]
        order = [PROXY_NAMES.index(e.get("name")) if isinstance(e, dict) and e.get("name") in PROXY_NAMES else -1
                 for e in tail]
        if -1 in order or order != sorted(set(order)):
            continue
        proxy = _proxy_of(tail)
        if proxy is None:
            continue
        env = proxy_env(proxy)
        if _fill(d[:-k], env) != d:
            continue
        for j in range(min(len(PROXY_NAMES), len(t)), -1, -1):
            if _fill(t[:len(t) - j], env) == t:
                return proxy, d[:-k], t[:len(t) - j]
    return None, d, t


def _proxy_row() -> Row:
    """After the driver's and the toolkit's env rows: the proxy's entries appended for the names they lack."""
    def fwd(v, _):
        env = proxy_env(v)
        return (env or None, copy.deepcopy(env) or None)

    def inv(vals, _):
        return split_proxy(vals[0], vals[1])[0]
    return Row("proxy", ("driver.env", "toolkit.env"), ("driver.env", "toolkit.env"), None, fwd, inv, "field",
               "HTTP_PROXY / HTTPS_PROXY / NO_PROXY, both cases, after the driver's and the toolkit's own env",
               fill=True)


def _driver_env_row() -> Row:
    """The driver's own env: driver.env without the proxy's entries (the proxy row's)."""
    env_row = _env_row("driver.env", "driver.env")

    def fwd(v, rel):
        return env_row.to_values(v, rel) + (None,)

    def inv(vals, rel):
        try:
            return env_row.to_profile((split_proxy(vals[0], vals[1])[1],), rel)
        except Unexpressible as exc:
            raise Unexpressible(exc.reason, exc.value, ("driver.env",)) from None
    return Row("driver.env", ("driver.env", "toolkit.env"), ("driver.env", "toolkit.env"), [], fwd, inv, "field",
               env_row.why)


def health_env(health) -> list[dict]:
    """spec.devicePlugin.health (a plain dict, missing keys meaning the defaults; None: NVIDIA's defaults) as the
    device plugin's env entries, as gpuop's stack sets them (catalog/xids.py policy_env)."""
    h = health or {}
    policy = xid_catalog.Policy(h.get("checks", True), tuple(dict.fromkeys(h.get("ignoreXids") or ())),
                                tuple(dict.fromkeys(h.get("fatalXids") or ())))
    return [{"name": n, "value": v} for n, v in xid_catalog.policy_env(policy)]


def split_health(env) -> tuple[dict | None, list]:
    """devicePlugin.env -> (the spec.devicePlugin.health it carries, or None; the env without it). A policy is read
    only when it is the env's last entries, each variable once, and writing it back gives them exactly (gpuop's
    form); any other DP_DISABLE_HEALTHCHECKS / DP_ENABLE_HEALTHCHECKS (`all` fatal, malformed entries, another
    order) stays the component's env, as written."""
    e = _env_list(env)
    for k in (2, 1):
        tail = e[-k:] if len(e) >= k else []
        if not tail or not all(isinstance(x, dict) and set(x) <= {"name", "value"} and isinstance(x.get("value", ""), str)
                               and x.get("name") in xid_catalog.HEALTH_ENV for x in tail):
            continue
        rest = e[:-k]
        if any(isinstance(x, dict) and x.get("name") in xid_catalog.HEALTH_ENV for x in rest):
            continue
        names = [x["name"] for x in tail]
        if len(set(names)) != k:
            continue
        policy = xid_catalog.read_policy_env({x["name"]: x.get("value", "") for x in tail})
        if policy is None or policy == xid_catalog.Policy():
            continue
        if [{"name": n, "value": v} for n, v in xid_catalog.policy_env(policy)] != [
                {"name": x["name"], "value": x.get("value", "")} for x in tail]:
            continue
        health: dict = {}
        if not policy.checks:
            health["checks"] = False
        if policy.ignore:
            health["ignoreXids"] = list(policy.ignore)
        if policy.fatal:
            health["fatalXids"] = list(policy.fatal)
        return health, rest
    return None, e


def _device_plugin_env_row() -> Row:
    """The device plugin's own env: devicePlugin.env without the health policy's entries (the health row's)."""
    env_row = _env_row("devicePlugin.env", "devicePlugin.env")

    def inv(vals, rel):
        return env_row.to_profile((split_health(vals[0])[1],), rel)
    return Row("devicePlugin.env", ("devicePlugin.env",), ("devicePlugin.env",), [], env_row.to_values, inv, "field",
               env_row.why)


def _health_row() -> Row:
    """After the device plugin's own env: the health policy's entries appended (spec.devicePlugin.health; a pool's
    own policy cannot reach the ClusterPolicy, validate/xid_policy.py refuses it in operator mode)."""
    def fwd(v, _):
        return (health_env(v) or None,)

    def inv(vals, _):
        return split_health(vals[0])[0]
    return Row("devicePlugin.health", ("devicePlugin.env",), ("devicePlugin.env",), None, fwd, inv, "field",
               "DP_DISABLE_HEALTHCHECKS / DP_ENABLE_HEALTHCHECKS after the device plugin's own env", fill=True)


# components whose env the profile has no section field for (driver, toolkit, devicePlugin have spec.<c>.env)
ENV_ONLY_OPERATOR = components.ENV_ONLY


def _component_env_row() -> Row:
    paths = tuple(f"{k}.env" for k in ENV_ONLY_OPERATOR)
    rows = {k: _env_row(f"delivery.operator.env.{k}", f"{k}.env") for k in ENV_ONLY_OPERATOR}

    def fwd(v, rel):
        v = v or {}
        return tuple([dict(e) for e in v[k]] if v.get(k) else None for k in ENV_ONLY_OPERATOR)

    def inv(vals, rel):
        out, bad = {}, []
        for k, val in zip(ENV_ONLY_OPERATOR, vals):
            try:
                env = rows[k].to_profile((val,), rel)
            except Unexpressible:
                bad.append(f"{k}.env")
                continue
            if env:
                out[k] = env
        if bad:
            raise Unexpressible("only name / value entries (no valueFrom) are a profile's delivery.operator.env",
                                value=out or None, paths=tuple(bad))
        return out or None
    return Row("delivery.operator.env", paths, paths, {}, fwd, inv, "field",
               "the env of components the profile has no env setting for (operator mode only)")


POD_META_KEYS = ("app", "app.kubernetes.io/part-of")     # the DaemonSets select their pods by them


def _pod_meta_row(profile: str) -> Row:
    def inv(vals, _):
        found = dict(vals[0] or {})
        taken = sorted(k for k in found if k in POD_META_KEYS) if profile.endswith("labels") else []
        if taken:
            raise Unexpressible(f"{profile}: {', '.join(taken)} select the operands' pods; a profile refuses them",
                                value={k: v for k, v in found.items() if k not in taken} or {})
        return {str(k): str(v) for k, v in found.items()}
    return field_row(profile, profile, {}, fwd=lambda v, _: (dict(v) if v else None,), inv=inv,
                     why="added to every operand pod")


def _config_files_row(profile: str, path: str) -> Row:
    """repoConfig / certConfig: the operator mounts every key of the named ConfigMap (so operator mode needs no
    file list; gpuop's stack does)."""
    def fwd(v, _):
        return ((v or {}).get("configMapName") or None,)

    def inv(vals, _):
        return {"configMapName": str(vals[0])} if vals[0] else None
    return Row(profile, (path,), (path,), None, fwd, inv, "field", "a ConfigMap of files for the driver build")


def _licensing_row() -> Row:
    """The vGPU guest driver's licensing client configuration, by reference: NVIDIA's chart
    driver.licensingConfig (a Secret, or the deprecated ConfigMap, holding gridd.conf and the client token)."""
    paths = ("driver.licensingConfig.secretName", "driver.licensingConfig.configMapName",
             "driver.licensingConfig.nlsEnabled")

    def fwd(v, _):
        if not v:                      # the chart's default (no reference) stays out of the values
            return (None, None, None)
        return (v.get("secretName"), v.get("configMapName"), bool(v.get("nlsEnabled", True)))

    def inv(vals, _):
        secret, config_map, nls = vals
        if not secret and not config_map:
            if nls not in (True, None):
                raise Unexpressible("nlsEnabled without a licensing Secret or ConfigMap configures nothing")
            return None
        if secret and config_map:
            raise Unexpressible("both a licensing Secret and a ConfigMap: the profile names one "
                                "(spec.driver.licensingConfig)")
        ref = {"secretName": str(secret)} if secret else {"configMapName": str(config_map)}
        return ref if nls in (True, None) else {**ref, "nlsEnabled": bool(nls)}
    return Row("driver.licensingConfig", paths, paths, None, fwd, inv, "field",
               "the vGPU guest driver's licensing client configuration, by reference")


def _driver_type_row() -> Row:
    def fwd(v, _):
        return (None if v in (None, "gpu") else v,)      # gpu: the chart's default

    def inv(vals, _):
        if vals[0] in (None, "", "gpu"):
            return None
        if vals[0] != "vgpu":
            raise Unexpressible(f"driverType {vals[0]}: the vGPU host manager is not a profile's driver")
        return "vgpu"
    return Row("driver.driverType", ("driver.nvidiaDriverCRD.driverType",), (), "gpu", fwd, inv, "field",
               "the default NVIDIADriver's driver type (gpu, or the vGPU guest driver)")


def parse_metrics(csv: str) -> list[dict]:
    out = []
    for line in str(csv).splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        parts = [p.strip() for p in line.split(",", 2)]
        if len(parts) != 3:
            raise Unexpressible(f"dcgm-metrics.csv line {line!r} is not 'field, type, help'")
        out.append({"field": parts[0], "type": parts[1], "help": parts[2]})
    return out


PLUGIN_CONFIG_MAP = "device-plugin-config"        # the names gpuop's stack gives the same ConfigMaps
MIG_CONFIG_MAP = "custom-mig-parted-config"
DCGM_METRICS_MAP = "nvidia-dcgm-exporter-metrics"


def _bool_inv(vals, _):
    return bool(vals[0])


# distributions whose own containerd NVIDIA's chart serves through toolkit.env (NVIDIA's "Getting Started"
# RKE2 / k3s / MicroK8s pages); validate/operator.py refuses the other non-managed ones
RUNTIME_ENV_DISTRIBUTIONS = ("k3s", "rke2", "microk8s")


def distribution_env(distribution: str | None) -> list[dict]:
    """toolkit.env for a distribution's own containerd: the host paths of its config and socket (the operator's
    transformForRuntime mounts their folders and points the toolkit at them) and, where the toolkit cannot ask
    that containerd for its config, the rendered file to read it from (a host path: the operator rewrites it to
    /host<path>, the same file through the toolkit's host-root mount), as gpuop's stack sets them."""
    if distribution not in RUNTIME_ENV_DISTRIBUTIONS:
        return []
    from gpuop.catalog import distributions
    d = distributions.load().get(distribution)
    out = [{"name": "CONTAINERD_CONFIG", "value": d.config(distributions.DEFAULT_CONTAINERD_MAJOR)},
           {"name": "CONTAINERD_SOCKET", "value": d.containerd.socket}]
    if d.containerd.configSource:
        out.append({"name": "RUNTIME_CONFIG_SOURCE", "value": f"file={d.containerd.configSource}"})
    return out


def split_toolkit_env(env) -> tuple[str | None, list]:
    """toolkit.env -> (the distribution whose containerd paths it holds, every entry all of them, or None; the
    other entries, in order): the two profile settings one chart value holds."""
    env = list(env or [])
    for d in RUNTIME_ENV_DISTRIBUTIONS:
        ours = distribution_env(d)
        if ours and all(e in env for e in ours):
            return d, [e for e in env if e not in ours]
    return None, env


def _distribution_row() -> Row:
    def fwd(d, _):
        return (distribution_env(d) or None,)

    def inv(vals, _):
        return split_toolkit_env(vals[0])[0]
    return Row("platform.distribution", ("toolkit.env",), ("toolkit.env",), None, fwd, inv, "field",
               "k3s / RKE2 / MicroK8s: their containerd's paths in the toolkit's env; managed images (eks, aks) "
               "are driver.enabled / toolkit.enabled false and read back as generic")


def _toolkit_env_row() -> Row:
    """After the distribution row: the profile's toolkit env merged over the distribution's by name (as gpuop's
    stack and the operator's transformToolkit do), the inverse what is not the distribution's."""
    env_row = _env_row("toolkit.env", "toolkit.env")

    def fwd(v, rel):
        return env_row.to_values(v, rel) + (None,)

    def inv(vals, rel):
        try:
            return env_row.to_profile((split_toolkit_env(split_proxy(vals[1], vals[0])[2])[1],), rel)
        except Unexpressible as exc:
            raise Unexpressible(exc.reason, exc.value, ("toolkit.env",)) from None
    return Row("toolkit.env", ("toolkit.env", "driver.env"), ("toolkit.env", "driver.env"), [], fwd, inv, "field",
               "merged over the distribution's containerd paths by name (the proxy's entries are the proxy row's)",
               merge=True)


KUBELET_ROOT = "/var/lib/kubelet"


def _host_path_row(profile: str, default: str, why: str) -> Row:
    """A host path, written explicitly (its default too: a ClusterPolicy without it is the CRD's default, which
    may not stay the chart's); the default reads back as omitted."""
    def fwd(v, _):
        return (v or default,)

    def inv(vals, _):
        v = vals[0]
        return None if v in (None, "", default) else str(v)
    return Row(profile, (profile,), (profile,), default, fwd, inv, "field", f"{why}; omitted: {default}")


def _platform_row() -> Row:
    def fwd(t, _):
        return (t == "openshift", t == "openshift")

    def inv(vals, _):
        if bool(vals[0]) != bool(vals[1]):
            raise Unexpressible("operator.use_ocp_driver_toolkit differs from platform.openshift; gpuop uses the "
                                "Driver Toolkit exactly on OpenShift")
        return "openshift" if vals[0] else "kubernetes"
    return Row("platform.type", ("platform.openshift", "operator.use_ocp_driver_toolkit"),
               ("operator.use_ocp_driver_toolkit",), "kubernetes", fwd, inv, "field",
               "OpenShift: the operator builds the driver with the Driver Toolkit per RHCOS build")


def _rows() -> tuple[Row, ...]:
    rows: list[Row] = [_platform_row(), _distribution_row(), _toolkit_env_row()]
    rows += _registry_rows()
    rows += [_version_row(k) for k in VERSIONED]
    rows.append(_manager_version_row())
    rows.append(field_row("images.pullPolicy", tuple(f"{k}.imagePullPolicy" for k in COMPONENTS), "IfNotPresent"))
    rows += _pull_secrets_row()
    for key in SWITCHABLE:
        default = components.OPERATOR_DEFAULT_ON[key]
        why = ("the operator runs its MIG manager on every MIG-capable node while enabled (gpuop's stack only for "
               "pools with a MIG layout): kept as written, so adopting a running operator changes nothing"
               if key == "migManager" else "")
        rows.append(field_row(f"{key}.enabled", f"{key}.enabled", default, inv=_bool_inv, why=why))
    for key in RESOURCES:
        rows.append(field_row(f"{key}.resources", f"{key}.resources", None,
                              fwd=lambda v, _: (copy.deepcopy(v) if v else None,),
                              inv=lambda vals, _: copy.deepcopy(vals[0]) or None))
    rows += [
        field_row("driver.kernelModuleType", "driver.kernelModuleType", "auto"),
        field_row("driver.precompiled", "driver.usePrecompiled", False, inv=_bool_inv),
        field_row("delivery.operator.nvidiaDriverCRD", "driver.nvidiaDriverCRD.enabled", None,
                  policy=("driver.useNvidiaDriverCRD",), fwd=lambda v, _: (v,),
                  inv=lambda vals, _: True if vals[0] else None,
                  why="omitted: the plan decides (true when pools need NVIDIADriver CRs of their own, "
                      "plan/operator.py uses_driver_crd; chart_values writes the resolved value); false reads "
                      "back as omitted (one driver: the plan resolves false)"),
        field_row("cdi.nriPluginEnabled", "cdi.nriPluginEnabled", False, inv=_bool_inv),
        field_row("delivery.operator.gds", "gds.enabled", False, inv=_bool_inv),
        field_row("delivery.operator.gdrcopy", "gdrcopy.enabled", False, inv=_bool_inv),
        # charts before v26.7.0 have no clusterPolicy.deployCR: they always render the ClusterPolicy
        field_row("delivery.operator.clusterPolicy", "clusterPolicy.deployCR", True, policy=(),
                  inv=lambda vals, _: True if vals[0] is None else bool(vals[0])),
        field_row("delivery.operator.gpuCluster", "gpuCluster.deployCR", False, policy=(), inv=_bool_inv),
        field_row("daemonsets.priorityClassName", "daemonsets.priorityClassName", "system-node-critical"),
        _tolerations_row(),
        field_row("dcgmExporter.podLabels", "dcgmExporter.enablePodLabels", False, inv=_bool_inv),
        field_row("dcgmExporter.podUID", "dcgmExporter.enablePodUID", False, inv=_bool_inv),
        _allowlist_row(),
        _metrics_row(),
        # after the metrics row: a ConfigMap name of the profile replaces gpuop's
        _config_map_row("delivery.operator.dcgmMetricsConfig", "dcgmExporter", DCGM_METRICS_MAP),
        _config_map_row("delivery.operator.devicePluginConfig", "devicePlugin", PLUGIN_CONFIG_MAP, with_default=True),
        _config_map_row("delivery.operator.migManagerConfig", "migManager", MIG_CONFIG_MAP),
        _component_env_row(),
        _driver_env_row(),
        # after the driver's and the toolkit's own env: they win by name
        _proxy_row(),
        _device_plugin_env_row(),
        _health_row(),
        *(field_row(f"{k}.args", f"{k}.args", None, fwd=lambda v, _: (list(v) if v else None,),
                    inv=lambda vals, _, p=f"{k}.args": _str_list(vals[0], p) or None,
                    why="replace the operand's args (the operator applies them only when there are some)")
          for k in ("driver", "devicePlugin")),
        _host_path_row("hostPaths.rootFS", "/", "the host's root filesystem"),
        # GKE's own driver root is refused in operator mode (validate/operator.py check_distribution_fit), so
        # omitted is the driver container's root
        _host_path_row("hostPaths.driverInstallDir", "/run/nvidia/driver", "where the driver's files are on the host"),
        fixed_row("hostPaths.kubeletRootDir", KUBELET_ROOT, "the only kubelet root v26.7 honours for every operand "
                  "(validate/operator.py check_kubelet_root_dir); the chart's empty default means the same",
                  absent=("", None)),
        _pod_meta_row("daemonsets.labels"),
        _pod_meta_row("daemonsets.annotations"),
        _config_files_row("driver.repoConfig", "driver.repoConfig.configMapName"),
        _config_files_row("driver.certConfig", "driver.certConfig.name"),
        _licensing_row(),
        _driver_type_row(),
    ]
    rows += _upgrade_rows()
    rows += _service_monitor_rows()
    rows += [
        fixed_row("cdi.enabled", True, "gpuop's stack always runs CDI, as the operator's default"),
        fixed_row("operator.runtimeClass", "nvidia", "the RuntimeClass gpuop's stack creates"),
        derived_row(("nfd.enabled",), "spec.nfd.mode (omitted: deploy, existing on OpenShift); export from the plan"),
        derived_row(("mig.strategy",), "one strategy when every MIG pool shares it, else left empty: each pool's "
                    "device-plugin config carries flags.migStrategy"),
        derived_row(("driver.enabled", "driver.version", "driver.nvidiaDriverCRD.deployDefaultCR"),
                    "the driver of the default NVIDIADriver / ClusterPolicy (spec.driver.version, "
                    "delivery.operator.driverDigest, pools' drivers)"),
        derived_row(("devicePlugin.config.create", "devicePlugin.config.data"), "per-pool device-plugin configs "
                    "(plan/pools.py, keys: the pools' sharing.configName), labelled per pool by gpuop's "
                    "NodeFeatureRule", policy=()),
        derived_row(("migManager.config.create", "migManager.config.default", "migManager.config.data"),
                    "per-pool MIG layouts in one mig-parted config (plan/pools.py, keys: the pools' mig.configName); "
                    "the default for unlabelled MIG-capable nodes is all-disabled", policy=("migManager.config.default",)),
        derived_row(("gds.repository", "gds.image", "gds.version", "gdrcopy.repository", "gdrcopy.image",
                     "gdrcopy.version"), "the release's GDS / GDRCopy sidecar images under spec.images.registry"),
        derived_row(("operator.repository", "operator.imagePullSecrets"),
                    "the operator's own image under spec.images.registry, pulled with spec.images.pullSecrets"),
        derived_row(("driver.manager.env",), "autoUpgrade: false: the driver manager's drain settings "
                    "(ENABLE_AUTO_DRAIN, DRAIN_*) from spec.driver.upgradePolicy, which the operator gives it only "
                    "through this env (plan/operator.py manager_env)"),
        derived_row(("extraObjects",), "gpuop's per-pool NVIDIADriver CRs and NodeFeatureRule"),
        field_row("delivery.operator.nvidiaNodeFeatureRules", "nfd.nodefeaturerules", False, policy=(),
                  inv=_bool_inv),
        _passthrough_row("delivery.operator.nfdValues", "node-feature-discovery", None,
                         "the NFD subchart's values, as written; unwritten, its image.repository follows "
                         "spec.images.registry (plan/operator.py nfd_repository)"),
        _passthrough_row("delivery.operator.operatorValues", "operator", OPERATOR_KEYS,
                         "the operator Deployment's settings, as written"),
    ]
    return tuple(rows)


ROWS: tuple[Row, ...] = _rows()
DERIVED_PATHS: tuple[str, ...] = tuple(p for r in ROWS if r.kind == "derived" for p in r.values)

# Chart value prefixes the profile cannot express, with the reason (what the inverse reports when a value there
# differs from the chart default).
UNEXPRESSED: tuple[tuple[str, str], ...] = (
    ("operator", "the operator Deployment's image settings (its image follows spec.images.registry)"),
    ("psa", "pod security admission labels by the operator"),
    ("cdi.default", "CDI as the default runtime mode"),
    ("sandboxWorkloads", "sandboxed (VM) workloads"),
    ("daemonsets.updateStrategy", "the operands' update strategy"),
    ("daemonsets.rollingUpdate", "the operands' rolling update"),
    ("driver.virtualTopology", "vGPU topology"),
    ("driver.kernelModuleConfig", "kernel module parameters"), ("driver.secretEnv", "driver secret env"),
    ("driver.rdma", "GPUDirect RDMA of the ClusterPolicy (per pool: spec.nodePools[].driver.rdma)"),
    ("driver.startupProbe", "the driver's startup probe"), ("driver.livenessProbe", "the driver's liveness probe"),
    ("driver.readinessProbe", "the driver's readiness probe"),
    ("driver.upgradePolicy.maxUnavailable", "maxUnavailable of driver upgrades"),
    ("driver.upgradePolicy.waitForCompletion", "waiting for jobs before a driver upgrade"),
    ("driver.nvidiaDriverCRD.nodeSelector", "the default NVIDIADriver's nodeSelector"),
    ("driver.hostNetwork", "host network"), ("toolkit.hostNetwork", "host network"),
    ("devicePlugin.hostNetwork", "host network"), ("dcgm.hostNetwork", "host network"),
    ("dcgmExporter.hostNetwork", "host network"), ("gfd.hostNetwork", "host network"),
    ("migManager.hostNetwork", "host network"), ("validator.hostNetwork", "host network"),
    ("toolkit.installDir", "the toolkit's install directory"),
    ("devicePlugin.mps", "the MPS root"), ("dcgm.args", "DCGM args"),
    ("dcgmExporter.annotations", "DCGM exporter pod annotations"),
    ("dcgmExporter.hostPID", "DCGM exporter host PID"), ("dcgmExporter.service", "the exporter Service"),
    ("dcgmExporter.serviceMonitor.scrapeTimeout", "the ServiceMonitor scrape timeout"),
    ("dcgmExporter.serviceMonitor.relabelings", "the ServiceMonitor relabelings"),
    ("dcgmExporter.hpcJobMapping", "HPC job mapping"),
    ("migManager.gpuClientsConfig", "GPU clients"),
    ("validator.args", "validator args"), ("validator.plugin", "validator env"),
    ("validator.driver", "validator env"), ("validator.toolkit", "validator env"), ("validator.cuda", "validator env"),
    ("gds.imagePullSecrets", "GDS pull secrets"),
    ("gdrcopy.imagePullSecrets", "GDRCopy pull secrets"), ("gds.imagePullPolicy", "GDS pull policy"),
    ("gdrcopy.imagePullPolicy", "GDRCopy pull policy"), ("gds.args", "GDS args"), ("gds.env", "GDS env"),
    ("gdrcopy.args", "GDRCopy args"), ("gdrcopy.env", "GDRCopy env"),
    ("vgpuManager", "vGPU"), ("vgpuDeviceManager", "vGPU"), ("vfioManager", "VM passthrough"),
    ("kataManager", "Kata"), ("sandboxDevicePlugin", "sandboxed workloads"),
    ("kataSandboxDevicePlugin", "Kata"), ("ccManager", "confidential computing"),
    ("draDriver", "NVIDIA's DRA driver through the operator (gpuop installs the DRA driver chart beside it)"),
    ("gpuCluster", "the GPUCluster CR's settings"), ("nodeStatusExporter.serviceMonitor",
                                                      "the node status exporter's ServiceMonitor"),
)


# ClusterPolicy CRD defaults (nvidia.com_clusterpolicies.yaml, applied by the API server) at keys NVIDIA's
# values.yaml leaves out: a live ClusterPolicy carries them without anyone having set them
POLICY_ONLY_DEFAULTS = {"cdi": {"default": False}}


def policy_paths(values_path: str) -> tuple[str, ...]:
    for r in ROWS:
        if values_path in r.values:
            i = r.values.index(values_path)
            return (r.policy[i],) if len(r.policy) == len(r.values) else r.policy
    return ()


def _covered(path: str) -> tuple[str, str] | None:
    """(kind, reason) for a values path: a row's, a derived row's, or an UNEXPRESSED prefix."""
    for r in ROWS:
        for p in r.values:
            if path == p or path.startswith(p + "."):
                return r.kind, r.why
    for prefix, why in UNEXPRESSED:
        if path == prefix or path.startswith(prefix + "."):
            return "unexpressed", why
    return None


# ------------------------------------------------------------------------------------------ both directions

def _profile_get(settings: dict, dotted: str, default):
    v = get_path(settings, dotted, MISSING)
    return default if v is MISSING else v


def profile_to_values(settings: dict, images: ReleaseImages) -> dict:
    """Every non-derived row, from the profile `spec` as a plain dict: the chart values it decides. A value None
    means 'leave the key out' (the chart's default)."""
    out: dict = {}
    for r in ROWS:
        if r.kind == "derived":
            continue
        value = _profile_get(settings, r.profile, r.default) if r.profile else None
        for path, v in zip(r.values, r.to_values(value, images)):
            # rows that render to the ClusterPolicy; a passthrough row's (NFD's, the operator Deployment's) values
            # are kept as written: a null there is Helm's way to remove a chart default
            v = omit_nulls(v) if r.policy else v
            if v is not None and r.merge:
                mine = {e["name"] for e in v}
                v = [e for e in get_path(out, path) or [] if e["name"] not in mine] + v
            elif v is not None and r.fill:
                v = _fill(get_path(out, path) or [], v)
            if v is not None:
                set_path(out, path, v)
    return out


def values_to_profile(values: dict, version: str = DEFAULT_VERSION) -> tuple[dict, list[tuple[str, str]]]:
    """Chart values (or a ClusterPolicy spec already in the chart's value shape) -> (profile spec fragment,
    [(values path, reason)] the profile cannot express). Absent values are the chart defaults of `version`."""
    rel = release_images(version)
    defaults = _merge(operator_catalog._chart_defaults(version) or {}, POLICY_ONLY_DEFAULTS)   # read only here
    eff = _merge(defaults, values or {})
    profile: dict = {}
    lost: list[tuple[str, str]] = []
    for r in ROWS:
        if r.kind == "derived" or r.to_profile is None:
            continue
        vals = tuple(get_path(eff, p) for p in r.values)
        try:
            value = r.to_profile(vals, rel)
        except Unexpressible as exc:
            paths = exc.paths or tuple(p for p, v in zip(r.values, vals) if get_path(defaults, p, MISSING) != v) \
                or r.values
            lost += [(p, exc.reason) for p in paths]
            value = exc.value
        if r.profile and value is not None and value != r.default:
            set_path(profile, r.profile, value)
    for path, value in leaves(values or {}):
        if not path:
            continue
        kind = _covered(path)
        if kind is not None and kind[0] != "unexpressed":
            continue
        default = get_path(defaults, path, MISSING)
        if default == value or (value in ({}, [], "", None) and default in (MISSING, {}, [], "", None)):
            continue
        lost.append((path, kind[1] if kind else "no profile setting"))
    seen: set = set()
    out = []
    for item in lost:
        if item[0] not in seen:
            seen.add(item[0])
            out.append(item)
    return profile, sorted(out)
