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
- Ownership: a folder is replaced only if it carries gpuop's marker (`.gpuop-output`, naming the
  project by its repository, gitops.repoURL) or is recognisably gpuop output from before the
  marker (adopted); never the project or a parent of it.

Upstream Helm writes in place; gpuop differs on purpose because dist/ is applied by GitOps engines and a
half-written tree committed by CI removes clusters from the fleet.
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import json
import os
import shutil
import signal
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from gpuop.kube.folders import ENTRY_FOLDERS
from gpuop.profile.bounded import MAX_JSON_BYTES, parse_json, read_bytes, read_json
from gpuop.errors import Issue, UserError
from gpuop.outputs.version import LOCK_FILE
from gpuop.kube.yamlio import dump_json

MARKER = ".gpuop-output"


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


# ---- reading the previous output -----------------------------------------------------------------

def read_lock(out: Path) -> dict:
    path = out / LOCK_FILE
    if not os.path.lexists(path):
        return {}
    try:          # bounded, never through a symlink (gpuop.profile.bounded): the previous output is untrusted
        lock = read_json(path, str(path), what="a version lock")
        assert isinstance(lock, dict) and isinstance(lock.get("clusters"), dict)
        return lock
    except (UserError, AssertionError) as exc:
        why = exc.issues[0].message if isinstance(exc, UserError) else ""
        why = f" ({why})" if why and not why.startswith("not valid JSON") else ""
        raise UserError(Issue(str(path), 0, 0, "", f"version lock is not valid JSON of kind VersionLock{why}; "
                              "restore it from git (deleting it restarts every chart at version 0.1.0)"))


def read_index(out: Path, raw: bytes | None = None, *, ours: bool = False, beside: tuple | None = None,
               text: str | None = None) -> dict:
    """index.json of an output folder (or its bytes `raw`), checked for shape: a UserError (exit 2) when it is
    not an Index. `ours`: the file is as the last run wrote it (its stats, pipeline/noop.py), so the bound on
    its nesting is left to json's own recursion guard (a forged record only costs the bounded parse below).
    `beside`: (bytes, parsed document) of a trusted index.json (the review gate's base revision, from git):
    cluster items printed as they are there are taken from its parse, only the others are parsed (bounded),
    so reading a pull request's index.json costs its difference from the base. `text`: `raw` decoded as UTF-8
    (strictly) when the caller has it already (tens of MB at 10,000 clusters, decoded once)."""
    path = Path(out) / "index.json"
    try:          # bounded, never through a symlink (gpuop.profile.bounded): the previous output is untrusted
        raw = read_bytes(path, str(path), limit=MAX_JSON_BYTES, what="an index.json") if raw is None else raw
    except UserError as exc:
        raise UserError(Issue(str(path), 0, 0, "", f"{exc.issues[0].message}; not a gpuop output folder"))
    # one parse per process and content: the review gate reads the same index.json three times (tens of MB
    # at 10,000 clusters); callers must not change the document
    import hashlib

    key = hashlib.sha256(raw).digest()      # sha256 runs at twice blake2b's speed here (CPU instructions)
    if key in _READ_INDEX:
        return _READ_INDEX[key]
    _READ_INDEX.clear()
    with _held(freeze=len(raw) > _LARGE):
        doc = _read_index_doc(path, raw, ours, beside, text)
    _READ_INDEX[key] = doc
    return doc


_LARGE = 4 << 20       # bytes of index.json (some 800 clusters) from which its parse is frozen


@contextmanager
def _held(freeze: bool):
    """A document parsed without the cyclic collector and, when `freeze`, frozen after: a 10,000-cluster index.json
    is millions of containers, and every collection the parse and the rest of the run would trigger walks all of
    them (two thirds of the parse's time, measured). Parsed JSON holds no cycles: reference counting still frees it."""
    import gc

    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if freeze:          # later collections skip what exists now (a long-lived process freezes only large reads)
            gc.freeze()
        if was:
            gc.enable()


