"""The MIG catalog (data/mig.yaml) as frozen models: per profile family, the placement units, every
profile's size, count limit and start slots, and the facts' sources and confidence.

Loaded here with every other catalog, so a change to mig.yaml changes the catalog digest (and so the
build cache keys). The layout checker that uses it is mig/geometry.py.
"""

from __future__ import annotations

import hashlib
import re
from functools import lru_cache
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, model_validator

from gpuop.catalog.reads import Tracked, register, root

DATA = Path(__file__).parent / "data"

#: mig-parted / go-nvlib profile name grammar: `[<C>c.]<G>g.<GB>gb[+attr[,attr..] | -attr[,attr..]]`
NAME = re.compile(r"^(?:(?P<c>[1-9][0-9]*)c\.)?(?P<g>[1-9][0-9]*)g\.(?P<gb>[0-9]+)gb"
                  r"(?:(?P<sign>[+-])(?P<attrs>[a-z][a-z.]*(?:,[a-z][a-z.]*)*))?$")


class _Frozen(Tracked):
    model_config = ConfigDict(extra="forbid", frozen=True)


class MigProfile(_Frozen):
    name: str
    kind: str
    compute: int  # compute slices, the <G>g of the name
    memory: int  # placement units taken (memory slices)
    max: int  # instances per GPU
    starts: tuple[int, ...]
    smiId: int | None = None
    nvml: str | None = None
    media: str | None = None
    engines: dict[str, int] | None = None
    minDriver: str | None = None
    confidence: Literal["low"] | None = None
    note: str | None = None


class MeLimit(_Frozen):
    count: int
    confidence: Literal["low"] | None = None
    why: str


class MigFamily(_Frozen):
    name: str
    gpus: str
    units: int
    unit: str = "memory slice"
    computeSlices: int
    placements: Literal["observed", "inferred"]
    source: str
    note: str | None = None
    confidence: Literal["low"] | None = None
    variantOf: str | None = None
    meInstancesMax: MeLimit | None = None
    profiles: tuple[MigProfile, ...]

    @model_validator(mode="after")
    def _consistent(self) -> "MigFamily":
        bad = [p.name for p in self.profiles if not (m := NAME.match(p.name)) or m["c"] or int(m["g"]) != p.compute
               or not p.starts or p.max < 1 or any(s < 0 or s + p.memory > self.units for s in p.starts)]
        if bad or len(set(self.names)) != len(self.names):
            raise ValueError(f"{self.name}: name, compute slices, starts or max inconsistent: {bad or self.names}")
        return self

    def profile(self, name: str) -> MigProfile | None:
        # a scan, not a cached index: a value kept on the object would be read without its reads being noted
        return next((p for p in self.profiles if p.name == name), None)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.profiles)


class MigCatalog(_Frozen):
    sources: tuple[str, ...]
    families: dict[str, MigFamily]
    digest: str

    def variants(self, family: str) -> tuple[MigFamily, ...]:
        return tuple(f for f in self.families.values() if f.variantOf == family)


@lru_cache(maxsize=1)
def load_mig() -> MigCatalog:
    raw = (DATA / "mig.yaml").read_bytes()
    doc = yaml.load(raw, Loader=yaml.CSafeLoader)
    families = {k: MigFamily(name=k, **v) for k, v in doc["families"].items()}
    return register("mig", MigCatalog(sources=doc["sources"], families=families,
                                       digest=hashlib.sha256(raw).hexdigest()))


root("mig", load_mig)
