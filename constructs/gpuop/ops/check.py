"""`gpuop check --against REV`: the whole review gate in one process, at the cost of the change.

1. Selection (pipeline/gate.select): the clusters whose inputs changed against the base revision, whose
   committed output differs from it in git, that are new or whose profile is gone; every other cluster is
   proven unchanged from the base without being compiled.
2. Review: what the pull request changes on those clusters and in the fleet objects, from the two
   committed trees (base in git, pull request on disk) — the semantic diff, destructive changes first,
   then what that does on the GPU nodes (ops/impact).
3. Stale check: the selected clusters compiled (no build cache) and compared byte for byte with the
   committed output, with the fleet-level files regenerated from the index.
4. Validation of the selected clusters and the fleet files (schemas, CEL, semantic rules, the Helm
   repository index).
`--all` checks every cluster (the nightly run). Exit codes: 0 the committed output is what the inputs
compile to and valid; 3 changes found (the output is stale: run synth and commit); 2 bad input (an
invalid output or profile); 1 a bug in gpuop.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path

from gpuop.errors import UserError

CHANGES_FOUND = 3


def _header(data: bytes, entries: dict | None) -> dict | None:
    """index.json without parsing its clusters again when they were parsed already (`entries`, by name, in
    file order): the document around the list (a few lines; tens of MB of clusters at 10,000)."""
    if entries is None:
        return None
    text = data.decode("utf-8", "replace")
    start = text.find('\n  "clusters": [\n')
    end = text.find("\n  ]", start)
    if start < 0 or end < 0:
        return None
    try:
        doc = json.loads(text[:start] + '\n  "clusters": []' + text[end + len("\n  ]"):])
    except ValueError:
        return None
    if not isinstance(doc, dict) or doc.get("clusters") != []:
        return None
    doc["clusters"] = list(entries.values())
    return doc


def _partial(files: dict, names: set, entries: dict | None = None) -> dict:
    """A tree restricted to `names`' folders and the fleet files, with index.json listing only `names` (the
    diff then shows no line for the clusters proven unchanged). `entries`: index.json's clusters as the
    selection parsed them from these very bytes."""
    out = {}
    for rel, data in files.items():
        top = rel.split("/", 1)[0]
        if rel == "index.json":
            try:
                doc = _header(data, entries) or json.loads(data)
                doc["clusters"] = [c for c in doc["clusters"] if c.get("name") in names]
                data = json.dumps(doc, indent=2, sort_keys=True).encode()
            except (ValueError, KeyError, TypeError, AttributeError):
                pass
        elif top in names or top == "fleet" or rel.startswith("charts/") or rel in ("versions.lock.json",):
            pass
        else:
            continue
        out[rel] = data
    return out


def review_trees(sel, output: Path) -> tuple[dict, dict, set]:
    """(base tree, committed tree, cluster names) of what the pull request changes."""
    from gpuop.pipeline import gate

    folder = output.as_posix().rstrip("/")
    names = set(sel.clusters) | set(sel.orphans) | (set(sel.base) - set(sel.current))
    charts = [p for p in sel.changed_paths if p.startswith("charts/")]
    rels = sorted(names) + ["fleet", "index.json", "versions.lock.json"] + charts
    old = {}
    if sel.base_rev is not None:
        old = {k[len(folder) + 1:]: v for k, v in gate.git_files(sel.base_rev, [f"{folder}/{r}" for r in rels]).items()}
    new = {}
    for r in rels:
        p = output / r
        if p.is_dir():
            new.update(gate._read_folder(output, r))
        elif p.is_file():
            new[r] = p.read_bytes()
    # the selection parsed both index.json files already (the base's blob, the output's file): not again
    return _partial(old, names, sel.base or None), _partial(new, names, sel.disk or None), names


def run(paths: list[Path], against: str | None, output: Path, settings_path: Path, everything: bool,
        timings: bool = False, then: Callable[[object], int] | None = None) -> int:
    """`timings` (-v): the time of each phase on stderr (bench/gate.py reads it). `then`: run on the selection
    once the output is proven current and valid, its exit code the gate's (`--rehearse`: cli/main.py)."""
    import time

    from gpuop.ops import impact
    from gpuop.ops.diff import diff_trees, render
    from gpuop.pipeline import gate
    from gpuop.pipeline.write import output_issues
    from gpuop.profile.settings import load_settings
    from gpuop.verify.output import validate_output

    marks = [("start", time.perf_counter())]
    settings = load_settings(settings_path)
    sel = gate.select(paths, output, settings, against, everything)
    marks.append(("select", time.perf_counter()))
    base = f"{against} ({sel.base_rev[:12]})" if sel.base_rev else "no base"
    print(f"gpuop check against {base}: {len(sel.clusters)} cluster(s) to check, {sel.proven} proven unchanged "
          "from the base without compiling", file=sys.stderr)
    for name, why in sorted(sel.clusters.items()):
        print(f"  {name}: {why}", file=sys.stderr)
    old, new, _ = review_trees(sel, output)
    from gpuop.ops import moves
    moves.refuse(old, new, paths)             # a move between releases NVIDIA does not support: located exit 2
    diffs = diff_trees(old, new, settings.gitops.path.rstrip("/"))
    sys.stdout.write(render(diffs))
    sys.stdout.write(impact.render(impact.impact(old, new)))
    sys.stdout.flush()
    marks.append(("review", time.perf_counter()))
    stale, _ = gate.verify(sel, paths, output, settings)
    marks.append(("compile", time.perf_counter()))
    only = frozenset(sel.clusters)
    # the tree itself: an entry index.json does not list, or a link, found among the paths git saw change (the base's
    # tree is trusted) or in the compiled clusters' folders: bad input, not only stale (gate._unwritten)
    issues = gate.bad_issues(stale, output)
    issues = issues or output_issues(output, only=only)
    issues = issues or validate_output(output, only=only)
    marks.append(("validate", time.perf_counter()))
    if timings:
        print("gpuop: check timings: " + json.dumps({name: round(t - marks[i][1], 3)
                                                      for i, (name, t) in enumerate(marks[1:])}), file=sys.stderr)
    if issues:
        raise UserError(issues)
    if stale:
        for issue in gate.stale_issues(stale, output):
            print(issue, file=sys.stderr)
        print(f"gpuop: {output} is stale: {len(stale)} file(s) are not what the profiles compile to; run "
              f"`gpuop synth` and commit {output}", file=sys.stderr)
        return CHANGES_FOUND
    print(f"gpuop: {output} is what the profiles compile to and valid ({len(sel.clusters)} cluster(s) compiled and "
          f"validated, {sel.proven} proven from the base)", file=sys.stderr)
    return then(sel) if then is not None else 0
