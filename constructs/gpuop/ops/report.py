"""`gpuop report`: one static HTML page of the fleet, written to report/index.html beside the settings file
(`--to FILE` elsewhere in the project), never into the compiled output: what Argo CD and Flux read (dist/) holds
only what they apply, and `git add dist` commits no page that synth would then delete.

Every cluster with its platform, stack release, delivery mode (gpuop's stack, or NVIDIA's operator with the
version the profile pins and how it is installed), chart version, pools (GPU model, node count, driver, MIG
layout drawn as the GPU's slots, how its GPUs are shared, e.g. "4 GPUs x time-slicing 4", its physical
GPUs, what it advertises per node and in total), and the fleet's totals, physical GPUs apart from what
the device plugin advertises (time-sliced replicas and MIG devices are not GPUs); with `--against REV`,
before -> after columns (chart version, advertised devices, the config labels of each pool) and the
impact of the next synth on the nodes (ops/impact.py), its destructive effects at the top of the page
and first in each cluster, with their trigger (merge, node group change, node reboot). No external assets: styles, pictures (inline SVG from mig/picture.py) and
the one small script (table filter) are in the page, so it opens from a CI artifact or a file share.
Deterministic: no timestamps; the same fleet gives the same bytes. Totals over clusters some of which have no
node counts are partial and say so: the sum over the clusters that have them, and how many those are.
Wide tables scroll inside their own box with the cluster or pool column kept in view.
"""

from __future__ import annotations

import os
from html import escape
from pathlib import Path

from gpuop.catalog import versions as version_order
from gpuop.mig import geometry, picture

CSS = """
body{font-family:DejaVu Sans,Verdana,Arial,sans-serif;margin:24px;color:#1b1b1b;background:#fff}
h1{font-size:22px;margin:0 0 4px}h2{font-size:18px;margin:28px 0 6px;border-bottom:1px solid #ccc}
.scroll{overflow-x:auto;max-width:100%;margin:8px 0 16px}
table{border-collapse:collapse}th,td{border:1px solid #ccc;padding:4px 8px;text-align:left;
vertical-align:top;font-size:13px;max-width:28em;overflow-wrap:anywhere}th{background:#f0f3f7;position:sticky;top:0}
th:first-child,td:first-child{position:sticky;left:0;background:#fff;z-index:1}th:first-child{background:#f0f3f7}
.muted{color:#666}.bad{color:#a40000;font-weight:bold}
.effects li{margin:2px 0}.svg svg{max-width:360px;height:auto}input{margin:8px 0;padding:4px;width:260px}
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


def _physical(c) -> int | None:
    """The pool's physical GPUs at its max node count (None: unknown)."""
    if c is None or c.gpus_per_node is None or c.nodes is None:
        return None
    return c.gpus_per_node * c.nodes[1]


def _sharing(pool, c) -> str:
    """'4 GPUs x time-slicing 4' per node, 'MIG 2x3g.40gb', 'none'."""
    gpus = f"{c.gpus_per_node} GPUs" if c is not None and c.gpus_per_node is not None else "? GPUs"
    parts = []
    if pool.mig_layout:
        parts.append("MIG " + "+".join(f"{n}x{p}" for p, n in pool.mig_layout))
    if pool.sharing:
        parts.append(pool.sharing)
    return f"{gpus} x {', '.join(parts)}" if parts else f"{gpus}, not shared"


def _old_pool(before: dict | None, pool: str) -> dict | None:
    return next((p for p in ((before or {}).get("capacity") or {}).get("pools") or [] if p.get("pool") == pool), None)


def _old_counts(old: dict | None, key: str):
    if old is None:
        return None
    v = old.get(key)
    return None if v is None else (v.get("max") if key == "total" else v)


def _pair(before: str, after: str) -> str:
    return after if before == after else f'<span class="muted">{before}</span> &rarr; {after}'


def _effect_item(e) -> str:
    from gpuop.ops import impact

    return (f'<li class="{"bad" if e.destructive else ""}" data-type="{escape(e.type)}" '
            f'data-trigger="{escape(e.trigger)}">{"!! " if e.destructive else ""}{escape(e.cluster)}: '
            f"{escape(impact.line(e))}</li>")


