"""The cluster's Grafana dashboard, as a ConfigMap for the Grafana sidecar (label grafana_dashboard: "1").

Built with grafana-foundation-sdk (Grafana's maintained dashboard builders; the JSON is what its typed models
encode), one row per pool: the pool's nodes, the GPUs / MIG devices / shared replicas its nodes advertise beside
what the plan says those nodes should advertise (per node after MIG and sharing, times the nodes present), GPU
utilization (the graphics engine activity of each MIG instance on MIG pools, where DCGM reports no GPU_UTIL),
framebuffer memory, temperature, power and the last XID per GPU. dist/<cluster>/dashboards/ holds the same JSON
(outputs/dashboards.py).

Series: kube-state-metrics' kube_node_status_allocatable and kube_node_labels (a pool's nodes are those whose
labels match its nodeSelector: kube-state-metrics must expose those label keys,
`--metric-labels-allowlist=nodes=[...]`, listed in the dashboard's description) and dcgm-exporter's default
counters (NVIDIA/dcgm-exporter etc/default-counters.csv; its `Hostname` label is the node's name).
"""

from __future__ import annotations

import json

from grafana_foundation_sdk.builders import dashboard as gdash
from grafana_foundation_sdk.builders import prometheus, stat, timeseries
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models import dashboard as gmodel
from pydantic import BaseModel, ConfigDict, Field

from gpuop.components.base import Component
from gpuop.components.builders import meta
from gpuop.components.props import Props
from gpuop.kube.promql import ANY_GPU_NODE, on_pool, pool_nodes, prom_resource

NAME = "gpuop-dashboards"               # one per cluster, in the stack's namespace (validate/reserved.py)
SIDECAR_LABEL = "grafana_dashboard"      # the kiwigrid k8s-sidecar convention of Grafana's Helm chart
FOLDER_ANNOTATION = "grafana_folder"
DATASOURCE = gmodel.DataSourceRef(type_val="prometheus", uid="${datasource}")


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class PoolPanelProps(_Frozen):
    name: str = Field(description="The pool's name. Required.")
    gpu: str = Field(description="Its GPU model (row title). Required.")
    node_labels: tuple[tuple[str, str], ...] = Field((), description=(
        "Its nodeSelector: the labels that tell its nodes. Omitted: every node with nvidia.com/gpu.present=true."))
    per_node: tuple[tuple[str, int], ...] | None = Field(None, description=(
        "What one node advertises per extended resource (after MIG and sharing). Omitted: unknown (GPUs per node "
        "not known: the expected series is left out)."))
    nodes: tuple[int, int] | None = Field(None, description="(min, max) nodes. Omitted: unknown.")
    mig: bool = Field(False, description="The pool's GPUs are MIG-partitioned. Omitted: false.")
    dra: bool = Field(False, description="DRA pool: nothing advertised as an extended resource. Omitted: false.")


class DashboardsProps(Props):
    cluster: str = Field(description="The cluster's name (title, uid). Required.")
    folder: str = Field("GPU", description="Grafana folder (annotation grafana_folder). Omitted: GPU.")
    pools: tuple[PoolPanelProps, ...] = Field(description="One row per pool. Required.")


def _query(expr: str, legend: str, ref: str) -> prometheus.Dataquery:
    return prometheus.Dataquery().expr(expr).legend_format(legend).ref_id(ref)


