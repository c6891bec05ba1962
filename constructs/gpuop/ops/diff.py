"""`gpuop diff`: every file the next `gpuop synth` would write or delete, per cluster and for the
fleet, before anything is committed — the profiles compiled in memory against the last compiled
output (a folder, or the output folder at a git revision).

What it shows:
- the rendered objects (dist/<cluster>/manifests) as a semantic diff with field paths; lists whose
  items carry a `name` (containers, env, volumes, mounts) are matched by name, so a change reads
  `spec.template.spec.containers[nvidia-driver-ctr].image`, not an index that shifts;
- every other file of the cluster (chart, overlay, Argo CD and Flux objects, ApplicationSet
  parameters) and of the fleet (fleet/, charts/, index.json, the version lock): added, deleted or
  changed, with field paths for YAML and JSON documents; a chart template (one per component, not
  YAML until Helm renders it) with the objects whose documents in it changed; archives: file only;
- *destructive* changes first, marked `!!`: a cluster that leaves the ApplicationSet (its git files
  generator no longer yields it) or leaves the output, a delivery object (Argo CD Application, Flux
  HelmRelease or Kustomization) deleted — NFD's means NFD is uninstalled —, a release renamed or
  moved (Flux and Argo CD uninstall the old one), a CustomResourceDefinition or Namespace deleted
  (everything of that kind or in it goes with it). Unlike `git diff`, these are named, because a
  reviewer reading 40 changed files misses the one deletion that takes a fleet's GPUs down.

`--against` is an output folder, wherever it is (a CI artifact, another checkout's dist/), or a git
revision of the project's repository. A folder is compared only when it is gpuop output (an index.json of
kind Index: another tool's folder, or /etc, is refused with that reason), and read without following a link
anywhere in it (profile/bounded.walk), so nothing in it can point the read elsewhere. A revision is checked before
git sees it (at most 255 characters, never starting with `-`, and every git call separates options from
arguments with `--end-of-options` / `--`), so `--against=--output=x` cannot become a git option. git
runs with no command the repository configures (GIT_SAFE, GIT_ENV below). A project whose output is not in git yet (no
repository, no commit, or no dist/ at that revision) is compared against the folder on disk, or, when
that does not exist either, everything is new; that is a note, not an error.
"""

from __future__ import annotations

import difflib
import io
import json
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from gpuop.errors import Issue, UserError
from gpuop.kube.yamlio import dump_plain, load_all

Tree = dict  # path relative to the output folder -> bytes

DELIVERY_KINDS = {"Application", "ApplicationSet", "HelmRelease", "Kustomization"}
# A revision git would accept as a commit-ish: refs, SHAs, `HEAD~2`, `origin/main`, `v1.2^{commit}`.
REVISION = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_./@{}~^+-]{0,254}")
FLEET = "fleet"


@dataclass
class Change:
    op: str                          # "+" added, "-" deleted, "~" changed
    what: str                        # object key (manifests) or file path relative to the section
    fields: list = field(default_factory=list)      # [(path, old, new)]
    objects: list = field(default_factory=list)     # [(op, object key)]: the documents of a chart template
    destructive: str = ""            # why this change deletes something on the cluster


@dataclass
class SectionDiff:
    """One cluster (or the fleet: `name == "fleet"`)."""
    name: str
    old_version: str | None = None
    new_version: str | None = None
    changes: list = field(default_factory=list)
    exists_before: bool = True
    exists_after: bool = True

    @property
    def empty(self) -> bool:
        return not self.changes and self.old_version == self.new_version

    @property
    def destructive(self) -> list[Change]:
        return [c for c in self.changes if c.destructive]


# Kept for callers of the old API: a cluster section.
ClusterDiff = SectionDiff


# --- reading the two trees ------------------------------------------------------------------------

def tree_from_dir(folder: Path) -> Tree:
    """Every regular file of an output folder, read without following a link anywhere in it (a symlink is
    refused, profile/bounded.walk): nothing a folder holds can point the read at a file elsewhere."""
    from gpuop.profile.bounded import read_tree

    if not folder.is_dir():
        return {}
    return read_tree(folder)


