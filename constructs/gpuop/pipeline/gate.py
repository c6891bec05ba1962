"""Trust the base, verify the delta: which clusters a change touches, and proof that the committed output
of those is what their inputs compile to (docs/review-gate.md).

The base revision (a protected branch) is trusted: its committed output was checked when it was merged.
Against it, a cluster must be compiled and compared when
- its inputs changed: the provenance index.json records per cluster (pipeline/keys.provenance: the digest
  of its profile, parents, digest lock, the catalog facts its compile read, the settings and gpuop's
  version) differs from what hashing the inputs gives now — a catalog change selects the clusters that
  read a fact it changes, a settings or gpuop change every cluster;
- or its committed output differs from the base in git: any file under `<out>/<cluster>/`, its chart
  archive, or its entry in index.json (a hand edit of `dist/` or of `index.json` is always recompiled);
- or it is new, or its profile is gone (the compile would remove it).
Every other cluster is proven unchanged without being compiled: same inputs as the base, same committed
bytes as the base. The fleet-level files (index.json, the version lock, charts/index.yaml, fleet/) are
regenerated from the index and compared whenever anything is selected or they differ from the base.

Git is read through plumbing only (`cat-file`, `diff-tree`, `ls-tree`, `diff-index` of blobs): no
smudge or textconv filter runs, and what is compared is what Argo CD and Flux read from git.

Nothing here reads the build cache: a cache is a hint for speed, never evidence (pipeline/run.py checks
what it supplies against the previous index.json; the gate compiles without it).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from gpuop.errors import Issue, UserError

REVISION = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_./@{}~^+-]{0,254}")
FLEET_FILES = ("index.json", "versions.lock.json", "charts/index.yaml")


@dataclass
class Selection:
    """What a change touches against a base revision."""
    base_rev: str | None                      # None: no base (not in git): everything is selected
    base: dict                                # base index.json entries by name
    current: dict                             # name -> (profile file, provenance record)
    disk: dict                                # the output's index.json entries by name
    clusters: dict = field(default_factory=dict)     # selected name -> why
    fleet: bool = False                       # fleet-level files differ from the base
    orphans: tuple = ()                       # in the output, no profile names them any more
    changed_paths: tuple = ()                 # output paths (relative) that differ from the base
    base_index: bytes | None = None           # the base's index.json as committed (git proves its bytes)

    @property
    def proven(self) -> int:
        return len(set(self.current) - set(self.clusters))


# ---- git, read as plumbing ----------------------------------------------------------------------------

def _git(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    # -c: no pager, no fsmonitor hook, no external diff; plumbing commands run no filter or textconv
    proc = subprocess.run(["git", "-c", "core.fsmonitor=false", "-c", "core.quotePath=false", "--no-pager", *args],
                          capture_output=True, check=False)
    return proc


def check_revision(ref: str) -> None:
    """Refuse what cannot be a revision before git sees it (a leading `-` would be an option)."""
    if ref.startswith("-") or not REVISION.fullmatch(ref) or ".." in ref or "@{-" in ref:
        raise UserError(Issue("--against", 0, 0, "", f"{ref!r} is not a git revision (a branch, tag, commit or "
                              "HEAD~N, without spaces, '..', a leading '-' or control characters)"))


def resolve(ref: str) -> str | None:
    """The commit `ref` names; None when the project is not in git or has no commit yet; an unknown
    revision in a repository is bad input."""
    check_revision(ref)
    if _git("rev-parse", "--is-inside-work-tree").returncode != 0:
        return None
    sha = _git("rev-parse", "--verify", "--quiet", "--end-of-options", f"{ref}^{{commit}}")
    if sha.returncode != 0:
        if _git("rev-parse", "--verify", "--quiet", "HEAD").returncode != 0:
            return None
        raise UserError(Issue("--against", 0, 0, "", f"{ref!r} is not a commit in this repository"))
    return sha.stdout.decode().strip()


def default_base() -> str:
    """The base a change is verified against when none is named: the remote's default branch (a pull
    request's checkout, a developer's clone), else HEAD."""
    return "origin/HEAD" if _git("rev-parse", "--verify", "--quiet", "origin/HEAD^{commit}").returncode == 0 else "HEAD"


def _prefix() -> str:
    """The working folder's path inside the repository ('' at the top, else 'sub/')."""
    return _git("rev-parse", "--show-prefix").stdout.decode().strip()


