"""Kubernetes distributions and managed node images (data/distributions.yaml): each one's container
runtime paths (the config file or template the toolkit edits, the socket it signals, the file the toolkit
reads the current config from) and, for managed images, what the provider already installs. The data
file names NVIDIA's page (and the distribution's docs) for every entry. Imports nothing of the project.

containerd major: k3s and RKE2 render containerd's config from a template whose name follows the config
version (config.toml.tmpl for containerd 1.x / config version 2, config-v3.toml.tmpl for containerd 2.x /
config version 3); that is the only place the major changes gpuop's output, since the toolkit of the
stack release reads and writes either config version itself.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict, Field

from gpuop.catalog.reads import Tracked, note_call, register, root

DATA = Path(__file__).parent / "data"
DEFAULT = "generic"
DEFAULT_CONTAINERD_MAJOR = 1


class _Frozen(Tracked):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ContainerdPaths(_Frozen):
    config: dict[str, str]              # containerd major ("1", "2") -> config file or template on the host
    socket: str
    configSource: str | None = None     # host path the toolkit reads the current config from; None: its default
    dropIn: str | None = None           # the toolkit's drop-in; None: the release's (/etc/containerd/conf.d/...)


class Distribution(_Frozen):
    managed: bool
    source: str
    runtimes: tuple[str, ...] = ()      # () = any runtime the release supports
    containerd: ContainerdPaths | None = None
    provides: tuple[str, ...] = ()      # components the managed node image installs (driver, toolkit)
    image: str | None = None            # the node image that provides them
    driverRoot: str | None = None       # where the provider's driver lives on the host (driver install dir)
    toolkitInstallDir: str | None = None   # where the toolkit installs on the host (None: /usr/local/nvidia)

    def config(self, major: int) -> str | None:
        return self.containerd.config[str(major)] if self.containerd else None


class NriFloors(_Frozen):
    containerd: dict[str, str]          # containerd line ("2.1") -> the first version of it the NRI plugin supports
    crio: str                           # the first CRI-O minor (the Kubernetes minor it serves)
    operator: dict[str, str]            # runtime -> the first GPU Operator release whose NRI plugin runs on it
    source: str


class DistributionCatalog(_Frozen):
    nri: NriFloors
    distributions: dict[str, Distribution] = Field(default_factory=dict)

    def get(self, name: str | None) -> Distribution:
        return self.distributions[name or DEFAULT]


@lru_cache(maxsize=1)
def load() -> DistributionCatalog:
    return register("distributions", DistributionCatalog(**yaml.load((DATA / "distributions.yaml").read_bytes(),
                                                                    Loader=yaml.CSafeLoader)))


root("distributions", load)


def distribution_runtime_files(dist: Distribution, base, runtime: str, containerd_major: int | None):
    """The release's RuntimeFiles for `runtime` (`base`), with the distribution's containerd config
    (per containerd major), drop-in and socket where it has its own."""
    if runtime != "containerd" or dist.containerd is None:
        return base
    c = dist.containerd
    update = {"config": dist.config(containerd_major or DEFAULT_CONTAINERD_MAJOR), "socket": c.socket}
    if c.dropIn:
        update["dropIn"] = c.dropIn
    return base.model_copy(update=update)


class Sidecar(_Frozen):
    image: str                      # path below the registry
    version: str
    openFrom: str | None = None     # needs the open kernel modules from this version on


class DriverExtras(_Frozen):
    gds: Sidecar
    gdrcopy: Sidecar


@lru_cache(maxsize=1)
def _driver_extras() -> dict[str, DriverExtras]:
    doc = yaml.load((DATA / "driver-extras.yaml").read_bytes(), Loader=yaml.CSafeLoader)
    return register("driver-extras", {name: DriverExtras(**e) for name, e in doc["releases"].items()})


def driver_extras() -> dict[str, DriverExtras]:
    """Stack release -> its GDS and GDRCopy sidecar images (data/driver-extras.yaml)."""
    extras = _driver_extras()
    note_call(("driver-extras",), extras)     # a plain dict: its lookups are not seen, so the call is noted
    return extras


root("driver-extras", _driver_extras)