def _read_index_doc(path: Path, raw: bytes, ours: bool, beside: tuple | None, text: str | None = None) -> dict:
    doc = None
    if ours:
        try:            # tens of MB at 10,000 clusters: the nesting pre-scan costs more than the parse
            doc = json.loads(text if text is not None else raw.decode("utf-8"))
        except (ValueError, RecursionError):          # UnicodeDecodeError included: the bounded parse says what
            doc = None
        if doc is not None and _index_problem(doc):
            doc = None
    if doc is None and beside is not None:
        doc = _parse_beside(path, raw, *beside)
    return doc if doc is not None else _parse_index(path, raw)


_ITEM_SEP = b"\n    },\n    {\n"
_LIST_OPEN = b'\n  "clusters": [\n    {\n'
_LIST_CLOSE = b"\n    }\n  ],\n"


def _items(raw: bytes) -> tuple[bytes, list[bytes], bytes] | None:
    """index.json as gpuop prints it (json.dumps, indent 2, keys sorted): the text before the cluster list, the
    text of each cluster item (without its braces) and the text after; None when it is not in that form."""
    start, end = raw.find(_LIST_OPEN), raw.rfind(_LIST_CLOSE)
    if start < 0 or end < start + len(_LIST_OPEN) - 1:
        return None
    return (raw[:start], raw[start + len(_LIST_OPEN):end].split(_ITEM_SEP), raw[end + len(_LIST_CLOSE):])


def _parse_beside(path: Path, raw: bytes, base_raw: bytes | None, base_doc: dict | None) -> dict | None:
    """The document parsed item by item, items printed as in the trusted base taken from its parse. Sound on any
    bytes: JSON strings hold no raw line break, so a split at a line-structured `},{` inside a nested value
    leaves pieces whose brackets do not balance, and one piece that does not parse sends the whole document to
    the full bounded parse (None); the text around the list must be the base's, byte for byte."""
    if not isinstance(base_doc, dict) or not isinstance(base_doc.get("clusters"), list) or base_raw is None:
        return None
    if raw == base_raw:
        return None if _index_problem(base_doc) else base_doc
    mine, theirs = _items(raw), _items(base_raw)
    if mine is None or theirs is None or mine[0] != theirs[0] or mine[2] != theirs[2] \
            or len(theirs[1]) != len(base_doc["clusters"]):
        return None
    known = dict(zip(theirs[1], base_doc["clusters"]))
    clusters = []
    for text in mine[1]:
        item = known.get(text)
        if item is None:
            try:
                item = parse_json(str(path), b"{\n" + text + b"\n    }")
            except UserError:
                return None
            if not isinstance(item, dict):
                return None
        clusters.append(item)
    doc = {**base_doc, "clusters": clusters}
    return None if _index_problem(doc) else doc


def _parse_index(path: Path, raw: bytes) -> dict:
    try:
        doc = parse_json(str(path), raw)
    except UserError as exc:
        i = exc.issues[0]
        raise UserError(Issue(i.file, i.line, i.col, "", f"{i.message}; restore it from git or recompile"))
    problem = _index_problem(doc)
    if problem:
        raise UserError(Issue(str(path), 0, 0, problem[0], f"{problem[1]}; not an index.json written by gpuop "
                              "(restore it from git or recompile)"))
    return doc


def _index_problem(doc) -> tuple[str, str] | None:
    if not isinstance(doc, dict) or doc.get("kind") != "Index":
        return "kind", "expected kind: Index"
    if not isinstance(doc.get("clusters"), list):
        return "clusters", "expected a list of clusters"
    for i, c in enumerate(doc["clusters"]):
        if not isinstance(c, dict):
            return f"clusters[{i}]", "expected an object"
        for key in ("name", "chart", "chartVersion", "package", *ENTRY_FOLDERS[1:], "namespace", "kubeVersion"):
            if not isinstance(c.get(key), str) or not c[key]:
                return f"clusters[{i}].{key}", "missing or not a string"
        if "/" in c["name"] or c["name"].startswith("."):
            return f"clusters[{i}].name", "not a cluster folder name"
    if "catalogReads" in doc and not isinstance(doc["catalogReads"], dict):
        return "catalogReads", "expected an object of catalog read sets by digest"
    return None


