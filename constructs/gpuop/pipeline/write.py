"""Stage 7, write: the output transaction — lock, build the whole new tree beside, one atomic exchange.

The contract (docs/output-transaction.md): whatever interrupts a run (kill -9, Ctrl-C, a full disk,
power loss of the process), the output folder is the previous tree or the new one, whole.

- Lock: `flock` on `.<OUT>.lock` beside the output folder (never inside it: the folder itself is
  exchanged). The kernel drops the lock when its holder dies, so a lock file left by a killed run is
  stale by construction and the next run takes it over; the file names the holder's pid for the
  "another gpuop is writing OUT (pid N)" message. The build cache has its own lock (cache.py).
- Build: every file of the new tree goes into `.<OUT>.new-XXXX` beside the target. Unchanged
  cluster folders and chart archives are hard-linked (copied across file systems) from the live tree,
  never moved out of it: the live tree stays whole until the exchange.
- Swap: one `renameat2(RENAME_EXCHANGE)` swaps the two folders atomically; the old tree, now under
  the temporary name, is deleted afterwards. Where the kernel or file system lacks the exchange, two
  renames through `.<OUT>.old-XXXX/tree`, and the next run restores that tree if it was killed between
  them (the one window where OUT is missing).
- Leftovers of killed runs (`.<OUT>.new-*`, `.<OUT>.old-*`) are removed by the next run under the lock.
- Ownership (pipeline/ownership.py): a folder is replaced only if it carries gpuop's marker
  (`.gpuop-output`, naming the project by its repository, gitops.repoURL) or is recognisably gpuop output
  from before the marker (adopted); never the project or a parent of it.

The previous output is read by pipeline/previous.py, a compiled output's integrity checked by
pipeline/integrity.py; their names stay importable from here.

Upstream Helm writes in place; gpuop differs on purpose because dist/ is applied by GitOps engines and a
half-written tree committed by CI removes clusters from the fleet.
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import os
import shutil
import signal
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from gpuop.errors import Issue, UserError
from gpuop.pipeline.ownership import _marker_text
# the output's other concerns, in their own modules; their names stay importable from here
from gpuop.pipeline.integrity import output_issues  # noqa: F401
from gpuop.pipeline.ownership import MARKER, check_target  # noqa: F401
from gpuop.pipeline.previous import (  # noqa: F401
    SHARD_KEY, Previous, _parse_beside, mark_shard, read_index, read_lock, read_previous)


# ---- test hooks: stop at the Nth file-system step, force the fallback --------------------------------

@dataclass
class Hooks:
    """What the crash-safety tests inject into the writer (the CLI builds it from the environment, Hooks.from_env;
    the library itself reads no environment): `kill_at` N (a number), NAME (a named step such as `exchange`)
    or NAME:K (the Kth step of that name) makes the process kill itself with `sig` right before that step,
    so a run stops at an exact point; `no_exchange` forces the two-rename fallback. Unset (always, outside the
    tests) a step costs one counter."""
    kill_at: str | None = None
    sig: int = signal.SIGKILL
    no_exchange: bool = False
    steps: int = 0
    named: dict = field(default_factory=dict)

    @classmethod
    def from_env(cls, env=None) -> "Hooks":
        env = os.environ if env is None else env
        return cls(kill_at=env.get("GPUOP_KILL_AT") or None,
                   sig=signal.SIGINT if env.get("GPUOP_KILL_SIGNAL") == "INT" else signal.SIGKILL,
                   no_exchange=bool(env.get("GPUOP_TEST_NO_EXCHANGE")))

    def step(self, what: str) -> None:
        self.steps += 1
        at = self.kill_at
        if at and ":" in at:               # NAME:K, the Kth step of that name (a kill among the journal's steps)
            name, _, k = at.partition(":")
            if name == what:
                self.named[what] = self.named.get(what, 0) + 1
                at = what if k.isdigit() and int(k) == self.named[what] else None
            else:
                at = None
        if at and (at == what or (at.isdigit() and int(at) == self.steps)):
            os.kill(os.getpid(), self.sig)


_HOOKS = [Hooks()]


def use_hooks(hooks: Hooks) -> None:
    """Install the hooks the writer's steps go through (the CLI: Hooks.from_env())."""
    _HOOKS[0] = hooks


