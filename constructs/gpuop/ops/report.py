"""`gpuop report`: one static HTML page of the fleet, written to <output>/report/index.html.

Every cluster with its platform, stack release, chart version, pools (GPU model, node count, driver, MIG
layout drawn as the GPU's slots, what each pool advertises per node and in total), and the fleet's
totals; with `--against REV`, what the next synth changes and its impact on the nodes (ops/impact.py),
destructive effects first. No external assets: styles, pictures (inline SVG from mig/picture.py) and
the one small script (table filter) are in the page, so it opens from a CI artifact or a file share.
Deterministic: no timestamps; the same fleet gives the same bytes.
"""

from __future__ import annotations

import os
from html import escape
from pathlib import Path

from gpuop.catalog import versions as version_order
from gpuop.mig import geometry, picture
from gpuop.ops.capacity import fleet_total

CSS = """
body{font-family:DejaVu Sans,Verdana,Arial,sans-serif;margin:24px;color:#1b1b1b;background:#fff}
h1{font-size:22px;margin:0 0 4px}h2{font-size:18px;margin:28px 0 6px;border-bottom:1px solid #ccc}
table{border-collapse:collapse;margin:8px 0 16px}th,td{border:1px solid #ccc;padding:4px 8px;text-align:left;
vertical-align:top;font-size:13px}th{background:#f0f3f7}.muted{color:#666}.bad{color:#a40000;font-weight:bold}
.effects li{margin:2px 0}.svg svg{max-width:520px;height:auto}input{margin:8px 0;padding:4px;width:260px}
"""
SCRIPT = """
(function(){var box=document.getElementById('filter');var rows=document.querySelectorAll('#fleet tbody tr');
function apply(){var q=box.value.toLowerCase();rows.forEach(function(r){r.style.display=
r.textContent.toLowerCase().indexOf(q)>=0?'':'none';});}
box.addEventListener('input',apply);apply();document.body.setAttribute('data-ready','yes');})();
"""


def _counts(counts) -> str:
    if counts is None:
        return '<span class="muted">?</span>'
    items = counts.items() if isinstance(counts, dict) else counts
    return "<br>".join(f"{escape(k)}: {n}" for k, n in items) or "-"


def _driver(plan, pool) -> str:
    if not plan.driver_variants:
        return "preinstalled"
    versions = sorted({v.version for v in plan.driver_variants
                       if not v.pool_terms or pool.node_selector in v.pool_terms}, key=version_order.key)
    return ", ".join(versions) or "preinstalled"


def _layout(pool) -> str:
    if not pool.mig_layout:
        return '<span class="muted">no MIG</span>'
    result = geometry.check_layout(pool.gpu, dict(pool.mig_layout))
    text = escape(", ".join(f"{n}x {p}" for p, n in pool.mig_layout)) + f" ({escape(pool.mig_strategy)})"
    if not result.ok:
        return text
    return f'{text}<div class="svg">{picture.svg(result)}</div>'


def _cluster(plan, entry: dict, effects: list) -> str:
    caps = {c.pool: c for c in plan.capacity.pools}
    rows = []
    for pool in plan.pools:
        c = caps.get(pool.name)
        nodes = "?" if c is None or c.nodes is None else (
            str(c.nodes[0]) if c.nodes[0] == c.nodes[1] else f"{c.nodes[0]}-{c.nodes[1]}")
        total = c.total if c is not None else None
        rows.append(
            f"<tr><td>{escape(pool.name)}</td><td>{escape(pool.gpu)}</td><td>{nodes}</td>"
            f"<td>{escape(_driver(plan, pool))}</td><td>{_layout(pool)}</td>"
            f"<td>{_counts(c.per_node if c else None)}</td>"
            f"<td>{_counts(total[1] if total else None)}</td></tr>")
    changes = ""
    if effects:
        items = "".join(f'<li class="{"bad" if e.destructive else ""}">{"!! " if e.destructive else ""}'
                        f"{escape(e.scope)}: {escape(e.text)}</li>" for e in effects)
        changes = f'<h3>Next synth: impact</h3><ul class="effects">{items}</ul>'
    return (f'<h2 id="c-{escape(plan.name)}">{escape(plan.name)}</h2>'
            f'<p>{escape(plan.platform)} {escape(plan.platform_version)} &middot; stack release '
            f'{escape(plan.release)} (GPU Operator {escape(plan.operator_version)}) &middot; chart '
            f'{escape(str(entry.get("chartVersion", "?")))} &middot; namespace {escape(plan.namespace)}</p>'
            "<table><thead><tr><th>Pool</th><th>GPU</th><th>Nodes</th><th>Driver</th><th>MIG layout</th>"
            f"<th>Per node</th><th>Total (max)</th></tr></thead><tbody>{''.join(rows)}</tbody></table>{changes}")


