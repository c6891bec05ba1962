"""Review-gate benchmark: the whole gate of a pull request on a fresh clone, and the developer's warm runs,
on bench/fleet.py's fleet, with the floors measured in the same run.

    python bench/gate.py [--profiles N] [--out FILE] [--keep DIR]
    make bench-gate      # 1,000 profiles -> bench/results-gate.json
    python bench/gate.py --profiles 10000 --out bench/results-gate-10k.json

The run, each step the real CLI in a fresh process (wall time includes interpreter start, imports, Node):
1. `cold`: the fleet compiled from nothing (`gpuop synth`), committed on `main` of a scratch repository.
2. `one_changed_warm`: one profile changed (a pool's nodeSelector), `gpuop synth` with the build cache and the
   output of step 1 — the developer's run before committing the pull request; committed on branch `pr`. Three
   runs of the edit, each from step 1's output (put back by git, not timed): the figure is the slowest of them
   (the first, right after git's commit of the whole fleet, is the one that finds the least free memory), each
   run's wall and CPU seconds are in `one_changed_warm_samples`.
3. `noop`: `gpuop synth` again, nothing changed.
4. `gate_fresh_clone_one_changed`: `git clone` of the repository on branch `pr` (not timed: CI does it
   before gpuop), no build cache, then the review gate of examples/ci/github-actions.yml:
   `gpuop check --against origin/main`, with its phases (`-v`: selection, review, compile, validation).
5. `gate_fresh_clone_nothing_changed`: the same on a clone of `main` (a pull request that changes no
   profile and no output, e.g. a README edit).

Before each step the file system's dirty pages are written out (`sync`, not timed): gpuop's commit ends with a
`syncfs`, which would otherwise wait for what the previous step or git wrote.

Peak memory: the sum of VmRSS over each step's process tree, sampled every 20 ms (bench/fleet.py), the
maximum over every step. Beside each wall time, `<step>_cpu_s`: the CPU seconds of that step's process tree,
and `loadavg`: the machine's load when the steps started (on a shared machine the wall time is the CPU time
times the contention). Bytecode is kept in the run's folder (see gpuop()). Each step's figures are written to
`<out>.partial.json` as soon as they are known. Floors (bench/floors.py, bench/fleet.py): the libyaml dump of the fleet's
objects (cold), one lstat of every entry of the output (nothing changed), a fresh interpreter and one
importing cdk8s (Node's start: what a run building cdk8s constructs pays; `gpuop synth` writes cdk8s' JSON form
without Node, so none of its steps pays it).

Targets (issue: the review gate at the cost of the change; N <= 1,000 is held to the 1,000 column, larger
fleets to the 10,000 column): gate on a fresh clone with one profile changed <= 5 s / 15 s; one profile
changed, warm, <= 1.0 s / 3 s; nothing changed <= 0.5 s / 3 s; cold <= 1.5x the libyaml floor; peak memory
<= 1 GiB / 1.5 GiB. Written as `targets: {name: {value, limit, ok}}` with the floors beside them.
"""

from __future__ import annotations

import argparse
import atexit
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

import fleet    # noqa: E402  (bench/fleet.py: the generator, the memory sampler, the libyaml floor)
import floors   # noqa: E402  (bench/floors.py: stat of every entry, fresh interpreters)

