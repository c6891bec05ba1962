"""Stage 1, load: read profile files with positions and resolve `extends`.

ruamel.yaml's round-trip loader keeps every key's line and column; `load_profile` returns the merged
document as plain Python values plus a `Positions` map from field path to (file, line, col), so later
stages can name the exact place of a problem even when the value came from a parent profile.

`extends: <relative path>` deep-merges the parent under the child: mappings merge key by key, the
child wins, lists replace. Chains are followed; a cycle or a missing parent is a located error.
Files whose name starts with `_` are partials: they may be extended but are not compiled on their own.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.error import MarkedYAMLError, YAMLError

from ..errors import Issue, UserError

Loc = tuple  # a field path: ('spec', 'nodePools', 0, 'name')


@dataclass(frozen=True)
class Positions:
    """Field path -> (file, line, col), 1-based. Falls back to the nearest located parent."""

    file: str
    table: dict = field(default_factory=dict)

    def of(self, loc: Loc) -> tuple[str, int, int]:
        loc = tuple(loc)
        while loc:
            if loc in self.table:
                return self.table[loc]
            loc = loc[:-1]
        return self.table.get((), (self.file, 1, 1))

    def issue(self, loc: Loc, message: str, severity: str = "error") -> Issue:
        from ..errors import format_path

        f, line, col = self.of(loc)
        return Issue(f, line, col, format_path(loc), message, severity)


@dataclass(frozen=True)
class LoadedProfile:
    path: Path                 # the profile file named on the command line
    data: dict                 # merged document, plain dicts/lists/scalars
    positions: Positions
    sources: tuple[Path, ...]  # the file and every parent it extends, child first


def display(path: Path) -> str:
    """A path as users see it in messages: relative to the working directory when inside it."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def _plain(node: Any, file: str, loc: Loc, table: dict) -> Any:
    """Convert ruamel nodes into plain values, recording positions of keys and items."""
    if isinstance(node, CommentedMap):
        out = {}
        for key, value in node.items():
            line, col = node.lc.key(key)
            table[loc + (key,)] = (file, line + 1, col + 1)
            out[key] = _plain(value, file, loc + (key,), table)
        return out
    if isinstance(node, CommentedSeq):
        out = []
        for i, value in enumerate(node):
            line, col = node.lc.item(i)
            table[loc + (i,)] = (file, line + 1, col + 1)
            out.append(_plain(value, file, loc + (i,), table))
        return out
    if isinstance(node, str):
        return str(node)
    if isinstance(node, bool) or node is None:
        return node
    if isinstance(node, int):
        return int(node)
    if isinstance(node, float):
        return float(node)
    return node


def _read(path: Path) -> tuple[dict, dict]:
    shown = display(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UserError(Issue(shown, 0, 0, "", "file not found"))
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(Issue(shown, 0, 0, "", f"cannot read: {exc}"))
    yaml = YAML(typ="rt")
    yaml.allow_duplicate_keys = False
    try:
        docs = [d for d in yaml.load_all(text) if d is not None]
    except MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line, col = (mark.line + 1, mark.column + 1) if mark else (0, 0)
        problem = " ".join(str(exc.problem or exc.context or "invalid YAML").split())
        raise UserError(Issue(shown, line, col, "", f"malformed YAML: {problem}"))
    except YAMLError as exc:
        raise UserError(Issue(shown, 0, 0, "", f"malformed YAML: {' '.join(str(exc).split())}"))
    if len(docs) != 1 or not isinstance(docs[0], CommentedMap):
        what = "more than one document" if len(docs) > 1 else "not a mapping"
        raise UserError(Issue(shown, 1, 1, "", f"a profile is one YAML mapping ({what})"))
    table: dict = {(): (shown, 1, 1)}
    return _plain(docs[0], shown, (), table), table


def merge(parent: Any, child: Any) -> Any:
    """Deep merge: mappings key by key (child wins), everything else (lists included) replaced."""
    if isinstance(parent, dict) and isinstance(child, dict):
        out = dict(parent)
        for key, value in child.items():
            out[key] = merge(parent[key], value) if key in parent else value
        return out
    return child


def _merge_positions(parent: dict, child: dict, child_data: dict) -> dict:
    """Positions follow the values: a path the child sets (or replaces wholesale) is the child's."""
    out = {}
    for loc, pos in parent.items():
        if not _overridden(loc, child_data):
            out[loc] = pos
    out.update(child)
    return out


def _overridden(loc: Loc, child: Any) -> bool:
    node = child
    for part in loc:
        if isinstance(node, dict) and part in node:
            node = node[part]
            if not isinstance(node, dict):
                return True
        else:
            return False
    return False


def load_profile(path: Path) -> LoadedProfile:
    chain: list[Path] = []
    data, table = _resolve(Path(path), chain)
    return LoadedProfile(Path(path), data, Positions(display(Path(path)), table), tuple(chain))


def _resolve(path: Path, chain: list[Path]) -> tuple[dict, dict]:
    real = path.resolve()
    data, table = _read(path)
    chain.append(real)
    parent_ref = data.pop("extends", None)
    if parent_ref is None:
        return data, table
    where = table[("extends",)]
    if not isinstance(parent_ref, str) or not parent_ref:
        raise UserError(Issue(*where, "extends", "must be a relative path to a parent profile"))
    parent = (path.parent / parent_ref)
    if parent.resolve() in chain:
        cycle = " -> ".join(display(p) for p in chain + [parent.resolve()])
        raise UserError(Issue(*where, "extends", f"cycle: {cycle}"))
    if not parent.is_file():
        raise UserError(Issue(*where, "extends", f"parent profile {parent_ref!r} not found "
                              f"(looked for {display(parent)})"))
    pdata, ptable = _resolve(parent, chain)
    merged = merge(pdata, data)
    return merged, _merge_positions(ptable, table, data)


def discover(paths: list[Path]) -> list[Path]:
    """Profile files named on the command line: files as given, folders scanned for *.yaml/*.yml
    (sorted, partials starting with `_` and non-profile files such as gitops settings skipped)."""
    found: list[Path] = []
    for p in paths:
        if p.is_dir():
            for f in sorted(p.iterdir()):
                if f.suffix in (".yaml", ".yml") and not f.name.startswith("_") and f.is_file():
                    found.append(f)
        else:
            found.append(p)
    return found
