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


# ---- installed use: `gpuop init` in an empty folder, `npm ci`, `gpuop synth` --------------------------

SCAFFOLD = PKG / "ops" / "scaffold"


@pytest.mark.parametrize("copy, source", [("package.json", "package.json"), ("package-lock.json", "package-lock.json"),
                                          ("github-actions.yml", "examples/ci/github-actions.yml")])
def test_the_scaffold_carries_the_repository_files_unchanged(copy, source):
    """`gpuop init` writes the wheel's copies: they must be the files this repository runs and tests (copy the
    repository file over the scaffold one after changing it)."""
    assert (SCAFFOLD / copy).read_bytes() == (REPO / source).read_bytes(), f"cp {source} {SCAFFOLD / copy}"


def _npm_ci(project: Path) -> None:
    """`npm ci` from npm's cache only (the machine may be offline); skip when the cache lacks a package."""
    npm = shutil.which("npm")
    if npm is None:
        pytest.skip("npm not installed")
    proc = subprocess.run([npm, "ci", "--offline", "--no-audit", "--no-fund", "--loglevel=error"], cwd=project,
                          capture_output=True, text=True, timeout=600)
    if proc.returncode != 0 and ("ENOTCACHED" in proc.stderr or "offline" in proc.stderr):
        pytest.skip(f"npm's cache cannot install package-lock.json offline: {proc.stderr.strip()[-300:]}")
    assert proc.returncode == 0, proc.stderr


def test_installed_gpuop_init_npm_ci_synth_in_an_empty_folder(installed, tmp_path):
    """A user's path with the wheel only: `gpuop init` writes a project, `npm ci` installs Node 24 and the
    cdk8s CLI from its package-lock.json, `gpuop synth` compiles the example profile, and `npm run synth` (the cdk8s CLI) synthesizes it with nothing on stderr but its own lines."""
    project = tmp_path / "clusters"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "JSII_NODE", "CDK8S_CHECK_UPGRADE",
                                                              "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION")}
    env["PATH"] = f"{installed / 'bin'}{os.pathsep}{os.environ['PATH']}"      # an activated venv
    gpuop = str(installed / "bin" / "gpuop")
    init = subprocess.run([gpuop, "init", str(project)], env=env, capture_output=True, text=True, timeout=120)
    assert init.returncode == 0, init.stderr
    for name in ("gpuop.yaml", "profiles/example.yaml", "schemas/profile.schema.json", "package.json",
                 "package-lock.json", "cdk8s.yaml", ".gitignore", ".github/workflows/gpuop.yml"):
        assert (project / name).is_file(), name
    schema_line = (project / "profiles" / "example.yaml").read_text().splitlines()[0]
    assert schema_line == "# yaml-language-server: $schema=../schemas/profile.schema.json"
    schema = subprocess.run([str(installed / "bin" / "python"), "-c", "from gpuop.profile.models import "
                             "profile_json_schema as s; from gpuop.kube.yamlio import dump_json as d; "
                             "print(d(s()), end='')"], env=env, capture_output=True, text=True, check=True).stdout
    assert (project / "schemas" / "profile.schema.json").read_text() == schema     # the installed gpuop's
    ignored = (project / ".gitignore").read_text().splitlines()
    assert {"node_modules/", ".gpuop-cache/", ".dist.lock", "cdk8s.out/"} <= set(ignored)
    again = subprocess.run([gpuop, "init", str(project)], env=env, capture_output=True, text=True, timeout=120)
    assert again.returncode == 2 and f"{project / 'gpuop.yaml'}: already exists" in again.stderr

    _npm_ci(project)
    assert (project / "node_modules" / ".bin" / "node").is_file()
    synth = subprocess.run([gpuop, "synth", "--no-progress"], cwd=project, env=env, capture_output=True, text=True,
                           timeout=600)
    assert synth.returncode == 0, synth.stderr
    assert (project / "dist" / "example").is_dir() and (project / "dist" / "index.json").is_file()
    assert "b'" not in synth.stderr and "end-of-life" not in synth.stderr      # Node 24 from node_modules

    cdk8s = subprocess.run(["npm", "run", "--silent", "synth"], cwd=project, env=env, capture_output=True,
                           text=True, timeout=600)
    assert cdk8s.returncode == 0, cdk8s.stdout + cdk8s.stderr
    assert (project / "cdk8s.out" / "example.k8s.yaml").is_file()
    for noise in ("http error", "404", "new version", "b'"):                   # the upgrade check is off
        assert noise not in cdk8s.stdout + cdk8s.stderr, cdk8s.stdout + cdk8s.stderr


def _dev_dependencies(where: Path) -> Path:
    """The dev venv's site-packages (gpuop's dependencies, never its editable gpuop, whose .pth is not processed
    there) on the path of the venv `where`, after its own packages, as `installed` does."""
    py = where / "bin" / "python"
    site = Path(subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    (site / "_dev_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return where


def test_a_gpuop_from_a_package_index_pins_itself_and_the_workflow_installs_it(wheel, tmp_path):
    """gpuop installed by name from a package index (here a folder of wheels, `--find-links`: pip records no
    direct URL, as for PyPI) writes `gpuop==<its version>` into requirements-gpuop.txt, and the install step of
    the workflow it wrote, run by bash against the same index, installs that gpuop into a fresh venv (the
    step's pip part: `npm ci` is test_installed_gpuop_init_npm_ci_synth_in_an_empty_folder's)."""
    index = {"PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(wheel.parent), "PIP_NO_DEPS": "1"}
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH" and not k.startswith("PIP_")}
    user = tmp_path / "user"
    venv.EnvBuilder(with_pip=False).create(user)
    subprocess.run([sys.executable, "-m", "pip", "--python", str(user / "bin" / "python"), "install", "-q",
                    "--disable-pip-version-check", "gpuop"], env={**env, **index}, check=True, capture_output=True,
                   timeout=300)
    _dev_dependencies(user)                                                    # to run it
    project = tmp_path / "clusters"
    init = subprocess.run([str(user / "bin" / "gpuop"), "init", str(project)], env=env, capture_output=True,
                          text=True, timeout=120)
    assert init.returncode == 0, init.stderr
    assert "names no gpuop yet" not in init.stderr
    requirements = (project / "requirements-gpuop.txt").read_text().splitlines()
    assert requirements[-1] == "gpuop==0.1.0" and requirements[-2].endswith("from a package index.")

    from ruamel.yaml import YAML

    steps = YAML(typ="safe").load((project / ".github" / "workflows" / "gpuop.yml").read_text())["jobs"]["gate"]["steps"]
    step = next(s for s in steps if s.get("id") == "install")["run"]
    pip_part = step.split("npm ci", 1)[0]
    ci = tmp_path / "ci"                                   # the runner's python: its own pip, no gpuop
    venv.EnvBuilder(with_pip=True).create(ci)
    run = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", pip_part], cwd=project,
                         env={**env, **index, "PATH": f"{ci / 'bin'}{os.pathsep}{env['PATH']}"},
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    where = subprocess.run([str(ci / "bin" / "python"), "-c", "import gpuop; print(gpuop.__file__, gpuop.__version__)"],
                           env=env, capture_output=True, text=True, check=True).stdout.split()
    assert Path(where[0]).is_relative_to(ci) and where[1] == "0.1.0", where