def step(what: str) -> None:
    """One file-system step of the writer, through the installed hooks (Hooks)."""
    _HOOKS[0].step(what)


def steps_taken() -> int:
    return _HOOKS[0].steps


# ---- locking ------------------------------------------------------------------------------------------

@contextmanager
def locked(path: Path, what: str):
    """An exclusive flock on `path`; a second run exits 2 naming the holder. A lock file whose holder
    died is free (the kernel released it) and is simply taken over. The holder removes the file (and the
    folder it made for it, when empty) before releasing, so a run leaves nothing beside the output;
    whoever locks checks that the file it holds is still the one at `path` (a releasing holder may have
    removed it meanwhile), else it opens the new one."""
    made_parent = not path.parent.exists()
    for _ in range(100):
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:             # unwritable or full: the place, not gpuop
            raise UserError(Issue(what, 0, 0, "", f"cannot create the lock file: {exc.strerror or exc} "
                                  f"({exc.filename or path}); nothing was changed"))
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 64, 0).decode(errors="replace").strip() or "unknown"
            os.close(fd)
            raise UserError(Issue(what, 0, 0, "", f"another gpuop is writing {what} (pid {holder}); "
                                  "wait for it to finish, then run again"))
        try:
            same = os.stat(path).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            same = False
        if same:
            break
        os.close(fd)                       # the previous holder removed this file as it released it
    else:
        raise UserError(Issue(what, 0, 0, "", f"cannot take the lock {path}: it keeps changing; nothing was changed"))
    try:
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        except OSError:               # a full disk: the lock holds anyway, only the pid is unknown
            pass
        yield
    finally:
        try:
            os.unlink(path)           # still holding the lock: a newcomer re-checks the inode (above)
            if made_parent:
                os.rmdir(path.parent)  # only when empty (a failed first compile leaves no cache folder)
        except OSError:
            pass
        os.close(fd)


def lock_path(out: Path) -> Path:
    out = Path(out).absolute()
    return out.parent / f".{out.name}.lock"


@contextmanager
def output_lock(out: Path):
    with locked(lock_path(out), str(out)):
        recover(Path(out).absolute())
        yield


# ---- recovery of leftovers ------------------------------------------------------------------------

def recover(out: Path) -> list[str]:
    """Under the lock: restore a tree a killed run left between the two fallback renames, and remove
    every temporary folder of earlier runs. Returns what was done (for tests and -v)."""
    done = []
    parent = out.parent
    if not parent.is_dir():
        return done
    olds = sorted(parent.glob(f".{out.name}.old-*"))
    if not out.exists():
        for old in olds:
            # real folders only: a planted `.<OUT>.old-X/tree` symlink must not become OUT
            if not old.is_symlink() and (old / "tree").is_dir() and not (old / "tree").is_symlink():
                os.rename(old / "tree", out)      # killed between the two renames: the previous tree is whole
                done.append(f"restored {out} from {old.name}")
                break
    from gpuop.pipeline import journal

    if out.is_dir():
        note = journal.recover(out, step, _exchange_at)   # before the leftovers: its staging folder is one
        if note:
            done.append(note)
    for leftover in olds + sorted(parent.glob(f".{out.name}.new-*")):
        shutil.rmtree(leftover, ignore_errors=True)
        done.append(f"removed {leftover.name}")
    return done


# ---- writing ------------------------------------------------------------------------------------------

_WRITE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_CLOEXEC", 0)


