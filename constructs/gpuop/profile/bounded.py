"""The input boundary for every file gpuop reads that is not a profile: shard folders, previous outputs
(index.json, the version lock, chart archives), the lock of image digests, git trees, registry answers.

Profiles and settings are read through it too (profile/load.py `read_bytes`, `decode`: links followed,
the profile's limit and wording); profile/load.py adds YAML with positions on top. What it promises:

- a file is read only when it is a regular file (lstat: a symlink is refused where the caller says
  links must not be followed; a followed one must not lead into /proc, /sys or /dev; fstat on the open descriptor: a FIFO or device swapped in later cannot
  block or stream forever) and at most `limit` bytes are ever read, whatever the file claims;
- a folder is walked without following any symlink, every path stays inside it, and only regular
  files and folders are allowed, within a budget of entries and bytes;
- text is UTF-8, refused at the located byte (line and column) otherwise;
- JSON nests at most MAX_DEPTH levels (checked on the text before the recursive parser sees it) and a
  syntax error is located.

Every refusal is a UserError naming the file (never quoting its content): exit 2.
"""

from __future__ import annotations

import errno
import json
import os
import re
import stat
from pathlib import Path
from typing import Any

from gpuop.errors import Issue, UserError

MAX_JSON_BYTES = 256 * 1024 * 1024    # index.json / a lock of a 100,000-cluster fleet is ~200 MB
MAX_FILE_BYTES = 64 * 1024 * 1024     # one compiled file or chart archive; the largest is ~1 MB
MAX_TREE_BYTES = 4 * 1024 ** 3        # one shard or output folder
MAX_TREE_ENTRIES = 2_000_000
MAX_DEPTH = 64                        # JSON nesting; gpuop's own files nest at most 6 levels

_KINDS = ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"), (stat.S_ISLNK, "a symlink"))


def kind(mode: int) -> str | None:
    """What a non-regular file is, in words; None for a regular file."""
    return next((what for test, what in _KINDS if test(mode)), None if stat.S_ISREG(mode) else "not a regular file")


def _fail(shown: str, message: str, line: int = 0, col: int = 0) -> UserError:
    return UserError(Issue(shown, line, col, "", message))


_PSEUDO = ("/proc", "/sys", "/dev")   # kernel files: "regular" with size 0, content generated on read