def _cluster(plan, entry: dict, effects: list, before: dict | None = None, labels: dict | None = None) -> str:
    """One cluster: its pools (sharing, physical and advertised devices; with a revision, before and
    after), then the impact of the next synth, destructive first."""
    from gpuop.ops import impact

    caps = {c.pool: c for c in plan.capacity.pools}
    against = before is not None
    rows = []
    for pool in plan.pools:
        c = caps.get(pool.name)
        nodes = "?" if c is None or c.nodes is None else (
            str(c.nodes[0]) if c.nodes[0] == c.nodes[1] else f"{c.nodes[0]}-{c.nodes[1]}")
        total = c.total if c is not None else None
        physical = _physical(c)
        per_node, advertised = _counts(c.per_node if c else None), _counts(total[1] if total else None)
        extra = ""
        if against:
            old = _old_pool(before, pool.name)
            old_labels, new_labels = (labels or {}).get(pool.name, ({}, {}))
            cfg = lambda d: "<br>".join(f"{escape(k)}={escape(v)}" for k, v in sorted(d.items())) or "-"  # noqa: E731
            extra = (f"<td>{_pair(_counts(_old_counts(old, 'perNode')), per_node) if old else 'new'}</td>"
                     f"<td>{_pair(_counts(_old_counts(old, 'total')), advertised) if old else 'new'}</td>"
                     f"<td>{_pair(cfg(old_labels), cfg(new_labels))}</td>")
        rows.append(
            f'<tr data-pool="{escape(pool.name)}"><td>{escape(pool.name)}</td><td>{escape(pool.gpu)}</td>'
            f"<td>{nodes}</td><td>{escape(_driver(plan, pool))}</td><td>{_layout(pool)}</td>"
            f'<td class="sharing">{escape(_sharing(pool, c))}</td>'
            f'<td class="physical">{"?" if physical is None else physical}</td>'
            f"<td>{per_node}</td><td>{advertised}</td>{extra}</tr>")
    changes = ""
    if effects:
        items = "".join(_effect_item(e) for e in impact.ordered(effects))
        changes = f'<h3>Next synth: impact</h3><ul class="effects">{items}</ul>'
    chart = escape(str(entry.get("chartVersion", "?")))
    if against:
        chart = _pair(escape(str(before.get("chartVersion", "none"))) if before else "none", chart)
    head = ("<th>Pool</th><th>GPU</th><th>Nodes</th><th>Driver</th><th>MIG layout</th><th>Sharing (per node)</th>"
            "<th>Physical GPUs (max)</th><th>Advertised per node</th><th>Advertised total (max)</th>")
    if against:
        head += ("<th>Per node: before &rarr; after</th><th>Total: before &rarr; after</th>"
                 "<th>Config labels: before &rarr; after</th>")
    return (f'<h2 id="c-{escape(plan.name)}">{escape(plan.name)}</h2>'
            f'<p>{escape(plan.platform)} {escape(plan.platform_version)} &middot; stack release '
            f'{escape(plan.release)} &middot; delivery <span class="delivery">{escape(delivery(plan))}</span> &middot; '
            f'chart {chart} &middot; namespace {escape(plan.namespace)}</p>'
            + (f'<p class="hub">delivered to: {escape(hub(entry))}</p>' if hub(entry) else "")
            + f'{changes}'
            f'<div class="scroll"><table class="pools"><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody>'
            "</table></div>")


def _physical_total(plans) -> int | None:
    counts = [_physical(c) for p in plans for c in p.capacity.pools if c.allocation != "dra"]
    return None if not counts or None in counts else sum(counts)


def delivery(plan) -> str:
    """How the cluster is delivered: gpuop's stack (mirroring the release's GPU Operator operands), or NVIDIA's
    operator at the version the profile pins (never the release's newer one) and how it is installed."""
    op = plan.operator
    if op is None:
        return f"stack (operands of GPU Operator {plan.operator_version})"
    return f"operator {op.version} ({op.install})"


def partial_totals(plans) -> tuple[int, object, list[str]]:
    """The fleet's physical GPUs and advertised devices (max) over the clusters whose every pool has node counts,
    and the clusters left out: a total of the counted clusters, never '?' for the whole fleet."""
    from gpuop.plan.model import add

    counted = [p for p in plans if p.capacity.total() is not None and _physical_total([p]) is not None]
    left = sorted(p.name for p in plans if p not in counted)
    physical = sum(_physical_total([p]) for p in counted)
    advertised = add([p.capacity.total()[1] for p in counted]) if counted else {}
    return physical, advertised, left


