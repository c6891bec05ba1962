"""`gpuop synth`, orchestrated: the no-op replay, then one compile (pipeline/run.py) into the output transaction
(pipeline/write.py), and the record the next run replays or proves from (pipeline/noop.py).

The order, each step under the output lock and the build cache's lock:
1. `replay`: nothing changed since the last run, inputs nor output (their stats): its summary printed again,
   nothing read, nothing written. Only stdlib and pipeline/noop.py are imported up to here.
2. the settings loaded (a bad settings file reports the profiles' problems too, as validate does), the target
   checked (it is gpuop's, never the project), the input stats taken before anything is read (an edit during
   the run is seen by the next one), the folders unchanged since the last run found by a child process while
   the compile runs on the guess that none was edited (compiled again on its answer when one was).
3. the compile (pipeline/run.py `compile_profiles`: one decision per cluster, pipeline/decide.py), its warnings,
   the new tree committed (write_tree), the summary, the record.

The command line (cli/main.py) parses the arguments into a `Request` and prints what `say` is given.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

LISTS = frozenset({"index.json", "versions.lock.json"})    # the output's own lists, trusted by their stats


@dataclass(frozen=True)
class Request:
    """One `gpuop synth`: what its arguments say."""
    paths: tuple[Path, ...]              # profile files or folders
    output: Path                         # the output folder (dist)
    settings: Path                       # gpuop.yaml
    cache_dir: Path | None               # the build cache; None: --no-cache
    jobs: int = 0                        # worker processes; 0: auto
    shard: tuple[int, int] | None = None
    previous: Path | None = None         # --previous: the output whose lock and charts the versions continue from
    progress: bool = True


def run(req: Request, say: Callable[[str], None]) -> int:
    """The synth command (see the module docstring); `say`: one line for the user (stderr). Exit code 0; bad input
    raises UserError."""
    # the pipeline (settings, validation, plans, Node) is imported only past the no-op check: a run with
    # nothing to do loads none of it (pipeline/noop.py)
    from gpuop.pipeline import noop
    from gpuop.pipeline.cache import BuildCache
    from gpuop.pipeline.write import locked, output_lock

    paths = list(req.paths)
    # --previous: the output depends on another folder's lock, which the recorded inputs do not cover
    options = (req.shard, str(req.settings.absolute()))
    shortcut = req.cache_dir is not None and req.previous is None and req.output.is_dir()
    walks = None
    if shortcut:
        with output_lock(req.output), cache_lock(BuildCache(req.cache_dir), locked):
            walks = noop.walk_inputs(paths)
            inputs = noop.inputs_fingerprint(paths, req.settings, req.output, options, walks)
            state = noop.replay(BuildCache(req.cache_dir), req.output, inputs)
            if state is not None:      # nothing changed since the last run, inputs nor output: write nothing
                for w in noop.issues_of(state):
                    say(str(w))
                say(state["summary"])
                return 0
    return _synth(req, say, options, walks)


def _synth(req: Request, say: Callable[[str], None], options: tuple, walks: dict | None = None) -> int:
    """`walks`: the profiles trees' stats the no-op check took (noop.walk_inputs): taken before anything is read,
    they stand for this run's inputs too (an edit after them is seen by the next run)."""
    from gpuop.errors import UserError
    from gpuop.pipeline import noop
    from gpuop.pipeline.cache import BuildCache
    from gpuop.pipeline.ownership import check_target
    from gpuop.pipeline.previous import read_previous
    from gpuop.pipeline.write import Staging, locked, output_lock, write_tree
    from gpuop.profile.settings import load_settings

    paths = list(req.paths)
    try:
        settings = load_settings(req.settings)
    except UserError as exc:          # report the profiles' problems too, as validate does
        from gpuop.pipeline.run import plan_all

        issues = list(exc.issues)
        try:
            plan_all(paths)
        except UserError as more:
            issues += more.issues
        raise UserError(issues)
    project = req.settings.absolute().parent
    check_target(req.output, project, tuple(paths) + (req.settings,), settings.gitops.repoURL)
    with output_lock(req.output), cache_lock(BuildCache(req.cache_dir), locked):
        check_target(req.output, project, tuple(paths) + (req.settings,), settings.gitops.repoURL)   # as it is now, under the lock
        cache = BuildCache(req.cache_dir)
        # the inputs as they are before anything is read: an edit during the run is seen by the next one
        walks = walks if walks is not None or req.previous else noop.walk_inputs(paths)
        inputs = None if req.previous else noop.inputs_fingerprint(paths, req.settings, req.output, options, walks)
        source = previous_folder(req, settings, project)
        # folders untouched since the last run wrote them (stats): reused without reading their bytes; a child
        # process stats them while this one imports the pipeline
        state = noop.load(cache, req.output)
        folders = noop.unchanged_folders_soon(state, req.output) if source == req.output else frozenset
        from gpuop.pipeline.run import CompileOptions, compile_profiles

        # the input files' stats before anything is read: the next run's proof of what this one read
        files = noop.input_stats(paths, walks) if inputs is not None else None
        noop.forget(cache, req.output)
        # index.json and the lock as the last run wrote them (a few stats, here)
        texts = LISTS <= (noop.unchanged_folders(state, req.output, only=LISTS) if source == req.output else set())

        def attempt(trusted: frozenset, texts: bool):
            previous = read_previous(source, repair=source == req.output, charts_unchanged="charts" in trusted,
                                     texts=texts)
            # clusters whose inputs and folder are as the last run left them (stats): taken without being read
            proof = noop.proven(state, files, trusted)
            staging = Staging(req.output)     # clusters are written into the new tree as they are built
            try:
                return previous, staging, compile_profiles(paths, settings, previous, CompileOptions(
                    jobs=req.jobs, cache_dir=req.cache_dir, shard=req.shard, progress=req.progress, sink=staging,
                    trusted=trusted, proof=proof))
            except BaseException:
                staging.discard()
                raise
        # the compile runs on what the child will find when nothing was edited in the output since the last run
        # (every folder as recorded), while the child stats the tree on the other core; nothing is committed
        # before its answer, and when it finds a folder changed the compile runs again on that answer
        guess = noop.recorded_folders(state) if texts else frozenset()
        if guess:
            previous, staging, result = attempt(guess, True)
            trusted = folders()
            if trusted != guess:
                staging.discard()
                previous, staging, result = attempt(trusted, LISTS <= trusted)
        else:
            trusted = folders()
            previous, staging, result = attempt(trusted, False)
        if previous.charts and not previous.lock.get("clusters"):
            say(f"{source}: warning: packaged charts but no version lock ({source}/versions.lock.json): chart "
                "versions restart at 0.1.0, and a Flux HelmRelease on a Git source (reconcileStrategy ChartVersion) "
                "or an Argo CD Helm-repository source that already has 0.1.0 will not upgrade; restore the lock from "
                "git")
        for w in result.warnings:
            say(str(w))
        write_tree(req.output, result.files, result.reuse, project=project, repo=settings.gitops.repoURL,
                   source=source, staging=staging)
        for name in result.removed:
            say(f"gpuop: cluster {name} removed: Argo CD / Flux will delete its GPU stack")
        shard = f" (shard {req.shard[0]}/{req.shard[1]})" if req.shard else ""
        kept = f", {len(result.kept)} kept as they were" if result.kept else ""
        # built: compiled now; from the cache: written again from a build-cache entry the previous index.json
        # vouches for; unchanged: the folder on disk kept as it was
        say(f"gpuop: compiled {len(result.names)} cluster(s){shard} into {req.output} ({result.built} built, "
            f"{result.from_cache} reused from the cache, {result.unchanged} unchanged on disk{kept})")
        # what a rerun with nothing changed prints: every cluster unchanged
        noop.record(cache, req.output, inputs, {
            "warnings": [w.__dict__ for w in result.warnings],
            "summary": f"gpuop: compiled {len(result.names)} cluster(s){shard} into {req.output} "
                       f"(0 built, 0 reused from the cache, {len(result.names)} unchanged on disk{kept})",
            # the next run's per-cluster proof (noop.proven): the input files' stats as read before this run
            **({"files": files, "salt": result.salt, "clusterWarnings": result.cluster_warnings}
               if files is not None and not result.kept else {})},
                   unverified=result.kept, before=state,
                   # untouched by this commit: cluster folders it did not write (the journaled commit leaves them
                   # in place; the whole-tree exchange links every file, which moves its ctime)
                   kept=trusted & {r for r in result.reuse if "/" not in r} if staging.journaled else frozenset())
    return 0


def previous_folder(req: Request, settings, project: Path) -> Path:
    """Where versions and chart history continue from: --previous, else the output folder; a shard run
    into a new folder continues from the project's committed output (gitops.path), so merged shards
    keep every chart version and its history."""
    if req.previous is not None:
        return req.previous
    if req.shard and not (req.output / "index.json").is_file():
        committed = project / settings.gitops.path.rstrip("/")
        if (committed / "index.json").is_file():
            return committed
    return req.output


def cache_lock(cache, locked):
    """The build cache's lock (pipeline/cache.py), or nothing without a cache."""
    from contextlib import nullcontext

    path = cache.lock_path()
    return nullcontext() if path is None else locked(path, str(cache.root))
