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


class DevicePluginHealth(_Frozen):
    version: str
    ignored: tuple[int, ...]
    disableEnv: str
    enableEnv: str
    disableAll: tuple[str, ...]

    def ignored_xids(self, env: dict[str, str]) -> frozenset[int] | None:
        """The XIDs the device plugin does not count against a GPU under its DaemonSet's `env`, as
        getDisabledHealthCheckXids / IsDisabled compute it; None: its XID health check is off altogether."""
        def parse(name: str) -> dict[int, bool]:
            out: dict[int, bool] = {}
            for item in env.get(name, "").lower().split(","):
                item = item.strip()
                if item in self.disableAll:
                    return {0: True}                # the special "every XID" entry (allXIDs = 0)
                if item.isdigit():                  # malformed values are skipped, as ParseUint's errors
                    out[int(item)] = True
            return out
        disabled = parse(self.disableEnv)
        disabled.update({x: True for x in self.ignored})
        disabled.update({x: False for x in parse(self.enableEnv)})
        if disabled.get(0) is True:
            return None                             # IsAllDisabled: checkHealth returns before watching events
        if disabled.get(0) is False:
            return frozenset()                      # enabled "all": nothing is skipped
        return frozenset(x for x, off in disabled.items() if off)


class MetricsCatalog(_Frozen):
    sources: tuple[str, ...]
    dcgm: Dcgm
    kubeStateMetrics: KubeStateMetrics
    devicePluginHealth: DevicePluginHealth


@lru_cache(maxsize=1)
def load() -> MetricsCatalog:
    doc = yaml.load((DATA / "gpu-metrics.yaml").read_bytes(), Loader=yaml.CSafeLoader)
    return register("metrics", MetricsCatalog(**doc))


root("metrics", load)
