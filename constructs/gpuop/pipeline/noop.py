"""The no-op path: a synth whose inputs and output are both as the last run left them writes nothing.

A fleet's CI runs `gpuop synth` on every push, and most pushes change no profile. Proving that the
output is still right then needs neither the profiles' validation, nor the build cache's entries, nor
the bytes of the output: after every successful synth, a small state file in the cache folder
(`<cache>/outputs/<digest of the output path>.json`) records
- the inputs: the stats (path, size, mtime, ctime, inode) of every file of the profiles trees the
  command names (parents must lie inside them, profile/load.parent_problem) and of the settings file,
  gpuop's code and catalogs (code_digest), and the command's own options (paths, output, shard);
- the output as written: the output folder's inode, the shape of each top-level entry (the relative
  path of every file and folder in it; clusters of one design share a shape, so the state stays small)
  and a digest of the (inode, ctime) of each of those entries, taken right after the write (and
  after the old tree's removal, which changes the ctime of the files both trees shared);
- what the run printed (warnings and the summary's counts), to print it again.

The next synth computes both from stats alone — no file read, no folder read below the top, no YAML,
no settings, no Node — and, when both match, prints what the last run printed and stops: nothing is linked or replaced. The kernel sets
a file's ctime on every change and nobody can set it back, so a hand edit, even one that restores the
size and the mtime, is seen (as is `touch`, which only costs the shortcut); a file added, removed or
renamed anywhere moves the ctime of the folder it is in, which is one of the entries stat'ed.
Anything else (a state file missing or damaged, a changed profile, a touched output file) takes the
normal path, which checks the output by content (pipeline/run.py, outputs/cluster.reusable).
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import stat
import threading
from array import array
from contextlib import contextmanager
from functools import partial
from pathlib import Path

from gpuop.errors import Issue
from gpuop.pipeline.cache import BuildCache, _atomic_write, code_digest

STATE_VERSION = 3


def _state_path(cache_root: Path, out: Path) -> Path:
    key = hashlib.sha256(os.fsencode(Path(out).absolute())).hexdigest()[:32]
    return Path(cache_root) / "outputs" / f"{key}.json"


def _subtree(top: str) -> list:
    """(path, inode, ctime, mode) of every file under `top` and the path of every folder, in directory
    order (stable while a folder is unchanged; any change to a folder changes its entries anyway). For
    the inputs (the profiles trees), which are walked on every run."""
    acc, stack = [], [top]
    append = acc.append
    while stack:
        with os.scandir(stack.pop()) as it:
            for e in it:
                if e.is_dir(follow_symlinks=False):      # d_type from readdir: no syscall
                    append(e.path)
                    stack.append(e.path)
                else:
                    st = e.stat(follow_symlinks=False)
                    append((e.path, st.st_ino, st.st_ctime_ns, st.st_mode))
    return acc


def _shape(top: str) -> list[str]:
    """Relative path of every file and folder under `top` (folders end in "/"), sorted: what the next
    check stats without reading a folder. Empty for a file."""
    rels, stack, cut = [], [top], len(top) + 1
    while stack:
        with os.scandir(stack.pop()) as it:
            for e in it:
                if e.is_dir(follow_symlinks=False):
                    rels.append(e.path[cut:] + "/")
                    stack.append(e.path)
                else:
                    rels.append(e.path[cut:])
    rels.sort()
    return rels


def _tails(shape: list[str]) -> list[str]:
    """"/rel" of every entry of a shape (folders without their "/"): what follows a top-level name in its paths."""
    return [f"/{r[:-1] if r[-1] == '/' else r}" for r in shape]


def _paths(name: str, shape: list[str]) -> list[str]:
    """The entry itself and everything in it, relative to the output folder."""
    return [name] + [name + t for t in _tails(shape)]


_PARALLEL = 8192     # below this many entries a second process costs more than it saves


def _can_fork() -> bool:
    """A second process for stats: two cores, fork available, and no thread running (a forked copy of a
    process with threads may hold their locks)."""
    return (os.cpu_count() or 1) >= 2 and hasattr(os, "fork") and threading.active_count() == 1


def _in_child(work) -> tuple[int, int]:
    """Fork a child that writes `work()`'s bytes to a pipe and exits without any cleanup (an exception: a short
    answer, which the parent replaces by doing the work itself); returns (pid, read end). Only where _can_fork."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.close(r)
            data = memoryview(work())
            while data:
                data = data[os.write(w, data):]
            code = 0
        except BaseException:  # noqa: BLE001 - reported as a failed exit
            pass
        os._exit(code)
    os.close(w)
    return pid, r


