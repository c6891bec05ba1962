"""Fleet benchmark: N cluster profiles from 22 designs, compiled cold, with nothing changed, and after
one profile changed, against the floors of simply dumping the same objects, with NVIDIA's own chart
rendered by Helm beside it.

    python bench/fleet.py [--profiles N] [--jobs J] [--out FILE] [--keep DIR] [--helm-sample K]
    make bench         # 1,000 profiles -> bench/results.json
    make bench-10k     # 10,000 profiles -> bench/results-10k.json (the same keys)

The fleet (`generate`, seeded: the same N always gives the same bytes) has 22 designs:
- 16 static-stack designs drawn from GPU pool layouts (MIG-partitioned H100/A100/H200/B200, plain
  L40S/L4/A10/T4, mixed pools) x Kubernetes version x OS x driver (branch or exact version);
- 2 DRA designs (an H100 MIG pool on NVIDIA's DRA driver beside a time-sliced L40S pool, with tenant
  claim templates; an A100 pool on DRA with whole-GPU claims);
- 2 operator-mode designs (spec.delivery.mode: operator: values for NVIDIA's gpu-operator chart, one
  with a per-pool driver, so NVIDIADriver CRs);
- a distribution design (k3s at the edge: k3s's containerd paths) and a managed EKS design without
  spec.os (the AL2023 node image brings driver and toolkit).
Each cluster differs from its design by name, labels and node selectors; every third uses a registry
mirror, every fourth sets device-plugin resources. All profiles extend one of a few partials, as a real
fleet does. The semantic check runs on every cluster built (it is part of `gpuop synth`).

Each compile runs the real CLI (`python -m gpuop.cli synth`) in a fresh process; wall time includes
interpreter start, imports, Node start and the write. Peak memory is sampled every 20 ms as the sum of
VmRSS over the whole process tree (gpuop, its spawned workers, their Node processes) -- the figure a CI
runner's memory limit sees. Floors: the rendered objects of the cold compile (dist/*/manifests), dumped
with PyYAML's C dumper (libyaml) and with json, in this process.

Targets (floors from the same run; N <= 1,000 is held to the 1,000 column, larger fleets to
the 10,000 column): cold <= 1.5x the libyaml floor; nothing changed <= 0.5 s / 3 s; one profile changed
<= 1.0 s / 3 s; peak memory of the whole tree <= 1 GiB / 1.5 GiB. Each is recorded as
`targets: {name: {value, limit, ok}}`.

Helm side by side: Helm 4 (helm-python-sdk, in this process) loads NVIDIA's gpu-operator chart
(REFS/gpu-operator/chart) once and renders it for a sample of the fleet's clusters (K evenly
spaced, all when fewer), with per-cluster values derived simply from the profile: driver version (a
branch resolved to the catalog's newest), MIG strategy, driver and toolkit on/off. The time is the
render call only (no write), the minimum of 3 passes over the sample; `helm_render_per_cluster_ms` is
that pass / K; `helm_render_fleet_s` scales it to the fleet on all cores (per cluster x N / cores, the
same cores gpuop's workers use: a fair parallel estimate); `helm_render_fleet_serial_s` is per cluster
x N. `gpuop_cold_vs_helm` = gpuop's cold compile / helm_render_fleet_s. Not like for like: Helm renders
only the operator's chart -- a controller that renders the operands at run time, in the cluster --
while gpuop's cold time writes the whole operand stack (manifests), its Helm chart (packaged), the
overlay and the GitOps objects (Argo CD, Flux, the fleet's ApplicationSet), after validating and
checking them. The ratio is what a fleet owner pays for having everything rendered and checked ahead.

Prints a table; writes the results (bench/results.json unless --out).
"""

from __future__ import annotations

import argparse
import atexit
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
# The reference data as tests/conftest.py finds it: GPUOP_REFS (relative to the repository), else
# ../shared/refs beside it, else .refs/ (`make refs`).
_REFS_ENV = os.environ.get("GPUOP_REFS", "").strip()
REFS = ((ROOT / _REFS_ENV).resolve() if _REFS_ENV else
        next((d for d in (ROOT.parent / "shared" / "refs", ROOT / ".refs") if d.is_dir()), ROOT / ".refs"))
