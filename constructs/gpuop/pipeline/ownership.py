"""What an output folder may be replaced by gpuop: a folder is replaced only if it carries gpuop's marker
(`.gpuop-output`, naming the project by its repository, gitops.repoURL) or is recognisably gpuop output from
before the marker (adopted); never the project or a parent of it.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from gpuop.errors import Issue, UserError
from gpuop.outputs.version import LOCK_FILE
from gpuop.pipeline.journal import MARKER
from gpuop.pipeline.previous import _index_problem
from gpuop.profile.bounded import read_json


# ---- ownership: what may be replaced ---------------------------------------------------------------

def _marker_text(repo: str) -> str:
    """The marker names the project by its repository (gitops.repoURL), not by a path: the output's
    bytes must not depend on where the checkout lives (dist/ is committed and compared byte for byte)."""
    return json.dumps({"apiVersion": "gpuop/v1alpha1", "kind": "Output", "repoURL": repo}, indent=2) + "\n"


def check_target(out: Path, project: Path | None = None, inputs: tuple = (), repo: str | None = None) -> None:
    """Refuse to replace what gpuop did not write: the project, a parent of it or of any input, a
    folder without gpuop's marker that is not recognisably gpuop output, another project's output
    (the marker names the project by its repository URL, gitops.repoURL)."""
    out = Path(out).absolute()
    real = Path(os.path.realpath(out))
    cwd = Path.cwd().absolute()
    project = Path(os.path.realpath(project or cwd))
    for p in {cwd, Path(os.path.realpath(cwd)), project} | {Path(os.path.realpath(i)) for i in inputs}:
        if real == p or real in p.parents:
            raise UserError(Issue(str(out), 0, 0, "", "refusing to write into the project, the working folder, "
                                  "an input or one of their parents (the output folder is replaced as a whole); "
                                  "pass -o DIR, e.g. -o dist"))
    if out.is_symlink():
        raise UserError(Issue(str(out), 0, 0, "", "refusing to replace a symbolic link; pass a real folder"))
    if not out.exists():
        return
    if not out.is_dir():
        raise UserError(Issue(str(out), 0, 0, "", "refusing to replace a file that is not a folder"))
    if not any(out.iterdir()):
        return
    marker = out / MARKER
    if os.path.lexists(marker):
        try:      # bounded, never through a symlink: a marker linked to another project's is not ours
            doc = read_json(marker, str(marker), limit=64 * 1024, what="gpuop's output marker")
            assert isinstance(doc, dict) and doc.get("kind") == "Output" and isinstance(doc.get("repoURL"), str)
        except (UserError, AssertionError):
            raise UserError(Issue(str(marker), 0, 0, "", "not gpuop's output marker; refusing to replace the folder"))
        if repo is not None and doc["repoURL"] != repo:
            raise UserError(Issue(str(out), 0, 0, "", f"refusing to replace the output of another project "
                                  f"(repository {doc['repoURL']}); this project's repository is {repo}"))
        return
    reason = _not_adoptable(out)
    if reason:
        raise UserError(Issue(str(out), 0, 0, "", f"refusing to replace a folder that is not gpuop output ({reason}); "
                              "pass an empty or new folder, or a previous output folder"))


def _not_adoptable(out: Path) -> str | None:
    """Output from before the marker is adopted when every entry is one gpuop writes."""
    try:
        doc = read_json(out / "index.json", what="an index.json")
    except UserError:
        return "no gpuop marker and no index.json of kind Index"
    if _index_problem(doc):
        return "no gpuop marker and index.json is not of kind Index"
    lock = out / LOCK_FILE
    try:
        if read_json(lock, what="a version lock").get("kind") != "VersionLock":
            return f"{LOCK_FILE} is not of kind VersionLock"
    except (UserError, AttributeError):
        return f"no gpuop marker and no {LOCK_FILE}"
    allowed = {"index.json", LOCK_FILE, "charts", "fleet", "report"} | {c["name"] for c in doc["clusters"]}   # report: `gpuop report`
    strays = sorted(p.name for p in out.iterdir() if p.name not in allowed)
    if strays:
        return f"no gpuop marker, and gpuop did not write {', '.join(strays[:3])}"
    return None
