"""Fleet compiles: the build cache, parallel workers and shards give exactly the bytes of a clean,
serial, single run; a change to a shared input rebuilds exactly the clusters that depend on it; a
corrupted cache entry is detected and rebuilt, never used."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest
import yaml

from conftest import REPO, run_gpuop

pytestmark = pytest.mark.slow       # whole-fleet compiles, 15-65 s each (`make test-fast` leaves these out)

DESIGNS = [
    {"gpu": "H100-SXM5-80GB", "mig": {"strategy": "mixed", "layout": {"3g.40gb": 1, "1g.10gb": 2}}},
    {"gpu": "L40S"},
    {"gpu": "A100-SXM4-80GB"},
]


def make_fleet(root: Path, n: int = 12, dashboards: bool = True, health_gate: bool = True) -> Path:
    """n clusters of the DESIGNS over two parents; `dashboards`, `health_gate`: whether the parents leave the
    dashboards and the health gate on (both name each pool's node labels: a dashboard's queries, the gate's Jobs in
    the chart)."""
    prof = root / "profiles"
    prof.mkdir(parents=True)
    shutil.copy(REPO / "gpuop.yaml", root / "gpuop.yaml")
    for parent, kube in (("_k133.yaml", "1.33"), ("_k134.yaml", "1.34")):
        (prof / parent).write_text(yaml.safe_dump({
            "apiVersion": "gpuop/v1alpha1", "kind": "ClusterProfile",
            "spec": {"platform": {"type": "kubernetes", "version": kube}, "os": "ubuntu24.04",
                     "driver": {"version": "580.173.02"},
                     **({} if dashboards else {"dashboards": {"enabled": False}}),
                     **({} if health_gate else {"healthGate": {"enabled": False}})}}))
    for i in range(n):
        design = DESIGNS[i % len(DESIGNS)]
        (prof / f"c{i:02d}.yaml").write_text(yaml.safe_dump({
            "apiVersion": "gpuop/v1alpha1", "kind": "ClusterProfile",
            "extends": "_k133.yaml" if i % 2 == 0 else "_k134.yaml",
            "metadata": {"name": f"c{i:02d}"},
            "spec": {"nodePools": [{"name": "gpu", "nodeSelector": {"pool": f"p{i}"}, **design}]}}))
    return root


def tree(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def built(proc) -> tuple[int, int]:
    """(built, not built) from the summary; `summary_counts` has the three counts."""
    b, c, u = summary_counts(proc)
    return b, c + u


def summary_counts(proc) -> tuple[int, int, int]:
    line = proc.stderr.strip().splitlines()[-1]
    # "gpuop: compiled N cluster(s) into OUT (B built, C reused from the cache, U unchanged on disk)"
    inner = line.rsplit("(", 1)[1].rstrip(")")
    b, c, u = inner.split(", ")[:3]
    return int(b.split()[0]), int(c.split()[0]), int(u.split()[0])


@pytest.fixture(scope="module")
def fleet(tmp_path_factory) -> Path:
    root = make_fleet(tmp_path_factory.mktemp("fleet"))
    run_gpuop("synth", "-o", "clean", "--no-cache", "-j", "1", cwd=root, check=True)
    return root


def test_incremental_output_is_identical_to_a_clean_compile(fleet):
    w = fleet
    p1 = run_gpuop("synth", "-o", "inc", "--cache", "cache", cwd=w, check=True)
    assert built(p1) == (12, 0)
    p2 = run_gpuop("synth", "-o", "inc", "--cache", "cache", cwd=w, check=True)
    assert built(p2) == (0, 12)
    assert tree(w / "inc") == tree(w / "clean")


def test_changing_a_parent_rebuilds_its_children_and_only_them(fleet, tmp_path):
    w = tmp_path / "w"
    shutil.copytree(fleet / "profiles", w / "profiles")
    shutil.copy(fleet / "gpuop.yaml", w / "gpuop.yaml")
    run_gpuop("synth", "-o", "out", "--cache", "cache", cwd=w, check=True)
    parent = w / "profiles" / "_k134.yaml"
    parent.write_text(parent.read_text().replace("580.173.02", "595.91.07"))
    proc = run_gpuop("synth", "-o", "out", "--cache", "cache", cwd=w, check=True)
    assert built(proc) == (6, 6)      # the six odd clusters extend _k134.yaml
    versions = yaml.safe_load((w / "out" / "c01" / "chart" / "Chart.yaml").read_text())["version"]
    assert versions == "0.2.0"        # driver branch changed: minor bump
    assert yaml.safe_load((w / "out" / "c00" / "chart" / "Chart.yaml").read_text())["version"] == "0.1.0"
    one = w / "profiles" / "c04.yaml"
    one.write_text(one.read_text().replace("pool: p4", "pool: p4b"))
    proc = run_gpuop("synth", "-o", "out", "--cache", "cache", cwd=w, check=True)
    assert built(proc) == (1, 11)
    fresh = tmp_path / "fresh"
    shutil.copytree(w / "profiles", fresh / "profiles")
    shutil.copy(w / "gpuop.yaml", fresh / "gpuop.yaml")
    shutil.copytree(w / "out", fresh / "out")      # same lock history
    run_gpuop("synth", "-o", "out", "--no-cache", cwd=fresh, check=True)
    assert tree(fresh / "out") == tree(w / "out")


def test_parallel_equals_serial(fleet):
    run_gpuop("synth", "-o", "par", "--no-cache", "-j", "2", cwd=fleet, check=True)
    assert tree(fleet / "par") == tree(fleet / "clean")


def test_shards_merged_equal_a_single_run(fleet):
    for k in (1, 2, 3):
        run_gpuop("synth", "-o", f"shard{k}", "--no-cache", "--shard", f"{k}/3", cwd=fleet, check=True)
    sizes = [len(list((fleet / f"shard{k}").glob("c[0-9][0-9]"))) for k in (1, 2, 3)]
    assert sum(sizes) == 12 and sum(1 for s in sizes if s) >= 2, sizes   # by name hash: stable as the fleet grows
    run_gpuop("merge", "shard1", "shard2", "shard3", "-o", "merged", cwd=fleet, check=True)
    assert tree(fleet / "merged") == tree(fleet / "clean")


def test_corrupted_cache_entry_is_detected_and_rebuilt(fleet, tmp_path):
    w = tmp_path / "w"
    shutil.copytree(fleet / "profiles", w / "profiles")
    shutil.copy(fleet / "gpuop.yaml", w / "gpuop.yaml")
    run_gpuop("synth", "-o", "out", "--cache", "cache", cwd=w, check=True)
    heads = sorted((w / "cache" / "builds").rglob("*.head"))
    blobs = sorted((w / "cache" / "builds").rglob("*.files"))
    assert len(heads) == len(blobs) == 12
    # tamper with one build's files (still valid JSON), truncate another build's header
    doc = blobs[0].read_text()
    blobs[0].write_text(doc.replace("nvidia-driver-daemonset", "nvidia-driver-daemonsat"))
    heads[5].write_text(heads[5].read_text()[:100])
    # a fresh folder: no index.json vouches for what the cache holds (a hint, never evidence): all compiled
    proc = run_gpuop("synth", "-o", "fresh", "--cache", "cache", cwd=w, check=True)
    assert built(proc) == (12, 0)
    assert tree(w / "fresh") == tree(fleet / "clean")
    proc = run_gpuop("synth", "-o", "out", "--cache", "cache", cwd=w, check=True)     # unchanged output: reused
    assert built(proc) == (0, 12)
    assert tree(w / "out") == tree(fleet / "clean")
    shutil.rmtree(w / "cache")        # deleting the cache only costs time
    proc = run_gpuop("synth", "-o", "out", "--cache", "cache", cwd=w, check=True)
    assert built(proc) == (12, 0)
    assert tree(w / "out") == tree(fleet / "clean")


def test_progress_bar_only_on_a_terminal_and_never_in_ci(fleet, tmp_path):
    """tqdm draws on stderr when it is a terminal; CI=true or a pipe keeps the log quiet."""
    import fcntl
    import os
    import pty
    import struct
    import subprocess
    import sys
    import termios

    def run(ci: bool) -> str:
        master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 100, 0, 0))   # a real terminal's size
        env = {k: v for k, v in os.environ.items() if k != "CI"}
        env["JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION"] = "20"
        if ci:
            env["CI"] = "true"
        out = tmp_path / ("ci" if ci else "tty")
        proc = subprocess.Popen([sys.executable, "-m", "gpuop.cli", "synth", "-o", str(out), "--no-cache", "-j", "1"],
                                cwd=fleet, env=env, stderr=slave, stdout=subprocess.DEVNULL)
        os.close(slave)
        chunks = []
        while True:
            try:
                data = os.read(master, 4096)
            except OSError:
                break
            if not data:
                break
            chunks.append(data)
        proc.wait(timeout=300)
        os.close(master)
        assert proc.returncode == 0
        return b"".join(chunks).decode(errors="replace")

    tty = run(ci=False)
    assert "/12 [" in tty and "cluster/s" in tty, tty
    ci = run(ci=True)
    assert "/12 [" not in ci and ci.startswith("gpuop: compiled 12 cluster(s)"), ci


def test_unchanged_clusters_are_linked_not_rewritten_and_edits_are_repaired(fleet, tmp_path):
    w = tmp_path / "w"
    shutil.copytree(fleet / "profiles", w / "profiles")
    shutil.copy(fleet / "gpuop.yaml", w / "gpuop.yaml")
    run_gpuop("synth", "-o", "out", "--cache", "cache", cwd=w, check=True)
    probe = w / "out" / "c03" / "manifests" / "00-namespace.yaml"
    inode = probe.stat().st_ino
    one = w / "profiles" / "c04.yaml"
    one.write_text(one.read_text().replace("pool: p4", "pool: p4b"))
    run_gpuop("synth", "-o", "out", "--cache", "cache", cwd=w, check=True)
    assert probe.stat().st_ino == inode                      # c03 unchanged: its files were hard-linked over
    edited = w / "out" / "c05" / "manifests" / "00-namespace.yaml"
    original = edited.read_bytes()
    edited.write_text("kind: Broken\n")                      # a hand edit of the output
    run_gpuop("synth", "-o", "out", "--cache", "cache", cwd=w, check=True)
    assert edited.read_bytes() == original                   # detected and rewritten
    stray = w / "out" / "c06" / "chart" / "templates" / "stray.yaml"
    stray.write_text("kind: Stray\n")                        # a file gpuop did not write
    run_gpuop("synth", "-o", "out", "--cache", "cache", cwd=w, check=True)
    assert not stray.exists()


def test_hand_edit_that_keeps_the_file_size_is_repaired(fleet, tmp_path):
    """Reuse is checked by the bytes' digest recorded in index.json, not by file sizes."""
    w = tmp_path / "w"
    shutil.copytree(fleet / "profiles", w / "profiles")
    shutil.copy(fleet / "gpuop.yaml", w / "gpuop.yaml")
    run_gpuop("synth", "-o", "out", "--cache", "cache", cwd=w, check=True)
    edited = w / "out" / "c05" / "manifests" / "00-namespace.yaml"
    original = edited.read_bytes()
    same_size = original.replace(b"gpu-operator", b"gpu-operatoX")
    assert len(same_size) == len(original) and same_size != original
    edited.write_bytes(same_size)
    proc = run_gpuop("synth", "-o", "out", "--cache", "cache", cwd=w, check=True)
    assert built(proc) == (0, 12)                            # from the cache: rewritten, not rebuilt
    assert edited.read_bytes() == original
    assert tree(w / "out") == tree(fleet / "clean")


