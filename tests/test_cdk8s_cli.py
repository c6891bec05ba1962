"""cdk8s and its Node: `cdk8s synth` (the npm cdk8s-cli, through cdk8s.yaml) writes the same objects
as `gpuop synth`, both run on the Node `npm ci` installs (a release jsii supports: no end-of-life
warning), and a missing Node is a user error (exit 2) that says what to install."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from gpuop.errors import UserError
from gpuop.kube.yamlio import load_all
from gpuop.components.runtime import find_node

from conftest import REPO, by_key, load_dir

CDK8S = REPO / "node_modules" / ".bin" / "cdk8s"
NODE = REPO / "node_modules" / ".bin" / "node"
EOL = "end-of-life"          # jsii's banner for an unsupported Node ("Node 20 is end-of-life ...")
NOT_FOUND = ("gpuop: Node.js not found: cdk8s runs on Node (through jsii); run `npm ci` in the project (it "
             "installs Node 24 into node_modules/.bin on Linux x64), or install Node 22 or 24 and put `node` "
             "on PATH, or set JSII_NODE to a node binary")


def _env(**extra) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION",
                                                              "JSII_NODE")}
    return {**env, **extra}


@pytest.mark.slow
@pytest.mark.skipif(not CDK8S.exists(), reason="cdk8s-cli not installed (make setup installs it)")
def test_cdk8s_synth_matches_gpuop_synth(workdir, dist, index):
    shutil.copy(REPO / "cdk8s.yaml", workdir / "cdk8s.yaml")
    cfg = (workdir / "cdk8s.yaml").read_text().replace(".venv/bin/python", str(REPO / ".venv" / "bin" / "python"))
    (workdir / "cdk8s.yaml").write_text(cfg)
    # as the Makefile runs it: node_modules/.bin first on PATH, and no end-of-life warning silenced
    env = _env(CI="true", PATH=f"{NODE.parent}{os.pathsep}{os.environ['PATH']}")
    out = subprocess.run([str(CDK8S), "synth"], cwd=workdir, env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    assert EOL not in out.stdout + out.stderr
    for entry in index["clusters"]:
        folder = workdir / "cdk8s.out" / ("preview" if entry.get("delivery") == "operator" else "")
        assert not (folder.parent / f"{entry['name']}.k8s.yaml").exists() or folder.name != "preview"
        synthesized = by_key(load_all((folder / f"{entry['name']}.k8s.yaml").read_text()))
        assert synthesized == by_key(load_dir(dist / entry["manifests"])), entry["name"]


@pytest.mark.skipif(not NODE.exists(), reason="node_modules not installed (make setup runs npm ci)")
def test_npm_ci_installs_a_node_release_jsii_supports():
    version = subprocess.run([str(NODE), "--version"], capture_output=True, text=True, check=True).stdout
    assert version.startswith(("v22.", "v24.")), version
    assert find_node(env={"PATH": os.defpath}, projects=[REPO]) == str(NODE)


def test_synth_runs_without_node(tmp_path):
    """gpuop's own compile never starts Node (stack/apiobject.py): a JSII_NODE that does not run goes unnoticed;
    the cdk8s app, which builds the constructs, needs it (next test)."""
    shutil.copytree(REPO / "profiles", tmp_path / "profiles")
    shutil.copy(REPO / "gpuop.yaml", tmp_path / "gpuop.yaml")
    env = _env(JSII_NODE=str(tmp_path / "no-node" / "node"), PATH=str(Path(sys.executable).parent))
    proc = subprocess.run([sys.executable, "-m", "gpuop.cli", "synth", "--no-cache", "-o", "out"], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.startswith("gpuop: compiled 9 cluster(s) into out"), proc.stderr
    assert (tmp_path / "out" / "index.json").is_file()


def test_cdk8s_app_without_node_exits_2_saying_what_to_install(tmp_path):
    env = _env(JSII_NODE="no-such-node", PATH=str(tmp_path), GPUOP_PROFILES=str(REPO / "profiles"))
    proc = subprocess.run([sys.executable, "-m", "gpuop.cli.cdk8s_app"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith("JSII_NODE: 'no-such-node' is not an executable: cdk8s runs on Node")
    assert "Traceback" not in proc.stderr


def test_refuses_when_no_node_anywhere(tmp_path):
    with pytest.raises(UserError) as exc:
        find_node(env={"PATH": str(tmp_path)}, projects=[tmp_path])
    assert str(exc.value) == NOT_FOUND


def _fake_node(path: Path) -> Path:
    path.parent.mkdir(parents=True)
    path.write_text("#!/bin/sh\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def test_prefers_the_projects_node_modules_over_path(tmp_path):
    local = _fake_node(tmp_path / "project" / "node_modules" / ".bin" / "node")
    on_path = _fake_node(tmp_path / "bin" / "node")
    assert find_node(env={"PATH": str(on_path.parent)}, projects=[tmp_path / "project"]) == str(local)
    assert find_node(env={"PATH": str(on_path.parent)}, projects=[tmp_path]) == str(on_path)


def test_jsii_node_wins_and_is_never_replaced(tmp_path):
    local = _fake_node(tmp_path / "project" / "node_modules" / ".bin" / "node")
    chosen = _fake_node(tmp_path / "opt" / "node")
    assert find_node(env={"PATH": "", "JSII_NODE": str(chosen)}, projects=[local.parents[2]]) == str(chosen)
    with pytest.raises(UserError) as exc:
        find_node(env={"PATH": "", "JSII_NODE": str(tmp_path / "missing")}, projects=[local.parents[2]])
    assert str(exc.value).startswith(f"JSII_NODE: '{tmp_path}/missing' is not an executable")


def test_node_lines_outside_jsii_messages_are_written_as_text(capfdbinary):
    """Node's own stderr (jsii's end-of-life notice, a crash) reads as Node wrote it, not as b'...' reprs;
    console output inside jsii's JSON messages is decoded as before."""
    import base64
    import io

    from gpuop.components.runtime import stderr_sink

    notice = b"!!  Node 20 is end-of-life and not supported anymore by this software since 2026-10-30.  !!\n"
    console = b'{"stderr": "' + base64.b64encode(b"from a construct\n") + b'"}\n'
    stderr_sink(io.BytesIO(notice + console + b"\xff broken\n"))
    err = capfdbinary.readouterr().err
    assert err == notice + b"from a construct\n" + "\ufffd broken\n".encode()


@pytest.mark.slow
def test_jsii_on_an_end_of_life_node_prints_its_notice_readably(tmp_path):
    node20 = next((n for n in ("/usr/bin/node", shutil.which("node") or "") if n and subprocess.run(
        [n, "--version"], capture_output=True, text=True).stdout.startswith("v20.")), None)
    if node20 is None:
        pytest.skip("no Node 20 here to make jsii print its end-of-life notice")
    proc = subprocess.run([sys.executable, "-c", "from gpuop.components.runtime import start_cdk8s; start_cdk8s()"],
                          cwd=tmp_path, env=_env(JSII_NODE=node20), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "!!  Node 20 is end-of-life" in proc.stderr and "b'" not in proc.stderr, proc.stderr