def against_tree(folder: Path) -> Tree:
    """`--against DIR`: a folder anywhere (a CI artifact downloaded beside the checkout, another checkout's
    dist/), read only when it is gpuop output (an index.json of kind Index), so a folder of another tool, or
    /etc, is refused with that reason instead of being compared file by file."""
    from gpuop.pipeline.write import read_index

    try:
        read_index(folder)
    except UserError as exc:
        why = exc.issues[0].message.split(";")[0]
        raise UserError(Issue(str(folder), 0, 0, "", f"not a gpuop output folder (its index.json: {why}); --against "
                              "takes a folder gpuop synth wrote, or a git revision")) from None
    return tree_from_dir(folder)


# Every git call runs without the commands a repository or its config can name: no filters (smudge,
# clean, process), textconv, external diff, hooks, fsmonitor or pager, and no system config.
# The tree is read with ls-tree and cat-file --batch, which never apply attributes, instead of git
# archive (whose export-subst and filters run what a committed .gitattributes names).
GIT_ENV = {"GIT_CONFIG_NOSYSTEM": "1", "GIT_ATTR_NOSYSTEM": "1",
           "GIT_TERMINAL_PROMPT": "0", "GIT_PAGER": "cat", "GIT_EXTERNAL_DIFF": "", "GIT_NO_REPLACE_OBJECTS": "1",
           "GIT_OPTIONAL_LOCKS": "0"}
GIT_SAFE = ("-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false", "-c", "core.attributesFile=/dev/null",
            "-c", "diff.external=", "-c", "core.pager=cat", "-c", "protocol.allow=never", "-c", "core.sshCommand=false",
            "-c", "uploadpack.packObjectsHook=", "--no-replace-objects")
MAX_REVISION = 255
MAX_GIT_TREE_BYTES = 4 * 1024 ** 3


def _git(*args: str) -> subprocess.CompletedProcess:
    return _git_input(None, *args)


def _git_input(stdin: bytes | None, *args: str) -> subprocess.CompletedProcess:
    """git with the hardening above; the environment's own GIT_* variables (GIT_DIR, GIT_CONFIG_*...)
    are dropped, so the repository is the one of the working directory."""
    import os

    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")} | GIT_ENV
    return subprocess.run(["git", *GIT_SAFE, *args], input=stdin, capture_output=True, check=False,
                          env=env)   # callers read returncode


def check_revision(ref: str) -> None:
    """Refuse what cannot be a revision before git sees it (a leading `-` would be an option)."""
    if ref.startswith("-"):
        why = "a revision cannot start with '-'"
    elif len(ref) > MAX_REVISION:
        why = f"a revision is at most {MAX_REVISION} characters, got {len(ref)}"
    elif not REVISION.fullmatch(ref) or ".." in ref or "@{-" in ref:
        why = "a revision is a branch, tag, commit or HEAD~N, without spaces, '..' or control characters"
    else:
        return
    shown = ref if len(ref) <= 80 else ref[:80] + "..."
    raise UserError(Issue("--against", 0, 0, "", f"{shown!r} is neither a folder nor a git revision: {why}"))


def against_folder(against: str) -> bool:
    """`--against` names a folder when one exists at that path, wherever it is (against_tree then refuses one
    that is not gpuop output); anything else is a revision."""
    import os

    return os.path.isdir(against)           # False for a name too long for the file system, or with a NUL


def _batch_read(entries: list[tuple[str, str]]) -> dict[str, bytes]:
    """Blob contents by path from one `git cat-file --batch` (no filters, no textconv)."""
    proc = _git_input("".join(f"{sha}\n" for sha, _ in entries).encode(), "cat-file", "--batch")
    if proc.returncode != 0:
        raise UserError(Issue("--against", 0, 0, "", f"cannot read the git objects: "
                              f"{proc.stderr.decode(errors='replace').strip()[:300]}"))
    out, data, pos = {}, proc.stdout, 0
    for sha, path in entries:
        nl = data.index(b"\n", pos)
        head = data[pos:nl].split()
        if len(head) != 3 or head[1] != b"blob":
            raise UserError(Issue("--against", 0, 0, "", f"cannot read {path} from git: {data[pos:nl][:80]!r}"))
        size = int(head[2])
        out[path] = data[nl + 1:nl + 1 + size]
        pos = nl + 1 + size + 1
    return out


