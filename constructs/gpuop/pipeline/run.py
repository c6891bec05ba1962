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

import dataclasses
import hashlib
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path


from gpuop import catalog as catalog_mod
from gpuop.pipeline.cache import BuildCache, code_digest
from gpuop.errors import Issue, UserError
from gpuop.plan.build import build_plan
from gpuop.plan.model import StackPlan
from gpuop.pipeline.keys import catalog_now, fleet_inputs, pack, provenance, quick_key, walk
from gpuop.pipeline.noop import month
from gpuop.profile.load import discover, display, load_profile
from gpuop.validate.runner import validate
from gpuop.verify.user_created import stack_issues


@dataclass(frozen=True)
class CompileResult:
    names: tuple[str, ...]
    warnings: tuple[Issue, ...]
    files: dict = field(repr=False)        # relative path -> text or bytes, to write
    reuse: tuple = ()                      # relative paths linked unchanged from the previous output
    built: int = 0                         # clusters built this run (the rest came from the cache)
    kept: tuple = ()                       # subset compile: previous clusters kept as they are
    removed: tuple = ()                    # full compile: previous clusters whose profile is gone
    from_cache: int = 0                    # of the clusters not built: written again from the build cache
    unchanged: int = 0                     # of the clusters not built: their folder on disk kept as it is
    salt: str = ""                         # digest of what every cluster shares (catalogs, settings, code, month)
    cluster_warnings: dict = field(default_factory=dict)   # name -> its warnings (Issue fields), for the next run


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
    """Each profile whose cluster name another profile holds too, located at its metadata.name and naming the
    others (every holder: which one to rename is the author's choice). One name is one folder of dist/, one
    chart and one Argo CD Application: a second profile with it would silently replace the first's stack."""
    from gpuop.kube.validation import duplicate

    holders: dict[str, list[Path]] = {}
    for f, name in named:
        holders.setdefault(name, []).append(f)
    issues = []
    for name, files in holders.items():
        if len(files) < 2:
            continue
        for f in files:
            others = ", ".join(display(o) for o in files if o is not f)
            issues.append(load_profile(f).positions.issue(("metadata", "name"), f"{duplicate(name)}: also the "
                                                          f"cluster name of {others}; cluster names must be unique "
                                                          "across profiles"))
    return issues


duplicate_names = _duplicate_names


@dataclass(frozen=True)
class CompileOptions:
    """How `compile_profiles` runs; the defaults compile every profile in this process, no cache, nothing trusted."""
    jobs: int | None = 1                 # worker processes; 0 or None: auto (auto_jobs)
    cache_dir: Path | None = None        # the build cache (pipeline/cache.py); None: none read or written
    shard: tuple[int, int] | None = None     # (k, n): only the clusters whose name hashes to shard k of n
    progress: bool = False               # a progress bar on a terminal
    reuse: bool = True                   # an unchanged cluster's folder is linked from `previous`, not rewritten
    # a pipeline/write.Staging: each cluster's files are streamed into the new tree as it is built, and its
    # build-cache entry to a pending name; the result's `files` then hold only the fleet-level files (memory stays
    # flat with the fleet's size: the process holds the index)
    sink: object = None
    # cluster folders of `previous` known unchanged since they were written (pipeline/noop.py): their treeDigest
    # in index.json is taken as it is instead of hashing the folder's bytes
    trusted: frozenset = frozenset()
    # a subset compile warns about a kept folder that does not match its treeDigest (reading every kept folder);
    # the review gate, which proves the kept folders from git, turns it off
    check_kept: bool = True
    proof: dict | None = None            # pipeline/noop.proven: the stats proof of the last run (decide.State.PROVEN)


