"""The journaled per-cluster commit: only the clusters and fleet files that changed are put in place, one
atomic step each, and a journal in the output folder lets the next gpuop command finish what a stopped
run began (docs/output-transaction.md).

Every state a kill can leave is a valid output:
- each cluster folder is whole, old or new: it is exchanged with its new tree in one
  renameat2(RENAME_EXCHANGE), or renamed into place when new;
- every cluster the fleet objects and index.json list is present: new clusters and chart archives are
  added before the files that reference them, and a removed cluster leaves only after index.json and
  fleet/ no longer list it (add before reference, remove after unreference);
- the journal (`OUT/.gpuop-journal`) is in the output folder from the first change until the last, so a
  half-applied tree is recognisable: `gpuop validate`, `gpuop check` and `gpuop diff --exit-code` refuse
  it, and every command that writes the output completes it first, under the output lock.

The new trees wait in the staging folder beside OUT (`.<OUT>.new-XXXXXXXX`, the same file system), which the
journal names; a kill before the journal is written leaves OUT untouched (the staging folder is removed
by the next run). Each step is idempotent: a rename whose source is gone is done; an exchange is done
when OUT's entry has the inode the journal recorded for the new tree.

The journal sits in a folder that is committed to git, so it is untrusted data, checked whole before
anything moves (`load`, then `_Dirs.check`): a strict grammar (keys, op kinds, types, one path form per
op kind), a staging folder that is gpuop's own (a real folder beside OUT named as gpuop names it, on
OUT's device, with the inode the run recorded), and every move made between folder descriptors opened
without following a symlink, so no path in it can reach outside OUT and its staging folder. A journal
that fails any of this is exit 2 with nothing moved.
"""

from __future__ import annotations

import errno
import json
import os
import re
import stat
from pathlib import Path

from gpuop.errors import Issue, UserError
from gpuop.profile.bounded import parse_json, read_bytes

JOURNAL = ".gpuop-journal"
MARKER = ".gpuop-output"          # write.MARKER (write imports this module, not the other way round)
FLEET_FILES = ("versions.lock.json", "charts/index.yaml", "index.json")   # index.json last: it references
TRASH = ".removed"                # in the staging folder: what a remove op moved out of OUT
# ~60 bytes an op, 2-3 ops a cluster: a 100,000-cluster fleet's journal is ~20 MB
MAX_JOURNAL_BYTES = 64 * 1024 * 1024

# the names gpuop writes: a cluster folder is a DNS-1123 label of at most 53 characters (profile/models.py,
# metadata.name), a chart archive `<name>-<version>.tgz` (outputs/charts.py); mkdtemp's suffix is 8 characters
_CLUSTER = re.compile(r"[a-z0-9](?:[-a-z0-9]{0,51}[a-z0-9])?\Z")
_ARCHIVE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,250}\.tgz\Z")
_STAGE_SUFFIX = re.compile(r"\.new-[a-z0-9_]{8}\Z")


# ---- the grammar ---------------------------------------------------------------------------------------

def _entry(name: str) -> bool:
    """One entry name of a folder: never a path (no `/`), never `.`/`..`, no NUL, at most 255 bytes."""
    return (0 < len(name) and "/" not in name and "\0" not in name and name not in (".", "..")
            and len(os.fsencode(name)) <= 255)


def _form(rel: str) -> str | None:
    """Which of the forms an op path may take `rel` has (FORMS), or None: not a path any op may name."""
    if rel in FLEET_FILES:
        return "fleet-file"
    if rel == "fleet":
        return "fleet"
    if rel == MARKER:
        return "marker"
    head, sep, tail = rel.partition("/")
    if sep:
        if head != "charts" or not _entry(tail):
            return None
        return "archive" if _ARCHIVE.match(tail) else "charts-entry"
    if _CLUSTER.match(rel):
        return "cluster"
    return "entry" if _entry(rel) and rel not in (JOURNAL, "charts") else None


# op kind -> the path forms it may name, and the kind of file each moves (d: folder, f: regular file).
# One table: plan() writes only these, the check admits only these.
FORMS = {
    "rename": {"cluster": "d", "fleet": "d", "fleet-file": "f", "marker": "f", "archive": "f"},
    "exchange": {"cluster": "d", "fleet": "d"},
    # what a remove moves out of OUT may be anything a hand put there: it goes to the trash, never followed
    "remove": {"cluster": "", "entry": "", "archive": "", "charts-entry": ""},
}
_WHAT = {"cluster": "a cluster folder name", "fleet": "fleet", "fleet-file": "a fleet file (" + ", ".join(FLEET_FILES)
         + ")", "marker": MARKER, "archive": "charts/<chart archive>.tgz", "entry": "one entry name of the output "
         "folder", "charts-entry": "charts/<entry>"}
