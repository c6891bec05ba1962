"""The reference data: the folder the tests read matches refs.lock, `make refs` (tools/refs.py) fetches a
complete verified copy and refuses a tampered file, and a run without the data stops with one message."""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import os
import shutil
import subprocess
import sys
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from conftest import REFS, REFS_LOCK, REPO, refs_problems

spec = importlib.util.spec_from_file_location("refs_tool", REPO / "tools" / "refs.py")
refs_tool = importlib.util.module_from_spec(spec)
spec.loader.exec_module(refs_tool)
LOCK = refs_tool.load_lock(REFS_LOCK)


def test_the_reference_folder_matches_refs_lock():
    """Every pinned file is there with its checksum: the tests compare against the versions refs.lock names."""
    assert refs_problems() == []
    bad = [e["path"] for e in LOCK["files"] if (REFS / e["path"]).is_file() or not e.get("optional")
           if hashlib.sha256((REFS / e["path"]).read_bytes()).hexdigest() != e["sha256"]]
    assert bad == []


def test_relock_from_the_reference_folder_rewrites_refs_lock_byte_for_byte(tmp_path):
    lock = tmp_path / "refs.lock"
    shutil.copy(REFS_LOCK, lock)
    assert run_refs("--relock", str(REFS), "--lock", str(lock)).returncode == 0
    assert lock.read_bytes() == REFS_LOCK.read_bytes()


def test_every_pinned_file_names_its_upstream_commit():
    assert {e["source"] for e in LOCK["files"]} == set(LOCK["sources"])
    assert len({e["path"] for e in LOCK["files"]}) == len(LOCK["files"])
    for src in LOCK["sources"].values():
        assert len(src["commit"]) == 40 and "/" in src["repo"]
    chart = next(e for e in LOCK["files"] if e["path"] == "gpu-operator/chart/Chart.yaml")
    assert refs_tool.url_of(chart, LOCK["sources"], None) == (
        "https://raw.githubusercontent.com/NVIDIA/gpu-operator/10ee5b3638b89e11e949412aafa5ba99279c3721/"
        "deployments/gpu-operator/Chart.yaml")
    assert refs_tool.url_of(chart, LOCK["sources"], "http://127.0.0.1:1/m/") == (
        "http://127.0.0.1:1/m/gpu-operator/chart/Chart.yaml")


@pytest.fixture()
def mirror(tmp_path):
    """A copy of the reference folder served over loopback HTTP; yields (its folder, its URL)."""
    root = tmp_path / "mirror"
    shutil.copytree(REFS, root, copy_function=shutil.copyfile)
    handler = functools.partial(type("Quiet", (SimpleHTTPRequestHandler,), {"log_message": lambda *a: None}),
                                directory=str(root))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield root, f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def run_refs(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(REPO / "tools" / "refs.py"), *args], capture_output=True,
                          text=True, timeout=120, env={k: v for k, v in os.environ.items() if k != "GPUOP_REFS_MIRROR"})


def test_make_refs_fetches_a_verified_copy_and_refuses_a_tampered_file(mirror, tmp_path):
    root, url = mirror
    dest = tmp_path / "fetched"
    proc = run_refs("--mirror", url, "--dest", str(dest))
    assert proc.returncode == 0, proc.stderr
    served = sum(1 for e in LOCK["files"] if (REFS / e["path"]).is_file())     # optional ones may be absent
    assert f"refs: {served} files verified in {dest} ({served} fetched)" in proc.stderr
    assert run_refs("--check", str(dest)).returncode == 0
    assert "(0 fetched)" in run_refs("--mirror", url, "--dest", str(dest)).stderr      # complete: nothing again

    # The mirror serves a changed CRD (one byte): refused, never written, the run fails naming it.
    crd = "crds/helm.toolkit.fluxcd.io_helmreleases.yaml"
    data = (root / crd).read_bytes()
    (root / crd).write_bytes(data.replace(b"maxLength: 253", b"maxLength: 254", 1))
    (dest / crd).unlink()
    proc = run_refs("--mirror", url, "--dest", str(dest))
    assert proc.returncode == 1
    assert f"{crd}: checksum mismatch (refused)" in proc.stderr
    assert not (dest / crd).exists()
    check = run_refs("--check", str(dest))
    assert check.returncode == 1 and f"{dest / crd}: missing" in check.stderr

    # A file the mirror lacks: one line naming it, the others kept.
    (root / crd).unlink()
    proc = run_refs("--mirror", url, "--dest", str(dest))
    assert proc.returncode == 1 and f"{crd}: cannot fetch {url}/{crd}" in proc.stderr
    assert "1 of" in proc.stderr


