"""The health gate's facts (data/health-gate.yaml): DCGM's diagnostic run levels with what each runs and
costs, the CUDA sample's and the NCCL test's command and budget, with their sources. Imports nothing of the
project (catalog rule).
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import yaml
from pydantic import ConfigDict

from gpuop.catalog.reads import Tracked, register, root

DATA = Path(__file__).parent / "data"


class _Frozen(Tracked):
    model_config = ConfigDict(extra="forbid", frozen=True)


class DiagLevel(_Frozen):
    name: str
    seconds: int
    runs: str


class DcgmDiag(_Frozen):
    levels: dict[int, DiagLevel]
    hostenginePort: int


class Check(_Frozen):
    seconds: int
    command: tuple[str, ...] = ()


class HealthGateCatalog(_Frozen):
    sources: tuple[str, ...]
    dcgmDiag: DcgmDiag
    cudaSample: Check
    nccl: Check


@lru_cache(maxsize=1)
def load() -> HealthGateCatalog:
    doc = yaml.load((DATA / "health-gate.yaml").read_bytes(), Loader=yaml.CSafeLoader)
    return register("health_gate", HealthGateCatalog(**doc))


root("health_gate", load)