def compile_profiles(paths: list[Path], settings, previous=None, options: CompileOptions = CompileOptions()
                     ) -> CompileResult:
    """Compile the profiles under `paths` against `previous` (write.Previous, the last output: versions continue
    from its lock) into the files of the new output: each cluster decided (pipeline/decide.py: proven by stats,
    unchanged on disk, from the build cache, or built), the ones to build built (in workers with `jobs`), then
    the fleet-level files assembled (outputs/cluster.py). Every user error of every profile is gathered before
    stopping; a failed compile writes nothing, the build cache included.

    Naming profile files (not only folders) is a subset compile: every other cluster of `previous` keeps its
    folder, index entry, lock entry and archives. Only a compile of folders (the profiles tree) removes a
    previous cluster, when no profile names it any more (`removed`). A shard writes only its own clusters
    (gpuop merge joins the shards). See CompileOptions for the rest."""
    from gpuop.outputs.cluster import assemble, disk_tree_digest, expected_tree, settle
    from gpuop.pipeline.decide import Facts, State, decide

    o = options
    sink, shard = o.sink, o.shard
    cat = catalog_mod.load()
    cache = BuildCache(o.cache_dir)
    # the month: the driver lifecycle warning (validate/compat.py) a cached cluster replays may change with it
    salt = "|".join((cat.digest, code_digest(), settings.model_dump_json(), month()))
    shared = fleet_inputs(settings.model_dump_json())
    builds: dict = {}
    warnings: list[Issue] = []
    todo: list[tuple[Path, str | None]] = []
    hits = from_disk = 0
    named: list[tuple[Path, str]] = []
    locks = previous.lock.get("clusters", {}) if previous else {}
    carried = set(previous.charts) if previous else set()
    records: dict[Path, dict] = {}     # a profile's provenance if it reads what the previous compile read
    inputs: dict[Path, list] = {}
    salt_digest = hashlib.sha256(salt.encode()).hexdigest()
    table = dict(previous.catalog_reads) if previous else {}     # the catalog read sets by digest (keys.READS)
    by_warnings: dict[str, list] = {}
    stable = _stable(previous, o.proof, salt_digest, shared) if shard is None else {}
    proven: list[str] = []
    for f in _files(paths):
        name = stable.get(_posix_rel(f))
        q = hit = None
        if name is None:            # not proven by stats: its bytes are read (a proven profile's never are)
            walked = walk(f, cache)
            if walked is not None:
                inputs[f] = walked[0]
                before = previous.index.get(walked[1]) if previous is not None else None
                if before is not None:
                    records[f] = provenance(walked[0], shared, catalog_now(before.get("provenance"), table))
            q = quick_key(f, salt, cache, walked) if cache.root else None
            hit = cache.get(q[0]) if q else None
        d = decide(Facts(proven=name, hit=hit, cached=cache.root is not None,
                         stored=(lambda key=q[0] if q else None: cache.get_files(key)), previous=previous,
                         record=records.get(f), locks=locks, trusted=o.trusted, reuse=o.reuse, shard=shard))
        if d.state is State.PROVEN:         # index entry, lock entry, folder and warnings as they are
            proven.append(d.name)
            named.append((f, d.name))
            ws = [w for w in o.proof["warnings"].get(d.name, ()) if isinstance(w, dict)]
            by_warnings[d.name] = ws
            warnings += [Issue(**w) for w in ws]
        elif d.state is State.BUILD:
            todo.append((f, q[0] if q else None))
        elif d.state is State.ELSEWHERE:    # another shard's
            named.append((f, q[1]))
        else:                               # ON_DISK: linked from the previous output; FROM_CACHE: written again
            build = d.build
            if d.state is State.ON_DISK:
                from_disk += 1
            elif sink is not None:
                build = settle(build, carried, sink)
            hits += 1
            builds[build.name] = _recorded(build, records.get(f))
            warnings += [Issue(**w) for w in d.warnings]
            by_warnings[build.name] = list(d.warnings)
            named.append((f, q[1]))
    issues: list[Issue] = []
    pending: list = []
    try:
        for f, key, name, errs, warns, build, read in _build_many(todo, settings, shard, o.jobs, o.progress, locks):
            issues += errs
            if name is None:
                continue
            named.append((f, name))
            if build is not None:
                warnings += warns
                by_warnings[name] = [w.__dict__ for w in warns]
                files = build.files
                head = {"build": build.head(), "warnings": [w.__dict__ for w in warns]}
                if sink is not None and not issues:
                    build = settle(build, carried, sink)
                    head["trees"] = {build.settled["version"]: build.settled["tree"]}
                elif key:
                    head["trees"] = {build.chart_version: expected_tree(build, build.chart_version)}
                if key:
                    if sink is None:
                        pending.append((key, head, files))
                    elif not issues:          # once a profile failed nothing is written: only errors are gathered
                        cache.put_pending(key, head, files)
                builds[name] = _recorded(build, provenance(inputs[f], shared, pack(read, table)) if f in inputs else None)
        issues += _duplicate_names(named)
        if issues:
            raise UserError(issues)        # a failed compile writes nothing, the cache included
        for key, head, files in pending:
            cache.put(key, head, files)
        cache.commit_pending()
        cache.flush()
    except OSError as exc:      # a full disk or unwritable cache: exit 2, the output is not touched
        cache.discard_pending()
        raise UserError(Issue(str(cache.root), 0, 0, "", f"cannot write the build cache: {exc.strerror or exc} "
                              f"({exc.filename or cache.root}); the output was not changed (--no-cache skips the cache)"))
    except BaseException:
        cache.discard_pending()
        raise
    subset = any(not p.is_dir() for p in paths)
    known = {n for _, n in named}
    kept, removed = [], []
    if previous is not None and shard is None:
        for name in sorted(set(previous.index) - known):
            if subset:
                kept.append(name)
                entry = previous.index[name]
                if o.check_kept and disk_tree_digest(previous.out, name) != entry.get("treeDigest"):
                    warnings.append(Issue(str(previous.out / name), 0, 0, "", "does not match its digest in index.json "
                                          "(edited by hand?); kept as it is by this subset compile, a compile of the "
                                          "profiles tree (`gpuop synth`) rebuilds it", "warning"))
            else:
                removed.append(name)
    out = assemble(list(builds.values()), previous, settings, keep=tuple(sorted(kept + proven)), reads=table)
    if shard is not None:
        from gpuop.pipeline.previous import mark_shard

        mark_shard(out.files, shard)
    return CompileResult(tuple(sorted(set(builds) | set(proven))), tuple(sorted(warnings)), out.files, out.reuse,
                         built=len(builds) - hits, kept=tuple(kept), removed=tuple(removed),
                         from_cache=hits - from_disk, unchanged=from_disk + len(proven), salt=salt_digest,
                         cluster_warnings=by_warnings)


