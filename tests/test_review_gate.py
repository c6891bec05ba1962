"""The PR review gate users copy (examples/ci/github-actions.yml) works, so the example cannot rot.

The workflow's own `run:` steps are read from the file and run in order, as GitHub Actions runs them
(`bash --noprofile --norc -eo pipefail`, `${{ github.base_ref }}` filled in, GITHUB_STEP_SUMMARY a
file), in a scratch git repository of the project: profiles/, gpuop.yaml and a freshly compiled
dist/ committed on `main`, cloned, and a pull-request branch on top. The one step not run is
`install`: the dev venv's gpuop (and the checkout's node_modules) stand in for it.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from conftest import REPO, run_gpuop

pytestmark = pytest.mark.slow

WORKFLOW = REPO / "examples" / "ci" / "github-actions.yml"
CONTEXT = {"github.base_ref": "main"}
GIT_ENV = {"GIT_AUTHOR_NAME": "gate", "GIT_AUTHOR_EMAIL": "gate@example.com", "GIT_COMMITTER_NAME": "gate",
           "GIT_COMMITTER_EMAIL": "gate@example.com", "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}


def workflow() -> dict:
    return YAML(typ="safe").load(WORKFLOW.read_text())      # YAML 1.2: `on` stays a string


def gate_steps() -> list[dict]:
    return workflow()["jobs"]["gate"]["steps"]


def expand(text: str) -> str:
    def one(m: re.Match) -> str:
        expr = m.group(1).strip()
        assert expr in CONTEXT, f"the test does not know the expression {expr!r}: add it to CONTEXT"
        return CONTEXT[expr]
    return re.sub(r"\$\{\{(.*?)\}\}", one, text)


@dataclass
class StepRun:
    id: str
    rc: int
    out: str


def git(repo: Path, *args: str) -> str:
    proc = subprocess.run(["git", *args], cwd=repo, env={**os.environ, **GIT_ENV}, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def run_gate(repo: Path, summary: Path, only: tuple[str, ...] = ()) -> list[StepRun]:
    """The workflow's steps in order until one fails (as the job does); `only`: just those steps."""
    tools = os.pathsep.join([str(Path(sys.executable).parent), str(REPO / "node_modules" / ".bin")])
    base_env = {**os.environ, **GIT_ENV, "CI": "true", "GITHUB_ACTIONS": "true",
                "GITHUB_STEP_SUMMARY": str(summary), "PATH": f"{tools}{os.pathsep}{os.environ['PATH']}"}
    runs = []
    for step in gate_steps():
        if "run" not in step or step["id"] == "install" or (only and step["id"] not in only):
            continue
        env = {**base_env, **{k: expand(str(v)) for k, v in step.get("env", {}).items()}}
        proc = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", expand(step["run"])],
                              cwd=repo, env=env, capture_output=True, text=True, timeout=600)
        runs.append(StepRun(step["id"], proc.returncode, proc.stdout + proc.stderr))
        if proc.returncode != 0:
            break
    return runs


def stale_after_commit(pr: Path, tmp_path: Path, message: str) -> StepRun:
    """Commit the pull request's edits and run the gate, which must find dist/ stale (exit 3)."""
    git(pr, "commit", "-q", "-am", message)
    (gate,) = run_gate(pr, tmp_path / "summary.md")
    assert gate.rc == 3, gate.out
    return gate


@pytest.fixture(scope="module")
def origin(dist, tmp_path_factory) -> Path:
    """The project on `main`: profiles, settings and their compiled dist/, committed."""
    help_text = run_gpuop("diff", "--help", cwd=REPO).stdout
    if "--exit-code" not in help_text:
        pytest.skip("this gpuop has no `gpuop diff --exit-code`")
    repo = tmp_path_factory.mktemp("origin") / "project"
    shutil.copytree(REPO / "profiles", repo / "profiles")
    shutil.copy(REPO / "gpuop.yaml", repo / "gpuop.yaml")
    shutil.copytree(dist, repo / "dist")
    (repo / ".gitignore").write_text(".gpuop-cache/\n")
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "clusters")
    return repo


@pytest.fixture
def pr(origin, tmp_path) -> Path:
    """A clone of the project (origin/main known) on a pull-request branch."""
    git(tmp_path, "clone", "-q", str(origin), "work")
    repo = tmp_path / "work"
    git(repo, "checkout", "-q", "-b", "pr")
    return repo


def relabel(repo: Path) -> None:
    p = repo / "profiles" / "prod-east.yaml"
    text = p.read_text()
    assert "labels: {region: us-east-1, environment: production}" in text
    p.write_text(text.replace("environment: production}", "environment: production, team: ml}"))