_PARSED_INDEX: dict = {}
_READ_INDEX: dict = {}


@dataclass(frozen=True)
class Previous:
    """What the next compile carries forward from the last output folder."""
    out: Path
    lock: dict            # versions.lock.json
    index: dict           # cluster name -> index.json entry
    charts: dict          # archive file name -> Path (published versions stay downloadable), verified

    charts_trusted: bool = False   # charts/ as the last run wrote it (stats): index.yaml's digests hold
    charts_doc: dict | None = None  # the Helm repository index to trust instead of charts/index.yaml (the base's)
    # index.json and the lock as gpuop printed them (vouched for by the caller), as outputs/fleet.listing_texts
    # (name -> (item, its text)): the item of a cluster that did not change is copied instead of printed again
    index_known: dict | None = None
    lock_known: dict | None = None
    charts_text: str | None = None  # charts/index.yaml as gpuop printed it (vouched for: trusted, or the base's)
    charts_blocks: dict | None = None   # outputs/charts.blocks of charts_text: chart name -> (archives, text)
    catalog_reads: dict = field(default_factory=dict)   # index.json's catalog read sets (outputs/fleet.reads_table)

    def charts_index(self) -> dict | None:
        """charts/index.yaml, parsed (only when a new chart version must be added to it). Parsed once per
        process and file version (a fleet's index has thousands of entries): the caller must not change it."""
        import yaml             # here, not at the top: the no-op path imports this module and never parses

        if self.charts_doc is not None:
            return self.charts_doc
        if self.charts_text is not None:
            key = ("text", id(self), len(self.charts_text))
            if key not in _PARSED_INDEX:
                _PARSED_INDEX.clear()
                try:
                    _PARSED_INDEX[key] = yaml.load(self.charts_text, Loader=yaml.CSafeLoader)
                except yaml.YAMLError:
                    _PARSED_INDEX[key] = None
            doc = _PARSED_INDEX[key]
            return doc if isinstance(doc, dict) else None

        path = self.out / "charts" / "index.yaml"
        try:
            st = os.stat(path)
            key = (str(path), st.st_ino, st.st_ctime_ns, st.st_size)
            if key not in _PARSED_INDEX:
                _PARSED_INDEX.clear()
                # bounded and never through a symlink; aliases stay shared (the C loader does not copy
                # them) and only two levels are ever walked, so an alias bomb costs nothing here
                raw = read_bytes(path, str(path), limit=MAX_JSON_BYTES, what="a Helm repository index")
                _PARSED_INDEX[key] = yaml.load(raw, Loader=yaml.CSafeLoader)
            doc = _PARSED_INDEX[key]
        except (OSError, UserError, yaml.YAMLError):
            return None
        return doc if isinstance(doc, dict) else None

    def charts_index_ok(self) -> bool:
        """The previous index.yaml can be kept as it is: it exists and lists exactly the archives."""
        if self.charts_blocks is not None:
            return {u for urls, _ in self.charts_blocks.values() for u in urls} == set(self.charts)
        doc = self.charts_index()
        listed = set()
        for versions in ((doc or {}).get("entries") or {}).values():
            for e in versions or ():
                if isinstance(e, dict) and e.get("urls"):
                    listed.add(e["urls"][0])
        return doc is not None and listed == set(self.charts)


