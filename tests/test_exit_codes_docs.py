"""What the README, the docs and `--help` say about exit codes is what gpuop does: changes found exit 3 (`diff
--exit-code`, `diff --impact --exit-code`, `check`), never 1, which is kept for gpuop's own bugs."""

from __future__ import annotations

import re

import pytest

from conftest import REPO

CHANGES_AS_ONE = re.compile(r"1 = changes|exits? 1 when|1: changes|exit 1 (?:on|for|if) (?:a )?change")


@pytest.mark.fast
def test_no_document_says_changes_exit_1():
    said = [(p.relative_to(REPO).as_posix(), m.group(0))
            for p in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
            for m in CHANGES_AS_ONE.finditer(p.read_text())]
    assert said == []
    assert "with `--exit-code` 0 = no change, 3 = changes; 2 = bad input" in (REPO / "README.md").read_text()


@pytest.mark.fast
def test_the_help_of_diff_and_check_says_exit_3():
    from gpuop.cli.main import CHANGES_FOUND, _parser

    assert CHANGES_FOUND == 3
    sub = next(a for a in _parser()._actions if a.dest == "command").choices
    assert "exit 3 when something would change" in sub["diff"].format_help()
    assert "exit 3 when the output is stale" in " ".join(_parser().format_help().split())   # `gpuop --help`
