"""`gpuop init [DIR]`: a starter project for an installed gpuop.

It writes what the source checkout has and an installed gpuop cannot reach otherwise:

- gpuop.yaml (the settings: where dist/ lives in git) and profiles/example.yaml, a small profile whose
  `$schema` line points at schemas/profile.schema.json, which init writes from the installed gpuop (the
  same files as `gpuop schema`), so an editor checks profiles against the version that compiles them;
- package.json and package-lock.json: `npm ci` installs Node 24 (jsii's runtime for cdk8s) and the cdk8s CLI
  into node_modules/, where gpuop finds them by itself; cdk8s.yaml for `cdk8s synth` (`npm run synth`
  runs it with the CLI's upgrade check off, which otherwise asks the npm registry on every run);
- .gitignore (node_modules/, the build cache, the output lock, cdk8s.out/, the report page) and the review
  gate for pull requests (.github/workflows/gpuop.yml, the workflow of examples/ci installing the gpuop that
  requirements-gpuop.txt names: the one running init, when CI can install it from where it came from —
  a package index, a git or https URL —, else a line the user writes; ci_requirement).

Everything is checked before anything is written: when any of these files exists, a folder on the way under
the target is a symbolic link or a file, or a name is too long for the file system, nothing is written and each
problem is reported (exit 2). It never writes through a link (folder descriptors opened with O_NOFOLLOW, files
created with O_EXCL), and a write that fails anyway (a full disk) removes what this run wrote.
"""

from __future__ import annotations

import json
import os
import re
import stat
import sys
from pathlib import Path

from gpuop import __version__
from gpuop.errors import Issue, UserError

SCAFFOLD = Path(__file__).parent / "scaffold"
# The install step of examples/ci/github-actions.yml, and what a project of profiles installs instead: the
# requirement init writes to requirements-gpuop.txt (ci_requirement), checked to be there before pip runs.
CI_INSTALL = "python -m pip install --disable-pip-version-check .\n"
REQUIREMENTS = "requirements-gpuop.txt"
_STEP_INDENT = " " * 10
CI_INSTALL_PROJECT = "\n".join([
    f"# the gpuop named in {REQUIREMENTS} (gpuop init wrote it: the gpuop that ran init, when CI can install it)",
    f"if ! grep -Eq '^[[:space:]]*[^#[:space:]]' {REQUIREMENTS}; then",
    f'  echo "::error file={REQUIREMENTS}::names no gpuop to install; write the requirement you install gpuop with '
    f'(e.g. gpuop @ git+https://git.example.com/platform/gpuop.git@v{__version__})"',
    "  exit 2",
    "fi",
    f"python -m pip install --disable-pip-version-check -r {REQUIREMENTS}"]).replace("\n", "\n" + _STEP_INDENT) + "\n"
# the workflow runs when what it checks with changes: gpuop's own sources there, the requirement here
CI_PATHS, CI_PATHS_PROJECT = '"pyproject.toml"', f'"{REQUIREMENTS}"'

# a URL pip can fetch from CI: a scheme, no space, quote, `#` or `;` (a requirements line stays one requirement)
_URL = re.compile(r"(https|http|ssh|git)://[^\s\"'#;\\]+")
_COMMIT = re.compile(r"[0-9a-f]{7,64}")
_HASH = re.compile(r"[0-9a-f]{64}")


def ci_requirement(dist=None) -> tuple[str | None, str]:
    """The pip requirement that installs, in CI, the gpuop running now (`dist`: its installed distribution,
    importlib.metadata), and where it was installed from (for the note). The install's record (PEP 610
    direct_url.json) tells: none, a package index (`gpuop==X.Y.Z`); a git URL, that URL at the installed commit;
    an https archive, that URL with its hash. A local folder, wheel or clone (file://), or a record that does not
    read as one of these: None, as CI cannot reach it."""
    from importlib import metadata

    try:
        dist = dist or metadata.distribution("gpuop")
    except metadata.PackageNotFoundError:
        return None, "not an installed package"
    version = dist.version
    raw = dist.read_text("direct_url.json")
    if raw is None:
        return (f"gpuop=={version}", "a package index") if re.fullmatch(r"[0-9A-Za-z.+!-]+", version or "") \
            else (None, "a package index, with a version pip cannot pin")
    try:
        doc = json.loads(raw)
        url = doc["url"]
    except (ValueError, KeyError, TypeError):
        return None, "an unreadable install record"
    if not isinstance(url, str) or not _URL.fullmatch(url):
        return None, str(url)[:200]
    vcs, archive = doc.get("vcs_info"), doc.get("archive_info")
    if isinstance(vcs, dict) and vcs.get("vcs") == "git" and _COMMIT.fullmatch(str(vcs.get("commit_id", ""))):
        return f"gpuop @ git+{url}@{vcs['commit_id']}", url
    if isinstance(archive, dict) and url.startswith("https://"):
        digest = (archive.get("hashes") or {}).get("sha256") if isinstance(archive.get("hashes"), dict) else None
        return f"gpuop @ {url}" + (f"#sha256={digest}" if isinstance(digest, str) and _HASH.fullmatch(digest) else ""), url
    return None, url