def git_blob(commit: str, path: str) -> bytes | None:
    proc = _git("cat-file", "blob", f"{commit}:{_prefix()}{path}")
    return proc.stdout if proc.returncode == 0 else None


def git_files(commit: str, paths: list[str]) -> dict[str, bytes]:
    """The blobs of every file under `paths` (relative to the working folder) at `commit`, by path relative to
    the working folder: ls-tree then one cat-file --batch (no filter runs)."""
    if not paths:
        return {}
    prefix = _prefix()
    listing = _git("ls-tree", "-r", "-z", "--full-tree", commit, "--", *[prefix + p for p in paths])
    entries = []
    for rec in listing.stdout.split(b"\0"):
        if not rec:
            continue
        meta, _, name = rec.partition(b"\t")
        mode, kind, sha = meta.split()
        if kind == b"blob":
            entries.append((name.decode(errors="surrogateescape"), sha.decode()))
    if not entries:
        return {}
    proc = subprocess.run(["git", "cat-file", "--batch"], input="".join(f"{s}\n" for _, s in entries).encode(),
                          capture_output=True, check=True)
    out, data, at = {}, proc.stdout, 0
    for name, _ in entries:
        nl = data.index(b"\n", at)
        size = int(data[at:nl].split()[2])
        out[name[len(prefix):]] = data[nl + 1:nl + 1 + size]
        at = nl + 1 + size + 1
    return out


class _Status:
    """`git status` of the working tree under `tops`, started now and read later: a fresh clone's status stats
    every file of the committed output (seconds at 10,000 clusters), which runs in git's own processes while
    gpuop hashes the inputs and parses the indexes. Porcelain v1 paths are relative to the repository root
    whatever the working folder. The output goes to a temporary file (no pipe to drain, no thread)."""

    def __init__(self, tops: list[str]):
        import tempfile

        self._out = tempfile.TemporaryFile()
        self._proc = subprocess.Popen(
            ["git", "-c", "core.fsmonitor=false", "-c", "core.quotePath=false", "--no-pager", "status",
             "--porcelain=v1", "-z", "--untracked-files=all", "--ignored=matching", "--no-renames", "--", *tops],
            stdout=self._out, stderr=subprocess.DEVNULL)
        self._names: list = []

    def names(self) -> set[str] | None:
        """Every path status lists (changed, untracked, ignored), relative to the repository root; None when git
        could not tell."""
        if not self._names:
            names = None
            if self._proc.wait() == 0:
                self._out.seek(0)
                names = {rec[3:].decode(errors="surrogateescape") for rec in self._out.read().split(b"\0")
                         if len(rec) > 3}
            self._out.close()
            self._names.append(names)
        return self._names[0]

    def close(self) -> None:
        if self._proc.poll() is None:
            self._proc.kill()
        self._proc.wait()
        self._out.close()


def changed_paths(commit: str, folder: str, status: _Status | None = None) -> set[str] | None:
    """Paths under `folder` (relative to it) whose committed or working-tree bytes differ from `commit`,
    untracked and ignored files included; None when git cannot tell. Two questions, each at its own cost:
    what the commits changed (`diff-tree` of the base against HEAD: unchanged subtrees are skipped by their
    hash, so it costs the change) and what the working tree changed against HEAD (one `status`: one stat of
    every file, untracked ones listed — a path changed and changed back only costs a false "changed").
    `status`: that status already started (_Status) for a list of folders that includes this one."""
    top = _prefix() + folder
    names = _committed(commit, [top])
    work = (status or _Status([top])).names()
    if names is None or work is None:
        return None
    return {n[len(top) + 1:] for n in names | work if n.startswith(top + "/")}


def _committed(commit: str, tops: list[str]) -> set[str] | None:
    """Paths under `tops` (from the repository root) that differ between `commit` and HEAD."""
    committed = _git("diff-tree", "-r", "-z", "--name-only", "--no-renames", commit, "HEAD", "--", *tops)
    if committed.returncode != 0:
        return None
    return {n.decode(errors="surrogateescape") for n in committed.stdout.split(b"\0") if n}


