"""Stage 1, load: read profile files with positions and resolve `extends`.

ruamel.yaml's round-trip loader keeps every key's line and column; `load_profile` returns the merged
document as plain Python values plus a `Positions` map from field path to (file, line, col), so later
stages can name the exact place of a problem even when the value came from a parent profile.

An ordinary document is parsed by libyaml instead (profile/fastyaml.py: the same values, ~40x faster)
and its positions are computed by ruamel only when a message needs one: `Positions` builds its table on
first use. Anything unusual (anchors, tags, merge keys, duplicate keys, errors...) is parsed by ruamel
right away, as before, so every refusal keeps its words.

`extends: <relative path>` deep-merges the parent under the child: mappings merge key by key, the
child wins, lists replace. Chains are followed; a cycle or a missing parent is a located error.
Files whose name starts with `_` are partials: they may be extended but are not compiled on their own.

Input is bounded before and while it is parsed (docs/input-limits.md has every limit and why): a file
is opened without blocking and read only when fstat says it is a regular file no bigger than
MAX_FILE_BYTES; the nesting depth and the items per collection are counted on libyaml's token stream
(iterative, so a 5,000-deep `[[[...` is refused before ruamel's recursive composer sees it); YAML
aliases are expanded against a budget of MAX_VALUES values (a "billion laughs" stops at the budget).
A parent must be a regular file inside the profiles tree (`profiles_root`), checked before it is
opened, and no message ever quotes the content of a file that is not a profile.
"""

from __future__ import annotations

import datetime
import json
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq, CommentedSet, TaggedScalar
from ruamel.yaml.error import MarkedYAMLError, YAMLError
from ruamel.yaml.reader import ReaderError

from gpuop.errors import Issue, UserError, field_path
from gpuop.profile import bounded
from gpuop.profile import fastyaml

Loc = tuple  # a field path: ('spec', 'nodePools', 0, 'name')

# ---- input limits (docs/input-limits.md says why each value) -------------------------------------
MAX_FILE_BYTES = 256 * 1024   # per profile or settings file; the largest example is 2.5 KB
MAX_DEPTH = 32                # nested mappings/lists; the deepest profile field is 7 levels down
MAX_ITEMS = 1000              # entries of one mapping or list, checked on tokens before parsing
MAX_VALUES = 100_000          # values of one document after YAML aliases are expanded
MAX_EXTENDS = 16              # parents in one `extends` chain
MAX_NAME_BYTES = 255          # one component of an `extends` path (NAME_MAX on Linux)
MAX_PATH_BYTES = 1024         # a whole `extends` path


class Positions:
    """Field path -> (file, line, col), 1-based. Falls back to the nearest located parent.

    The table is given, or built on first use by `build` (a function returning it): a profile that
    compiles without a message never needs its positions, and computing them is most of a parse."""

    __slots__ = ("file", "_table", "_build")

    def __init__(self, file: str, table: dict | None = None, build: Callable[[], dict] | None = None):
        self.file = file
        self._table = table if table is not None or build is not None else {}
        self._build = build if table is None else None

    @property
    def table(self) -> dict:
        if self._table is None:
            self._table, self._build = self._build(), None
        return self._table

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Positions) and (self.file, self.table) == (other.file, other.table)

    __hash__ = None   # the table is a dict

    def __repr__(self) -> str:
        return f"Positions(file={self.file!r}, table={self.table!r})"

    def __reduce__(self):   # pickled with its table: the builder may be a closure
        return Positions, (self.file, self.table)

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


@dataclass(frozen=True)
class LoadedProfile:
    path: Path                 # the profile file named on the command line
    data: dict                 # merged document, plain dicts/lists/scalars
    positions: Positions
    sources: tuple[Path, ...]  # the file and every parent it extends, child first


def display(path: Path) -> str:
    """A path as users see it in messages: relative to the working directory when inside it."""
    # lexical, not resolved: a profile that is a symlink is shown under its own name (a dangling one too)
    absolute = Path(os.path.abspath(path))
    try:
        shown = str(absolute.relative_to(os.path.abspath(Path.cwd())))
    except ValueError:  # outside the working directory
        shown = str(path)
    # file names are bytes on disk: undecodable ones (surrogate escapes) are shown escaped, not crash the print
    return shown.encode("utf-8", "backslashreplace").decode("utf-8")