def test_workflow_runs_bash_steps_and_installs_gpuop_with_node():
    wf = workflow()
    assert wf["on"]["pull_request"]["paths"][:3] == ["profiles/**", "gpuop.yaml", "dist/**"]
    assert wf["defaults"]["run"]["shell"] == "bash"
    install = next(s for s in gate_steps() if s.get("id") == "install")["run"]
    assert "pip install" in install and "npm ci" in install
    assert [s["id"] for s in gate_steps() if "run" in s] == ["install", "gate"]
    assert 'gpuop check --against "origin/$BASE"' in next(s for s in gate_steps() if s.get("id") == "gate")["run"]


def test_gate_passes_a_pull_request_that_recompiled_dist(pr, tmp_path):
    relabel(pr)
    run_gpuop("synth", "--no-progress", cwd=pr, check=True)
    git(pr, "add", "-A")
    git(pr, "commit", "-q", "-m", "prod-east: team label")
    shutil.rmtree(pr / ".gpuop-cache")                       # a fresh clone in CI: no build cache
    summary = tmp_path / "summary.md"
    runs = run_gate(pr, summary)
    assert [(r.id, r.rc) for r in runs] == [("gate", 0)], "\n".join(r.out for r in runs)
    review = runs[0].out
    assert "prod-east: inputs changed" in review                # only the changed cluster is compiled
    assert "1 cluster(s) to check, 8 proven unchanged from the base" in review
    assert "metadata.labels.team: added ml" in review           # the reviewer sees the label change
    assert summary.read_text().startswith("### gpuop check against `main`\n```\n")
    assert "metadata.labels.team: added ml" in summary.read_text()
    assert git(pr, "status", "--porcelain", "--", "dist/") == ""    # the gate leaves dist/ as committed


def test_gate_fails_when_profiles_changed_but_dist_was_not_recompiled(pr, tmp_path):
    relabel(pr)
    git(pr, "commit", "-q", "-am", "prod-east: team label, dist/ forgotten")
    runs = run_gate(pr, tmp_path / "summary.md")
    assert [(r.id, r.rc) for r in runs] == [("gate", 3)], "\n".join(r.out for r in runs)
    assert "::error::dist/ is stale: the profiles compile to something else (above)." in runs[0].out
    assert "dist/prod-east/argocd/application.yaml: differs" in runs[0].out


def test_gate_fails_on_a_stray_file_in_dist(pr, tmp_path):
    """A file synth does not write (a hand-added manifest) is stale output: synth would remove it."""
    stray = pr / "dist" / "prod-east" / "manifests" / "hand-added.yaml"
    assert stray.parent.is_dir()
    stray.write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: hand-added}\n")
    git(pr, "add", "-A")
    git(pr, "commit", "-q", "-m", "hand edit")
    (gate,) = run_gate(pr, tmp_path / "summary.md")
    assert gate.rc == 3, gate.out
    assert "prod-east: committed output differs from the base" in gate.out
    assert "dist/prod-east/manifests/hand-added.yaml: not written by gpuop" in gate.out


def test_gate_fails_on_a_hand_edit_of_index_json(pr, tmp_path):
    """index.json alone edited (a cluster's labels): the cluster is recompiled and compared, not trusted."""
    index = json.loads((pr / "dist" / "index.json").read_text())
    entry = next(c for c in index["clusters"] if c["name"] == "prod-east")
    entry["labels"]["team"] = "ml"
    (pr / "dist" / "index.json").write_text(json.dumps(index, indent=2, sort_keys=True) + "\n")
    gate = stale_after_commit(pr, tmp_path, "index edit")
    assert "prod-east: index.json entry differs from the base" in gate.out
    assert "dist/index.json: differs" in gate.out


def test_gate_fails_on_a_hand_edit_of_a_fleet_file_alone(pr, tmp_path):
    """Only the ApplicationSet edited (its repository: where Argo CD takes every cluster's stack from), no
    cluster selected: the fleet files are printed again from the proven clusters' entries and compared."""
    appset = pr / "dist" / "fleet" / "argocd" / "applicationset.yaml"
    text = appset.read_text()
    assert "repoURL: https://git.example.com/platform/gpu-clusters.git" in text
    appset.write_text(text.replace("https://git.example.com/platform/gpu-clusters.git", "https://evil.example.com/fleet.git"))
    gate = stale_after_commit(pr, tmp_path, "fleet edit")
    assert "0 cluster(s) to check" in gate.out
    assert "dist/fleet/argocd/applicationset.yaml: differs" in gate.out


def test_gate_fails_on_a_hand_edit_of_the_version_lock(pr, tmp_path):
    """One cluster's lock entry edited (its version set back): that cluster is compiled over it and compared."""
    path = pr / "dist" / "versions.lock.json"
    lock = json.loads(path.read_text())
    lock["clusters"]["prod-east"]["version"] = "0.0.1"
    path.write_text(json.dumps(lock, indent=2, sort_keys=True) + "\n")
    gate = stale_after_commit(pr, tmp_path, "lock edit")
    assert "prod-east: version lock entry differs from the base" in gate.out
    assert "dist/prod-east/chart/Chart.yaml: differs" in gate.out      # compiled at the lock's version