def followed_problem(path: Path, *, what: str, limit: int) -> str | None:
    """Why `path`, its links followed, cannot be read as `what` (at most `limit` bytes), from stat only (never
    opens it, so a FIFO cannot block and /dev/zero is never read); "file not found" when it is missing, None
    when it is a regular file within the limit."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return "is a symlink to a missing file" if os.path.islink(path) else "file not found"
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return "is a symlink loop"
        if exc.errno == errno.ENAMETOOLONG:
            return "the file name is too long"
        return f"cannot read: {exc.strerror or exc}"
    problem = kind(st.st_mode)
    if problem:
        return f"is {problem}, not {what}"
    real = os.path.realpath(path)
    if any(real == p or real.startswith(p + "/") for p in _PSEUDO):
        return f"is a kernel file ({real}), not {what}"
    if st.st_size > limit:
        return f"is {st.st_size} bytes; {what} may hold at most {limit} bytes (limit {limit})"
    return None


def read_bytes(path: Path, shown: str | None = None, *, limit: int = MAX_FILE_BYTES, what: str = "a file",
               follow: bool = False, missing: str = "file not found") -> bytes:
    """The bytes of a regular file of at most `limit` bytes. `follow=False` (the default): a symlink is
    refused, never followed (O_NOFOLLOW), so a link in an untrusted folder cannot point the read at a
    file elsewhere. `follow=True` (the files the user names: profiles, their parents, settings): links are
    followed, and what stat finds wrong is said (`followed_problem`; `missing`: the message for a file that is
    not there). Either way the open descriptor is checked with fstat, so a file swapped for a FIFO or device
    after stat looked at it still cannot block or stream forever."""
    shown = str(path) if shown is None else shown
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0) | (0 if follow else os.O_NOFOLLOW)
    if follow:
        problem = followed_problem(path, what=what, limit=limit)
        if problem:
            raise _fail(shown, missing if problem == "file not found" else problem)
        try:
            fd = os.open(path, flags)
        except OSError as exc:
            raise _fail(shown, f"cannot read: {exc.strerror or exc}")
    else:
        try:
            st = os.stat(path, follow_symlinks=False)
            problem = kind(st.st_mode)
            if problem:
                raise _fail(shown, f"is {problem}, not {what}" + ("; links are not followed" if problem == "a symlink" else ""))
            if st.st_size > limit:
                raise _fail(shown, f"is {st.st_size} bytes; {what} may hold at most {limit} bytes (limit {limit})")
            fd = os.open(path, flags)
        except FileNotFoundError:
            raise _fail(shown, "cannot read: No such file or directory")
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise _fail(shown, f"is a symlink, not {what}; links are not followed")
            raise _fail(shown, f"cannot read: {exc.strerror or exc}")
    try:
        problem = kind(os.fstat(fd).st_mode)
        if problem:
            raise _fail(shown, f"is {problem}, not {what}")
        chunks, size = [], 0
        while size <= limit:                # at most one byte past the limit, whatever the file claims
            chunk = os.read(fd, min(limit + 1 - size, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    except OSError as exc:
        raise _fail(shown, f"cannot read: {exc.strerror or exc}")
    finally:
        os.close(fd)
    if size > limit:
        raise _fail(shown, f"is more than {limit} bytes; {what} may hold at most {limit} bytes (limit {limit})")
    return b"".join(chunks)


def decode(shown: str, raw: bytes, *, advise: bool = False) -> str:
    """UTF-8 text, or UserError located at the first byte that is not UTF-8 (line and column). `advise` (files
    the user writes: profiles, settings): the message says how to fix it, and a UTF-16 byte order mark is named."""
    if advise and raw[:2] in (b"\xff\xfe", b"\xfe\xff"):
        raise _fail(shown, "cannot read: the file is UTF-16 (it starts with a UTF-16 byte order mark); save it as "
                    "UTF-8", 1, 1)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        before = raw[:exc.start]
        line = before.count(b"\n") + 1
        col = len(before[before.rfind(b"\n") + 1:].decode("utf-8", "replace")) + 1
        raise _fail(shown, f"cannot read: byte 0x{raw[exc.start]:02x} is not UTF-8 ({exc.reason})"
                    + ("; save the file as UTF-8" if advise else ""), line, col)


def line_col(text: str, index: int) -> tuple[int, int]:
    """1-based line and column of a character index."""
    line = text.count("\n", 0, index) + 1
    return line, index - (text.rfind("\n", 0, index) + 1) + 1


_DROP = bytes(c for c in range(256) if c not in b'[]{}"')      # bytes.translate keeps only brackets and quotes
_STRING = re.compile(rb'"[^"]*"')
_PAIR = re.compile(rb"[\[{][\]}]")


def _shallow(raw: bytes) -> bool:
    """True when the document surely nests at most MAX_DEPTH levels, decided at C speed (a fleet's
    index.json is tens of MB; a character loop in Python costs seconds): escaped backslashes and quotes
    dropped, then everything but brackets and quotes, then the strings, then the innermost pairs once per
    level. Anything it cannot settle (unbalanced brackets, too deep) goes to the located scan."""
    brackets = _STRING.sub(b"", raw.replace(b"\\\\", b"").replace(b'\\"', b"").translate(None, _DROP))
    for _ in range(MAX_DEPTH):
        if not brackets:
            return True
        fewer = _PAIR.sub(b"", brackets)
        if fewer == brackets:
            return False
        brackets = fewer
    return not brackets


def _check_depth(shown: str, text: str, raw: bytes | None = None) -> None:
    """Refuse nesting deeper than MAX_DEPTH before json's recursive parser sees it (iterative scan)."""
    if _shallow(text.encode("utf-8") if raw is None else raw):
        return
    depth, in_string, escaped = 0, False, False
    for i, ch in enumerate(text):
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            if depth > MAX_DEPTH:
                raise _fail(shown, f"nests deeper than {MAX_DEPTH} levels (limit {MAX_DEPTH})", *line_col(text, i))
        elif ch in "]}":
            depth -= 1