YAML_TAGS = ("tag:yaml.org,2002:str", "tag:yaml.org,2002:int", "tag:yaml.org,2002:float",
             "tag:yaml.org,2002:bool", "tag:yaml.org,2002:null", "tag:yaml.org,2002:map", "tag:yaml.org,2002:seq")


def _tag(node: Any) -> str | None:
    tag = getattr(node, "tag", None)
    value = getattr(tag, "value", tag)
    return value if isinstance(value, str) and value not in YAML_TAGS else None


class _TooManyValues(Exception):
    """Raised by `_plain` when alias expansion passes MAX_VALUES; carries where it happened."""

    def __init__(self, where: tuple[str, int, int], loc: Loc):
        super().__init__(where)
        self.where, self.loc = where, loc


_SURROGATE = re.compile(r"[\ud800-\udfff]")


def _surrogate_problem(text: str) -> str | None:
    """A lone UTF-16 surrogate (from a "\\ud800" escape) cannot be written as UTF-8: say where it is."""
    m = _SURROGATE.search(text)
    if m is None:
        return None
    return (f"contains a lone UTF-16 surrogate (U+{ord(m.group()):04X}) at character {m.start() + 1}, which is "
            "not a character and cannot be written as UTF-8; remove the \\u escape or write the whole character")


def _plain(node: Any, file: str, loc: Loc, table: dict, problems: list | None = None,
           budget: list | None = None) -> Any:
    """Convert ruamel nodes into plain values (dict, list, str, int, float, bool, None), recording
    the position of every key and item. Anything a profile cannot hold (non-string keys, custom tags,
    sets, binary, lone surrogates) is added to `problems` as a located Issue; pass a list to collect them.
    `budget` ([values left]) bounds alias expansion: an alias is a reference, so a "billion laughs" is
    small as nodes but huge as values; _TooManyValues stops it at MAX_VALUES."""
    problems = [] if problems is None else problems
    budget = [MAX_VALUES] if budget is None else budget
    here = table.get(loc, (file, 1, 1))
    budget[0] -= 1
    if budget[0] < 0:
        raise _TooManyValues(here, loc)

    def refuse(where: tuple[str, int, int], what: str) -> None:
        problems.append(Issue(where[0], where[1], where[2], field_path(loc), what))

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
            bad = _surrogate_problem(key)
            if bad:  # the key cannot even be shown in a field path: report it on its parent
                problems.append(Issue(where[0], where[1], where[2], field_path(loc), f"a key {bad}"))
                continue
            table[loc + (key,)] = where
            out[key] = _plain(value, file, loc + (key,), table, problems, budget)
        return out
    if isinstance(node, CommentedSeq):
        out = []
        for i, value in enumerate(node):
            line, col = node.lc.item(i)
            table[loc + (i,)] = (file, line + 1, col + 1)
            out.append(_plain(value, file, loc + (i,), table, problems, budget))
        return out
    if isinstance(node, TaggedScalar):  # only explicit standard tags reach here, e.g. `!!str 5`
        node = str(node.value)
    if isinstance(node, str):
        bad = _surrogate_problem(node)
        if bad:
            refuse(here, f"the string {bad}")
            return None
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


def _unreadable_scalar(text: str) -> tuple[int, int]:
    """1-based position of the first plain scalar ruamel tags as a number that Python cannot convert."""
    try:
        stack = [YAML(typ="rt").compose(text)]
    except Exception:  # noqa: BLE001 - only used to improve a location; fall back to the file's start
        return 1, 1
    while stack:
        node = stack.pop()
        value = getattr(node, "value", None)
        if isinstance(value, list):
            for item in reversed(value):
                stack.extend(reversed(item) if isinstance(item, tuple) else [item])
        elif isinstance(value, str) and str(getattr(node, "tag", "")).endswith(("float", "int")):
            try:
                float(value.replace("_", "")) if "float" in str(node.tag) else int(value.replace("_", ""), 0)
            except ValueError:
                return node.start_mark.line + 1, node.start_mark.column + 1
    return 1, 1


