"""Merge the output folders of `gpuop synth --shard K/N` runs into one output tree.

Each shard folder holds the clusters it built, an index.json listing them and a version lock (the
previous lock, updated for its clusters). The merge takes every cluster folder once (a cluster in two
shards is an error), the lock entries of the shard that built each cluster (the history of other
clusters is the same in every shard) and rebuilds index.json sorted by name — the same bytes a single
run over the whole fleet writes.
"""

from __future__ import annotations

import json
from pathlib import Path

from . import __version__
from .errors import Issue, UserError
from .outputs.version import LOCK_FILE
from .yamlio import dump_json


def merge_shards(shards: list[Path]) -> dict[str, bytes]:
    files: dict[str, bytes] = {}
    entries: dict[str, dict] = {}
    lock: dict[str, dict] = {}
    built_lock: dict[str, dict] = {}
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
    lock.update(built_lock)
    files["index.json"] = dump_json({"apiVersion": "gpuop/v1alpha1", "kind": "Index", "gpuop": __version__,
                                     "clusters": [entries[n] for n in sorted(entries)]}).encode()
    files[LOCK_FILE] = dump_json({"apiVersion": "gpuop/v1alpha1", "kind": "VersionLock",
                                  "clusters": dict(sorted(lock.items()))}).encode()
    return files