def hub(entry: dict) -> str:
    """Where the engines deliver the cluster and the Secrets (by name) they need for it: index.json's
    destination, fluxKubeConfig and credentials, or "" when the profile names none."""
    parts = []
    dest = entry.get("destination") or {}
    if dest:
        parts.append("Argo CD " + ", ".join(f"{k} {v}" for k, v in sorted(dest.items())))
    if entry.get("fluxKubeConfig"):
        parts.append(f"Flux kubeconfig Secret {entry['fluxKubeConfig']}")
    for repo, engines in sorted((entry.get("credentials") or {}).items()):
        parts.append(f"{repo} chart credentials: " + ", ".join(f"{e} Secret {s}" for e, s in sorted(engines.items())))
    return "; ".join(parts)


def _fleet_total(plans) -> str:
    physical, advertised, left = partial_totals(plans)
    scope = (f"all {len(plans)} cluster(s)" if not left else
             f'<span class="bad">{len(plans) - len(left)} of {len(plans)} cluster(s)</span>; not counted, no node '
             f"counts in their profile: {escape(', '.join(left))}")
    return (f'<p id="fleet-total">Fleet total (max) over <span id="fleet-counted">{scope}</span>: '
            f'<span id="fleet-physical">{physical}</span> physical GPU(s); advertised (time-sliced and MPS replicas '
            f'and MIG devices counted as the device plugin advertises them): <span id="fleet-advertised">'
            f"{_counts(advertised)}</span></p>")


def html(plans, index: dict, effects: list, against: str | None = None, before: dict | None = None,
         labels: dict | None = None, secrets: dict | None = None) -> str:
    """The page. `before`: with a revision, the index entries at it (cluster -> entry); `labels`:
    cluster -> pool -> (config labels before, after); `secrets`: what -> name of the Secrets the settings
    reference (gpuop writes none)."""
    from gpuop.ops import impact

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
        chart = escape(str(entry.get("chartVersion", "?")))
        if against is not None:
            old = (before or {}).get(p.name)
            chart = _pair(escape(str(old.get("chartVersion"))) if old else "none", chart)
        physical = _physical_total([p])
        fleet_rows.append(
            f'<tr><td><a href="#c-{escape(p.name)}">{escape(p.name)}</a>{flag}</td><td>{escape(p.platform)} '
            f"{escape(p.platform_version)}</td><td>{escape(p.release)}</td>"
            f'<td class="delivery">{escape(delivery(p))}</td><td>{chart}</td><td>{len(p.pools)}</td>'
            f"<td>{escape(', '.join(gpus))}</td><td>{'?' if physical is None else physical}</td>"
            f"<td>{_counts(total[1] if total else None)}</td></tr>")
    destructive = [e for e in impact.ordered(effects) if e.destructive]
    top = ""
    if destructive:
        items = "".join(_effect_item(e) for e in destructive)
        top = (f'<section id="destructive"><h2 class="bad">{len(destructive)} destructive effect(s) of the next '
               f'synth</h2><ul class="effects">{items}</ul></section>')
    removed = sorted({e.cluster for e in effects} - {p.name for p in plans} - {"fleet"})
    gone = "".join(f'<li class="bad">!! {escape(c)}: {escape(e.text)}</li>'
                   for c in removed for e in by_cluster[c])
    subtitle = f"changes against {escape(against)}" if against else "as compiled"
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<title>gpuop fleet report</title>"
            f"<style>{CSS}</style></head><body>"
            f'<h1>GPU fleet: {len(plans)} cluster(s)</h1><p class="muted">{subtitle}</p>{top}'
            + ('<p id="secrets">Secrets the engines need for this repository (by name; gpuop writes none): '
               + escape("; ".join(f"{k} {v}" for k, v in sorted(secrets.items()))) + "</p>" if secrets else "")
            + '<input id="filter" placeholder="filter clusters" aria-label="filter clusters">'
            '<div class="scroll"><table id="fleet"><thead><tr><th>Cluster</th><th>Platform</th><th>Release</th>'
            "<th>Delivery</th><th>Chart</th><th>Pools</th><th>GPU models</th><th>Physical GPUs (max)</th>"
            f"<th>Advertised (max)</th></tr></thead><tbody>{''.join(fleet_rows)}</tbody></table></div>"
            + _fleet_total(plans)
            + (f"<h2>Clusters leaving the output</h2><ul>{gone}</ul>" if gone else "")
            + "".join(_cluster(p, index.get(p.name, {}), by_cluster.get(p.name, []),
                               (before or {}).get(p.name, {}) if against is not None else None,
                               (labels or {}).get(p.name)) for p in plans)
            + f"<script>{SCRIPT}</script></body></html>\n")


