"""The one-way pipeline, end to end: load -> validate -> plan -> synthesize -> package -> write.

Each stage is its own module and hands immutable values forward; this module sequences them, gathers
every user error of every profile before stopping, and adds what fleets need: the build cache
(unchanged clusters are not rebuilt), a pool of worker processes (`jobs`), shards (`shard=(k, n)`
builds only the clusters whose name hashes to shard k of n) and a progress bar. Every cluster built is
checked by verify/semantic.py right after synthesis (in `_build_chunk`, so in workers too); a cached
cluster passed that check when it was built (the cache key includes the code's digest, rules included),
and a failed compile caches nothing.
"""

from __future__ import annotations

import copy
import hashlib
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from gpuop import catalog as catalog_mod
from gpuop.pipeline.cache import BuildCache, code_digest
from gpuop.errors import Issue, UserError
from gpuop.plan.build import build_plan
from gpuop.plan.model import StackPlan
from gpuop.profile.load import discover, display, load_profile, parent_problem, profiles_root, read_bytes
from gpuop.validate.runner import validate
from gpuop.verify.semantic import stack_issues


@dataclass(frozen=True)
class CompileResult:
    names: tuple[str, ...]
    warnings: tuple[Issue, ...]
    files: dict = field(repr=False)        # relative path -> text or bytes, to write
    reuse: tuple = ()                      # relative paths linked unchanged from the previous output
    built: int = 0                         # clusters built this run (the rest came from the cache)
    kept: tuple = ()                       # subset compile: previous clusters kept as they are
    removed: tuple = ()                    # full compile: previous clusters whose profile is gone


def _plan_one(f: Path, cat) -> tuple[StackPlan | None, list[Issue], list[Issue]]:
    try:
        valid = validate(load_profile(f), cat)
        return build_plan(valid, cat), [], list(valid.warnings)    # the plan can refuse too (a digest lock)
    except UserError as exc:
        return None, exc.issues, []


def plan_all(paths: list[Path]) -> tuple[list[StackPlan], list[Issue]]:
    """Load, validate and plan every profile (no cache); all errors of all profiles at once."""
    cat = catalog_mod.load()
    files = _files(paths)
    plans, issues, warnings = [], [], []
    for f in files:
        plan, errs, warns = _plan_one(f, cat)
        issues += errs
        warnings += warns
        if plan:
            plans.append((f, plan))
    issues += _duplicate_names([(f, p.name) for f, p in plans])
    if issues:
        raise UserError(issues)
    return sorted((p for _, p in plans), key=lambda p: p.name), warnings


def _files(paths: list[Path]) -> list[Path]:
    files = discover(paths)
    if not files:
        raise UserError(Issue(", ".join(str(p) for p in paths) or ".", 0, 0, "", "no profile files found"))
    return files


def _duplicate_names(named: list[tuple[Path, str]]) -> list[Issue]:
    issues, owners = [], {}
    for f, name in named:
        if name in owners:
            pos = load_profile(f).positions
            issues.append(pos.issue(("metadata", "name"), f"cluster name {name!r} is already used by "
                                    f"{display(owners[name])}; names must be unique across profiles"))
        else:
            owners[name] = f
    return issues


_parsed: dict = {}


def _quick_parse(raw: bytes) -> dict:
    """A profile's document without positions (parents are shared: parsed once per run)."""
    if raw not in _parsed:
        if len(_parsed) > 4096:
            _parsed.clear()
        _parsed[raw] = yaml.load(raw, Loader=yaml.CSafeLoader)
    return copy.deepcopy(_parsed[raw])