def tree_from_git(ref: str, folder: str) -> Tree | None:
    """`folder` at revision `ref`; None when the project has no git history for it yet (no repository,
    no commit, or no `folder` at that revision). An unknown revision in a repository is bad input.
    Only regular files are read (a committed symlink is not followed), each path inside `folder`."""
    check_revision(ref)
    if _git("rev-parse", "--is-inside-work-tree").returncode != 0:
        return None
    sha = _git("rev-parse", "--verify", "--quiet", "--end-of-options", f"{ref}^{{commit}}")
    if sha.returncode != 0:
        if _git("rev-parse", "--verify", "--quiet", "HEAD").returncode != 0:
            return None                              # a repository without a commit yet
        raise UserError(Issue("--against", 0, 0, "", f"cannot read {folder}/ at git revision {ref!r}: "
                              "not a commit in this repository"))
    commit = sha.stdout.decode().strip()
    if not _git("ls-tree", "-d", "--name-only", commit, "--", folder).stdout.strip():
        return None                                  # the output folder is not committed yet
    # ls-tree paths are relative to the working directory's place in the repository, as `folder` is
    listing = _git("ls-tree", "-r", "-z", "-l", commit, "--", folder)
    if listing.returncode != 0:
        raise UserError(Issue("--against", 0, 0, "", f"cannot read {folder}/ at git revision {ref!r}: "
                              f"{listing.stderr.decode(errors='replace').strip()[:300]}"))
    entries, total = [], 0
    for item in listing.stdout.split(b"\0"):
        if not item:
            continue
        meta, _, name = item.partition(b"\t")
        mode, kind, sha_, size = meta.split()
        path = name.decode("utf-8", "surrogateescape")
        if kind != b"blob" or mode not in (b"100644", b"100755"):
            continue                                 # symlinks, submodules: not output files, never followed
        rel = Path(path)
        if not rel.is_relative_to(folder) or ".." in rel.parts:
            continue
        total += int(size)
        if total > MAX_GIT_TREE_BYTES:
            raise UserError(Issue("--against", 0, 0, "", f"{folder}/ at {ref!r} holds more than "
                                  f"{MAX_GIT_TREE_BYTES} bytes; not a gpuop output folder"))
        entries.append((sha_.decode(), path))
    blobs = _batch_read(entries) if entries else {}
    return {Path(p).relative_to(folder).as_posix(): data for p, data in blobs.items()}


def old_tree(against: str | None, output: Path) -> tuple[Tree, str]:
    """The last compiled output and a note saying what it is when that is not what was asked."""
    if against is not None and against_folder(against):
        return against_tree(Path(against)), ""
    if against is None:
        return tree_from_dir(output), ("" if output.is_dir() else f"gpuop: {output} does not exist yet: everything is new")
    folder = output.as_posix().rstrip("/")
    tree = tree_from_git(against, folder)
    if tree is not None:
        return tree, ""
    if output.is_dir():
        return tree_from_dir(output), f"gpuop: {folder}/ is not in git at {against} yet: comparing against the folder {folder}"
    return {}, f"gpuop: {folder}/ is not in git at {against} yet and the folder does not exist: everything is new"


def new_tree(files: dict, reuse: tuple, output: Path) -> Tree:
    """What synth would leave in `output`: the files it writes plus what it keeps from the last output."""
    tree = {k: (v.encode() if isinstance(v, str) else v) for k, v in files.items()}
    for rel in reuse:
        src = output / rel
        if src.is_dir():
            tree.update({f"{rel}/{k}": v for k, v in tree_from_dir(src).items()})
        elif src.is_file():
            tree[rel] = src.read_bytes()
    return tree


# --- comparing ---------------------------------------------------------------------------------------

