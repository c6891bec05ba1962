"""`gpuop init [DIR]`: the starter project validates as written, and init never writes over a file.
(The installed path, wheel + npm ci + synth, is tests/test_packaging.py.)"""

from __future__ import annotations

from conftest import run_gpuop

FILES = ["gpuop.yaml", "profiles/example.yaml", "schemas/profile.schema.json", "schemas/values.schema.json",
         "package.json", "package-lock.json", "cdk8s.yaml", ".gitignore", ".github/workflows/gpuop.yml"]


def test_init_writes_a_project_that_validates(tmp_path):
    proc = run_gpuop("init", "clusters", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.splitlines()[0] == f"gpuop: wrote a starter project in clusters: {', '.join(FILES)}"
    project = tmp_path / "clusters"
    assert sorted(str(p.relative_to(project)) for p in project.rglob("*") if p.is_file()) == sorted(FILES)
    check = run_gpuop("validate", cwd=project)
    assert check.returncode == 0, check.stderr
    workflow = (project / ".github" / "workflows" / "gpuop.yml").read_text()
    assert 'python -m pip install --disable-pip-version-check "gpuop==' in workflow
    assert "pip install --disable-pip-version-check .\n" not in workflow


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