def read_previous(out: Path, *, repair: bool = False, charts_unchanged: bool = False,
                  charts_doc: dict | None = None, skip: frozenset = frozenset(), texts: bool = False,
                  base_texts: tuple | None = None, charts_text: str | None = None) -> Previous:
    """`repair`: the folder is known to be gpuop's (check_target passed), so a damaged index.json only
    means nothing is reused; otherwise a present index.json that is not an Index is exit 2.
    `charts_unchanged`: charts/ is as the last run wrote it (its stats, pipeline/noop.py), so the
    archives are listed without reading them again. `charts_doc`: the Helm repository index whose digests
    are trusted (the review gate passes the base revision's, which git proves); `skip`: archives not carried
    (the gate drops those that differ from the base, so the compile packages them again to compare).
    `texts`: index.json and the lock are as the last run wrote them (their stats, pipeline/noop.py), so their
    texts are kept for the next index to copy unchanged items from; `base_texts`: such texts from elsewhere,
    (index.json text, its clusters, lock text, its clusters) — the review gate passes the base revision's,
    which git proves; `charts_text`: the base's charts/index.yaml likewise."""
    from gpuop.outputs import fleet

    out = Path(out)
    lock = read_lock(out)
    index, reads = {}, {}
    index_known = lock_known = None
    if (out / "index.json").exists():
        try:
            raw = text = None
            if texts:
                path = out / "index.json"
                raw = read_bytes(path, str(path), limit=MAX_JSON_BYTES, what="an index.json")
                try:
                    text = raw.decode("utf-8")
                except UnicodeDecodeError:      # the bounded parse says where; no item text is copied
                    text = None
            doc = read_index(out, raw, ours=texts, text=text)
            clusters = doc["clusters"]
            index = {c["name"]: c for c in clusters}
            reads = fleet.reads_table(doc)
            if text is not None:
                index_known = fleet.listing_texts(raw, clusters, "clusters")
        except UserError:
            if not repair:
                raise
    if texts and lock:
        try:
            lock_known = fleet.listing_texts((out / LOCK_FILE).read_bytes(), lock["clusters"], "clusters")
        except OSError:
            pass
    if base_texts is not None:
        index_known = fleet.listing_texts(base_texts[0], base_texts[1], "clusters")
        lock_known = fleet.listing_texts(base_texts[2], base_texts[3], "clusters")
    from gpuop.outputs import charts as charts_mod

    folder = out / "charts"
    if charts_unchanged and charts_text is None and charts_doc is None:
        try:          # as the last run wrote it (stats): its text is what the next index copies blocks from
            path = folder / "index.yaml"
            charts_text = read_bytes(path, str(path), limit=MAX_JSON_BYTES, what="a Helm repository index").decode()
        except (UserError, UnicodeDecodeError):
            charts_text = None
    blocks = charts_mod.blocks(charts_text) if charts_unchanged else None
    charts_text = charts_text if blocks is not None else None
    prev = Previous(out, lock, index, {}, charts_doc=charts_doc, charts_text=charts_text)
    charts = {}
    if folder.is_dir():
        known = {}
        if blocks is not None:     # trusted: the archives it lists are taken as they are (no digest needed)
            known = {u: "" for urls, _ in blocks.values() for u in urls}
        for versions in ((prev.charts_index() or {}).get("entries") or {}).values() if blocks is None else ():
            for e in versions or ():
                if isinstance(e, dict) and e.get("urls") and e.get("digest"):
                    known[e["urls"][0]] = e["digest"]

        # names from one folder read (d_type: a regular file, not a link, without a stat each; ten thousand archives)
        with os.scandir(folder) as it:
            names = sorted(e.name for e in it if e.name.endswith(".tgz") and e.is_file(follow_symlinks=False))
        for name in names:
            f = folder / name
            if f"charts/{name}" in skip:
                continue
            if charts_unchanged and f.name in known:
                charts[f.name] = f
                continue
            data = f.read_bytes()
            if known.get(f.name) not in (None, charts_mod.digest(data)):
                continue            # damaged: not carried (the current version is rebuilt from the lock)
            if f.name not in known:
                try:
                    charts_mod.entry(f.name, data)
                except Exception:   # noqa: BLE001 - not a chart archive: not carried, never served
                    continue
            charts[f.name] = f
    return Previous(out, lock, index, charts, charts_trusted=charts_unchanged, charts_doc=charts_doc,
                    index_known=index_known, lock_known=lock_known, charts_text=charts_text, charts_blocks=blocks,
                    catalog_reads=reads)


# ---- ownership: what may be replaced ---------------------------------------------------------------