def _docs(path: str, data: bytes):
    """The parsed documents of a YAML/JSON file, or None (templates, archives, text)."""
    if "/templates/" in path or not path.endswith((".yaml", ".yml", ".json")):
        return None
    try:
        text = data.decode()
        return [json.loads(text)] if path.endswith(".json") else load_all(text)
    except (ValueError, yaml.YAMLError):
        return None


def _key(o: dict) -> str:
    m = o.get("metadata") or {}
    return f"{o.get('kind')} {m['namespace'] + '/' if m.get('namespace') else ''}{m.get('name')}"


_TEMPLATE = re.compile(r"(^|/)chart/templates/[^/]+\.yaml$")     # a component's template (tests/ aside)


def _template_documents(data: bytes | None) -> dict[str, str]:
    """A chart template's documents by object key, read from the text (the writer's canonical form:
    top-level `kind:`, then `name:` / `namespace:` two spaces under `metadata:`); a document whose
    name is an expression is keyed by its place in the file."""
    out: dict[str, str] = {}
    if data is None:
        return out
    for i, doc in enumerate(re.split(r"(?m)^---\n", data.decode(errors="replace"))):
        found: dict[str, str] = {}
        in_meta = False
        for line in doc.split("\n"):
            if line.startswith("kind: "):
                found.setdefault("kind", line[6:].strip())
            in_meta = line == "metadata:" or (in_meta and (line.startswith("  ") or line.startswith("{{")))
            for k in ("name", "namespace"):
                if in_meta and line.startswith(f"  {k}: "):
                    found.setdefault(k, line[len(k) + 4:].strip().strip("'\""))
        key = (_key({"kind": found["kind"], "metadata": found}) if "kind" in found and "name" in found
               and "{{" not in found["name"] + found.get("namespace", "") else f"document {i + 1}")
        out[key] = doc
    return out


def _template_objects(old: bytes | None, new: bytes | None) -> list[tuple[str, str]]:
    """(op, object key) of every document of a chart template that was added, deleted or changed."""
    a, b = _template_documents(old), _template_documents(new)
    return ([("+" if k not in a else "~", k) for k in b if a.get(k) != b[k]]
            + [("-", k) for k in a if k not in b])


def _is_object(o) -> bool:
    return isinstance(o, dict) and "kind" in o and isinstance(o.get("metadata"), dict)


def _objects(tree: Tree, folder: str) -> dict:
    objs = {}
    for path in sorted(tree):
        if path.startswith(folder + "/") and path.endswith(".yaml") and not path.endswith("kustomization.yaml"):
            for o in load_all(tree[path].decode()):
                objs[_key(o)] = o
    return objs


def _named(items) -> bool:
    return bool(items) and all(isinstance(i, dict) and "name" in i for i in items) \
        and len({i["name"] for i in items}) == len(items)


def field_diff(old, new, path: str = "") -> list[tuple[str, object, object]]:
    if isinstance(old, dict) and isinstance(new, dict):
        out = []
        for k in sorted(set(old) | set(new), key=str):
            p = f"{path}.{k}" if path else str(k)
            if k not in old:
                out.append((p, None, new[k]))
            elif k not in new:
                out.append((p, old[k], None))
            else:
                out += field_diff(old[k], new[k], p)
        return out
    if isinstance(old, list) and isinstance(new, list) and _named(old) and _named(new):
        o, n = {i["name"]: i for i in old}, {i["name"]: i for i in new}
        out = []
        for k in list(o) + [k for k in n if k not in o]:
            p = f"{path}[{k}]"
            if k not in o:
                out.append((p, None, n[k]))
            elif k not in n:
                out.append((p, o[k], None))
            else:
                out += field_diff(o[k], n[k], p)
        if not out and [i["name"] for i in old] != [i["name"] for i in new]:
            out.append((path + " (order)", [i["name"] for i in old], [i["name"] for i in new]))
        return out
    if isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        out = []
        for i, (a, b) in enumerate(zip(old, new)):
            out += field_diff(a, b, f"{path}[{i}]")
        return out
    return [] if old == new else [(path, old, new)]


def _index(tree: Tree) -> dict:
    try:
        return {c["name"]: c for c in json.loads(tree["index.json"])["clusters"]}
    except (KeyError, ValueError, TypeError):
        return {}


