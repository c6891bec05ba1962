"""`gpuop import`'s boundary: bounded reading of what a cluster runs, and a profile written without destroying.

Reading goes through the profile loader's bounds (profile/load.py, docs/input-limits.md): regular files only
(a FIFO, a device, /proc files refused from stat, before anything is opened), at most MAX_FILE_BYTES, UTF-8
located at the byte, nesting and items counted on libyaml's token stream before ruamel parses, YAML aliases
expanded against one budget per file. Unlike a profile, an input may hold several documents and a `kind: List`
(`kubectl get ... -o yaml`); every document keeps its position table, so each later problem is located.
Strings embedded in ConfigMaps (mig-parted and device-plugin configs) are parsed with the same bounds.

Writing (`-o`): never through a symlink, never outside the project (the working directory), never over an
existing file unless `--force`; a folder, a missing folder or a full disk is a located exit 2 and leaves nothing
behind (the text goes to a temporary file beside the target, then is linked or renamed into place).
"""

from __future__ import annotations

import os
import re
import stat
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.error import MarkedYAMLError, YAMLError
from ruamel.yaml.reader import ReaderError

from gpuop.errors import Issue, UserError, field_path
from gpuop.profile import bounded
from gpuop.profile import load

WHAT = "an operator input"


@dataclass
class Doc:
    """One YAML mapping of an input, with the position of every key and item below it."""
    file: str
    data: dict
    table: dict = field(repr=False)
    base: tuple = ()                 # where the document sits in its file's parsed tree (a List's item)

    def where(self, loc: tuple = ()) -> tuple[str, int, int]:
        loc = self.base + tuple(loc)
        while loc:
            if loc in self.table:
                return self.table[loc]
            loc = loc[:-1]
        return self.table.get((), (self.file, 1, 1))

    def issue(self, loc: tuple, message: str) -> Issue:
        return Issue(*self.where(loc), field_path(tuple(loc)), message)


_REWORD = ((", not a profile file", ", not an operator input file"),
           ("file not found; name a profile file or a folder of profiles", "file not found"),
           ("a profile file may hold", "an operator input may hold"),
           ("a profile's deepest field is 7 levels down", "a ClusterPolicy's deepest field is 8 levels down"))


def _reworded(exc: UserError) -> UserError:
    out = []
    for i in exc.issues:
        msg = i.message
        for old, new in _REWORD:
            msg = msg.replace(old, new)
        out.append(Issue(i.file, i.line, i.col, i.path, msg, i.severity))
    return UserError(out)


def read_file(path: Path) -> list[Doc]:
    """Every YAML mapping of one input file (a `kind: List` expanded into its items), or a located UserError."""
    shown = load.display(path)
    try:
        text = load.decode(shown, load.read_bytes(path, shown))
        load._check_structure(shown, text)
    except UserError as exc:
        raise _reworded(exc) from None
    docs = _parse(shown, text, 1)
    if not docs:
        raise UserError(Issue(shown, 1, 1, "", f"the file is empty; {WHAT} is a chart values file or Kubernetes "
                              "objects (ClusterPolicy, NVIDIADriver, ConfigMap)"))
    out: list[Doc] = []
    problems: list[Issue] = []
    for root, table in docs:
        if not isinstance(root, dict):
            got = "a list" if isinstance(root, list) else "a single value"
            problems.append(Issue(*table.get((), (shown, 1, 1)), "", f"the document is {got}; {WHAT} is a YAML "
                                  "mapping: chart values or a Kubernetes object"))
            continue
        doc = Doc(shown, root, table)
        if root.get("kind") == "List" and "apiVersion" in root:
            items = root.get("items")
            if not isinstance(items, list):
                problems.append(doc.issue(("items",), "a List's items must be a list of objects"))
                continue
            for i, item in enumerate(items):
                if not isinstance(item, dict):
                    problems.append(doc.issue(("items", i), "a List's item must be a Kubernetes object (a mapping)"))
                else:
                    out.append(Doc(shown, item, table, ("items", i)))
        else:
            out.append(doc)
    if problems:
        raise UserError(problems)
    return out


