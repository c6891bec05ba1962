"""Licences of what gpuop deploys (data/licences.yaml): each driver flavour, image, chart and registry, with the
conditions that follow (an entitlement, a licensing server, where an image may be pulled from, whether it may be
mirrored). Imports nothing of the project."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Literal

import yaml
from pydantic import ConfigDict, Field

from gpuop.catalog.reads import Tracked, register, root

DATA = Path(__file__).parent / "data"

Flavour = Literal["open", "proprietary", "precompiled", "vgpu-guest"]
FLAVOURS: tuple[str, ...] = ("open", "proprietary", "precompiled", "vgpu-guest")


class _Frozen(Tracked):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Licence(_Frozen):
    name: str
    url: str | None = None


class Registry(_Frozen):
    prefix: str
    kind: Literal["public", "entitled"]
    entitlement: str | None = None
    note: str = ""


class DriverFlavour(_Frozen):
    description: str
    licences: tuple[str, ...]
    kernelModules: str
    entitlement: bool
    licensingServer: bool
    publicRegistries: tuple[str, ...] = ()
    mirror: bool
    privateOnly: bool
    source: str


class Artifact(_Frozen):
    title: str
    licences: tuple[str, ...]
    sourceLicence: str | None = None
    driver: bool = False
    source: str


class Licences(_Frozen):
    sources: tuple[str, ...]
    licences: dict[str, Licence]
    registries: tuple[Registry, ...]
    drivers: dict[Flavour, DriverFlavour]
    images: dict[str, Artifact]
    charts: dict[str, Artifact] = Field(default_factory=dict)

    def registry(self, repository: str) -> Registry | None:
        """The catalog's entry for the registry an image repository (host/path...) lies under; None: a private one."""
        for r in self.registries:
            if repository == r.prefix or repository.startswith(r.prefix + "/"):
                return r
        return None

    def image(self, repository: str, registries: tuple[str, ...] = ()) -> tuple[str, Artifact] | None:
        """(path, entry) of an image repository: its path below one of `registries` (the release's, a mirror), or
        the repository itself (registry.k8s.io/nfd/... is known by nfd/...); None when the catalog lacks it."""
        candidates = [repository[len(r) + 1:] for r in registries if r and repository.startswith(r.rstrip("/") + "/")]
        host, _, rest = repository.partition("/")
        candidates += [rest, repository]
        for path in candidates:
            if path in self.images:
                return path, self.images[path]
        return None


@lru_cache(maxsize=1)
def _load() -> Licences:
    doc = yaml.load((DATA / "licences.yaml").read_bytes(), Loader=yaml.CSafeLoader)
    return register("licences", Licences(**doc))


def load() -> Licences:
    return _load()            # a Tracked model: each field a compile reads is noted (reads.py)


root("licences", _load)
