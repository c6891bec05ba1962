"""Fleet benchmark: N cluster profiles from ~20 designs, compiled cold, with nothing changed, and
after one profile changed, against the floors of simply dumping the same objects.

    python bench/fleet.py [--profiles N] [--jobs J] [--keep DIR]     (default N=1000; `make bench`)

Designs: GPU pool layouts (MIG-partitioned H100/A100/H200/B200, plain L40S/L4/A10/T4, mixed pools)
x Kubernetes version x OS x driver (branch or exact version) x extras (registry mirror, tolerations,
resources). Each cluster differs from its design by name, labels and node selectors. All profiles
extend one of a few partials, as a real fleet does. (OpenShift designs come with OpenShift support.)

Each compile runs the real CLI (`python -m gpuop.cli synth`) in a fresh process; wall time includes
interpreter start, imports, Node start and the write. Peak memory is sampled every 20 ms as the sum of
VmRSS over the whole process tree (gpuop, its spawned workers, their Node processes) — the figure a CI
runner's memory limit sees. Floors: the rendered objects of the cold compile, dumped with PyYAML's C
dumper (libyaml) and with json, in this process. Prints a table; writes bench/results.json.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
POOLS = [  # pool designs: (gpu, mig layout or None)
    [("H100-SXM5-80GB", {"3g.40gb": 1, "2g.20gb": 1, "1g.10gb": 2})],
    [("H100-SXM5-80GB", {"1g.10gb": 7})],
    [("A100-SXM4-80GB", {"3g.40gb": 2})],
    [("H200-SXM5-141GB", {"2g.35gb": 3})],
    [("B200-180GB", None)],
    [("L40S", None)],
    [("L4", None), ("T4", None)],
    [("A10", None)],
    [("H100-SXM5-80GB", None), ("L40S", None)],
    [("A100-SXM4-40GB", {"1g.5gb": 7})],
]
PLATFORMS = [("1.33", "ubuntu24.04"), ("1.34", "ubuntu22.04"), ("1.35", "rhel9.6"), ("1.36", "ubuntu24.04")]
DRIVERS = ["580", "580.173.02", "595.91.07"]


def generate(n: int, folder: Path, seed: int = 7) -> None:
    rng = random.Random(seed)
    prof = folder / "profiles"
    prof.mkdir(parents=True)
    for kube, os_name in PLATFORMS:
        (prof / f"_k{kube}-{os_name}.yaml").write_text(yaml.safe_dump({
            "apiVersion": "gpuop/v1alpha1", "kind": "ClusterProfile",
            "spec": {"platform": {"type": "kubernetes", "version": kube}, "os": os_name}}))
    designs = [(p, pl, d) for p in range(len(POOLS)) for pl in range(len(PLATFORMS)) for d in DRIVERS]
    designs = rng.sample(designs, 20)
    for i in range(n):
        pools_i, plat_i, driver = designs[i % len(designs)]
        kube, os_name = PLATFORMS[plat_i]
        spec: dict = {"driver": {"version": driver}, "nodePools": []}
        for j, (gpu, layout) in enumerate(POOLS[pools_i]):
            pool = {"name": f"pool{j}", "gpu": gpu, "nodeSelector": {"gpuop.example/pool": f"c{i}-{j}"}}
            if layout:
                pool["mig"] = {"strategy": "mixed", "layout": layout}
            spec["nodePools"].append(pool)
        if i % 3 == 0:
            spec["images"] = {"registry": "mirror.example.com/nvidia"}
        if i % 4 == 1:
            spec["devicePlugin"] = {"resources": {"requests": {"cpu": "50m", "memory": "64Mi"}}}
        (prof / f"cluster-{i:04d}.yaml").write_text(yaml.safe_dump({
            "apiVersion": "gpuop/v1alpha1", "kind": "ClusterProfile", "extends": f"_k{kube}-{os_name}.yaml",
            "metadata": {"name": f"cluster-{i:04d}", "labels": {"region": rng.choice(["us", "eu", "ap"])}},
            "spec": spec}, sort_keys=False))
    shutil.copy(ROOT / "gpuop.yaml", folder / "gpuop.yaml")


def _tree_rss_kb(pid: int) -> int:
    total, stack = 0, [pid]
    while stack:
        p = stack.pop()
        try:
            status = Path(f"/proc/{p}/status").read_text()
            total += int(next(line.split()[1] for line in status.splitlines() if line.startswith("VmRSS:")))
            for task in Path(f"/proc/{p}/task").iterdir():
                stack += [int(c) for c in (task / "children").read_text().split()]
        except (OSError, StopIteration, ValueError):
            pass
    return total


def run(folder: Path, *args: str) -> tuple[float, float, str]:
    env = {**os.environ, "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20", "CI": "true"}
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "gpuop.cli", "synth", "-o", "dist", "--cache", "cache", *args],
                            cwd=folder, env=env, stderr=subprocess.PIPE, text=True)
    peak = [0]

    def sample():
        while proc.poll() is None:
            peak[0] = max(peak[0], _tree_rss_kb(proc.pid))
            time.sleep(0.02)
    t = threading.Thread(target=sample)
    t.start()
    _, err = proc.communicate()
    wall = time.perf_counter() - t0
    t.join()
    if proc.returncode != 0:
        raise SystemExit(f"gpuop synth failed ({proc.returncode}):\n{err}")
    return wall, peak[0] / 1024, err.strip().splitlines()[-1]


def floors(dist: Path) -> tuple[float, float, int]:
    objs = []
    for f in sorted(dist.glob("*/manifests/*.yaml")):
        if f.name != "kustomization.yaml":
            objs.append(yaml.load(f.read_text(), Loader=yaml.CSafeLoader))
    t0 = time.perf_counter()
    for o in objs:
        yaml.dump(o, Dumper=yaml.CSafeDumper, sort_keys=False, default_flow_style=False)
    t1 = time.perf_counter()
    for o in objs:
        json.dumps(o)
    t2 = time.perf_counter()
    return t1 - t0, t2 - t1, len(objs)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--profiles", type=int, default=1000)
    ap.add_argument("--jobs", default="auto")
    ap.add_argument("--keep", type=Path, help="keep the generated fleet and outputs here")
    a = ap.parse_args()
    folder = a.keep or Path(tempfile.mkdtemp(prefix="gpuop-fleet-"))
    if folder.exists() and a.keep:
        shutil.rmtree(folder)
    generate(a.profiles, folder)
    cold, rss_cold, cold_line = run(folder, "-j", a.jobs)
    noop, rss_noop, noop_line = run(folder, "-j", a.jobs)
    victim = folder / "profiles" / "cluster-0000.yaml"
    victim.write_text(victim.read_text().replace("c0-0", "c0-0-changed"))
    one, rss_one, one_line = run(folder, "-j", a.jobs)
    f_yaml, f_json, n_objs = floors(folder / "dist")
    n = a.profiles
    res = {"profiles": n, "objects": n_objs, "jobs": a.jobs, "cpus": os.cpu_count(),
           "cold_s": round(cold, 3), "noop_s": round(noop, 3), "one_changed_s": round(one, 3),
           "peak_rss_mb": round(max(rss_cold, rss_noop, rss_one), 1),
           "floor_libyaml_s": round(f_yaml, 3), "floor_json_s": round(f_json, 3),
           "cold_profiles_per_s": round(n / cold, 1), "cold_per_profile_ms": round(1000 * cold / n, 2), "floor_libyaml_per_profile_ms": round(1000 * f_yaml / n, 2),
           "cold_vs_libyaml_floor": round(cold / f_yaml, 2) if f_yaml else None,
           "runs": {"cold": cold_line, "noop": noop_line, "one_changed": one_line}}
    rows = [("profiles", n), ("objects", n_objs), ("cold compile (s)", res["cold_s"]),
            ("cold: profiles/s", res["cold_profiles_per_s"]),
            ("nothing changed (s)", res["noop_s"]), ("one profile changed (s)", res["one_changed_s"]),
            ("peak RSS, whole tree (MB)", res["peak_rss_mb"]), ("floor: libyaml dump (s)", res["floor_libyaml_s"]),
            ("floor: json dump (s)", res["floor_json_s"]), ("cold / libyaml floor", res["cold_vs_libyaml_floor"])]
    for k, v in rows:
        print(f"{k:<28} {v:>10}")
    (ROOT / "bench" / "results.json").write_text(json.dumps(res, indent=2, sort_keys=True) + "\n")
    if not a.keep:
        shutil.rmtree(folder)


if __name__ == "__main__":
    main()
