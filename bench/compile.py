"""Compile benchmark: how long `gpuop synth` takes, and how much memory it needs, for a fleet of N profiles.

    python bench/compile.py [--profiles N] [--keep DIR] [--seed S]        (default N=100)

1. Generates N seeded, realistic profiles (cluster-0001...) plus a shared `_base.yaml` they extend:
   Kubernetes 1.33-1.36 and OS ubuntu22.04 / ubuntu24.04 / rhel9.6, paired only where the release matrix
   in catalog/data/releases.yaml allows; 1-3 node pools of catalog GPUs; driver 580.173.02, 595.91.07 or the
   branch "580"; optional registry mirror, tolerations and resources. MIG layouts only on MIG-capable GPUs
   (checked against gpus.yaml), with profile names from /work/shared/refs/mig/FACTS.md section 4 for that
   GPU's family, in layouts that fit the placement rules.
2. End to end: runs the real CLI (`python -m gpuop.cli synth DIR -o OUT`) in a fresh subprocess and
   reaps it with os.wait4, so the rusage covers that one child alone. Wall time includes interpreter
   start, imports, Node/jsii start and shutdown. Linux reports ru_maxrss of a reaped child as the larger of
   its own peak and that of every descendant it reaped: jsii waits for its Node process at exit, so
   this figure is max(Python peak, Node peak), not their sum.
3. Stages: a second fresh subprocess (this script with --stage-child) runs the pipeline steps of
   gpuop.pipeline.compile_profiles one by one, timing each with perf_counter: import, load+validate+plan
   (plan_all), Node start (Synthesizer(): imports cdk8s and starts jsii's Node), synthesize (cdk8s),
   package, write (write_tree). Before exiting it reads VmHWM (the kernel's peak RSS) from
   /proc/PID/status for itself and for every descendant process (the Node processes) separately.
Prints a table and records the run, keyed by N, in bench/compile-results.json.
"""
from __future__ import annotations

import argparse, json, os, platform, random, subprocess, sys, tempfile, time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "constructs/gpuop/catalog/data"
# Layouts per GPU, names from FACTS.md §4.1 (F8 family: 8 memory slices, 7 compute, 1g at starts 0-6).
MIG = {"H100-SXM5-80GB": [{"3g.40gb": 1, "1g.10gb": 2}, {"2g.20gb": 3}, {"7g.80gb": 1}, {"1g.10gb": 7}],
       "A100-SXM4-80GB": [{"4g.40gb": 1, "3g.40gb": 1}, {"3g.40gb": 2}, {"1g.20gb": 4}],
       "H200-SXM5-141GB": [{"3g.71gb": 1, "1g.18gb": 3}, {"2g.35gb": 3}],
       "B200-180GB": [{"3g.90gb": 2}, {"1g.23gb": 7}, {"4g.90gb": 1, "2g.45gb": 1, "1g.23gb": 1}]}
PLAIN = ["L40S", "L4", "T4", "A10", "L40"]
INSTANCE = {"H100-SXM5-80GB": "p5.48xlarge", "A100-SXM4-80GB": "p4de.24xlarge", "H200-SXM5-141GB": "p5e.48xlarge",
            "B200-180GB": "p6-b200.48xlarge", "L40S": "g6e.12xlarge", "L4": "g6.12xlarge", "T4": "g4dn.12xlarge",
            "A10": "g5.12xlarge", "L40": "g6e.xlarge"}
BASE = {"apiVersion": "gpuop/v1alpha1", "kind": "ClusterProfile",
        "spec": {"daemonsets": {"priorityClassName": "system-node-critical"}}}