def same_as_base(commit: str, folders: list[str], status: _Status) -> frozenset[str] | None:
    """The files under `folders` (relative to the working folder; the profiles trees) that git proves hold the
    bytes they have at `commit`: tracked there, unchanged by the commits since and in the working tree
    (`status` covers these folders, untracked and ignored files included), and regular files. None when git
    cannot tell. The base being trusted, such a file hashes to what the base's index.json records for it."""
    prefix = _prefix()
    tops = [prefix + f for f in folders]
    listing = _git("ls-tree", "-r", "-z", "--name-only", "--full-tree", commit, "--", *tops)
    changed = _committed(commit, tops)
    work = status.names()
    if listing.returncode != 0 or changed is None or work is None:
        return None
    tracked = {n.decode(errors="surrogateescape") for n in listing.stdout.split(b"\0") if n}
    out = set()
    for n in tracked - changed - work:
        if n.startswith(prefix):
            rel = n[len(prefix):]
            if not os.path.islink(rel):              # a link's target may change outside git's view
                out.add(rel)
    return frozenset(out)


# ---- the selection -----------------------------------------------------------------------------------

def current_records(paths: list[Path], settings, base: dict | None = None,
                    unchanged: frozenset = frozenset(), reads: dict | None = None) -> dict:
    """name -> (profile file, provenance record) of every profile, from hashing the inputs only. A profile
    whose input files all hash to what the base records for it keeps the base's chain of parents (the
    bytes decide it) without being parsed, and the catalog facts the base records it read are read again
    (keys.catalog_now); any other is walked (parsed), its catalog reads unknown until it is compiled (so it
    is selected). A profile the quick walk cannot read is left out (the compile that follows reports it).
    `unchanged`: input files git proves hold their bytes at the base (same_as_base): taken as hashing to what
    the base records, without being read. `reads`: the base index.json's catalog read sets (fleet.reads_table)."""
    import hashlib

    from gpuop.pipeline.keys import _rel, catalog_now, fleet_inputs, inputs_digest, provenance, walk
    from gpuop.profile.load import discover

    shared = fleet_inputs(settings.model_dump_json())
    by_profile = {}
    for name, entry in (base or {}).items():
        rec = entry.get("provenance")
        if isinstance(rec, dict) and isinstance(rec.get("profile"), str) and isinstance(rec.get("files"), dict):
            by_profile[rec["profile"]] = (name, rec)
    digests: dict = {}

    def digest(path: str) -> str | None:
        if path not in digests:
            try:
                with open(path, "rb") as fh:
                    digests[path] = "sha256:" + hashlib.sha256(fh.read()).hexdigest()
            except OSError:
                digests[path] = None
        return digests[path]

    out: dict = {}
    named: list = []          # (profile, cluster name): two profiles with one name must not pass as one cluster
    for f in discover(paths):
        known = by_profile.get(_quick_rel(f, _rel))
        if known and all(p in unchanged or digest(p) == d for p, d in known[1]["files"].items()):
            record = {**known[1], **shared, "catalog": catalog_now(known[1], reads or {})}
            record["inputs"] = inputs_digest(record)
            named.append((f, known[0]))
            out[known[0]] = (f, record)
            continue
        w = walk(f)
        if w is not None:
            named.append((f, w[1]))
            out[w[1]] = (f, provenance(w[0], shared))
    named = [(f, n) for f, n in named if isinstance(n, str)]
    if len({n for _, n in named}) != len(named):
        from gpuop.pipeline.run import duplicate_names

        raise UserError(duplicate_names(named))
    return out


def _quick_rel(f: Path, rel) -> str:
    """keys._rel (`rel`) without its system calls for the common case, a relative path without `.` or `..`
    parts (ten thousand profiles: a second of path arithmetic)."""
    s = f.as_posix()
    if s.startswith("/") or "/../" in f"/{s}/" or "/./" in f"/{s}/":
        return rel(f)
    return s


