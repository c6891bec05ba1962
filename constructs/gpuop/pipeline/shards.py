"""Merge the output folders of `gpuop synth --shard K/N` runs into one output tree.

Each shard folder holds the clusters it built, an index.json listing them and a version lock (the
previous lock, updated for its clusters: shard runs continue from the committed output, so every
shard carries the chart history and the lock of the whole fleet). The merge takes every cluster folder once (a cluster in two
shards is an error), every packaged chart (the same name must be the same bytes), the lock entries of the shard that built each cluster (the history of other
clusters is the same in every shard) and rebuilds index.json sorted by name — the same bytes a single
run over the whole fleet writes.

Shard folders are untrusted input (gpuop.profile.bounded): no symlink is followed (a cluster folder or a file
that is a link is refused), only regular files are read, each within its folder; every shard must be
of this gpuop version, and every shard K of the same N must be there exactly once, so a forgotten
shard cannot remove its clusters from the merged fleet.
"""

from __future__ import annotations

import os
from pathlib import Path

from gpuop import __version__
from gpuop.profile.bounded import MAX_TREE_BYTES, MAX_TREE_ENTRIES, read_bytes, read_json, read_tree, walk
from gpuop.errors import Issue, UserError
from gpuop.outputs import charts
from gpuop.outputs import fleet
from gpuop.outputs.cluster import tree_digest
from gpuop.pipeline.previous import SHARD_KEY, read_index
from gpuop.outputs.version import LOCK_FILE
from gpuop.kube.yamlio import dump_json


def _shard_lock(shard: Path) -> dict:
    path = shard / LOCK_FILE
    try:
        lock = read_json(path, str(path), what="a version lock")["clusters"]
        assert isinstance(lock, dict) and all(isinstance(v, dict) and "version" in v for v in lock.values())
        return lock
    except UserError as exc:
        raise UserError(Issue(str(path), 0, 0, "", f"not the version lock of a gpuop output folder "
                              f"({exc.issues[0].message}); pass the folders `gpuop synth --shard K/N -o DIR` wrote"))
    except (KeyError, TypeError, AssertionError) as exc:
        raise UserError(Issue(str(path), 0, 0, "", f"not the version lock of a gpuop output folder "
                              f"({type(exc).__name__}: {exc}); pass the folders `gpuop synth --shard K/N -o DIR` wrote"))


def _shard_of(shard: Path, index: dict) -> tuple[int, int] | Issue:
    """(K, N) from a shard's index.json, or the issue that it is not one shard of this gpuop."""
    if index.get("gpuop") != __version__:
        return Issue(str(shard / "index.json"), 0, 0, "gpuop", f"compiled by gpuop {str(index.get('gpuop'))[:40]}, "
                     f"this is gpuop {__version__}; compile every shard with the same gpuop")
    mark = index.get(SHARD_KEY)
    if not (isinstance(mark, dict) and type(mark.get("index")) is int and type(mark.get("count")) is int
            and 1 <= mark["index"] <= mark["count"] <= 1024):
        return Issue(str(shard / "index.json"), 0, 0, SHARD_KEY, "not the output of `gpuop synth --shard K/N` (no "
                     "shard K of N recorded); merge only the folders of one sharded compile")
    return mark["index"], mark["count"]


