"""Known-bad combinations (data/known-issues.yaml): settings documented as broken with the versions of
this catalog, each with its effect, workaround and source links. Imports nothing of the project."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field

from gpuop.catalog.reads import Tracked, note_call, register, root

DATA = Path(__file__).parent / "data"

# Profile sections `when.enabled` may name (each has an `enabled` switch in the profile).
Component = Literal["driver", "toolkit", "devicePlugin", "dcgm", "dcgmExporter", "gfd", "migManager",
                    "nodeStatusExporter"]
# What `when.versions` may name: NVIDIA's GPU Operator (operator mode) or a component gpuop runs or pins.
Versioned = Literal["operator", "toolkit", "devicePlugin", "migManager"]


class _Frozen(Tracked):
    model_config = ConfigDict(extra="forbid", frozen=True)


class When(_Frozen):
    """Every key given must match. The cluster keys look at the whole profile; the pool keys (migStrategy,
    mig, os, driverPreinstalled, migBesideFullGpus) must all hold for one and the same node pool, and with
    a pool key driverBranches / driverVersions must hold for that pool's driver too."""
    rdma: bool | None = None
    driverBranches: tuple[str, ...] = ()
    driverVersions: tuple[str, ...] = ()
    distribution: tuple[str, ...] = ()
    kubernetesFrom: str | None = Field(None, pattern=r"^\d+\.\d+$")
    enabled: tuple[Component, ...] = ()
    draFeatureGates: tuple[str, ...] = ()
    versions: dict[Versioned, tuple[str, ...]] = Field(default_factory=dict)
    runtimes: tuple[Literal["containerd", "crio", "docker"], ...] = ()
    draStandalone: bool | None = None
    userNamespaces: bool | None = None
    migStrategy: Literal["single", "mixed"] | None = None
    mig: bool | None = None
    os: tuple[str, ...] = ()
    driverPreinstalled: bool | None = None
    migBesideFullGpus: bool | None = None


class Unless(_Frozen):
    driverEnv: dict[str, str] = Field(default_factory=dict)
    toolkitEnv: dict[str, str] = Field(default_factory=dict)
    devicePluginEnv: dict[str, str] = Field(default_factory=dict)


class KnownIssue(_Frozen):
    id: str
    severity: Literal["warning", "error"]
    when: When
    unless: Unless = Field(default_factory=Unless)
    field: tuple[str, ...] = Field(description="Where the issue is reported when the profile sets it.")
    effect: str
    workaround: str
    sources: tuple[str, ...]


@lru_cache(maxsize=1)
def _load() -> tuple[KnownIssue, ...]:
    doc = yaml.load((DATA / "known-issues.yaml").read_bytes(), Loader=yaml.CSafeLoader)
    return register("known-issues", tuple(KnownIssue(**i) for i in doc["issues"]))


def load() -> tuple[KnownIssue, ...]:
    issues = _load()
    note_call(("known-issues",), issues)      # a plain tuple: its iteration is not seen, so the call is noted
    return issues


root("known-issues", _load)