def _answer(pid: int, r: int) -> bytes | None:
    """The child's bytes (None when it failed). Always drains and reaps: a child blocked on a full pipe never exits."""
    chunks = []
    try:
        while True:
            chunk = os.read(r, 1 << 20)
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(r)
        _, status = os.waitpid(pid, 0)
    return b"".join(chunks) if status == 0 else None


def _stats(fd: int, groups: list, split: bool = True) -> tuple[array, array]:
    """(inodes, ctimes) of the entries of each (top-level name, shape) in `groups`, in the order of _paths,
    lstat'ed relative to the open folder `fd` (one path component less to look up than from the root:
    measurably faster at 50,000 entries); a lost entry gets inode 0, ctime -1, which no digest recorded from a
    real entry matches. A large tree is split with a forked child that stats the second half of the groups on
    the other core and sends its arrays back through a pipe: measured 1.7x faster than one process at 53,000
    entries, where threads were slower (the GIL is taken back after every lstat; bench/floors.py)."""
    total = sum(1 + len(shape) for _, shape in groups)
    if not split or total < _PARALLEL or not _can_fork():
        return _arrays(fd, groups)
    half, seen = 0, 0
    while seen < total // 2:
        seen += 1 + len(groups[half][1])
        half += 1

    def second_half() -> bytes:
        ino, ct = _arrays(fd, groups[half:])
        return ino.tobytes() + ct.tobytes()
    pid, r = _in_child(second_half)
    try:
        ino, ct = _arrays(fd, groups[:half])
    finally:
        data = _answer(pid, r)
    rest = total - seen
    if data is None or len(data) != 16 * rest:        # the child failed: this process stats its half
        more = _arrays(fd, groups[half:])
    else:
        more = (array("Q", data[:8 * rest]), array("q", data[8 * rest:]))
    ino.extend(more[0])
    ct.extend(more[1])
    return ino, ct


_BATCH = 2048       # paths made and stat'ed at a time


def _arrays(fd: int, groups: list) -> tuple[array, array]:
    # a batch at a time: 500,000 paths and their stat results held at once were ~300 MB of fresh pages, and on a
    # machine whose memory the page cache fills each such page costs a reclaim (a slow first run after git's
    # pass over a large tree)
    stat_at = partial(os.stat, dir_fd=fd, follow_symlinks=False)
    inodes, ctimes = array("Q"), array("q")
    batch: list[str] = []
    end = len(groups) - 1
    # clusters of one design share their shape: its "/rel" parts are made once (the shape is held beside them, so
    # its id stays its own while this runs)
    tails: dict = {}
    for i, (name, shape) in enumerate(groups):
        tail = tails.get(id(shape))
        if tail is None:
            tail = tails[id(shape)] = (shape, _tails(shape))
        batch.append(name)
        batch += [name + t for t in tail[1]]
        if len(batch) < _BATCH and i < end:
            continue
        try:
            stats = list(map(stat_at, batch))
        except OSError:                             # an entry is gone: the rest still counts, one by one
            stats = []
            for p in batch:
                try:
                    stats.append(stat_at(p))
                except OSError:
                    stats.append(None)
            inodes.extend([s.st_ino if s else 0 for s in stats])
            ctimes.extend([s.st_ctime_ns if s else -1 for s in stats])
        else:
            inodes.extend([s.st_ino for s in stats])
            ctimes.extend([s.st_ctime_ns for s in stats])
        batch = []
    return inodes, ctimes