KEYS = ("kind", "stage", "stageInode", "ops")


def _recovery(out: Path, shown: str) -> str:
    return (f"nothing was moved; a journal exists only while a gpuop synth commits on this machine and is never "
            f"committed: remove {shown} (git rm it if git tracks it) and run gpuop synth, which checks every "
            f"cluster folder by content, or restore {out.name} from git")


def _refuse(out: Path, shown: str, path: str, what: str) -> UserError:
    return UserError(Issue(shown, 0, 0, path, f"{what}; {_recovery(out, shown)}"))


def _shown(out: Path) -> str:
    """The journal's path as the user knows it: relative to the working folder when under it."""
    path = Path(out) / JOURNAL
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def load(out: Path) -> dict:
    """The journal of `out`, checked against the grammar (bounded, never through a symlink): a UserError
    (exit 2) locating the first problem otherwise. Nothing is moved here."""
    out = Path(out)
    shown = _shown(out)
    try:
        doc = parse_json(shown, read_bytes(out / JOURNAL, shown, limit=MAX_JOURNAL_BYTES, what="a journal"))
    except UserError as exc:
        i = exc.issues[0]
        raise UserError(Issue(i.file, i.line, i.col, i.path, f"{i.message}; {_recovery(out, shown)}"))
    problem = _grammar_problem(doc, out.name)
    if problem:
        raise _refuse(out, shown, *problem)
    return doc


def _grammar_problem(doc, out_name: str) -> tuple[str, str] | None:
    """(field path, what is wrong) of the first place `doc` leaves the journal's grammar, or None."""
    if not isinstance(doc, dict):
        return "", "expected an object of kind Journal"
    for key in KEYS:
        if key not in doc:
            return key, "Required value"
    extra = sorted(set(doc) - set(KEYS))
    if extra:
        return extra[0], f"unknown field (a journal has {', '.join(KEYS)})"
    if doc["kind"] != "Journal":
        return "kind", "Unsupported value: expected Journal"
    stage = doc["stage"]
    if not isinstance(stage, str) or not stage.startswith(f".{out_name}.") \
            or not _STAGE_SUFFIX.fullmatch(stage, len(out_name) + 1):
        return "stage", (f"Invalid value: expected the name gpuop gives the staging folder beside {out_name} "
                         f"(.{out_name}.new-XXXXXXXX), not a path")
    if not _count(doc["stageInode"], positive=True):
        return "stageInode", "Invalid value: expected a positive integer (the staging folder's inode)"
    if not isinstance(doc["ops"], list):
        return "ops", "Invalid value: expected a list of [op, path, inode]"
    seen: dict[str, int] = {}
    for i, op in enumerate(doc["ops"]):
        problem = _op_problem(op)
        if problem:
            return f"ops[{i}]", problem
        # plan() names each path once; so each op can be checked against the folders as they are before any
        # moves (_Dirs.check), and no op undoes another
        if op[1] in seen:
            return f"ops[{i}]", f"Duplicate value: {op[1]!r} is named by ops[{seen[op[1]]}] too; a journal names each path once"
        seen[op[1]] = i
    return None


def _count(v, positive: bool = False) -> bool:
    return type(v) is int and (v > 0 if positive else v == 0) and v < 1 << 64


def _op_problem(op) -> str | None:
    if not isinstance(op, list) or len(op) != 3:
        return "Invalid value: expected [op, path, inode]"
    kind, rel, inode = op
    if kind not in FORMS:
        return f"Unsupported value: expected one of {', '.join(FORMS)}"
    if not isinstance(rel, str):
        return "Invalid value: the path must be a string"
    form = _form(rel)
    if form not in FORMS[kind]:
        allowed = ", ".join(_WHAT[f] for f in FORMS[kind])
        return f"Invalid value: {kind} names {allowed}, inside the output folder (no absolute path, no ..)"
    if not _count(inode, positive=kind == "exchange"):
        return ("Invalid value: an exchange records the new tree's inode (a positive integer)" if kind == "exchange"
                else f"Invalid value: a {kind} records inode 0")
    return None


# ---- the plan and the journal, as the run writes them -------------------------------------------------

