"""PromQL over the series Kubernetes' own exporters name: kube-state-metrics' node labels and allocatable
resources, and dcgm-exporter's per-GPU series joined to the nodes of a pool (its `Hostname` label is the node's
name). Shared by the dashboards and the alert rules, so both select a pool's nodes the same way.

kube-state-metrics exposes a node label only when it is allowlisted (`--metric-labels-allowlist=nodes=[...]`);
the dashboards list the keys they need.
"""

from __future__ import annotations

import json
import re

ANY_GPU_NODE = (("nvidia.com/gpu.present", "true"),)    # GFD's label: a pool without a nodeSelector


def prom_label(key: str) -> str:
    """kube-state-metrics' name of a Kubernetes label as a Prometheus label (`label_` + every character outside
    [a-zA-Z0-9_] as `_`: kube-state-metrics internal/store SanitizeLabelName)."""
    return "label_" + re.sub(r"[^a-zA-Z0-9_]", "_", key)


def prom_resource(name: str) -> str:
    """kube-state-metrics' `resource` label value of an extended resource (nvidia.com/mig-1g.10gb ->
    nvidia_com_mig_1g_10gb)."""
    return re.sub(r"[^a-zA-Z0-9_]", "_", name)


def _quote(v: str) -> str:
    return json.dumps(v)        # a PromQL string literal: Go's escaping, which JSON's is for these characters


def pool_nodes(labels: tuple[tuple[str, str], ...]) -> str:
    """kube_node_labels of the pool's nodes (one series per node, label `node`)."""
    sel = ",".join(f"{prom_label(k)}={_quote(v)}" for k, v in (labels or ANY_GPU_NODE))
    return f"kube_node_labels{{{sel}}}"


def on_pool(metric: str, labels: tuple[tuple[str, str], ...]) -> str:
    """A dcgm-exporter series restricted to the pool's nodes (its Hostname is the node's name)."""
    nodes = f'label_replace({pool_nodes(labels)}, "Hostname", "$1", "node", "(.+)")'
    return f"{metric} * on(Hostname) group_left() max by (Hostname) ({nodes})"