def quick_key(f: Path, salt: str, cache: BuildCache | None = None) -> tuple[str, str] | None:
    """(cache key, cluster name) from the bytes of a profile and its parents, without validation;
    None when anything is unusual (the full path then reports it). Each file's `extends` and name
    come from the cache's file index when its bytes were seen before, else from a quick parse."""
    h = hashlib.sha256(salt.encode())
    names: list = []
    seen: list[Path] = []
    path = f
    try:
        while True:
            raw = read_bytes(path)     # regular files within the size limit only: a FIFO must not block here
            if b"digestLock" in raw:   # the digest lock is an input these bytes do not show: plan it (full path)
                return None
            h.update(raw)
            digest = hashlib.sha256(raw).hexdigest()
            meta = cache.file_meta(digest) if cache else None
            if meta is None:
                d = _quick_parse(raw)
                name = (d.get("metadata") or {}).get("name")
                meta = [d.get("extends"), name if isinstance(name, str) else None]
                if cache:
                    cache.put_file_meta(digest, meta)
            seen.append(path.resolve())
            names.append(meta[1])
            if meta[0] is None:
                break
            if parent_problem(path, meta[0], profiles_root(f)):   # outside the tree: not even read
                return None
            path = path.parent / meta[0]
            if path.resolve() in seen:
                return None
        name = next((n for n in names if n), None)      # the child's name wins over a parent's
        return (h.hexdigest(), name) if name else None
    except Exception:  # malformed in any way: let the validating path say what is wrong
        return None


def compile_profiles(paths: list[Path], settings, previous=None, *, jobs: int | None = 1,
                     cache_dir: Path | None = None, shard: tuple[int, int] | None = None,
                     progress: bool = False, reuse: bool = True) -> CompileResult:
    """`previous` (write.Previous) is the last output: versions continue from its lock, and with
    `reuse` a cluster whose output would be identical is linked from it instead of rewritten.

    Naming profile files (not only folders) is a subset compile: every other cluster of `previous`
    keeps its folder, index entry, lock entry and archives. Only a compile of folders (the profiles
    tree) removes a previous cluster, when no profile names it any more (`removed`). A shard writes
    only its own clusters (gpuop merge joins the shards)."""
    from gpuop.outputs.cluster import ClusterBuild, assemble, disk_tree_digest, reusable
    from gpuop.outputs.version import next_version

    cat = catalog_mod.load()
    cache = BuildCache(cache_dir)
    salt = "|".join((cat.digest, code_digest(), settings.model_dump_json()))
    builds: dict[str, ClusterBuild] = {}
    warnings: list[Issue] = []
    todo: list[tuple[Path, str | None]] = []
    hits = 0
    named: list[tuple[Path, str]] = []
    for f in _files(paths):
        q = quick_key(f, salt, cache) if cache.root else None
        hit = cache.get(q[0]) if q else None
        if hit:
            build = ClusterBuild(files=None, **hit["build"])
            if _in_shard(build.name, shard):
                lock = (previous.lock.get("clusters", {}) if previous else {}).get(build.name)
                if not (reuse and reusable(build, previous, next_version(lock, build.digest, build.minor_key))):
                    stored = cache.get_files(q[0])
                    if stored is None:              # header without its files: rebuild
                        todo.append((f, q[0]))
                        continue
                    build = ClusterBuild(**{**build.__dict__, "files": stored})
                hits += 1
                builds[build.name] = build
                warnings += [Issue(**w) for w in hit["warnings"]]
            named.append((f, q[1]))
        else:
            todo.append((f, q[0] if q else None))
    issues: list[Issue] = []
    pending: list = []
    for f, key, name, errs, warns, build in _build_many(todo, settings, shard, jobs, progress):
        issues += errs
        if name is None:
            continue
        named.append((f, name))
        if build is not None:
            builds[name] = build
            warnings += warns
            if key:
                pending.append((key, {"build": build.head(), "warnings": [w.__dict__ for w in warns]}, build.files))
    issues += _duplicate_names(named)
    if issues:
        raise UserError(issues)        # a failed compile writes nothing, the cache included
    try:
        for key, head, files in pending:
            cache.put(key, head, files)
        cache.flush()
    except OSError as exc:      # a full disk or unwritable cache: exit 2, the output is not touched
        raise UserError(Issue(str(cache.root), 0, 0, "", f"cannot write the build cache: {exc.strerror or exc} "
                              f"({exc.filename or cache.root}); the output was not changed (--no-cache skips the cache)"))
    subset = any(not p.is_dir() for p in paths)
    known = {n for _, n in named}
    kept, removed = [], []
    if previous is not None and shard is None:
        for name in sorted(set(previous.index) - known):
            if subset:
                kept.append(name)
                entry = previous.index[name]
                if disk_tree_digest(previous.out, name) != entry.get("treeDigest"):
                    warnings.append(Issue(str(previous.out / name), 0, 0, "", "does not match its digest in index.json "
                                          "(edited by hand?); kept as it is by this subset compile, a compile of the "
                                          "profiles tree (`gpuop synth`) rebuilds it", "warning"))
            else:
                removed.append(name)
    out = assemble(list(builds.values()), previous, settings, keep=tuple(kept))
    return CompileResult(tuple(sorted(builds)), tuple(sorted(warnings)), out.files, out.reuse,
                         built=len(builds) - hits, kept=tuple(kept), removed=tuple(removed))