def _pytest(*args: str, refs: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "GPUOP_REFS": refs}
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:randomly", *args], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=120)


def test_a_run_without_the_reference_data_stops_once_naming_make_refs(tmp_path):
    proc = _pytest("tests/test_gitops_objects.py", "tests/test_operator.py", "tests/test_layout.py",
                   refs=str(tmp_path / "nowhere"))
    out = proc.stdout + proc.stderr
    assert proc.returncode == pytest.ExitCode.USAGE_ERROR, out
    assert out.count("make refs") == 1, out
    assert f"{tmp_path / 'nowhere'} does not exist" in out
    assert "test_gitops_objects.py, test_operator.py need it" in out
    assert "passed" not in out and "failed" not in out and "error" not in out.lower().replace("usage_error", "")


def test_an_incomplete_reference_folder_names_what_is_missing(tmp_path):
    partial = tmp_path / "partial"
    shutil.copytree(REFS / "crds", partial / "crds")
    proc = _pytest("--co", "tests/test_cel.py", refs=str(partial))
    out = proc.stdout + proc.stderr
    assert proc.returncode == pytest.ExitCode.USAGE_ERROR, out
    assert f"{partial / 'dra/chart/.helmignore'} is missing" in out and "make refs" in out


def test_tests_that_need_no_reference_data_run_without_it(tmp_path):
    proc = _pytest("--co", "tests/test_layout.py", refs=str(tmp_path / "nowhere"))
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_a_missing_checking_tool_skips_the_test_or_fails_when_its_folder_was_named(tmp_path, monkeypatch):
    import conftest

    monkeypatch.setattr(conftest, "TOOLS", tmp_path)
    monkeypatch.setattr(conftest, "TOOLS_FROM_ENV", False)
    with pytest.raises(pytest.skip.Exception, match=f"kubeval not found at {tmp_path}/kubeval/kubeval: set GPUOP_TOOLS"):
        conftest.tool("kubeval")
    monkeypatch.setattr(conftest, "TOOLS_FROM_ENV", True)
    with pytest.raises(pytest.fail.Exception, match="nvidia-operator not found at"):
        conftest.tool("nvidia-operator")
    exe = tmp_path / "kubeval" / "kubeval"
    exe.parent.mkdir()
    exe.write_text("#!/bin/sh\n")
    exe.chmod(0o755)
    assert conftest.tool("kubeval") == exe


@pytest.mark.slow
def test_unset_gpuop_refs_looks_beside_the_repository_then_in_dot_refs(tmp_path):
    """A clone with no ../shared and GPUOP_REFS unset: the run stops naming `make refs`; once `make refs` has
    filled .refs/ (here: a link to a complete copy), the same run passes."""
    repo = tmp_path / "clone"
    (repo / "tests").mkdir(parents=True)
    shutil.copy(REPO / "tests" / "conftest.py", repo / "tests" / "conftest.py")
    shutil.copy(REFS_LOCK, repo / "refs.lock")
    (repo / "pytest.ini").write_text("[pytest]\ntestpaths = tests\n")
    (repo / "tests" / "test_uses_refs.py").write_text(
        "from conftest import CRDS\n\ndef test_crds():\n    assert (CRDS / 'argoproj.io_applications.yaml').is_file()\n")
    env = {k: v for k, v in os.environ.items() if k != "GPUOP_REFS"}
    run = lambda: subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", "-p", "no:cacheprovider"],  # noqa: E731
                                 cwd=repo, env=env, capture_output=True, text=True, timeout=120)
    proc = run()
    out = proc.stdout + proc.stderr
    assert proc.returncode == pytest.ExitCode.USAGE_ERROR, out
    assert "GPUOP_REFS is unset, so ../shared/refs or .refs/" in out and "Run `make refs`" in out
    (repo / ".refs").symlink_to(REFS, target_is_directory=True)
    proc = run()
    assert proc.returncode == 0 and "1 passed" in proc.stdout, proc.stdout + proc.stderr