def _check_structure(shown: str, text: str) -> None:
    """Nesting depth and items per collection, counted on libyaml's token stream before ruamel parses:
    ruamel's composer recurses once per level (a 5,000-deep `[[[...` is a RecursionError there) and
    builds every item of a 100,000-item list before anything could count them. libyaml's scanner is
    iterative C. A token error stops the count; ruamel then reports the malformed YAML in its words."""
    import yaml as pyyaml

    opening = (pyyaml.BlockMappingStartToken, pyyaml.BlockSequenceStartToken, pyyaml.FlowMappingStartToken,
               pyyaml.FlowSequenceStartToken)
    closing = (pyyaml.BlockEndToken, pyyaml.FlowMappingEndToken, pyyaml.FlowSequenceEndToken)
    items = (pyyaml.KeyToken, pyyaml.BlockEntryToken, pyyaml.FlowEntryToken)
    counts: list[int] = [0]

    def too_deep(m) -> UserError:
        return UserError(Issue(shown, m.line + 1, m.column + 1, "", f"nested more than {MAX_DEPTH} levels deep "
                               f"(limit {MAX_DEPTH}); a profile's deepest field is 7 levels down"))
    try:
        for token in pyyaml.scan(text, Loader=pyyaml.CSafeLoader):
            if isinstance(token, opening):
                if len(counts) > MAX_DEPTH:
                    raise too_deep(token.start_mark)
                counts.append(0)
            elif isinstance(token, closing):
                if len(counts) > 1:
                    counts.pop()
            elif isinstance(token, items):
                counts[-1] += 1
                if counts[-1] > MAX_ITEMS:
                    m = token.start_mark
                    raise UserError(Issue(shown, m.line + 1, m.column + 1, "", f"more than {MAX_ITEMS} entries in "
                                          f"one mapping or list (limit {MAX_ITEMS})"))
    except pyyaml.MarkedYAMLError as exc:
        # libyaml stops at 1,000 levels while it still looks ahead for a key, before yielding the tokens
        if "nesting depth" in str(exc.problem) and exc.problem_mark is not None:
            raise too_deep(exc.problem_mark)
    except pyyaml.YAMLError:
        return


def read_document(shown: str, text: str, what: str = "a profile") -> tuple[Any, dict]:
    """Parse one YAML document with positions. Returns (plain data, position table);
    raises UserError with every located problem (bad YAML, non-string keys, custom tags, not a mapping)."""
    _check_structure(shown, text)
    return _ruamel_document(shown, text, what)


def parse_document(shown: str, text: str, what: str = "a profile") -> tuple[Any, Callable[[], dict]]:
    """As read_document, but the position table comes as a function that computes it on first call
    (then keeps it). An ordinary document is read by libyaml (fastyaml.load) and ruamel parses the same
    text again only for positions; any other document is read by ruamel now, problems raised as before."""
    _check_structure(shown, text)
    data = fastyaml.load(text, MAX_VALUES)
    if data is None:
        data, table = _ruamel_document(shown, text, what)
        return data, lambda: table
    return data, _LaterTable(shown, text, what)


class _LaterTable:
    """The position table of a document fastyaml read: ruamel computes it from the same text when asked.
    (Were ruamel to refuse a text fastyaml read, its UserError would surface there; tests/test_fast_parse.py
    checks the fast path never reads what ruamel refuses.)"""

    def __init__(self, shown: str, text: str, what: str):
        self.args: tuple | None = (shown, text, what)
        self.table: dict = {}

    def __call__(self) -> dict:
        if self.args is not None:
            self.table, self.args = _ruamel_document(*self.args)[1], None
        return self.table