def _marker_text(repo: str) -> str:
    """The marker names the project by its repository (gitops.repoURL), not by a path: the output's
    bytes must not depend on where the checkout lives (dist/ is committed and compared byte for byte)."""
    return json.dumps({"apiVersion": "gpuop/v1alpha1", "kind": "Output", "repoURL": repo}, indent=2) + "\n"


def check_target(out: Path, project: Path | None = None, inputs: tuple = (), repo: str | None = None) -> None:
    """Refuse to replace what gpuop did not write: the project, a parent of it or of any input, a
    folder without gpuop's marker that is not recognisably gpuop output, another project's output
    (the marker names the project by its repository URL, gitops.repoURL)."""
    out = Path(out).absolute()
    real = Path(os.path.realpath(out))
    cwd = Path.cwd().absolute()
    project = Path(os.path.realpath(project or cwd))
    for p in {cwd, Path(os.path.realpath(cwd)), project} | {Path(os.path.realpath(i)) for i in inputs}:
        if real == p or real in p.parents:
            raise UserError(Issue(str(out), 0, 0, "", "refusing to write into the project, the working folder, "
                                  "an input or one of their parents (the output folder is replaced as a whole); "
                                  "pass -o DIR, e.g. -o dist"))
    if out.is_symlink():
        raise UserError(Issue(str(out), 0, 0, "", "refusing to replace a symbolic link; pass a real folder"))
    if not out.exists():
        return
    if not out.is_dir():
        raise UserError(Issue(str(out), 0, 0, "", "refusing to replace a file that is not a folder"))
    if not any(out.iterdir()):
        return
    marker = out / MARKER
    if os.path.lexists(marker):
        try:      # bounded, never through a symlink: a marker linked to another project's is not ours
            doc = read_json(marker, str(marker), limit=64 * 1024, what="gpuop's output marker")
            assert isinstance(doc, dict) and doc.get("kind") == "Output" and isinstance(doc.get("repoURL"), str)
        except (UserError, AssertionError):
            raise UserError(Issue(str(marker), 0, 0, "", "not gpuop's output marker; refusing to replace the folder"))
        if repo is not None and doc["repoURL"] != repo:
            raise UserError(Issue(str(out), 0, 0, "", f"refusing to replace the output of another project "
                                  f"(repository {doc['repoURL']}); this project's repository is {repo}"))
        return
    reason = _not_adoptable(out)
    if reason:
        raise UserError(Issue(str(out), 0, 0, "", f"refusing to replace a folder that is not gpuop output ({reason}); "
                              "pass an empty or new folder, or a previous output folder"))


def _not_adoptable(out: Path) -> str | None:
    """Output from before the marker is adopted when every entry is one gpuop writes."""
    try:
        doc = read_json(out / "index.json", what="an index.json")
    except UserError:
        return "no gpuop marker and no index.json of kind Index"
    if _index_problem(doc):
        return "no gpuop marker and index.json is not of kind Index"
    lock = out / LOCK_FILE
    try:
        if read_json(lock, what="a version lock").get("kind") != "VersionLock":
            return f"{LOCK_FILE} is not of kind VersionLock"
    except (UserError, AttributeError):
        return f"no gpuop marker and no {LOCK_FILE}"
    allowed = {"index.json", LOCK_FILE, "charts", "fleet", "report"} | {c["name"] for c in doc["clusters"]}   # report: `gpuop report`
    strays = sorted(p.name for p in out.iterdir() if p.name not in allowed)
    if strays:
        return f"no gpuop marker, and gpuop did not write {', '.join(strays[:3])}"
    return None


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


# ---- integrity of a compiled output (gpuop validate DIST) -------------------------------------------

