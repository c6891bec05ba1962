"""A cluster's build-cache key from bytes alone: the profile, every parent it extends, and a salt (the
catalogs, the settings, gpuop's code). No validation and no heavy import: the cache lookup of a fleet
and the no-op path (pipeline/noop.py) run before anything else is loaded."""

from __future__ import annotations

import copy
import hashlib
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


def quick_key(f: Path, salt: str, cache=None) -> tuple[str, str] | None:
    """(cache key, cluster name) from the bytes of a profile and its parents, without validation;
    None when anything is unusual (the full path then reports it). Each file's `extends` and name
    come from the cache's file index when its bytes were seen before, else from a quick parse."""
    h = hashlib.sha256(salt.encode())
    names: list = []
    seen: list[Path] = []
    path = f
    try:
        while True:
            raw = read_bytes(path)     # regular files within the size limit only: a FIFO must not block here
            if b"digestLock" in raw:   # the digest lock is an input these bytes do not show: plan it (full path)
                return None
            h.update(raw)
            digest = hashlib.sha256(raw).hexdigest()
            meta = cache.file_meta(digest) if cache else None
            if meta is None:
                d = _quick_parse(raw)
                name = (d.get("metadata") or {}).get("name")
                meta = [d.get("extends"), name if isinstance(name, str) else None]
                if cache:
                    cache.put_file_meta(digest, meta)
            seen.append(path.resolve())
            names.append(meta[1])
            if meta[0] is None:
                break
            if parent_problem(path, meta[0], profiles_root(f)):   # outside the tree: not even read
                return None
            path = path.parent / meta[0]
            if path.resolve() in seen:
                return None
        name = next((n for n in names if n), None)      # the child's name wins over a parent's
        return (h.hexdigest(), name) if name else None
    except Exception:  # malformed in any way: let the validating path say what is wrong
        return None


