"""Shared fixtures: the repository, the reference data in ../shared/refs, and one compile of the
bundled profiles per test session (in a temporary folder, never the committed dist/)."""

from __future__ import annotations

import json
import os
import shutil
import time
import socket
import subprocess
import sys
from pathlib import Path

import pytest

os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")

REPO = Path(__file__).resolve().parents[1]
REFS = REPO.parent / "shared" / "refs"
CRDS = REFS / "crds"
ASSETS = REFS / "gpu-operator" / "assets"


def run_gpuop(*args: str, cwd: Path, check: bool = False) -> subprocess.CompletedProcess:
    env = {**os.environ, "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20"}
    proc = subprocess.run([sys.executable, "-m", "gpuop.cli", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)
    if check and proc.returncode != 0:
        raise AssertionError(f"gpuop {' '.join(args)} exited {proc.returncode}:\n{proc.stderr}")
    return proc


@pytest.fixture(scope="session")
def workdir(tmp_path_factory) -> Path:
    """A copy of the project inputs (profiles/, gpuop.yaml) to compile from."""
    w = tmp_path_factory.mktemp("work")
    shutil.copytree(REPO / "profiles", w / "profiles")
    shutil.copy(REPO / "gpuop.yaml", w / "gpuop.yaml")
    return w


@pytest.fixture(scope="session")
def dist(workdir) -> Path:
    """The bundled profiles compiled over a copy of the committed dist/ (as `make run` does, so the
    committed version lock applies)."""
    if (REPO / "dist").is_dir():
        shutil.copytree(REPO / "dist", workdir / "dist")
    run_gpuop("synth", "profiles", "-o", "dist", cwd=workdir, check=True)
    return workdir / "dist"


@pytest.fixture(scope="session")
def index(dist) -> dict:
    return json.loads((dist / "index.json").read_text())


def load_dir(folder: Path) -> list[dict]:
    """Every YAML object in a folder, kustomization.yaml excepted."""
    from gpuop.kube.yamlio import load_all

    objs = []
    for f in sorted(folder.glob("*.yaml")):
        if f.name != "kustomization.yaml":
            objs += load_all(f.read_text())
    return objs


def key(obj: dict) -> tuple:
    return (obj["kind"], obj["metadata"].get("namespace", ""), obj["metadata"]["name"])


def by_key(objs: list[dict]) -> dict:
    out = {key(o): o for o in objs}
    assert len(out) == len(objs), "duplicate objects"
    return out


def stack_clusters(index: dict) -> list[dict]:
    """The index entries gpuop delivers its own stack for (operator-mode clusters deliver NVIDIA's operator
    instead: docs/operator.md, tests/test_operator.py)."""
    return [c for c in index["clusters"] if c.get("delivery") != "operator"]


# ---- a loopback OCI registry (Debian's docker-registry), for publish and image-digest tests ------------

REGISTRY = shutil.which("docker-registry") or shutil.which("registry")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def registry(tmp_path_factory):
    """Debian's docker-registry on a free loopback port, for one test module; yields HOST:PORT."""
    if REGISTRY is None:
        pytest.skip("docker-registry not installed (.ci/run installs Debian's docker-registry)")
    root = tmp_path_factory.mktemp("registry")
    port = free_port()
    (root / "config.yml").write_text(f"version: 0.1\nstorage:\n  filesystem:\n    rootdirectory: {root / 'data'}\n"
                                     f"http:\n  addr: 127.0.0.1:{port}\n")
    proc = subprocess.Popen([REGISTRY, "serve", str(root / "config.yml")], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    deadline = time.time() + 20
    while time.time() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            break
        except OSError:
            time.sleep(0.1)
    else:
        proc.kill()
        pytest.fail("docker-registry did not start")
    yield f"127.0.0.1:{port}"
    proc.terminate()
    proc.wait(timeout=10)

