"""The output transaction, second half (split from test_transaction.py so the two halves run on two
workers): a kill during the two-rename fallback, at random times, between the fallback's renames; the
next run's repairs; Ctrl-C. Same fleet (64 clusters, 160 with
GPUOP_CRASH_TRIALS=all) and trial as test_transaction.py."""

from __future__ import annotations

import json
import random
import signal

import pytest

from conftest import run_gpuop
from test_fleet import tree
from test_transaction import ALL, N, _flip, _leftovers, _start, _trial, fleet200  # noqa: F401 (fixture)

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("at", ["rename-old", "rename-new"] + (["cleanup"] if ALL else []))
def test_kill_9_during_the_two_rename_fallback_is_recovered_by_the_next_run(fleet200, at):
    _trial(fleet200, {"GPUOP_KILL_AT": at, "GPUOP_TEST_NO_EXCHANGE": "1"})


def test_kill_9_at_random_times_leaves_the_old_or_the_new_tree(fleet200):
    rng = random.Random(18)
    for _ in range(3 if ALL else 1):
        _trial(fleet200, {}, kill_after=rng.uniform(0.5, 6.0))


JOURNAL_STEPS = ["journal-add", "journal-exchange", "journal-fleet", "journal-done", "cleanup"]


def test_kill_9_at_random_steps_of_the_journaled_commit_leaves_a_valid_output(fleet200):
    """Each trial a kill at a random step of the per-cluster commit (a random occurrence of a random kind);
    30 with GPUOP_CRASH_TRIALS=all, 1 in the suite."""
    rng = random.Random(25)
    for _ in range(30 if ALL else 1):
        kind = rng.choice(JOURNAL_STEPS)
        k = rng.randint(1, N // 2) if kind in ("journal-add", "journal-exchange") else rng.randint(1, 3) \
            if kind == "journal-fleet" else 1
        _trial(fleet200, {"GPUOP_KILL_AT": f"{kind}:{k}"})


def test_validate_and_check_refuse_a_pending_journal_and_synth_completes_it(fleet200):
    w = fleet200
    _flip(w)
    proc = _start(w, {"GPUOP_KILL_AT": "journal-exchange:3"})
    proc.communicate(timeout=300)
    assert proc.returncode == -signal.SIGKILL
    assert (w / "dist" / ".gpuop-journal").is_file()
    for cmd in (("validate", "dist"), ("diff", "--exit-code")):
        refused = run_gpuop(*cmd, "--settings", "gpuop.yaml", cwd=w)
        assert refused.returncode == 2, (cmd, refused.stderr)
        assert "holds an unfinished commit" in refused.stderr
    run_gpuop("synth", "-o", "dist", "--cache", "cache", "--no-progress", cwd=w, check=True)
    assert not (w / "dist" / ".gpuop-journal").exists() and _leftovers(w) == []


def test_killed_between_the_fallback_renames_restores_the_previous_tree(fleet200):
    w = fleet200
    old = tree(w / "dist")
    _flip(w)
    proc = _start(w, {"GPUOP_KILL_AT": "rename-new", "GPUOP_TEST_NO_EXCHANGE": "1"})
    proc.communicate(timeout=300)
    assert proc.returncode == -signal.SIGKILL
    assert not (w / "dist").exists()              # the one window of the fallback: dist/ is old/tree
    (stash,) = [p for p in w.iterdir() if p.name.startswith(".dist.old-")]
    assert tree(stash / "tree") == old
    run_gpuop("synth", "-o", "dist", "--cache", "cache", "--no-progress", cwd=w, check=True)
    assert _leftovers(w) == []
    assert len(list((w / "dist").glob("c*/params/cluster.json"))) == N


def test_next_run_repairs_a_damaged_cluster_folder_and_lost_archives(fleet200):
    w = fleet200
    clean = tree(w / "dist")
    victim = sorted((w / "dist").glob("c*/manifests"))[7]
    lost = sorted(victim.glob("*.yaml"))[0]
    lost.unlink()                                       # a file lost from a cluster folder
    current = json.loads((w / "dist" / "index.json").read_text())["clusters"][-1]["package"]
    (w / "dist" / current).unlink()                     # and the current archive of a cluster (rebuilt from the lock)
    proc = run_gpuop("synth", "-o", "dist", "--cache", "cache", "--no-progress", cwd=w, check=True)
    # both written again from the cache (the one without its archive too), not rebuilt; the rest kept on disk
    assert f"(0 built, 2 reused from the cache, {N - 2} unchanged on disk)" in proc.stderr
    assert tree(w / "dist") == clean


def test_ctrl_c_exits_130_and_says_the_previous_tree_was_kept(fleet200):
    w = fleet200
    old = tree(w / "dist")
    _flip(w)
    proc = _start(w, {"GPUOP_KILL_AT": "write", "GPUOP_KILL_SIGNAL": "INT"})
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 130, err
    assert err.strip().splitlines()[-1] == "gpuop: interrupted; dist was not changed (the previous tree is kept)"
    assert tree(w / "dist") == old and _leftovers(w) == []
    proc = _start(w, {"GPUOP_KILL_AT": "cleanup", "GPUOP_KILL_SIGNAL": "INT"})
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 130, err
    assert err.strip().splitlines()[-1] == ("gpuop: interrupted after the new dist was in place; it is whole "
                                            "(only the old tree's removal was cut short)")
    assert tree(w / "dist") != old and _leftovers(w) == []
    run_gpuop("synth", "-o", "dist", "--cache", "cache", "--no-progress", cwd=w, check=True)