def pending(out: Path) -> bool:
    return os.path.lexists(os.path.join(out, JOURNAL))


def plan(stage: Path, out: Path, keep: set[str], keep_charts: set[str]) -> list[list]:
    """The steps that turn `out` into the new tree: `stage` holds what changed, `keep` the top-level
    entries of `out` kept as they are, `keep_charts` the archives of out/charts kept."""
    ops: list[list] = []
    staged = sorted(os.listdir(stage))
    charts = sorted(os.listdir(stage / "charts")) if (stage / "charts").is_dir() else []
    for name in charts:                                   # new archives first: nothing references them yet
        if name != "index.yaml":
            ops.append(["rename", f"charts/{name}", 0])
    for name in staged:                                   # clusters: new ones added, changed ones exchanged
        if name in ("charts", "fleet") or not (stage / name).is_dir():
            continue
        ops.append(["exchange" if (out / name).is_dir() and not (out / name).is_symlink() else "rename", name,
                    os.stat(stage / name).st_ino])
    if "fleet" in staged:
        ops.append(["exchange" if (out / "fleet").is_dir() else "rename", "fleet", os.stat(stage / "fleet").st_ino])
    for rel in FLEET_FILES:
        if (stage / rel).is_file():
            ops.append(["rename", rel, 0])
    new = set(staged) | keep
    for name in sorted(os.listdir(out)):                  # after index.json: nothing lists them any more
        if name not in new and name not in (JOURNAL, MARKER, "charts"):
            ops.append(["remove", name, 0])
    if (out / "charts").is_dir():
        for name in sorted(os.listdir(out / "charts")):
            if name != "index.yaml" and name not in keep_charts and name not in charts:
                ops.append(["remove", f"charts/{name}", 0])
    if (stage / MARKER).is_file():
        ops.append(["rename", MARKER, 0])
    # a rename records no inode: only an exchange is judged done by one
    return [[op, rel, inode if op == "exchange" else 0] for op, rel, inode in ops]


def write(out: Path, stage: Path, ops: list, step) -> None:
    """The journal, atomically (written in the staging folder, which this run made, fsynced, renamed into
    OUT, fsync of the folder): from here on the next command rolls the commit forward. It is checked as the
    next command will check it before it exists (a refusal leaves OUT untouched), and never written through
    a name in OUT: a committed `.gpuop-journal.tmp` symlink cannot point the write elsewhere."""
    step("journal")
    out = Path(out)
    doc = {"kind": "Journal", "stage": stage.name, "stageInode": os.stat(stage).st_ino, "ops": ops}
    problem = _grammar_problem(doc, out.name)
    if problem:         # a gpuop bug (a name its own plan cannot express): never write a journal no run accepts
        raise AssertionError(f"journal: {problem[0]}: {problem[1]}")
    with _Dirs(out, doc, _shown(out)) as dirs:
        dirs.check()
    tmp = stage / (JOURNAL + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0), 0o644)
    try:
        view = memoryview(json.dumps(doc).encode())
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
    finally:
        os.close(fd)
    os.rename(tmp, out / JOURNAL)
    _fsync_dir(out)


# ---- applying it ---------------------------------------------------------------------------------------

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)


def _lstat(name: str, fd: int) -> os.stat_result | None:
    try:
        return os.stat(name, dir_fd=fd, follow_symlinks=False)
    except FileNotFoundError:
        return None


def _kind(st: os.stat_result | None) -> str:
    if st is None:
        return "missing"
    return "d" if stat.S_ISDIR(st.st_mode) else "f" if stat.S_ISREG(st.st_mode) else \
        "a symlink" if stat.S_ISLNK(st.st_mode) else "not a regular file"


