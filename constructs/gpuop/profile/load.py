"""Stage 1, load: read profile files with positions and resolve `extends`.

ruamel.yaml's round-trip loader keeps every key's line and column; `load_profile` returns the merged
document as plain Python values plus a `Positions` map from field path to (file, line, col), so later
stages can name the exact place of a problem even when the value came from a parent profile.

`extends: <relative path>` deep-merges the parent under the child: mappings merge key by key, the
child wins, lists replace. Chains are followed; a cycle or a missing parent is a located error.
Files whose name starts with `_` are partials: they may be extended but are not compiled on their own.
"""

from __future__ import annotations

import copy

import datetime
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq, CommentedSet, TaggedScalar
from ruamel.yaml.error import MarkedYAMLError, YAMLError

from gpuop.errors import Issue, UserError

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
        f, line, col = self.of(loc)
        return Issue(f, line, col, field_path(loc), message, severity)


_PLAIN_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*$")


def field_path(loc: Loc) -> str:
    """('spec', 'nodePools', 0, 'mig', 'layout', '1g.10gb') -> 'spec.nodePools[0].mig.layout["1g.10gb"]'.

    Keys that are not plain names (dots, slashes, spaces, newlines...) are quoted, so a path is always
    one unambiguous line, whatever the profile's keys hold."""
    out = ""
    for part in loc:
        if isinstance(part, int) and not isinstance(part, bool):
            out += f"[{part}]"
        elif isinstance(part, str) and _PLAIN_KEY.match(part):
            out += ("." if out else "") + part
        else:
            out += f"[{json.dumps(str(part))}]"
    return out


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


YAML_TAGS = ("tag:yaml.org,2002:str", "tag:yaml.org,2002:int", "tag:yaml.org,2002:float",
             "tag:yaml.org,2002:bool", "tag:yaml.org,2002:null", "tag:yaml.org,2002:map", "tag:yaml.org,2002:seq")


def _tag(node: Any) -> str | None:
    tag = getattr(node, "tag", None)
    value = getattr(tag, "value", tag)
    return value if isinstance(value, str) and value not in YAML_TAGS else None


def _plain(node: Any, file: str, loc: Loc, table: dict, problems: list | None = None) -> Any:
    """Convert ruamel nodes into plain values (dict, list, str, int, float, bool, None), recording
    the position of every key and item. Anything a profile cannot hold (non-string keys, custom tags,
    sets, binary) is added to `problems` as a located Issue; pass a list to collect them."""
    problems = [] if problems is None else problems

    def refuse(where: tuple[str, int, int], what: str) -> None:
        problems.append(Issue(where[0], where[1], where[2], field_path(loc), what))

    here = table.get(loc, (file, 1, 1))
    tag = _tag(node)
    if tag is not None:
        refuse(here, f"YAML tag {tag} is not supported; remove it (profiles hold plain mappings, lists, "
                     "strings, numbers and booleans)")
        return None
    if isinstance(node, CommentedMap):
        out = {}
        for key, value in node.items():
            pos = _key_position(node, key)
            where = (file, pos[0] + 1, pos[1] + 1) if pos else here
            if not isinstance(key, str) or _tag(key) is not None:
                shown = _yaml_text(key)
                problems.append(Issue(where[0], where[1], where[2], field_path(loc), f"key {shown} is not a "
                                      f"string; keys are names: quote it (\"{shown}\")"))
                continue
            key = str(key)
            table[loc + (key,)] = where
            out[key] = _plain(value, file, loc + (key,), table, problems)
        return out
    if isinstance(node, CommentedSeq):
        out = []
        for i, value in enumerate(node):
            line, col = node.lc.item(i)
            table[loc + (i,)] = (file, line + 1, col + 1)
            out.append(_plain(value, file, loc + (i,), table, problems))
        return out
    if isinstance(node, TaggedScalar):  # only explicit standard tags reach here, e.g. `!!str 5`
        return str(node.value)
    if isinstance(node, str):
        return str(node)
    if isinstance(node, bool) or node is None:
        return node
    if isinstance(node, int):
        return int(node)
    if isinstance(node, float):
        return float(node)
    if isinstance(node, (datetime.date, datetime.datetime)):
        return node  # refused with a hint to quote it by the field's own type check
    what = {bytes: "binary data", CommentedSet: "a set"}.get(type(node), type(node).__name__)
    refuse(here, f"{what} is not supported here; write a plain string, number, list or mapping")
    return None


