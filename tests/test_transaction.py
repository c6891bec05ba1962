"""The output transaction (docs/output-transaction.md): a synth killed at any point of a
64-cluster compile (160 with GPUOP_CRASH_TRIALS=all) — while linking and writing the new tree, at the exchange, while removing the old
tree, on the two-rename fallback, or at a random time — leaves dist/ as the previous tree or the new
one, whole; the next run cleans up the leftovers and gives the same tree a clean run gives. Damage the
next run can detect (a cluster folder whose bytes do not match index.json, a lost archive) is
repaired. Ctrl-C exits 130 and says what was kept.

Runs stop at exact points through the writer's step hook (GPUOP_KILL_AT=N or a step name: the process
SIGKILLs itself right before that file-system step)."""

from __future__ import annotations

import json
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

JOURNAL = ".gpuop-journal"

OLD_DRIVER, NEW_DRIVER = "580.173.02", "595.91.07"
# Every trial costs a kill and a rerun of the fleet's compile, so the suite runs a 64-cluster fleet at
# these points (the middle of the streamed writes); GPUOP_CRASH_TRIALS=all (`make test-crash`) runs 160
# clusters and adds more steps (4500: among the links of unchanged clusters; 6600: near the fleet-level
# files) and a second random kill.
ALL = os.environ.get("GPUOP_CRASH_TRIALS") == "all"
N = 160 if ALL else 64   # clusters; half change per trial: ~41 files each (one per component), so ~N*20
                         # write steps (streamed while the clusters are built), then ~N*22 link steps,
                         # then the fleet-level files


def _interactive_sigint() -> None:
    # Ctrl-C at a terminal: SIGINT at its default, so Python turns it into KeyboardInterrupt. A suite started
    # as a background job (`make test &`, a CI runner's nohup) hands its children SIGINT ignored, and Python
    # keeps an inherited SIG_IGN: the interrupt trials would then test nothing.
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _start(w: Path, env_extra: dict) -> subprocess.Popen:
    env = {**os.environ, "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20", **env_extra}
    return subprocess.Popen([sys.executable, "-m", "gpuop.cli", "synth", "-o", "dist", "--cache", "cache",
                             "--no-progress"], cwd=w, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True, preexec_fn=_interactive_sigint)


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
    listed = _listed(w / "dist")
    rerun = run_gpuop("synth", "-o", "dist", "--cache", "cache", "--no-progress", cwd=w, check=True)
    new = tree(w / "dist")
    assert _leftovers(w) == [], "the rerun removes what the killed run left"
    assert JOURNAL not in new, "the rerun completes the journal"
    assert_valid(mid, listed, old, new, f"{env_extra} {kill_after}")
    assert len([k for k in new if k.endswith("params/cluster.json")]) == N, rerun.stderr


def _listed(out: Path) -> list[str]:
    try:
        return [c["name"] for c in json.loads((out / "index.json").read_text())["clusters"]]
    except (OSError, ValueError):
        return []


def assert_valid(mid: dict, listed: list[str], old: dict, new: dict, what: str) -> None:
    """What a kill left is a valid output (docs/output-transaction.md): the old tree or the new one, whole; or,
    while the journal is in the output, each cluster folder whole (old or new) and every cluster index.json
    lists present."""
    core = {k: v for k, v in mid.items() if k != JOURNAL}
    if core in (old, new):
        return
    assert JOURNAL in mid, f"{what}: a mix of trees without a journal"
    clusters = {k.split("/", 1)[0] for t in (old, new) for k in t if k.endswith("/params/cluster.json")}
    for c in sorted(clusters):
        part = {k: v for k, v in core.items() if k.startswith(c + "/")}
        assert part in ({k: v for k, v in old.items() if k.startswith(c + "/")},
                        {k: v for k, v in new.items() if k.startswith(c + "/")}), f"{what}: {c} is half old, half new"
    missing = [n for n in listed if f"{n}/params/cluster.json" not in core]
    assert not missing, f"{what}: index.json lists clusters that are not there: {missing[:3]}"


# the whole-tree steps (a first write, the fallback) and the journaled commit's steps: before the journal is
# written, the first and a middle exchange of a cluster, the fleet files, the journal's removal; "60" kills it while
# both workers are still building (they must end with it, quietly: no traceback from a worker finding no one to
# send its results to)
STEPS = (["1", "60", str(N * 10), "journal", f"journal-exchange:{N // 4}", "journal-fleet:2", "cleanup"]
         + (["4500", "6600", "marker", "journal-exchange:1", f"journal-exchange:{N // 2}", "journal-add:3",
             "journal-fleet:1", "journal-fleet:3", "journal-done"] if ALL else []))


@pytest.mark.parametrize("at", STEPS)
def test_kill_9_at_any_step_leaves_the_old_or_the_new_tree_and_a_clean_rerun(fleet200, at):
    _trial(fleet200, {"GPUOP_KILL_AT": at})
