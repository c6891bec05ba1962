"""Compile benchmark: time and peak memory of `gpuop synth` over a generated fleet of N cluster profiles.

    python bench/compile.py [--profiles N] [--jobs J] [--keep DIR] [--seed S]      (defaults 100, auto, -, 1)

Profiles: cluster-0001..N (seeded), each extending a shared _base.yaml. Kubernetes 1.33-1.36 x OS
ubuntu22.04/ubuntu24.04/rhel9.6, only pairs releases.yaml's matrix allows; 1-3 pools of catalog GPUs; driver
580.173.02, 595.91.07 or branch "580"; optional registry mirror, tolerations, device-plugin resources,
crio on RHEL. MIG layouts only on GPUs gpus.yaml marks migCapable, with that GPU's profile names from
/work/shared/refs/mig/FACTS.md §4.1 in combinations that fit the F8 placement rules.

End to end: the real CLI (`python -m gpuop.cli synth --no-cache --no-progress`, -j as given, else gpuop's
auto) in a fresh subprocess. Wall time covers interpreter start, imports, Node start, compile, write and
shutdown. Memory, two ways: (a) os.wait4's ru_maxrss for that child, which Linux gives as the largest peak
of any single process in its tree (every descendant is reaped), never a sum; (b) a 50 ms sampler over the
tree's /proc/PID/status: VmHWM (kernel peak RSS) per process, grouped by role (python main, python worker,
node jsii-runtime.js, node program.js = jsii kernel), and the largest sum of VmRSS seen at one sample
(total footprint). Sampled values are lower bounds: growth in a process's last 50 ms can be missed.

Stages: a second fresh subprocess (this script, --stage-child) runs the pipeline serially in one
process, perf_counter around each: import gpuop + settings; load+validate+plan (plan_all); start
Node + import cdk8s (the cdk8s imports start Node, then Synthesizer()); synthesize (cdk8s); package
(build_cluster per cluster); assemble (versions, index); write (write_tree). Its memory is sampled the same way.

Prints a table; records the run under runs["N"] (runs["N-jJ"] with --jobs) in bench/compile-results.json.
"""
from __future__ import annotations

import argparse, json, os, platform, random, shutil, subprocess, sys, tempfile, time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "constructs/gpuop/catalog/data"
# FACTS.md §4.1 names per GPU; F8 = 8 memory slices, 7 compute, 1g at starts 0-6, 2g at 0/2/4, 3g/4g at 0/4 and 0.
MIG = {"H100-SXM5-80GB": [{"3g.40gb": 1, "1g.10gb": 2}, {"2g.20gb": 3}, {"7g.80gb": 1}, {"1g.10gb": 7}],
       "A100-SXM4-80GB": [{"4g.40gb": 1, "3g.40gb": 1}, {"3g.40gb": 2}, {"1g.20gb": 4}],
       "H200-SXM5-141GB": [{"3g.71gb": 1, "1g.18gb": 3}, {"2g.35gb": 3}],
       "B200-180GB": [{"3g.90gb": 2}, {"1g.23gb": 7}, {"4g.90gb": 1, "2g.45gb": 1, "1g.23gb": 1}]}
INSTANCE = {"H100-SXM5-80GB": "p5.48xlarge", "A100-SXM4-80GB": "p4de.24xlarge", "H200-SXM5-141GB": "p5e.48xlarge",
            "B200-180GB": "p6-b200.48xlarge", "L40S": "g6e.12xlarge", "L4": "g6.12xlarge", "T4": "g4dn.12xlarge",
            "A10": "g5.12xlarge", "L40": "g6e.xlarge"}  # GPUs without MIG: the keys not in MIG
TOLERATIONS = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
               {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]
RESOURCES = {"requests": {"cpu": "50m", "memory": "64Mi"}, "limits": {"memory": "256Mi"}}
ROLES = {"jsii-runtime.js": "node jsii-runtime.js", "program.js": "node program.js (jsii kernel)",
         "resource_tracker": "python resource_tracker", "spawn_main": "python worker"}  # cmdline -> role


