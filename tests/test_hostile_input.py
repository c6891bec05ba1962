"""Hostile input: each kind (crashes, denial of service, reads outside the project, secrets in errors,
settings injection, unlocated errors, ...) has a case file in tests/hostile/ (the hostile profiles,
symlinks, FIFOs and settings of that kind, and the exact stderr),
run through the real command line against a project that already has a good dist/.

Each case asserts the contract for bad input: exit 2, exactly the expected stderr (every problem located,
no traceback, no content of another file), dist/ byte for byte as before, and an end in bounded time
(the subprocess timeout turns a hang, such as a FIFO being read, into a failure; no timing assertion).

Case file keys: `bullet` (the hostile input, in words), `files` (path relative to the project -> text, or
{text, encoding}, or {generate: NAME, n: N} for inputs too big to keep as text), `symlinks` (path ->
target as written), `fifos` (paths), `settings` (gpuop.yaml text, else the repository's), `stderr`.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from test_cli_errors import ENV, REPO, VALID, refused, tree

CASES = sorted((Path(__file__).parent / "hostile").glob("*.yaml"))
HEAD = "apiVersion: gpuop/v1alpha1\nkind: ClusterProfile\n"
TIMEOUT = 90   # a guard against hangs (FIFOs, /dev/zero, runaway parsing), not a timing assertion


def _pools(n: int) -> str:
    return (HEAD + "metadata: {name: pools-%d}\nspec:\n  platform: {type: kubernetes, version: \"1.33\"}\n"
            "  os: ubuntu24.04\n  nodePools:\n" % n + "".join(f"    - {{name: p{i}, gpu: L40S}}\n" for i in range(n)))


GENERATORS = {
    "pools": _pools,
    "flat_list": lambda n: HEAD + "metadata: {name: flat-list}\nspec:\n  nodePools: [" + ", ".join(["a"] * n) + "]\n",
    "deep_flow": lambda n: HEAD + "metadata: {name: deep-flow}\nspec: " + "[" * n + "]" * n + "\n",
    "deep_block": lambda n: HEAD + "metadata: {name: deep-block}\nspec:\n  " + "- " * n + "x\n",
    "extends_long": lambda n: "extends: " + "a" * n + ".yaml\nmetadata: {name: extends-long}\n",
}


@pytest.fixture(scope="module")
def good_dist(tmp_path_factory) -> Path:
    """dist/ of one real, successful compile: what every hostile run must leave untouched."""
    root = tmp_path_factory.mktemp("good") / "project"
    (root / "profiles").mkdir(parents=True)
    shutil.copy(REPO / "gpuop.yaml", root / "gpuop.yaml")
    (root / "profiles" / "c1.yaml").write_text(VALID.replace("\n    ", "\n").lstrip())
    proc = subprocess.run([sys.executable, "-m", "gpuop.cli", "synth", "--no-cache", "-o", "dist"], cwd=root,
                          env=ENV, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    return root / "dist"


def _set_up(case: dict, root: Path, good_dist: Path) -> None:
    (root / "profiles").mkdir(parents=True)
    if "settings" in case:
        (root / "gpuop.yaml").write_text(case["settings"])
    else:
        shutil.copy(REPO / "gpuop.yaml", root / "gpuop.yaml")
    shutil.copytree(good_dist, root / "dist", symlinks=True)
    for rel, spec in (case.get("files") or {}).items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(spec, str):
            path.write_bytes(spec.encode("utf-8", "surrogatepass"))
        elif "generate" in spec:
            path.write_text(GENERATORS[spec["generate"]](spec["n"]))
        else:
            path.write_bytes(spec["text"].encode(spec["encoding"]))
    for rel, target in (case.get("symlinks") or {}).items():
        os.symlink(target, root / rel)
    for rel in case.get("fifos") or []:
        os.mkfifo(root / rel)


def _run(root: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gpuop.cli", *args], cwd=root, env=ENV, capture_output=True,
                          text=True, timeout=TIMEOUT)


@pytest.mark.parametrize("case_file", CASES, ids=[c.stem for c in CASES])
def test_hostile_input_exits_2_located_and_keeps_dist(case_file, tmp_path, good_dist):
    case = yaml.safe_load(case_file.read_text())
    root = tmp_path / "project"
    _set_up(case, root, good_dist)
    before = tree(root / "dist")
    synth = _run(root, "synth", "-o", "dist")
    refused(synth, case["stderr"])
    assert tree(root / "dist") == before, "a refused compile leaves dist/ byte for byte as it was"
    for leak in ("MUST-NOT-LEAK", "root:x:0"):   # content of files outside the profiles never reaches a message
        assert leak not in synth.stderr
    refused(_run(root, "validate"), case["stderr"])


def test_every_case_file_quotes_its_bullet_and_expects_errors():
    assert len(CASES) == 9
    for case_file in CASES:
        case = yaml.safe_load(case_file.read_text())
        assert case["bullet"] and case["stderr"].endswith("nothing written\n"), case_file.name
