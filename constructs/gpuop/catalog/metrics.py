"""The metrics the alert rules read (data/gpu-metrics.yaml): dcgm-exporter's fields (which its built-in list
exports) and kube-state-metrics' names and label spelling, with their sources. Imports nothing of the project
(catalog rule).
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

import yaml
from pydantic import ConfigDict

from gpuop.catalog.reads import Tracked, register, root

DATA = Path(__file__).parent / "data"


class _Frozen(Tracked):
    model_config = ConfigDict(extra="forbid", frozen=True)


class DcgmField(_Frozen):
    type: str
    builtin: bool
    unit: str


class Dcgm(_Frozen):
    builtinList: str
    nodeLabels: tuple[str, ...]
    gpuLabel: str
    fields: dict[str, DcgmField]


class KubeStateMetrics(_Frozen):
    nodeLabels: str
    allocatable: str
    daemonsetReady: str
    daemonsetDesired: str
    labelPrefix: str
    invalidLabelChars: str

    def sanitize(self, name: str) -> str:
        """A Kubernetes name as kube-state-metrics writes it in a label name or value (SanitizeLabelName)."""
        return re.sub(self.invalidLabelChars, "_", name)


class MetricsCatalog(_Frozen):
    sources: tuple[str, ...]
    dcgm: Dcgm
    kubeStateMetrics: KubeStateMetrics


@lru_cache(maxsize=1)
def load() -> MetricsCatalog:
    doc = yaml.load((DATA / "gpu-metrics.yaml").read_bytes(), Loader=yaml.CSafeLoader)
    return register("metrics", MetricsCatalog(**doc))


root("metrics", load)
