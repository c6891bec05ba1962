"""Where a cold compile's time goes, stage by stage: N profiles of the bench fleet (bench/fleet.py)
compiled in this process, serially (`-j 1`, `--no-cache`), with a perf_counter accumulator around
each stage's entry points.

    python bench/profile.py [--profiles N] [--cprofile K]      (default N=200; `make bench-profile`)

How the stages are timed: the functions in STAGES are wrapped (monkeypatched: the module attribute,
the class attribute for methods, and every `from X import f` copy held by a gpuop module). A wrapper
counts its *own* time: the time of wrapped calls made inside it is subtracted, so a stage never
counts time another stage already has (e.g. outputs/images.py's time excludes
outputs/manifests.py:rendered, which it calls), and the rows add up to the compile's wall time; what
no wrapper covers is the `unaccounted` row. Fixed costs paid once per process -- importing gpuop and
whether cdk8s (Node) was started -- are printed apart, not per profile.

`--cprofile K` runs the same compile under cProfile as well and prints the K functions with the most
own time (cProfile's overhead inflates the stage figures of that run, so the stage table comes from a
run without it).
"""

from __future__ import annotations

import argparse
import atexit
import importlib
import importlib.util
import os
import shutil
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

BENCH = Path(__file__).resolve().parent
# this file's folder leaves the module path: its name would shadow the standard library's `profile` (cProfile)
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != BENCH]
_spec = importlib.util.spec_from_file_location("fleet", BENCH / "fleet.py")
fleet = importlib.util.module_from_spec(_spec)   # bench/fleet.py: the same generated fleet
_spec.loader.exec_module(fleet)

# (stage, module, function or Class.method): a stage's row is named by the first module path of its group
STAGES = [
    ("catalog load", "gpuop.catalog", "load"),
    ("load/parse", "gpuop.profile.load", "load_profile"),
    ("validate", "gpuop.validate.runner", "validate"),
    ("plan", "gpuop.plan.build", "build_plan"),
    ("synth: props", "gpuop.stack.registry", "component_props"),
    ("synth: variants", "gpuop.stack.synth", "Synthesizer.variant"),
    ("synth: objects", "gpuop.stack.synth", "Synthesizer.synthesize"),
    ("semantic check", "gpuop.verify.semantic", "stack_issues"),
    ("outputs: chart templates", "gpuop.outputs.helm", "chart_files"),
    ("outputs: manifests render", "gpuop.outputs.manifests", "rendered"),
    ("outputs: manifests", "gpuop.outputs.manifests", "write"),
    ("outputs: overlay", "gpuop.outputs.kustomize", "write"),
    ("outputs: argocd", "gpuop.outputs.argocd", "write"),
    ("outputs: flux", "gpuop.outputs.flux", "write"),
    ("outputs: params", "gpuop.outputs.fleet", "cluster_params"),
    ("outputs: node labels", "gpuop.outputs.node_labels", "write"),
    ("outputs: node labels", "gpuop.outputs.node_labels", "index_entry"),
    ("outputs: dra", "gpuop.outputs.dra", "write"),
    ("outputs: dra", "gpuop.outputs.dra", "index_entry"),
    ("outputs: operator", "gpuop.outputs.operator", "apply"),
    ("outputs: images", "gpuop.outputs.images", "write"),
    ("outputs: digests", "gpuop.outputs.version", "content_digest"),
    ("outputs: digests", "gpuop.outputs.cluster", "files_digest"),
    ("outputs: cluster build (rest)", "gpuop.outputs.cluster", "build_cluster"),
    ("chart packaging", "gpuop.outputs.charts", "archive"),
    ("chart packaging", "gpuop.outputs.cluster", "package"),
    ("chart repo index", "gpuop.outputs.charts", "entries_from"),
    ("chart repo index", "gpuop.outputs.charts", "index_yaml"),
    ("fleet objects", "gpuop.outputs.fleet", "write"),
    ("index/assemble: tree digests", "gpuop.outputs.cluster", "tree_digest"),
    ("index/assemble (rest)", "gpuop.outputs.cluster", "assemble"),
    ("previous output", "gpuop.pipeline.write", "read_previous"),
    ("no-op check: fingerprints", "gpuop.pipeline.noop", "inputs_fingerprint"),
    ("no-op check: fingerprints", "gpuop.pipeline.noop", "describe"),
    ("no-op check: fingerprints", "gpuop.pipeline.noop", "unchanged"),
    ("cache keys", "gpuop.pipeline.keys", "quick_key"),
    ("index/assemble: settle", "gpuop.outputs.cluster", "settle"),
    ("file writes", "gpuop.pipeline.write", "write_tree"),
    ("file writes", "gpuop.pipeline.write", "Staging.write"),
    ("file writes", "gpuop.pipeline.write", "Staging.link"),
    ("cache keys", "gpuop.pipeline.cache", "code_digest"),
    ("pipeline (rest)", "gpuop.pipeline.run", "compile_profiles"),
    ("cli (rest)", "gpuop.cli.main", "main"),
]

