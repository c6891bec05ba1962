"""The review gate and `validate DIST` cannot be walked around: the whole committed output tree must be what the
inputs compile to. An unlisted folder or file anywhere, a symlink anywhere (the output folder and the profiles
folder included) and two profiles with one cluster name are each refused, located, never passed green.

A scratch git repository holds the bundled profiles, gpuop.yaml and their compiled dist/ on `main`; each test
commits one hostile edit on a pull-request branch and runs `gpuop check --against main` and `gpuop validate dist
--against main` there, as CI does.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from conftest import run_gpuop

pytestmark = pytest.mark.slow

# the scratch project and its pull-request clone are the review gate's own (tests/test_review_gate.py)
from test_review_gate import git, origin, pr  # noqa: E402,F401


def commit(repo: Path) -> None:
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "hostile edit")


def gate(repo: Path) -> tuple[int, str]:
    proc = run_gpuop("check", "--against", "main", cwd=repo)
    return proc.returncode, proc.stderr


def validate(repo: Path, *against: str) -> tuple[int, str]:
    proc = run_gpuop("validate", "dist", *against, cwd=repo)
    return proc.returncode, proc.stderr


def refused_everywhere(repo: Path, line: str, gate_code: int = 2) -> None:
    """Both the gate and `validate dist` refuse the committed tree, naming `line`; validate always exits 2, the gate
    2 (bad input) or 3 (stale: synth would remove it)."""
    code, err = gate(repo)
    assert code == gate_code and line in err, err
    for against in (("--against", "main"), ()):          # at the cost of the change, and the whole tree
        code, err = validate(repo, *against)
        assert code == 2 and line in err, (against, err)


def test_an_unlisted_cluster_folder_fails_the_gate_and_validate(pr):
    """A folder index.json does not list is still deployed by the ApplicationSet's files generator."""
    shutil.copytree(pr / "dist" / "prod-east", pr / "dist" / "evil")
    commit(pr)
    refused_everywhere(pr, "dist/evil: is not listed in index.json: gpuop did not write it (Argo CD's "
                           "ApplicationSet deploys every folder of the output that holds params/cluster.json)")


@pytest.mark.parametrize("rel", ["notes.txt", "charts/evil-0.1.0.tgz", "fleet/argocd/evil.yaml",
                                 "prod-east/params/extra.json", "fleet/flux/evil.yaml"])
def test_an_unlisted_file_anywhere_fails_the_gate_and_validate(pr, rel):
    path = pr / "dist" / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: evil}\n")
    commit(pr)
    if "/" not in rel:
        refused_everywhere(pr, f"dist/{rel}: is not listed in index.json")
    else:
        refused_everywhere(pr, f"dist/{rel}: not written by gpuop", gate_code=3)


def test_a_second_profile_reusing_a_cluster_name_is_refused_at_both_names(pr):
    text = (pr / "profiles" / "prod-east.yaml").read_text()
    (pr / "profiles" / "zz-copy.yaml").write_text(text.replace("labels: {", "labels: {copy: \"yes\", "))
    commit(pr)
    for code, err in (gate(pr), validate(pr, "--against", "main"), validate(pr)):
        assert code == 2, err
        lines = [ln for ln in err.splitlines() if "Duplicate value" in ln]
        assert [ln.split(":", 1)[0] for ln in lines] == ["profiles/prod-east.yaml", "profiles/zz-copy.yaml"], err
        assert all('metadata.name: Duplicate value: "prod-east": also the cluster name of profiles/' in ln
                   for ln in lines), err


@pytest.mark.parametrize("folder", ["dist", "profiles"])
def test_a_folder_committed_as_a_symlink_to_a_folder_outside_is_refused(pr, tmp_path, folder):
    """dist/ (or profiles/) committed as a link: what git holds is the link; the bytes read would be elsewhere."""
    outside = tmp_path / "outside"
    shutil.move(pr / folder, outside)
    os.symlink(outside, pr / folder)
    commit(pr)
    refused_everywhere(pr, f"{folder}: is a symlink (to '{outside}')")


@pytest.mark.parametrize("rel, target", [("prod-east/params/more.json", "/etc/hostname"),
                                         ("fleet/argocd/linked", "../../prod-east"),
                                         ("charts/linked.tgz", "prod-east-0.1.0.tgz")])
def test_a_symlink_anywhere_in_the_output_is_refused(pr, rel, target):
    os.symlink(target, pr / "dist" / rel)
    commit(pr)
    refused_everywhere(pr, f"dist/{rel}: is a symlink")


def test_validate_without_profiles_checks_each_cluster_folder_against_its_tree_digest(dist, tmp_path):
    """An output validated on its own (no profiles here) still proves each cluster folder holds exactly the files
    index.json records (treeDigest)."""
    shutil.copytree(dist, tmp_path / "dist")
    (tmp_path / "dist" / "prod-east" / "params" / "extra.json").write_text("{}\n")
    proc = run_gpuop("validate", "dist", cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert "dist/prod-east: does not hold the files index.json records for it (treeDigest" in proc.stderr


def test_the_gate_still_passes_the_committed_tree(pr):
    code, err = gate(pr)
    assert code == 0, err