def _posix_rel(f: Path) -> str:
    """keys._rel without a system call for the common case (a relative path without `..`)."""
    s = f.as_posix()
    if s.startswith("/") or "/../" in f"/{s}/" or "/./" in f"/{s}/":
        from gpuop.pipeline.keys import _rel

        return _rel(f)
    return s


def _stable(previous, proof: dict | None, salt_digest: str, shared: dict) -> dict:
    """profile path (as provenance records it) -> cluster name, for the clusters proven unchanged by stats
    (compile_profiles' `proof`): same salt as the run that wrote them, every input file's stats as that run
    read them, the shared inputs their provenance records the current ones, the folder as written (trusted),
    the index entry well formed and the chart archive of its version present."""
    if previous is None or not proof or proof.get("salt") != salt_digest:
        return {}
    # the walk of the profiles trees (noop.input_stats) names files from the real working folder
    files, trusted, cwd = proof["files"], proof["trusted"], os.path.realpath(os.getcwd())
    out = {}
    for name, entry in previous.index.items():
        prov = entry.get("provenance")
        if name not in trusted or name not in proof["warnings"] or not isinstance(prov, dict) \
                or not isinstance(prov.get("files"), dict) or not isinstance(prov.get("profile"), str) \
                or any(prov.get(k) != v for k, v in shared.items()):
            continue
        if not all(isinstance(p, str) and os.path.join(cwd, p) in files for p in prov["files"]):
            continue
        package, locked = entry.get("package"), previous.lock.get("clusters", {}).get(name)
        if not isinstance(package, str) or package.rpartition("/")[2] not in previous.charts \
                or not isinstance(locked, dict) or locked.get("version") != entry.get("chartVersion"):
            continue
        out[prov["profile"]] = name
    return out


def _recorded(build, record: dict | None):
    """The build with its provenance in its index entry (never in the cache: the same bytes at another path
    are the same build but another record)."""
    if record is None:
        return build
    return dataclasses.replace(build, entry={**build.entry, "provenance": record})


# ---- building: load, validate, plan, synthesize, package — serially or in spawned workers ---------

