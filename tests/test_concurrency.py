"""Concurrent and stale runs, a full disk and outputs gpuop did not write:
a second writer of the same output or cache exits 2 naming the holder, never 1; a lock left by a
killed run is taken over; ENOSPC in the output or the cache is exit 2 with nothing partial; a folder
that is not gpuop's, the project or a parent of it is never replaced; a committed dist/ from before
the marker is adopted."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO, run_gpuop
from test_fleet import make_fleet, tree


def _spawn(w: Path, *args: str) -> subprocess.Popen:
    env = {**os.environ, "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20"}
    return subprocess.Popen([sys.executable, "-m", "gpuop.cli", "synth", *args, "--no-progress"], cwd=w, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


@pytest.fixture(scope="module")
def small(tmp_path_factory) -> Path:
    w = make_fleet(tmp_path_factory.mktemp("conc"), n=6)
    run_gpuop("synth", "-o", "clean", "--no-cache", "-j", "1", cwd=w, check=True)
    return w


def test_three_synths_at_once_one_winner_the_others_exit_2_naming_it(small, tmp_path):
    w = tmp_path / "w"
    shutil.copytree(small, w, ignore=shutil.ignore_patterns("clean"))
    procs = [_spawn(w, "-o", "dist", "--no-cache", "-j", "1") for _ in range(3)]
    results = [(p.wait(timeout=600), p.stderr.read()) for p in procs]
    codes = sorted(rc for rc, _ in results)
    assert codes == [0, 2, 2], results
    winner = next(p.pid for p, (rc, _) in zip(procs, results) if rc == 0)
    for rc, err in results:
        if rc == 2:
            assert err == (f"dist: another gpuop is writing dist (pid {winner}); wait for it to finish, "
                           "then run again\ngpuop: 1 error; nothing written\n")
    assert tree(w / "dist") == {**tree(small / "clean")}
    assert not [p for p in w.iterdir() if p.name.startswith((".dist.new-", ".dist.old-"))]


def _hold(lock: Path, pid_text: str):
    lock.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(lock, os.O_RDWR | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_EX)
    os.pwrite(fd, pid_text.encode(), 0)
    return fd


def test_second_writer_of_a_locked_output_exits_2_with_the_holders_pid(small, tmp_path):
    w = tmp_path / "w"
    shutil.copytree(small, w, ignore=shutil.ignore_patterns("clean"))
    fd = _hold(w / ".dist.lock", f"{os.getpid()}\n")
    try:
        proc = run_gpuop("synth", "-o", "dist", "--no-cache", cwd=w)
    finally:
        os.close(fd)
    assert proc.returncode == 2
    assert proc.stderr == (f"dist: another gpuop is writing dist (pid {os.getpid()}); wait for it to "
                           "finish, then run again\ngpuop: 1 error; nothing written\n")
    assert not (w / "dist").exists()


def test_second_writer_of_a_locked_cache_exits_2(small, tmp_path):
    w = tmp_path / "w"
    shutil.copytree(small, w, ignore=shutil.ignore_patterns("clean"))
    fd = _hold(w / "cache" / ".lock", f"{os.getpid()}\n")
    try:
        proc = run_gpuop("synth", "-o", "other", "--cache", "cache", cwd=w)
    finally:
        os.close(fd)
    assert proc.returncode == 2
    assert proc.stderr == (f"cache: another gpuop is writing cache (pid {os.getpid()}); wait for it to "
                           "finish, then run again\ngpuop: 1 error; nothing written\n")


def test_stale_lock_of_a_killed_run_is_taken_over(small, tmp_path):
    w = tmp_path / "w"
    shutil.copytree(small, w, ignore=shutil.ignore_patterns("clean"))
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    (w / ".dist.lock").write_text(f"{dead.pid}\n")            # the file a killed run leaves: no flock held
    (w / ".dist.new-abc123").mkdir()                           # and its half-built tree
    (w / ".dist.new-abc123" / "x.yaml").write_text("half")
    run_gpuop("synth", "-o", "dist", "--no-cache", cwd=w, check=True)
    assert tree(w / "dist") == tree(small / "clean")
    assert not (w / ".dist.new-abc123").exists()


# ---- a full disk: a real tmpfs of a few MiB --------------------------------------------------------

@pytest.fixture
def tiny_fs(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1200k", "tmpfs", str(mnt)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount tmpfs: {done.stderr.decode().strip()}")
    yield mnt
    subprocess.run(["umount", "-l", str(mnt)], check=False)


def test_full_disk_under_the_output_is_exit_2_and_leaves_the_previous_tree(small, tmp_path, tiny_fs):
    w = tmp_path / "w"
    shutil.copytree(small, w, ignore=shutil.ignore_patterns("clean"))
    keep = sorted((w / "profiles").glob("c*.yaml"))
    out = tiny_fs / "dist"
    run_gpuop("synth", str(keep[0].relative_to(w)), "-o", str(out), "--no-cache", cwd=w, check=True)
    before = tree(out)
    proc = run_gpuop("synth", "-o", str(out), "--no-cache", cwd=w)          # six clusters do not fit
    assert proc.returncode == 2, proc.stderr
    line = proc.stderr.splitlines()[0]
    assert line.startswith(f"{out}: cannot write the output folder: No space left on device ("), line
    assert line.endswith("); dist was not changed"), line
    assert tree(out) == before
    assert sorted(p.name for p in tiny_fs.iterdir()) == ["dist"]                 # the lock file goes with the run


def test_full_disk_under_the_cache_is_exit_2_and_writes_no_output(small, tmp_path, tiny_fs):
    w = tmp_path / "w"
    shutil.copytree(small, w, ignore=shutil.ignore_patterns("clean"))
    cache = tiny_fs / "cache"
    cache.mkdir()
    (tiny_fs / "filler").write_bytes(b"\0" * (1200 * 1024 - 64 * 1024))   # leave 64 KiB: one lock, no entries
    proc = run_gpuop("synth", "-o", "dist", "--cache", str(cache), cwd=w)
    assert proc.returncode == 2, proc.stderr
    line = proc.stderr.splitlines()[0]
    assert line.startswith(f"{cache}: cannot write the build cache: No space left on device ("), line
    assert line.endswith("); the output was not changed (--no-cache skips the cache)"), line
    assert not (w / "dist").exists()
    assert not [p for p in cache.rglob(".tmp-*")]                          # no truncated temporary files


# ---- what gpuop did not write --------------------------------------------------------------------

def test_refuses_to_replace_a_site_folder_that_has_an_index_json(small, tmp_path):
    w = tmp_path / "w"
    shutil.copytree(small, w, ignore=shutil.ignore_patterns("clean"))
    (w / "site").mkdir()
    (w / "site" / "index.html").write_text("<h1>docs</h1>")
    (w / "site" / "index.json").write_text('{"pages": []}')
    proc = run_gpuop("synth", "-o", "site", "--no-cache", cwd=w)
    assert proc.returncode == 2
    assert proc.stderr == (f"{w / 'site'}: refusing to replace a folder that is not gpuop output (no gpuop marker "
                           "and index.json is not of kind Index); pass an empty or new folder, or a previous output "
                           "folder\ngpuop: 1 error; nothing written\n")
    assert (w / "site" / "index.html").read_text() == "<h1>docs</h1>"


def test_refuses_a_gpuop_looking_folder_with_files_gpuop_did_not_write(small, tmp_path):
    w = tmp_path / "w"
    shutil.copytree(small, w, ignore=shutil.ignore_patterns("clean"))
    shutil.copytree(small / "clean", w / "site")
    (w / "site" / ".gpuop-output").unlink()                  # as a pre-marker output
    (w / "site" / "index.html").write_text("<h1>docs</h1>")
    proc = run_gpuop("synth", "-o", "site", "--no-cache", cwd=w)
    assert proc.returncode == 2
    assert ("refusing to replace a folder that is not gpuop output (no gpuop marker, and gpuop did not write "
            "index.html)") in proc.stderr
    assert (w / "site" / "index.html").is_file()


def test_refuses_the_project_itself_from_inside_it(small, tmp_path):
    w = tmp_path / "proj"
    shutil.copytree(small, w, ignore=shutil.ignore_patterns("clean"))
    (w / "index.json").write_text(json.dumps({"kind": "Index", "clusters": []}))
    proc = run_gpuop("synth", "-o", "../proj", "--no-cache", cwd=w)
    assert proc.returncode == 2
    assert proc.stderr == (f"{w}/../proj: refusing to write into the project, the working folder, an input or one of "
                           "their parents (the output folder is replaced as a whole); pass -o DIR, e.g. -o dist\n"
                           "gpuop: 1 error; nothing written\n")
    assert (w / "profiles").is_dir() and (w / "gpuop.yaml").is_file()


def test_refuses_another_projects_output(small, tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    shutil.copytree(small, a, ignore=shutil.ignore_patterns("clean"))
    shutil.copytree(small, b, ignore=shutil.ignore_patterns("clean"))
    settings = b / "gpuop.yaml"
    settings.write_text(settings.read_text().replace("gpu-clusters.git", "other-clusters.git"))
    run_gpuop("synth", "-o", "dist", "--no-cache", cwd=a, check=True)
    proc = run_gpuop("synth", "-o", str(a / "dist"), "--no-cache", cwd=b)
    assert proc.returncode == 2
    assert (f"{a / 'dist'}: refusing to replace the output of another project (repository "
            "https://git.example.com/platform/gpu-clusters.git); this project's repository is "
            "https://git.example.com/platform/other-clusters.git") in proc.stderr


def test_committed_dist_from_before_the_marker_is_adopted(workdir, tmp_path):
    w = tmp_path / "w"
    shutil.copytree(workdir / "profiles", w / "profiles")
    shutil.copy(workdir / "gpuop.yaml", w / "gpuop.yaml")
    shutil.copytree(REPO / "dist", w / "dist")
    (w / "dist" / ".gpuop-output").unlink(missing_ok=True)
    run_gpuop("synth", "-o", "dist", "--no-cache", cwd=w, check=True)
    marker = json.loads((w / "dist" / ".gpuop-output").read_text())
    assert marker == {"apiVersion": "gpuop/v1alpha1", "kind": "Output",
                      "repoURL": "https://git.example.com/platform/gpu-clusters.git"}
