"""The review gate's rehearsal (`gpuop check --against REV --rehearse`): once the committed output is proven
current and valid, exactly the clusters whose output the change touches are rehearsed on the rig, no other.

A scratch git repository of the project's profiles with their compiled dist/ committed; one profile changed
and compiled again in the working tree. Skipped when the rig's binaries are not built and CI is unset."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import REPO, run_gpuop

pytestmark = pytest.mark.slow

CI = os.environ.get("CI") == "true"
GIT_ENV = {"GIT_AUTHOR_NAME": "gate", "GIT_AUTHOR_EMAIL": "gate@example.com", "GIT_COMMITTER_NAME": "gate",
           "GIT_COMMITTER_EMAIL": "gate@example.com", "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}
CHANGED = "prod-east"
LAYOUT = 'layout: {"3g.40gb": 1, "2g.20gb": 1, "1g.10gb": 2}'


@pytest.fixture(scope="module")
def binaries():
    try:
        from gpuop.rehearse import rig

        return rig.binaries(build=CI)
    except Exception as exc:               # not built here (a build error, no Go)
        if CI:
            pytest.fail(f"the rehearsal rig's binaries are needed with CI=true: {type(exc).__name__}: {exc}")
        pytest.skip(f"the rehearsal rig's binaries are not built: {type(exc).__name__}: {exc}")


def git(repo: Path, *args: str) -> None:
    proc = subprocess.run(["git", *args], cwd=repo, env={**os.environ, **GIT_ENV}, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr


@pytest.fixture(scope="module")
def repo(tmp_path_factory) -> Path:
    """profiles/, gpuop.yaml and their compiled dist/ committed."""
    r = tmp_path_factory.mktemp("gate-rehearse")
    shutil.copytree(REPO / "profiles", r / "profiles")
    shutil.copy(REPO / "gpuop.yaml", r / "gpuop.yaml")
    run_gpuop("synth", "profiles", "-o", "dist", cwd=r, check=True)
    git(r, "init", "-q", "-b", "main")
    git(r, "add", "-A")
    git(r, "commit", "-q", "-m", "base")
    return r


def test_a_change_to_one_profile_rehearses_that_cluster_and_no_other(binaries, repo):
    profile = repo / "profiles" / f"{CHANGED}.yaml"
    text = profile.read_text()
    assert LAYOUT in text
    profile.write_text(text.replace(LAYOUT, 'layout: {"1g.10gb": 7}'))
    run_gpuop("synth", "profiles", "-o", "dist", cwd=repo, check=True)

    proc = run_gpuop("check", "--against", "main", "--rehearse", cwd=repo)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"rehearsing 1 cluster(s) whose output the change touches: {CHANGED}\n" in proc.stderr
    # the rehearsal report: one header line per cluster rehearsed ("<name> (<mode>, <n> fake nodes): ...")
    rehearsed = re.findall(r"^(\S+) \((?:stack|operator), \d+ fake nodes\): (.*)$", proc.stdout, re.M)
    assert rehearsed and [name for name, _ in rehearsed] == [CHANGED], proc.stdout
    assert rehearsed[0][1].endswith("as planned"), proc.stdout


def test_a_change_that_touches_no_output_rehearses_nothing(binaries, repo):
    git(repo, "checkout", "-q", "--", ".")
    git(repo, "clean", "-q", "-fd")
    profile = repo / "profiles" / f"{CHANGED}.yaml"
    profile.write_text(profile.read_text() + "# a comment: the same cluster, the same output\n")
    # index.json records the profile's new digest; the cluster's folder keeps its bytes
    run_gpuop("synth", "profiles", "-o", "dist", cwd=repo, check=True)
    proc = run_gpuop("check", "--against", "main", "--rehearse", cwd=repo)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "rehearsing 0 cluster(s) whose output the change touches\n" in proc.stderr
    assert "fake nodes" not in proc.stdout