def _glob(pattern: str) -> re.Pattern:
    """Go's filepath.Match, which Argo CD's git files generator uses: `*` and `?` stop at `/`."""
    out = ""
    for ch in pattern:
        out += "[^/]*" if ch == "*" else "[^/]" if ch == "?" else re.escape(ch)
    return re.compile(out)


def applicationset_clusters(tree: Tree, root: str) -> set[str]:
    """The clusters the fleet ApplicationSet's git files generators yield from this tree (`root`: the
    output folder's path in the repository, which the generator's paths start with)."""
    names: set[str] = set()
    for path, data in tree.items():
        if not path.startswith(f"{FLEET}/"):
            continue
        # the AppProject lists every cluster (megabytes at 10,000): not parsed when no document of the file
        # can be an ApplicationSet — YAML and JSON spell that kind only literally or through a backslash escape
        if b"ApplicationSet" not in data and b"\\" not in data:
            continue
        for doc in _docs(path, data) or []:
            if not (_is_object(doc) and doc["kind"] == "ApplicationSet"):
                continue
            for gen in doc.get("spec", {}).get("generators", []):
                for f in (gen.get("git") or {}).get("files", []):
                    rx = _glob(f.get("path", ""))
                    for p in tree:
                        if rx.fullmatch(f"{root}/{p}"):
                            try:
                                names.add(json.loads(tree[p])["name"])
                            except (ValueError, KeyError, TypeError):
                                pass
    return names


def _destructive_deletion(rel: str, docs) -> str:
    for o in docs or []:
        if _is_object(o) and o["kind"] in DELIVERY_KINDS:
            what = "NFD uninstalled" if "nfd" in rel.split("/")[-1] or o["metadata"].get("name", "").endswith("-nfd") \
                else "GPU stack deleted"
            return f"{what}: {o['kind']} {o['metadata'].get('name')} is deleted ({rel})"
    return ""


RENAMES = ("spec.releaseName", "spec.targetNamespace", "spec.storageNamespace", "spec.destination.",
           "spec.source.helm.releaseName", "spec.chart.spec.chart")


def _destructive_change(o, fields) -> str:
    if not (_is_object(o) and o["kind"] in DELIVERY_KINDS - {"ApplicationSet"}):
        return ""
    moved = [p for p, _, _ in fields if p.startswith(RENAMES) or p == "spec.destination"]
    return f"release replaced: {', '.join(moved)} changed, so the old release is uninstalled" if moved else ""


def _object_changes(before: dict, after: dict) -> list[Change]:
    out = []
    for k in sorted(set(after) - set(before)):
        out.append(Change("+", k))
    for k in sorted(set(before) - set(after)):
        kind = before[k].get("kind")
        why = ("CRD deleted: every custom resource of this kind is deleted with it" if kind == "CustomResourceDefinition"
               else "Namespace deleted: everything in it is deleted" if kind == "Namespace" else "")
        out.append(Change("-", k, destructive=why))
    for k in sorted(set(before) & set(after)):
        changes = field_diff(before[k], after[k])
        if changes:
            out.append(Change("~", k, changes))
    return out


def _file_changes(old: Tree, new: Tree, prefix: str, skip) -> list[Change]:
    out = []
    olds = {p[len(prefix):]: v for p, v in old.items() if p.startswith(prefix) and not skip(p)}
    news = {p[len(prefix):]: v for p, v in new.items() if p.startswith(prefix) and not skip(p)}

    def objects(rel: str) -> list:
        return _template_objects(olds.get(rel), news.get(rel)) if _TEMPLATE.search(rel) else []

    for rel in sorted(set(news) - set(olds)):
        out.append(Change("+", rel, objects=objects(rel)))
    for rel in sorted(set(olds) - set(news)):
        out.append(Change("-", rel, destructive=_destructive_deletion(rel, _docs(rel, olds[rel])),
                          objects=objects(rel)))
    for rel in sorted(set(olds) & set(news)):
        if olds[rel] == news[rel]:
            continue
        a, b = _docs(rel, olds[rel]), _docs(rel, news[rel])
        fields = []
        if a is not None and b is not None and rel not in ("index.json", "charts/index.yaml"):
            fields = field_diff(a[0] if len(a) == 1 else a, b[0] if len(b) == 1 else b)
        why = _destructive_change(a[0], fields) if a and len(a) == 1 else ""
        out.append(Change("~", rel, fields, destructive=why, objects=objects(rel)))
    return out