def requirements_text() -> tuple[str, str | None]:
    """requirements-gpuop.txt, and a note for stderr when it names no gpuop (CI cannot install this one)."""
    requirement, source = ci_requirement()
    head = ("# The gpuop the review gate (.github/workflows/gpuop.yml) installs: keep it the gpuop you compile\n"
            "# dist/ with (the gate compiles with it and compares). Change this line to upgrade.\n")
    if requirement is not None:
        return f"{head}# gpuop init {__version__} wrote it: the gpuop that ran init, from {source}.\n{requirement}\n", None
    note = (f"gpuop: {REQUIREMENTS} names no gpuop yet: this one ({__version__}) was installed from {source}, which "
            "CI cannot install from; write the requirement you install gpuop with in it (the review gate fails "
            "until then)")
    return (f"{head}# gpuop init could not name it: the gpuop that ran init ({__version__}) was installed from\n"
            f"# {source}, which CI cannot reach. Write the requirement you install gpuop with below, e.g.\n"
            f"#   gpuop @ git+https://git.example.com/platform/gpuop.git@v{__version__}\n"), note


SETTINGS = """\
# gpuop project settings: where the compiled dist/ lives in git, for the Argo CD and Flux objects.
apiVersion: gpuop/v1alpha1
kind: Settings
gitops:
  repoURL: https://git.example.com/platform/gpu-clusters.git     # this repository's clone URL
  revision: main
  path: dist
"""

PROFILE = """\
# yaml-language-server: $schema=../schemas/profile.schema.json
# One cluster: a vanilla Kubernetes cluster with a pool of L40S nodes. `gpuop synth` compiles every
# profile of profiles/ into dist/<name>/ (Helm chart, Kustomize overlay, manifests, Argo CD and Flux
# objects); `gpuop validate` checks them without writing. Files whose name starts with "_" are partial
# profiles for `extends:`.
apiVersion: gpuop/v1alpha1
kind: ClusterProfile
metadata:
  name: example
  labels: {environment: dev}
spec:
  platform: {type: kubernetes, version: "1.33"}
  os: ubuntu24.04
  driver: {version: "580"}
  nodePools:
    - name: inference
      nodes: 2
      gpusPerNode: 1
      gpu: L40S
"""

CDK8S = """\
# `cdk8s synth` (or `npm run synth`, with the CLI's upgrade check off) runs gpuop's App: the profiles of
# profiles/ (or GPUOP_PROFILES) through the same stages as `gpuop synth`, one cdk8s Chart per cluster,
# into cdk8s.out/. `python3` is the Python gpuop is installed in (an activated venv).
language: python
app: python3 -m gpuop.cli.cdk8s_app
output: cdk8s.out
"""

GITIGNORE = """\
# Node 24 and the cdk8s CLI (`npm ci`)
node_modules/
# gpuop's build cache and the lock of a running `gpuop synth`
.gpuop-cache/
.dist.lock
# `cdk8s synth` output (dist/ is committed: it is what Argo CD and Flux apply)
cdk8s.out/
# `gpuop report`'s page (a build artifact: publish it from CI)
/report/
"""


