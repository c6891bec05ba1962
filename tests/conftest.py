"""Shared fixtures: the repository, the upstream reference data (REFS, CRDS, ASSETS), the checking tools
(TOOLS, tool()), and one compile of the bundled profiles per test session (in a temporary folder, never the
committed dist/).

Where the reference data is: `GPUOP_REFS` (a path; relative paths are relative to the repository), else
`../shared/refs` beside the repository, else `.refs/` (what `make refs` fetches, pinned by refs.lock). A run
that collects a test module using REFS, CRDS or ASSETS with no complete reference set stops at once with one
message naming `make refs`. The checking tools (kubeval, NVIDIA's operator renderer) likewise: `GPUOP_TOOLS`,
else `../shared/tools`; a test asking for a missing tool is skipped, or fails when GPUOP_TOOLS was set."""

from __future__ import annotations

import json
import os
import shutil
import time
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")
os.environ.setdefault("CDK8S_CHECK_UPGRADE", "false")      # the cdk8s CLI's upgrade check asks the npm registry

REPO = Path(__file__).resolve().parents[1]
REFS_LOCK = REPO / "refs.lock"
# Names a test module uses to reach the reference data; importing one (anywhere in the file) makes the run
# need the reference set (pytest_configure below).
REFS_NAMES = ("REFS", "CRDS", "ASSETS")


def _setting(var: str, *defaults: Path) -> tuple[Path, bool]:
    """The folder named by `var` (relative to the repository), else the first default that exists, else the
    first default; and whether it came from the environment."""
    value = os.environ.get(var, "").strip()
    if value:
        p = Path(value).expanduser()
        return (p if p.is_absolute() else REPO / p).resolve(), True
    return next((d for d in defaults if d.is_dir()), defaults[0]), False


REFS, REFS_FROM_ENV = _setting("GPUOP_REFS", REPO.parent / "shared" / "refs", REPO / ".refs")
CRDS = REFS / "crds"
# NVIDIA's operator code of the older versions, each built at its tag by tools/nvidia-operator/build_release.py into
# BUILDS/<version>/tool/, with the tag's chart copied into BUILDS/<version>/chart; the build output stays out of the
# repository
BUILDS_ENV = "GPUOP_NVIDIA_OPERATOR_BUILDS"
BUILDS = Path(os.environ.get(BUILDS_ENV) or Path.home() / ".cache" / "gpuop" / "nvidia-operator")


def release_chart(version: str) -> Path | None:
    """NVIDIA's chart of an older operator version: the reference copy REFS/gpu-operator-releases/<version>/chart
    (optional in refs.lock: `make refs`), else the copy build_release.py took from the tag's checkout
    (BUILDS/<version>/chart) when it holds exactly the files refs.lock pins for that chart, each with its checksum;
    None when neither is there."""
    ref = REFS / "gpu-operator-releases" / version / "chart"
    if (ref / "Chart.yaml").is_file():
        return ref
    import hashlib

    prefix = f"gpu-operator-releases/{version}/chart/"
    pinned = {e["path"][len(prefix):]: e["sha256"] for e in json.loads(REFS_LOCK.read_text())["files"]
              if e["path"].startswith(prefix)}
    built = BUILDS / version / "chart"
    have = {str(f.relative_to(built)) for f in built.rglob("*") if f.is_file()} if built.is_dir() else set()
    if not pinned or have != set(pinned) or any(
            hashlib.sha256((built / name).read_bytes()).hexdigest() != digest for name, digest in pinned.items()):
        return None
    return built


ASSETS = REFS / "gpu-operator" / "assets"
TOOLS, TOOLS_FROM_ENV = _setting("GPUOP_TOOLS", REPO.parent / "shared" / "tools")
# The checking tools by name (see the README beside each): Kubernetes' API-server validation and NVIDIA's
# GPU Operator controller code as a renderer.
TOOL_PATHS = {"kubeval": Path("kubeval") / "kubeval", "nvidia-operator": Path("nvidia-operator") / "render.sh"}


