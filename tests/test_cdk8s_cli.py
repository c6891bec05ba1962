"""`cdk8s synth` (the npm cdk8s-cli, through cdk8s.yaml) writes the same objects as `gpuop synth`."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from gpuop.kube.yamlio import load_all

from conftest import REPO, by_key, load_dir

CDK8S = REPO / "node_modules" / ".bin" / "cdk8s"


@pytest.mark.skipif(not CDK8S.exists(), reason="cdk8s-cli not installed (make setup installs it)")
def test_cdk8s_synth_matches_gpuop_synth(workdir, dist, index):
    shutil.copy(REPO / "cdk8s.yaml", workdir / "cdk8s.yaml")
    cfg = (workdir / "cdk8s.yaml").read_text().replace(".venv/bin/python", str(REPO / ".venv" / "bin" / "python"))
    (workdir / "cdk8s.yaml").write_text(cfg)
    env = {**os.environ, "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20", "CI": "true"}
    out = subprocess.run([str(CDK8S), "synth"], cwd=workdir, env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    for entry in index["clusters"]:
        synthesized = by_key(load_all((workdir / "cdk8s.out" / f"{entry['name']}.k8s.yaml").read_text()))
        assert synthesized == by_key(load_dir(dist / entry["manifests"])), entry["name"]