def _document(raw: bytes | None) -> dict | None:
    """The base revision's index.json (git proves it; a damaged one selects every cluster)."""
    try:
        doc = json.loads(raw)
    except (TypeError, ValueError, RecursionError):
        return None
    return doc if isinstance(doc, dict) and isinstance(doc.get("clusters"), list) else None


def _lock_entries(raw: bytes | None) -> dict:
    """versions.lock.json's clusters ({} when absent or damaged: every entry then differs)."""
    try:
        clusters = json.loads(raw)["clusters"]
    except (TypeError, ValueError, KeyError, RecursionError):
        return {}
    return clusters if isinstance(clusters, dict) else {}


def _entries(doc: dict | None) -> dict:
    try:
        return {c["name"]: c for c in doc["clusters"]}
    except (TypeError, KeyError):
        return {}


def select(paths: list[Path], output: Path, settings, against: str | None, everything: bool = False) -> Selection:
    """The clusters to compile and compare against the base `against` (a revision; None or `everything`:
    every cluster)."""
    from gpuop.pipeline.previous import read_index

    folder = output.as_posix().rstrip("/")
    refuse_links([output, *paths])
    commit = resolve(against) if against and not everything else None
    # the working tree's status runs beside the hashing and parsing below
    trees = _profile_folders(paths)
    status = _Status([_prefix() + f for f in [folder, *trees]]) if commit else None
    try:
        return _select(paths, output, settings, against, everything, folder, commit, status, trees)
    finally:
        if status is not None:
            status.close()


def refuse_links(paths: list[Path]) -> None:
    """An output or profiles folder reached through a symlink is bad input (exit 2), each one located: what the
    gate proves must be the tree git holds, not one a link points at."""
    from gpuop.verify.output import link_issue, links_in

    issues = [link_issue(link) for link in map(links_in, paths) if link is not None]
    if issues:
        raise UserError(issues)


def _profile_folders(paths: list[Path]) -> list[str]:
    """The profiles folders named (relative posix paths inside the working folder), whose files git can vouch
    for; a file argument or a folder outside is hashed as before."""
    out = []
    for p in paths:
        s = p.as_posix().rstrip("/")
        if p.is_dir() and not p.is_absolute() and s != "." and "/../" not in f"/{s}/" and "/./" not in f"/{s}/":
            out.append(s)
    return out


def _select(paths, output: Path, settings, against, everything, folder: str, commit, status, trees) -> Selection:
    from gpuop.pipeline.previous import read_index

    base_raw = git_blob(commit, f"{folder}/index.json") if commit else None
    base_doc = _document(base_raw)
    base = _entries(base_doc)
    # the pull request's index.json parsed at the cost of its difference from the base's
    disk = {c["name"]: c for c in read_index(output, beside=(base_raw, base_doc))["clusters"]} \
        if (output / "index.json").exists() else {}
    unchanged = (same_as_base(commit, trees, status) or frozenset()) if commit and trees and base else frozenset()
    from gpuop.outputs.fleet import reads_table

    current = current_records(paths, settings, base, unchanged, reads_table(base_doc))
    sel = Selection(commit if base_raw is not None else None, base, current, disk, base_index=base_raw)
    sel.orphans = tuple(sorted(set(disk) - set(current)))
    if sel.base_rev is None:
        sel.clusters = {n: "checked in full" if everything or against is None else
                        f"{folder}/ is not in git at {against}" for n in current}
        sel.fleet = True
        return sel
    changed = changed_paths(commit, folder, status) or set()
    sel.changed_paths = tuple(sorted(changed))
    packages = {}
    for entries in (sel.base, disk):
        for n, e in entries.items():
            packages[e.get("package", "")] = n
    for name, (_, record) in current.items():
        b = sel.base.get(name)
        if b is None:
            sel.clusters[name] = "new"
        elif (b.get("provenance") or {}).get("inputs") != record["inputs"]:
            sel.clusters[name] = "inputs changed"
        elif disk.get(name) != b:
            sel.clusters[name] = "index.json entry differs from the base"
    if "versions.lock.json" in changed:
        # the lock edited: a cluster whose entry is not the base's is compiled over it and compared (its next
        # version comes from that entry)
        base_lock = _lock_entries(git_blob(commit, f"{folder}/versions.lock.json"))
        disk_lock = _lock_entries(_read(output / "versions.lock.json"))
        for name in current:
            if name in sel.base and base_lock.get(name) != disk_lock.get(name):
                sel.clusters.setdefault(name, "version lock entry differs from the base")
    for rel in changed:
        top = rel.split("/", 1)[0]
        if top in current or top in disk or top in sel.base:
            if top in current:
                sel.clusters.setdefault(top, "committed output differs from the base")
        elif rel.startswith("charts/") and packages.get(rel) in current:
            sel.clusters.setdefault(packages[rel], "chart archive differs from the base")
        else:
            sel.fleet = True
    sel.fleet = sel.fleet or bool(sel.clusters) or bool(sel.orphans) or set(sel.base) != set(current)
    return sel