def tool(name: str) -> Path:
    """The executable of a checking tool; skips the test when it is missing (fails when GPUOP_TOOLS names the
    folder, since then the tool was expected)."""
    exe = TOOLS / TOOL_PATHS[name]
    if os.access(exe, os.X_OK):
        return exe
    msg = (f"{name} not found at {exe}: set GPUOP_TOOLS to the folder holding kubeval/ and nvidia-operator/ "
           f"(default ../shared/tools beside the repository)")
    if TOOLS_FROM_ENV:
        pytest.fail(msg, pytrace=False)
    pytest.skip(msg)


def refs_problems(folder: Path = REFS, limit: int = 5) -> list[str]:
    """What is missing from a reference folder, by refs.lock (presence only; tests/test_refs.py checks the
    checksums)."""
    if not folder.is_dir():
        return [f"{folder} does not exist"]
    # optional entries (the older GPU Operator releases' charts and bundles, tests/test_import_releases.py) are
    # fetched by `make refs` too, but a folder without them is complete: the tests that read them skip
    files = [e for e in json.loads(REFS_LOCK.read_text())["files"] if not e.get("optional")]
    missing = [e["path"] for e in files if not (folder / e["path"]).is_file()]
    out = [f"{folder / m} is missing" for m in missing[:limit]]
    if len(missing) > limit:
        out.append(f"... and {len(missing) - limit} more of the {len(files)} files refs.lock lists")
    return out


def _selected_test_files(config) -> list[Path]:
    """The test files a run collects from, from its arguments (node ids, files, folders) or testpaths."""
    args = [a.split("::")[0] for a in config.args] or [str(REPO / t) for t in config.getini("testpaths")]
    files: list[Path] = []
    for a in args:
        p = Path(a) if Path(a).is_absolute() else Path(config.invocation_params.dir) / a
        if p.is_dir():
            files += sorted(p.rglob("test_*.py"))
        elif p.suffix == ".py" and p.is_file():
            files.append(p)
    return files


def _uses_refs(path: Path) -> bool:
    import re

    text = path.read_text(errors="replace")
    return any(set(REFS_NAMES) & set(re.findall(r"\w+", m))
               for m in re.findall(r"from conftest import ([^\n]+)", text))


def pytest_configure(config):
    """One clear stop when the reference data is missing, before any test runs (and before xdist starts its
    workers): never a failure in every module that reads it."""
    if hasattr(config, "workerinput"):           # an xdist worker: the controller already checked
        return
    problems = refs_problems()
    if not problems:
        return
    needing = [f for f in _selected_test_files(config) if _uses_refs(f)]
    if not needing:
        return
    where = ("GPUOP_REFS" if REFS_FROM_ENV else "GPUOP_REFS is unset, so ../shared/refs or .refs/")
    names = ", ".join(f.name for f in needing[:3]) + (f" and {len(needing) - 3} more" if len(needing) > 3 else "")
    pytest.exit("the upstream reference data the tests compare against is not there "
                f"({where}: {REFS}):\n  " + "\n  ".join(problems) +
                f"\n{names} need it. Run `make refs` to fetch it into .refs/ (pinned by refs.lock, checksums "
                "verified), or set GPUOP_REFS to a copy.", returncode=pytest.ExitCode.USAGE_ERROR)


# ---- one profile builder for the tests ------------------------------------------------------------------

PROFILE_HEAD = "apiVersion: gpuop/v1alpha1\nkind: ClusterProfile\nmetadata: {name: c1}\nspec:\n"


def profile_text(spec: str, head: str = PROFILE_HEAD) -> str:
    """A whole profile from its spec (YAML lines under `spec:`, any common indentation removed): the spec's
    first line is line 5 of the file, so tests can name the line of each message."""
    return head + textwrap.indent(textwrap.dedent(spec), "  ")


def write_profile(folder: Path, spec: str, name: str = "c1.yaml", head: str = PROFILE_HEAD) -> Path:
    """profile_text(spec) written to folder/name (parents made); the path."""
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(profile_text(spec, head))
    return path


def spec_issues(folder: Path, spec: str) -> list:
    """A profile with this spec written to folder/c1.yaml and validated (the real validate stage): its errors when
    it is refused, else its warnings."""
    from gpuop import catalog
    from gpuop.errors import UserError
    from gpuop.profile.load import load_profile
    from gpuop.validate.runner import validate

    write_profile(folder, spec)
    try:
        return list(validate(load_profile(folder / "c1.yaml"), catalog.load()).warnings)
    except UserError as exc:
        return list(exc.issues)


