"""The integrity of a compiled output (`gpuop validate DIST`, `gpuop check`): every folder and chart archive
its index.json names is there, and each archive is the one its Helm repository index serves.
"""

from __future__ import annotations

from pathlib import Path

from gpuop.errors import Issue, UserError
from gpuop.kube.folders import ENTRY_FOLDERS
from gpuop.pipeline.previous import read_index
from gpuop.profile.bounded import MAX_JSON_BYTES, read_bytes


# ---- integrity of a compiled output (gpuop validate DIST) -------------------------------------------

def output_issues(out: Path, only: frozenset | None = None) -> list[Issue]:
    """What makes an output folder unusable as a Helm repository and a GitOps source, beyond the
    objects themselves: index.json of kind Index, every cluster's folders and chart archive present, and
    charts/index.yaml listing every archive with its digest (an index with no entries is not valid).
    `only`: the clusters to check (the review gate's selection); None: every cluster."""
    import yaml

    from gpuop.outputs import charts as charts_mod

    out = Path(out)
    doc = read_index(out)
    issues = []
    served = {}
    idx_path = out / "charts" / "index.yaml"
    try:
        raw = read_bytes(idx_path, str(idx_path), limit=MAX_JSON_BYTES, what="a Helm repository index")
        idx = _served_index(raw, doc, only)
        for versions in ((idx or {}).get("entries") or {}).values():
            for e in versions or ():
                if isinstance(e, dict) and e.get("urls"):
                    served[e["urls"][0]] = e.get("digest")
    except (OSError, UserError, yaml.YAMLError, AttributeError) as exc:
        why = exc.issues[0].message if isinstance(exc, UserError) else (getattr(exc, "strerror", None) or exc)
        issues.append(Issue(str(idx_path), 0, 0, "", f"the Helm repository index is missing or unreadable "
                            f"({why}); run gpuop synth to rebuild it"))
        idx = None
    for i, c in enumerate(doc["clusters"]):
        if only is not None and c["name"] not in only:
            continue
        for key in ENTRY_FOLDERS:
            if not (out / c[key]).is_dir():
                issues.append(Issue(str(out / "index.json"), 0, 0, f"clusters[{i}].{key}",
                                    f"{c[key]} is missing; run gpuop synth to rebuild it"))
        archive = out / c["package"]
        if not archive.is_file():
            issues.append(Issue(str(out / "index.json"), 0, 0, f"clusters[{i}].package",
                                f"{c['package']} is missing; run gpuop synth to rebuild it from the version lock"))
            continue
        name = archive.name
        if idx is not None and name not in served:
            issues.append(Issue(str(idx_path), 0, 0, "", f"does not list {name}; run gpuop synth to rebuild it"))
        elif idx is not None and served[name] != charts_mod.digest(archive.read_bytes()):
            issues.append(Issue(str(idx_path), 0, 0, "", f"digest of {name} does not match the archive"))
    return issues


def _served_index(raw: bytes, doc: dict, only: frozenset | None):
    """charts/index.yaml parsed, or, for a selection, only the blocks of the selected clusters' charts when
    the file is laid out as gpuop prints it (each chart's block stands alone: outputs/charts.blocks); the
    other clusters are not checked, so their blocks need not be read (a fleet's index is megabytes)."""
    import yaml

    from gpuop.outputs import charts as charts_mod

    if only is not None:
        try:
            found = charts_mod.blocks(raw.decode("utf-8"))
        except UnicodeDecodeError:
            found = None
        if found is not None:
            names = {c["name"] for c in doc["clusters"] if c["name"] in only}     # a chart is named after its cluster
            mine = {n: found[n] for n in names if n in found}
            listed = {u for urls, _ in found.values() for u in urls}
            try:
                part = yaml.load("apiVersion: v1\nentries:\n" + "".join(b for _, b in mine.values()) if mine
                                 else "apiVersion: v1\nentries: {}\n", Loader=yaml.CSafeLoader)
            except yaml.YAMLError:
                part = None
            if isinstance(part, dict) and isinstance(part.get("entries"), dict):
                entries = part["entries"]
                # every other archive listed, its digest not needed: only the selected clusters are checked
                placeholder = [{"urls": [u], "digest": None} for u in sorted(listed)]
                return {"entries": {**{"": placeholder}, **entries}}
    return yaml.load(raw, Loader=yaml.CSafeLoader)
