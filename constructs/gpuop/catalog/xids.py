"""NVIDIA's XID catalog and the device plugin's XID health policy (data/xids.yaml), with the grammar of the two env
variables the plugin reads its policy from (DP_DISABLE_HEALTHCHECKS, DP_ENABLE_HEALTHCHECKS), as
k8s-device-plugin internal/rm/health.go parses them. Imports nothing of the project."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import yaml
from pydantic import ConfigDict

from gpuop.catalog.reads import Tracked, register, root

DATA = Path(__file__).parent / "data"

DISABLE_ENV = "DP_DISABLE_HEALTHCHECKS"
ENABLE_ENV = "DP_ENABLE_HEALTHCHECKS"
HEALTH_ENV = (DISABLE_ENV, ENABLE_ENV)          # in the order gpuop writes them
ALL = "all"
_VERSION = re.compile(r"^v?(\d+)\.(\d+)\.(\d+)")


class _Frozen(Tracked):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Action(_Frozen):
    resetRequired: bool
    meaning: str


class Xid(_Frozen):
    xid: int
    mnemonic: str
    description: str
    action: str | None = None
    checked: tuple[str, ...] = ()          # the sources (checkedAgainst keys) that confirm the row
    driverName: str | None = None          # the driver's own name for the code, where it differs from mnemonic


class PluginHealth(_Frozen):
    """How device plugin versions from `from` on (to the next row's) decide health."""
    from_: str
    ignoredByDefault: tuple[int, ...]
    enableEnv: bool
    fatalWithChecksOff: bool
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class XidCatalog(_Frozen):
    sources: tuple[str, ...]
    checkedAgainst: dict[str, str]
    actions: dict[str, Action]
    devicePlugin: tuple[PluginHealth, ...]
    xids: tuple[Xid, ...]

    def get(self, code: int) -> Xid | None:
        for x in self.xids:
            if x.xid == code:
                return x
        return None

    def reset_required(self, code: int) -> bool:
        """Whether NVIDIA's immediate action for the XID takes the GPU out of service (actions[..].resetRequired)."""
        x = self.get(code)
        a = self.actions.get(x.action) if x is not None and x.action else None
        return bool(a and a.resetRequired)

    def plugin(self, version: str) -> PluginHealth | None:
        """The device plugin's health behaviour at an image tag (v0.20.0); None for a tag that is no version."""
        key = version_key(version)
        if key is None:
            return None
        rows = [r for r in self.devicePlugin if version_key(r.from_) <= key]
        return max(rows, key=lambda r: version_key(r.from_)) if rows else None


def version_key(version: str) -> tuple[int, int, int] | None:
    m = _VERSION.match(version or "")
    return (int(m[1]), int(m[2]), int(m[3])) if m else None


@lru_cache(maxsize=1)
def _load() -> XidCatalog:
    doc = yaml.load((DATA / "xids.yaml").read_bytes(), Loader=yaml.CSafeLoader)
    doc["devicePlugin"] = [{("from_" if k == "from" else k): v for k, v in r.items()} for r in doc["devicePlugin"]]
    return register("xids", XidCatalog(**doc))


def load() -> XidCatalog:
    return _load()            # a Tracked model: each field a compile reads is noted (reads.py)


root("xids", _load)


# ------------------------------------------------------------------------------ the env grammar (health.go)

@dataclass(frozen=True)
class Policy:
    """A device plugin health policy: XID checks on or off, XIDs ignored beyond the plugin's defaults, XIDs that
    always mark a GPU unhealthy. The default Policy() is NVIDIA's defaults (no env)."""
    checks: bool = True
    ignore: tuple[int, ...] = ()
    fatal: tuple[int, ...] = ()


def policy_env(p: Policy) -> tuple[tuple[str, str], ...]:
    """The env that gives the plugin this policy: DP_DISABLE_HEALTHCHECKS `all` (checks off) or the ignored XIDs,
    DP_ENABLE_HEALTHCHECKS the fatal ones; nothing for NVIDIA's defaults."""
    out = []
    if not p.checks:
        out.append((DISABLE_ENV, ALL))
    elif p.ignore:
        out.append((DISABLE_ENV, ",".join(str(x) for x in p.ignore)))
    if p.fatal:
        out.append((ENABLE_ENV, ",".join(str(x) for x in p.fatal)))
    return tuple(out)


def _entries(value: str) -> tuple[bool, list[int], bool]:
    """newHealthCheckXIDs: (every XID named -- `all`, `xids` or 0 --, the numbers in order, every entry understood)."""
    numbers: list[int] = []
    clean = True
    for item in value.lower().split(","):
        item = item.strip()
        if item in ("all", "xids"):
            return True, numbers, clean
        if not item:
            continue
        if not item.isdigit() or not item.isascii():
            clean = False                          # the plugin logs "Ignoring malformed Xid value" and goes on
            continue
        n = int(item)
        if n == 0:                                 # allXIDs: the plugin's own marker for "every XID"
            return True, numbers, clean
        if n not in numbers:
            numbers.append(n)
    return False, numbers, clean


def read_policy_env(env: dict[str, str]) -> Policy | None:
    """The policy the two variables give the plugin, when a Policy says it exactly (None: `all` in
    DP_ENABLE_HEALTHCHECKS, malformed entries, or ignored XIDs beside `all`, which the plugin drops)."""
    disable, enable = env.get(DISABLE_ENV), env.get(ENABLE_ENV)
    checks, ignore = True, []
    if disable is not None:
        every, ignore, clean = _entries(disable)
        if not clean or (every and ignore):
            return None
        checks = not every
    fatal: list[int] = []
    if enable is not None:
        every, fatal, clean = _entries(enable)
        if every or not clean:
            return None
    return Policy(checks, tuple(ignore), tuple(fatal))


def unhealthy(p: Policy, xid: int, plugin: PluginHealth) -> bool:
    """Whether the plugin marks a GPU unhealthy on this XID under the policy (getDisabledHealthCheckXids and
    IsDisabled; DP_ENABLE_HEALTHCHECKS only where the version reads it)."""
    if not p.checks:                       # IsAllDisabled: nothing watched, unless the version honours the list
        return plugin.enableEnv and plugin.fatalWithChecksOff and xid in p.fatal
    if plugin.enableEnv and xid in p.fatal:
        return True
    return xid not in plugin.ignoredByDefault and xid not in p.ignore