def test_shard_recipe_keeps_chart_versions_history_and_the_lock(fleet, tmp_path):
    """`synth --shard K/N -o out-K` + `merge -o dist` continue from the committed output (gitops.path =
    dist): chart versions and history carry on instead of restarting at 0.1.0."""
    w = tmp_path / "w"
    shutil.copytree(fleet / "profiles", w / "profiles")
    shutil.copy(fleet / "gpuop.yaml", w / "gpuop.yaml")
    run_gpuop("synth", "-o", "dist", "--cache", "cache", cwd=w, check=True)
    parent = w / "profiles" / "_k134.yaml"
    parent.write_text(parent.read_text().replace("580.173.02", "595.91.07"))
    single = tmp_path / "single"
    shutil.copytree(w, single)
    run_gpuop("synth", "-o", "dist", "--cache", "cache", cwd=single, check=True)   # the same change, one run
    for k in (1, 2, 3):
        run_gpuop("synth", "--shard", f"{k}/3", "-o", f"out-{k}", "--cache", "cache", cwd=w, check=True)
    run_gpuop("merge", "out-1", "out-2", "out-3", "-o", "dist", cwd=w, check=True)
    assert yaml.safe_load((w / "dist" / "c01" / "chart" / "Chart.yaml").read_text())["version"] == "0.2.0"
    assert (w / "dist" / "charts" / "c01-0.1.0.tgz").is_file()       # the history stays downloadable
    assert tree(w / "dist") == tree(single / "dist")