def _digest(stats: tuple[array, array], at: int = 0, n: int | None = None) -> str:
    """Digest of the inode and ctime of entries at..at+n of `stats` (_stats). The kernel moves a file's
    ctime on any change to its content or metadata (chmod included; nobody can set it back), a file
    replaced by another has a new inode, and a folder's ctime moves when an entry is added, removed or
    renamed in it: one lstat per entry finds every edit, with no folder read. Packed as arrays: repr() of
    the tuples cost more than the stats."""
    inodes, ctimes = stats
    end = len(inodes) if n is None else at + n
    return hashlib.sha256(inodes[at:end].tobytes() + ctimes[at:end].tobytes()).hexdigest()


@contextmanager
def _folder(out: Path):
    fd = os.open(out, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        yield fd
    finally:
        os.close(fd)


def describe(out: Path, before: dict | None = None, kept: frozenset = frozenset()) -> dict | None:
    """The output as written, for the next run's checks: the folder's inode, the shape of each top-level
    entry (a cluster folder, index.json, charts/, ...; clusters of one design share a shape, so the state
    stays small) and the digest of its entries' stats. None when `out` is not a folder.
    `before`, `kept`: the tree the last run recorded and the entries this run found as recorded there by
    their stats (unchanged_folders) and did not write: their shape and digest are taken from it, neither
    listed nor stat'ed again. The writes of this run never touch them (the journaled commit exchanges only
    the changed clusters; the whole-tree exchange links every file, which moves its ctime, so nothing is
    kept then: see pipeline/synth.py)."""
    try:
        base = os.fspath(Path(out).absolute())
        old_shapes = (before or {}).get("shapes") or []
        old_parts = (before or {}).get("parts") or {}
        with _folder(base) as fd:
            shapes: list = []
            index: dict = {}
            parts = {}
            for name in sorted(os.listdir(fd)):
                if name in kept and name in old_parts:
                    # as recorded: an edit since this run's check moved a ctime away from it, so the next
                    # run sees that edit as it would have seen it now
                    shape = old_shapes[old_parts[name][0]]
                    key = "\0".join(shape)
                    if key not in index:
                        index[key] = len(shapes)
                        shapes.append(shape)
                    parts[name] = [index[key], old_parts[name][1]]
                    continue
                is_dir = stat.S_ISDIR(os.stat(name, dir_fd=fd, follow_symlinks=False).st_mode)
                shape = _shape(f"{base}/{name}") if is_dir else []
                key = "\0".join(shape)
                if key not in index:
                    index[key] = len(shapes)
                    shapes.append(shape)
                stats = _stats(fd, [(name, shape)])
                if 0 in stats[0]:                   # an entry went away while this was listed: record nothing
                    raise OSError(errno.ENOENT, "entry removed while recorded", name)
                parts[name] = [index[key], _digest(stats)]
            return {"root": os.fstat(fd).st_ino, "shapes": shapes, "parts": parts}
    except OSError:
        return None


def unchanged(out: Path, tree: dict) -> bool:
    """The whole output is as `tree` (describe) recorded it: the same folder, the same top-level names,
    and every entry's stats the same. One lstat per entry, no folder read below the top."""
    try:
        with _folder(out) as fd:
            if os.fstat(fd).st_ino != tree["root"] or sorted(os.listdir(fd)) != sorted(tree["parts"]):
                return False
            shapes, parts = tree["shapes"], sorted(tree["parts"].items())
            stats = _stats(fd, [(name, shapes[shape]) for name, (shape, _) in parts])    # one call for the whole tree
        at = 0
        for _, (shape, digest) in parts:     # the same digests as describe(), entry by entry
            n = 1 + len(shapes[shape])
            if _digest(stats, at, n) != digest:
                return False
            at += n
        return True
    except (OSError, KeyError, TypeError, ValueError, IndexError):
        return False


def _profiles_root(path: Path) -> str | None:
    """The tree a profile argument may extend files from (profile/load.profiles_root, for a folder or a file):
    parents must lie inside it, so its stats cover them. None when it is the working folder itself (a walk
    would cover the whole project: the shortcut is not worth it there)."""
    here = os.path.realpath(path if os.path.isdir(path) else os.path.dirname(os.path.abspath(path)))
    cwd = os.path.realpath(os.getcwd())
    if here == cwd:
        return None
    if here.startswith(cwd + os.sep):
        return os.path.join(cwd, os.path.relpath(here, cwd).split(os.sep)[0])
    return here


def month() -> str:
    """The month the driver lifecycle rule judges by (validate/compat.today: SOURCE_DATE_EPOCH or today): a
    warning that a branch reached its end of life may start with a new month, with no input changed."""
    import datetime

    epoch = os.environ.get("SOURCE_DATE_EPOCH", "")
    if epoch.isdigit():
        return datetime.datetime.fromtimestamp(int(epoch), datetime.timezone.utc).strftime("%Y-%m")
    return datetime.date.today().strftime("%Y-%m")


def inputs_fingerprint(paths: list[Path], settings: Path, out: Path, options: tuple, walks: dict | None = None) -> str | None:
    """Digest of everything the output depends on, from stats alone (one lstat per file of the profiles
    trees and the settings file), plus gpuop's code and catalogs; None where the shortcut does not apply.
    A profile or parent edited, added, removed or touched changes it; so does a changed gpuop. `walks`:
    walk_inputs(paths) taken earlier in this command (older stats only make the next run check more)."""
    h = hashlib.sha256(code_digest().encode())
    h.update(repr((str(Path(out).absolute()), [str(Path(p).absolute()) for p in paths], options, month())).encode())
    try:
        st = os.stat(settings)
        h.update(f"{os.path.realpath(settings)}\0{st.st_size}\0{st.st_mtime_ns}\0{st.st_ctime_ns}\0{st.st_ino}\n".encode())
        for p in paths:
            h.update(f"arg\0{os.path.realpath(p)}\0{os.lstat(p).st_ino}\n".encode())
        walks = walk_inputs(paths) if walks is None else walks
        if walks is None:
            return None
        for root in sorted(walks):
            h.update(repr(walks[root]).encode())      # the same walk as the output's
    except OSError:
        return None
    return h.hexdigest()


def walk_inputs(paths: list[Path]) -> dict | None:
    """root -> _subtree(root) of every profiles tree the arguments name (what inputs_fingerprint and input_stats
    read; one walk serves both); None where the shortcut does not apply or a tree cannot be read."""
    roots = set()
    for p in paths:
        root = _profiles_root(Path(p))
        if root is None:
            return None
        roots.add(root)
    try:
        return {root: _subtree(root) for root in sorted(roots)}
    except OSError:
        return None


def load(cache: BuildCache, out: Path) -> dict | None:
    if cache.root is None:
        return None
    try:
        state = json.loads(_state_path(cache.root, out).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return state if isinstance(state, dict) and state.get("version") == STATE_VERSION else None


def replay(cache: BuildCache, out: Path, inputs: str | None) -> dict | None:
    """The last run's printed result when nothing changed since it: inputs and output tree as recorded."""
    state = load(cache, out) if inputs is not None else None
    if state is None or state.get("inputs") != inputs or not isinstance(state.get("tree"), dict):
        return None
    return state if unchanged(out, state["tree"]) else None


def unchanged_folders_soon(state: dict | None, out: Path):
    """unchanged_folders(state, out), computed by a forked child while the caller goes on (a warm synth
    imports the pipeline meanwhile, on the other core); call the returned function for the answer. Where no
    child can be forked, or it fails, the answer is computed in this process."""
    if not isinstance((state or {}).get("tree"), dict) or not _can_fork():
        found = unchanged_folders(state, out)
        return lambda: found
    # the child splits again when large: the caller is busy importing for a fraction of a 10,000-cluster stat
    pid, r = _in_child(lambda: json.dumps(sorted(unchanged_folders(state, out))).encode())

    def result() -> frozenset:
        data = _answer(pid, r)
        try:
            names = json.loads(data) if data is not None else None
        except ValueError:
            names = None
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            return unchanged_folders(state, out)
        return frozenset(names)
    return result


def recorded_folders(state: dict | None) -> frozenset:
    """What unchanged_folders answers when nothing in the output changed since the last run: every entry it
    recorded, but those it kept unverified. A caller may work on it meanwhile, and must compare it with the answer
    before it commits anything."""
    tree = (state or {}).get("tree")
    parts = tree.get("parts") if isinstance(tree, dict) else None
    if not isinstance(parts, dict) or "index.json" not in parts:
        return frozenset()
    skip = state.get("unverified") or ()
    return frozenset(n for n in parts if n not in skip)


def unchanged_folders(state: dict | None, out: Path, split: bool = True, only: tuple | None = None) -> frozenset:
    """Top-level entries of `out` (cluster folders, charts/, index.json, the lock) whose every entry is as the
    last run wrote it (stats), while index.json is too: their bytes still hash to the treeDigest index.json
    records, with no need to read them. Folders the last run kept unverified are not among them. `only`: look
    at index.json and these entries alone (a few stats: what a caller needs before the whole answer)."""
    tree = (state or {}).get("tree")
    if not isinstance(tree, dict):
        return frozenset()
    try:
        with _folder(out) as fd:
            if os.fstat(fd).st_ino != tree["root"]:
                return frozenset()
            shapes, parts = tree["shapes"], tree["parts"]
            skip = set(state.get("unverified") or ())

            if "index.json" not in parts or _digest(_stats(fd, [("index.json", [])])) != parts["index.json"][1]:
                return frozenset()
            names = [n for n in parts if n != "index.json" and n not in skip and (only is None or n in only)]
            # one call for every folder: split across two processes when large
            stats = _stats(fd, [(name, shapes[parts[name][0]]) for name in names], split)
            same, at = {"index.json"}, 0
            for name in names:
                shape, digest = parts[name]
                n = 1 + len(shapes[shape])
                if _digest(stats, at, n) == digest:
                    same.add(name)
                at += n
            return frozenset(same)
    except (OSError, KeyError, TypeError, ValueError, IndexError):
        return frozenset()


def record(cache: BuildCache, out: Path, inputs: str | None, result: dict, unverified: tuple = (),
           before: dict | None = None, kept: frozenset = frozenset()) -> None:
    """After a successful synth: the inputs, the stats of the tree just written and what was printed.
    `unverified`: folders the run kept without checking their bytes against index.json (a subset compile's
    other clusters): never trusted by the next run's per-folder check, so it does check them. A failure
    to record only costs the next run its shortcut."""
    if cache.root is None:
        return
    path = _state_path(cache.root, out)
    try:
        _atomic_write(path, json.dumps({"version": STATE_VERSION, "inputs": inputs,
                                        "tree": describe(out, (before or {}).get("tree"), kept),
                                        "unverified": sorted(unverified), **result}, sort_keys=True))
    except OSError:
        pass


def forget(cache: BuildCache, out: Path) -> None:
    """Before a run replaces the output: a state that no longer describes it must not survive a failure."""
    if cache.root is not None:
        try:
            _state_path(cache.root, out).unlink(missing_ok=True)
        except OSError:
            pass


def issues_of(state: dict) -> list[Issue]:
    return [Issue(**w) for w in state.get("warnings", [])]


def input_stats(paths: list[Path], walks: dict | None = None) -> dict | None:
    """path -> [inode, ctime] of every file of the profiles trees (the same walk as inputs_fingerprint), for
    the next run's per-cluster proof (proven); None where the shortcut does not apply. `walks`: walk_inputs(paths)
    taken earlier in this command, before anything was read."""
    walks = walk_inputs(paths) if walks is None else walks
    if walks is None:
        return None
    return {e[0]: [e[1], e[2]] for root in sorted(walks) for e in walks[root] if isinstance(e, tuple)}


def proven(state: dict | None, now: dict | None, trusted: frozenset) -> dict | None:
    """What lets a synth take a cluster as it is without reading its profile, its cache entry or its folder:
    the input files whose stats are as when the last successful run read them, that run's salt (the catalogs,
    the settings, gpuop's code, the month) and each cluster's warnings; with `trusted` (unchanged_folders), the
    folders as that run wrote them; `now`: input_stats as this run found them before reading anything. The
    compile checks the rest (pipeline/run.py). None: no proof."""
    if not state or not trusted or not isinstance(state.get("files"), dict) or not isinstance(state.get("salt"), str) \
            or not isinstance(state.get("clusterWarnings"), dict):
        return None
    if now is None:
        return None
    old = state["files"]
    same = frozenset(k for k, v in now.items() if old.get(k) == v)
    return {"files": same, "salt": state["salt"], "warnings": state["clusterWarnings"], "trusted": trusted}