def generate(n: int, folder: Path, seed: int) -> None:
    rng, dump = random.Random(seed), lambda doc: yaml.safe_dump(doc, sort_keys=False)
    gpus = {g["name"]: g for g in yaml.safe_load((DATA / "gpus.yaml").read_text())["gpus"]}
    assert all(g in gpus and gpus[g]["migCapable"] == (g in MIG) for g in INSTANCE), "GPU catalog changed"
    os_matrix = yaml.safe_load((DATA / "releases.yaml").read_text())["releases"][0]["matrix"]["os"]
    combos = [(k, o) for o in ("ubuntu22.04", "ubuntu24.04", "rhel9.6") for k in ("1.33", "1.34", "1.35", "1.36")
              if k in os_matrix[o]["kubernetes"]]
    folder.mkdir(parents=True)
    (folder / "_base.yaml").write_text(dump({"apiVersion": "gpuop/v1alpha1", "kind": "ClusterProfile", "spec": {
        "daemonsets": {"priorityClassName": "system-node-critical"}, "driver": {"kernelModuleType": "auto"}}}))
    for i in range(1, n + 1):
        kube, os_name = rng.choice(combos)
        spec: dict = {"platform": {"type": "kubernetes", "version": kube}, "os": os_name,
                      "driver": {"version": rng.choice(["580.173.02", "595.91.07", "580"])}, "nodePools": []}
        for j, gpu in enumerate(rng.sample(list(INSTANCE), rng.randint(1, 3))):
            pool = {"name": f"pool-{j}-{gpu.lower()[:12].rstrip('-')}", "gpu": gpu,
                    "nodeSelector": {"node.kubernetes.io/instance-type": INSTANCE[gpu]}}
            if gpu in MIG and rng.random() < 0.6:
                layout = rng.choice(MIG[gpu])
                pool["mig"] = {"strategy": "single" if len(layout) == 1 else "mixed", "layout": layout}
            spec["nodePools"].append(pool)
        optional = {"images": {"registry": f"registry.r{i % 7}.example.com/nvidia", "pullSecrets": ["mirror-pull"]},
                    "daemonsets": {"tolerations": TOLERATIONS}, "devicePlugin": {"resources": RESOURCES},
                    "containerRuntime": "crio" if os_name.startswith("rhel") else "containerd"}
        spec.update({k: v for k, v in optional.items() if rng.random() < 0.3})
        labels = {"region": rng.choice(["us-east-1", "us-west-2", "eu-west-1"]), "environment": rng.choice(["prod", "lab"])}
        (folder / f"cluster-{i:04d}.yaml").write_text(dump({"apiVersion": "gpuop/v1alpha1", "kind": "ClusterProfile",
            "extends": "_base.yaml", "metadata": {"name": f"cluster-{i:04d}", "labels": labels}, "spec": spec}))


def descendants(pid: int) -> list[int]:
    try:
        kids = [int(c) for t in Path(f"/proc/{pid}/task").iterdir() for c in (t / "children").read_text().split()]
        return kids + [d for k in kids for d in descendants(k)]
    except OSError:  # exited meanwhile
        return []


def role(pid: int, root: int) -> str:
    cmd = Path(f"/proc/{pid}/cmdline").read_text().replace("\0", " ")
    return next((v for k, v in ROLES.items() if k in cmd), "python main" if pid == root else cmd[:40])


def run_child(cmd: list[str], cwd: Path) -> dict:
    """Run cmd in a fresh process, sampling its process tree's memory until it exits."""
    peak: dict[int, tuple[str, float]] = {}  # pid -> (role, VmHWM MB)
    total = 0.0
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        t = time.perf_counter()
        p = subprocess.Popen(cmd, cwd=cwd, stdout=out, stderr=err, text=True,
                             env=dict(os.environ, JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION="20"))
        while not (w := os.wait4(p.pid, os.WNOHANG))[0]:
            now = 0.0
            for pid in [p.pid] + descendants(p.pid):
                try:
                    status = Path(f"/proc/{pid}/status").read_text()
                    hwm, rss = (int(status.split(f"{k}:")[1].split()[0]) / 1024 for k in ("VmHWM", "VmRSS"))
                    peak[pid] = (peak[pid][0] if pid in peak else role(pid, p.pid), hwm)
                    now += rss
                except (OSError, IndexError):  # gone, or a zombie without memory lines
                    pass
            total = max(total, now)
            time.sleep(0.05)
        wall, code, _, _ = time.perf_counter() - t, os.waitstatus_to_exitcode(w[1]), out.seek(0), err.seek(0)
        if code:
            sys.exit(f"{' '.join(cmd)} failed ({code}):\n{err.read()}")
        roles = {n: {"processes": sum(1 for m, _ in peak.values() if m == n),
                     "max_peak_rss_mb": round(max(mb for m, mb in peak.values() if m == n), 1)} for n, _ in peak.values()}
        return {"wall_s": wall, "ru_maxrss_mb": round(w[2].ru_maxrss / 1024, 1), "peak_total_rss_mb": round(total, 1),
                "by_role": roles, "stdout": out.read()}


