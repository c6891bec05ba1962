"""`gpuop init [DIR]`: the starter project validates as written, and init never writes over a file.
(The installed path, wheel + npm ci + synth, is tests/test_packaging.py.)"""

from __future__ import annotations

import json
import os
import subprocess
from importlib import metadata
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from conftest import run_gpuop
from test_concurrency import tiny_fs  # noqa: F401 (fixture: a real tmpfs of 1200 KB)

from gpuop.ops import init

FILES = ["gpuop.yaml", "profiles/example.yaml", "schemas/profile.schema.json", "schemas/values.schema.json",
         "package.json", "package-lock.json", "cdk8s.yaml", ".gitignore", ".github/workflows/gpuop.yml",
         "requirements-gpuop.txt"]


def test_init_writes_a_project_that_validates(tmp_path):
    proc = run_gpuop("init", "clusters", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.splitlines()[0] == f"gpuop: wrote a starter project in clusters: {', '.join(FILES)}"
    project = tmp_path / "clusters"
    assert sorted(str(p.relative_to(project)) for p in project.rglob("*") if p.is_file()) == sorted(FILES)
    check = run_gpuop("validate", cwd=project)
    assert check.returncode == 0, check.stderr
    workflow = (project / ".github" / "workflows" / "gpuop.yml").read_text()
    assert "python -m pip install --disable-pip-version-check -r requirements-gpuop.txt\n" in workflow
    assert "pip install --disable-pip-version-check .\n" not in workflow
    steps = YAML(typ="safe").load(workflow)
    assert "requirements-gpuop.txt" in steps["on"]["pull_request"]["paths"]     # an upgrade runs the gate


def test_init_writes_nothing_over_a_file(tmp_path):
    (tmp_path / "profiles").mkdir()
    (tmp_path / "profiles" / "example.yaml").write_text("mine\n")
    (tmp_path / ".gitignore").write_text("mine\n")
    proc = run_gpuop("init", cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr == (".gitignore: already exists; gpuop init writes nothing over a file "
                           "(move it away, or run init in an empty folder)\n"
                           "profiles/example.yaml: already exists; gpuop init writes nothing over "
                           "a file (move it away, or run init in an empty folder)\ngpuop: 2 errors; nothing written\n")
    assert sorted(p.name for p in tmp_path.rglob("*")) == [".gitignore", "example.yaml", "profiles"]
    (tmp_path / "file").write_text("")
    assert "is a file, not a folder" in run_gpuop("init", "file", cwd=tmp_path).stderr


def _snapshot(root: Path) -> dict:
    return {str(p.relative_to(root)): (os.readlink(p) if p.is_symlink() else p.read_bytes() if p.is_file() else None)
            for p in sorted(root.rglob("*"))}


def test_init_writes_nothing_through_a_symlinked_folder_or_file(tmp_path):
    """Links under the target (planted in a repository init is run in) would carry the example profile, the
    workflow or .gitignore outside the project: every one is refused, and nothing is written anywhere."""
    outside = tmp_path / "outside"
    outside.mkdir()
    project = tmp_path / "p"
    (project / ".github").mkdir(parents=True)
    (project / "profiles").symlink_to(outside)
    (project / ".github" / "workflows").symlink_to(outside)
    (project / ".gitignore").symlink_to(outside / "ignored")               # dangling: open() would create it
    (project / "schemas").write_text("a file\n")
    before = _snapshot(tmp_path)
    proc = run_gpuop("init", "p", cwd=tmp_path)
    assert proc.returncode == 2
    link = ("is a symbolic link; gpuop init writes nothing through a link (it would land outside the project): "
            "move it away, or run init in an empty folder")
    assert proc.stderr.splitlines() == [
        f"p/.github/workflows: {link}", f"p/.gitignore: {link}", f"p/profiles: {link}",
        "p/schemas: is a file, not a folder; gpuop init writes schemas/profile.schema.json below it (move it away, "
        "or run init in an empty folder)",
        "gpuop: 4 errors; nothing written"]
    assert _snapshot(tmp_path) == before


def test_init_refuses_a_name_too_long_for_the_file_system_and_creates_nothing(tmp_path):
    long = "x" * 300
    for target in (long, f"new/{long}"):
        proc = run_gpuop("init", target, cwd=tmp_path)
        assert proc.returncode == 2, proc.stderr
        assert proc.stderr.startswith(f"{target}: cannot "), proc.stderr
        assert "Traceback" not in proc.stderr and proc.stderr.endswith("gpuop: 1 error; nothing written\n")
    assert list(tmp_path.iterdir()) == []


def test_a_full_disk_during_init_removes_what_it_wrote(tiny_fs):
    """The starter project (~250 KB) does not fit in the 100 KB left: the write that fails is exit 2, and the files
    and folders init made before it are removed, so "nothing written" is true."""
    free = os.statvfs(tiny_fs).f_bavail * os.statvfs(tiny_fs).f_frsize
    (tiny_fs / "ballast").write_bytes(b"\0" * (free - 100 * 1024))
    proc = run_gpuop("init", "clusters", cwd=tiny_fs)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr == "clusters: cannot be written: No space left on device\ngpuop: 1 error; nothing written\n"
    assert [p.name for p in tiny_fs.iterdir()] == ["ballast"]


def _install_step(project: Path) -> str:
    workflow = YAML(typ="safe").load((project / ".github" / "workflows" / "gpuop.yml").read_text())
    return next(s for s in workflow["jobs"]["gate"]["steps"] if s.get("id") == "install")["run"]


def test_the_install_step_fails_with_a_located_error_until_the_requirement_is_written(tmp_path):
    """The gpuop of this suite is installed from a local folder (editable), which CI cannot reach: init says so,
    requirements-gpuop.txt holds only comments, and the workflow's install step stops before pip with an error
    annotation on that file (the step as init wrote it, run by bash)."""
    proc = run_gpuop("init", "p", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert ("gpuop: requirements-gpuop.txt names no gpuop yet: this one (0.1.0) was installed from file://"
            in proc.stderr)
    project = tmp_path / "p"
    assert all(line.startswith("#") for line in (project / "requirements-gpuop.txt").read_text().splitlines())
    step = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", _install_step(project)],
                          cwd=project, capture_output=True, text=True, timeout=60)
    assert step.returncode == 2
    assert step.stdout.startswith("::error file=requirements-gpuop.txt::names no gpuop to install; write the "
                                  "requirement you install gpuop with"), step.stdout


def _dist(tmp_path: Path, direct_url: dict | None, version: str = "0.1.0") -> metadata.Distribution:
    info = tmp_path / f"gpuop-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: gpuop\nVersion: {version}\n")
    if direct_url is not None:
        (info / "direct_url.json").write_text(json.dumps(direct_url))
    return metadata.PathDistribution(info)


SHA = "a" * 40
HASH = "b" * 64


@pytest.mark.fast
@pytest.mark.parametrize("direct_url, requirement", [
    (None, "gpuop==0.1.0"),                                                    # from a package index
    ({"url": "https://git.example.com/platform/gpuop.git", "vcs_info": {"vcs": "git", "commit_id": SHA}},
     f"gpuop @ git+https://git.example.com/platform/gpuop.git@{SHA}"),
    ({"url": "https://files.example.com/gpuop-0.1.0-py3-none-any.whl", "archive_info": {"hashes": {"sha256": HASH}}},
     f"gpuop @ https://files.example.com/gpuop-0.1.0-py3-none-any.whl#sha256={HASH}"),
    ({"url": "file:///home/me/gpuop", "dir_info": {"editable": True}}, None),  # a local checkout: CI cannot reach it
    ({"url": "file:///tmp/gpuop-0.1.0-py3-none-any.whl", "archive_info": {}}, None),
    ({"url": "https://evil.example.com/x\n--index-url https://evil.example.com/",
      "vcs_info": {"vcs": "git", "commit_id": SHA}}, None),                   # never a second requirements line
    ({"url": "https://git.example.com/gpuop.git", "vcs_info": {"vcs": "git", "commit_id": "main; rm -rf /"}}, None),
    ({"url": 7}, None),
])
def test_the_ci_requirement_names_the_gpuop_that_ran_init_when_ci_can_install_it(tmp_path, direct_url, requirement):
    assert init.ci_requirement(_dist(tmp_path, direct_url))[0] == requirement