CHART = REFS / "gpu-operator" / "chart"     # NVIDIA's gpu-operator chart v26.7.0 (refs.lock)
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
STACK_DESIGNS = 16

# Designs of what the static stack alone does not show (profiles/dra.yaml, keep-operator.yaml, k3s.yaml,
# eks-al2023.yaml): the partial each extends and its spec; pools' node selectors get the cluster's own.
SPECIAL = [
    ("dra-h100-mig", "_k1.34-ubuntu22.04.yaml", {
        "containerRuntime": "containerd", "driver": {"version": "580.173.02"},
        "dra": {"version": "0.5.0", "featureGates": {"MPSSupport": True}},
        "nodePools": [
            {"name": "infer", "gpu": "H100-SXM5-80GB", "allocation": "dra", "nodes": 4, "gpusPerNode": 8,
             "mig": {"strategy": "mixed", "layout": {"3g.40gb": 1, "2g.20gb": 1, "1g.10gb": 2}}},
            {"name": "batch", "gpu": "L40S", "nodes": 10, "gpusPerNode": 4,
             "sharing": {"timeSlicing": {"replicas": 4}}}],
        "claimTemplates": [
            {"name": "h100-3g", "namespace": "team-a", "pool": "infer", "devices": [{"profile": "3g.40gb"}]},
            {"name": "h100-small", "namespace": "team-b", "pool": "infer",
             "devices": [{"profile": "1g.10gb", "count": 2}, {"profile": "2g.20gb"}]}]}),
    ("dra-a100", "_k1.35-rhel9.6.yaml", {
        "containerRuntime": "containerd", "driver": {"version": "595.91.07"}, "dra": {},
        "nodePools": [
            {"name": "train", "gpu": "A100-SXM4-80GB", "allocation": "dra", "nodes": 6, "gpusPerNode": 8}],
        "claimTemplates": [
            {"name": "a100-one", "namespace": "ml", "pool": "train", "devices": [{"profile": "gpu"}]},
            {"name": "a100-four", "namespace": "ml", "pool": "train", "devices": [{"profile": "gpu", "count": 4}]}]}),
    ("operator-mig-two-drivers", "_k1.33-ubuntu24.04.yaml", {
        "delivery": {"mode": "operator", "operator": {"version": "v26.7.0", "install": "helm"}},
        "driver": {"version": "580.173.02"},
        "nodePools": [
            {"name": "train", "gpu": "H100-SXM5-80GB", "nodes": 8,
             "mig": {"strategy": "mixed", "layout": {"3g.40gb": 1, "2g.20gb": 1, "1g.10gb": 2}}},
            {"name": "infer", "gpu": "L40S", "nodes": {"min": 1, "max": 6}, "driver": {"version": "595.91.07"},
             "sharing": {"timeSlicing": {"replicas": 4}}}]}),
    ("operator-l4", "_k1.34-ubuntu22.04.yaml", {
        "delivery": {"mode": "operator"}, "driver": {"version": "580"},
        "nodePools": [{"name": "infer", "gpu": "L4", "nodes": {"min": 2, "max": 20}}]}),
    ("edge-k3s", "_k3s.yaml", {
        "driver": {"version": "580"},
        "nodePools": [{"name": "edge", "gpu": "L40S", "nodes": 3, "gpusPerNode": 1}]}),
    ("eks-al2023", "_eks.yaml", {
        "driver": {"enabled": False}, "toolkit": {"enabled": False},
        "nodePools": [{"name": "p5", "gpu": "H100-SXM5-80GB", "nodes": {"min": 0, "max": 4}}]}),
]
PARTIALS = {f"_k{kube}-{os_name}.yaml": {"platform": {"type": "kubernetes", "version": kube}, "os": os_name}
            for kube, os_name in PLATFORMS}
PARTIALS["_k3s.yaml"] = {"platform": {"type": "kubernetes", "version": "1.33", "distribution": "k3s"},
                         "os": "ubuntu24.04"}
PARTIALS["_eks.yaml"] = {"platform": {"type": "kubernetes", "version": "1.33", "distribution": "eks"}}  # no os