def parse_json(shown: str, raw: bytes) -> Any:
    """A JSON document from untrusted bytes: UTF-8, bounded nesting, a located syntax error."""
    text = decode(shown, raw)
    _check_depth(shown, text, raw)
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise _fail(shown, f"not valid JSON ({exc.msg})", exc.lineno, exc.colno)
    except (ValueError, RecursionError) as exc:
        raise _fail(shown, f"not valid JSON ({type(exc).__name__})")


def read_json(path: Path, shown: str | None = None, *, limit: int = MAX_JSON_BYTES, what: str = "a JSON file",
              follow: bool = False) -> Any:
    shown = str(path) if shown is None else shown
    return parse_json(shown, read_bytes(path, shown, limit=limit, what=what, follow=follow))


def walk(folder: Path, shown: str | None = None, *, what: str = "a file of a gpuop output folder",
         budget: list | None = None) -> list[tuple[str, Path]]:
    """(path relative to `folder`, absolute path) of every regular file below `folder`, sorted, without
    following a symlink anywhere (the folder itself included). `budget` ([entries, bytes] left, shared
    between calls): a folder too big to be gpuop output is refused instead of read."""
    shown = str(folder) if shown is None else shown
    budget = budget if budget is not None else [MAX_TREE_ENTRIES, MAX_TREE_BYTES]
    try:
        top = os.lstat(folder)
    except OSError as exc:
        raise _fail(shown, f"cannot read: {exc.strerror or exc}")
    if stat.S_ISLNK(top.st_mode):
        raise _fail(shown, "is a symlink, not a folder; links are not followed")
    if not stat.S_ISDIR(top.st_mode):
        raise _fail(shown, f"is {kind(top.st_mode) or 'a file'}, not a folder")
    out: list[tuple[str, Path]] = []
    stack = [(Path(folder), "")]
    while stack:
        here, rel = stack.pop()
        try:
            with os.scandir(here) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError as exc:
            raise _fail(f"{shown}/{rel}".rstrip("/"), f"cannot read: {exc.strerror or exc}")
        for e in entries:
            sub = f"{rel}{e.name}"
            budget[0] -= 1
            if budget[0] < 0:
                raise _fail(shown, f"holds more than {MAX_TREE_ENTRIES} entries; not a gpuop output folder")
            st = e.stat(follow_symlinks=False)
            if stat.S_ISDIR(st.st_mode):
                stack.append((Path(e.path), sub + "/"))
            elif stat.S_ISREG(st.st_mode):
                budget[1] -= st.st_size
                if budget[1] < 0:
                    raise _fail(shown, f"holds more than {MAX_TREE_BYTES} bytes; not a gpuop output folder")
                out.append((sub, Path(e.path)))
            else:
                problem = kind(st.st_mode)
                raise _fail(f"{shown}/{sub}", f"is {problem}, not {what}"
                            + ("; links are not followed" if problem == "a symlink" else ""))
    return sorted(out)


def read_tree(folder: Path, shown: str | None = None, *, prefix: str = "", budget: list | None = None) -> dict[str, bytes]:
    """Every regular file below `folder` (walk's rules), keyed `prefix` + relative path."""
    shown = str(folder) if shown is None else shown
    return {prefix + rel: read_bytes(p, f"{shown}/{rel}") for rel, p in walk(folder, shown, budget=budget)}


# ---- host names: the one allow-shape for every URL gpuop reads from or writes into an object -------

_HOST = re.compile(r"(?=.{1,253}$)([A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*\.?")
_IPV6 = re.compile(r"\[[0-9A-Fa-f:.]{2,45}\]")


def host_problem(host: str) -> str | None:
    """Why `host` (without port) is not an allowed host name; None when it is: DNS labels in ASCII (an
    international name in its IDNA form, xn--..., so a look-alike letter cannot pass for another
    host), an IPv4 or a bracketed IPv6 address; never a leading '-' (ssh would read it as an option)."""
    if not host:
        return "has no host"
    if not host.isascii():
        return ("has a host that is not ASCII (a look-alike letter?); write an international name in its "
                "IDNA form (xn--...)")
    if host.startswith("-"):
        return "has a host that starts with '-'"
    if ":" in host:                        # an IPv6 literal (urllib strips its brackets)
        return None if _IPV6.fullmatch(f"[{host.strip('[]')}]") else "has a malformed IPv6 host"
    if not _HOST.fullmatch(host):
        return "has a host that is not a DNS name or an IP address"
    return None