_worker_synth = None


_worker_locks: dict = {}


def _init_worker(locks: dict, parent: int | None = None) -> None:
    """`parent`: the pid of the process whose pool this worker serves (None: the compile runs in this process)."""
    global _worker_locks
    _worker_locks = locks
    if parent is not None:
        _follow_parent(parent)
    import gc

    # a worker builds cluster after cluster of short-lived trees: collecting the young generation every 700
    # allocations (the default) was a twentieth of its time; cycles still go, a little later
    gc.set_threshold(50_000, 20, 20)


def _follow_parent(parent: int) -> None:
    """A worker ends with the gpuop process it serves: killed (kill -9, the OOM killer), that process leaves its workers
    orphaned, building the rest of their chunks for no one and printing a traceback each when they find their result
    pipe closed. Linux's parent-death signal ends them with it (SIGTERM: what Pool.terminate sends); elsewhere they
    stop at their next result as before."""
    import ctypes
    import signal

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, int(signal.SIGTERM), 0, 0, 0)        # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:          # it died before the signal was asked for: nothing to build for
        os._exit(0)


def _build_chunk(args) -> list:
    """Each profile of the chunk, end to end: (file, key, name, errors, warnings, build or None, the catalog
    facts it read). The chart archive is made here too, for the version the previous lock gives the cluster
    (the same assemble gives), so packaging runs on every core."""
    global _worker_synth
    todo, settings, shard = args
    from gpuop.outputs.cluster import build_cluster, package
    from gpuop.pipeline.decide import chart_version, in_shard

    from gpuop.catalog.reads import encode, recording
    from gpuop.stack.synth import Synthesizer   # imported before any record: an import reads for no one cluster

    cat = catalog_mod.load()
    out = []
    for f, key in todo:
        with recording() as read:   # every catalog fact this cluster's output is made from (its provenance)
            plan, errs, warns = _plan_one(f, cat)
            if plan is None or not in_shard(plan.name, shard):
                out.append((f, key, plan.name if plan else None, errs, warns, None, None))
                continue
            if _worker_synth is None:
                _worker_synth = Synthesizer()
            stack = _worker_synth.synthesize(plan)
            wrong = stack_issues(stack, display(f))     # the semantic check: a refused stack is never packaged
            build = None
            if not wrong:
                build = build_cluster(stack, settings)
                # its chart version, decided once: the one its own lock entry gives its content
                version = chart_version(build, _worker_locks)
                build = dataclasses.replace(package(build, version), chart_version=version)
        out.append((f, key, plan.name, errs + wrong, warns, build, encode(read)))
    return out


def auto_jobs(n_clusters: int) -> int:
    """One process for small runs (a spawned worker costs ~0.5 s of imports); the cores for fleets."""
    return 1 if n_clusters < 64 else max(1, min(os.cpu_count() or 1, 8))


def _build_many(todo: list, settings, shard, jobs: int | None, progress: bool, locks: dict):
    """Yields each profile's result as it is built (the caller streams it into the output)."""
    if not todo:
        return
    jobs = auto_jobs(len(todo)) if not jobs else jobs
    bar = _bar(len(todo), progress)
    if jobs == 1:
        _init_worker(locks)
        for item in todo:
            yield from _build_chunk(([item], settings, shard))
            bar.update(1)
        bar.close()
        return
    import multiprocessing

    size = max(1, min(32, len(todo) // (jobs * 4) or 1))
    chunks = [todo[i:i + size] for i in range(0, len(todo), size)]
    ctx = multiprocessing.get_context("spawn")   # never fork: cdk8s/jsii and Helm's Go runtime hang in a forked child
    # the lock goes to each worker once
    pool = ctx.Pool(jobs, initializer=_init_worker, initargs=(locks, os.getpid()))
    done = False
    try:
        for result in pool.imap(_build_chunk, [(c, settings, shard) for c in chunks]):
            yield from result
            bar.update(len(result))
        done = True
    finally:
        if done:
            pool.close()     # close + join, not terminate: terminated workers leave jsii's temp folders behind
        else:                # the caller stopped (a write failed, Ctrl-C): do not build the rest of the fleet
            pool.terminate()
        pool.join()
        bar.close()


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