def generate(n: int, folder: Path, seed: int) -> None:
    rng = random.Random(seed)
    gpus = {g["name"]: g for g in yaml.safe_load((DATA / "gpus.yaml").read_text())["gpus"]}
    assert all(gpus[g]["migCapable"] for g in MIG) and all(g in gpus for g in PLAIN), "catalog changed"
    os_matrix = yaml.safe_load((DATA / "releases.yaml").read_text())["releases"][0]["matrix"]["os"]
    combos = [(k, o) for o in ("ubuntu22.04", "ubuntu24.04", "rhel9.6") for k in ("1.33", "1.34", "1.35", "1.36")
              if k in os_matrix[o]["kubernetes"]]
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "_base.yaml").write_text(yaml.safe_dump(BASE, sort_keys=False))
    for i in range(1, n + 1):
        kube, os_name = rng.choice(combos)
        spec: dict = {"platform": {"type": "kubernetes", "version": kube}, "os": os_name,
                      "driver": {"version": rng.choice(["580.173.02", "595.91.07", "580"])}, "nodePools": []}
        for j, gpu in enumerate(rng.sample(list(MIG) + PLAIN, rng.randint(1, 3))):
            pool = {"name": f"pool-{j}-{gpu.lower()[:12].rstrip('-')}", "gpu": gpu,
                    "nodeSelector": {"node.kubernetes.io/instance-type": INSTANCE[gpu]}}
            if gpu in MIG and rng.random() < 0.6:
                layout = rng.choice(MIG[gpu])
                pool["mig"] = {"strategy": "single" if len(layout) == 1 else "mixed", "layout": layout}
            spec["nodePools"].append(pool)
        if rng.random() < 0.3:
            spec["images"] = {"registry": f"registry.r{i % 7}.example.com/nvidia", "pullSecrets": ["mirror-pull"]}
        if rng.random() < 0.3:
            spec["daemonsets"] = {"tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
                                                  {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]}
        if rng.random() < 0.3:
            spec["devicePlugin"] = {"resources": {"requests": {"cpu": "50m", "memory": "64Mi"}, "limits": {"memory": "256Mi"}}}
        if os_name.startswith("rhel") and rng.random() < 0.5:
            spec["containerRuntime"] = "crio"
        doc = {"apiVersion": "gpuop/v1alpha1", "kind": "ClusterProfile", "extends": "_base.yaml",
               "metadata": {"name": f"cluster-{i:04d}", "labels": {"region": rng.choice(["us-east-1", "us-west-2", "eu-west-1"]),
                                                                 "environment": rng.choice(["prod", "staging", "lab"])}},
               "spec": spec}
        (folder / f"cluster-{i:04d}.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))


def run_child(cmd: list[str]) -> tuple[float, float, str]:
    """Run cmd in a fresh process; return (wall s, ru_maxrss MB of that child via os.wait4, stdout)."""
    env = dict(os.environ, JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION="20")
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        t = time.perf_counter()
        p = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=out, stderr=err, text=True)
        _, status, usage = os.wait4(p.pid, 0)
        wall = time.perf_counter() - t
        p.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0), err.seek(0)
        if p.returncode:
            sys.exit(f"{' '.join(cmd)} failed ({p.returncode}):\n{err.read()}")
        return wall, usage.ru_maxrss / 1024, out.read()


def vmhwm_mb(pid: int) -> float:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(status.split("VmHWM:")[1].split()[0]) / 1024


def descendants(pid: int) -> list[int]:
    kids = [int(c) for t in Path(f"/proc/{pid}/task").iterdir() for c in (t / "children").read_text().split()]
    return kids + [d for k in kids for d in descendants(k)]


