"""Merge the output folders of `gpuop synth --shard K/N` runs into one output tree.

Each shard folder holds the clusters it built, an index.json listing them and a version lock (the
previous lock, updated for its clusters: shard runs continue from the committed output, so every
shard carries the chart history and the lock of the whole fleet). The merge takes every cluster folder once (a cluster in two
shards is an error), every packaged chart (the same name must be the same bytes), the lock entries of the shard that built each cluster (the history of other
clusters is the same in every shard) and rebuilds index.json sorted by name — the same bytes a single
run over the whole fleet writes.
"""

from __future__ import annotations

import json
from pathlib import Path

from gpuop import __version__
from gpuop.errors import Issue, UserError
from gpuop.outputs import charts
from gpuop.outputs import fleet
from gpuop.outputs.cluster import tree_digest
from gpuop.pipeline.write import read_index
from gpuop.outputs.version import LOCK_FILE
from gpuop.kube.yamlio import dump_json


def _shard_lock(shard: Path) -> dict:
    path = shard / LOCK_FILE
    try:
        lock = json.loads(path.read_text())["clusters"]
        assert isinstance(lock, dict) and all(isinstance(v, dict) and "version" in v for v in lock.values())
        return lock
    except (OSError, ValueError, KeyError, TypeError, AssertionError) as exc:
        raise UserError(Issue(str(path), 0, 0, "", f"not the version lock of a gpuop output folder "
                              f"({type(exc).__name__}: {exc}); pass the folders `gpuop synth --shard K/N -o DIR` wrote"))


def merge_shards(shards: list[Path], settings) -> tuple[dict[str, bytes], list[str]]:
    """The merged tree's files and its cluster names; a shard that is not gpuop output is exit 2."""
    files: dict[str, bytes] = {}
    entries: dict[str, dict] = {}
    lock: dict[str, dict] = {}
    built_lock: dict[str, dict] = {}
    archives: dict[str, bytes] = {}
    issues: list[Issue] = []
    carried: dict = {}
    for shard in shards:
        if not shard.is_dir():
            issues.append(Issue(str(shard), 0, 0, "", "not a folder; pass the folders `gpuop synth --shard K/N -o DIR` wrote"))
            continue
        try:
            index = read_index(shard)
            shard_lock = _shard_lock(shard)
        except UserError as exc:
            issues += exc.issues
            continue
        for entry in index["clusters"]:
            name = entry["name"]
            if name in entries:
                issues.append(Issue(str(shard), 0, 0, "", f"cluster {name!r} is in more than one shard"))
                continue
            if name not in shard_lock or not (shard / name).is_dir():
                issues.append(Issue(str(shard), 0, 0, "", f"cluster {name!r} is listed in index.json but its "
                                    f"{'lock entry' if name not in shard_lock else 'folder'} is missing"))
                continue
            tree = {}
            for f in sorted((shard / name).rglob("*")):
                if f.is_file():
                    tree[str(f.relative_to(shard))] = f.read_bytes()
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
        for tgz in sorted((shard / "charts").glob("*.tgz")):
            data = tgz.read_bytes()
            if archives.setdefault(tgz.name, data) != data:
                issues.append(Issue(str(tgz), 0, 0, "", "differs from the archive of the same name in another "
                                    "shard; the shards were not compiled from the same previous output"))
    if not issues and Path("profiles").is_dir():
        # a tree digest in the shard's own index.json proves nothing (whoever edits the folder can recompute
        # it): each cluster is checked against the committed output at the base, or compiled (pipeline/gate.py)
        from gpuop.pipeline.gate import verify_folders

        for shard, clusters in carried.items():
            issues += verify_folders(clusters, shard, [Path("profiles")], settings)
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
                                     "clusters": merged}).encode()
    files[LOCK_FILE] = dump_json({"apiVersion": "gpuop/v1alpha1", "kind": "VersionLock",
                                  "clusters": dict(sorted(lock.items()))}).encode()
    return files, sorted(entries)
