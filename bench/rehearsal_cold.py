"""A fresh machine's first build of the rehearsal rig, measured per module.

    python bench/rehearsal_cold.py [--out bench/rehearsal.json] [--keep DIR]

The `go build` commands tools/rehearsal/build.py runs (its MODULES, flags and environment), one module
after another, each under `nice -n 15` and `/usr/bin/time -v`, with GOCACHE and GOMODCACHE empty at the
start (throwaway folders shared by the modules, as on a fresh machine: what one module downloads and
compiles the next one reuses). Recorded per module: wall, user and system seconds, peak memory, and the
load average before and after (the machine may be shared: the CPU seconds are the figure to compare).

kubectl is built last, by itself, with the caches the rest left: the seconds it costs on top of the rig
(its share of the dependencies is already compiled) are what leaving it out of the rig saves.

Written into `--out` under `cold_build`, with an estimate of an idle two-core machine's wall time: CPU
seconds / 2, a lower bound (linking and parts of the build run on one core).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools" / "rehearsal"))

import build  # noqa: E402  (tools/rehearsal/build.py)

KUBECTL_PKG = "k8s.io/kubernetes/cmd/kubectl"
CI_MINUTES = 90
SUITE_MINUTES = 18

_FIELDS = {"wall": r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): (\S+)",
           "user_s": r"User time \(seconds\): (\S+)", "system_s": r"System time \(seconds\): (\S+)",
           "max_rss_kb": r"Maximum resident set size \(kbytes\): (\S+)"}


def _wall(text: str) -> float:
    parts = [float(p) for p in text.split(":")]
    secs = 0.0
    for p in parts:
        secs = secs * 60 + p
    return secs


def measure(label: str, folder: str, pkgs: list[str], ldflags: str, out: Path, env: dict[str, str]) -> dict:
    tmp = out / f".tmp-{label}"
    tmp.mkdir(parents=True, exist_ok=True)
    cmd = ["nice", "-n", "15", "/usr/bin/time", "-v", "go", "build", *build.BUILD_FLAGS, f"-ldflags={ldflags}",
           "-o", str(tmp) + os.sep, *pkgs]
    load_before = [round(x, 1) for x in os.getloadavg()]
    print(f"cold: {label}: {' '.join(pkgs)}", file=sys.stderr, flush=True)
    done = subprocess.run(cmd, cwd=build.HERE / folder, env=env, stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{label}: go build failed:\n{done.stderr[-3000:]}")
    got = {k: re.search(v, done.stderr) for k, v in _FIELDS.items()}
    rec = {"wall_s": round(_wall(got["wall"].group(1)), 1), "user_s": float(got["user_s"].group(1)),
           "system_s": float(got["system_s"].group(1)), "max_rss_mb": int(got["max_rss_kb"].group(1)) // 1024,
           "binaries": [build.go_binary_name(p) for p in pkgs], "load_average_before": load_before,
           "load_average_after": [round(x, 1) for x in os.getloadavg()]}
    rec["cpu_s"] = round(rec["user_s"] + rec["system_s"], 1)
    print(f"cold: {label}: {json.dumps(rec)}", file=sys.stderr, flush=True)
    return rec


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "rehearsal.json")
    ap.add_argument("--keep", type=Path, help="the throwaway folder (default: a new temporary one, removed)")
    args = ap.parse_args()
    top = args.keep or Path(tempfile.mkdtemp(prefix="gpuop-rig-cold-"))
    env = {**os.environ, **build.BUILD_ENV, "GOCACHE": str(top / "gocache"), "GOMODCACHE": str(top / "gomod")}
    bins = top / "bin"
    started = time.monotonic()
    modules: dict[str, dict] = {}
    try:
        for m in build.MODULES:
            ldflags = " ".join(build.LDFLAGS + m.version_flags)
            pkgs = [p for p, _ in m.commands if p != KUBECTL_PKG]
            modules[m.folder] = measure(m.folder, m.folder, pkgs, ldflags, bins, env)
        k8s = next(m for m in build.MODULES if m.folder == "kubernetes")
        kubectl = measure("kubectl", "kubernetes", [KUBECTL_PKG], " ".join(build.LDFLAGS + k8s.version_flags),
                          bins, env)
    finally:
        # the module cache is written read-only: make it removable
        subprocess.run(["chmod", "-R", "u+w", str(top)], check=False)
        if args.keep is None:
            shutil.rmtree(top, ignore_errors=True)
    cpu = round(sum(r["cpu_s"] for r in modules.values()), 1)
    wall = round(sum(r["wall_s"] for r in modules.values()), 1)
    idle_min = round(cpu / 2 / 60, 1)
    result = {
        "how": "bench/rehearsal_cold.py: the go build commands of tools/rehearsal/build.py, one module after "
               "another under nice -n 15 and /usr/bin/time -v, GOCACHE and GOMODCACHE empty at the start "
               "(module downloads included); kubectl built last by itself on the caches the rest left",
        "modules": modules,
        "rig_wall_s": wall,
        "rig_cpu_s": cpu,
        "kubectl_extra": kubectl,
        "idle_two_core_wall_min_lower_bound": idle_min,
        "idle_two_core_note": "CPU seconds / 2: a lower bound (links and parts of the build use one core; "
                              "downloads wait on the network)",
        "fits_ci": {"ci_minutes": CI_MINUTES, "suite_minutes": SUITE_MINUTES,
                    "rig_minutes_measured_wall": round(wall / 60, 1), "rig_minutes_idle_lower_bound": idle_min,
                    "fits_measured_wall": wall / 60 + SUITE_MINUTES <= CI_MINUTES,
                    "fits_idle_lower_bound": idle_min + SUITE_MINUTES <= CI_MINUTES},
        "total_elapsed_s": round(time.monotonic() - started, 1),
        "go": build.go_version(),
        "cores": os.cpu_count(),
    }
    data = json.loads(args.out.read_text()) if args.out.is_file() else {}
    data.pop("build_measured_by_hand", None)
    data["cold_build"] = result
    args.out.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    print(json.dumps(result, indent=2, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
