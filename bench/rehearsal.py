"""The rehearsal rig's costs: building its binaries, starting a control plane with the CRDs installed, and
rehearsing one example cluster end to end (`rehearse_cluster_s`, prod-east; target <= 20 s).

    python bench/rehearsal.py [--runs N] [--cold] [--out FILE]
    make bench-rehearsal      # builds the rig first when needed; -> bench/rehearsal.json

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
- with --cold, `cold_build_s`: the same with an empty Go build cache and module cache (throwaway
  GOCACHE and GOMODCACHE): what a fresh machine's first `make test` pays, module downloads included.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
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


def startup(bins: dict[str, Path], crds: list[Path]) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="gpuop-rig-bench-") as tmp:
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
    return {"up_s": t1 - t0, "crds_s": t2 - t1, "up_and_crds_s": t2 - t0, "stop_s": t4 - t3}


def rehearse_example(bins: dict[str, Path], cluster: str = "prod-east") -> dict[str, float]:
    """One example cluster rehearsed end to end (`gpuop rehearse prod-east` without the CLI): control plane up,
    its 16 fake nodes and NodeFeatures, nfd-master, the output applied, labels and rollout settled, the probes
    scheduled, the control plane stopped. Its committed dist/ is what is applied."""
    from gpuop.pipeline.run import plan_all
    from gpuop.rehearse import objects, run

    plans, _ = plan_all([ROOT / "profiles"])
    plan = next(p for p in plans if p.name == cluster)
    out = objects.load(ROOT / "dist", cluster, plan.operator is not None)
    with tempfile.TemporaryDirectory(prefix="gpuop-rehearse-bench-") as tmp:
        started = time.monotonic()
        result = run.rehearse_cluster(rig, plan, out, Path(tmp) / cluster, bins)
        took = time.monotonic() - started
    if not result.ok:
        raise SystemExit(f"{cluster} differs from its plan:\n" + "\n".join(f.line() for f in result.failures))
    return {"rehearse_cluster_s": took}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--warm", action="store_true", help="also rebuild every binary with the Go caches as they are")
    ap.add_argument("--cold", action="store_true", help="also build with empty Go caches (tens of minutes)")
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "rehearsal.json")
    args = ap.parse_args()

    out: dict = json.loads(args.out.read_text()) if args.out.is_file() else {}
    bins = rig.binaries(build=True)
    started = time.monotonic()
    subprocess.run([sys.executable, str(BUILD), "--check"], check=True)
    out["noop_build_s"] = round(time.monotonic() - started, 3)

    crds = crd_files(bins)
    runs = [startup(bins, crds) for _ in range(args.runs)]
    for key in runs[0]:
        out[key] = round(statistics.median(r[key] for r in runs), 2)
    out["runs"] = [{k: round(v, 2) for k, v in r.items()} for r in runs]
    out["crd_files"] = [f.name for f in crds]
    out["target_up_and_crds_s"] = 15
    if "nfd-master" in bins and "kwok" in bins:
        rehearsals = [rehearse_example(bins) for _ in range(args.runs)]
        out["rehearse_cluster_s"] = round(statistics.median(r["rehearse_cluster_s"] for r in rehearsals), 2)
        out["rehearse_cluster"] = "prod-east"
        out["target_rehearse_cluster_s"] = 20

    if args.warm:
        with tempfile.TemporaryDirectory(prefix="gpuop-rig-warm-") as tmp:
            out["warm_build_s"] = round(time_build({**os.environ, "GPUOP_RIG_DIR": str(Path(tmp) / "bin")}), 1)
    if args.cold:
        with tempfile.TemporaryDirectory(prefix="gpuop-rig-cold-") as tmp:
            env = {**os.environ, "GPUOP_RIG_DIR": str(Path(tmp) / "bin"), "GOCACHE": str(Path(tmp) / "gocache"),
                   "GOMODCACHE": str(Path(tmp) / "gomod")}
            out["cold_build_s"] = round(time_build(env), 1)
            # the module cache is written read-only: make it removable
            subprocess.run(["chmod", "-R", "u+w", str(Path(tmp) / "gomod")], check=False)
    out["machine"] = {"cores": os.cpu_count(), "python": platform.python_version(),
                      "go": subprocess.run(["go", "version"], capture_output=True, text=True).stdout.strip(),
                      "load_average_at_end": [round(x, 1) for x in os.getloadavg()]}
    args.out.write_text(json.dumps(out, indent=2, sort_keys=True) + "\n")
    print(json.dumps(out, indent=2, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
