"""dist/<cluster>/node-labels.yaml and the index's `nodeGroupLabels` and `labelSources`: the labels each
pool's node group must carry because no NodeFeatureRule can set them (plan/pools.py decides which, and
why), and, per pool, where every label its nodes are selected and configured by comes from: `nfd rule`
(the NodeFeatureRule gpuop writes), `node group <name>` (the profile's nodeGroup), `user` (the profile's
nodeSelector without a nodeGroup, or labelsFrom: user).
"""

from __future__ import annotations

from gpuop.kube.yamlio import dump_plain
from gpuop.plan.pools import WHERE
from gpuop.outputs.target import Target, Written


def document(plan) -> dict | None:
    """The labels each pool's node group must carry (None when NFD sets them all)."""
    manual = plan.pool_configs.manual
    if not manual:
        return None
    return {"apiVersion": "gpuop/v1alpha1", "kind": "NodePoolLabels", "cluster": plan.name,
            "note": f"No NodeFeatureRule can set these labels; put them on each pool's {WHERE}.",
            "pools": [{"name": p.name, "gpu": p.gpu, **({"nodeGroup": p.node_group} if p.node_group else {}),
                       "nodeSelector": dict(p.node_selector), "labels": dict(p.manual), "why": p.why} for p in manual]}


def write(t: Target) -> Written:
    """Writer (outputs/target.py): dist/<cluster>/node-labels.yaml (when a pool needs one) and the index entry's
    `nodeGroupLabels` and `labelSources`."""
    return Written(files(t.plan, f"{t.name}/node-labels.yaml"), index_entry(t.plan))


def files(plan, path: str) -> dict[str, str]:
    """{path: node-labels.yaml} for a writer (e.g. path = '<cluster>/node-labels.yaml'); {} when not needed."""
    doc = document(plan)
    return {path: dump_plain(doc)} if doc else {}


def index_entry(plan) -> dict:
    """For the cluster's index.json entry: per pool, the labels its node group must carry."""
    return {"nodeGroupLabels": {p.name: dict(p.manual) for p in plan.pool_configs.manual},
            "labelSources": {p.name: p.sources() for p in plan.pool_configs.pools}}