class Staging:
    """The new tree, built beside OUT as `.<OUT>.new-XXXX` (the caller holds output_lock(OUT)). A streaming
    compile writes each cluster's files here as soon as they are built, so no process holds the whole
    output; `write_tree` finishes it and exchanges it with OUT, `discard` removes it."""

    def __init__(self, out: Path):
        self.out = Path(out).absolute()
        try:
            self.out.parent.mkdir(parents=True, exist_ok=True)
            step("mkdtemp")
            self.tmp = Path(tempfile.mkdtemp(prefix=f".{self.out.name}.new-", dir=self.out.parent))
            os.chmod(self.tmp, 0o755)
        except OSError as exc:
            raise _place_error(self.out, exc)
        self._tmp = str(self.tmp)
        self._made: set[str] = {self._tmp}
        self.journaled = False        # a journal names this folder: never discarded (pipeline/journal.py)

    def _parent(self, target: Path) -> None:
        parent = os.path.dirname(target)
        if parent not in self._made:
            os.makedirs(parent, exist_ok=True)
            self._made.add(parent)

    def write(self, rel: str, data) -> None:
        # plain strings and one os.write: a cold compile writes ~45 files per cluster, and pathlib's objects
        # and a buffered file's isatty/fstat/lseek calls cost more than the write itself
        target = os.path.join(self._tmp, rel)
        try:
            self._parent(target)
            step("write")
            fd = os.open(target, _WRITE_FLAGS, 0o666)
            try:
                view = memoryview(data.encode("utf-8") if isinstance(data, str) else data)
                while view:
                    view = view[os.write(fd, view):]
            finally:
                os.close(fd)
        except OSError as exc:
            raise _place_error(self.out, exc)

    def link(self, source: Path, rel: str) -> None:
        """Every regular file under source/rel, hard-linked (copied across file systems) into the new tree."""
        # plain strings and scandir: at a thousand clusters this links ~40,000 files, and pathlib's
        # objects cost more than the link calls themselves (bench/profile.py)
        src, dst = os.path.join(source, rel), os.path.join(self.tmp, rel)
        if not os.path.isdir(src):
            if os.path.isfile(src):
                self._parent(dst)
                step("link")
                _link_or_copy(src, dst)
            return
        self._parent(dst)
        stack = [(src, dst)]
        while stack:
            s, d = stack.pop()
            if d not in self._made:
                try:
                    os.mkdir(d)
                except FileExistsError:      # a cluster's new files were streamed into it already
                    pass
                self._made.add(d)
            with os.scandir(s) as it:
                found = sorted(it, key=lambda e: e.name)
            for e in found:
                if e.is_dir(follow_symlinks=False):
                    stack.append((e.path, os.path.join(d, e.name)))
                elif e.is_file():
                    step("link")
                    _link_or_copy(e.path, os.path.join(d, e.name))

    def discard(self) -> None:
        shutil.rmtree(self.tmp, ignore_errors=True)


def _place_error(out: Path, exc: OSError) -> UserError:
    """The place, not gpuop: unwritable, full, read-only."""
    return UserError(Issue(str(out), 0, 0, "", f"cannot write the output folder: {exc.strerror or exc} "
                           f"({exc.filename or out}); {out.name} was not changed"))


def write_tree(out: Path, files: dict | tuple, reuse: tuple = (), *, project: Path | None = None,
               repo: str = "", source: Path | None = None, staging: Staging | None = None) -> None:
    """Write `files` (and link the `reuse` paths unchanged from the current `out`) into a new tree beside
    `out` (or into `staging`, which already holds what a streaming compile wrote), then exchange the two.
    On any failure the new tree is removed and `out` is as it was.
    `source`: where the `reuse` paths are (default `out`; a shard continues from another output).
    The caller holds output_lock(out)."""
    out = Path(out).absolute()
    staging = staging or Staging(out)
    try:
        _write_tree(staging, files, reuse, _marker_text(repo), Path(source).absolute() if source else out)
    except OSError as exc:
        if staging.journaled and not committed():   # the journal stays with its staging folder: the next run completes it
            raise UserError(Issue(str(out), 0, 0, "", f"the commit of {out.name} was cut short: {exc.strerror or exc} "
                                  f"({exc.filename or out}); every cluster folder is whole, and the next gpuop "
                                  "command completes the commit"))
        staging.discard()
        raise _place_error(out, exc)
    except BaseException:
        if not staging.journaled or committed():
            staging.discard()
        raise


def _link_or_copy(src: Path, dst: Path) -> None:
    try:
        os.link(src, dst)
    except OSError as exc:
        if exc.errno not in (errno.EXDEV, errno.EPERM, errno.EMLINK, errno.ENOTSUP):
            raise
        shutil.copy2(src, dst)


