"""`gpuop diff`: what a GitOps engine would add, change or delete, per cluster, before anything is
committed — the profiles compiled in memory against the last compiled output (a folder, or the
output folder at a git revision), as a semantic diff of the rendered objects with field paths, and
the chart version change it implies.

Lists whose items carry a `name` (containers, env, volumes, mounts) are matched by name, so a change
reads `spec.template.spec.containers[nvidia-driver-ctr].image`, not an index that shifts.
"""

from __future__ import annotations

import io
import json
import subprocess
import tarfile
from dataclasses import dataclass, field
from pathlib import Path

from gpuop.errors import Issue, UserError
from gpuop.kube.yamlio import load_all

Tree = dict  # relative path -> bytes


@dataclass
class ClusterDiff:
    name: str
    old_version: str | None
    new_version: str | None
    added: list = field(default_factory=list)      # object keys
    deleted: list = field(default_factory=list)
    changed: dict = field(default_factory=dict)    # object key -> [(path, old, new)]

    @property
    def empty(self) -> bool:
        return not (self.added or self.deleted or self.changed) and self.old_version == self.new_version


def tree_from_dir(folder: Path) -> Tree:
    if not folder.is_dir():
        return {}
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def tree_from_git(ref: str, folder: str) -> Tree:
    proc = subprocess.run(["git", "archive", "--format=tar", ref, "--", folder], capture_output=True)
    if proc.returncode != 0:
        raise UserError(Issue("--against", 0, 0, "", f"cannot read {folder}/ at git revision {ref!r}: "
                              f"{proc.stderr.decode(errors='replace').strip()}"))
    out: Tree = {}
    with tarfile.open(fileobj=io.BytesIO(proc.stdout)) as tar:
        for m in tar.getmembers():
            if m.isfile():
                out[str(Path(m.name).relative_to(folder))] = tar.extractfile(m).read()
    return out


def _objects(tree: Tree, folder: str) -> dict:
    objs = {}
    for path in sorted(tree):
        if path.startswith(folder + "/") and path.endswith(".yaml") and not path.endswith("kustomization.yaml"):
            for o in load_all(tree[path].decode() if isinstance(tree[path], bytes) else tree[path]):
                m = o.get("metadata", {})
                objs[f"{o['kind']} {m.get('namespace') + '/' if m.get('namespace') else ''}{m.get('name')}"] = o
    return objs


def _named(items) -> bool:
    return bool(items) and all(isinstance(i, dict) and "name" in i for i in items) \
        and len({i["name"] for i in items}) == len(items)


def field_diff(old, new, path: str = "") -> list[tuple[str, object, object]]:
    if isinstance(old, dict) and isinstance(new, dict):
        out = []
        for k in sorted(set(old) | set(new), key=str):
            p = f"{path}.{k}" if path else str(k)
            if k not in old:
                out.append((p, None, new[k]))
            elif k not in new:
                out.append((p, old[k], None))
            else:
                out += field_diff(old[k], new[k], p)
        return out
    if isinstance(old, list) and isinstance(new, list) and _named(old) and _named(new):
        o, n = {i["name"]: i for i in old}, {i["name"]: i for i in new}
        out = []
        for k in list(o) + [k for k in n if k not in o]:
            p = f"{path}[{k}]"
            if k not in o:
                out.append((p, None, n[k]))
            elif k not in n:
                out.append((p, o[k], None))
            else:
                out += field_diff(o[k], n[k], p)
        if not out and [i["name"] for i in old] != [i["name"] for i in new]:
            out.append((path + " (order)", [i["name"] for i in old], [i["name"] for i in new]))
        return out
    if isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        out = []
        for i, (a, b) in enumerate(zip(old, new)):
            out += field_diff(a, b, f"{path}[{i}]")
        return out
    return [] if old == new else [(path, old, new)]


def _index(tree: Tree) -> dict:
    raw = tree.get("index.json")
    return {c["name"]: c for c in json.loads(raw)["clusters"]} if raw else {}


def diff_trees(old: Tree, new: Tree) -> list[ClusterDiff]:
    oi, ni = _index(old), _index(new)
    out = []
    for name in sorted(set(oi) | set(ni)):
        d = ClusterDiff(name, oi.get(name, {}).get("chartVersion"), ni.get(name, {}).get("chartVersion"))
        before = _objects(old, f"{name}/manifests") if name in oi else {}
        after = _objects(new, f"{name}/manifests") if name in ni else {}
        d.added = sorted(set(after) - set(before))
        d.deleted = sorted(set(before) - set(after))
        for k in sorted(set(before) & set(after)):
            changes = field_diff(before[k], after[k])
            if changes:
                d.changed[k] = changes
        out.append(d)
    return out


def _short(v) -> str:
    text = json.dumps(v, sort_keys=True) if not isinstance(v, str) else v
    return text if len(text) <= 120 else text[:117] + "..."


def render(diffs: list[ClusterDiff]) -> str:
    lines = []
    for d in diffs:
        if d.old_version is None:
            head = f"cluster {d.name}: new, chart {d.new_version}"
        elif d.new_version is None:
            head = f"cluster {d.name}: removed (chart {d.old_version} and every object deleted)"
        elif d.empty:
            lines.append(f"cluster {d.name}: unchanged (chart {d.new_version})")
            continue
        else:
            head = f"cluster {d.name}: chart {d.old_version} -> {d.new_version}"
        lines.append(head)
        lines += [f"  + {k}" for k in d.added]
        lines += [f"  - {k}" for k in d.deleted]
        for k, changes in d.changed.items():
            lines.append(f"  ~ {k}")
            for path, old, new in changes:
                if old is None:
                    lines.append(f"      {path}: added {_short(new)}")
                elif new is None:
                    lines.append(f"      {path}: removed (was {_short(old)})")
                else:
                    lines.append(f"      {path}: {_short(old)} -> {_short(new)}")
    return "\n".join(lines) + "\n"
