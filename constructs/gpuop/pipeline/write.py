"""Stage 7, write: the whole output tree into a temporary folder beside the target, then swapped in.

A compile that fails at any earlier stage writes nothing, and a failure while writing removes the
temporary folder, so the output folder is either exactly as it was or exactly the new tree.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import yaml

from gpuop.errors import Issue, UserError
from gpuop.outputs.version import LOCK_FILE


def read_lock(out: Path) -> dict:
    path = out / LOCK_FILE
    if not path.is_file():
        return {}
    try:
        lock = json.loads(path.read_text())
        assert isinstance(lock.get("clusters"), dict)
        return lock
    except (ValueError, AssertionError, AttributeError):
        raise UserError(Issue(str(path), 0, 0, "", "version lock is not valid JSON of kind VersionLock; "
                              "restore it from git (deleting it restarts every chart at version 0.1.0)"))


@dataclass(frozen=True)
class Previous:
    """What the next compile carries forward from the last output folder."""
    out: Path
    lock: dict            # versions.lock.json
    index: dict           # cluster name -> index.json entry
    charts: dict          # archive file name -> Path (published versions stay downloadable)

    def charts_index(self) -> dict | None:
        """charts/index.yaml, parsed (only when a new chart version must be added to it)."""
        try:
            doc = yaml.load((self.out / "charts" / "index.yaml").read_text(), Loader=yaml.CSafeLoader)
        except (OSError, yaml.YAMLError):
            return None
        return doc if isinstance(doc, dict) else None

    def charts_index_ok(self) -> bool:
        """The previous index.yaml can be kept as it is: it exists and lists exactly the archives."""
        path = self.out / "charts" / "index.yaml"
        if not path.is_file():
            return False
        listed = set()
        for line in path.read_text().splitlines():     # urls entries: "    - <name>-<version>.tgz"
            stripped = line.strip()
            if stripped.startswith("- ") and stripped.endswith(".tgz"):
                listed.add(stripped[2:])
        return listed == set(self.charts)


def read_previous(out: Path) -> Previous:
    out = Path(out)
    lock = read_lock(out)
    try:
        index = {c["name"]: c for c in json.loads((out / "index.json").read_text())["clusters"]}
    except (OSError, ValueError, KeyError, TypeError):
        index = {}
    folder = out / "charts"
    charts = {f.name: f for f in sorted(folder.glob("*.tgz"))} if folder.is_dir() else {}
    return Previous(out, lock, index, charts)


def check_target(out: Path) -> None:
    """Refuse to replace a folder that holds the project or is not gpuop output: the swap replaces the
    whole folder, so `-o .` or `-o profiles` would delete the inputs."""
    out = Path(out).absolute()
    cwd = Path.cwd().absolute()
    if out == cwd or out in cwd.parents:
        raise UserError(Issue(str(out), 0, 0, "", "refusing to write into the working folder or one of its "
                              "parents (the output folder is replaced as a whole); pass -o DIR, e.g. -o dist"))
    if out.exists() and (not out.is_dir() or (any(out.iterdir()) and not (out / "index.json").is_file())):
        raise UserError(Issue(str(out), 0, 0, "", "refusing to replace a folder that is not gpuop output "
                              "(it has no index.json); pass an empty or new folder, or a previous output folder"))


def write_tree(out: Path, files: dict | tuple, reuse: tuple = ()) -> None:
    """Write `files` (and move the `reuse` paths unchanged from the current `out`) into a new tree,
    then swap it in. On any failure the moved paths go back and `out` is as it was."""
    check_target(out)
    out = Path(out).absolute()
    try:
        _write_tree(out, files, reuse)
    except OSError as exc:             # the place, not gpuop: unwritable, full, read-only
        raise UserError(Issue(str(out), 0, 0, "", f"cannot write the output folder: {exc.strerror or exc} "
                              f"({exc.filename or out}); nothing was changed"))


def _write_tree(out: Path, files, reuse) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.new-", dir=out.parent))
    moved: list[str] = []
    try:
        os.chmod(tmp, 0o755)
        for rel in reuse:
            (tmp / rel).parent.mkdir(parents=True, exist_ok=True)
            os.rename(out / rel, tmp / rel)
            moved.append(rel)
        made: set = set()
        for rel, text in (files.items() if isinstance(files, dict) else files):
            target = tmp / rel
            if target.parent not in made:
                target.parent.mkdir(parents=True, exist_ok=True)
                made.add(target.parent)
            target.write_bytes(text.encode("utf-8") if isinstance(text, str) else text)
        if out.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{out.name}.old-", dir=out.parent))
            os.rename(out, old / "tree")
            os.rename(tmp, out)
            shutil.rmtree(old)
        else:
            os.rename(tmp, out)
    except BaseException:
        for rel in reversed(moved):
            try:
                os.rename(tmp / rel, out / rel)
            except OSError:
                pass
        shutil.rmtree(tmp, ignore_errors=True)
        raise