def _write_tree(staging: Staging, files, reuse, marker: str, source: Path) -> None:
    journaled = source == staging.out and staging.out.is_dir() and not staging.out.is_symlink() \
        and _can_exchange(staging.tmp)
    if not journaled:                 # a new output, another source (a shard), no atomic exchange: whole tree
        for rel in reuse:
            staging.link(source, rel)
    for rel, text in (files.items() if isinstance(files, dict) else files):
        staging.write(rel, text)
    step("marker")
    (staging.tmp / MARKER).write_text(marker)
    step("fsync")
    _sync_tree(staging.tmp)
    if not journaled:
        _swap(staging.tmp, staging.out)
        return
    # only what changed is put in place, cluster by cluster, under a journal (pipeline/journal.py)
    from gpuop.pipeline import journal

    keep = {rel for rel in reuse if "/" not in rel}
    keep_charts = {rel.split("/", 1)[1] for rel in reuse if rel.startswith("charts/")}
    ops = journal.plan(staging.tmp, staging.out, keep, keep_charts)
    journal.write(staging.out, staging.tmp, ops, step)
    staging.journaled = True          # from here the commit is completed, never discarded
    journal.apply(staging.out, step, _exchange_at)
    _COMMITTED.append(staging.out)
    step("cleanup")                   # the staging folder now holds the old trees of the changed clusters
    shutil.rmtree(staging.tmp, ignore_errors=True)


_EXCHANGE_OK: list = []


def _can_exchange(tmp: Path) -> bool:
    """Whether this file system exchanges two folders atomically (probed once, on two empty folders in the
    staging folder): the journaled commit needs it for every changed cluster."""
    if not _EXCHANGE_OK:
        a, b = tmp / ".probe-a", tmp / ".probe-b"
        try:
            a.mkdir()
            b.mkdir()
            _EXCHANGE_OK.append(_exchange(a, b))
        except OSError:
            _EXCHANGE_OK.append(False)
        finally:
            for p in (a, b):
                try:
                    p.rmdir()
                except OSError:
                    pass
    return _EXCHANGE_OK[0]


def _sync_tree(tmp: Path) -> None:
    """The new tree's data on disk before it becomes visible: after a power loss the exchanged folder
    must not hold empty files. One syncfs for the whole file system (much cheaper than a per-file fsync)."""
    fd = os.open(tmp, os.O_RDONLY)
    try:
        libc = _libc()
        if libc is not None and hasattr(libc, "syncfs"):
            libc.syncfs(fd)
        else:
            os.sync()
    finally:
        os.close(fd)


_LIBC = []


def _libc():
    if not _LIBC:
        try:
            _LIBC.append(ctypes.CDLL(None, use_errno=True))
        except OSError:
            _LIBC.append(None)
    return _LIBC[0]


RENAME_EXCHANGE = 2
AT_FDCWD = -100


def _exchange(a: Path, b: Path) -> bool:
    """renameat2(a, b, RENAME_EXCHANGE): both names swap in one step. False when unsupported."""
    return _exchange_at(AT_FDCWD, a, AT_FDCWD, b)


def _exchange_at(fd_a: int, a, fd_b: int, b) -> bool:
    """renameat2 of the entry `a` of the folder open as `fd_a` and `b` of `fd_b` (AT_FDCWD: paths from the
    working folder), RENAME_EXCHANGE. False when unsupported. The journal passes folder descriptors opened
    without following a link, so no name can reach outside them (pipeline/journal.py)."""
    libc = _libc()
    if libc is None or not hasattr(libc, "renameat2") or _HOOKS[0].no_exchange:
        return False              # the test hook exercises the two-rename fallback
    rc = libc.renameat2(fd_a, os.fsencode(a), fd_b, os.fsencode(b), RENAME_EXCHANGE)
    if rc == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.EINVAL, errno.ENOSYS, errno.ENOTSUP):
        return False
    raise OSError(err, os.strerror(err), str(b))


def _swap(tmp: Path, out: Path) -> None:
    if not out.exists():
        step("rename")
        os.rename(tmp, out)
        _COMMITTED.append(out)
        return
    step("exchange")
    if _exchange(tmp, out):
        _COMMITTED.append(out)
        step("cleanup")                   # tmp now holds the old tree
        shutil.rmtree(tmp, ignore_errors=True)
        return
    old = Path(tempfile.mkdtemp(prefix=f".{out.name}.old-", dir=out.parent))
    step("rename-old")
    os.rename(out, old / "tree")          # from here until the next rename, recover() restores old/tree
    step("rename-new")
    os.rename(tmp, out)
    _COMMITTED.append(out)
    step("cleanup")
    shutil.rmtree(old, ignore_errors=True)


def committed() -> bool:
    """True once this process has put a new tree in place, or written the journal that completes it (for the
    Ctrl-C message)."""
    return bool(_COMMITTED)


_COMMITTED: list = []
