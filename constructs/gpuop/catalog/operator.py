"""The operator catalog (data/operator.yaml): NVIDIA GPU Operator versions gpuop compiles operator-mode
profiles for, with their Helm chart, OLM package/channel/OpenShift range and the settings each has.

Read-only facts; the rules that use them are in validate/operator.py, the objects in outputs/operator.py.
"""

from __future__ import annotations

import copy
from functools import lru_cache
from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict

from gpuop.catalog.reads import Tracked, note_call, register, root

DATA = Path(__file__).parent / "data" / "operator.yaml"


class _Frozen(Tracked):
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
    return register("operator", OperatorCatalog.model_validate(yaml.safe_load(DATA.read_text())))


root("operator", load)


CHART_DEFAULTS = Path(__file__).parent / "data" / "operator-chart"


@lru_cache(maxsize=4)
def _chart_defaults(version: str) -> dict | None:
    path = CHART_DEFAULTS / f"{version}.yaml"
    if not path.is_file():
        return None
    values = yaml.safe_load(path.read_text())
    for key in ("validator", "operator", "nodeStatusExporter"):   # `version` unset: the chart's appVersion
        values.setdefault(key, {}).setdefault("version", version)
    return values


def chart_defaults(version: str) -> dict | None:
    """NVIDIA's gpu-operator chart default values of `version` (data/operator-chart/<version>.yaml), with the
    chart's appVersion where the chart renders it for an unset version; None when gpuop has no copy."""
    values = _chart_defaults(version)
    note_call(("operator-chart", version), values)     # plain data: the call is what is noted
    return copy.deepcopy(values) if values is not None else None


_chart_defaults.takes_step = True
root("operator-chart", _chart_defaults)


def compiled_versions() -> tuple[str, ...]:
    """The operator versions gpuop has the chart defaults of (data/operator-chart/<version>.yaml): the only ones
    it can write values for without mixing another version's defaults into that version's chart."""
    return tuple(o.version for o in load().operators if (CHART_DEFAULTS / f"{o.version}.yaml").is_file())


OLM_DATA = Path(__file__).parent / "data" / "operator-olm"


@lru_cache(maxsize=4)
def _olm_bundle(version: str) -> dict | None:
    path = OLM_DATA / f"{version}.yaml"
    return yaml.safe_load(path.read_text()) if path.is_file() else None


def olm_cluster_policy(version: str) -> dict | None:
    """The ClusterPolicy spec the OperatorHub form creates for `version` (its bundle's CSV alm-examples,
    data/operator-olm/<version>.yaml); None when gpuop has no copy."""
    b = _olm_bundle(version)
    note_call(("operator-olm", version), b)             # plain data: the call is what is noted
    return copy.deepcopy(b["clusterPolicy"]["spec"]) if b else None


def olm_operator_env(version: str) -> dict[str, str]:
    """The image env of the operator Deployment the bundle's CSV installs (what a ClusterPolicy section that
    names no image runs); {} when gpuop has no copy."""
    b = _olm_bundle(version)
    note_call(("operator-olm", version), b)
    return dict(b["operatorEnv"]) if b else {}


_olm_bundle.takes_step = True
root("operator-olm", _olm_bundle)