def stage_child(profiles: Path, out: Path) -> None:
    marks = [("start", time.perf_counter())]
    lap = lambda name: marks.append((name, time.perf_counter()))  # noqa: E731
    from gpuop.pipeline import plan_all
    from gpuop.settings import load_settings  # noqa: I001
    settings = load_settings(ROOT / "gpuop.yaml"); lap("import gpuop + settings")
    plans, _ = plan_all([profiles]); lap("load+validate+plan")
    from gpuop.outputs import assemble, build_cluster; from gpuop.synth import Synthesizer  # noqa: E702
    from gpuop.write import write_tree
    synth = Synthesizer(); lap("start Node + import cdk8s")
    stacks = [synth.synthesize(p) for p in plans]; lap("synthesize (cdk8s)")
    builds = [build_cluster(s, settings) for s in stacks]; lap("package (build_cluster)")
    files = assemble(builds, {}); lap("assemble (versions, index)")
    write_tree(out, files); lap("write")
    print(json.dumps({"stages_s": {n: t - marks[i][1] for i, (n, t) in enumerate(marks[1:])},
                      "cdk8s_charts": synth.cdk8s_charts}))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--profiles", type=int, default=100, help="how many profiles to generate (default 100)")
    ap.add_argument("--jobs", type=int, help="pass -j to gpuop synth (default: gpuop's auto)")
    ap.add_argument("--keep", type=Path, help="work in DIR (profiles/, dist-cli/, dist-stages/) and keep it")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--stage-child", nargs=2, type=Path, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.stage_child:
        return stage_child(*a.stage_child)
    work = a.keep.absolute() if a.keep else Path(tempfile.mkdtemp(prefix="gpuop-bench-"))
    profiles, cli_out, stage_out = work / "profiles", work / "dist-cli", work / "dist-stages"
    for d in (profiles, cli_out, stage_out):  # no stale profiles, no version lock from an earlier run
        shutil.rmtree(d, ignore_errors=True)
    generate(a.profiles, profiles, a.seed)
    load_before = os.getloadavg()[0]
    cli = run_child([sys.executable, "-m", "gpuop.cli", "synth", str(profiles), "-o", str(cli_out), "--no-cache",
                     "--no-progress", "--settings", str(ROOT / "gpuop.yaml")] + (["-j", str(a.jobs)] if a.jobs else []), work)
    stages = run_child([sys.executable, __file__, "--stage-child", str(profiles), str(stage_out)], work)
    st, wall, _ = json.loads(stages.pop("stdout")), cli.pop("wall_s"), cli.pop("stdout")
    written = [f for f in cli_out.rglob("*") if f.is_file()]
    git = lambda *args: subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True).stdout.strip()  # noqa: E731
    r = {"profiles": a.profiles, "jobs": a.jobs or "auto", "wall_s": round(wall, 3), "profiles_per_s": round(a.profiles / wall, 2),
         "ms_per_profile": round(1000 * wall / a.profiles, 2), "files_written": len(written),
         "bytes_written": sum(f.stat().st_size for f in written),
         "k8s_objects": sum(c["objects"] for c in json.loads((cli_out / "index.json").read_text())["clusters"]),
         "cdk8s_variant_charts": st["cdk8s_charts"], "cli_memory": cli, "stages_memory": stages,
         "stages_s": {k: round(v, 3) for k, v in st["stages_s"].items()}}
    r["stages_s"]["total (serial, in-process)"] = round(sum(st["stages_s"].values()), 3)
    r["host"] = {"python": platform.python_version(), "cpus": os.cpu_count(), "seed": a.seed, "gpuop_commit": git(
        "rev-parse", "--short", "HEAD"), "source_dirty": bool(git("status", "--porcelain", "constructs")),
        "loadavg_1m_before_after": [round(load_before, 2), round(os.getloadavg()[0], 2)]}
    rows = [(k, v) for k, v in r.items() if not isinstance(v, dict)]
    for label, mem in (("CLI", cli), ("stages run", stages)):
        rows += [(f"{label}: ru_maxrss MB (largest process)", mem["ru_maxrss_mb"]),
                 (f"{label}: peak total RSS MB (sampled)", mem["peak_total_rss_mb"])] + [
                 (f"{label}: peak RSS MB {k} x{v['processes']}", v["max_peak_rss_mb"]) for k, v in mem["by_role"].items()]
    rows += [(f"stage {k} s", v) for k, v in r["stages_s"].items()]
    width = max(len(k) for k, _ in rows)
    print("\n".join(f"{k:<{width}}  {v:>10}" for k, v in rows))
    path = ROOT / "bench/compile-results.json"
    doc = json.loads(path.read_text()) if path.is_file() else {}
    doc.setdefault("runs", {})[f"{a.profiles}" + (f"-j{a.jobs}" if a.jobs else "")] = r
    path.write_text(json.dumps(doc, indent=2) + "\n")
    if not a.keep:
        shutil.rmtree(work)


if __name__ == "__main__":
    main()