def html(plans, index: dict, effects: list, against: str | None = None) -> str:
    plans = sorted(plans, key=lambda p: p.name)
    by_cluster: dict[str, list] = {}
    for e in effects:
        by_cluster.setdefault(e.cluster, []).append(e)
    fleet_rows = []
    for p in plans:
        entry = index.get(p.name, {})
        gpus = sorted({pool.gpu for pool in p.pools})
        total = p.capacity.total()
        destructive = sum(e.destructive for e in by_cluster.get(p.name, []))
        flag = f' <span class="bad">{destructive} destructive</span>' if destructive else ""
        fleet_rows.append(
            f'<tr><td><a href="#c-{escape(p.name)}">{escape(p.name)}</a>{flag}</td><td>{escape(p.platform)} '
            f"{escape(p.platform_version)}</td><td>{escape(p.release)}</td>"
            f"<td>{escape(str(entry.get('chartVersion', '?')))}</td><td>{len(p.pools)}</td>"
            f"<td>{escape(', '.join(gpus))}</td><td>{_counts(total[1] if total else None)}</td></tr>")
    removed = sorted({e.cluster for e in effects} - {p.name for p in plans})
    gone = "".join(f'<li class="bad">!! {escape(c)}: {escape(e.text)}</li>'
                   for c in removed for e in by_cluster[c])
    total = fleet_total(plans)
    subtitle = f"changes against {escape(against)}" if against else "as compiled"
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<title>gpuop fleet report</title>"
            f"<style>{CSS}</style></head><body>"
            f'<h1>GPU fleet: {len(plans)} cluster(s)</h1><p class="muted">{subtitle}</p>'
            '<input id="filter" placeholder="filter clusters" aria-label="filter clusters">'
            '<table id="fleet"><thead><tr><th>Cluster</th><th>Platform</th><th>Release</th><th>Chart</th>'
            "<th>Pools</th><th>GPU models</th><th>Capacity (max)</th></tr></thead>"
            f"<tbody>{''.join(fleet_rows)}</tbody></table>"
            f'<p id="fleet-total">Fleet total (max): {_counts(total[1] if total else None)}</p>'
            + (f"<h2>Clusters leaving the output</h2><ul>{gone}</ul>" if gone else "")
            + "".join(_cluster(p, index.get(p.name, {}), by_cluster.get(p.name, [])) for p in plans)
            + f"<script>{SCRIPT}</script></body></html>\n")


def run(paths: list[Path], against: str | None, output: Path, settings_path: Path) -> Path:
    """Write <output>/report/index.html; returns its path. Never through a symlink, never outside the
    project."""

    from gpuop.pipeline.run import plan_all

    plans, _ = plan_all(paths)
    from gpuop.bounded import read_json
    from gpuop.errors import UserError

    target = _report_target(output, settings_path)       # before any work: refuse early, write nothing
    index_file = output / "index.json"
    index = {}
    if index_file.is_file():
        try:      # the previous output is untrusted: bounded, never through a symlink
            index = {c["name"]: c for c in read_json(index_file, str(index_file), what="an index.json")["clusters"]}
        except (UserError, KeyError, TypeError):
            index = {}
    effects = []
    if against is not None:
        from gpuop.ops import impact
        from gpuop.ops.diff import compile_trees

        old, new, _ = compile_trees(paths, against, output, settings_path)
        effects = impact.impact(old, new)
    page = html(plans, index, effects, against).encode()
    target.parent.mkdir(exist_ok=True)
    _report_target(output, settings_path)                # again: nothing swapped a link in meanwhile
    tmp = target.with_suffix(".html.tmp")
    try:
        os.unlink(tmp)
    except FileNotFoundError:
        pass
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0), 0o644)
    with os.fdopen(fd, "wb") as f:
        f.write(page)
    os.replace(tmp, target)        # replaces a link at the target itself, never what it points to
    return target


def _report_target(output: Path, settings_path: Path) -> Path:
    """<output>/report/index.html, refused (exit 2) when the output or report folder is a symlink or the
    output is outside the project (the folder of the settings file): the page is never written elsewhere."""
    from gpuop.errors import Issue, UserError

    project = Path(os.path.abspath(settings_path)).parent
    out = Path(os.path.abspath(output))
    if not out.is_relative_to(project) or out == project:
        raise UserError(Issue(str(output), 0, 0, "", f"is not an output folder inside the project ({project}); "
                              "the report is written only into the project's output"))
    here = project
    for part in (out / "report").relative_to(project).parts:
        here = here / part
        if os.path.islink(here):
            from gpuop.profile.load import display

            raise UserError(Issue(display(here), 0, 0, "", "is a symlink; the report is never written through a link "
                                  "(remove it, gpuop creates the folder)"))
    return out / "report" / "index.html"
