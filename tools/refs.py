#!/usr/bin/env python3
"""Fetch the upstream reference data the tests compare gpuop against (`make refs`).

The tests check gpuop's output against upstream files: NVIDIA's GPU Operator chart, CRDs, operand assets
and golden renders, the DRA driver's chart, Argo CD and Flux CRDs, the OLM CRDs and the Operator's OLM
bundle. `refs.lock` pins each file: the repository and commit it comes from, its path there, its size and
its sha256. This script downloads every file at its pinned commit, refuses any file whose checksum
differs, and writes the verified files into `.refs/` (ignored by git), where tests/conftest.py finds them
when `GPUOP_REFS` is unset and no `../shared/refs` exists.

    python tools/refs.py                      # from the upstream repositories (raw files at the pinned commits)
    python tools/refs.py --mirror URL         # from a mirror laid out like .refs/ (URL/crds/..., URL/olm/...)
    python tools/refs.py --check DIR          # verify an existing reference folder against refs.lock
    python tools/refs.py --relock DIR         # after moving a pin: rewrite sizes and checksums from DIR

Files already present with the right checksum are not fetched again; a file is written only after its
checksum matched (never a partial or tampered file in the folder). Standard library only: it runs before
any project dependency is installed.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import tempfile
import urllib.error
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
LOCK = REPO / "refs.lock"
DEST = REPO / ".refs"
# A raw file of a public GitHub repository at one commit. A mirror replaces the whole URL: MIRROR/<path>.
UPSTREAM = "https://raw.githubusercontent.com/{repo}/{commit}/{upstream}"


def load_lock(path: Path = LOCK) -> dict:
    return json.loads(path.read_text())


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def url_of(entry: dict, sources: dict, mirror: str | None) -> str:
    if mirror:
        return f"{mirror.rstrip('/')}/{entry['path']}"
    src = sources[entry["source"]]
    return UPSTREAM.format(repo=src["repo"], commit=src["commit"], upstream=entry["upstream"])


def check_file(folder: Path, entry: dict) -> str | None:
    """None when the file is present with the pinned checksum, else what is wrong with it."""
    f = folder / entry["path"]
    if not f.is_file():
        return "missing"
    got = sha256(f.read_bytes())
    return None if got == entry["sha256"] else f"sha256 {got}, pinned {entry['sha256']}"


def download(url: str, timeout: float) -> bytes:
    with urllib.request.urlopen(url, timeout=timeout) as resp:       # noqa: S310 (http(s) URLs only)
        return resp.read()


def fetch(dest: Path, lock: dict, mirror: str | None, timeout: float, out=sys.stderr) -> int:
    """Download every pinned file missing or wrong in `dest`; 0 when the folder is complete."""
    failures: list[str] = []
    fetched = skipped = 0
    for entry in lock["files"]:
        if check_file(dest, entry) is None:
            continue
        url = url_of(entry, lock["sources"], mirror)
        try:
            data = download(url, timeout)
        except (urllib.error.URLError, OSError) as e:
            if entry.get("optional"):       # an older release's chart: its tests skip without it
                print(f"refs: optional {entry['path']} not fetched: {e}", file=out)
                skipped += 1
                continue
            failures.append(f"{entry['path']}: cannot fetch {url}: {e}")
            continue
        got = sha256(data)
        if got != entry["sha256"]:
            failures.append(f"{entry['path']}: checksum mismatch (refused): {url} has sha256 {got}, "
                            f"refs.lock pins {entry['sha256']}")
            continue
        target = dest / entry["path"]
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.")
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, target)
        fetched += 1
    total = len(lock["files"]) - skipped
    if failures:
        print(f"refs: {len(failures)} of {total} files not fetched into {dest}:", file=out)
        for line in failures:
            print(f"  {line}", file=out)
        return 1
    print(f"refs: {total} files verified in {dest} ({fetched} fetched)", file=out)
    return 0


def dump_lock(lock: dict) -> str:
    """refs.lock's text: JSON, one source and one file per line (reviewable diffs)."""
    def one(obj) -> str:
        return json.dumps(obj, ensure_ascii=False)

    sources = [f"  {one(k)}: {one(v)}" for k, v in lock["sources"].items()]
    files = [f"  {one(e)}" for e in lock["files"]]
    return ("{\n" + f' "about": {one(lock["about"])},\n' + ' "sources": {\n' + ",\n".join(sources) + "\n },\n"
            + ' "files": [\n' + ",\n".join(files) + "\n ]\n}\n")


def relock(folder: Path, lock: dict, path: Path, out=sys.stderr) -> int:
    """Rewrite each entry's size and sha256 from `folder` (after a source's commit was moved in the lock)."""
    missing = [e["path"] for e in lock["files"] if not (folder / e["path"]).is_file() and not e.get("optional")]
    if missing:
        print(f"refs: {len(missing)} files missing from {folder}: {', '.join(missing[:5])}", file=out)
        return 1
    for e in lock["files"]:
        if not (folder / e["path"]).is_file():
            continue                        # an optional entry the folder lacks keeps its pin
        data = (folder / e["path"]).read_bytes()
        e["size"], e["sha256"] = len(data), sha256(data)
    path.write_text(dump_lock(lock))
    print(f"refs: {path} rewritten from {folder}", file=out)
    return 0


def check(folder: Path, lock: dict, out=sys.stderr) -> int:
    problems = [(e["path"], p) for e in lock["files"] if (p := check_file(folder, e)) is not None
                and not (p == "missing" and e.get("optional"))]      # optional: checked when present
    for path, p in problems:
        print(f"{folder / path}: {p}", file=out)
    if problems:
        print(f"refs: {len(problems)} of {len(lock['files'])} files differ from refs.lock "
              f"(`make refs` fetches them)", file=out)
        return 1
    print(f"refs: {len(lock['files'])} files in {folder} match refs.lock", file=out)
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="refs", description=__doc__.split("\n\n")[0])
    ap.add_argument("--dest", type=Path, default=DEST, help="where to write the files (default: .refs/)")
    ap.add_argument("--lock", type=Path, default=LOCK, help="the manifest (default: refs.lock)")
    ap.add_argument("--mirror", default=os.environ.get("GPUOP_REFS_MIRROR") or None,
                    help="base URL of a copy laid out like .refs/ (default: $GPUOP_REFS_MIRROR, else upstream)")
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds per download")
    ap.add_argument("--check", type=Path, metavar="DIR", help="only verify DIR against the manifest")
    ap.add_argument("--relock", type=Path, metavar="DIR", help="rewrite the manifest's sizes and checksums from DIR")
    args = ap.parse_args(argv)
    lock = load_lock(args.lock)
    if args.check is not None:
        return check(args.check, lock)
    if args.relock is not None:
        return relock(args.relock, lock, args.lock)
    return fetch(args.dest, lock, args.mirror, args.timeout)


if __name__ == "__main__":
    sys.exit(main())
