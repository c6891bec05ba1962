"""`gpuop capacity`: what every pool of every cluster advertises, per GPU, per node and in total, and the
fleet's totals, as a table or as JSON (`--format json`, the same numbers index.json carries per cluster).

The numbers come from each plan's capacity (plan/capacity.py explains the rules); unknown inputs
(`gpusPerNode` or `nodes` not given and not derivable) print as `?` and are null in JSON, never guessed.
"""

from __future__ import annotations

import json

from gpuop.plan.model import Counts, add


def _fmt(counts: Counts | dict | None) -> str:
    if counts is None:
        return "?"
    items = counts.items() if isinstance(counts, dict) else counts
    return ", ".join(f"{name}={n}" for name, n in items) or "-"


def _range(lo: Counts, hi: Counts) -> str:
    return _fmt(lo) if lo == hi else f"{_fmt(lo)} .. {_fmt(hi)}"


def fleet_total(plans) -> tuple[Counts, Counts] | None:
    totals = [p.capacity.total() for p in plans]
    if not totals or any(t is None for t in totals):
        return None
    return add([t[0] for t in totals]), add([t[1] for t in totals])


def as_json(plans) -> dict:
    total = fleet_total(plans)
    return {"apiVersion": "gpuop/v1alpha1", "kind": "Capacity",
            "clusters": {p.name: p.capacity.as_dict() for p in plans},
            "fleet": None if total is None else {"min": dict(total[0]), "max": dict(total[1])}}


def table(plans) -> str:
    rows = [("CLUSTER", "POOL", "GPU", "GPUS/NODE", "NODES", "PER NODE", "TOTAL")]
    for plan in plans:
        for pool in plan.capacity.pools:
            nodes = "?" if pool.nodes is None else (
                str(pool.nodes[0]) if pool.nodes[0] == pool.nodes[1] else f"{pool.nodes[0]}-{pool.nodes[1]}")
            gpus = "?" if pool.gpus_per_node is None else str(pool.gpus_per_node)
            if pool.allocation == "dra":
                per_node = "DRA devices/GPU: " + _fmt(pool.devices_per_gpu)
                total = "-"
            elif not pool.per_gpu:
                per_node, total = pool.note or "-", "-"
            else:
                per_node = _fmt(pool.per_node) if pool.per_node is not None else f"per GPU: {_fmt(pool.per_gpu)}"
                t = pool.total
                total = "?" if t is None else _range(*t)
            rows.append((plan.name, pool.pool, pool.gpu, gpus, nodes, per_node, total))
        t = plan.capacity.total()
        rows.append((plan.name, "(cluster)", "", "", "", "", "?" if t is None else _range(*t)))
    t = fleet_total(plans)
    rows.append(("(fleet)", "", "", "", "", "", "?" if t is None else _range(*t)))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths)) + "  " + r[-1] for r in rows) + "\n"


def render(plans, fmt: str) -> str:
    if fmt == "json":
        return json.dumps(as_json(plans), indent=2, sort_keys=True) + "\n"
    return table(plans)
