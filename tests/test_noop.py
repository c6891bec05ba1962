"""The no-op path (pipeline/noop.py): a synth with nothing changed since the last run — no profile,
parent, setting or output file — writes nothing and prints what the last run printed; anything changed,
even a hand edit of the output that keeps size and mtime, takes the normal path, which repairs it."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from conftest import run_gpuop
from test_fleet import built, make_fleet, summary_counts, tree

pytestmark = pytest.mark.slow       # compiles a small fleet several times


def _synth(w: Path):
    return run_gpuop("synth", "-o", "dist", "--cache", "cache", "--no-progress", cwd=w, check=True)


@pytest.fixture(scope="module")
def fleet(tmp_path_factory) -> Path:
    # these tests change a pool's nodeSelector to change one cluster without a new chart version (so a cold compile
    # writes the same bytes); a dashboard's queries and the health gate's Jobs (chart templates) name the pool's
    # labels, so both stay off here
    w = make_fleet(tmp_path_factory.mktemp("noop"), n=6, dashboards=False, health_gate=False)
    _synth(w)
    return w


@pytest.fixture
def w(fleet, tmp_path) -> Path:
    """A fresh copy of the compiled fleet: its stats differ from the recorded ones, so one normal run first."""
    w = tmp_path / "w"
    shutil.copytree(fleet, w, symlinks=True)
    _synth(w)
    return w


def test_nothing_changed_writes_nothing_and_prints_the_same_summary(w):
    before = os.stat(w / "dist" / "index.json").st_ino
    files = {p: p.stat().st_ino for p in (w / "dist").rglob("*")}
    proc = _synth(w)
    assert proc.stderr.strip().splitlines()[-1] == "gpuop: compiled 6 cluster(s) into dist (0 built, 0 reused from the cache, 6 unchanged on disk)"
    assert os.stat(w / "dist" / "index.json").st_ino == before          # the normal path writes index.json again: a new inode
    assert {p: p.stat().st_ino for p in (w / "dist").rglob("*")} == files
    assert not list(w.glob(".dist.*"))


def test_a_hand_edit_that_keeps_size_and_mtime_is_seen_and_repaired(w):
    clean = tree(w / "dist")
    edited = next((w / "dist" / "c02" / "manifests").glob("*.yaml"))
    st = edited.stat()
    data = edited.read_bytes()
    edited.write_bytes(data.replace(b"gpu-operator", b"gpu-operatoX", 1))
    os.utime(edited, ns=(st.st_atime_ns, st.st_mtime_ns))         # size and mtime as they were: only ctime moved
    assert edited.stat().st_size == st.st_size and edited.stat().st_mtime_ns == st.st_mtime_ns
    before = os.stat(w / "dist" / "index.json").st_ino
    proc = _synth(w)
    assert built(proc) == (0, 6)                                    # the cache: rewritten, not rebuilt
    assert os.stat(w / "dist" / "index.json").st_ino != before
    assert tree(w / "dist") == clean


def test_a_changed_parent_profile_takes_the_normal_path(w):
    parent = w / "profiles" / "_k134.yaml"
    parent.write_text(parent.read_text().replace("580.173.02", "595.91.07"))
    proc = _synth(w)
    b, u = built(proc)
    assert b > 0 and b + u == 6


def test_a_touched_settings_file_takes_the_normal_path_and_then_the_shortcut_again(w):
    settings = w / "gpuop.yaml"
    settings.write_text(settings.read_text())                        # same bytes, new ctime
    before = os.stat(w / "dist" / "index.json").st_ino
    _synth(w)
    after = os.stat(w / "dist" / "index.json").st_ino
    assert after != before
    _synth(w)
    assert os.stat(w / "dist" / "index.json").st_ino == after


def test_warnings_of_the_last_run_are_printed_again(w):
    one = w / "profiles" / "c00.yaml"
    one.write_text(one.read_text() + "  devicePlugin: {env: [{name: NVIDIA_MIG_MONITOR_DEVICES, value: all}]}\n")
    first = _synth(w)
    warned = [line for line in first.stderr.splitlines() if ": warning: " in line]
    assert warned, first.stderr
    again = _synth(w)
    assert [line for line in again.stderr.splitlines() if ": warning: " in line] == warned
    assert again.stderr.strip().splitlines()[-1] == "gpuop: compiled 6 cluster(s) into dist (0 built, 0 reused from the cache, 6 unchanged on disk)"


def test_no_cache_never_takes_the_shortcut(w):
    before = os.stat(w / "dist" / "index.json").st_ino
    run_gpuop("synth", "-o", "dist", "--no-cache", "--no-progress", cwd=w, check=True)
    assert os.stat(w / "dist" / "index.json").st_ino != before


@pytest.mark.parametrize("change", ["stray deep in a cluster", "file removed", "stray at the top",
                                    "folder replaced by a copy"])
def test_a_file_added_removed_or_replaced_anywhere_in_the_output_is_seen_and_repaired(w, change):
    # the check stats the recorded entries only (no folder read): what it finds of a new or lost entry is
    # the ctime of the folder it is in
    clean = tree(w / "dist")
    templates = w / "dist" / "c03" / "chart" / "templates"
    if change == "stray deep in a cluster":
        (templates / "tests" / "extra.yaml").write_text("kind: ConfigMap\n")
    elif change == "file removed":
        next(templates.glob("*.yaml")).unlink()
    elif change == "stray at the top":
        (w / "dist" / "notes.txt").write_text("hand-written\n")
    else:
        shutil.copytree(templates, templates.with_name("copy"), copy_function=shutil.copy2)
        shutil.rmtree(templates)
        templates.with_name("copy").rename(templates)       # same names and bytes, new inodes
    before = os.stat(w / "dist" / "index.json").st_ino
    proc = _synth(w)
    assert os.stat(w / "dist" / "index.json").st_ino != before, proc.stderr      # the normal path ran: index.json written again
    assert tree(w / "dist") == clean


def _cold(w: Path) -> dict:
    """The same profiles compiled from nothing (no cache, a new output folder)."""
    shutil.rmtree(w / "cold", ignore_errors=True)
    run_gpuop("synth", "-o", "cold", "--no-cache", "--no-progress", cwd=w, check=True)
    return tree(w / "cold")


def test_one_profile_changed_takes_the_others_as_they_are_and_writes_the_bytes_of_a_cold_compile(w):
    # the clusters whose inputs and folder have the stats the last run left are taken without reading their
    # profile, cache entry or folder (noop.proven); index.json, the lock and the Helm index are printed item
    # by item with the unchanged items copied from the previous texts: the bytes must be a cold compile's
    one = w / "profiles" / "c01.yaml"
    one.write_text(one.read_text().replace("pool: p1", "pool: p1-changed"))
    proc = _synth(w)
    assert summary_counts(proc) == (1, 0, 5), proc.stderr
    assert tree(w / "dist") == _cold(w)


def test_warnings_of_clusters_taken_as_they_are_are_printed_when_another_profile_changed(w):
    warned_profile = w / "profiles" / "c00.yaml"
    warned_profile.write_text(warned_profile.read_text()
                              + "  devicePlugin: {env: [{name: NVIDIA_MIG_MONITOR_DEVICES, value: all}]}\n")
    first = _synth(w)
    warned = [line for line in first.stderr.splitlines() if ": warning: " in line]
    assert warned, first.stderr
    other = w / "profiles" / "c03.yaml"
    other.write_text(other.read_text().replace("pool: p3", "pool: p3-changed"))
    proc = _synth(w)
    assert summary_counts(proc) == (1, 0, 5), proc.stderr
    assert [line for line in proc.stderr.splitlines() if ": warning: " in line] == warned


def test_a_hand_edit_beside_a_changed_profile_is_repaired_and_the_next_run_sees_it_clean(w):
    one = w / "profiles" / "c01.yaml"
    one.write_text(one.read_text().replace("pool: p1", "pool: p1-changed"))
    edited = next((w / "dist" / "c02" / "manifests").glob("*.yaml"))
    st = edited.stat()
    edited.write_bytes(edited.read_bytes().replace(b"gpu-operator", b"gpu-operatoX", 1))
    os.utime(edited, ns=(st.st_atime_ns, st.st_mtime_ns))         # only the ctime tells
    proc = _synth(w)
    assert summary_counts(proc)[0] == 1, proc.stderr                # c01 built; c02 rewritten from the cache
    clean = _cold(w)
    assert tree(w / "dist") == clean
    again = _synth(w)                                                # nothing changed since: the shortcut
    assert summary_counts(again) == (0, 0, 6)
    edited.write_bytes(edited.read_bytes().replace(b"gpu-operator", b"gpu-operatoX", 1))
    one.write_text(one.read_text().replace("pool: p1-changed", "pool: p1-again"))
    _synth(w)                                                        # an edit after a proven run is seen too
    assert tree(w / "dist") == _cold(w)


def test_the_folders_a_warm_synth_compiles_on_are_what_the_stats_answer_when_nothing_was_edited(w):
    """A warm synth compiles on noop.recorded_folders while the child stats the tree, and commits only when the
    answer is the same: on an untouched output it is (else every warm run would compile twice), and a hand edit
    makes them differ (the compile runs again: the repair test above)."""
    from gpuop.pipeline import noop
    from gpuop.pipeline.cache import BuildCache

    state = noop.load(BuildCache(w / "cache"), w / "dist")
    guess = noop.recorded_folders(state)
    assert {"index.json", "versions.lock.json", "charts", "c01"} <= guess
    assert noop.unchanged_folders(state, w / "dist") == guess
    edited = next((w / "dist" / "c02" / "manifests").glob("*.yaml"))
    edited.write_bytes(edited.read_bytes())                          # the same bytes: only the ctime moves
    assert noop.unchanged_folders(state, w / "dist") == guess - {"c02"}
    assert noop.recorded_folders(None) == frozenset() == noop.recorded_folders({"tree": {"parts": {"c01": [0, ""]}}})


_SPLIT_SCRIPT = r'''
import json, os, sys
from pathlib import Path
from gpuop.pipeline import noop
forks = []
os.register_at_fork(after_in_parent=lambda: forks.append(1))
out = Path(sys.argv[1])
tree = noop.describe(out)
state = {"tree": tree}
with noop._folder(out) as fd:
    groups = [(name, tree["shapes"][tree["parts"][name][0]]) for name in sorted(tree["parts"])]
    paths = [p for name, shape in groups for p in noop._paths(name, shape)]
    split, alone = noop._stats(fd, groups), noop._stats(fd, groups, split=False)
    same = split == alone
    soon, now = noop.unchanged_folders_soon(state, out)(), noop.unchanged_folders(state, out, split=False)
    os.remove(out / "d7" / "f3")                     # a lost entry: the sentinel, in either half
    lost = noop._stats(fd, groups)
    gone = noop.unchanged_folders_soon(state, out)()
print(json.dumps({"same": same, "n": len(paths), "forks": len(forks), "soon": sorted(soon) == sorted(now),
                  "all": len(now), "lost": list(lost[0]).count(0), "gone": sorted(set(now) - set(gone)),
                  "unchanged": noop.unchanged(out, tree)}))
'''


def test_stats_split_across_two_processes_are_those_of_one_and_see_a_lost_entry(tmp_path):
    """A large output is stat'ed by this process and a forked child, each half (noop._stats), and a warm synth
    has a child find its unchanged folders while it imports (unchanged_folders_soon): the same answers as one
    process, a lost entry included. In a fresh interpreter: the suite's workers run threads, which rule out
    forking."""
    import json
    import subprocess
    import sys

    out = tmp_path / "out"
    for d in range(90):                              # 9,090 entries: above the split threshold (8,192)
        (out / f"d{d}").mkdir(parents=True)
        for f in range(100):
            (out / f"d{d}" / f"f{f}").write_bytes(b"x")
    (out / "index.json").write_text("{}")
    proc = subprocess.run([sys.executable, "-c", _SPLIT_SCRIPT, str(out)], capture_output=True, text=True,
                          timeout=120, env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[1] / "constructs")})
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout)
    assert got == {"same": True, "n": 9091, "forks": 4 if os.cpu_count() >= 2 else 0, "soon": True, "all": 91,
                   "lost": 1, "gone": ["d7"], "unchanged": False}