# ---- the clusters the gate rehearses (`gpuop check --rehearse`: cli/main.py runs the rehearsal) ---------

def rehearsal_targets(sel: Selection) -> tuple[str, ...]:
    """The clusters whose committed output the change touches, by name: a file under `<out>/<cluster>/` or
    the cluster's chart archive differs from the base, or the cluster is new (every cluster when there is
    no base). A cluster selected only because its inputs or its index entry changed compiles to the output
    the base has (the stale check proves it first), which was rehearsed when the base was merged: it is
    not rehearsed again, nor is a cluster whose profile is gone."""
    if sel.base_rev is None:
        return tuple(sorted(sel.current))
    touched = {rel.split("/", 1)[0] for rel in sel.changed_paths}
    return tuple(sorted(n for n, why in sel.clusters.items() if n in sel.current and
                        (n in touched or why in ("new", "chart archive differs from the base"))))


# ---- verifying the selected clusters against their compile --------------------------------------------

@dataclass
class Stale:
    where: str          # output path (relative to the output folder)
    what: str           # "added", "removed", "differs"
    bad: bool = False   # not only stale but bad input (a link, an entry index.json does not list): exit 2


def verify(sel: Selection, paths: list[Path], output: Path, settings) -> tuple[list[Stale], object]:
    """Compile the selected clusters (no build cache: the compile is the evidence) over the output's own
    lock and compare them, their chart archives and the fleet-level files with the bytes on disk. Returns
    what differs and the compile result."""
    from gpuop.pipeline.run import CompileOptions, compile_profiles
    from gpuop.pipeline.previous import read_previous

    stale: list[Stale] = []
    if sel.orphans and not sel.clusters and not sel.fleet:
        return [Stale(f"{n}/", "removed") for n in sel.orphans], None
    files = [sel.current[n][0] for n in sorted(sel.clusters)]
    everything = len(sel.clusters) == len(sel.current)
    if not files and not sel.fleet:
        return stale, None
    if sel.base_rev is not None:
        # the archives as in the base (git proves it) are listed from the base's index.yaml, not read; those
        # that differ from it are not carried, so the compile packages the current ones again to compare
        import yaml

        folder = output.as_posix().rstrip('/')
        from gpuop.outputs.charts import blocks

        raw = git_blob(sel.base_rev, f"{folder}/charts/index.yaml")
        text = _text(raw)
        if blocks(text) is not None:       # laid out as gpuop prints it: read block by block, never parsed whole
            doc = None
        else:
            doc = yaml.load(raw, Loader=yaml.CSafeLoader) if raw else None
            doc, text = (doc, None) if isinstance(doc, dict) else (None, None)
        changed = frozenset(p for p in sel.changed_paths if p.startswith("charts/") and p.endswith(".tgz"))
        # the base's index.json and lock as printed: the items of unchanged clusters are copied from them
        lock_raw = git_blob(sel.base_rev, f"{folder}/versions.lock.json")
        try:
            base_lock = json.loads(lock_raw)["clusters"] if lock_raw else None
        except (ValueError, TypeError, KeyError):
            base_lock = None
        texts = (sel.base_index, list(sel.base.values()), lock_raw, base_lock)
        previous = read_previous(output, repair=True, charts_unchanged=doc is not None or text is not None,
                                 charts_doc=doc, skip=changed, base_texts=texts, charts_text=text)
    else:
        previous = read_previous(output, repair=True)
    if files:
        result = compile_profiles(paths if everything else files, settings, previous,
                                  CompileOptions(reuse=False, check_kept=False))
        made = result.files
    else:
        # no cluster to compile, but a fleet file differs from the base (an ApplicationSet or index.json edited
        # by hand): the fleet files as the proven clusters' entries print them, compared below like any other
        from gpuop.outputs.cluster import assemble

        result = None
        assembled = assemble([], previous, settings, keep=tuple(sorted(set(previous.index) & set(sel.current))))
        made = assembled.files
    expected = {k: (v.encode() if isinstance(v, str) else v) for k, v in made.items()}
    stale += _unwritten(sel, output, set(expected) | set(result.reuse if result is not None else assembled.reuse))
    for name in sorted(sel.clusters):
        mine = {k: v for k, v in expected.items() if k.startswith(name + "/")}
        on_disk = _read_folder(output, name)
        stale += _compare(mine, on_disk)
    for rel, data in expected.items():
        top = rel.split("/", 1)[0]
        if top in sel.clusters:
            continue
        if rel.startswith("charts/") or rel in FLEET_FILES or top == "fleet":
            got = _read(output / rel)
            if got != data:
                stale.append(Stale(rel, "added" if got is None else "differs"))
    fleet_on_disk = {k: v for k, v in _read_folder(output, "fleet").items()}
    for rel in sorted(set(fleet_on_disk) - set(expected)):
        stale.append(Stale(rel, "removed"))
    for name in sel.orphans:
        if everything:
            stale.append(Stale(f"{name}/", "removed"))
    for rel in sel.changed_paths:        # an archive the compile does not write: a published version edited
        if rel.startswith("charts/") and rel.endswith(".tgz") and rel not in expected and (output / rel).exists():
            stale.append(Stale(rel, "differs from the base and is not the chart the profiles compile to "
                               "(a published chart archive never changes)"))
    once: dict = {}
    for s in stale:                 # a path found by two of the checks above is named once, by the first
        once.setdefault(s.where, s)
    return list(once.values()), result