def test_index_json_names_each_catalog_read_set_once_by_its_digest(dist):
    """Each cluster's provenance names the catalog paths its compile read by digest; index.json holds each
    distinct set once, exactly the sets its clusters name, under the digest of its text."""
    from gpuop.outputs.fleet import reads_table

    index = json.loads((dist / "index.json").read_text())
    named = {c["provenance"]["catalog"]["reads"] for c in index["clusters"]}
    assert set(index["catalogReads"]) == named
    assert reads_table(index) == index["catalogReads"]          # every key the digest of its set
    forged = {**index, "catalogReads": {k: v.replace("gpus(", "gpus(,", 1) for k, v in index["catalogReads"].items()}}
    assert reads_table(forged) == {}                            # a set edited under its digest counts for nothing


@pytest.mark.parametrize("how", ["set edited under its digest", "set added"])
def test_gate_fails_on_a_forged_catalog_read_set(pr, tmp_path, how):
    """The catalog paths a cluster's compile read, forged in index.json (fewer paths: a catalog change would
    no longer select the cluster): the gate finds index.json stale."""
    index = json.loads((pr / "dist" / "index.json").read_text())
    ref = next(c for c in index["clusters"] if c["name"] == "prod-east")["provenance"]["catalog"]["reads"]
    if how == "set added":
        index["catalogReads"]["sha256:" + hashlib.sha256(b"catalog()").hexdigest()] = "catalog()"
    else:
        index["catalogReads"][ref] = index["catalogReads"][ref].split(",gpus(")[0] + ")"
    (pr / "dist" / "index.json").write_text(json.dumps(index, indent=2, sort_keys=True, ensure_ascii=False) + "\n")
    gate = stale_after_commit(pr, tmp_path, "index edit")
    assert "dist/index.json: differs" in gate.out


def test_a_catalog_or_settings_change_selects_every_cluster(pr, tmp_path):
    """A whole-fleet input (here the settings; gpuop's version is recorded alike) changes every cluster's
    provenance: all are compiled and compared. (A catalog change selects the clusters that read what it
    changes: tests/test_catalog_selection.py.)"""
    settings = pr / "gpuop.yaml"
    settings.write_text(settings.read_text().replace("revision: main", "revision: release"))
    git(pr, "commit", "-q", "-am", "deliver from the release branch")
    (gate,) = run_gate(pr, tmp_path / "summary.md")
    assert gate.rc == 3, gate.out
    assert "9 cluster(s) to check, 0 proven unchanged" in gate.out


def test_gate_passes_a_driver_bump_with_its_new_chart_version(pr, tmp_path):
    """A new chart version: its archive is new in the pull request; the gate packages it again and compares."""
    p = pr / "profiles" / "prod-east.yaml"
    p.write_text(p.read_text().replace("  containerRuntime: containerd\n",
                                       "  containerRuntime: containerd\n  driver: {version: \"595.91.07\"}\n"))
    run_gpuop("synth", "--no-progress", cwd=pr, check=True)
    git(pr, "add", "-A")
    git(pr, "commit", "-q", "-m", "prod-east: driver 595")
    shutil.rmtree(pr / ".gpuop-cache")
    (gate,) = run_gate(pr, tmp_path / "summary.md")
    assert gate.rc == 0, gate.out
    assert re.search(r"cluster prod-east: chart 0\.1\.\d+ -> 0\.2\.0", gate.out), gate.out
    assert "driver reinstall" in gate.out                     # the impact on the nodes
    assert "+ charts/prod-east-0.2.0.tgz" in gate.out


@pytest.mark.parametrize("where", ["working tree", "untracked copy", "committed parent"])
def test_input_edits_git_has_not_seen_as_the_base_select_their_clusters(pr, where):
    """Profile files git proves unchanged since the base are not read again; any other is hashed: an edit
    left uncommitted, a profile replaced by an untracked file of the same name, a parent changed in a commit."""
    if where == "working tree":
        relabel(pr)
        expect = {"prod-east"}
    elif where == "untracked copy":
        p = pr / "profiles" / "prod-east.yaml"
        text = p.read_text()
        git(pr, "rm", "-q", "--cached", "profiles/prod-east.yaml")
        p.write_text(text.replace("environment: production}", "environment: production, team: ml}"))
        expect = {"prod-east"}
    else:
        base = pr / "profiles" / "_base.yaml"
        base.write_text(base.read_text() + "\n# a comment: new bytes, the same meaning\n")
        git(pr, "commit", "-q", "-am", "_base: a comment")
        expect = {"dra", "keep-operator", "lab-west", "mig-sharing", "prod-east"}
    proc = run_gpuop("check", "--against", "origin/main", cwd=pr)
    assert proc.returncode in (0, 3), proc.stderr
    picked = {line.split(":")[0].strip() for line in (proc.stdout + proc.stderr).splitlines()
              if line.strip().endswith(": inputs changed")}
    assert picked == expect, proc.stdout + proc.stderr
