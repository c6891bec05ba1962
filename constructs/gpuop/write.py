"""Stage 7, write: the whole output tree into a temporary folder beside the target, then swapped in.

A compile that fails at any earlier stage writes nothing, and a failure while writing removes the
temporary folder, so the output folder is either exactly as it was or exactly the new tree.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

from .errors import Issue, UserError
from .outputs.version import LOCK_FILE


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


def read_charts(out: Path) -> dict[str, bytes]:
    """The previous output's packaged charts (carried forward: published versions stay downloadable)."""
    folder = out / "charts"
    return {f.name: f.read_bytes() for f in sorted(folder.glob("*.tgz"))} if folder.is_dir() else {}


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


def write_tree(out: Path, files: dict[str, str] | tuple) -> None:
    check_target(out)
    out = Path(out).absolute()
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.new-", dir=out.parent))
    try:
        os.chmod(tmp, 0o755)
        for rel, text in (files.items() if isinstance(files, dict) else files):
            target = tmp / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(text.encode("utf-8") if isinstance(text, str) else text)
        if out.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{out.name}.old-", dir=out.parent))
            os.rename(out, old / "tree")
            os.rename(tmp, out)
            shutil.rmtree(old)
        else:
            os.rename(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