# written beside the compile's files: the ownership marker (pipeline/write.MARKER) and `gpuop report`'s page
BESIDE = (".gpuop-output", "report/index.html")


def _unwritten(sel: Selection, output: Path, written: set[str]) -> list[Stale]:
    """Every entry of the output that the compile does not write, outside the selected clusters' folders (those are
    compared file by file): the whole tree when there is no base, else the paths git finds changed since the base
    (untracked and ignored ones included; the base's tree is trusted). A folder anywhere, a cluster folder
    index.json does not list (the ApplicationSet's files generator would deploy it), a file in charts/ or fleet/
    or at the top: the compile must account for every one. A symlink is never written by gpuop."""
    from gpuop.verify.output import FLEET_ENTRIES, UNLISTED, cluster_tops, walk

    written = written | set(BESIDE)
    if sel.base_rev is None:
        candidates = walk(output, "")
    else:
        candidates = []
        for rel in sel.changed_paths:
            rel = rel.rstrip("/")
            if rel.split("/", 1)[0] in sel.clusters or not os.path.lexists(output / rel):
                continue
            candidates += walk(output, rel) if _real_dir(output / rel) else [(rel, os.path.islink(output / rel))]
    listed = None
    out = []
    for rel, link in candidates:
        top = rel.split("/", 1)[0]
        if link:
            out.append(Stale(rel, LINK, bad=True))
        elif rel not in written and top not in sel.clusters:
            if listed is None:      # only when something is unwritten: the tops index.json and the profiles name
                listed = FLEET_ENTRIES | set(sel.current) | {t for e in sel.disk.values() for t in cluster_tops(e)}
            out.append(Stale(top, UNLISTED, bad=True) if top not in listed else Stale(rel, "not written by gpuop"))
    return out


LINK = "is a symlink; gpuop writes regular files only, and a link may point outside the repository"


def bad_issues(stale: list[Stale], output: Path) -> list[Issue]:
    """The entries of `stale` that are bad input, not only stale (exit 2), located."""
    return [Issue(str(output / s.where), 0, 0, "", s.what) for s in stale if s.bad]


def _real_dir(path: Path) -> bool:
    return path.is_dir() and not path.is_symlink()