def stage_child(profiles: Path, out: Path) -> None:
    times, t = {}, [time.perf_counter()]

    def lap(name):
        times[name], t[0] = time.perf_counter() - t[0], time.perf_counter()
    from gpuop.pipeline import plan_all
    from gpuop.settings import load_settings
    settings = load_settings(ROOT / "gpuop.yaml"); lap("import gpuop (no cdk8s)")
    plans, _ = plan_all([profiles]); lap("load+validate+plan")
    from gpuop.outputs import package
    from gpuop.synth import Synthesizer
    from gpuop.write import write_tree
    synth = Synthesizer(); lap("start Node + import cdk8s")
    stacks = [synth.synthesize(p) for p in plans]; lap("synthesize (cdk8s)")
    files = package(stacks, settings, {}); lap("package")
    write_tree(out, dict(sorted(files.items()))); lap("write")
    node = {Path(Path(f"/proc/{d}/cmdline").read_text().split("\0")[-2]).name: vmhwm_mb(d) for d in descendants(os.getpid())}
    print(json.dumps({"stages_s": times, "cdk8s_charts": synth.cdk8s_charts,
                      "python_peak_rss_mb": vmhwm_mb(os.getpid()), "node_peak_rss_mb": node}))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--profiles", type=int, default=100, help="how many profiles to generate (default 100)")
    ap.add_argument("--keep", type=Path, help="generate into DIR and keep profiles and outputs there")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--stage-child", nargs=2, type=Path, metavar=("PROFILES", "OUT"), help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.stage_child:
        return stage_child(*a.stage_child)
    work = a.keep.absolute() if a.keep else Path(tempfile.mkdtemp(prefix="gpuop-bench-"))
    profiles, cli_out, stage_out = work / "profiles", work / "dist-cli", work / "dist-stages"
    generate(a.profiles, profiles, a.seed)
    wall, cli_rss, _ = run_child([sys.executable, "-m", "gpuop.cli", "synth", str(profiles), "-o", str(cli_out)])
    _, _, stdout = run_child([sys.executable, __file__, "--stage-child", str(profiles), str(stage_out)])
    st = json.loads(stdout.strip().splitlines()[-1])
    index = json.loads((cli_out / "index.json").read_text())
    written = [f for f in cli_out.rglob("*") if f.is_file()]
    r = {"profiles": a.profiles, "clusters": len(index["clusters"]), "wall_s": round(wall, 3),
         "profiles_per_s": round(a.profiles / wall, 2), "ms_per_profile": round(1000 * wall / a.profiles, 2),
         "files_written": len(written), "bytes_written": sum(f.stat().st_size for f in written),
         "k8s_objects": sum(c["objects"] for c in index["clusters"]), "cdk8s_charts": st["cdk8s_charts"],
         "cli_peak_rss_mb_max_of_python_and_node": round(cli_rss, 1),
         "python_peak_rss_mb": round(st["python_peak_rss_mb"], 1),
         "node_peak_rss_mb": {k: round(v, 1) for k, v in st["node_peak_rss_mb"].items()},
         "stages_s": {k: round(v, 3) for k, v in st["stages_s"].items()},
         "host": {"python": platform.python_version(), "cpus": os.cpu_count(), "seed": a.seed}}
    rows = [("profiles", r["profiles"]), ("wall s (CLI, fresh process)", r["wall_s"]),
            ("profiles/s", r["profiles_per_s"]), ("ms/profile", r["ms_per_profile"]),
            ("files written", r["files_written"]), ("k8s objects", r["k8s_objects"]),
            ("cdk8s variant charts", r["cdk8s_charts"]), ("peak RSS MB, CLI (max py/node)", r["cli_peak_rss_mb_max_of_python_and_node"]),
            ("peak RSS MB, python (stages run)", r["python_peak_rss_mb"]),
            ("peak RSS MB, node (stages run)", ", ".join(f"{k} {v}" for k, v in r["node_peak_rss_mb"].items()) or "n/a")]
    rows += [(f"stage: {k} s", v) for k, v in r["stages_s"].items()] + [("stage total s", round(sum(r["stages_s"].values()), 3))]
    width = max(len(k) for k, _ in rows)
    print("\n".join(f"{k:<{width}}  {v}" for k, v in rows))
    path = ROOT / "bench/compile-results.json"
    doc = json.loads(path.read_text()) if path.is_file() else {"runs": {}}
    doc["runs"][str(a.profiles)] = r
    path.write_text(json.dumps(doc, indent=2) + "\n")
    if not a.keep:
        import shutil
        shutil.rmtree(work)


if __name__ == "__main__":
    main()
