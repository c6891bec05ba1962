"""Writer: the Grafana dashboards as JSON files, dist/<cluster>/dashboards/ and dist/fleet/dashboards/.

A cluster's files are the data of its synthesized dashboard ConfigMaps (components/dashboards.py), byte for byte:
import them into a Grafana without the sidecar, or review them; in operator mode, where the stack's objects are a
preview only, they are how the dashboard reaches Grafana. The fleet's dashboard (built with
grafana-foundation-sdk) is made from the index entries: what every cluster's pools advertise per resource,
summed by the `cluster` label a multi-cluster Prometheus (Thanos, Mimir) adds, beside the fleet's planned totals
at the pools' minimum and maximum node counts, with a link to each cluster's own dashboard.
"""

from __future__ import annotations

import json

from grafana_foundation_sdk.builders import dashboard as gdash
from grafana_foundation_sdk.builders import prometheus, table, timeseries
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models import dashboard as gmodel
from grafana_foundation_sdk.models.prometheus import PromQueryFormat

from gpuop.kube.promql import prom_resource
from gpuop.kube.yamlio import dump
from gpuop.outputs.target import Target, Written

SIDECAR_LABEL = "grafana_dashboard"
FOLDER = "dashboards"
FLEET_FILE = f"fleet/{FOLDER}/fleet-gpus.json"
# the same dashboard as a ConfigMap for the Grafana sidecar of the cluster that watches the fleet (no namespace:
# `kubectl apply -n <grafana's namespace>`), labelled as the clusters' own dashboard ConfigMaps are
FLEET_CONFIGMAP = f"fleet/{FOLDER}/fleet-gpus-configmap.yaml"
FLEET_CONFIGMAP_NAME = "gpuop-fleet-dashboards"
FOLDER_ANNOTATION = "grafana_folder"
FLEET_FOLDER = "GPU"
DATASOURCE = gmodel.DataSourceRef(type_val="prometheus", uid="${datasource}")


def write(t: Target) -> Written:
    """Writer (outputs/target.py): dist/<cluster>/dashboards/<file> and the index entry's `dashboards`."""
    mine = files(t.stack, f"{t.name}/{FOLDER}")
    return Written(mine, {"dashboards": sorted(mine)} if mine else {})


def files(stack, folder: str) -> dict[str, str]:
    """<folder>/<file> for every data key of the stack's dashboard ConfigMaps."""
    out = {}
    for o in stack.objects:
        body = o.body
        if body["kind"] == "ConfigMap" and body["metadata"].get("labels", {}).get(SIDECAR_LABEL) == "1":
            for name, text in sorted(body["data"].items()):
                out[f"{folder}/{name}"] = text
    return out


def _planned(entries: list[dict], end: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for e in entries:
        total = (e.get("capacity") or {}).get("total")
        for resource, n in ((total or {}).get(end) or {}).items():
            out[resource] = out.get(resource, 0) + n
    return out


def fleet(entries: list[dict]) -> dict[str, str]:
    """dist/fleet/dashboards/fleet-gpus.json and its sidecar ConfigMap, or nothing when no cluster writes a
    dashboard."""
    mine = sorted((e for e in entries if e.get("dashboards")), key=lambda e: e["name"])
    if not mine:
        return {}
    low, high = _planned(mine, "min"), _planned(mine, "max")
    d = (gdash.Dashboard("GPUs: fleet").uid("gpuop-fleet").tags(["gpuop", "gpu", "fleet"]).refresh("5m")
         .time("now-24h", "now").timezone("utc").editable()
         .description(f"{len(mine)} clusters compiled by gpuop. Series need a `cluster` label per cluster "
                      "(the external label of a multi-cluster Prometheus).")
         .with_variable(gdash.DatasourceVariable("datasource").label("Data source").type("prometheus")))
    panel_id = 1
    for resource in sorted(set(low) | set(high)):
        p = (timeseries.Panel().id(panel_id).title(f"{resource}: advertised vs planned").datasource(DATASOURCE)
             .description("Allocatable on every cluster's nodes, and the fleet's planned total at the pools' "
                          "minimum and maximum node counts (clusters whose node counts are unknown are left out "
                          "of the plan).")
             .with_target(prometheus.Dataquery().ref_id("A").legend_format("advertised").expr(
                 f'sum(kube_node_status_allocatable{{resource="{prom_resource(resource)}"}})'))
             .with_target(prometheus.Dataquery().ref_id("B").legend_format("planned, min nodes")
                          .expr(f"vector({low.get(resource, 0)})"))
             .with_target(prometheus.Dataquery().ref_id("C").legend_format("planned, max nodes")
                          .expr(f"vector({high.get(resource, 0)})"))
             .height(8).span(12))
        d = d.with_panel(p)
        panel_id += 1
    by_cluster = (table.Panel().id(panel_id).title("Advertised per cluster").datasource(DATASOURCE)
                  .description("Open a cluster's own dashboard (uid gpuop-<cluster>) for its pools, planned per node.")
                  .with_target(prometheus.Dataquery().ref_id("A").instant().format(PromQueryFormat.TABLE)
                               .expr('sum by (cluster, resource) (kube_node_status_allocatable{resource=~"nvidia_com_.*"})'))
                  .height(12).span(24))
    d = d.with_panel(by_cluster)
    d = d.link(gdash.DashboardLink("Cluster dashboards").type(gmodel.DashboardLinkType.DASHBOARDS).tags(["gpuop"])
               .as_dropdown(True).keep_time(True).icon("external link"))
    body = json.loads(json.dumps(d.build(), cls=JSONEncoder, sort_keys=True))
    text = json.dumps(body, sort_keys=True, indent=2) + "\n"
    cm = {"apiVersion": "v1", "kind": "ConfigMap",
          "metadata": {"name": FLEET_CONFIGMAP_NAME, "annotations": {FOLDER_ANNOTATION: FLEET_FOLDER},
                       "labels": {SIDECAR_LABEL: "1", "app.kubernetes.io/component": "gpu-dashboards",
                                  "app.kubernetes.io/managed-by": "gpuop"}},
          "data": {FLEET_FILE.rsplit("/", 1)[1]: text}}
    return {FLEET_FILE: text, FLEET_CONFIGMAP: dump(cm)}