def files() -> dict[str, str]:
    """Every file of the starter project, by its path in the project."""
    from gpuop.kube.yamlio import dump_json
    from gpuop.outputs.values import values_schema
    from gpuop.profile.models import profile_json_schema

    workflow = (SCAFFOLD / "github-actions.yml").read_text()
    if CI_INSTALL not in workflow or CI_PATHS not in workflow:   # the example changed: say so, never ship it wrong
        raise AssertionError("scaffold/github-actions.yml has no install step or trigger path to replace")
    workflow = workflow.replace(CI_INSTALL, CI_INSTALL_PROJECT, 1).replace(CI_PATHS, CI_PATHS_PROJECT, 1)
    return {
        "gpuop.yaml": SETTINGS,
        "profiles/example.yaml": PROFILE,
        "schemas/profile.schema.json": dump_json(profile_json_schema()),
        "schemas/values.schema.json": dump_json(values_schema()),
        "package.json": (SCAFFOLD / "package.json").read_text(),
        "package-lock.json": (SCAFFOLD / "package-lock.json").read_text(),
        "cdk8s.yaml": CDK8S,
        ".gitignore": GITIGNORE,
        ".github/workflows/gpuop.yml": workflow,
        REQUIREMENTS: requirements_text()[0],
    }


_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
_FILE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)


def run(target: Path) -> list[str]:
    """Write the starter project into `target` (created if missing); the paths written. Everything is checked
    before anything is written (every problem reported, nothing written); the writes then go through folder
    descriptors opened without following a link, each file created new (O_EXCL): a link planted or swapped in
    under the target is refused, never written through. A write that fails anyway (a full disk) removes what
    this run wrote; only when that fails too does the error say what is left (InitCutShort)."""
    content = files()
    problems = _problems(target, content)
    if problems:
        raise UserError(problems)
    return _write(target, content)


def _problems(target: Path, content: dict) -> list[Issue]:
    """Why init cannot write `content` into `target` (links under the target are never followed)."""
    try:
        st = os.stat(target)            # the target itself is the user's own path: a link to a folder is theirs
    except FileNotFoundError:
        return _creatable(target)
    except OSError as exc:
        return [Issue(str(target), 0, 0, "", f"cannot be used: {exc.strerror or exc}; pass the folder to create the "
                      "project in (e.g. gpuop init my-clusters)")]
    if not stat.S_ISDIR(st.st_mode):
        return [Issue(str(target), 0, 0, "", "is a file, not a folder; pass the folder to create the "
                      "project in (e.g. gpuop init my-clusters)")]
    issues, stop = [], set()            # stop: a folder found missing or refused (nothing below it is looked at)
    for rel in content:
        parts = rel.split("/")
        for i in range(len(parts)):
            sub = "/".join(parts[:i + 1])
            if sub in stop:
                break
            try:
                st = os.lstat(target / sub)
            except FileNotFoundError:
                stop.add(sub)           # nothing below it exists either
                break
            except OSError as exc:
                issues.append(Issue(str(target / sub), 0, 0, "", f"cannot be used: {exc.strerror or exc}"))
                stop.add(sub)
                break
            if stat.S_ISDIR(st.st_mode) and i < len(parts) - 1:
                continue
            stop.add(sub)
            if stat.S_ISLNK(st.st_mode):
                issues.append(Issue(str(target / sub), 0, 0, "", "is a symbolic link; gpuop init writes nothing "
                                    "through a link (it would land outside the project): move it away, or run init "
                                    "in an empty folder"))
            elif i == len(parts) - 1:
                issues.append(Issue(str(target / sub), 0, 0, "", "already exists; gpuop init writes nothing over a "
                                    "file (move it away, or run init in an empty folder)"))
            else:
                issues.append(Issue(str(target / sub), 0, 0, "", "is a file, not a folder; gpuop init writes "
                                    f"{rel} below it (move it away, or run init in an empty folder)"))
            break
    return issues


def _creatable(target: Path) -> list[Issue]:
    """A missing target: its nearest existing ancestor is a folder, and every name to create fits the file system."""
    missing, here = [], Path(os.path.abspath(target))
    while not os.path.lexists(here):
        missing.append(here.name)
        here = here.parent
    if not here.is_dir():
        return [Issue(str(target), 0, 0, "", f"cannot be created: {here} is a file, not a folder")]
    try:
        name_max, path_max = os.pathconf(here, "PC_NAME_MAX"), os.pathconf(here, "PC_PATH_MAX")
    except OSError:
        name_max, path_max = 255, 4096
    longest = max(missing, key=lambda n: len(os.fsencode(n)))
    if len(os.fsencode(longest)) > name_max:
        return [Issue(str(target), 0, 0, "", f"cannot be created: the name {longest[:40]!r}... is "
                      f"{len(os.fsencode(longest))} bytes, more than the file system allows ({name_max}); "
                      "pass a shorter folder name")]
    deepest = len(os.fsencode(os.path.abspath(target / ".github" / "workflows" / "gpuop.yml")))
    if deepest >= path_max:
        return [Issue(str(target), 0, 0, "", f"cannot be created: its files' paths would be {deepest} bytes, more "
                      f"than the file system allows ({path_max}); pass a shorter path")]
    return []