def _in_shard(name: str, shard: tuple[int, int] | None) -> bool:
    if shard is None:
        return True
    k, n = shard
    return int(hashlib.sha256(name.encode()).hexdigest()[:8], 16) % n == k - 1


# ---- building: load, validate, plan, synthesize, package — serially or in spawned workers ---------

_worker_synth = None


def _build_chunk(args) -> list:
    """Each profile of the chunk, end to end: (file, key, name, errors, warnings, build or None)."""
    global _worker_synth
    todo, settings, shard = args
    from gpuop.outputs.cluster import build_cluster

    cat = catalog_mod.load()
    out = []
    for f, key in todo:
        plan, errs, warns = _plan_one(f, cat)
        if plan is None or not _in_shard(plan.name, shard):
            out.append((f, key, plan.name if plan else None, errs, warns, None))
            continue
        if _worker_synth is None:
            from gpuop.stack.synth import Synthesizer

            _worker_synth = Synthesizer()
        stack = _worker_synth.synthesize(plan)
        wrong = stack_issues(stack, display(f))     # the semantic check: a refused stack is never packaged
        out.append((f, key, plan.name, errs + wrong, warns, None if wrong else build_cluster(stack, settings)))
    return out


def auto_jobs(n_clusters: int) -> int:
    """One process for small runs (a worker costs ~1.5 s to start cdk8s); the cores for fleets."""
    return 1 if n_clusters < 64 else max(1, min(os.cpu_count() or 1, 8))


def _build_many(todo: list, settings, shard, jobs: int | None, progress: bool) -> list:
    if not todo:
        return []
    jobs = auto_jobs(len(todo)) if not jobs else jobs
    bar = _bar(len(todo), progress)
    if jobs == 1:
        out = []
        for item in todo:
            out += _build_chunk(([item], settings, shard))
            bar.update(1)
        bar.close()
        return out
    import multiprocessing

    size = max(1, min(32, len(todo) // (jobs * 4) or 1))
    chunks = [todo[i:i + size] for i in range(0, len(todo), size)]
    ctx = multiprocessing.get_context("spawn")   # never fork: cdk8s/jsii and Helm's Go runtime hang in a forked child
    pool = ctx.Pool(jobs)
    try:
        out = []
        for result in pool.imap(_build_chunk, [(c, settings, shard) for c in chunks]):
            out += result
            bar.update(len(result))
    finally:
        pool.close()
        pool.join()
        bar.close()
    return out


class _NoBar:
    def update(self, n):
        pass

    def close(self):
        pass


def _bar(total: int, progress: bool):
    if not progress or not sys.stderr.isatty() or os.environ.get("CI"):
        return _NoBar()
    from tqdm import tqdm

    return tqdm(total=total, unit="cluster", file=sys.stderr, leave=False)