def diff_trees(old: Tree, new: Tree, root: str = "dist") -> list[SectionDiff]:
    """Per cluster (sorted by name), then the fleet. `root`: the output folder's path in the repository."""
    # top-level dot files (the ownership marker, locks) are gpuop's bookkeeping, never read by an engine
    old, new = ({k: v for k, v in t.items() if not k.startswith(".")} for t in (old, new))
    oi, ni = _index(old), _index(new)
    names = sorted(set(oi) | set(ni))
    in_set_before, in_set_after = applicationset_clusters(old, root), applicationset_clusters(new, root)
    out = []
    for name in names:
        d = SectionDiff(name, oi.get(name, {}).get("chartVersion"), ni.get(name, {}).get("chartVersion"),
                        exists_before=name in oi, exists_after=name in ni)
        manifests = f"{name}/manifests"
        if name in oi and name not in ni:
            d.changes.append(Change("-", f"{name}/", destructive=(
                f"cluster {name} removed from the output: Argo CD / Flux delete its GPU stack")))
        elif name in in_set_before and name not in in_set_after:
            d.changes.append(Change("-", "ApplicationSet gpuop-fleet element", destructive=(
                f"cluster {name} leaves the ApplicationSet: Argo CD deletes its Application and GPU stack")))
        d.changes += _object_changes(_objects(old, manifests) if name in oi else {},
                                     _objects(new, manifests) if name in ni else {})
        d.changes += _file_changes(
            old if name in oi else {}, new if name in ni else {}, f"{name}/",
            lambda p, m=manifests: p.startswith(m + "/") and not p.endswith("/kustomization.yaml"))
        if name not in ni:                  # one mark for the whole cluster, not one per file it held
            for c in d.changes[1:]:
                c.destructive = ""
        d.changes.sort(key=lambda c: not c.destructive)            # destructive first, else stable
        out.append(d)
    clusters = tuple(f"{n}/" for n in names)
    fleet = SectionDiff(FLEET)
    fleet.changes = _file_changes(old, new, "", lambda p: p.startswith(clusters))
    fleet.changes.sort(key=lambda c: not c.destructive)
    out.append(fleet)
    return out


# --- printing ---------------------------------------------------------------------------------------

def _text(v) -> str:
    """A value as the reviewer reads it, never cut: strings as they are, small structures as one JSON
    line, larger ones as YAML (several lines, shown whole)."""
    if isinstance(v, str):
        return v
    text = json.dumps(v, sort_keys=True)
    return text if len(text) <= 120 else dump_plain(v).rstrip("\n")


def _short(v) -> str:
    """One line of a value: the whole value when it fits on one line (multi-line values: _value_lines)."""
    return _text(v)


def _value_lines(path: str, old, new) -> list[str]:
    """A field's change; a multi-line value (a ConfigMap's config.yaml, a script) as a unified diff of
    the value, whole."""
    a, b = (None if v is None else _text(v) for v in (old, new))
    if "\n" not in (a or "") and "\n" not in (b or ""):
        if old is None:
            return [f"      {path}: added {b}"]
        if new is None:
            return [f"      {path}: removed (was {a})"]
        return [f"      {path}: {a} -> {b}"]
    head = "added" if old is None else "removed" if new is None else "changed"
    body = difflib.unified_diff((a or "").splitlines(), (b or "").splitlines(), "before", "after",
                                lineterm="", n=max(len((a or "").splitlines()), len((b or "").splitlines())))
    return [f"      {path}: {head} (multi-line value):"] + [f"        {x}" for x in list(body)[2:]]


