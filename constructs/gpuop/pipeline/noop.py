"""The no-op path: a synth whose inputs and output are both as the last run left them writes nothing.

A fleet's CI runs `gpuop synth` on every push, and most pushes change no profile. Proving that the
output is still right then needs neither the profiles' validation, nor the build cache's entries, nor
the bytes of the output: after every successful synth, a small state file in the cache folder
(`<cache>/outputs/<digest of the output path>.json`) records
- the inputs: the stats (path, size, mtime, ctime, inode) of every file of the profiles trees the
  command names (parents must lie inside them, profile/load.parent_problem) and of the settings file,
  gpuop's code and catalogs (code_digest), and the command's own options (paths, output, shard);
- the output as written: a digest of the (path, size, mtime, ctime, inode, mode) of every entry of the
  output tree, taken right after the write (and after the old tree's removal, which changes the ctime
  of the files both trees shared);
- what the run printed (warnings and the summary's counts), to print it again.

The next synth computes both from stats alone — no file read, no YAML, no settings, no Node — and, when
both match, prints what the last run printed and stops: nothing is linked or replaced. The kernel sets
a file's ctime on every change and nobody can set it back, so a hand edit, even one that restores the
size and the mtime, is seen (as is `touch`, which only costs the shortcut).
Anything else (a state file missing or damaged, a changed profile, a touched output file) takes the
normal path, which checks the output by content (pipeline/run.py, outputs/cluster.reusable).
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from pathlib import Path

from gpuop.errors import Issue
from gpuop.pipeline.cache import BuildCache, _atomic_write, code_digest

STATE_VERSION = 1


def _state_path(cache_root: Path, out: Path) -> Path:
    key = hashlib.sha256(os.fsencode(Path(out).absolute())).hexdigest()[:32]
    return Path(cache_root) / "outputs" / f"{key}.json"


def _subtree(top: str) -> list:
    """(path, inode, ctime, mode) of every file under `top` and the path of every folder, in directory
    order (stable while a folder is unchanged; any change to a folder changes its entries anyway). A
    folder needs no stat: an entry added, removed or renamed shows in the walk itself."""
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


def tree_parts(out: Path) -> dict[str, str] | None:
    """Each top-level entry of `out` (a cluster folder, index.json, charts/, ...) -> digest of the path,
    inode, ctime and type of every file in it; None when `out` is not a folder. The kernel moves a
    file's ctime on any change to its content or metadata, and a file replaced by another has a new
    inode. One lstat per file, no file read, one thread (threads measured slower: the walk holds the GIL
    between the calls)."""
    try:
        top = os.lstat(out)
        if not stat.S_ISDIR(top.st_mode):
            return None
        parts = {"": str(top.st_ino)}       # the folder itself: replaced, it is another tree
        with os.scandir(out) as it:
            children = sorted(it, key=lambda e: e.name)
        for e in children:
            st = e.stat(follow_symlinks=False)
            part = [(e.name, st.st_ino, st.st_ctime_ns, st.st_mode)]
            if e.is_dir(follow_symlinks=False):
                part += _subtree(e.path)
            parts[e.name] = hashlib.sha256(repr(part).encode()).hexdigest()
    except OSError:
        return None
    return parts


def tree_fingerprint(out: Path, parts: dict | None = None) -> str | None:
    """Digest of the whole tree (tree_parts)."""
    parts = tree_parts(out) if parts is None else parts
    return None if parts is None else hashlib.sha256(repr(sorted(parts.items())).encode()).hexdigest()


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


def inputs_fingerprint(paths: list[Path], settings: Path, out: Path, options: tuple) -> str | None:
    """Digest of everything the output depends on, from stats alone (one lstat per file of the profiles
    trees and the settings file), plus gpuop's code and catalogs; None where the shortcut does not apply.
    A profile or parent edited, added, removed or touched changes it; so does a changed gpuop."""
    h = hashlib.sha256(code_digest().encode())
    h.update(repr((str(Path(out).absolute()), [str(Path(p).absolute()) for p in paths], options, month())).encode())
    try:
        st = os.stat(settings)
        h.update(f"{os.path.realpath(settings)}\0{st.st_size}\0{st.st_mtime_ns}\0{st.st_ctime_ns}\0{st.st_ino}\n".encode())
        roots = set()
        for p in paths:
            root = _profiles_root(Path(p))
            if root is None:
                return None
            roots.add(root)
            h.update(f"arg\0{os.path.realpath(p)}\0{os.lstat(p).st_ino}\n".encode())
        for root in sorted(roots):
            h.update(repr(_subtree(root)).encode())      # the same walk as the output's
    except OSError:
        return None
    return h.hexdigest()


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
    if state is None or state.get("inputs") != inputs or state.get("tree") != tree_fingerprint(out):
        return None
    return state


def unchanged_folders(state: dict | None, out: Path) -> frozenset:
    """Cluster folders of `out` whose every entry is as the last run wrote it (stats), while index.json is
    too: their bytes still hash to the treeDigest index.json records, with no need to read them."""
    if not state or not isinstance(state.get("parts"), dict):
        return frozenset()
    now = tree_parts(out) or {}
    recorded = state["parts"]
    if not now or now.get("") != recorded.get("") or now.get("index.json") != recorded.get("index.json"):
        return frozenset()
    return frozenset(name for name, digest in recorded.items()
                     if name not in ("", "index.json") and now.get(name) == digest)


def record(cache: BuildCache, out: Path, inputs: str | None, result: dict, unverified: tuple = ()) -> None:
    """After a successful synth: the inputs, the stats of the tree just written and what was printed.
    `unverified`: folders the run kept without checking their bytes against index.json (a subset compile's
    other clusters): left out of the per-folder stats, so the next run does check them. A failure to
    record only costs the next run its shortcut."""
    if cache.root is None:
        return
    path = _state_path(cache.root, out)
    try:
        parts = tree_parts(out)
        folders = {k: v for k, v in (parts or {}).items() if k not in unverified}
        _atomic_write(path, json.dumps({"version": STATE_VERSION, "inputs": inputs, "parts": folders,
                                        "tree": tree_fingerprint(out, parts), **result}, sort_keys=True))
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