def _ruamel_document(shown: str, text: str, what: str) -> tuple[Any, dict]:
    """read_document after the structure check: ruamel's round-trip parse, values and positions."""
    yaml = YAML(typ="rt")
    yaml.allow_duplicate_keys = False
    try:
        docs = [d for d in yaml.load_all(text) if d is not None]
    except MarkedYAMLError as exc:
        raise UserError(_yaml_problem(shown, exc))
    except ReaderError as exc:  # a control character: locate it (the message names only its code point)
        line, col = bounded.line_col(text, exc.position)
        raise UserError(Issue(shown, line, col, "", f"character #x{exc.character:04x} is not allowed in YAML "
                              "(control characters other than tab and newline are refused)"))
    except YAMLError as exc:
        raise UserError(Issue(shown, 1, 1, "", f"malformed YAML: {' '.join(str(exc).split())}"))
    except (ValueError, TypeError, OverflowError, IndexError) as exc:
        # ruamel resolves some plain scalars (e.g. `._`, `0x_`) as a number it then cannot convert: locate the value
        line, col = _unreadable_scalar(text)
        why = "no digits" if isinstance(exc, IndexError) else exc   # ruamel indexes past `0x_`, `-_`
        raise UserError(Issue(shown, line, col, "", f"malformed YAML: a value YAML reads as a number cannot be "
                              f"converted ({why}); put the value in quotes"))
    if not docs:
        raise UserError(Issue(shown, 1, 1, "", f"the file is empty; {what} is one YAML mapping"))
    if len(docs) > 1:
        raise UserError(Issue(shown, 1, 1, "", f"more than one YAML document ('---'); {what} is one YAML mapping"))
    if not isinstance(docs[0], CommentedMap):
        # never echo the value: the file may be something else entirely (/etc/passwd reads as one string)
        got = "a list" if isinstance(docs[0], CommentedSeq) else "a single " + (
            "string" if isinstance(docs[0], str) else "number" if isinstance(docs[0], (int, float)) else "value")
        raise UserError(Issue(shown, 1, 1, "", f"the document is {got}; {what} is one YAML mapping of fields"))
    table: dict = {(): (shown, 1, 1)}
    problems: list[Issue] = []
    try:
        data = _plain(docs[0], shown, (), table, problems)
    except _TooManyValues as exc:
        top = exc.loc[:1]   # the top-level field whose aliases blew up: its key line is where to look
        raise UserError(Issue(*table.get(top, exc.where), field_path(top), f"the document holds more than {MAX_VALUES} "
                              f"values once its YAML aliases are expanded (limit {MAX_VALUES}); an alias "
                              "repeats its anchor's whole content, so aliases of aliases multiply"))
    if problems:
        raise UserError(problems)
    return data, table


def file_problem(path: Path) -> str | None:
    """Why `path` cannot be a profile file, from stat only (profile/bounded.py `followed_problem`); None when it
    is a regular file within the limit."""
    return bounded.followed_problem(path, what="a profile file", limit=MAX_FILE_BYTES)


def read_bytes(path: Path, shown: str | None = None) -> bytes:
    """The bytes of a profile (or settings) file: profile/bounded.py's reader, links followed, at most
    MAX_FILE_BYTES, or UserError naming the file (never its content)."""
    return bounded.read_bytes(path, display(path) if shown is None else shown, limit=MAX_FILE_BYTES,
                              what="a profile file", follow=True,
                              missing="file not found; name a profile file or a folder of profiles")


def decode(shown: str, raw: bytes) -> str:
    """UTF-8 text, or UserError located at the first byte that is not UTF-8, saying how to fix it."""
    return bounded.decode(shown, raw, advise=True)


def _read(path: Path) -> tuple[dict, dict, Callable[[], dict]]:
    """(a copy of the file's data to change, the data as parsed, its position table on call)."""
    shown = display(path)
    text = decode(shown, read_bytes(path, shown))
    key = (shown, text)
    if key not in _parsed:     # parents are shared by many profiles: parse each once per run
        if len(_parsed) > 4096:
            _parsed.clear()
        _parsed[key] = parse_document(shown, text)
    data, table = _parsed[key]
    return _copy(data), data, table


_parsed: dict = {}


def _copy(value: Any) -> Any:
    """A deep copy of plain data (dicts, lists, immutable scalars), several times faster than copy.deepcopy."""
    if type(value) is dict:
        return {k: _copy(v) for k, v in value.items()}
    if type(value) is list:
        return [_copy(v) for v in value]
    return value


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


def profiles_root(profile: Path) -> Path:
    """The profiles tree a profile may extend files from: the top folder below the working directory
    that holds the profile (profiles/ for profiles/teams/a.yaml run from the project), the working
    directory for a profile directly in it, else the profile's own folder. Resolved, so symlinks are
    judged by where they lead, never by where they sit."""
    here = Path(os.path.realpath(profile)).parent
    cwd = Path(os.path.realpath(Path.cwd()))
    if here == cwd:
        return cwd
    if cwd in here.parents:
        return cwd / here.relative_to(cwd).parts[0]
    return here


