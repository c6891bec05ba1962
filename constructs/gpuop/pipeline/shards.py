"""Merge the output folders of `gpuop synth --shard K/N` runs into one output tree.

Each shard folder holds the clusters it built, an index.json listing them and a version lock (the
previous lock, updated for its clusters). The merge takes every cluster folder once (a cluster in two
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
from gpuop.outputs.version import LOCK_FILE
from gpuop.kube.yamlio import dump_json


def merge_shards(shards: list[Path], settings) -> dict[str, bytes]:
    files: dict[str, bytes] = {}
    entries: dict[str, dict] = {}
    lock: dict[str, dict] = {}
    built_lock: dict[str, dict] = {}
    archives: dict[str, bytes] = {}
    for shard in shards:
        try:
            index = json.loads((shard / "index.json").read_text())
            shard_lock = json.loads((shard / LOCK_FILE).read_text())["clusters"]
        except (OSError, ValueError, KeyError) as exc:
            raise UserError(Issue(str(shard), 0, 0, "", f"not a gpuop output folder ({exc})"))
        for entry in index["clusters"]:
            name = entry["name"]
            if name in entries:
                raise UserError(Issue(str(shard), 0, 0, "", f"cluster {name!r} is in more than one shard"))
            entries[name] = entry
            built_lock[name] = shard_lock[name]
            for f in sorted((shard / name).rglob("*")):
                if f.is_file():
                    files[str(f.relative_to(shard))] = f.read_bytes()
        for name, entry in shard_lock.items():
            lock.setdefault(name, entry)
        for tgz in sorted((shard / "charts").glob("*.tgz")):
            data = tgz.read_bytes()
            if archives.setdefault(tgz.name, data) != data:
                raise UserError(Issue(str(tgz), 0, 0, "", "differs from the archive of the same name in another "
                                      "shard; the shards were not compiled from the same previous output"))
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
    return files
