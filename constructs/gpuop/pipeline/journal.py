"""The journaled per-cluster commit: only the clusters and fleet files that changed are put in place, one
atomic step each, and a journal in the output folder lets the next gpuop command finish what a stopped
run began (docs/output-transaction.md).

Every state a kill can leave is a valid output:
- each cluster folder is whole, old or new: it is exchanged with its new tree in one
  renameat2(RENAME_EXCHANGE), or renamed into place when new;
- every cluster the fleet objects and index.json list is present: new clusters and chart archives are
  added before the files that reference them, and a removed cluster leaves only after index.json and
  fleet/ no longer list it (add before reference, remove after unreference);
- the journal (`OUT/.gpuop-journal`) is in the output folder from the first change until the last, so a
  half-applied tree is recognisable: `gpuop validate`, `gpuop check` and `gpuop diff --exit-code` refuse
  it, and every command that writes the output completes it first, under the output lock.

The new trees wait in the staging folder beside OUT (`.<OUT>.new-XXXX`, the same file system), which the
journal names; a kill before the journal is written leaves OUT untouched (the staging folder is removed
by the next run). Each step is idempotent: a rename whose source is gone is done; an exchange is done
when OUT's entry has the inode the journal recorded for the new tree.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

JOURNAL = ".gpuop-journal"
FLEET_FILES = ("versions.lock.json", "charts/index.yaml", "index.json")   # index.json last: it references


def pending(out: Path) -> bool:
    return os.path.lexists(os.path.join(out, JOURNAL))


def plan(stage: Path, out: Path, keep: set[str], keep_charts: set[str]) -> list[list]:
    """The steps that turn `out` into the new tree: `stage` holds what changed, `keep` the top-level
    entries of `out` kept as they are, `keep_charts` the archives of out/charts kept."""
    ops: list[list] = []
    staged = sorted(os.listdir(stage))
    charts = sorted(os.listdir(stage / "charts")) if (stage / "charts").is_dir() else []
    for name in charts:                                   # new archives first: nothing references them yet
        if name != "index.yaml":
            ops.append(["rename", f"charts/{name}", 0])
    for name in staged:                                   # clusters: new ones added, changed ones exchanged
        if name in ("charts", "fleet") or not (stage / name).is_dir():
            continue
        ops.append(["exchange" if (out / name).is_dir() and not (out / name).is_symlink() else "rename", name,
                    os.stat(stage / name).st_ino])
    if "fleet" in staged:
        ops.append(["exchange" if (out / "fleet").is_dir() else "rename", "fleet", os.stat(stage / "fleet").st_ino])
    for rel in FLEET_FILES:
        if (stage / rel).is_file():
            ops.append(["rename", rel, 0])
    new = set(staged) | keep
    for name in sorted(os.listdir(out)):                  # after index.json: nothing lists them any more
        if name not in new and name not in (JOURNAL, ".gpuop-output", "charts"):
            ops.append(["remove", name, 0])
    if (out / "charts").is_dir():
        for name in sorted(os.listdir(out / "charts")):
            if name != "index.yaml" and name not in keep_charts and name not in charts:
                ops.append(["remove", f"charts/{name}", 0])
    if (stage / ".gpuop-output").is_file():
        ops.append(["rename", ".gpuop-output", 0])
    return ops


def write(out: Path, stage: Path, ops: list, step) -> None:
    """The journal, atomically (a temporary name, fsync, rename, fsync of the folder): from here on the next
    command rolls the commit forward."""
    step("journal")
    tmp = out / (JOURNAL + ".tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump({"kind": "Journal", "stage": stage.name, "ops": ops}, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, out / JOURNAL)
    _fsync_dir(out)


def apply(out: Path, step, exchange) -> None:
    """Every step of the journal in `out`, in order (each idempotent), then the journal removed: the commit
    is complete (the caller removes the staging folder, which now holds the old trees). `exchange(a, b)`
    swaps two folders atomically."""
    doc = json.loads((out / JOURNAL).read_text(encoding="utf-8"))
    stage = out.parent / doc["stage"]
    trash = stage / ".removed"
    for op, rel, inode in doc["ops"]:
        src, dst = stage / rel, out / rel
        if op == "rename":
            if os.path.lexists(src):
                step("journal-add" if rel.startswith("charts/") or "/" not in rel and rel not in FLEET_FILES
                     else "journal-fleet")
                dst.parent.mkdir(parents=True, exist_ok=True)
                os.rename(src, dst)
        elif op == "exchange":
            try:
                done = os.stat(dst).st_ino == inode
            except FileNotFoundError:
                done = False
            if not done:
                step("journal-exchange")
                if os.path.lexists(dst):
                    if not exchange(src, dst):
                        raise OSError("the file system cannot exchange two folders atomically")
                else:
                    os.rename(src, dst)
        elif op == "remove":
            if os.path.lexists(dst):
                step("journal-remove")
                trash.mkdir(parents=True, exist_ok=True)
                os.rename(dst, trash / rel.replace("/", "%"))     # atomic: never half a folder in OUT
    _fsync_dir(out)
    step("journal-done")
    os.unlink(out / JOURNAL)          # the commit is complete; the staging folder (old trees) is a leftover


def recover(out: Path, step, exchange) -> str | None:
    """Under the output lock: complete a commit a stopped run left (its journal is in the output folder).
    A journal whose staging folder is gone (removed by hand) cannot be completed: its steps already done
    are kept and the journal is dropped; the next compile checks every folder by content anyway."""
    if not pending(out):
        return None
    try:
        doc = json.loads((out / JOURNAL).read_text(encoding="utf-8"))
        stage_ok = (out.parent / doc["stage"]).is_dir()
    except (OSError, ValueError, KeyError, TypeError):
        stage_ok = False
    if not stage_ok:
        os.unlink(out / JOURNAL)
        return f"dropped the journal of {out.name} (its staging folder is gone)"
    apply(out, step, exchange)        # its staging folder goes with the other leftovers (write.recover)
    return f"completed the interrupted commit of {out.name}"


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