GIT_ENV = {"GIT_AUTHOR_NAME": "bench", "GIT_AUTHOR_EMAIL": "bench@example.com", "GIT_COMMITTER_NAME": "bench",
           "GIT_COMMITTER_EMAIL": "bench@example.com", "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}


def git(cwd: Path, *args: str) -> str:
    # no automatic gc: a background repack of the fleet's loose objects would race with the clones
    proc = subprocess.run(["git", "-c", "gc.auto=0", *args], cwd=cwd, env={**os.environ, **GIT_ENV},
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"git {' '.join(args)} failed:\n{proc.stderr}")
    return proc.stdout


PYCACHE: list = []      # where the gpuop processes keep their bytecode (set in main)
CPU: list = []          # CPU seconds of each gpuop command's process tree, in order


def gpuop(cwd: Path, *args: str, ok=(0,)) -> tuple[float, float, str]:
    """(wall seconds, peak MiB of the process tree, stderr) of one gpuop command in a fresh process.
    Bytecode is kept (in a folder of the run, not the source tree) even where the environment says not to
    write it: an installed gpuop has its bytecode compiled at install time, and compiling ~300 modules from
    source in every process is not what a CI runner or a developer pays."""
    env = {**os.environ, **GIT_ENV, "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20", "CI": "true",
           "PATH": f"{ROOT / 'node_modules' / '.bin'}:{os.environ.get('PATH', '')}"}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    if PYCACHE:
        env["PYTHONPYCACHEPREFIX"] = str(PYCACHE[0])
    # the writes before this step (the previous step's output, git's objects) reach the disk first: a commit's
    # syncfs waits for every dirty page of the file system, and what git or the last compile left is not this
    # step's cost (a developer's run does not follow a cold compile of 10,000 clusters by seconds)
    os.sync()
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "gpuop.cli", *args], cwd=cwd, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    peak = [0]

    def sample():
        while proc.poll() is None:
            peak[0] = max(peak[0], fleet._tree_rss_kb(proc.pid))
            time.sleep(0.02)
    t = threading.Thread(target=sample)
    t.start()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    _, err = proc.communicate()
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    # CPU seconds of the process tree (its reaped children included): on a shared machine the wall time is
    # this times the contention, so both are recorded
    CPU.append(round(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime, 3))
    t.join()
    if proc.returncode not in ok:
        raise SystemExit(f"gpuop {' '.join(args)} exited {proc.returncode}:\n{err}")
    return wall, peak[0] / 1024, err


def phases(err: str) -> dict:
    m = re.search(r"gpuop: check timings: (\{.*\})", err)
    return json.loads(m.group(1)) if m else {}


def selected(err: str) -> int | None:
    m = re.search(r": (\d+) cluster\(s\) to check", err)
    return int(m.group(1)) if m else None


