"""GPU alerts: PrometheusRule `gpuop-gpu-alerts`, the alerting rules the plan decides for the cluster's GPUs
and GPU stack (plan/alerts.py: per pool, GPUs visible and allocatable against the plan's per-node counts,
XID / ECC / memory-retirement events and early warnings, throttling, MIG configuration; per component, pods
not ready). Not an Operator state: NVIDIA's operator writes alert rules only on OpenShift (the node status
exporter's and the exporter's recording rules); gpuop writes these on every platform.

Emitted only where the Prometheus Operator's CRD is expected (spec.alerts.prometheusRule): a PrometheusRule
without its CRD fails the whole sync. The same rules are always written as a plain rule file beside the
cluster's output (outputs/alerts.py) for a Prometheus without the operator.
"""

from __future__ import annotations

import json

from pydantic import Field

from gpuop.components.base import Component
from gpuop.components.builders import meta
from gpuop.components.props import Props

NAME = "gpuop-gpu-alerts"


class GpuAlertsProps(Props):
    groups_json: str = Field(description="The rule groups (a PrometheusRule's spec.groups), canonical JSON. Required.")
    labels: dict[str, str] = Field(default_factory=dict, description=(
        "Labels added to the PrometheusRule (e.g. the one a Prometheus's ruleSelector selects on). Omitted: none."))


class GpuAlerts(Component):
    name = "gpu-alerts"
    values_key = None
    props_type = GpuAlertsProps

    @classmethod
    def render(cls, p: GpuAlertsProps) -> list[dict]:
        return [{"apiVersion": "monitoring.coreos.com/v1", "kind": "PrometheusRule",
                 "metadata": meta(NAME, p.namespace, {**p.labels, "app": NAME}),
                 "spec": {"groups": json.loads(p.groups_json)}}]