DEFAULT = Path("report") / "index.html"        # beside the settings file: outside the output GitOps applies


def run(paths: list[Path], against: str | None, output: Path, settings_path: Path, to: Path | None = None) -> Path:
    """Write the page to `to` (default: report/index.html beside the settings file); returns its path. Never
    through a symlink, never outside the project, never into the output folder `output` (read for index.json)."""

    from gpuop.pipeline.run import plan_all

    plans, _ = plan_all(paths)
    from gpuop.profile.bounded import read_json
    from gpuop.errors import UserError

    target = _report_target(output, settings_path, to)   # before any work: refuse early, write nothing
    index_file = output / "index.json"
    index = {}
    if index_file.is_file():
        try:      # the previous output is untrusted: bounded, never through a symlink
            index = {c["name"]: c for c in read_json(index_file, str(index_file), what="an index.json")["clusters"]}
        except (UserError, KeyError, TypeError):
            index = {}
    effects, before, labels = [], None, None
    if against is not None:
        from gpuop.ops import impact
        from gpuop.ops.diff import compile_trees

        old, new, settings = compile_trees(paths, against, output, settings_path)
        effects = impact.impact(old, new, settings.gitops.path.rstrip("/"))
        before, after = impact._index(old), impact._index(new)
        index = after or index                 # the next synth's chart versions beside the old ones
        labels = {}
        for name, entry in after.items():
            pools = impact._pools(entry)
            o = impact._pool_labels(old, name, impact._objects(old, name), pools)
            n = impact._pool_labels(new, name, impact._objects(new, name), pools)
            labels[name] = {p["pool"]: (o.get(p["pool"], {}), n.get(p["pool"], {})) for p in pools}
    page = html(plans, index, effects, against, before, labels, _secrets(settings_path)).encode()
    target.parent.mkdir(parents=True, exist_ok=True)
    _report_target(output, settings_path, to)            # again: nothing swapped a link in meanwhile
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


def _secrets(settings_path: Path) -> dict:
    """The Secrets gpuop.yaml references (Argo CD's repository Secret, Flux's source secretRef); {} without
    settings."""
    if not Path(settings_path).is_file():
        return {}
    from gpuop.profile.settings import load_settings

    g = load_settings(Path(settings_path)).gitops
    return {k: v for k, v in (("Argo CD repository Secret", g.argocd.repositorySecret),
                              ("Flux source secretRef", g.flux.secretRef)) if v}


def _report_target(output: Path, settings_path: Path, to: Path | None = None) -> Path:
    """The page's path: `to`, else report/index.html in the project (the folder of the settings file); refused
    (exit 2) when it is outside the project, inside the output folder (what Argo CD and Flux apply, and what
    `git add dist` commits), not an .html file, or any folder on the way or the file itself is a symlink."""
    from gpuop.errors import Issue, UserError
    from gpuop.profile.load import display

    project = Path(os.path.abspath(settings_path)).parent
    shown = str(to) if to is not None else str(DEFAULT)
    target = Path(os.path.abspath(to if to is not None else project / DEFAULT))
    out = Path(os.path.abspath(output))
    if not target.is_relative_to(project) or target.parent == target:
        raise UserError(Issue(shown, 0, 0, "", f"is outside the project ({project}); the report is written only "
                              "inside it"))
    if target.is_relative_to(out):
        raise UserError(Issue(shown, 0, 0, "", f"is inside the output folder {display(output)}, which Argo CD and "
                              "Flux apply and synth replaces; write the report elsewhere (default: report/index.html)"))
    if target.suffix != ".html":
        raise UserError(Issue(shown, 0, 0, "", "is not an .html file; the report is one HTML page"))
    here = project
    for part in target.relative_to(project).parts:
        here = here / part
        if os.path.islink(here) and here != target:
            raise UserError(Issue(display(here), 0, 0, "", "is a symlink; the report is never written through a link "
                                  "(remove it, gpuop creates the folder)"))
    return target
