"""The journal's recovery (pipeline/journal.py) on arbitrary journals: documents drawn from its grammar, with
hostile paths, wrong types and mutations (a key dropped or added, the text cut short, another shape), in
surroundings an attacker may have planted (the staging folder a link, a file, missing; a link for charts/, for a
cluster, for the trash). Whatever the journal, only a UserError (exit 2) escapes, nothing outside the output
folder and its staging folder is created, moved or removed, nothing from outside comes into the output, and a
refused journal moves nothing at all."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from gpuop.errors import UserError
from gpuop.pipeline import journal
from gpuop.pipeline.write import _exchange_at
from test_hostile_journal import STAGE, snapshot

pytestmark = pytest.mark.fast

NAMES = ["c00", "c01", "c09", "fleet", "index.json", "versions.lock.json", "charts/index.yaml", ".gpuop-output",
         "charts/c00-0.1.0.tgz", "charts/c00-0.2.0.tgz", "charts/c09-0.1.0.tgz", "stray.txt", "charts/stray"]
HOSTILE = ["../outside/secret.txt", "/etc/passwd", "charts/../../outside/secret.txt", "charts/../c00",
           "c00/x.yaml", "..", ".", "", "a\x00b", "charts/", "charts", ".gpuop-journal", "x" * 300, "outside",
           "../outside", "charts/..", "fleet/../..", "./c00", "c00/", "\\..\\outside", ".dist.new-abcd1234",
           "../.dist.new-abcd1234/c01"]
STAGES = [STAGE, "../outside", "/tmp", ".dist.new-zzzz9999", ".dist.new-abcd123", "outside", "", "."]


def _ops():
    kind = st.sampled_from(["rename", "exchange", "remove"])
    path = st.one_of(st.sampled_from(NAMES), st.sampled_from(NAMES), st.sampled_from(HOSTILE), st.text(max_size=12))
    inode = st.one_of(st.just(0), st.just("inode"), st.integers(min_value=-2, max_value=1 << 65),
                      st.sampled_from(["stage-c00", "stage-c01", "stage-fleet"]))
    op = st.one_of(st.tuples(kind, path, inode).map(list), st.lists(st.one_of(kind, path, inode), max_size=4),
                   st.none(), st.integers(), st.text(max_size=5))
    return st.lists(op, max_size=8)


def _valid_ops():
    """Ops of the grammar, as a run of gpuop writes them for this layout (new entries renamed in, changed ones
    exchanged with the staging folder's trees by their inodes, strays removed), in any order and any subset."""
    consistent = st.sampled_from([
        ("rename", "c09", 0), ("rename", "charts/c00-0.2.0.tgz", 0), ("rename", "charts/c09-0.1.0.tgz", 0),
        ("rename", "index.json", 0), ("rename", "versions.lock.json", 0), ("rename", "charts/index.yaml", 0),
        ("rename", ".gpuop-output", 0), ("exchange", "c00", "stage-c00"), ("exchange", "c01", "stage-c01"),
        ("exchange", "fleet", "stage-fleet"), ("remove", "stray.txt", 0), ("remove", "charts/stray", 0),
        ("remove", "charts/c00-0.1.0.tgz", 0)])
    anywhere = st.one_of(
        st.tuples(st.just("rename"), st.sampled_from([n for n in NAMES if n not in ("stray.txt", "charts/stray")]),
                  st.just(0)),
        st.tuples(st.just("remove"), st.sampled_from(NAMES), st.just(0)))
    return st.one_of(st.lists(consistent.map(list), max_size=10, unique_by=lambda op: op[1]),
                     st.lists(st.one_of(consistent, anywhere).map(list), max_size=10, unique_by=lambda op: op[1]))


def _docs():
    wild = st.fixed_dictionaries({"kind": st.sampled_from(["Journal", "Journal", "Output", 1]),
                                  "stage": st.one_of(st.sampled_from(STAGES), st.text(max_size=20), st.integers()),
                                  "stageInode": st.sampled_from(["stage", "stage", 0, 1, -1, "x", None, True]),
                                  "ops": _ops()})
    valid = st.fixed_dictionaries({"kind": st.just("Journal"), "stage": st.just(STAGE),
                                   "stageInode": st.just("stage"), "ops": _valid_ops()})
    # one hostile op slipped into a valid journal: it alone must stop the whole journal
    slipped = st.tuples(valid, _ops(), st.integers(0, 10)).map(
        lambda t: {**t[0], "ops": t[0]["ops"][:t[2]] + t[1][:1] + t[0]["ops"][t[2]:]})
    mutation = st.sampled_from(["none"] * 6 + ["drop", "extra", "truncate", "list"])
    return st.tuples(st.one_of(valid, valid, slipped, wild), mutation, st.sampled_from(sorted(journal.KEYS)),
                     st.integers(0, 200))


# where the attacker may have planted links: each surrounding is a set of them
SURROUNDINGS = ["stage", "stage-link", "no-stage", "stage-file", "stage-charts-link", "stage-cluster-link",
                "out-charts-link", "out-cluster-link", "stage-trash-link"]


def _build(top: Path, surroundings: set[str]) -> Path:
    outside = top / "outside"
    (outside / "d").mkdir(parents=True)
    (outside / "secret.txt").write_text("secret\n")
    (outside / "d" / "c00-0.2.0.tgz").write_text("outside archive\n")
    w = top / "w"
    out = w / "dist"
    for rel in ("c00/x.yaml", "c01/x.yaml", "fleet/a.yaml", "index.json", "versions.lock.json", "charts/index.yaml",
                "charts/c00-0.1.0.tgz", ".gpuop-output", "stray.txt", "charts/stray"):
        (out / rel).parent.mkdir(parents=True, exist_ok=True)
        (out / rel).write_text(f"old {rel}\n")
    (w / "profiles").mkdir()
    (w / "profiles" / "c00.yaml").write_text("profile\n")
    stage = w / STAGE
    if "stage-link" in surroundings:
        stage.symlink_to(outside)
    elif "stage-file" in surroundings:
        stage.write_text("a file\n")
    elif "no-stage" not in surroundings:
        for rel in ("c00/x.yaml", "c01/x.yaml", "c09/x.yaml", "fleet/a.yaml", "index.json", "versions.lock.json",
                    "charts/index.yaml", "charts/c00-0.2.0.tgz", "charts/c09-0.1.0.tgz", ".gpuop-output"):
            (stage / rel).parent.mkdir(parents=True, exist_ok=True)
            (stage / rel).write_text(f"new {rel}\n")
        if "stage-charts-link" in surroundings:
            shutil.rmtree(stage / "charts")
            (stage / "charts").symlink_to(outside / "d")
        if "stage-cluster-link" in surroundings:
            shutil.rmtree(stage / "c09")
            (stage / "c09").symlink_to(outside)
        if "stage-trash-link" in surroundings:
            (stage / journal.TRASH).symlink_to(outside)
    if "out-charts-link" in surroundings:
        shutil.rmtree(out / "charts")
        (out / "charts").symlink_to(outside / "d")
    if "out-cluster-link" in surroundings:
        (out / "c09").symlink_to(outside)
    return out


def _identities(folder: Path) -> dict[tuple, str]:
    """(device, inode) of every entry under `folder`, links not followed."""
    found = {}
    for dirpath, dirs, files in os.walk(folder):
        for name in dirs + files:
            st_ = os.lstat(os.path.join(dirpath, name))
            found[(st_.st_dev, st_.st_ino)] = os.path.join(dirpath, name)
    return found


def _text(doc, mutation: str, key: str, cut: int, stage: Path) -> bytes:
    inodes = {}
    for name in ("c00", "c01", "fleet"):
        try:
            inodes[f"stage-{name}"] = os.lstat(stage / name).st_ino
        except OSError:
            inodes[f"stage-{name}"] = 5
    try:
        stage_inode = os.lstat(stage).st_ino
    except OSError:
        stage_inode = 3
    doc = dict(doc, stageInode=stage_inode if doc["stageInode"] == "stage" else doc["stageInode"],
               ops=[[inodes.get(v, v) if isinstance(v, str) and v.startswith("stage-") else v for v in op]
                    if isinstance(op, list) else op for op in doc["ops"]])
    if mutation == "drop":
        doc.pop(key)
    elif mutation == "extra":
        doc["command"] = "rm -rf ~"
    elif mutation == "list":
        doc = [doc]
    raw = json.dumps(doc).encode()
    return raw[:cut] if mutation == "truncate" else raw


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_docs(), st.one_of(st.just(set()), st.sets(st.sampled_from(SURROUNDINGS), max_size=3)))
def test_no_journal_moves_anything_outside_the_output_and_its_staging_folder(drawn, surroundings):
    doc, mutation, key, cut = drawn
    # tmpfs when there is one: the journal's steps fsync, and a disk makes each example cost tens of ms
    with tempfile.TemporaryDirectory(dir="/dev/shm" if os.path.isdir("/dev/shm") else None) as tmp:
        top = Path(tmp)
        out = _build(top, surroundings)
        stage = out.parent / STAGE
        (out / journal.JOURNAL).write_bytes(_text(doc, mutation, key, cut, stage))
        mine = {out, stage} if not stage.is_symlink() else {out}
        before_all = snapshot(top)
        kept = {k: v for k, v in before_all.items()
                if not any((top / k) == p or p in (top / k).parents for p in mine)}
        inside = {**_identities(out), **(_identities(stage) if stage.is_dir() and not stage.is_symlink() else {})}
        try:
            journal.recover(out, lambda what: None, _exchange_at)
            moved = True
        except UserError as error:
            exc, moved = error, False
            assert all(i.file.endswith(".gpuop-journal") for i in exc.issues), exc
            assert "nothing was moved" in str(exc), str(exc)
        event("moved" if moved else "refused: " + exc.issues[0].path.split("[")[0] + " " + exc.issues[0].message[:25])
        after = snapshot(top)
        assert {k: v for k, v in after.items() if k in kept} == kept, "a file outside the output changed"
        assert not set(after) - set(before_all) - {k for k in after
                                                    if any((top / k) == p or p in (top / k).parents for p in mine)}
        came_in = set(_identities(out)) - set(inside)
        assert not came_in, f"moved into the output from outside: {[_identities(out)[i] for i in came_in]}"
        if not moved:
            assert after == before_all, "a refused journal moved something"
