"""A cluster's build-cache key and its provenance from bytes alone: the profile, every parent it extends
(and the digest lock it pins images from), and a salt (the catalogs, the settings, gpuop's code). No
validation and no heavy import: the cache lookup of a fleet, the review gate's selection of the clusters
a change touches (pipeline/gate.py) and the no-op path (pipeline/noop.py) run before anything else is
loaded.

The provenance (`provenance`) is what index.json records per cluster: the profile's path, the digest of
every input file (profile, parents, digest lock) by its path, the catalog facts the compile read (`catalog`:
the paths read and the digest of what they held, gpuop.catalog.reads), the settings' digest and gpuop's
version, and `inputs`, the digest of all of them. It is the committed, reviewable statement "this folder is
what these inputs compile to"; a fresh clone recomputes it by hashing the inputs and the catalog entries
the record names only (`catalog_now`): a catalog change selects the clusters that read what changed."""


from __future__ import annotations

import copy
import hashlib
import json
import os
from pathlib import Path

import yaml

from gpuop.profile.load import parent_problem, profiles_root, read_bytes

_parsed: dict = {}


def _quick_parse(raw: bytes) -> dict:
    """A profile's document without positions (parents are shared: parsed once per run)."""
    if raw not in _parsed:
        if len(_parsed) > 4096:
            _parsed.clear()
        _parsed[raw] = yaml.load(raw, Loader=yaml.CSafeLoader)
    return copy.deepcopy(_parsed[raw])


def _rel(path: Path) -> str:
    """An input's path as index.json records it: relative to the working folder (the project), posix."""
    try:
        return Path(os.path.relpath(os.path.abspath(path))).as_posix()
    except ValueError:
        return Path(path).as_posix()


def walk(f: Path, cache=None) -> tuple[list[tuple[str, bytes, str]], str, bool] | None:
    """The input files of profile `f`: [(path, bytes, sha256 hex)] of the profile, each parent it extends and,
    when one pins images, its digest lock; the cluster's name; whether a digest lock is among them. None when
    anything is unusual (the validating path then says what). Each file's `extends`, name and digest lock
    come from the cache's file index when its bytes were seen before, else from a quick parse."""
    files: list = []
    names: list = []
    seen: list[Path] = []
    locked = False
    path = f
    try:
        while True:
            raw = read_bytes(path)     # regular files within the size limit only: a FIFO must not block here
            digest = hashlib.sha256(raw).hexdigest()
            meta = cache.file_meta(digest) if cache else None
            if meta is None or len(meta) < 3:
                d = _quick_parse(raw)
                name = (d.get("metadata") or {}).get("name")
                lock = ((d.get("spec") or {}).get("images") or {}).get("digestLock") if b"digestLock" in raw else None
                meta = [d.get("extends"), name if isinstance(name, str) else None,
                        lock if isinstance(lock, str) else None]
                if cache:
                    cache.put_file_meta(digest, meta)
            files.append((_rel(path), raw, digest))
            seen.append(path.resolve())
            names.append(meta[1])
            if meta[2]:
                # the digest lock is read relative to the profile that names it (plan/build.pin_digests)
                lock_path = path.parent / meta[2]
                lock_raw = read_bytes(lock_path)
                files.append((_rel(lock_path), lock_raw, hashlib.sha256(lock_raw).hexdigest()))
                locked = True
            elif b"digestLock" in raw:
                return None
            if meta[0] is None:
                break
            if parent_problem(path, meta[0], profiles_root(f)):   # outside the tree: not even read
                return None
            path = path.parent / meta[0]
            if path.resolve() in seen:
                return None
        name = next((n for n in names if n), None)      # the child's name wins over a parent's
        return (files, name, locked) if name else None
    except Exception:  # malformed in any way: let the validating path say what is wrong
        return None


def quick_key(f: Path, salt: str, cache=None, walked=None) -> tuple[str, str] | None:
    """(cache key, cluster name) from the bytes of a profile and its parents, without validation;
    None when anything is unusual or a digest lock is involved (the full path then plans it)."""
    w = walked if walked is not None else walk(f, cache)
    if w is None or w[2]:
        return None
    h = hashlib.sha256(salt.encode())
    for _, raw, _ in w[0]:
        h.update(raw)
    return h.hexdigest(), w[1]


def fleet_inputs(settings_json: str) -> dict:
    """The inputs every cluster shares: the settings, gpuop's version. (The catalog is not one of them: each
    cluster records the catalog facts its compile read.)"""
    from gpuop import __version__

    return {"settings": "sha256:" + hashlib.sha256(settings_json.encode()).hexdigest(),
            "gpuop": __version__}


# a record whose catalog reads are not known (a profile not compiled yet): never equal to a compiled one's
UNKNOWN = {"reads": None, "digest": "-"}


def provenance(files: list[tuple[str, bytes, str]], shared: dict, catalog: dict | None = None) -> dict:
    """A cluster's provenance record (index.json `provenance`): its input files by path, the catalog facts
    its compile read (gpuop.catalog.reads.encode; None: not known), the shared inputs, and `inputs`, the
    digest of all of them (what the review gate compares with the base revision's)."""
    record = {"profile": files[0][0], "files": {p: f"sha256:{d}" for p, _, d in files},
              "catalog": catalog or UNKNOWN, **shared}
    record["inputs"] = inputs_digest(record)
    return record


def catalog_now(record, table: dict) -> dict:
    """The `catalog` section of a recorded provenance as the catalog is now: the same paths, the digest of
    what they hold now. Equal to the recorded one exactly when every fact that compile read is unchanged, so
    (the compile being deterministic) the same profile bytes compile to the same output. `table`: the read
    sets by digest (reads_table of the index.json the record is from); one it does not hold reads as unknown."""
    from gpuop.catalog import (distributions, dra, health_gate, instances, known_issues, licences, metrics,  # noqa: F401
                               mig, operator, reads, xids)        # every module naming a root (tests/test_catalog_selection.py)

    section = record.get("catalog") if isinstance(record, dict) else None
    ref = section.get("reads") if isinstance(section, dict) else None
    paths = table.get(ref) if isinstance(ref, str) else None
    if paths is None:
        return UNKNOWN
    return {"reads": ref, "digest": reads.recheck({"reads": paths})["digest"]}


def pack(section: dict, table: dict) -> dict:
    """A `catalog` section as gpuop.catalog.reads.encode gives it ({"reads": the paths read, "digest"}) as a
    provenance records it: the paths by their digest (outputs/fleet.reads_ref), which `table` maps back to them."""
    from gpuop.outputs.fleet import reads_ref

    paths = section.get("reads")
    if not isinstance(paths, str):
        return section
    ref = reads_ref(paths)
    table[ref] = paths
    return {"reads": ref, "digest": section["digest"]}


def inputs_digest(record: dict) -> str:
    """The digest of a provenance record's inputs (everything but `inputs` itself), order-independent."""
    body = json.dumps({k: v for k, v in record.items() if k != "inputs"}, sort_keys=True, separators=(",", ":"))
    return "sha256:" + hashlib.sha256(body.encode()).hexdigest()


