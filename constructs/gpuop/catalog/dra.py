"""The DRA catalog (data/dra.yaml) as frozen models: NVIDIA's DRA driver versions with their chart and
floors, the driver-side feature gates with defaults, exclusions and dependencies, the ResourceSlice
attribute schema DeviceClass selectors are type-checked against, and the NVML product name per GPU model.

Imports nothing of the project (catalog rule). The rules that use these facts are validate/dra.py; the
plan that turns them into chart values and DeviceClasses is plan/dra.py.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field

from gpuop.catalog.reads import Tracked, register, root

DATA = Path(__file__).parent / "data"


class _Frozen(Tracked):
    model_config = ConfigDict(extra="forbid", frozen=True)


class DraImage(_Frozen):
    registry: str
    path: str
    tag: str


class DraVersion(_Frozen):
    version: str
    chart: str
    repository: str
    chartVersion: str
    image: DraImage
    chartKubeVersion: str
    kubernetesMin: str
    driverMin: str
    computeDomainDriverMin: str
    source: str


class Gate(_Frozen):
    maturity: Literal["Alpha", "Beta", "GA"]
    default: bool
    since: str


class Exclusion(_Frozen):
    gates: tuple[str, str]
    docsOnly: bool = False
    source: str


class Dependency(_Frozen):
    gate: str
    needs: str
    source: str


class Attribute(_Frozen):
    type: Literal["string", "int", "bool", "version"] = "string"
    devices: tuple[str, ...]


class Capacity(_Frozen):
    devices: tuple[str, ...]


class OpaqueConfig(_Frozen):
    apiVersion: str
    gpu: str
    mig: str


class Product(_Frozen):
    productName: str
    source: str | None = None
    confidence: Literal["low"] | None = None


class DriverRoot(_Frozen):
    gpuop: str
    host: str


class GpuClusterFloors(_Frozen):
    kubernetesMin: str
    driverMin: str                      # the lowest driver branch
    cdiRuntimes: tuple[str, ...]
    source: str


class DraCatalog(_Frozen):
    sources: tuple[str, ...]
    driver: str
    apiVersion: str
    apiVersionSince: str
    extendedResourceSince: str
    cdiRuntimes: tuple[str, ...]
    driverRoot: DriverRoot
    deployLabel: str
    clientLabel: str
    gpuCluster: GpuClusterFloors
    clientMigManagerSince: str
    clientDriverManagerSince: str
    versions: tuple[DraVersion, ...]
    featureGates: dict[str, Gate]
    exclusions: tuple[Exclusion, ...]
    dependencies: tuple[Dependency, ...]
    sharingGates: dict[str, str]
    attributes: dict[str, Attribute]
    capacity: dict[str, Capacity]
    opaqueConfig: OpaqueConfig
    products: dict[str, Product] = Field(default_factory=dict)

    def version(self, name: str | None) -> DraVersion | None:
        """A driver version by name; None: the newest."""
        if name is None:
            return self.versions[-1]
        return next((v for v in self.versions if v.version == name), None)

    def gates(self, overrides: dict[str, bool]) -> dict[str, bool]:
        """Every gate's effective value: the driver's default unless the profile sets it."""
        return {name: overrides.get(name, g.default) for name, g in self.featureGates.items()}


@lru_cache(maxsize=1)
def load() -> DraCatalog:
    return register("dra", DraCatalog(**yaml.load((DATA / "dra.yaml").read_bytes(), Loader=yaml.CSafeLoader)))


root("dra", load)