def _parse(shown: str, text: str, first_line: int, budget: list | None = None) -> list[tuple[Any, dict]]:
    """(plain value, position table) of every non-empty document of a text already checked for structure."""
    yaml = YAML(typ="rt")
    yaml.allow_duplicate_keys = False
    offset = first_line - 1
    try:
        nodes = [d for d in yaml.load_all(text) if d is not None]
    except MarkedYAMLError as exc:
        issue = load._yaml_problem(shown, exc)
        raise UserError(Issue(issue.file, issue.line + offset, issue.col, issue.path, issue.message)) from None
    except ReaderError as exc:
        line, col = bounded.line_col(text, exc.position)
        raise UserError(Issue(shown, line + offset, col, "", f"character #x{exc.character:04x} is not allowed in "
                              "YAML (control characters other than tab and newline are refused)")) from None
    except YAMLError as exc:
        raise UserError(Issue(shown, first_line, 1, "", f"malformed YAML: {' '.join(str(exc).split())}")) from None
    except (ValueError, TypeError, OverflowError, IndexError):
        line, col = load._unreadable_scalar(text)
        raise UserError(Issue(shown, line + offset, col, "", "malformed YAML: a value YAML reads as a number cannot "
                              "be converted; put the value in quotes")) from None
    budget = [load.MAX_VALUES] if budget is None else budget
    out = []
    for node in nodes:
        lc = getattr(node, "lc", None)
        start = (shown, lc.line + 1 + offset, lc.col + 1) if lc is not None else (shown, first_line, 1)
        table: dict = {(): start}
        problems: list[Issue] = []
        try:
            value = load._plain(node, shown, (), table, problems, budget)
        except load._TooManyValues as exc:
            top = exc.loc[:1]
            where = table.get(top, exc.where)
            raise UserError(Issue(where[0], where[1] + (offset if top else 0), where[2], field_path(top),
                                  f"the input holds more than {load.MAX_VALUES} values once its YAML aliases are "
                                  f"expanded (limit {load.MAX_VALUES}); an alias repeats its anchor's whole content, "
                                  "so aliases of aliases multiply")) from None
        if offset:
            table = {k: (f, ln + offset, c) for k, (f, ln, c) in table.items()}
            table[()] = start
            problems = [Issue(p.file, p.line + offset, p.col, p.path, p.message) for p in problems]
        if problems:
            raise UserError(problems)
        out.append((value, table))
    return out


def read_inputs(paths: list[Path]) -> list[Doc]:
    """Every document of every input; all files' problems reported together."""
    docs: list[Doc] = []
    issues: list[Issue] = []
    for path in paths:
        try:
            docs += read_file(path)
        except UserError as exc:
            issues += exc.issues
    if issues:
        raise UserError(issues)
    return docs


def embedded(doc: Doc, loc: tuple, text: str, what: str) -> Any:
    """A YAML text held in a string of `doc` (a ConfigMap's config.yaml): parsed with the input bounds; a
    problem is located at the string's key, with the line inside the string."""
    file, line, col = doc.where(loc)
    label = f"{field_path(tuple(loc))} ({what})"
    try:
        load._check_structure(file, text)
        found = _parse(file, text, 1)
    except UserError as exc:
        raise UserError([Issue(file, line, col, field_path(tuple(loc)),
                               f"{what}, line {i.line} column {i.col} of the text: {i.message}")
                         for i in _reworded(exc).issues]) from None
    if len(found) > 1:
        raise UserError(doc.issue(loc, f"{label} holds more than one YAML document"))
    return found[0][0] if found else None


# ------------------------------------------------------------------------------------------ strings written

_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def one_line(text: str) -> str:
    """`text` safe in a `# ...` comment: every character that is not printable, or that a YAML 1.1 or 1.2 reader
    takes as a line break (\\r, \\n, NEL, LS, PS), or that reorders text (bidi controls), is written as an escape."""
    out = []
    for ch in str(text):
        o = ord(ch)
        if 0x20 <= o < 0x7F or (o >= 0xA0 and unicodedata.category(ch) not in ("Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp")
                                and ch not in "\ufeff\ufffe\uffff"):
            out.append(ch)
        else:
            out.append(_ESCAPES.get(ch) or (f"\\x{o:02x}" if o < 0x100 else f"\\u{o:04x}" if o < 0x10000
                                            else f"\\U{o:08x}"))
    return "".join(out)


