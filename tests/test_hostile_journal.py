"""A planted journal (`dist/.gpuop-journal` is committed with dist/, so a pull request can write one) is data
gpuop checks before it moves anything (docs/output-transaction.md, "The journal is untrusted"): every attack
below is exit 2, located at the journal, with no traceback, the folders outside dist/ and dist/ itself exactly
as they were. The property test on arbitrary journals is tests/test_journal_grammar.py."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import run_gpuop
from test_fleet import make_fleet

from gpuop.pipeline import journal

STAGE = ".dist.new-abcd1234"           # a name of the form gpuop gives its staging folder
RECOVERY = "nothing was moved"


def snapshot(root: Path) -> dict[str, tuple]:
    """Every entry under `root` (links not followed): its kind, and a file's content or a link's target."""
    found = {}
    for dirpath, dirs, files in os.walk(root):
        for name in dirs + files:
            p = Path(dirpath) / name
            rel = str(p.relative_to(root))
            if p.is_symlink():
                found[rel] = ("link", os.readlink(p))
            elif p.is_dir():
                found[rel] = ("dir",)
            else:
                found[rel] = ("file", hashlib.sha256(p.read_bytes()).hexdigest())
    return found


@pytest.fixture(scope="module")
def compiled(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("hostile-journal")
    w = make_fleet(root / "w", n=3)
    run_gpuop("synth", "-o", "dist", "--cache", "cache", "--no-progress", cwd=w, check=True)
    return root


@pytest.fixture
def root(compiled, tmp_path) -> Path:
    """A copy of the compiled project (w/) and, beside it, what an attacker wants to reach (outside/)."""
    shutil.copytree(compiled / "w", tmp_path / "w", symlinks=True)
    (tmp_path / "outside" / "d").mkdir(parents=True)
    (tmp_path / "outside" / "secret.txt").write_text("not gpuop's\n")
    (tmp_path / "outside" / "d" / "c00-9.9.9.tgz").write_text("an archive from elsewhere\n")
    return tmp_path


def plant(w: Path, doc) -> None:
    (w / "dist" / ".gpuop-journal").write_text(doc if isinstance(doc, str) else json.dumps(doc))


def journal_doc(ops: list, stage: str = STAGE, inode: int = 1) -> dict:
    return {"kind": "Journal", "stage": stage, "stageInode": inode, "ops": ops}


def refused(root: Path, *cmds: tuple, expect: str) -> None:
    """Each command exits 2 with the located message `expect`, and nothing under `root` changed."""
    before = snapshot(root)
    for cmd in cmds:
        proc = run_gpuop(*cmd, cwd=root / "w")
        assert proc.returncode == 2, (cmd, proc.stderr)
        assert "Traceback" not in proc.stderr and "please report" not in proc.stderr, proc.stderr
        first = proc.stderr.splitlines()[0]
        assert first.startswith(f"dist/.gpuop-journal: {expect}"), (cmd, first)
        assert RECOVERY in first and "remove dist/.gpuop-journal" in first, first
        assert snapshot(root) == before, f"{cmd} changed files"


SYNTH = ("synth", "-o", "dist", "--cache", "cache", "--no-progress")
COMMANDS = (SYNTH, ("diff", "--settings", "gpuop.yaml"), ("report", "--settings", "gpuop.yaml"),
            ("validate", "dist"))

pytestmark = pytest.mark.slow           # each test compiles nothing but runs gpuop 1-4 times (1-2 s each)


def test_an_absolute_op_path_is_refused_and_nothing_moves(root):
    (root / "w" / STAGE).mkdir()
    plant(root / "w", journal_doc([["rename", str(root / "outside" / "secret.txt"), 0]]))
    refused(root, *COMMANDS, expect="ops[0]: Invalid value: rename names a cluster folder name")


@pytest.mark.parametrize("op", [["remove", "../profiles", 0], ["rename", "../gpuop.yaml", 0],
                                ["remove", "charts/../../profiles", 0], ["exchange", "..", 7]])
def test_a_dotdot_op_path_is_refused_and_nothing_moves(root, op):
    (root / "w" / STAGE).mkdir()
    plant(root / "w", journal_doc([["rename", "index.json", 0], op]))
    refused(root, SYNTH, ("diff", "--settings", "gpuop.yaml"), expect="ops[1]: Invalid value:")


def test_a_symlinked_staging_folder_is_refused_even_with_its_inode(root):
    (root / "w" / STAGE).symlink_to(root / "outside")
    inode = os.stat(root / "outside").st_ino        # the strongest attacker: the recorded inode matches
    plant(root / "w", journal_doc([["rename", "index.json", 0], ["remove", "c00", 0]], inode=inode))
    refused(root, *COMMANDS[:3], expect=f"stage: {STAGE} is a symlink, not gpuop's staging folder")


@pytest.mark.parametrize("stage", ["../outside", "/etc", ".dist.new-abcd1234/../../outside", "outside",
                                   ".other.new-abcd1234", ".dist.new-ABCD1234", ".dist.new-abcd1234\x00"])
def test_a_staging_folder_not_beside_the_output_or_not_named_by_gpuop_is_refused(root, stage):
    plant(root / "w", journal_doc([["remove", "c00", 0]], stage=stage))
    refused(root, SYNTH, ("validate", "dist"), expect="stage: Invalid value: expected the name gpuop gives")


def test_a_staging_folder_the_run_did_not_make_is_refused(root):
    (root / "w" / STAGE / "c00").mkdir(parents=True)     # committed beside dist/: another inode than recorded
    plant(root / "w", journal_doc([["remove", "c00", 0]], inode=os.stat(root / "w" / "profiles").st_ino))
    refused(root, SYNTH, expect=f"stageInode: {STAGE} is not the staging folder this journal's run made")


def test_an_op_moving_an_outside_file_in_through_a_link_is_refused(root):
    stage = root / "w" / STAGE
    stage.mkdir()
    (stage / "charts").symlink_to(root / "outside" / "d")            # stage/charts/c00-9.9.9.tgz is outside
    (stage / "c09").symlink_to(root / "outside")                     # a new "cluster" that is the outside folder
    inode = os.stat(stage).st_ino
    plant(root / "w", journal_doc([["rename", "charts/c00-9.9.9.tgz", 0]], inode=inode))
    refused(root, SYNTH, expect=f"{STAGE}/charts is not a folder (a symlink); links are not followed")
    plant(root / "w", journal_doc([["rename", "c09", 0]], inode=inode))
    refused(root, SYNTH, expect="ops[0]: rename c09: the staging folder's entry is a symlink, expected a folder")


def test_an_op_through_a_linked_charts_folder_of_the_output_is_refused(root):
    stage = root / "w" / STAGE
    stage.mkdir()
    shutil.rmtree(root / "w" / "dist" / "charts")
    (root / "w" / "dist" / "charts").symlink_to(root / "outside" / "d")     # removing charts/x would take it
    plant(root / "w", journal_doc([["remove", "charts/c00-9.9.9.tgz", 0]], inode=os.stat(stage).st_ino))
    refused(root, SYNTH, expect="dist/charts is not a folder (a symlink); links are not followed")


@pytest.mark.parametrize("text, expect", [
    ("{\"kind\": \"Journal\", ", "not valid JSON"),
    ("\xff", "cannot read: byte"),
    ("[" * 5000 + "]" * 5000, ""),
])
def test_a_malformed_journal_is_refused(root, text, expect):
    (root / "w" / "dist" / ".gpuop-journal").write_bytes(text.encode("latin-1") if text == "\xff" else text.encode())
    before = snapshot(root)
    for cmd in (SYNTH, ("validate", "dist")):
        proc = run_gpuop(*cmd, cwd=root / "w")
        assert proc.returncode == 2, proc.stderr
        assert proc.stderr.startswith("dist/.gpuop-journal:") and expect in proc.stderr.splitlines()[0]
        assert RECOVERY in proc.stderr and "Traceback" not in proc.stderr
    assert snapshot(root) == before


@pytest.mark.parametrize("doc, expect", [
    ([], "expected an object of kind Journal"),
    ({"kind": "Journal", "stage": STAGE, "ops": []}, "stageInode: Required value"),
    ({**journal_doc([]), "exec": "rm -rf /"}, "exec: unknown field"),
    ({**journal_doc([]), "kind": "Output"}, "kind: Unsupported value"),
    (journal_doc([], inode="12"), "stageInode: Invalid value"),
    (journal_doc([], inode=True), "stageInode: Invalid value"),
    (journal_doc({"rename": "c00"}), "ops: Invalid value"),
    (journal_doc([["rename", "c00"]]), "ops[0]: Invalid value: expected [op, path, inode]"),
    (journal_doc([["copy", "c00", 0]]), "ops[0]: Unsupported value: expected one of rename, exchange, remove"),
    (journal_doc([["rename", 7, 0]]), "ops[0]: Invalid value: the path must be a string"),
    (journal_doc([["exchange", "c00", "12"]]), "ops[0]: Invalid value: an exchange records"),
    (journal_doc([["rename", "c00", 12]]), "ops[0]: Invalid value: a rename records inode 0"),
    (journal_doc([["exchange", "index.json", 12]]), "ops[0]: Invalid value: exchange names a cluster folder"),
    (journal_doc([["remove", ".gpuop-journal", 0]]), "ops[0]: Invalid value: remove names"),
    (journal_doc([["rename", "c00/manifests", 0]]), "ops[0]: Invalid value: rename names"),
])
def test_a_journal_of_the_wrong_shape_is_refused(root, doc, expect):
    plant(root / "w", doc)
    refused(root, SYNTH, ("validate", "dist"), expect=expect)


def test_a_huge_journal_is_refused_without_reading_it(root):
    with open(root / "w" / "dist" / ".gpuop-journal", "wb") as f:
        f.truncate(journal.MAX_JOURNAL_BYTES + 1)                    # sparse: no disk
    refused(root, SYNTH, expect=f"is {journal.MAX_JOURNAL_BYTES + 1} bytes; a journal may hold at most")


def test_a_journal_that_is_a_link_or_a_folder_is_refused(root):
    (root / "w" / "dist" / ".gpuop-journal").symlink_to(root / "outside" / "secret.txt")
    refused(root, SYNTH, ("validate", "dist"), expect="is a symlink, not a journal; links are not followed")
    (root / "w" / "dist" / ".gpuop-journal").unlink()
    (root / "w" / "dist" / ".gpuop-journal").mkdir()
    refused(root, SYNTH, expect="is a folder, not a journal")


def test_a_committed_journal_whose_staging_folder_is_not_here_is_dropped_and_synth_goes_on(root):
    """The one journal of gpuop's form a checkout can hold: its staging folder was on the machine of the stopped
    run. What it did is kept (nothing to move here) and the compile checks every folder by content."""
    plant(root / "w", journal_doc([["rename", "index.json", 0], ["remove", "c00", 0]]))
    validate = run_gpuop("validate", "dist", cwd=root / "w")
    assert validate.returncode == 2 and "holds an unfinished commit" in validate.stderr
    before = snapshot(root)
    run_gpuop(*SYNTH, cwd=root / "w", check=True)
    del before["w/dist/.gpuop-journal"]
    after = snapshot(root)      # the build cache records the run (its no-op record): not part of the question
    assert {k: v for k, v in after.items() if "/cache/" not in k} == {k: v for k, v in before.items() if "/cache/" not in k}


def test_the_review_gate_refuses_a_committed_journal(root):
    """A journal in git is never a legitimate state: `check --against` refuses it before compiling, a journal
    of gpuop's form and a hostile one alike, and says to remove it from git."""
    w = root / "w"
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t", "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-qm", "fleet"], ["checkout", "-qb", "pr"]):
        subprocess.run(["git", *args], cwd=w, env=env, check=True, capture_output=True)
    for doc, expect in ((journal_doc([["remove", "c00", 0]]), "dist holds an unfinished commit"),
                        (journal_doc([["remove", "../profiles", 0]]), "ops[0]: Invalid value: remove names")):
        plant(w, doc)
        subprocess.run(["git", "add", "-f", "dist/.gpuop-journal"], cwd=w, env=env, check=True)
        subprocess.run(["git", "commit", "-qm", "journal"], cwd=w, env=env, check=True)
        before = snapshot(root)
        proc = run_gpuop("check", "--against", "main", cwd=w)
        assert proc.returncode == 2, proc.stderr
        first = proc.stderr.splitlines()[0]
        assert first.startswith(f"dist/.gpuop-journal: {expect}") and "git rm" in first, first
        assert snapshot(root) == before


def test_a_journal_written_through_a_planted_temporary_name_never_leaves_the_output(root):
    """The run writes its journal in its own staging folder and renames it in: a `.gpuop-journal.tmp` link
    committed in dist/ is a stray the commit removes, never a way to write elsewhere."""
    (root / "w" / "dist" / ".gpuop-journal.tmp").symlink_to(root / "outside" / "secret.txt")
    text = (root / "w" / "profiles" / "_k134.yaml").read_text()
    (root / "w" / "profiles" / "_k134.yaml").write_text(text.replace("580.173.02", "595.91.07"))
    outside = snapshot(root / "outside")
    run_gpuop(*SYNTH, cwd=root / "w", check=True)
    assert snapshot(root / "outside") == outside
    assert not os.path.lexists(root / "w" / "dist" / ".gpuop-journal.tmp")
