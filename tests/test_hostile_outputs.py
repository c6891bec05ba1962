"""Shard folders, previous outputs and git trees are untrusted input: `gpuop merge` follows no symlink,
checks the gpuop version and that every shard K of N is there, refuses a chart archive that is not one;
`gpuop diff --against` runs git without any command a repository configures (a smudge filter named by a
committed .gitattributes runs zero times) and accepts only a revision or an output folder of the
project; `gpuop report` never writes through a symlink. Each case: exit 2, the located message, the
output untouched, nothing written outside the project."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from test_cli_errors import ENV, REPO, VALID, tree

from gpuop.cli.main import main


def _profile(name: str) -> str:
    return VALID.replace("\n    ", "\n").lstrip().replace("name: c1", f"name: {name}")


def _shard_of(name: str, n: int) -> int:     # pipeline/decide.py in_shard
    return int(hashlib.sha256(name.encode()).hexdigest()[:8], 16) % n + 1


def _gpuop(root: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gpuop.cli", *args], cwd=root, env=ENV, capture_output=True,
                          text=True, timeout=300)


@pytest.fixture(scope="module")
def sharded(tmp_path_factory) -> Path:
    """A project with two clusters (one per shard of 2), compiled whole into dist/ and as shards s1, s2."""
    root = tmp_path_factory.mktemp("sharded") / "project"
    (root / "profiles").mkdir(parents=True)
    shutil.copy(REPO / "gpuop.yaml", root / "gpuop.yaml")
    names = {}
    for i in range(50):
        names.setdefault(_shard_of(f"c{i}", 2), f"c{i}")
        if len(names) == 2:
            break
    assert "name: c1" in VALID.replace("\n    ", "\n")
    for name in names.values():
        (root / "profiles" / f"{name}.yaml").write_text(_profile(name))
    for args in (("-o", "dist"), ("--shard", "1/2", "-o", "s1"), ("--shard", "2/2", "-o", "s2")):
        proc = _gpuop(root, "synth", "--no-cache", *args)
        assert proc.returncode == 0, proc.stderr
    return root


@pytest.fixture
def project(sharded, tmp_path, monkeypatch) -> Path:
    root = tmp_path / "project"
    shutil.copytree(sharded, root, symlinks=True)
    monkeypatch.chdir(root)
    return root


def _merge(capsys, *shards: str) -> tuple[int, list[str]]:
    code = main(["merge", *shards, "-o", "dist"])
    return code, capsys.readouterr().err.splitlines()


def _refused(project: Path, before: dict, code: int, err: list[str], message: str) -> None:
    assert code == 2, err
    assert message in err, err
    assert err[-1].endswith("; nothing written") and not any("Traceback" in e for e in err)
    assert tree(project / "dist") == before
    assert sorted(p.name for p in project.parent.iterdir()) == ["outside", "project"] if \
        (project.parent / "outside").exists() else ["project"]


def test_the_whole_fleet_merges(project, capsys):
    before = tree(project / "dist")
    code, err = _merge(capsys, "s1", "s2")
    assert code == 0, err
    assert tree(project / "dist") == before          # the same bytes a single run writes


def test_a_forgotten_shard_is_exit_2_and_removes_nothing(project, capsys):
    before = tree(project / "dist")
    code, err = _merge(capsys, "s1")
    _refused(project, before, code, err, "merge: shard 2/2 missing; the merged output would remove their clusters "
             "from the fleet; pass every shard's folder")


def _cluster(project: Path, shard: str) -> str:
    return json.loads((project / shard / "index.json").read_text())["clusters"][0]["name"]


def test_a_shard_file_that_links_outside_is_never_copied(project, capsys):
    outside = project.parent / "outside"
    outside.mkdir()
    (outside / "secret").write_text("MUST-NOT-LEAK")
    name = _cluster(project, "s1")
    victim = project / "s1" / name / "images.txt"
    victim.unlink()
    victim.symlink_to(outside / "secret")
    before = tree(project / "dist")
    code, err = _merge(capsys, "s1", "s2")
    _refused(project, before, code, err, f"s1/{name}/images.txt: is a symlink, not a file of a gpuop output folder; "
             "links are not followed")
    assert not any(b"MUST-NOT-LEAK" in f.read_bytes() for f in (project / "dist").rglob("*") if f.is_file())


def test_a_cluster_folder_that_is_a_symlink_is_refused(project, capsys):
    name = _cluster(project, "s2")
    real = project / "elsewhere"
    (project / "s2" / name).rename(real)
    (project / "s2" / name).symlink_to(real)
    before = tree(project / "dist")
    code, err = _merge(capsys, "s1", "s2")
    _refused(project, before, code, err, f"s2/{name}: is a symlink, not a folder; links are not followed")


def test_a_shard_of_another_gpuop_is_refused(project, capsys):
    index = json.loads((project / "s2" / "index.json").read_text())
    index["gpuop"] = "0.0.1"
    (project / "s2" / "index.json").write_text(json.dumps(index))
    before = tree(project / "dist")
    code, err = _merge(capsys, "s1", "s2")
    assert any(e.startswith("s2/index.json: gpuop: compiled by gpuop 0.0.1, this is gpuop ") for e in err), err
    _refused(project, before, code, err, err[0])


def test_a_tgz_that_is_not_an_archive_is_exit_2(project, capsys):
    tgz = sorted((project / "s1" / "charts").glob("*.tgz"))[0]
    tgz.write_bytes(b"this is not a gzip'd tar")
    before = tree(project / "dist")
    code, err = _merge(capsys, "s1", "s2")
    _refused(project, before, code, err, f"s1/charts/{tgz.name}: not a chart archive (a gzip'd tar with "
             "Chart.yaml); compile the shard again")


def test_a_symlinked_index_json_in_a_shard_is_refused(project, capsys):
    outside = project.parent / "outside"
    outside.mkdir()
    (outside / "index.json").write_text((project / "s1" / "index.json").read_text())
    (project / "s1" / "index.json").unlink()
    (project / "s1" / "index.json").symlink_to(outside / "index.json")
    before = tree(project / "dist")
    code, err = _merge(capsys, "s1", "s2")
    _refused(project, before, code, err, "s1/index.json: is a symlink, not an index.json; links are not followed; "
             "not a gpuop output folder")


# ---- report: never through a symlink --------------------------------------------------------------

def test_report_never_writes_through_a_symlinked_report_folder(project, capsys):
    outside = project.parent / "outside"
    outside.mkdir()
    (project / "report").symlink_to(outside)            # the page's folder, beside the output
    before = tree(project / "dist")
    code = main(["report"])
    err = capsys.readouterr().err.splitlines()
    _refused(project, before, code, err, "report: is a symlink; the report is never written through a link "
             "(remove it, gpuop creates the folder)")
    assert list(outside.iterdir()) == []


# ---- git: no repository-configured command, only a revision of this repository ------------------------

def _git(root: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.email=t@t", "-c", "user.name=t", *args], cwd=root, check=True,
                   capture_output=True)


@pytest.mark.slow            # one compile for the diff (Node), ~10 s
def test_diff_against_a_revision_runs_no_smudge_filter(project):
    marker = project.parent / "smudged"
    _git(project, "init", "-q")
    (project / ".gitattributes").write_text("* filter=evil diff=evil\n")
    _git(project, "config", "filter.evil.smudge", f"sh -c 'echo x >> {marker}; cat'")
    _git(project, "config", "filter.evil.clean", "cat")
    _git(project, "config", "diff.evil.textconv", f"sh -c 'echo t >> {marker}; cat \"$1\"' -")
    _git(project, "add", "-A")
    _git(project, "commit", "-qm", "compiled")
    if marker.exists():
        marker.unlink()              # `git add` ran the clean filter (cat): only what gpuop runs counts
    before = tree(project / "dist")
    proc = _gpuop(project, "diff", "--against", "HEAD")
    assert proc.returncode == 0, proc.stderr
    assert not marker.exists(), "gpuop ran a filter or textconv the repository configured"
    assert tree(project / "dist") == before


@pytest.mark.parametrize("against, message", [
    ("/etc", "/etc: not a gpuop output folder (its index.json: cannot read: No such file or directory); --against "
             "takes a folder gpuop synth wrote, or a git revision"),
    (".", ".: not a gpuop output folder (its index.json: cannot read: No such file or directory); --against "
          "takes a folder gpuop synth wrote, or a git revision"),
    ("a" * 300, "--against: '" + "a" * 80 + "...' is neither a folder nor a git revision: a revision is at most "
                "255 characters, got 300"),
])
def test_against_is_a_revision_of_this_repository_or_an_output_folder_of_the_project(project, capsys, against,
                                                                                      message):
    before = tree(project / "dist")
    code = main(["diff", "--against", against])
    err = capsys.readouterr().err.splitlines()
    _refused(project, before, code, err, message)