# ------------------------------------------------------------------------------------------ writing

def write_profile(output: Path, text: str, force: bool = False, project: Path | None = None) -> None:
    """Write the profile at `output`, or raise a located UserError and write nothing."""
    shown = load.display(output)

    def refuse(message: str) -> UserError:
        return UserError(Issue(shown, 0, 0, "", message + "; nothing written"))

    project = Path(os.path.realpath(project or Path.cwd()))
    target = Path(os.path.abspath(output))
    if os.path.islink(target):
        raise refuse("is a symlink; gpuop import never writes through a symlink (name the file itself)")
    parent = target.parent
    if not os.path.lexists(parent):
        raise refuse(f"the folder {load.display(parent)} does not exist; create it first")
    if not parent.is_dir():
        raise refuse(f"{load.display(parent)} is not a folder")
    real_parent = Path(os.path.realpath(parent))
    if real_parent != project and project not in real_parent.parents:
        raise refuse(f"is outside the project ({project}); write the profile inside it, e.g. profiles/NAME.yaml "
                     "(symlinks are followed before this check)")
    if os.path.lexists(target):
        st = os.lstat(target)
        # lstat: a symlink is "not a regular file" here, as it always was (bounded.kind would name it)
        kind = "not a regular file" if stat.S_ISLNK(st.st_mode) else bounded.kind(st.st_mode)
        if kind:
            raise refuse(f"is {kind}, not a profile file")
        if not force:
            raise refuse("already exists; gpuop import does not replace a profile (another cluster's profile "
                         "replaced would take that cluster out of GitOps): pass --force to replace it")
    tmp = real_parent / f".{target.name}.import-{os.getpid()}.tmp"
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
                     | getattr(os, "O_CLOEXEC", 0), 0o644)
    except OSError as exc:
        raise refuse(f"cannot write in {load.display(parent)}: {exc.strerror or exc}") from None
    try:
        try:
            data = text.encode("utf-8")
            while data:
                data = data[os.write(fd, data):]
            os.fsync(fd)
        finally:
            os.close(fd)
        if force:
            os.replace(tmp, real_parent / target.name)
        else:
            os.link(tmp, real_parent / target.name, follow_symlinks=False)   # fails if it appeared meanwhile
    except FileExistsError:
        raise refuse("already exists; pass --force to replace it") from None
    except OSError as exc:
        raise refuse(f"cannot write: {exc.strerror or exc}") from None
    finally:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass


_SAFE_PLAIN = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_./@%+=-]*$")


def plain_or_quoted(value: Any) -> Any:
    """Strings that would not read back the same under YAML 1.1 and 1.2 readers as plain scalars (`on`, `1:20`,
    `0o17`, a leading `*` or `!`, control characters ...) double-quoted, so ruamel's writer escapes them."""
    from ruamel.yaml.scalarstring import DoubleQuotedScalarString

    if isinstance(value, CommentedMap):
        items = list(value.items())
        for k, v in items:
            value[k] = plain_or_quoted(v)
        return value
    if isinstance(value, CommentedSeq):
        for i, v in enumerate(value):
            value[i] = plain_or_quoted(v)
        return value
    if isinstance(value, dict):
        return {plain_or_quoted(k): plain_or_quoted(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain_or_quoted(v) for v in value]
    if isinstance(value, str) and not _plain_safe(value):
        return DoubleQuotedScalarString(value)
    return value


_READER_12 = YAML(typ="safe", pure=True)


def _plain_safe(s: str) -> bool:
    import yaml as pyyaml

    if not _SAFE_PLAIN.match(s):
        return False
    try:
        return pyyaml.safe_load(s) == s and _READER_12.load(s) == s
    except Exception:  # noqa: BLE001 - anything a reader does not take back as the string: quote it
        return False
