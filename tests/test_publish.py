"""Publishing: reproducible chart archives, a Helm repository index listing every version, and a
round trip through a real OCI registry (Debian's docker-registry, i.e. distribution) on loopback,
with republishing other content under an old version refused."""

from __future__ import annotations

import http.server
import json
import shutil
import threading
import time
from pathlib import Path

import helm_python as helm
import pytest
import yaml

from conftest import free_port as _free_port, run_gpuop

pytestmark = pytest.mark.slow       # chart packaging and a registry, 15-30 s each (`make test-fast` leaves these out)



def _project(src: Path, dst: Path) -> Path:
    shutil.copytree(src / "profiles", dst / "profiles")
    shutil.copy(src / "gpuop.yaml", dst / "gpuop.yaml")
    return dst


def test_packaged_charts_are_byte_identical_across_builds(workdir, tmp_path):
    run_gpuop("synth", "-o", str(tmp_path / "a"), "--no-cache", cwd=workdir, check=True)
    time.sleep(1.1)   # a different second: helm package's own archives would differ now
    run_gpuop("synth", "-o", str(tmp_path / "b"), "--no-cache", cwd=workdir, check=True)
    a = sorted((tmp_path / "a" / "charts").glob("*.tgz"))
    assert a and [p.read_bytes() for p in a] == [(tmp_path / "b" / "charts" / p.name).read_bytes() for p in a]
    for p in a:   # Helm loads and renders what gpuop packaged
        chart = helm.Chart.load(str(p))
        try:
            assert chart.render({}, name=chart.name, namespace="gpu-operator")
        finally:
            chart.close()


def test_repository_index_lists_every_version_and_serves_over_http(workdir, tmp_path):
    w = _project(workdir, tmp_path / "w")
    run_gpuop("synth", "-o", "out", cwd=w, check=True)
    p = w / "profiles" / "prod-east.yaml"
    p.write_text(p.read_text().replace("containerRuntime: containerd",
                                       "containerRuntime: containerd\n  daemonsets: {priorityClassName: system-cluster-critical}"))
    run_gpuop("synth", "-o", "out", cwd=w, check=True)
    index = yaml.safe_load((w / "out" / "charts" / "index.yaml").read_text())
    versions = [e["version"] for e in index["entries"]["prod-east"]]
    assert versions == ["0.1.1", "0.1.0"]
    for e in index["entries"]["prod-east"]:
        assert (w / "out" / "charts" / e["urls"][0]).is_file()
        assert "sha256:" + e["digest"] == helm.digest(str(w / "out" / "charts" / e["urls"][0]))
    handler = lambda *a, **k: http.server.SimpleHTTPRequestHandler(*a, directory=str(w / "out" / "charts"), **k)  # noqa: E731
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        (tmp_path / "pulled").mkdir()
        helm.pull("prod-east", repo_url=url, version="0.1.0", destination=str(tmp_path / "pulled"))
        assert (tmp_path / "pulled" / "prod-east-0.1.0.tgz").read_bytes() == \
            (w / "out" / "charts" / "prod-east-0.1.0.tgz").read_bytes()
    finally:
        server.shutdown()


def test_oci_push_and_pull_round_trip(workdir, tmp_path, registry):
    w = _project(workdir, tmp_path / "w")
    run_gpuop("synth", "-o", "out", cwd=w, check=True)
    remote = f"oci://{registry}/gpu"
    first = run_gpuop("publish", "--oci", remote, "--plain-http", "out", cwd=w, check=True)
    assert "prod-east 0.1.0: pushed" in first.stderr
    again = run_gpuop("publish", "--oci", remote, "--plain-http", "out", cwd=w, check=True)
    assert "prod-east 0.1.0: unchanged" in again.stderr and ": pushed" not in again.stderr
    client = helm.RegistryClient(plain_http=True)
    (tmp_path / "p").mkdir()
    try:
        assert "0.1.0" in client.tags(f"{remote}/prod-east")
        client.pull(f"{remote}/prod-east", version="0.1.0", destination=str(tmp_path / "p"), plain_http=True)
    finally:
        client.close()
    assert (tmp_path / "p" / "prod-east-0.1.0.tgz").read_bytes() == (w / "out" / "charts" / "prod-east-0.1.0.tgz").read_bytes()


