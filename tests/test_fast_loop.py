"""The fast loop is computed (conftest.is_fast): a test is fast unless it, or a fixture it uses, reaches a call
that starts a process. These check the finder on small sources, both ways."""

from __future__ import annotations

import textwrap

import conftest

SOURCE = '''
import subprocess
from conftest import run_gpuop, run_main


def spawn(cwd):
    return subprocess.run(["true"], cwd=cwd)


def through_a_helper(cwd):
    return spawn(cwd)


def in_process(cwd):
    return run_main("validate", cwd=cwd)


def result_type():
    return subprocess.CompletedProcess([], 0)


def cli(cwd):
    return run_gpuop("validate", cwd=cwd)


class TestX:
    def test_pool(self):
        from concurrent.futures import ProcessPoolExecutor
        ProcessPoolExecutor(2)
'''


def spawning(tmp_path, source: str) -> set[str]:
    f = tmp_path / "test_sample.py"
    f.write_text(textwrap.dedent(source))
    return set(conftest._spawning(str(f)))


def test_a_function_that_starts_a_process_directly_or_through_a_helper_is_found(tmp_path):
    found = spawning(tmp_path, SOURCE)
    assert {"spawn", "through_a_helper", "cli", "TestX.test_pool"} <= found
    assert not {"in_process", "result_type"} & found


def test_the_cli_in_process_is_not_a_process_and_run_gpuop_is():
    found = conftest._spawning(conftest.__file__)
    assert "run_gpuop" in found and "dist" in found and "registry" in found
    assert "run_main" not in found and "write_profile" not in found and "workdir" not in found
