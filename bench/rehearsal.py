"""The rehearsal rig's costs: building its binaries, starting a control plane with the CRDs installed, and
rehearsing one example cluster end to end (`rehearse_cluster_s`, prod-east; target <= 20 s).

    python bench/rehearsal.py [--runs N] [--warm] [--out FILE]
    make bench-rehearsal      # builds the rig first when needed; -> bench/rehearsal.json
    python bench/rehearsal_cold.py   # a fresh machine's first build, per module (-> cold_build)

The machine may be shared: every figure comes with the CPU seconds it took (this process and the rig's
processes, which are its children) and the load average when it started, so a wall time measured under
load can be judged; the medians are of wall seconds.

Measured:
- `up_s`: `ControlPlane(...).__enter__()` with the default components (etcd, kube-apiserver,
  kube-controller-manager, kube-scheduler, kwok) until every one is healthy and the `default`
  ServiceAccount exists (pods can be created). Certificates, keys and ports are made in it too.
- `crds_s`: then applying the CRDs a GPU Operator install brings (the operator chart's ClusterPolicy and
  NVIDIADriver, NFD's NodeFeature, NodeFeatureRule, NodeFeatureGroup) until each is Established and served.
- `up_and_crds_s`: the two together, the target: <= 15 s once the rig is built. The median of --runs.
- `stop_s`: leaving the block (every process killed, the workdir removed).
- `noop_build_s`: `tools/rehearsal/build.py` when everything is built (the stamp check `make test` pays).
- with --warm, `warm_build_s`: every binary rebuilt into an empty folder with the Go build cache warm (a new pin of one
  module costs at most this; in practice only that module's share).
- `rehearse_cluster_s`: one example cluster (prod-east, 16 fake nodes) rehearsed end to end, the target
  <= 20 s; `rehearse_cluster_steps_s`: the median of each step (run.py: `up` the API server answering,
  `crds`, `fleet` the Nodes and NodeFeatures with nfd-master starting, `controllers` the controller-manager,
  scheduler, kwok and nfd-master healthy, `apply`, `labels` nfd-master's, `rollout` the DaemonSets,
  `agents` the simulated device plugin / GFD / DRA plugin, `rollout-agents`, `probes`, `claims`, `stop`).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "constructs"))

from gpuop.rehearse import rig  # noqa: E402

BUILD = ROOT / "tools" / "rehearsal" / "build.py"


def crd_files(bins: dict[str, Path]) -> list[Path]:
    refs = Path(os.environ.get("GPUOP_REFS") or ROOT.parent / "shared" / "refs")
    chart = refs / "gpu-operator" / "chart"
    files = sorted((chart / "crds").glob("*.yaml")) if (chart / "crds").is_dir() else []
    return files + [rig.nfd_crds(bins["nfd-master"].parent)]


def time_build(env: dict[str, str]) -> float:
    started = time.monotonic()
    subprocess.run([sys.executable, str(BUILD)], check=True, env=env, stdout=subprocess.DEVNULL)
    return time.monotonic() - started


def cpu_seconds() -> float:
    """User + system seconds of this process and its waited-for children (the rig's processes, once stopped)."""
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def load() -> list[float]:
    return [round(x, 1) for x in os.getloadavg()]


def startup(bins: dict[str, Path], crds: list[Path]) -> dict:
    with tempfile.TemporaryDirectory(prefix="gpuop-rig-bench-") as tmp:
        load_at_start, c0 = load(), cpu_seconds()
        t0 = time.monotonic()
        cp = rig.ControlPlane(Path(tmp) / "cp", binaries=bins)
        cp.__enter__()
        try:
            t1 = time.monotonic()
            problems = cp.apply(crds)
            t2 = time.monotonic()
            if problems:
                raise SystemExit("CRDs refused:\n" + "\n".join(map(str, problems)))
        finally:
            t3 = time.monotonic()
            cp.__exit__(None, None, None)
            t4 = time.monotonic()
    return {"up_s": t1 - t0, "crds_s": t2 - t1, "up_and_crds_s": t2 - t0, "stop_s": t4 - t3,
            "cpu_s": cpu_seconds() - c0, "load_average_at_start": load_at_start}


class _Counted(rig.ControlPlane):
    """The rig's control plane, noting each process's CPU seconds just before it is stopped (/proc)."""
    cpu: dict[str, float] = {}

    def stop(self) -> None:
        tick = os.sysconf("SC_CLK_TCK")
        for name, proc in self._procs.items():
            try:
                fields = Path(f"/proc/{proc.popen.pid}/stat").read_text().rsplit(")", 1)[1].split()
                _Counted.cpu[name] = (int(fields[11]) + int(fields[12])) / tick       # utime + stime
            except (OSError, IndexError, ValueError):
                pass
        super().stop()


class _CountedRig:
    """rig, with _Counted as its ControlPlane: what run.rehearse_cluster is given."""
    def __getattr__(self, name):
        return _Counted if name == "ControlPlane" else getattr(rig, name)


def rehearse_example(bins: dict[str, Path], cluster: str = "prod-east") -> dict:
    """One example cluster rehearsed end to end (`gpuop rehearse prod-east` without the CLI): control plane up,
    its 16 fake nodes and NodeFeatures, nfd-master, the output applied, labels and rollout settled, the probes
    scheduled, the control plane stopped. Its committed dist/ is what is applied."""
    from gpuop.pipeline.run import plan_all
    from gpuop.rehearse import objects, run

    plans, _ = plan_all([ROOT / "profiles"])
    plan = next(p for p in plans if p.name == cluster)
    out = objects.load(ROOT / "dist", cluster, plan.operator is not None)
    with tempfile.TemporaryDirectory(prefix="gpuop-rehearse-bench-") as tmp:
        load_at_start, c0 = load(), cpu_seconds()
        own0 = resource.getrusage(resource.RUSAGE_SELF)
        started = time.monotonic()
        _Counted.cpu = {}
        result = run.rehearse_cluster(_CountedRig(), plan, out, Path(tmp) / cluster, bins)
        took = time.monotonic() - started
        cpu = cpu_seconds() - c0
        own = resource.getrusage(resource.RUSAGE_SELF)
    if not result.ok:
        raise SystemExit(f"{cluster} differs from its plan:\n" + "\n".join(f.line() for f in result.failures))
    per = dict(_Counted.cpu)
    per["gpuop (python)"] = own.ru_utime + own.ru_stime - own0.ru_utime - own0.ru_stime
    return {"rehearse_cluster_s": took, "cpu_s": cpu, "load_average_at_start": load_at_start,
            "steps_s": dict(result.steps), "cpu_s_per_process": per}


def _rounded(run: dict) -> dict:
    return {k: (round(v, 2) if isinstance(v, float) else _rounded(v) if isinstance(v, dict) else v)
            for k, v in run.items()}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--warm", action="store_true", help="also rebuild every binary with the Go caches as they are")
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "rehearsal.json")
    args = ap.parse_args()

    out: dict = json.loads(args.out.read_text()) if args.out.is_file() else {}
    bins = rig.binaries(build=True)
    if not os.environ.get("KUBEBUILDER_ASSETS"):       # the project's own binaries: what `make rig` costs when built
        started = time.monotonic()
        subprocess.run([sys.executable, str(BUILD), "--check"], check=True)
        out["noop_build_s"] = round(time.monotonic() - started, 3)
    out["binaries"] = "KUBEBUILDER_ASSETS" if os.environ.get("KUBEBUILDER_ASSETS") else "tools/rehearsal/build.py"

    crds = crd_files(bins)
    runs = [startup(bins, crds) for _ in range(args.runs)]
    for key in ("up_s", "crds_s", "up_and_crds_s", "stop_s", "cpu_s"):
        out[key if key != "cpu_s" else "up_and_crds_cpu_s"] = round(statistics.median(r[key] for r in runs), 2)
    out["runs"] = [_rounded(r) for r in runs]
    out["crd_files"] = [f.name for f in crds]
    out["target_up_and_crds_s"] = 15
    if "nfd-master" in bins and "kwok" in bins:
        rehearsals = [rehearse_example(bins) for _ in range(args.runs)]
        out["rehearse_cluster_s"] = round(statistics.median(r["rehearse_cluster_s"] for r in rehearsals), 2)
        out["rehearse_cluster_cpu_s"] = round(statistics.median(r["cpu_s"] for r in rehearsals), 2)
        out["rehearse_cluster_steps_s"] = {step: round(statistics.median(r["steps_s"].get(step, 0.0)
                                                                         for r in rehearsals), 2)
                                           for step in rehearsals[0]["steps_s"]}
        out["rehearse_runs"] = [_rounded(r) for r in rehearsals]
        out["rehearse_cluster"] = "prod-east"
        out["target_rehearse_cluster_s"] = 20

    if args.warm:
        with tempfile.TemporaryDirectory(prefix="gpuop-rig-warm-") as tmp:
            out["warm_build_s"] = round(time_build({**os.environ, "GPUOP_RIG_DIR": str(Path(tmp) / "bin")}), 1)
    out["machine"] = {"cores": os.cpu_count(), "python": platform.python_version(),
                      "go": subprocess.run(["go", "version"], capture_output=True, text=True).stdout.strip(),
                      "load_average_at_end": load(), "nice": os.nice(0)}
    args.out.write_text(json.dumps(out, indent=2, sort_keys=True) + "\n")
    print(json.dumps(out, indent=2, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