def targets(n: int, res: dict) -> dict:
    big = n > 1000
    limits = {"gate_fresh_clone_one_changed_s": 15.0 if big else 5.0, "one_changed_warm_s": 3.0 if big else 1.0,
              "noop_s": 3.0 if big else 0.5, "cold_s": 1.5 * res["floors"]["libyaml_dump_s"],
              "peak_rss_mb": 1536.0 if big else 1024.0}
    return {k: {"value": res[k], "limit": round(v, 3), "ok": res[k] <= v} for k, v in limits.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--profiles", type=int, default=1000)
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results-gate.json")
    ap.add_argument("--keep", type=Path, help="keep the repository and clones here")
    a = ap.parse_args()
    top = a.keep or Path(tempfile.mkdtemp(prefix="gpuop-gate-"))
    if a.keep and top.exists():
        shutil.rmtree(top)
    top.mkdir(parents=True, exist_ok=True)
    if not a.keep:
        atexit.register(shutil.rmtree, top, True)
    repo = top / "origin"
    PYCACHE.append(top / "pycache")
    fleet.generate(a.profiles, repo)
    (repo / ".gitignore").write_text(".gpuop-cache/\n")
    peak = 0.0
    # the machine is shared: the load average beside the figures (1, 5, 15 min) when each step started
    res: dict = {"profiles": a.profiles, "cpus": os.cpu_count(), "loadavg": {"start": os.getloadavg()}}

    # the bytecode of everything a compile imports (its workers' too) written once, before anything is timed:
    # two profiles on two workers into a folder beside the fleet (`--version` alone imports ~110 of ~420 modules)
    two = sorted((repo / "profiles").glob("cluster-*.yaml"))[:2]
    gpuop(repo, "synth", "--no-progress", "--no-cache", "-j", "2", "-o", str(top / "bytecode-warmup"), *map(str, two))
    partial = a.out.with_suffix(".partial.json")     # each step's figures as soon as they are known (a long run)

    def save() -> None:
        partial.write_text(json.dumps(res, indent=2, sort_keys=True) + "\n")
    res["cold_s"], rss, err = gpuop(repo, "synth", "--no-progress")
    res["loadavg"]["after_cold"] = os.getloadavg()
    save()
    peak = max(peak, rss)
    res["runs"] = {"cold": err.strip().splitlines()[-1]}
    res["cold_cpu_s"] = CPU[-1]
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "fleet")

    git(repo, "checkout", "-q", "-b", "pr")
    victim = repo / "profiles" / "cluster-0000.yaml"
    original = victim.read_text()
    samples = []
    # three runs of the same edit, each from main's output (not timed: git puts it back): a run's wall time moves
    # with what else the machine does and how much free memory git's commit left it; the slowest is the figure,
    # every run is kept beside it. The output is put back because the edit changes the chart (the health gate's
    # Jobs carry the pool's nodeSelector): a second synth on top of the first would version the chart again, and
    # the gate rightly finds archives a single compile from main does not write
    for _ in range(3):
        git(repo, "checkout", "-q", "--", "dist")
        git(repo, "clean", "-fdq", "--", "dist")
        victim.write_text(original.replace("c0-0", "c0-0-changed"))
        wall, rss, err = gpuop(repo, "synth", "--no-progress")
        peak = max(peak, rss)
        samples.append((wall, CPU[-1], err.strip().splitlines()[-1]))
    wall, cpu, line = max(samples)
    res["one_changed_warm_s"], res["one_changed_warm_cpu_s"], res["runs"]["one_changed_warm"] = wall, cpu, line
    res["one_changed_warm_samples"] = [{"wall_s": round(w, 3), "cpu_s": c} for w, c, _ in samples]
    save()
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "cluster-0000: new node selector")
    res["noop_s"], rss, err = gpuop(repo, "synth", "--no-progress")
    peak = max(peak, rss)
    res["runs"]["noop"] = err.strip().splitlines()[-1]
    res["noop_cpu_s"] = CPU[-1]
    save()

    res["loadavg"]["before_gate"] = os.getloadavg()
    for key, branch in (("gate_fresh_clone_one_changed", "pr"), ("gate_fresh_clone_nothing_changed", "main")):
        clone = top / f"clone-{branch}"
        git(top, "clone", "-q", "--branch", branch, str(repo), clone.name)
        wall, rss, err = gpuop(clone, "-v", "check", "--against", "origin/main")
        peak = max(peak, rss)
        res[f"{key}_s"] = round(wall, 3)
        res[f"{key}_cpu_s"] = CPU[-1]
        res[f"{key}_phases"] = phases(err)
        res[f"{key}_selected"] = selected(err)
        res["runs"][key] = err.strip().splitlines()[-1]
        save()

    res["loadavg"]["before_floors"] = os.getloadavg()
    dumped, _, n_objs = fleet.floors(repo / "dist")
    files, folders = floors.entries(repo / "dist")
    paths = files + folders
    floors.stat_all(paths)
    res["floors"] = {"libyaml_dump_s": round(dumped, 3), "objects": n_objs,
                     "stat_every_entry_s": round(floors.best(lambda: floors.stat_all(paths)), 3),
                     "entries": len(paths),
                     "python_start_s": round(floors.fresh("pass"), 3),
                     "cdk8s_import_s": round(floors.fresh("import cdk8s"), 3)}
    for k in ("cold_s", "one_changed_warm_s", "noop_s"):
        res[k] = round(res[k], 3)
    res["peak_rss_mb"] = round(peak, 1)
    res["targets"] = targets(a.profiles, res)
    res["loadavg"]["end"] = os.getloadavg()
    for k, v in res.items():
        if k not in ("runs", "targets"):
            print(f"{k:<40} {v}")
    print(f"\ntargets ({'10,000' if a.profiles > 1000 else '1,000'} column; floors from this run):")
    for k, t in res["targets"].items():
        print(f"  {k:<34} {t['value']:>10} <= {t['limit']:<10} {'ok' if t['ok'] else 'MISSED'}")
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(res, indent=2, sort_keys=True) + "\n")
    partial.unlink(missing_ok=True)


if __name__ == "__main__":
    main()