class InitCutShort(Exception):
    """A write failed and what this run wrote could not all be removed: `left` says what is still there."""

    def __init__(self, issue: Issue, left: list[str]):
        super().__init__(str(issue))
        self.issue, self.left = issue, left


def _write(target: Path, content: dict) -> list[str]:
    made_target: list[Path] = []        # the target and its missing parents, as this run created them
    made: list[str] = []                # folders under the target this run created
    written: list[str] = []             # files this run created
    fds: dict[str, int] = {}
    try:
        _make_target(target, made_target)
        fds[""] = os.open(target, os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_CLOEXEC", 0))
        for rel, text in content.items():
            folder, _, name = rel.rpartition("/")
            fd = os.open(name, _FILE_FLAGS, 0o644, dir_fd=_folder(fds, folder, made))
            written.append(rel)
            try:
                view = memoryview(text.encode("utf-8"))
                while view:
                    view = view[os.write(fd, view):]
            finally:
                os.close(fd)
    except OSError as exc:
        issue = Issue(str(target), 0, 0, "", f"cannot be written: {exc.strerror or exc}")
        left = _undo(fds, written, made, made_target)
        if left:
            raise InitCutShort(issue, [str(target / rel) for rel in left]) from None
        raise UserError(issue) from None
    finally:
        for fd in fds.values():
            os.close(fd)
    return written


def _make_target(target: Path, made: list[Path]) -> None:
    missing, here = [], Path(target)
    while not os.path.lexists(here) and here != here.parent:
        missing.append(here)
        here = here.parent
    for folder in reversed(missing):
        os.mkdir(folder)
        made.append(folder)


def _folder(fds: dict, rel: str, made: list[str]) -> int:
    """The folder `rel` under the target, created when missing, each component opened without following a link
    (a link swapped in after the check is refused: ELOOP/ENOTDIR)."""
    if rel not in fds:
        parent, _, name = rel.rpartition("/")
        pfd = _folder(fds, parent, made)
        try:
            os.mkdir(name, 0o755, dir_fd=pfd)
            made.append(rel)
        except FileExistsError:
            pass
        fds[rel] = os.open(name, _DIR_FLAGS, dir_fd=pfd)
    return fds[rel]


def _undo(fds: dict, written: list[str], made: list[str], made_target: list[Path]) -> list[str]:
    """Remove what this run wrote (its files, then the folders it made, deepest first): what could not be removed,
    relative to the target."""
    left = []
    for rel in reversed(written):
        folder, _, name = rel.rpartition("/")
        try:
            os.unlink(name, dir_fd=fds[folder])
        except OSError:
            left.append(rel)
    for rel in reversed(made):
        parent, _, name = rel.rpartition("/")
        try:
            os.rmdir(name, dir_fd=fds[parent])
        except OSError:
            left.append(rel + "/")
    for folder in reversed(made_target):
        try:
            os.rmdir(folder)
        except OSError:
            left.append(os.path.relpath(folder, made_target[-1]) + "/")
    return left


def main(target: Path) -> int:
    try:
        written = run(target)
    except InitCutShort as cut:
        print(cut.issue, file=sys.stderr)
        print(f"gpuop: 1 error; written and not removed: {', '.join(cut.left)} (remove them, then run init again)",
              file=sys.stderr)
        return 2
    shown = "." if str(target) in ("", ".") else str(target)
    print(f"gpuop: wrote a starter project in {shown}: {', '.join(written)}", file=sys.stderr)
    note = requirements_text()[1]
    if note:
        print(note, file=sys.stderr)
    print("next: npm ci (Node 24 and the cdk8s CLI), then gpuop synth (profiles/ -> dist/)", file=sys.stderr)
    return 0
