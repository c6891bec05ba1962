"""Compile benchmark: time and peak memory of `gpuop synth` over a generated fleet of N cluster profiles.

    python bench/compile.py [--profiles N] [--keep DIR] [--seed S]      (default N=100, S=1)

Profiles: cluster-0001..N (seeded), each extending a shared _base.yaml. Kubernetes 1.33-1.36 x OS
ubuntu22.04/ubuntu24.04/rhel9.6, only pairs releases.yaml's matrix allows; 1-3 pools of catalog GPUs; driver
580.173.02, 595.91.07 or branch "580"; optional registry mirror, tolerations, device-plugin resources,
crio on RHEL. MIG layouts only on GPUs gpus.yaml marks migCapable, with that GPU's profile names from
/work/shared/refs/mig/FACTS.md §4.1 in combinations that fit the F8 placement rules.

End to end: the real CLI (`python -m gpuop.cli synth`) runs in a fresh subprocess, reaped with os.wait4 so
the rusage is that child's alone. Wall time covers interpreter start, imports, Node start, compile, write
and Node shutdown. Linux gives a reaped child's ru_maxrss as the max of its own peak RSS and those of the
descendants it reaped; jsii reaps its Node processes at exit, so this is max(Python, Node), not a sum.

Stages: a second fresh subprocess (this script, --stage-child) replays gpuop.pipeline.compile_profiles
step by step, perf_counter around each: import gpuop + settings; load+validate+plan (plan_all); start
Node + import cdk8s (the cdk8s/jsii imports start Node; then Synthesizer()); synthesize (cdk8s);
package; write (write_tree). It then reads VmHWM (kernel peak RSS) from /proc/PID/status for itself and
for each descendant: jsii runs two Node processes, jsii-runtime.js and its child program.js (the kernel).

Prints a table; records the run under runs[N] in bench/compile-results.json.
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
        if rng.random() < 0.3:
            spec["images"] = {"registry": f"registry.r{i % 7}.example.com/nvidia", "pullSecrets": ["mirror-pull"]}
        if rng.random() < 0.3:
            spec["daemonsets"] = {"tolerations": TOLERATIONS}
        if rng.random() < 0.3:
            spec["devicePlugin"] = {"resources": RESOURCES}
        if os_name.startswith("rhel") and rng.random() < 0.5:
            spec["containerRuntime"] = "crio"
        labels = {"region": rng.choice(["us-east-1", "us-west-2", "eu-west-1"]), "environment": rng.choice(["prod", "lab"])}
        (folder / f"cluster-{i:04d}.yaml").write_text(dump({"apiVersion": "gpuop/v1alpha1", "kind": "ClusterProfile",
            "extends": "_base.yaml", "metadata": {"name": f"cluster-{i:04d}", "labels": labels}, "spec": spec}))


def run_child(cmd: list[str]) -> tuple[float, float, str]:
    """Run cmd in a fresh process; return (wall s, ru_maxrss MB of that child via os.wait4, stdout)."""
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        t = time.perf_counter()
        p = subprocess.Popen(cmd, cwd=ROOT, stdout=out, stderr=err, text=True,
                             env=dict(os.environ, JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION="20"))
        _, status, usage = os.wait4(p.pid, 0)
        wall, p.returncode, _, _ = time.perf_counter() - t, os.waitstatus_to_exitcode(status), out.seek(0), err.seek(0)
        if p.returncode:
            sys.exit(f"{' '.join(cmd)} failed ({p.returncode}):\n{err.read()}")
        return wall, usage.ru_maxrss / 1024, out.read()


def vmhwm_mb(pid: int) -> float:  # the kernel's peak resident set size of a live process
    return int(Path(f"/proc/{pid}/status").read_text().split("VmHWM:")[1].split()[0]) / 1024


def descendants(pid: int) -> list[int]:
    kids = [int(c) for t in Path(f"/proc/{pid}/task").iterdir() for c in (t / "children").read_text().split()]
    return kids + [d for k in kids for d in descendants(k)]


def stage_child(profiles: Path, out: Path) -> None:
    marks = [("start", time.perf_counter())]
    lap = lambda name: marks.append((name, time.perf_counter()))  # noqa: E731
    from gpuop.pipeline import plan_all
    from gpuop.settings import load_settings
    settings = load_settings(ROOT / "gpuop.yaml"); lap("import gpuop + settings (no cdk8s)")
    plans, _ = plan_all([profiles]); lap("load+validate+plan")
    from gpuop.outputs import package
    from gpuop.synth import Synthesizer
    from gpuop.write import write_tree
    synth = Synthesizer(); lap("start Node + import cdk8s")
    stacks = [synth.synthesize(p) for p in plans]; lap("synthesize (cdk8s)")
    files = package(stacks, settings, {}); lap("package")
    write_tree(out, dict(sorted(files.items()))); lap("write")
    node = {Path(Path(f"/proc/{d}/cmdline").read_text().split("\0")[-2]).name: vmhwm_mb(d) for d in descendants(os.getpid())}
    times = {name: t - marks[i][1] for i, (name, t) in enumerate(marks[1:])}
    print(json.dumps({"stages_s": times, "cdk8s_charts": synth.cdk8s_charts,
                      "python_peak_rss_mb": vmhwm_mb(os.getpid()), "node_peak_rss_mb": node}))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--profiles", type=int, default=100, help="how many profiles to generate (default 100)")
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
    wall, cli_rss, _ = run_child([sys.executable, "-m", "gpuop.cli", "synth", str(profiles), "-o", str(cli_out)])
    st = json.loads(run_child([sys.executable, __file__, "--stage-child", str(profiles), str(stage_out)])[2])
    clusters = json.loads((cli_out / "index.json").read_text())["clusters"]
    written = [f for f in cli_out.rglob("*") if f.is_file()]
    r = {"profiles": a.profiles, "wall_s": round(wall, 3), "profiles_per_s": round(a.profiles / wall, 2),
         "ms_per_profile": round(1000 * wall / a.profiles, 2), "files_written": len(written),
         "bytes_written": sum(f.stat().st_size for f in written), "k8s_objects": sum(c["objects"] for c in clusters),
         "cdk8s_variant_charts": st["cdk8s_charts"], "peak_rss_mb_cli_max_python_node": round(cli_rss, 1),
         "peak_rss_mb_python": round(st["python_peak_rss_mb"], 1),
         "peak_rss_mb_node": {k: round(v, 1) for k, v in st["node_peak_rss_mb"].items()},
         "stages_s": {k: round(v, 3) for k, v in st["stages_s"].items()}}
    r["stages_s"]["total (in-process)"] = round(sum(r["stages_s"].values()), 3)
    r["host"] = {"python": platform.python_version(), "cpus": os.cpu_count(), "seed": a.seed, "gpuop_commit":
                 subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()}
    rows = [(k, v) for k, v in r.items() if k not in ("stages_s", "host", "peak_rss_mb_node")]
    rows += [(f"peak_rss_mb_node {k}", v) for k, v in r["peak_rss_mb_node"].items()]
    rows += [(f"stage {k} s", v) for k, v in r["stages_s"].items()]
    width = max(len(k) for k, _ in rows)
    print("\n".join(f"{k:<{width}}  {v:>10}" for k, v in rows))
    path = ROOT / "bench/compile-results.json"
    doc = json.loads(path.read_text()) if path.is_file() else {}
    doc.setdefault("runs", {})[str(a.profiles)] = r  # one entry per N, so the 100 and 500 runs sit side by side
    path.write_text(json.dumps(doc, indent=2) + "\n")
    if not a.keep:
        shutil.rmtree(work)


if __name__ == "__main__":
    main()