def run_gpuop(*args: str, cwd: Path, check: bool = False) -> subprocess.CompletedProcess:
    env = {**os.environ, "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20"}
    proc = subprocess.run([sys.executable, "-m", "gpuop.cli", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)
    if check and proc.returncode != 0:
        raise AssertionError(f"gpuop {' '.join(args)} exited {proc.returncode}:\n{proc.stderr}")
    return proc


def run_main(*args: str, cwd: Path, check: bool = False) -> subprocess.CompletedProcess:
    """`gpuop ARGS` in this process, from `cwd`: cli.main(argv), the CLI's one error boundary, with what it
    prints and the exit code it returns (an argparse refusal's too), as run_gpuop gives them. For commands that
    start no worker process (validate, schema, mig, ...): their messages and exit codes, without Python's
    start and gpuop's imports each time."""
    import contextlib
    import io

    from gpuop.cli.main import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.chdir(cwd), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(list(args))
        except SystemExit as exc:          # argparse: usage errors exit 2, --help 0
            code = exc.code if isinstance(exc.code, int) else 1
    if check and code != 0:
        raise AssertionError(f"gpuop {' '.join(args)} exited {code}:\n{err.getvalue()}")
    return subprocess.CompletedProcess(["gpuop", *args], code, out.getvalue(), err.getvalue())


@pytest.fixture(scope="session")
def workdir(tmp_path_factory) -> Path:
    """A copy of the project inputs (profiles/, gpuop.yaml) to compile from."""
    w = tmp_path_factory.mktemp("work")
    shutil.copytree(REPO / "profiles", w / "profiles")
    shutil.copy(REPO / "gpuop.yaml", w / "gpuop.yaml")
    return w


@pytest.fixture(scope="session")
def dist(workdir) -> Path:
    """The bundled profiles compiled over a copy of the committed dist/ (as `make run` does, so the
    committed version lock applies)."""
    if (REPO / "dist").is_dir():
        shutil.copytree(REPO / "dist", workdir / "dist")
    run_gpuop("synth", "profiles", "-o", "dist", cwd=workdir, check=True)
    return workdir / "dist"


@pytest.fixture(scope="session")
def index(dist) -> dict:
    return json.loads((dist / "index.json").read_text())


def load_dir(folder: Path) -> list[dict]:
    """Every YAML object in a folder, kustomization.yaml excepted."""
    from gpuop.kube.yamlio import load_all

    objs = []
    for f in sorted(folder.glob("*.yaml")):
        if f.name != "kustomization.yaml":
            objs += load_all(f.read_text())
    return objs


def key(obj: dict) -> tuple:
    return (obj["kind"], obj["metadata"].get("namespace", ""), obj["metadata"]["name"])


def by_key(objs: list[dict]) -> dict:
    out = {key(o): o for o in objs}
    assert len(out) == len(objs), "duplicate objects"
    return out


def stack_clusters(index: dict) -> list[dict]:
    """The index entries gpuop delivers its own stack for (operator-mode clusters deliver NVIDIA's operator
    instead: docs/operator.md, tests/test_operator.py)."""
    return [c for c in index["clusters"] if c.get("delivery") != "operator"]


# ---- a loopback OCI registry (Debian's docker-registry), for publish and image-digest tests ------------

REGISTRY = shutil.which("docker-registry") or shutil.which("registry")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def registry(tmp_path_factory):
    """Debian's docker-registry on a free loopback port, for one test module; yields HOST:PORT."""
    if REGISTRY is None:
        pytest.skip("docker-registry not installed (.ci/run installs Debian's docker-registry)")
    root = tmp_path_factory.mktemp("registry")
    port = free_port()
    (root / "config.yml").write_text(f"version: 0.1\nstorage:\n  filesystem:\n    rootdirectory: {root / 'data'}\n"
                                     f"http:\n  addr: 127.0.0.1:{port}\n")
    proc = subprocess.Popen([REGISTRY, "serve", str(root / "config.yml")], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    deadline = time.time() + 20
    while time.time() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            break
        except OSError:
            time.sleep(0.1)
    else:
        proc.kill()
        pytest.fail("docker-registry did not start")
    yield f"127.0.0.1:{port}"
    proc.terminate()
    proc.wait(timeout=10)



# ---- the fast loop, computed: `make test-fast` (pytest -m fast) ----------------------------------------
#
# A test is `fast` when it is not marked slow and nothing it runs starts a process: neither the test function
# nor any fixture it uses (pytest's closure: fixtures of fixtures too) reaches, through the functions of its
# own module and of this conftest, a call that starts one (the CLI as `python -m gpuop.cli`, subprocess, a
# server, a process pool). What runs in-process (the rules, the plan, the components from their props,
# `main(argv)` itself) is fast by this rule; nobody marks a test fast by hand, so the loop cannot drift.

import ast as _ast
import inspect as _inspect
from functools import lru_cache as _lru_cache

# calls that start a process: subprocess.run / .call, Popen, os.fork, a process pool, the CLI as a process
SPAWNS = frozenset({"Popen", "fork", "forkpty", "system", "execv", "execvp", "posix_spawn", "ProcessPoolExecutor",
                    "Pool", "run_gpuop", "check_output", "check_call", "subprocess.run", "subprocess.call"})


def _called_names(node) -> set[str]:
    """What a function refers to: names (a helper it calls or hands on), attributes, and `module.attr` pairs
    (so `subprocess.run` is seen as such while `subprocess.CompletedProcess` starts nothing)."""
    out, local = set(), set()
    for n in _ast.walk(node):
        if isinstance(n, _ast.Name):
            (local if isinstance(n.ctx, _ast.Store) else out).add(n.id)
        elif isinstance(n, _ast.arg):
            local.add(n.arg)                     # a parameter named like a helper (`index`) is not the helper
        elif isinstance(n, _ast.Attribute):
            out.add(n.attr)
            if isinstance(n.value, _ast.Name):
                out.add(f"{n.value.id}.{n.attr}")
    return out - local


@_lru_cache(maxsize=None)
def _spawning(path: str) -> frozenset[str]:
    """The functions (module-level, fixtures included, and methods as Class.name too) of a source file that
    start a process, directly or through another such function of the file, of this conftest or of a module
    beside it that the file imports the function from."""
    try:
        tree = _ast.parse(Path(path).read_text())
    except (OSError, SyntaxError):
        return frozenset()
    funcs: dict[str, set[str]] = {}
    for node in tree.body:
        if isinstance(node, (_ast.FunctionDef, _ast.AsyncFunctionDef)):
            funcs[node.name] = _called_names(node)
        elif isinstance(node, _ast.ClassDef):
            for sub in node.body:
                if isinstance(sub, (_ast.FunctionDef, _ast.AsyncFunctionDef)):
                    funcs[f"{node.name}.{sub.name}"] = _called_names(sub)
                    funcs.setdefault(sub.name, set()).update(_called_names(sub))
    # helpers imported from this conftest or a module beside the tests (operator_differential.py, ...); a
    # conftest name that is not imported is a local variable (`index`), and fixtures are checked by is_fast
    outside = set(SPAWNS)
    for node in tree.body:
        if isinstance(node, _ast.ImportFrom) and node.module and not node.level:
            sibling = Path(__file__) if node.module == "conftest" else Path(path).parent / f"{node.module}.py"
            if sibling.is_file() and str(sibling) != path:
                outside |= {a.asname or a.name for a in node.names if a.name in _spawning(str(sibling))}
    bad = {name for name, called in funcs.items() if called & outside}
    while True:
        more = {name for name, called in funcs.items() if name not in bad and called & bad}
        if not more:
            return frozenset(bad)
        bad |= more


def _starts_a_process(func) -> bool:
    try:
        path = _inspect.getsourcefile(func)
    except TypeError:
        return False
    return path is not None and func.__qualname__.replace(".<locals>", "") in _spawning(path)


def is_fast(item) -> bool:
    if item.get_closest_marker("slow") is not None or not hasattr(item, "function"):
        return False
    if _starts_a_process(item.function):
        return False
    info = getattr(item, "_fixtureinfo", None)
    for name in item.fixturenames:
        for fixturedef in (info.name2fixturedefs.get(name, ()) if info else ()):
            if _starts_a_process(fixturedef.func):
                return False
    return True


def pytest_collection_modifyitems(config, items):
    for item in items:
        if is_fast(item):
            item.add_marker(pytest.mark.fast)