def output_issues(out: Path, only: frozenset | None = None) -> list[Issue]:
    """What makes an output folder unusable as a Helm repository and a GitOps source, beyond the
    objects themselves: index.json of kind Index, every cluster's folders and chart archive present, and
    charts/index.yaml listing every archive with its digest (an index with no entries is not valid).
    `only`: the clusters to check (the review gate's selection); None: every cluster."""
    import yaml

    from gpuop.outputs import charts as charts_mod

    out = Path(out)
    doc = read_index(out)
    issues = []
    served = {}
    idx_path = out / "charts" / "index.yaml"
    try:
        raw = read_bytes(idx_path, str(idx_path), limit=MAX_JSON_BYTES, what="a Helm repository index")
        idx = _served_index(raw, doc, only)
        for versions in ((idx or {}).get("entries") or {}).values():
            for e in versions or ():
                if isinstance(e, dict) and e.get("urls"):
                    served[e["urls"][0]] = e.get("digest")
    except (OSError, UserError, yaml.YAMLError, AttributeError) as exc:
        why = exc.issues[0].message if isinstance(exc, UserError) else (getattr(exc, "strerror", None) or exc)
        issues.append(Issue(str(idx_path), 0, 0, "", f"the Helm repository index is missing or unreadable "
                            f"({why}); run gpuop synth to rebuild it"))
        idx = None
    for i, c in enumerate(doc["clusters"]):
        if only is not None and c["name"] not in only:
            continue
        for key in ENTRY_FOLDERS:
            if not (out / c[key]).is_dir():
                issues.append(Issue(str(out / "index.json"), 0, 0, f"clusters[{i}].{key}",
                                    f"{c[key]} is missing; run gpuop synth to rebuild it"))
        archive = out / c["package"]
        if not archive.is_file():
            issues.append(Issue(str(out / "index.json"), 0, 0, f"clusters[{i}].package",
                                f"{c['package']} is missing; run gpuop synth to rebuild it from the version lock"))
            continue
        name = archive.name
        if idx is not None and name not in served:
            issues.append(Issue(str(idx_path), 0, 0, "", f"does not list {name}; run gpuop synth to rebuild it"))
        elif idx is not None and served[name] != charts_mod.digest(archive.read_bytes()):
            issues.append(Issue(str(idx_path), 0, 0, "", f"digest of {name} does not match the archive"))
    return issues


def _served_index(raw: bytes, doc: dict, only: frozenset | None):
    """charts/index.yaml parsed, or, for a selection, only the blocks of the selected clusters' charts when
    the file is laid out as gpuop prints it (each chart's block stands alone: outputs/charts.blocks); the
    other clusters are not checked, so their blocks need not be read (a fleet's index is megabytes)."""
    import yaml

    from gpuop.outputs import charts as charts_mod

    if only is not None:
        try:
            found = charts_mod.blocks(raw.decode("utf-8"))
        except UnicodeDecodeError:
            found = None
        if found is not None:
            names = {c["name"] for c in doc["clusters"] if c["name"] in only}     # a chart is named after its cluster
            mine = {n: found[n] for n in names if n in found}
            listed = {u for urls, _ in found.values() for u in urls}
            try:
                part = yaml.load("apiVersion: v1\nentries:\n" + "".join(b for _, b in mine.values()) if mine
                                 else "apiVersion: v1\nentries: {}\n", Loader=yaml.CSafeLoader)
            except yaml.YAMLError:
                part = None
            if isinstance(part, dict) and isinstance(part.get("entries"), dict):
                entries = part["entries"]
                # every other archive listed, its digest not needed: only the selected clusters are checked
                placeholder = [{"urls": [u], "digest": None} for u in sorted(listed)]
                return {"entries": {**{"": placeholder}, **entries}}
    return yaml.load(raw, Loader=yaml.CSafeLoader)


# The shard marker lives with the index it is written into: the compile (run.py) writes it, the merge
# (shards.py) reads it, and neither has to import the other.
SHARD_KEY = "shard"      # index.json of a `synth --shard K/N` folder: {"index": K, "count": N}


def mark_shard(files: dict, shard: tuple[int, int]) -> None:
    """Record which shard of how many a `synth --shard K/N` folder holds, in its index.json, so the merge
    can tell a whole fleet from a forgotten shard (whose clusters would otherwise leave the output)."""
    doc = json.loads(files["index.json"])
    doc[SHARD_KEY] = {"index": shard[0], "count": shard[1]}
    files["index.json"] = dump_json(doc)
