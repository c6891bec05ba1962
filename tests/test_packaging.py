"""`pip install .` (a wheel, not the editable install the rest of the suite uses) is complete.

The wheel is built once per session, exactly as `pip install .` builds it (pip, build isolation,
setuptools from pyproject's build-system), from a copy of the sources so no build/ or egg-info lands
in the checkout. It is installed with `--no-deps` into a fresh venv that sees the dev venv's
site-packages through a .pth line, for the third-party dependencies only: .pth files in that folder
are not processed there, so the dev venv's editable gpuop (`__editable__.gpuop-0.1.0.pth`) is not on
the path, and the test checks that `gpuop` is imported from the wheel's own files.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import venv
import zipfile
from email.parser import Parser
from pathlib import Path

import pytest

from conftest import REPO

pytestmark = pytest.mark.slow

SOURCES = ("pyproject.toml", "LICENSE", "README.md")
PKG = REPO / "constructs" / "gpuop"


def _copy_sources(dest: Path) -> None:
    for name in SOURCES:
        shutil.copy(REPO / name, dest / name)
    shutil.copytree(PKG, dest / "constructs" / "gpuop", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))


@pytest.fixture(scope="session")
def wheel(tmp_path_factory) -> Path:
    src = tmp_path_factory.mktemp("src")
    out = tmp_path_factory.mktemp("wheel")
    _copy_sources(src)
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--disable-pip-version-check",
                           "-q", "-w", str(out), str(src)], capture_output=True, text=True, timeout=600)
    if proc.returncode != 0 and "No matching distribution found for setuptools" in proc.stderr:
        pytest.skip("pip cannot fetch setuptools for the isolated build (no package index reachable)")
    assert proc.returncode == 0, proc.stderr
    (whl,) = out.glob("gpuop-*.whl")
    return whl


@pytest.fixture(scope="session")
def installed(wheel, tmp_path_factory) -> Path:
    """A fresh venv with only the wheel's gpuop; dependencies come from the dev venv (read-only)."""
    env_dir = tmp_path_factory.mktemp("venv") / "v"
    venv.EnvBuilder(with_pip=False).create(env_dir)
    py = env_dir / "bin" / "python"
    site = Path(subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    (site / "_dev_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run([sys.executable, "-m", "pip", "--python", str(py), "install", "--no-deps", "--no-index",
                    "--disable-pip-version-check", "-q", str(wheel)], check=True, capture_output=True, timeout=300)
    return env_dir


def source_files() -> list[Path]:
    """The package's files as git sees them (tracked, or new and not ignored): no caches of tools."""
    proc = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard", "--", str(PKG)],
                          cwd=REPO, capture_output=True, text=True)
    if proc.returncode != 0:                       # not a git checkout (an sdist): every file but caches
        return [p for p in PKG.rglob("*") if p.is_file() and "__pycache__" not in p.parts
                and not any(part.startswith(".") for part in p.relative_to(PKG).parts)]
    return [REPO / line for line in proc.stdout.splitlines() if (REPO / line).is_file()]


def test_wheel_holds_every_file_of_the_package(wheel):
    """Every non-Python file under constructs/gpuop (scripts, catalog data) is in the wheel: a file
    package-data misses would make the installed gpuop crash or compile something else."""
    wanted = {f"gpuop/{p.relative_to(PKG).as_posix()}" for p in source_files()}
    names = set(zipfile.ZipFile(wheel).namelist())
    assert sorted(wanted - names) == []
    assert any(n.startswith("gpuop/components/scripts/") for n in names)


def test_wheel_declares_the_apache_license(wheel):
    z = zipfile.ZipFile(wheel)
    meta_name = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
    meta = Parser().parsestr(z.read(meta_name).decode())
    assert meta["License-Expression"] == "Apache-2.0"
    licenses = [n for n in z.namelist() if n.endswith("/licenses/LICENSE")]
    assert len(licenses) == 1
    assert z.read(licenses[0]) == (REPO / "LICENSE").read_bytes()
    assert (REPO / "LICENSE").read_text().startswith("\n                                 Apache License\n"
                                                     "                           Version 2.0, January 2004\n")


def _tree(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_installed_wheel_compiles_the_examples_to_the_same_bytes(installed, workdir, dist, tmp_path):
    """The wheel's gpuop compiles the examples as the `dist` fixture does (the editable install, over a
    copy of the committed dist/), byte for byte."""
    py = installed / "bin" / "python"
    where = subprocess.run([str(py), "-c", "import gpuop; print(gpuop.__file__)"], capture_output=True,
                           text=True, check=True).stdout.strip()
    assert Path(where).is_relative_to(installed), where          # the wheel's gpuop, not the checkout's

    shutil.copytree(workdir / "profiles", tmp_path / "profiles")
    shutil.copy(workdir / "gpuop.yaml", tmp_path / "gpuop.yaml")
    if (REPO / "dist").is_dir():
        shutil.copytree(REPO / "dist", tmp_path / "dist")
    env = {**os.environ, "PATH": f"{REPO / 'node_modules' / '.bin'}{os.pathsep}{os.environ['PATH']}"}
    env.pop("PYTHONPATH", None)
    proc = subprocess.run([str(installed / "bin" / "gpuop"), "synth", "profiles", "-o", "dist", "--no-cache"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    editable, wheel = _tree(dist), _tree(tmp_path / "dist")
    assert sorted(editable) == sorted(wheel)
    assert [p for p in editable if editable[p] != wheel[p]] == []