own: dict[str, float] = defaultdict(float)
calls: dict[str, int] = defaultdict(int)
_open: list[float] = []       # per active wrapped call: time spent in wrapped calls inside it


def _timed(stage: str, fn):
    def wrapper(*args, **kwargs):
        _open.append(0.0)
        t0 = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            elapsed = time.perf_counter() - t0
            inner = _open.pop()
            own[stage] += elapsed - inner
            calls[stage] += 1
            if _open:
                _open[-1] += elapsed
    wrapper.__wrapped__ = fn
    return wrapper


def instrument() -> list[tuple[str, str]]:
    """Wrap every STAGES function; returns (stage, where) rows in STAGES order. An entry point the code
    no longer has (the compiler changes under this file) is left out with a note, not an error."""
    rows = []
    for stage, module, attr in STAGES:
        try:
            mod = importlib.import_module(module)
            owner, name = (getattr(mod, attr.split(".")[0]), attr.split(".")[1]) if "." in attr else (mod, attr)
            orig = getattr(owner, name)
        except (ImportError, AttributeError):
            print(f"note: {module}:{attr} not found; stage {stage!r} not timed there", file=sys.stderr)
            continue
        wrapped = _timed(stage, orig)
        setattr(owner, name, wrapped)
        if owner is mod:     # the `from X import f` copies other modules hold
            for other in list(sys.modules.values()):
                if getattr(other, "__name__", "").startswith("gpuop") and other is not mod:
                    for k, v in list(vars(other).items()):
                        if v is orig:
                            setattr(other, k, wrapped)
        where = f"{module.replace('.', '/')}{'/' if hasattr(mod, '__path__') else '.py'}:{attr}"
        rows.append((stage, where))
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--profiles", type=int, default=200)
    ap.add_argument("--cprofile", type=int, default=0, metavar="K", help="also print cProfile's top K by own time")
    a = ap.parse_args()
    os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")
    os.environ["CI"] = "true"
    folder = Path(tempfile.mkdtemp(prefix="gpuop-profile-"))
    atexit.register(shutil.rmtree, folder, True)         # also when the compile fails
    fleet.generate(a.profiles, folder)
    os.chdir(folder)
    t0 = time.perf_counter()
    from gpuop.cli import main as cli
    import gpuop.outputs.cluster  # noqa: F401  (every writer module)
    import gpuop.pipeline.run  # noqa: F401
    import gpuop.stack.registry  # noqa: F401  (the components: no cdk8s, gpuop synth starts no Node)
    t1 = time.perf_counter()
    rows = instrument()
    argv = ["synth", "-o", "dist", "--no-cache", "-j", "1", "--no-progress"]
    t3 = time.perf_counter()
    rc = cli.main(argv)
    total = time.perf_counter() - t3
    if rc != 0:
        raise SystemExit(f"gpuop synth failed ({rc})")
    n = a.profiles
    print(f"{n} profiles ({len(fleet.designs())} designs), one process, -j 1, no cache: {total:.2f} s, "
          f"{1000 * total / n:.1f} ms/profile")
    node = "started by the compile (a value left to cdk8s)" if "cdk8s" in sys.modules else "never started"
    print(f"once per process, not below: imports {1000 * (t1 - t0):.0f} ms; cdk8s/Node {node}\n")
    print(f"{'stage':<30} {'where (own time)':<52} {'calls':>6} {'ms/profile':>10} {'%':>6}")
    seen: dict[str, list[str]] = {}
    for stage, where in rows:
        seen.setdefault(stage, []).append(where)
    for stage, wheres in seen.items():
        ms = 1000 * own[stage] / n
        print(f"{stage:<30} {wheres[0]:<52} {calls[stage]:>6} {ms:>10.2f} {100 * own[stage] / total:>6.1f}")
        for w in wheres[1:]:
            print(f"{'':<30} {'+ ' + w:<52}")
    rest = total - sum(own.values())
    print(f"{'unaccounted':<30} {'':<52} {'':>6} {1000 * rest / n:>10.2f} {100 * rest / total:>6.1f}")
    print(f"{'total':<30} {'':<52} {'':>6} {1000 * total / n:>10.2f} {100.0:>6.1f}")
    synth = getattr(importlib.import_module("gpuop.pipeline.run"), "_worker_synth", None)
    if synth is not None:    # each distinct (component, props) is synthesized once: a cost that stops growing
        print(f"\nvariants: {synth.variants} distinct (component, props) built for {n} profiles "
              f"({calls['synth: variants']} look-ups, {synth.cdk8s_charts} through cdk8s); the variants row is mostly "
              "these first sights")
    if a.cprofile:
        import cProfile
        import pstats

        shutil.rmtree("dist")
        prof = cProfile.Profile()
        prof.runcall(cli.main, argv)
        print(f"\ncProfile, top {a.cprofile} by own time (a second compile of the same fleet):")
        pstats.Stats(prof).sort_stats("tottime").print_stats(a.cprofile)
    os.chdir("/")


if __name__ == "__main__":
    main()