class _Dirs:
    """OUT and the journal's staging folder, open as folder descriptors (never through a symlink), with their
    charts/ and the trash opened the same way on first use: every step moves an entry between two of these
    descriptors, so no name in the journal, and no symlink planted in either folder, can make a step act
    outside them."""

    def __init__(self, out: Path, doc: dict, shown: str):
        self.out, self.doc, self.shown = Path(out), doc, shown
        self.fds: dict[str, int] = {}
        self.stage_missing = False

    def __enter__(self) -> "_Dirs":
        try:
            self._open()
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc) -> None:
        for fd in self.fds.values():
            os.close(fd)
        self.fds.clear()

    def refuse(self, path: str, what: str) -> UserError:
        return _refuse(self.out, self.shown, path, what)

    def _open(self) -> None:
        try:
            self.fds["out"] = os.open(self.out, _DIR_FLAGS)
        except OSError as exc:
            raise self.refuse("", f"cannot open the output folder {self.out.name} "
                              f"({'a symlink' if exc.errno == errno.ELOOP else exc.strerror}); links are not followed")
        parent = os.open(self.out.parent, os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_CLOEXEC", 0))
        try:
            st = _lstat(self.doc["stage"], parent)
            if st is None:
                self.stage_missing = True
                return
            if not stat.S_ISDIR(st.st_mode):
                raise self.refuse("stage", f"{self.doc['stage']} is {_kind(st) if _kind(st) != 'f' else 'a file'}, "
                                  "not gpuop's staging folder; links are not followed")
            self.fds["stage"] = os.open(self.doc["stage"], _DIR_FLAGS, dir_fd=parent)
        except OSError as exc:
            raise self.refuse("stage", f"cannot open {self.doc['stage']} ({exc.strerror}); links are not followed")
        finally:
            os.close(parent)
        mine, out = os.fstat(self.fds["stage"]), os.fstat(self.fds["out"])
        # the device is compared with OUT's now, not recorded: device numbers may change across a reboot
        if mine.st_dev != out.st_dev:
            raise self.refuse("stage", f"{self.doc['stage']} is on another file system than {self.out.name}; "
                              "gpuop stages beside the output folder, on its device")
        if mine.st_ino != self.doc["stageInode"]:
            raise self.refuse("stageInode", f"{self.doc['stage']} is not the staging folder this journal's run made "
                              "(another inode)")

    def sub(self, base: str, name: str, create: bool = False) -> int | None:
        """The folder `name` in the folder `base` (a key of fds), opened without following a link; None
        when it does not exist (created first when `create`)."""
        key = f"{base}/{name}"
        if key not in self.fds:
            if create:
                try:
                    os.mkdir(name, 0o755, dir_fd=self.fds[base])
                except FileExistsError:
                    pass
            found = _lstat(name, self.fds[base])
            if found is None:
                return None
            try:
                if _kind(found) != "d":
                    raise OSError(errno.ENOTDIR, _describe(found))
                self.fds[key] = os.open(name, _DIR_FLAGS, dir_fd=self.fds[base])   # no link, even one swapped in
            except OSError as exc:
                head, sep, rest = base.partition("/")       # "out", "stage", "stage/.removed"
                where = (self.doc["stage"] if head == "stage" else self.out.name) + sep + rest
                raise self.refuse("", f"{where}/{name} is not a folder "
                                  f"({'a symlink' if exc.errno == errno.ELOOP else exc.strerror}); links are not followed")
        return self.fds[key]

    def place(self, base: str, rel: str, create: bool = False) -> tuple[int | None, str]:
        """(descriptor of the folder holding `rel` under `base`, the entry's name)."""
        head, sep, tail = rel.partition("/")
        return (self.sub(base, head, create), tail) if sep else (self.fds[base], rel)

    def check(self) -> None:
        """Every op's entries are what gpuop's own steps leave (done, or ready to do), before anything moves:
        a source of the kind its form names (a folder or a regular file, never a link), an exchange's new tree
        with the recorded inode, a renamed folder's target free."""
        for i, (op, rel, inode) in enumerate(self.doc["ops"]):
            want = FORMS[op][_form(rel)]
            if op == "remove":
                self.place("out", rel)        # its folder must be a real one (or missing: done)
                if self.sub("stage", TRASH) is not None:      # so must the trash be, when a stopped run made it
                    self.place(f"stage/{TRASH}", rel)
                continue
            sfd, sname = self.place("stage", rel)
            dfd, dname = self.place("out", rel)
            src = _lstat(sname, sfd) if sfd is not None else None
            dst = _lstat(dname, dfd) if dfd is not None else None
            if op == "exchange" and dst is not None and dst.st_ino == inode:
                continue                      # done: OUT has the new tree
            if src is None:
                if op == "exchange":
                    raise self.refuse(f"ops[{i}]", f"exchange {rel}: the new tree is not in the staging folder and "
                                      f"{self.out.name}/{rel} is not it")
                continue                      # a rename whose source is gone is done
            if _kind(src) != want:
                raise self.refuse(f"ops[{i}]", f"{op} {rel}: the staging folder's entry is {_describe(src)}, "
                                  f"expected {_describe_kind(want)}; links are not followed")
            if op == "exchange" and src.st_ino != inode:
                raise self.refuse(f"ops[{i}]", f"exchange {rel}: the staging folder's entry is not the new tree this "
                                  "journal's run made (another inode)")
            if dst is not None and _kind(dst) not in _TARGETS[op, want]:
                raise self.refuse(f"ops[{i}]", f"{op} {rel}: {self.out.name}/{rel} is {_describe(dst)}; gpuop's plan "
                                  "never puts a new entry over it")


# what an op may find at its target in OUT while it is still to do: a folder is renamed only where there is none
# and exchanged only with a folder; a file replaces a file (or a link, which a rename replaces, never follows)
_TARGETS = {("rename", "d"): (), ("rename", "f"): ("f", "a symlink"), ("exchange", "d"): ("d",)}


def _describe(st: os.stat_result | None) -> str:
    return _describe_kind(_kind(st))


def _describe_kind(kind: str) -> str:
    return {"d": "a folder", "f": "a regular file", "missing": "missing"}.get(kind, kind)


def apply(out: Path, step, exchange) -> None:
    """Every step of the journal in `out`, in order (each idempotent), then the journal removed: the commit
    is complete (the caller removes the staging folder, which now holds the old trees). The journal is
    checked first (load, _Dirs.check): a UserError with nothing moved when it is not one gpuop's run wrote.
    `exchange(fd_a, a, fd_b, b)` swaps two entries of two folders atomically (renameat2)."""
    doc = load(out)
    with _Dirs(out, doc, _shown(out)) as dirs:
        if dirs.stage_missing:
            raise dirs.refuse("stage", f"{doc['stage']} is gone")
        dirs.check()
        _run(dirs, step, exchange)


def _run(dirs: _Dirs, step, exchange) -> None:
    for op, rel, inode in dirs.doc["ops"]:
        if op == "rename":
            sfd, sname = dirs.place("stage", rel)
            if sfd is not None and _lstat(sname, sfd) is not None:
                step("journal-add" if rel.startswith("charts/") or "/" not in rel and rel not in FLEET_FILES
                     else "journal-fleet")
                dfd, dname = dirs.place("out", rel, create=True)
                os.rename(sname, dname, src_dir_fd=sfd, dst_dir_fd=dfd)
        elif op == "exchange":
            dst = _lstat(rel, dirs.fds["out"])
            if dst is None or dst.st_ino != inode:
                step("journal-exchange")
                if dst is not None:
                    if not exchange(dirs.fds["stage"], rel, dirs.fds["out"], rel):
                        raise OSError("the file system cannot exchange two folders atomically")
                else:
                    os.rename(rel, rel, src_dir_fd=dirs.fds["stage"], dst_dir_fd=dirs.fds["out"])
        elif op == "remove":
            dfd, dname = dirs.place("out", rel)
            if dfd is not None and _lstat(dname, dfd) is not None:
                step("journal-remove")
                dirs.sub("stage", TRASH, create=True)
                tfd, tname = dirs.place(f"stage/{TRASH}", rel, create=True)
                os.rename(dname, tname, src_dir_fd=dfd, dst_dir_fd=tfd)   # atomic: never half a folder in OUT
    os.fsync(dirs.fds["out"])
    step("journal-done")
    os.unlink(JOURNAL, dir_fd=dirs.fds["out"])   # the commit is complete; the staging folder (old trees) is a leftover


def recover(out: Path, step, exchange) -> str | None:
    """Under the output lock: complete a commit a stopped run left (its journal is in the output folder).
    A journal whose staging folder is gone (removed by hand, or a checkout that never had it) cannot be
    completed: its steps already done are kept and the journal is dropped; the next compile checks every
    folder by content anyway. A journal that is not one gpuop's run wrote is a UserError, nothing moved."""
    if not pending(out):
        return None
    shown = _shown(out)
    doc = load(out)
    with _Dirs(out, doc, shown) as dirs:
        if dirs.stage_missing:
            os.unlink(JOURNAL, dir_fd=dirs.fds["out"])
            return f"dropped the journal of {Path(out).name} (its staging folder is gone)"
        dirs.check()
        try:
            _run(dirs, step, exchange)    # its staging folder goes with the other leftovers (write.recover)
        except OSError as exc:            # the place (read-only, no exchange): the journal stays for the next run
            raise UserError(Issue(shown, 0, 0, "", f"cannot complete the interrupted commit: {exc.strerror or exc}; "
                                  "every cluster folder is whole, and the next gpuop command completes the commit"))
    return f"completed the interrupted commit of {Path(out).name}"


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
