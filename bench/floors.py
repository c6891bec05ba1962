"""Floors of the incremental targets: what this machine's file system and runtimes cost before gpuop does
any work of its own, on a real compiled output tree (and on a replica K times its size).

    python bench/floors.py [--profiles N | --dist DIR] [--scale K] [--out FILE]
    make bench-floors   # bench/fleet.py's 1,000-profile fleet compiled, then its tree at x1 and x10
                        #   -> bench/floors.json

Measured (each the best of 3, one thread; threads were measured slower on this kernel, see below):
- `stat_all_s`: one lstat of every file and folder of the tree. The floor of a "nothing changed" check
  that notices any edit of the output (a hand edit keeps the inode, so only the file's own ctime shows
  it; a file added or removed shows in its folder's ctime).
- `stat_all_2threads_s`: the same split over two threads.
- `whole_tree_swap_s`: a sibling tree made of the same folders (mkdir) with every file hard-linked,
  exchanged with the tree in one renameat2(RENAME_EXCHANGE), then the old tree removed (unlink, rmdir).
  The floor of writing one changed cluster while the output stays the old tree or the new one, whole,
  at every instant (the guide: "Interrupted or concurrent runs never leave a mix"): POSIX has no shared
  folders between two trees, so every unchanged folder must be made again and every file linked. No
  rendering, no Node, no Python per file beyond the calls.
- `python_start_s`, `cdk8s_import_s`: a fresh interpreter doing nothing; one importing cdk8s (jsii
  starts Node and loads the constructs and cdk8s bundles) -- what a run building cdk8s constructs pays
  (`cdk8s synth`, gpuop.api); `gpuop synth` writes cdk8s' JSON form without Node and does not.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def entries(top: Path) -> tuple[list[str], list[str]]:
    files, folders = [], []
    for folder, subdirs, names in os.walk(top):
        subdirs.sort()
        folders.append(folder)
        files += [os.path.join(folder, n) for n in sorted(names)]
    return files, folders


def replica(src: Path, dst: Path, scale: int) -> None:
    """dst: src's top-level files once, and each cluster folder `scale` times (name-N), files hard-linked."""
    dst.mkdir(parents=True)
    for e in sorted(src.iterdir()):
        copies = [e.name] if not e.is_dir() or e.name in ("charts", "fleet") else \
            [e.name] + [f"{e.name}-{k}" for k in range(1, scale)]
        for name in copies:
            if e.is_dir():
                shutil.copytree(e, dst / name, copy_function=os.link)
            else:
                os.link(e, dst / name)


def best(fn, n: int = 3) -> float:
    times = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def stat_all(paths: list[str]) -> None:
    [(s.st_ino, s.st_ctime_ns) for s in map(os.lstat, paths)]


def stat_threads(paths: list[str], n: int = 2) -> None:
    threads = [threading.Thread(target=stat_all, args=(paths[i::n],)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def whole_tree_swap(tree: Path) -> float:
    """One swap as gpuop's writer would do it for an unchanged tree: build beside, exchange, remove."""
    files, folders = entries(tree)
    new = Path(tempfile.mkdtemp(prefix=".floor-new-", dir=tree.parent))
    top = str(tree)
    t = time.perf_counter()
    for f in folders[1:]:
        os.mkdir(new / os.path.relpath(f, top))
    for f in files:
        os.link(f, new / os.path.relpath(f, top))
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.renameat2(-100, os.fsencode(new), -100, os.fsencode(tree), 2) != 0:
        raise OSError(ctypes.get_errno(), "renameat2")
    shutil.rmtree(new)          # now the old tree
    return time.perf_counter() - t


def fresh(code: str) -> float:
    env = {**os.environ, "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20",
           "PATH": f"{ROOT / 'node_modules' / '.bin'}:{os.environ.get('PATH', '')}"}

    def run():
        subprocess.run([sys.executable, "-c", code], check=True, env=env, cwd=ROOT)
    return best(run)


def measure(tree: Path) -> dict:
    files, folders = entries(tree)
    paths = files + folders
    stat_all(paths)                                   # warm the dentry cache, as a rerun finds it
    return {"files": len(files), "folders": len(folders),
            "stat_all_s": round(best(lambda: stat_all(paths)), 3),
            "stat_all_2threads_s": round(best(lambda: stat_threads(paths)), 3),
            "stat_per_entry_us": round(best(lambda: stat_all(paths)) / len(paths) * 1e6, 2),
            "whole_tree_swap_s": round(min(whole_tree_swap(tree) for _ in range(3)), 3)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dist", type=Path, help="a compiled output tree (bench/fleet.py --keep DIR: DIR/dist); "
                    "default: generate bench/fleet.py's fleet of --profiles and compile it")
    ap.add_argument("--profiles", type=int, default=1000)
    ap.add_argument("--scale", type=int, default=10, help="also measure a replica with each cluster folder K times")
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "floors.json")
    a = ap.parse_args()
    made = None
    if a.dist is None:
        sys.path.insert(0, str(ROOT / "bench"))
        import fleet

        made = Path(tempfile.mkdtemp(prefix="gpuop-floors-fleet-"))
        fleet.generate(a.profiles, made)
        fleet.run(made)
        a.dist = made / "dist"
    work = Path(tempfile.mkdtemp(prefix="gpuop-floors-", dir=a.dist.parent))
    try:
        clusters = sum(1 for e in a.dist.iterdir() if e.is_dir() and e.name not in ("charts", "fleet"))
        res = {"clusters": clusters, "cpus": os.cpu_count()}
        replica(a.dist, work / "x1", 1)
        res["x1"] = measure(work / "x1")
        shutil.rmtree(work / "x1")
        if a.scale > 1:
            replica(a.dist, work / f"x{a.scale}", a.scale)
            res[f"x{a.scale}"] = {"clusters": clusters * a.scale, **measure(work / f"x{a.scale}")}
        res["python_start_s"] = round(fresh("pass"), 3)
        res["cdk8s_import_s"] = round(fresh("import cdk8s"), 3)
    finally:
        shutil.rmtree(work, ignore_errors=True)
        if made is not None:
            shutil.rmtree(made, ignore_errors=True)
    a.out.write_text(json.dumps(res, indent=2, sort_keys=True) + "\n")
    print(json.dumps(res, indent=2, sort_keys=True))


if __name__ == "__main__":
    main()