def merge_shards(shards: list[Path], settings) -> tuple[dict[str, bytes], list[str]]:
    """The merged tree's files and its cluster names; a shard that is not gpuop output is exit 2, and so
    is a fleet with a shard missing (its clusters would leave the output and GitOps)."""
    files: dict[str, bytes] = {}
    entries: dict[str, dict] = {}
    lock: dict[str, dict] = {}
    built_lock: dict[str, dict] = {}
    archives: dict[str, bytes] = {}
    issues: list[Issue] = []
    seen: dict[int, Path] = {}
    counts: set[int] = set()
    budget = [MAX_TREE_ENTRIES, MAX_TREE_BYTES]
    carried: dict = {}
    reads: dict = {}            # the shards' catalog read sets by digest (outputs/fleet.READS)
    for shard in shards:
        if os.path.islink(shard) or not shard.is_dir():
            issues.append(Issue(str(shard), 0, 0, "", ("is a symlink; links are not followed" if os.path.islink(shard)
                                                      else "not a folder") + "; pass the folders `gpuop synth "
                                "--shard K/N -o DIR` wrote"))
            continue
        try:
            index = read_index(shard)
            shard_lock = _shard_lock(shard)
        except UserError as exc:
            issues += exc.issues
            continue
        which = _shard_of(shard, index)
        if isinstance(which, Issue):
            issues.append(which)
            continue
        k, n = which
        counts.add(n)
        reads.update(fleet.reads_table(index))
        if k in seen:
            issues.append(Issue(str(shard), 0, 0, "", f"is shard {k}/{n} again (also {seen[k]})"))
            continue
        seen[k] = shard
        for entry in index["clusters"]:
            name = entry["name"]
            if name in entries:
                issues.append(Issue(str(shard), 0, 0, "", f"cluster {name!r} is in more than one shard"))
                continue
            if name not in shard_lock or not os.path.lexists(shard / name):
                issues.append(Issue(str(shard), 0, 0, "", f"cluster {name!r} is listed in index.json but its "
                                    f"{'lock entry' if name not in shard_lock else 'folder'} is missing"))
                continue
            try:        # no symlink followed, only regular files, every path inside the cluster folder
                tree = read_tree(shard / name, str(shard / name), prefix=f"{name}/", budget=budget)
            except UserError as exc:
                issues += exc.issues
                continue
            if entry.get("treeDigest") and tree_digest(tree) != entry["treeDigest"]:
                issues.append(Issue(str(shard / name), 0, 0, "", "does not match its digest in the shard's "
                                    "index.json (edited after the shard was compiled); compile the shard again"))
                continue
            entries[name] = entry
            built_lock[name] = shard_lock[name]
            files.update(tree)
            carried.setdefault(shard, {})[name] = (entry, tree)
        for name, entry in shard_lock.items():
            lock.setdefault(name, entry)
        if not os.path.lexists(shard / "charts"):
            continue
        try:
            packaged = [(rel, p) for rel, p in walk(shard / "charts", str(shard / "charts"), budget=budget)
                        if "/" not in rel and rel.endswith(".tgz")]
        except UserError as exc:
            issues += exc.issues
            continue
        for rel, tgz in packaged:
            try:
                data = read_bytes(tgz, str(tgz), what="a chart archive")
                charts.entry(rel, data)
            except UserError as exc:
                issues += exc.issues
                continue
            except Exception:   # noqa: BLE001 - whatever the archive reader raises: not a chart archive
                issues.append(Issue(str(tgz), 0, 0, "", "not a chart archive (a gzip'd tar with Chart.yaml); "
                                    "compile the shard again"))
                continue
            if archives.setdefault(rel, data) != data:
                issues.append(Issue(str(tgz), 0, 0, "", "differs from the archive of the same name in another "
                                    "shard; the shards were not compiled from the same previous output"))
    if len(counts) > 1:
        issues.append(Issue(str(shards[0]), 0, 0, "", f"the shards split the fleet in different counts "
                            f"({', '.join(str(c) for c in sorted(counts))}); merge the folders of one sharded compile"))
    elif counts:
        n = counts.pop()
        missing = [k for k in range(1, n + 1) if k not in seen]
        if missing:
            issues.append(Issue("merge", 0, 0, "", f"shard{'s' if len(missing) > 1 else ''} "
                                f"{', '.join(f'{k}/{n}' for k in missing)} missing; the merged output would remove "
                                "their clusters from the fleet; pass every shard's folder"))
    if not issues and Path("profiles").is_dir():
        # a tree digest in the shard's own index.json proves nothing (whoever edits the folder can recompute
        # it): each cluster is checked against the committed output at the base, or compiled (pipeline/gate.py)
        from gpuop.pipeline.gate import verify_folders

        for shard, clusters in carried.items():
            issues += verify_folders(clusters, shard, [Path("profiles")], settings, reads)
    if issues:
        raise UserError(issues)
    lock.update(built_lock)
    for name, data in archives.items():
        files[f"charts/{name}"] = data
    files["charts/index.yaml"] = charts.index_yaml(charts.entries_from(archives)).encode()
    merged = [entries[n] for n in sorted(entries)]
    for path, text in fleet.write(settings.gitops, merged).items():
        if path.startswith("fleet/"):
            files[path] = text.encode()
    files["index.json"] = dump_json({"apiVersion": "gpuop/v1alpha1", "kind": "Index", "gpuop": __version__,
                                     fleet.READS: fleet.used_reads(merged, reads), "clusters": merged}).encode()
    files[LOCK_FILE] = dump_json({"apiVersion": "gpuop/v1alpha1", "kind": "VersionLock",
                                  "clusters": dict(sorted(lock.items()))}).encode()
    return files, sorted(entries)