def _panels(p: PoolPanelProps, first_id: int) -> list:
    nodes = pool_nodes(p.node_labels)
    expected_nodes = "" if p.nodes is None else (
        f"{p.nodes[0]}" if p.nodes[0] == p.nodes[1] else f"{p.nodes[0]} to {p.nodes[1]}")
    panels = [stat.Panel().id(first_id).title("Nodes").datasource(DATASOURCE)
              .description(f"Nodes matching the pool's nodeSelector; the plan says {expected_nodes or 'unknown'}.")
              .with_target(_query(f"count({nodes}) or vector(0)", "nodes", "A")).height(6).span(4)]
    if not p.dra:
        targets, ref = [], ord("A")
        for resource, n in (p.per_node or ()):
            observed = (f'sum(kube_node_status_allocatable{{resource="{prom_resource(resource)}"}} '
                        f"* on(node) group_left() max by (node) ({nodes}))")
            targets.append(_query(observed, f"{resource} advertised", chr(ref)))
            targets.append(_query(f"count({nodes}) * {n}", f"{resource} planned ({n} per node)", chr(ref + 1)))
            ref += 2
        advertised = (timeseries.Panel().id(first_id + 1).title("Advertised vs planned").datasource(DATASOURCE)
                      .description("Allocatable per resource on the pool's nodes, and what the plan says those nodes "
                                   "should advertise (per node after MIG and sharing, times the nodes present).")
                      .height(6).span(8))
        for t in targets:
            advertised = advertised.with_target(t)
        panels.append(advertised)
    util = ("DCGM_FI_PROF_GR_ENGINE_ACTIVE * 100", "{{Hostname}} GPU {{gpu}} {{GPU_I_PROFILE}}") if p.mig else (
        "DCGM_FI_DEV_GPU_UTIL", "{{Hostname}} GPU {{gpu}}")
    for k, (title, metric, legend, unit) in enumerate((
            ("Utilization", util[0], util[1], "percent"),
            ("Framebuffer used", "DCGM_FI_DEV_FB_USED", "{{Hostname}} GPU {{gpu}}", "decmbytes"),
            ("Temperature", "DCGM_FI_DEV_GPU_TEMP", "{{Hostname}} GPU {{gpu}}", "celsius"),
            ("Power", "DCGM_FI_DEV_POWER_USAGE", "{{Hostname}} GPU {{gpu}}", "watt"),
            ("Last XID", "DCGM_FI_DEV_XID_ERRORS", "{{Hostname}} GPU {{gpu}}", "none"))):
        panels.append(timeseries.Panel().id(first_id + 2 + k).title(title).datasource(DATASOURCE).unit(unit)
                      .with_target(_query(on_pool(metric, p.node_labels), legend, "A")).height(6)
                      .span(4 if k < 3 else 6))
    return panels


def dashboard(props: DashboardsProps) -> dict:
    """The cluster's dashboard as Grafana's JSON model (a dict, keys sorted when written)."""
    keys = sorted({k for p in props.pools for k, _ in (p.node_labels or ANY_GPU_NODE)})
    d = (gdash.Dashboard(f"GPUs: {props.cluster}").uid(f"gpuop-{props.cluster}")
         .description("GPU pools of " + props.cluster + " as gpuop planned them. kube-state-metrics must expose the "
                      "node labels " + ", ".join(keys) + " (--metric-labels-allowlist=nodes=[...]).")
         .tags(["gpuop", "gpu", props.cluster]).refresh("1m").time("now-6h", "now").timezone("utc").editable()
         .with_variable(gdash.DatasourceVariable("datasource").label("Data source").type("prometheus")))
    panel_id = 1
    for p in props.pools:
        title = f"Pool {p.name} ({p.gpu}{', MIG' if p.mig else ''}{', DRA' if p.dra else ''})"
        d = d.with_row(gdash.Row(title).id(panel_id))
        panel_id += 1
        for panel in _panels(p, panel_id):
            d = d.with_panel(panel)
        panel_id += 10
    return json.loads(json.dumps(d.build(), cls=JSONEncoder, sort_keys=True))


def dashboard_json(props: DashboardsProps) -> str:
    return json.dumps(dashboard(props), sort_keys=True, indent=2) + "\n"


class Dashboards(Component):
    name = "dashboards"
    values_key = None
    props_type = DashboardsProps

    @classmethod
    def render(cls, props: DashboardsProps) -> list[dict]:
        return [{"apiVersion": "v1", "kind": "ConfigMap",
                 "metadata": meta(NAME, props.namespace,
                                  labels={SIDECAR_LABEL: "1", "app.kubernetes.io/component": "gpu-dashboards"},
                                  annotations={FOLDER_ANNOTATION: props.folder}),
                 "data": {f"{props.cluster}-gpus.json": dashboard_json(props)}}]