def test_republishing_other_content_under_a_published_version_is_refused(workdir, tmp_path, registry):
    remote = f"oci://{registry}/refuse"
    a = _project(workdir, tmp_path / "a")
    run_gpuop("synth", "-o", "out", cwd=a, check=True)
    run_gpuop("publish", "--oci", remote, "--plain-http", "out", cwd=a, check=True)
    b = _project(workdir, tmp_path / "b")       # a fresh checkout without the lock: content differs, version 0.1.0 again
    p = b / "profiles" / "prod-east.yaml"
    p.write_text(p.read_text().replace("containerRuntime: containerd",
                                       "containerRuntime: containerd\n  daemonsets: {priorityClassName: system-cluster-critical}"))
    run_gpuop("synth", "-o", "out", cwd=b, check=True)
    proc = run_gpuop("publish", "--oci", remote, "--plain-http", "out", cwd=b)
    assert proc.returncode == 2, proc.stderr
    assert (f"out/charts/prod-east-0.1.0.tgz: {remote}/prod-east:0.1.0 is already published with other content; "
            "refusing to overwrite it") in proc.stderr


def test_unreachable_registry_is_a_user_error_not_a_bug(workdir, tmp_path):
    w = _project(workdir, tmp_path / "w")
    run_gpuop("synth", "-o", "out", cwd=w, check=True)
    proc = run_gpuop("publish", "--oci", f"oci://127.0.0.1:{_free_port()}/gpu", "--plain-http", "out", cwd=w)
    assert proc.returncode == 2, proc.stderr
    assert "registry error:" in proc.stderr and "connection refused" in proc.stderr
    assert "please report" not in proc.stderr and "Traceback" not in proc.stderr


def test_publish_reports_exactly_what_was_pushed_skipped_and_refused(workdir, tmp_path, registry):
    """A publish with a refused version reports what it pushed, skipped and refused, never "nothing
    written" when other charts were pushed."""
    remote = f"oci://{registry}/report"
    a = _project(workdir, tmp_path / "a")
    run_gpuop("synth", "-o", "out", cwd=a, check=True)
    run_gpuop("publish", "--oci", remote, "--plain-http", "out", cwd=a, check=True)
    b = _project(workdir, tmp_path / "b")
    p = b / "profiles" / "prod-east.yaml"
    p.write_text(p.read_text().replace("containerRuntime: containerd",
                                       "containerRuntime: containerd\n  daemonsets: {priorityClassName: system-cluster-critical}"))
    lab = b / "profiles" / "lab-west.yaml"
    (b / "profiles" / "lab-new.yaml").write_text(lab.read_text().replace("name: lab-west", "name: lab-new"))
    run_gpuop("synth", "-o", "out", cwd=b, check=True)
    proc = run_gpuop("publish", "--oci", remote, "--plain-http", "out", cwd=b)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.splitlines()
    assert "gpuop: lab-new 0.1.0: pushed" in lines
    assert "gpuop: lab-west 0.1.0: unchanged" in lines
    assert "gpuop: prod-east 0.1.0: refused" in lines
    n = len(json.loads((b / "out" / "index.json").read_text())["clusters"])
    assert lines[-1] == f"gpuop: 1 pushed, {n - 2} skipped (already published), 1 refused, 0 not attempted"
    assert "nothing written" not in proc.stderr


def test_registry_error_says_which_charts_were_not_attempted(workdir, tmp_path):
    w = _project(workdir, tmp_path / "w")
    run_gpuop("synth", "-o", "out", cwd=w, check=True)
    proc = run_gpuop("publish", "--oci", f"oci://127.0.0.1:{_free_port()}/gpu", "--plain-http", "out", cwd=w)
    assert proc.returncode == 2
    lines = proc.stderr.splitlines()
    n = len(json.loads((w / "out" / "index.json").read_text())["clusters"])
    assert lines[-1] == f"gpuop: 0 pushed, 0 skipped (already published), 0 refused, {n} not attempted"
    assert "gpuop: prod-east 0.1.0: not attempted" in lines