def test_merge_of_bad_shards_is_exit_2_never_a_bug(fleet, tmp_path):
    w = tmp_path / "w"
    shutil.copytree(fleet / "profiles", w / "profiles")
    shutil.copy(fleet / "gpuop.yaml", w / "gpuop.yaml")
    run_gpuop("synth", "--shard", "1/2", "-o", "s1", "--no-cache", cwd=w, check=True)
    (w / "empty").mkdir()
    (w / "bogus").mkdir()
    (w / "bogus" / "index.json").write_text('{"clusters": [1, 2]}')
    (w / "listed").mkdir()
    (w / "listed" / "index.json").write_text((w / "s1" / "index.json").read_text())
    (w / "listed" / "versions.lock.json").write_text('{"clusters": {}}')
    proc = run_gpuop("merge", "s1", "empty", "bogus", "listed", "missing", "-o", "merged", cwd=w)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.splitlines()
    assert "bogus/index.json: kind: expected kind: Index; not an index.json written by gpuop (restore it from git " \
           "or recompile)" in lines
    assert "empty/index.json: cannot read: No such file or directory; not a gpuop output folder" in lines
    assert "missing: not a folder; pass the folders `gpuop synth --shard K/N -o DIR` wrote" in lines
    assert "listed: is shard 1/2 again (also s1)" in lines       # a copy of s1's index: the same shard twice
    assert "merge: shard 2/2 missing; the merged output would remove their clusters from the fleet; pass every " \
        "shard's folder" in lines
    assert lines[-1].startswith("gpuop: ") and lines[-1].endswith("errors; nothing written")
    assert not (w / "merged").exists()
