"""The output transaction (issue 18.3, docs/output-transaction.md): a synth killed at any point of a
64-cluster compile (160 with GPUOP_CRASH_TRIALS=all) — while linking and writing the new tree, at the exchange, while removing the old
tree, on the two-rename fallback, or at a random time — leaves dist/ as the previous tree or the new
one, whole; the next run cleans up the leftovers and gives the same tree a clean run gives. Damage the
next run can detect (a cluster folder whose bytes do not match index.json, a lost archive) is
repaired. Ctrl-C exits 130 and says what was kept.

Runs stop at exact points through the writer's step hook (GPUOP_KILL_AT=N or a step name: the process
SIGKILLs itself right before that file-system step)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import run_gpuop

pytestmark = pytest.mark.slow       # kills compiles mid-write, up to a minute (`make test-fast` leaves these out)
from test_fleet import make_fleet, tree

OLD_DRIVER, NEW_DRIVER = "580.173.02", "595.91.07"
# Every trial costs a kill and a rerun of the fleet's compile, so the suite runs a 64-cluster fleet at
# these points (the middle of the streamed writes); GPUOP_CRASH_TRIALS=all (`make test-crash`) runs 160
# clusters and adds more steps (4500: among the links of unchanged clusters; 6600: near the fleet-level
# files) and a second random kill.
ALL = os.environ.get("GPUOP_CRASH_TRIALS") == "all"
N = 160 if ALL else 64   # clusters; half change per trial: ~41 files each (one per component), so ~N*20
                         # write steps (streamed while the clusters are built), then ~N*22 link steps,
                         # then the fleet-level files


def _start(w: Path, env_extra: dict) -> subprocess.Popen:
    env = {**os.environ, "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20", **env_extra}
    return subprocess.Popen([sys.executable, "-m", "gpuop.cli", "synth", "-o", "dist", "--cache", "cache",
                             "--no-progress"], cwd=w, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True)


def _flip(w: Path) -> None:
    """Change the parent of half the fleet: 100 clusters get new output, 100 stay (linked)."""
    parent = w / "profiles" / "_k134.yaml"
    text = parent.read_text()
    parent.write_text(text.replace(OLD_DRIVER, NEW_DRIVER) if OLD_DRIVER in text else text.replace(NEW_DRIVER, OLD_DRIVER))


def _leftovers(w: Path) -> list[str]:
    return sorted(p.name for p in w.iterdir() if p.name.startswith((".dist.new-", ".dist.old-")))


@pytest.fixture(scope="module")
def fleet200(tmp_path_factory) -> Path:
    w = make_fleet(tmp_path_factory.mktemp("big"), n=N)
    for _ in range(2):                       # both parent versions cached: the trials only write
        _flip(w)
        run_gpuop("synth", "-o", "dist", "--cache", "cache", "-j", "2", "--no-progress", cwd=w, check=True)
    assert len(list((w / "dist").glob("c*/params/cluster.json"))) == N
    return w


def _trial(w: Path, env_extra: dict, *, kill_after: float | None = None) -> None:
    old = tree(w / "dist")
    _flip(w)
    proc = _start(w, env_extra)
    if kill_after is not None:
        time.sleep(kill_after)
        proc.send_signal(signal.SIGKILL)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode in (0, -signal.SIGKILL), err
    assert "please report" not in err and "Traceback" not in err
    mid = tree(w / "dist")
    if not (w / "dist").exists():       # killed between the fallback's two renames: what the next run restores
        (stash,) = [p for p in w.iterdir() if p.name.startswith(".dist.old-")]
        mid = tree(stash / "tree")
    rerun = run_gpuop("synth", "-o", "dist", "--cache", "cache", "--no-progress", cwd=w, check=True)
    new = tree(w / "dist")
    assert _leftovers(w) == [], "the rerun removes what the killed run left"
    assert mid in (old, new), (f"{env_extra} {kill_after}: a mix of trees: "
                               f"{len(set(mid.items()) - set(old.items()) - set(new.items()))} odd files")
    assert len([k for k in new if k.endswith("params/cluster.json")]) == N, rerun.stderr


STEPS = ["1", str(N * 10), "marker", "exchange", "cleanup"] + (["60", "4500", "6600"] if ALL else [])


@pytest.mark.parametrize("at", STEPS)
def test_kill_9_at_any_step_leaves_the_old_or_the_new_tree_and_a_clean_rerun(fleet200, at):
    _trial(fleet200, {"GPUOP_KILL_AT": at})
