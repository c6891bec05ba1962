"""The build cache: content-addressed, so unchanged clusters are not rebuilt.

A cluster's key is the digest of everything its output depends on: the bytes of its profile and of
every parent it extends, the catalogs, the settings and gpuop's own code (the version and every
source and data file of the package). Change a catalog or a parent profile and exactly the clusters
that depend on it get new keys.

Entries are two files per cluster under `<root>/builds/`, each a checksum line over the rest (encode_entry):
the header (index entry, digests, file sizes; JSON) and the files, read only when they must be written (a
JSON line naming each file and its length, then the texts as they are: printing megabytes of YAML as JSON
strings, twice for a checksum around them, was a good part of a cold compile). An entry whose checksum does
not match (corrupted, truncated, edited) is removed and rebuilt, never used; one whose checksum matches is
still only a hint (pipeline/run.py uses it when the previous output vouches for the same tree). Deleting the
cache only costs time.

Writers hold `<root>/.lock` (pipeline/write.locked): a second synth on the same cache exits 2 naming
the holder. Each file is written to a temporary name and renamed, so a reader (`gpuop diff`) or a
killed writer never sees a half-written entry; a failed write (a full disk) removes its temporary file.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from functools import lru_cache
from pathlib import Path

from gpuop import __version__

PACKAGE = Path(__file__).resolve().parents[1]   # the whole gpuop package: any code change invalidates


@lru_cache(maxsize=1)
def code_digest() -> str:
    h = hashlib.sha256(__version__.encode())
    for f in sorted(PACKAGE.rglob("*")):
        if f.is_file() and f.suffix in (".py", ".yaml", ".sh"):
            h.update(str(f.relative_to(PACKAGE)).encode() + b"\0" + f.read_bytes())
    return h.hexdigest()


def _atomic_write(path: Path, text: str | bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(text.encode() if isinstance(text, str) else text)
        os.replace(tmp, path)
    except BaseException:           # a full disk: no truncated temporary file stays behind
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


MAGIC = b"gpuop-cache/2 "
_BODY = len(MAGIC) + 65          # the magic, the hex digest and its newline


def encode_entry(value: dict, files: dict | None = None) -> bytes:
    """One cache file: `gpuop-cache/2 <sha256 of the body>\n`, then the body: `value` as one line of JSON (with,
    when `files` is given, `"files": [[path, bytes], ...]`), a newline, and the files' texts one after another."""
    texts = [t.encode() for t in files.values()] if files is not None else []
    head = value if files is None else {**value, "files": [[p, len(t)] for p, t in zip(files, texts)]}
    body = b"".join([json.dumps(head, sort_keys=True, separators=(",", ":")).encode(), b"\n", *texts])
    return MAGIC + hashlib.sha256(body).hexdigest().encode() + b"\n" + body


def decode_entry(data: bytes, files: bool = False) -> dict:
    """What encode_entry wrote, `files` as {path: text} when it was given; ValueError when the file is not one,
    its checksum does not match or the lengths do not add up."""
    if not data.startswith(MAGIC) or data[_BODY - 1:_BODY] != b"\n":
        raise ValueError("not a gpuop cache entry")
    if hashlib.sha256(memoryview(data)[_BODY:]).hexdigest().encode() != data[len(MAGIC):_BODY - 1]:
        raise ValueError("checksum mismatch")
    line = data.index(b"\n", _BODY)
    value = json.loads(data[_BODY:line])
    if not isinstance(value, dict):
        raise ValueError("not an object")
    if files:
        out, pos = {}, line + 1
        for path, size in value["files"]:
            if not isinstance(path, str) or not isinstance(size, int) or size < 0:
                raise ValueError("malformed file list")
            out[path] = data[pos:pos + size].decode("utf-8")
            pos += size
        if pos != len(data):
            raise ValueError("the file list does not add up to the entry")
        value["files"] = out
    elif line + 1 != len(data):
        raise ValueError("trailing bytes")
    return value


class BuildCache:
    def __init__(self, root: Path | None):
        self.root = Path(root) if root else None
        self.hits = self.misses = self.rejected = 0
        self._meta: dict | None = None
        self._meta_dirty = False

    # per profile file digest: its `extends` reference and metadata.name, so computing a cluster's key
    # needs no YAML parsing for files seen before (one small entry, `file-meta`, for the whole fleet)
    def file_meta(self, file_digest: str) -> list | None:
        if not self.root:
            return None
        if self._meta is None:
            self._meta = self._read(self.root / "file-meta") or {}
        return self._meta.get(file_digest)

    def put_file_meta(self, file_digest: str, meta: list) -> None:
        if self.root and self._meta is not None and self._meta.get(file_digest) != meta:
            self._meta[file_digest] = meta
            self._meta_dirty = True

    def flush(self) -> None:
        if self.root and self._meta_dirty:
            self._write(self.root / "file-meta", self._meta)
            self._meta_dirty = False

    def _read(self, path: Path, files: bool = False) -> dict | None:
        try:
            return decode_entry(path.read_bytes(), files)
        except FileNotFoundError:
            return None
        except (ValueError, KeyError, TypeError, OSError):     # UnicodeDecodeError and JSON errors are ValueErrors
            self.rejected += 1
            path.unlink(missing_ok=True)
            return None

    def _write(self, path: Path, value: dict, files: dict | None = None) -> None:
        _atomic_write(path, encode_entry(value, files))

    def lock_path(self) -> Path | None:
        return self.root / ".lock" if self.root else None

    def _path(self, key: str, part: str) -> Path:
        return self.root / "builds" / key[:2] / f"{key}.{part}"

    def get(self, key: str) -> dict | None:
        """The header of a cluster's build (everything but its files), or None."""
        if not self.root:
            return None
        value = self._read(self._path(key, "head"))
        if value is None or value.get("key") != key:
            self.misses += 1
            return None
        self.hits += 1
        return value

    def get_files(self, key: str) -> dict | None:
        """The build's files (read only when they must be written), or None if missing or corrupt."""
        value = self._read(self._path(key, "files"), files=True) if self.root else None
        return value["files"] if value and value.get("key") == key else None

    def put(self, key: str, head: dict, files: dict) -> None:
        if self.root:
            self._write(self._path(key, "files"), {"key": key}, files)
            self._write(self._path(key, "head"), {**head, "key": key})

    # a streaming compile writes each entry as its cluster is built, under a pending name, and makes them
    # all visible only once the whole compile succeeded: a failed compile still caches nothing
    _pending: list | None = None

    def put_pending(self, key: str, head: dict, files: dict) -> None:
        if not self.root:
            return
        if self._pending is None:
            self._pending = []
        for part, value, texts in (("files", {"key": key}, files), ("head", {**head, "key": key}, None)):
            final = self._path(key, part)
            pending = final.with_name(final.name + ".pending")
            self._write(pending, value, texts)
            self._pending.append((pending, final))

    def commit_pending(self) -> None:
        for pending, final in self._pending or ():
            os.replace(pending, final)
        self._pending = None

    def discard_pending(self) -> None:
        for pending, _ in self._pending or ():
            try:
                pending.unlink()
            except OSError:
                pass
        self._pending = None