def designs(seed: int = 7) -> list[tuple[str, str, dict]]:
    """(design name, partial, spec) of the fleet, in the order clusters cycle through them."""
    rng = random.Random(seed)
    grid = [(p, pl, d) for p in range(len(POOLS)) for pl in range(len(PLATFORMS)) for d in DRIVERS]
    out = []
    for p, pl, driver in rng.sample(grid, STACK_DESIGNS):
        kube, os_name = PLATFORMS[pl]
        pools = []
        for gpu, layout in POOLS[p]:
            pool = {"name": f"pool{len(pools)}", "gpu": gpu}
            if layout:
                pool["mig"] = {"strategy": "mixed", "layout": layout}
            pools.append(pool)
        out.append((f"stack-p{p}-k{kube}-{os_name}-{driver}", f"_k{kube}-{os_name}.yaml",
                    {"driver": {"version": driver}, "nodePools": pools}))
    total = len(out) + len(SPECIAL)
    for k, design in enumerate(SPECIAL):    # spread among the plain ones: a small N still holds some of each
        out.insert(1 + k * total // len(SPECIAL), design)
    return out


def generate(n: int, folder: Path, seed: int = 7) -> list[dict]:
    """Write N profiles (and gpuop.yaml) into folder; return each cluster's facts for the Helm side
    (name, design, driver version or branch, driver/toolkit on, MIG strategy, operator mode)."""
    rng = random.Random(seed)
    prof = folder / "profiles"
    prof.mkdir(parents=True)
    for name, spec in PARTIALS.items():
        (prof / name).write_text(yaml.safe_dump({"apiVersion": "gpuop/v1alpha1", "kind": "ClusterProfile",
                                                 "spec": spec}))
    fleet = designs(seed)
    facts = []
    for i in range(n):
        design, partial, template = fleet[i % len(fleet)]
        spec = json.loads(json.dumps(template))        # a fresh copy per cluster
        for j, pool in enumerate(spec["nodePools"]):
            pool["nodeSelector"] = {"gpuop.example/pool": f"c{i}-{j}"}
        if i % 3 == 0:
            spec["images"] = {"registry": "mirror.example.com/nvidia"}
        if i % 4 == 1:
            spec["devicePlugin"] = {"resources": {"requests": {"cpu": "50m", "memory": "64Mi"}}}
        name = f"cluster-{i:04d}"
        (prof / f"{name}.yaml").write_text(yaml.safe_dump({
            "apiVersion": "gpuop/v1alpha1", "kind": "ClusterProfile", "extends": partial,
            "metadata": {"name": name, "labels": {"region": rng.choice(["us", "eu", "ap"]), "design": design}},
            "spec": spec}, sort_keys=False))
        migs = {p["mig"]["strategy"] for p in spec["nodePools"] if "mig" in p}
        facts.append({"name": name, "design": design, "driver": spec["driver"].get("version"),
                      "driverEnabled": spec["driver"].get("enabled", True),
                      "toolkitEnabled": spec.get("toolkit", {}).get("enabled", True),
                      "mig": migs.pop() if migs else None, "operator": "delivery" in spec,
                      "dra": any(p.get("allocation") == "dra" for p in spec["nodePools"])})
    shutil.copy(ROOT / "gpuop.yaml", folder / "gpuop.yaml")
    return facts


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


def built(line: str) -> int | None:
    """Clusters the run built, from gpuop's summary line ("... (N built, M unchanged)")."""
    m = re.search(r"\((\d+) built", line)
    return int(m.group(1)) if m else None


def floors(dist: Path) -> tuple[float, float, int]:
    objs = []
    for f in sorted(dist.glob("*/manifests/*.yaml")):     # one file per object or per component (documents)
        if f.name != "kustomization.yaml":
            objs += [o for o in yaml.load_all(f.read_text(), Loader=yaml.CSafeLoader) if o is not None]
    t0 = time.perf_counter()
    for o in objs:
        yaml.dump(o, Dumper=yaml.CSafeDumper, sort_keys=False, default_flow_style=False)
    t1 = time.perf_counter()
    for o in objs:
        json.dumps(o)
    t2 = time.perf_counter()
    return t1 - t0, t2 - t1, len(objs)


def dist_sizes(dist: Path, names: list[str]) -> dict:
    """Files and bytes of the output: the whole tree, and per cluster folder (mean)."""
    files = size = 0
    for folder, _, names_here in os.walk(dist):
        for f in names_here:
            files += 1
            size += os.lstat(os.path.join(folder, f)).st_size
    per = [sum(len(fs) for _, _, fs in os.walk(dist / n)) for n in names]
    return {"dist_files": files, "dist_bytes": size, "files_per_cluster_mean": round(sum(per) / len(per), 1),
            "dist_bytes_per_cluster": round(size / len(names))}


def helm_values(fact: dict, branches: dict) -> dict:
    """NVIDIA chart values for a cluster, derived simply: driver version, MIG strategy, driver/toolkit on."""
    values: dict = {"driver": {"enabled": fact["driverEnabled"]}, "toolkit": {"enabled": fact["toolkitEnabled"]}}
    if fact["driverEnabled"] and fact["driver"]:
        values["driver"]["version"] = branches.get(fact["driver"], fact["driver"])
    if fact["mig"]:
        values["mig"] = {"strategy": fact["mig"]}
    return values


def helm_side(facts: list[dict], sample: int, passes: int = 3) -> dict:
    """Render NVIDIA's chart for `sample` evenly spaced clusters, in this process (see the docstring)."""
    import helm_python as helm

    from gpuop import catalog

    cat = catalog.load()
    branches = {f["driver"]: cat.branch(f["driver"]).latest for f in facts
                if f["driver"] and "." not in f["driver"] and cat.branch(f["driver"])}
    k = min(sample, len(facts))
    picked = [facts[i * len(facts) // k] for i in range(k)]
    values = [helm_values(f, branches) for f in picked]
    if not CHART.is_dir():
        sys.exit(f"bench: NVIDIA's chart not found at {CHART}: run `make refs` (or set GPUOP_REFS)")
    t0 = time.perf_counter()
    chart = helm.Chart.load(str(CHART))
    load_s = time.perf_counter() - t0
    try:
        best, rendered = float("inf"), 0
        for _ in range(passes):
            t0 = time.perf_counter()
            out = [chart.render(v, name="gpu-operator", namespace="gpu-operator") for v in values]
            best = min(best, time.perf_counter() - t0)
            rendered = sum(len(t) for o in out for t in o.values())
    finally:
        chart.close()
    return {"sample": k, "load_s": load_s, "per_cluster_s": best / k, "bytes_per_cluster": rendered // k,
            "templates": len(out[0])}


def targets(n: int, cold: float, noop: float, one: float, rss_mb: float, floor: float) -> dict:
    big = n > 1000           # the 10,000 column for fleets above 1,000
    limits = {"cold_s": 1.5 * floor, "noop_s": 3.0 if big else 0.5, "one_changed_s": 3.0 if big else 1.0,
              "peak_rss_mb": 1536.0 if big else 1024.0}
    values = {"cold_s": cold, "noop_s": noop, "one_changed_s": one, "peak_rss_mb": rss_mb}
    return {k: {"value": round(values[k], 3), "limit": round(limits[k], 3), "ok": values[k] <= limits[k]}
            for k in limits}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--profiles", type=int, default=1000)
    ap.add_argument("--jobs", default="auto")
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results.json", help="results file")
    ap.add_argument("--keep", type=Path, help="keep the generated fleet and outputs here")
    ap.add_argument("--helm-sample", type=int, default=50, help="clusters Helm renders NVIDIA's chart for")
    a = ap.parse_args()
    folder = a.keep or Path(tempfile.mkdtemp(prefix="gpuop-fleet-"))
    if folder.exists() and a.keep:
        shutil.rmtree(folder)
    if not a.keep:
        atexit.register(shutil.rmtree, folder, True)     # also when a run fails
    facts = generate(a.profiles, folder)
    cold, rss_cold, cold_line = run(folder, "-j", a.jobs)
    sizes = dist_sizes(folder / "dist", [f["name"] for f in facts])
    noop, rss_noop, noop_line = run(folder, "-j", a.jobs)
    victim = folder / "profiles" / "cluster-0000.yaml"
    victim.write_text(victim.read_text().replace("c0-0", "c0-0-changed"))
    one, rss_one, one_line = run(folder, "-j", a.jobs)
    f_yaml, f_json, n_objs = floors(folder / "dist")
    hs = helm_side(facts, a.helm_sample)
    n = a.profiles
    cpus = os.cpu_count() or 1
    peak = max(rss_cold, rss_noop, rss_one)
    helm_fleet = hs["per_cluster_s"] * n / cpus
    res = {"profiles": n, "objects": n_objs, "jobs": a.jobs, "cpus": cpus,
           "designs": len(designs()),
           "fleet": {"operator": sum(f["operator"] for f in facts), "dra": sum(f["dra"] for f in facts),
                     "k3s": sum(f["design"] == "edge-k3s" for f in facts),
                     "eks": sum(f["design"] == "eks-al2023" for f in facts)},
           "cold_s": round(cold, 3), "noop_s": round(noop, 3), "one_changed_s": round(one, 3),
           "peak_rss_mb": round(peak, 1),
           "floor_libyaml_s": round(f_yaml, 3), "floor_json_s": round(f_json, 3),
           "cold_profiles_per_s": round(n / cold, 1), "cold_per_profile_ms": round(1000 * cold / n, 2),
           "floor_libyaml_per_profile_ms": round(1000 * f_yaml / n, 2),
           "cold_vs_libyaml_floor": round(cold / f_yaml, 2) if f_yaml else None,
           **sizes,
           "helm_sample": hs["sample"], "helm_chart_load_s": round(hs["load_s"], 3),
           "helm_render_per_cluster_ms": round(1000 * hs["per_cluster_s"], 2),
           "helm_render_bytes_per_cluster": hs["bytes_per_cluster"],
           "helm_render_fleet_s": round(helm_fleet, 3),
           "helm_render_fleet_serial_s": round(hs["per_cluster_s"] * n, 3),
           "gpuop_cold_vs_helm": round(cold / helm_fleet, 2),
           "targets": targets(n, cold, noop, one, peak, f_yaml),
           "runs": {"cold": cold_line, "noop": noop_line, "one_changed": one_line},
           "built": {"cold": built(cold_line), "noop": built(noop_line), "one_changed": built(one_line)}}
    fl = res["fleet"]
    rows = [("profiles", f"{n} ({res['designs']} designs: {fl['operator']} operator mode, {fl['dra']} DRA, "
             f"{fl['k3s']} k3s, {fl['eks']} EKS)"),
            ("objects", n_objs),
            ("files per cluster (mean)", res["files_per_cluster_mean"]),
            ("dist", f"{res['dist_files']} files, {res['dist_bytes'] / 2**20:.1f} MiB"),
            ("cold compile (s)", res["cold_s"]), ("cold: profiles/s", res["cold_profiles_per_s"]),
            ("nothing changed (s)", res["noop_s"]), ("one profile changed (s)", res["one_changed_s"]),
            ("peak RSS, whole tree (MiB)", res["peak_rss_mb"]),
            ("floor: libyaml dump (s)", res["floor_libyaml_s"]), ("floor: json dump (s)", res["floor_json_s"]),
            ("cold / libyaml floor", res["cold_vs_libyaml_floor"]),
            ("Helm: NVIDIA chart, per cluster (ms)", f"{res['helm_render_per_cluster_ms']} "
             f"(min of 3 passes over {hs['sample']} clusters, {hs['templates']} templates, render only)"),
            ("Helm: fleet estimate (s)", f"{res['helm_render_fleet_s']} (per cluster x {n} / {cpus} cores; "
             f"serial {res['helm_render_fleet_serial_s']})"),
            ("gpuop cold / Helm fleet", f"{res['gpuop_cold_vs_helm']} (Helm: the operator's chart only, a "
             "controller that renders operands at run time; gpuop: whole stack + chart + overlay + GitOps, checked)")]
    for k, v in rows:
        print(f"{k:<38} {v}")
    print(f"\ntargets ({'10,000' if n > 1000 else '1,000'} column; floors from this run):")
    for k, t in res["targets"].items():
        print(f"  {k:<16} {t['value']:>10} <= {t['limit']:<10} {'ok' if t['ok'] else 'MISSED'}")
    if res["built"]["noop"] != 0 or res["built"]["one_changed"] != 1:
        print(f"\nwarning: the later runs rebuilt more than they should ({res['built']}): gpuop's code or "
              "catalogs changed during the bench (the cache key includes them); these figures are not a no-op")
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(res, indent=2, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