def _text(raw: bytes | None) -> str | None:
    try:
        return raw.decode("utf-8") if raw is not None else None
    except UnicodeDecodeError:
        return None


def _read(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except OSError:
        return None


class _Link(bytes):
    """A symlink found where a file is read: never equal to the bytes the compile writes, never followed."""


def _read_folder(output: Path, name: str) -> dict[str, bytes]:
    from gpuop.verify.output import walk

    out: dict[str, bytes] = {}
    if _real_dir(output / name):
        for rel, link in walk(output, name):
            out[rel] = _Link() if link else (output / rel).read_bytes()
    elif os.path.islink(output / name):
        out[name] = _Link()
    return out


def _compare(expected: dict, on_disk: dict) -> list[Stale]:
    links = {p for p, v in on_disk.items() if isinstance(v, _Link)}
    out = [Stale(p, LINK, bad=True) for p in sorted(links)]
    on_disk = {p: v for p, v in on_disk.items() if p not in links}
    out += [Stale(p, "missing") for p in sorted(set(expected) - set(on_disk) - links)]
    out += [Stale(p, "not written by gpuop") for p in sorted(set(on_disk) - set(expected))]
    out += [Stale(p, "differs") for p in sorted(set(expected) & set(on_disk)) if expected[p] != on_disk[p]]
    return out


def stale_issues(stale: list[Stale], output: Path) -> list[Issue]:
    return bad_issues(stale, output) + [
        Issue(str(output / s.where), 0, 0, "", f"{s.what}: not what the profiles compile to; run gpuop synth and "
              "commit the output") for s in stale if not s.bad]


def verify_folders(clusters: dict, source: Path, paths: list[Path], settings, reads: dict) -> list[Issue]:
    """Clusters carried from another output folder (a shard): {name: (index entry, files)}. Each must come
    from the inputs here (its provenance), and its files must be what those inputs compile to: proven by the
    committed output at the default base (same inputs, chart version and tree digest), else compiled.
    `reads`: the catalog read sets the shards' index.json hold (outputs/fleet.reads_table)."""
    from gpuop.outputs.cluster import tree_digest
    from gpuop.pipeline.run import CompileOptions, compile_profiles
    from gpuop.pipeline.previous import read_previous

    # the catalog facts each shard's cluster records are read again here: a record naming fewer facts than its
    # compile read has other inputs than the base's, so that cluster is compiled
    current = current_records(paths, settings, {n: e for n, (e, _) in clusters.items()}, reads=reads)
    folder = Path(settings.gitops.path.rstrip("/")).as_posix()
    commit = resolve(default_base())
    base = _entries(_document(git_blob(commit, f"{folder}/index.json"))) if commit else {}
    issues, todo = [], []
    for name, (entry, files) in sorted(clusters.items()):
        record = current.get(name)
        inputs = (entry.get("provenance") or {}).get("inputs")
        where = str(source / name)
        if record is None:
            issues.append(Issue(where, 0, 0, "", "no profile here names this cluster; compile the shard from these profiles"))
        elif inputs != record[1]["inputs"]:
            issues.append(Issue(where, 0, 0, "", "was compiled from other inputs than the profiles here (its provenance "
                                "in index.json differs); compile the shard again"))
        else:
            b = base.get(name) or {}
            same = ((b.get("provenance") or {}).get("inputs") == inputs and b.get("chartVersion") == entry.get("chartVersion")
                    and b.get("treeDigest") == tree_digest(files))
            if not same:
                todo.append(name)
    if todo and not issues:
        previous = read_previous(source, repair=True)
        result = compile_profiles([current[n][0] for n in todo], settings, previous,
                                  CompileOptions(reuse=False, check_kept=False))
        expected = {k: (v.encode() if isinstance(v, str) else v) for k, v in result.files.items()}
        for name in todo:
            mine = {k: v for k, v in expected.items() if k.startswith(name + "/")}
            for s in _compare(mine, clusters[name][1]):
                issues.append(Issue(str(source / s.where), 0, 0, "", f"{s.what}: not what the profiles compile to "
                                    "(edited after the shard was compiled?); compile the shard again"))
    return issues
