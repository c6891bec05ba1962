"""Well-known GPU instance types (data/instances.yaml): GPUs per node by the `node.kubernetes.io/instance-type`
label, with the providers' spec pages as sources. Imports nothing of the project (catalog rule).
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict

from gpuop.catalog.reads import Tracked, register, root

DATA = Path(__file__).parent / "data"


class _Frozen(Tracked):
    model_config = ConfigDict(extra="forbid", frozen=True)


class InstanceType(_Frozen):
    gpu: str
    gpus: int


class InstanceCatalog(_Frozen):
    sources: tuple[str, ...]
    label: str
    types: dict[str, InstanceType]


@lru_cache(maxsize=1)
def load() -> InstanceCatalog:
    doc = yaml.load((DATA / "instances.yaml").read_bytes(), Loader=yaml.CSafeLoader)
    return register("instances", InstanceCatalog(**doc))


root("instances", load)