def render(diffs: list[SectionDiff], effects: list | None = None) -> str:
    """The diff text. `effects` (ops/impact.py, of the same two trees): every destructive effect on the
    nodes and the delivery comes first, typed, with its nodes, waves, time bound and trigger, and the
    changes that cause it are marked `!!` below; without, the destructive changes of the files."""
    lines = []
    causes: dict[str, list] = {}
    if effects is not None:
        destructive = [e for e in sorted(effects, key=lambda e: e.order_key()) if e.destructive]
        if destructive:
            lines.append(f"DESTRUCTIVE: {len(destructive)} effect(s) interrupt GPU workloads or delete things on clusters")
            for e in destructive:
                where = "fleet" if e.cluster == FLEET else f"cluster {e.cluster}"
                lines.append(f"  !! {where}: {e.type}: {e.line(scoped=False)}")
                for key in e.objects:
                    causes.setdefault((e.cluster, key), []).append(e.type)
    else:
        destructive = [(d, c) for d in diffs for c in d.destructive]
        if destructive:
            lines.append(f"DESTRUCTIVE: {len(destructive)} change(s) delete things on clusters")
            for d, c in destructive:
                lines.append(f"  !! {'fleet' if d.name == FLEET else 'cluster ' + d.name}: {c.destructive}")
    for d in diffs:
        label = "fleet" if d.name == FLEET else f"cluster {d.name}"
        if d.name != FLEET and not d.exists_before:
            head = f"{label}: new, chart {d.new_version}"
        elif d.name != FLEET and not d.exists_after:
            head = f"{label}: removed (chart {d.old_version} and every object deleted)"
        elif d.empty:
            lines.append(f"{label}: unchanged" + (f" (chart {d.new_version})" if d.name != FLEET else ""))
            continue
        elif d.name == FLEET:
            head = f"{label}:"
        elif d.old_version == d.new_version:
            head = f"{label}: chart {d.new_version} (version unchanged)"
        else:
            head = f"{label}: chart {d.old_version} -> {d.new_version}"
        lines.append(head)
        marked = sorted(d.changes, key=lambda c: not (c.destructive or causes.get((d.name, c.what))))
        for c in marked:
            why = [] if c.destructive else sorted(set(causes.get((d.name, c.what), [])))
            mark = "!! " if c.destructive or why else ""
            lines.append(f"  {mark}{c.op} {c.what}" + (f"  ({', '.join(why)})" if why else ""))
            lines += [f"      {op} {key}" for op, key in c.objects]
            for path, old, new in c.fields:
                lines += _value_lines(path, old, new)
    return "\n".join(lines) + "\n"


def changed(diffs: list[SectionDiff]) -> bool:
    return any(not d.empty for d in diffs)


def compile_trees(paths: list[Path], against: str | None, output: Path, settings_path: Path):
    """(the last output, what the next synth would leave, the settings): the two trees every comparison
    of a change reads (diff, impact, report). A note on what the last output is goes to stderr."""
    from gpuop.pipeline.run import CompileOptions, compile_profiles
    from gpuop.pipeline.write import read_previous
    from gpuop.profile.settings import load_settings

    settings = load_settings(settings_path)
    old, note = old_tree(against, output)
    result = compile_profiles(paths, settings, read_previous(output),
                              CompileOptions(cache_dir=Path(".gpuop-cache"), reuse=False))
    if note:
        print(note, file=sys.stderr)
    new = new_tree(result.files, result.reuse, output)
    from gpuop.ops import moves
    moves.refuse(old, new, paths)             # a move between releases NVIDIA does not support: located exit 2
    return old, new, settings


def run(paths: list[Path], against: str | None, output: Path, settings_path: Path,
        effects=None) -> tuple[str, bool]:
    """The diff text and whether anything would change (for `--exit-code`). `effects`: ops/impact.py's
    impact(old, new, root, diffs), whose destructive effects the text starts with (diff does not import
    impact: impact reads diff's deletions)."""
    old, new, settings = compile_trees(paths, against, output, settings_path)
    root = settings.gitops.path.rstrip("/")
    diffs = diff_trees(old, new, root)
    return render(diffs, effects(old, new, root, diffs) if effects else None), changed(diffs)