def _key_position(node: CommentedMap, key: Any) -> tuple[int, int] | None:
    """0-based (line, col) of a key, also for keys pulled in through a YAML merge key (`<<: *x`)."""
    data = getattr(node.lc, "data", None) or {}
    if key in data:
        return data[key][0], data[key][1]
    for item in getattr(node, "merge", None) or []:  # (index, map) pairs or maps, by ruamel version
        merged = item[1] if isinstance(item, tuple) else item
        if isinstance(merged, CommentedMap) and key in merged:
            return _key_position(merged, key)
    return None


def _yaml_text(value: Any) -> str:
    """A scalar as the user wrote it, roughly (for messages)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (datetime.date, datetime.datetime)):
        return value.isoformat()
    if isinstance(value, (tuple, list)):
        return "[" + ", ".join(_yaml_text(v) for v in value) + "]"
    return str(value)


def _yaml_problem(shown: str, exc: MarkedYAMLError) -> Issue:
    """A ruamel parse error as one located issue that says what is wrong in plain words."""
    mark = exc.problem_mark or exc.context_mark
    line, col = (mark.line + 1, mark.column + 1) if mark else (1, 1)
    problem = " ".join(str(exc.problem or exc.context or "invalid YAML").split())
    context = " ".join(str(exc.context or "").split())
    cm = exc.context_mark
    opened = f"line {cm.line + 1}, column {cm.column + 1}" if cm else ""
    problem = re.sub(r"\(('[^']*'),\)", r"\1", problem).replace("'<stream end>'", "the end of the file")
    found = problem.rpartition(" but ")[2].replace("got ", "").replace("found ", "")
    found = {"':'": "a ':'", "'<scalar>'": "a value", "'<block mapping start>'": "a new mapping",
             "'?'": "a mapping key", "'<block sequence start>'": "a list", "'-'": "a list item"}.get(found, found)
    if problem.startswith("expected ',' or '}'") or problem.startswith("expected ',' or ']'"):
        bracket, closer = ("{", "}") if "}" in problem else ("[", "]")
        text = (f"the '{bracket}' at {opened} is not closed, or a ',' is missing: expected ',' or '{closer}' "
                f"here, found {found}") if opened else f"expected ',' or '{closer}' here, found {found}"
    elif problem.startswith("expected <block end>"):
        what = "list" if "collection" in context or "sequence" in context else "mapping"
        text = (f"bad indentation: found {found} that does not line up with the {what} starting at "
                f"{opened}; entries of one {what} start in the same column (indent with spaces)")
    elif problem.startswith("expected '<document start>'"):
        text = (f"bad indentation: found {found} left of the column the document's first key starts in; "
                "top-level keys start in the same column")
    elif problem.startswith("expected the node content"):
        text = f"a value is missing here, found {found}; is a '[' or '{{' left open?" if found == \
            "the end of the file" else f"a value is missing here, found {found}"
    elif problem.startswith("mapping values are not allowed"):
        text = ("unexpected ':' here; put a nested mapping on its own lines below its key, indented, "
                "and quote a value that contains ': '")
    elif "'\\t'" in problem:
        text = "tab character; YAML indents with spaces only"
    elif "quoted scalar" in context:
        text = f"the quote at {opened} is not closed (found {found})" if opened else problem
    elif problem.startswith("found duplicate key"):
        key = problem.split('"')[1] if '"' in problem else "?"
        text = f"duplicate key {key!r} in the mapping starting at {opened}; each key may appear once"
    elif context and opened and cm is not exc.problem_mark and (cm.line, cm.column) != (line - 1, col - 1):
        text = f"{problem} ({context} at {opened})"
    else:
        text = problem
    return Issue(shown, line, col, "", f"malformed YAML: {text}")


def read_document(shown: str, text: str, what: str = "a profile") -> tuple[Any, dict]:
    """Parse one YAML document with positions. Returns (plain data, position table);
    raises UserError with every located problem (bad YAML, non-string keys, custom tags, not a mapping)."""
    yaml = YAML(typ="rt")
    yaml.allow_duplicate_keys = False
    try:
        docs = [d for d in yaml.load_all(text) if d is not None]
    except MarkedYAMLError as exc:
        raise UserError(_yaml_problem(shown, exc))
    except YAMLError as exc:
        raise UserError(Issue(shown, 1, 1, "", f"malformed YAML: {' '.join(str(exc).split())}"))
    if not docs:
        raise UserError(Issue(shown, 1, 1, "", f"the file is empty; {what} is one YAML mapping"))
    if len(docs) > 1:
        raise UserError(Issue(shown, 1, 1, "", f"more than one YAML document ('---'); {what} is one YAML mapping"))
    if not isinstance(docs[0], CommentedMap):
        got = "a list" if isinstance(docs[0], CommentedSeq) else f"the value {_yaml_text(docs[0])!r}"
        raise UserError(Issue(shown, 1, 1, "", f"the document is {got}; {what} is one YAML mapping of fields"))
    table: dict = {(): (shown, 1, 1)}
    problems: list[Issue] = []
    data = _plain(docs[0], shown, (), table, problems)
    if problems:
        raise UserError(problems)
    return data, table


def _read(path: Path) -> tuple[dict, dict]:
    shown = display(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UserError(Issue(shown, 0, 0, "", "file not found; name a profile file or a folder of profiles"))
    except IsADirectoryError:
        raise UserError(Issue(shown, 0, 0, "", "is a folder, not a profile file"))
    except UnicodeDecodeError as exc:
        raise UserError(Issue(shown, 0, 0, "", f"cannot read: not UTF-8 text ({exc.reason} at byte {exc.start})"))
    except OSError as exc:
        raise UserError(Issue(shown, 0, 0, "", f"cannot read: {exc.strerror or exc}"))
    key = (shown, text)
    if key not in _parsed:     # parents are shared by many profiles: parse each once per run
        if len(_parsed) > 4096:
            _parsed.clear()
        _parsed[key] = read_document(shown, text)
    data, table = _parsed[key]
    return copy.deepcopy(data), dict(table)


_parsed: dict = {}


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
    if not isinstance(parent_ref, str) or not parent_ref.strip():
        raise UserError(Issue(*where, "extends", f"must be the relative path of a parent profile, e.g. "
                              f"_base.yaml (got {_yaml_text(parent_ref)!r})"))
    parent = (path.parent / parent_ref)
    if parent.resolve() in chain:
        cycle = " -> ".join(display(p) for p in chain + [parent.resolve()])
        raise UserError(Issue(*where, "extends", f"cycle {cycle}; a profile cannot extend itself, "
                              "directly or through its parents"))
    if parent.is_dir():
        raise UserError(Issue(*where, "extends", f"parent profile {parent_ref!r} is a folder "
                              f"({display(parent)}); name a profile file, relative to {display(path.parent)}"))
    if not parent.is_file():
        raise UserError(Issue(*where, "extends", f"parent profile {parent_ref!r} not found (looked for "
                              f"{display(parent)}); the path is relative to the extending profile's folder"))
    pdata, ptable = _resolve(parent, chain)
    merged = merge(pdata, data)
    return merged, _merge_positions(ptable, table, data)


def discover(paths: list[Path]) -> list[Path]:
    """Profile files named on the command line: files as given, folders scanned for *.yaml/*.yml
    (sorted, partials starting with `_` and non-profile files such as gitops settings skipped)."""
    found: list[Path] = []
    seen: set[Path] = set()
    for p in paths:
        if p.is_dir():
            candidates = [f for f in sorted(p.iterdir())
                          if f.suffix in (".yaml", ".yml") and not f.name.startswith("_") and f.is_file()]
        else:
            candidates = [p]
        for f in candidates:  # a file named twice (or via a folder and by name) is compiled once
            real = f.resolve()
            if real not in seen:
                seen.add(real)
                found.append(f)
    return found