def parent_problem(child: Path, ref: Any, root: Path) -> str | None:
    """Why `extends: ref` of `child` may not be followed, checked before anything is opened; None if it
    names a regular file inside `root`. Never mentions the target's content."""
    if not isinstance(ref, str) or not ref.strip():
        return f"must be the relative path of a parent profile, e.g. _base.yaml (got {_yaml_text(ref)!r})"
    shown = json.dumps(ref)[1:-1]   # escapes NUL, newlines and surrogates, so the message stays one printable line
    if "\0" in ref or _SURROGATE.search(ref):
        return f"parent path '{shown}' holds a NUL byte or a lone surrogate; name a profile file"
    if len(ref.encode("utf-8", "surrogatepass")) > MAX_PATH_BYTES or any(
            len(part.encode("utf-8")) > MAX_NAME_BYTES for part in ref.split("/")):
        return (f"parent path is too long (limits: {MAX_NAME_BYTES} bytes per name, {MAX_PATH_BYTES} in all); "
                "name a profile file")
    if os.path.isabs(ref):
        return f"parent path '{shown}' is absolute; name a profile file relative to {display(child.parent)}"
    target = child.parent / ref
    real = Path(os.path.realpath(target))
    if real != root and root not in real.parents:
        return (f"parent profile '{shown}' is outside the profiles tree {display(root)}/; a profile may only "
                "extend files inside it (symlinks are followed before this check)")
    problem = file_problem(target)
    if problem == "file not found":
        return (f"parent profile '{shown}' not found (looked for {display(target)}); the path is relative to "
                "the extending profile's folder")
    if problem == "is a folder, not a profile file":
        return (f"parent profile '{shown}' is a folder ({display(target)}); name a profile file, relative to "
                f"{display(child.parent)}")
    if problem:
        return f"parent profile '{shown}' {problem}"
    return None


def load_profile(path: Path) -> LoadedProfile:
    chain: list[Path] = []
    data, table = _resolve(Path(path), chain, profiles_root(Path(path)))
    return LoadedProfile(Path(path), data, Positions(display(Path(path)), build=table), tuple(chain))


def _resolve(path: Path, chain: list[Path], root: Path) -> tuple[dict, Callable[[], dict]]:
    """The merged data of a profile and its parents, and a function computing their merged positions."""
    real = Path(os.path.realpath(path))
    data, parsed, table = _read(path)
    chain.append(real)
    parent_ref = data.pop("extends", None)
    if parent_ref is None:
        return data, lambda: dict(table())

    def where() -> tuple[str, int, int]:   # for a message only: it computes the file's positions
        return table()[("extends",)]

    if isinstance(parent_ref, str) and parent_ref.strip() and "\0" not in parent_ref and not os.path.isabs(parent_ref):
        parent = path.parent / parent_ref
        try:
            real_parent = Path(os.path.realpath(parent))
        except (OSError, ValueError):
            real_parent = None
        if real_parent in chain:
            cycle = " -> ".join(display(p) for p in chain + [real_parent])
            raise UserError(Issue(*where(), "extends", f"cycle {cycle}; a profile cannot extend itself, "
                                  "directly or through its parents"))
    problem = parent_problem(path, parent_ref, root)
    if problem:
        raise UserError(Issue(*where(), "extends", problem))
    if len(chain) >= MAX_EXTENDS:
        raise UserError(Issue(*where(), "extends", f"more than {MAX_EXTENDS} parents in one extends chain "
                              f"(limit {MAX_EXTENDS})"))
    pdata, ptable = _resolve(path.parent / parent_ref, chain, root)
    merged = merge(pdata, data)
    # `parsed` is never handed out (only copies are), so it is still `data` as read, `extends` aside
    return merged, lambda: _merge_positions(ptable(), table(), {k: v for k, v in parsed.items() if k != "extends"})


def discover(paths: list[Path]) -> list[Path]:
    """Profile files named on the command line: files as given, folders scanned for *.yaml/*.yml
    (sorted, partials starting with `_` skipped). Every other entry with a profile suffix is kept, even
    when it is a dangling symlink, a symlink loop, a FIFO or a folder: loading it then reports what it
    is. Skipping it silently would drop that cluster from dist/, and GitOps would delete its stack."""
    found: list[Path] = []
    seen: set[str] = set()
    for p in paths:
        if p.is_dir():
            # names from one folder read, sorted as strings (one folder: the order of the paths); a real path is
            # the folder's joined with the name unless the entry is a symlink (d_type: no call per file)
            here = os.path.realpath(p)
            with os.scandir(p) as it:
                entries = sorted(((e.name, e.is_symlink()) for e in it
                                  if e.name.endswith((".yaml", ".yml")) and e.name not in (".yaml", ".yml")
                                  and not e.name.startswith("_")))
            candidates = [(p / name, os.path.join(here, name) if not link else None) for name, link in entries]
        else:
            candidates = [(p, None)]
        for f, real in candidates:  # a file named twice (or via a folder and by name) is compiled once
            real = real or os.path.realpath(f)
            if real not in seen:
                seen.add(real)
                found.append(f)
    return found
