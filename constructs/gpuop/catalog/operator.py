"""The operator catalog (data/operator.yaml): NVIDIA GPU Operator versions gpuop compiles operator-mode
profiles for, with their Helm chart, OLM package/channel/OpenShift range and the settings each has.

Read-only facts; the rules that use them are in validate/operator.py, the objects in outputs/operator.py.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict

DATA = Path(__file__).parent / "data" / "operator.yaml"


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class HelmSource(_Frozen):
    repository: str
    chart: str


class OlmSource(_Frozen):
    package: str
    source: str
    sourceNamespace: str


class OperatorVersion(_Frozen):
    version: str
    channel: str                      # the version's own channel (pins the minor)
    channels: tuple[str, ...]
    csv: str
    openshift: tuple[str, ...]        # OpenShift minors the bundle declares; () = unknown, OLM refused
    settings: tuple[str, ...]


class OperatorCatalog(_Frozen):
    helm: HelmSource
    olm: OlmSource
    operators: tuple[OperatorVersion, ...]

    def get(self, version: str) -> OperatorVersion | None:
        return next((o for o in self.operators if o.version == version), None)


@lru_cache(maxsize=1)
def load() -> OperatorCatalog:
    return OperatorCatalog.model_validate(yaml.safe_load(DATA.read_text()))
