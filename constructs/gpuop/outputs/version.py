"""Chart versions from content: the same chart content keeps its version, new content gets a new one.

The lock file (dist/versions.lock.json) records, per cluster, the last version, the digest of the
chart content it was given to, and the inputs that make a change "minor" (stack release, driver
branch, component image versions). New content bumps the patch number, or the minor number when one of
those changed. Entries are never dropped, so a cluster removed and added back continues its numbering
and never reuses a version with other content. No `+` build metadata (OCI tags cannot carry it).
"""

from __future__ import annotations

import hashlib

LOCK_FILE = "versions.lock.json"
VERSION_PLACEHOLDER = "0.0.0-gpuop.unversioned"   # stands for the chart version until assemble assigns it
FIRST = "0.1.0"


def content_digest(files: dict[str, str]) -> str:
    h = hashlib.sha256()
    for path in sorted(files):
        h.update(path.encode() + b"\0" + files[path].encode() + b"\0")
    return "sha256:" + h.hexdigest()


def next_version(previous: dict | None, digest: str, minor_key: str) -> str:
    if previous is None:
        return FIRST
    if previous["digest"] == digest:
        return previous["version"]
    major, minor, patch = (int(x) for x in previous["version"].split("."))
    if previous.get("minorKey") != minor_key:
        return f"{major}.{minor + 1}.0"
    return f"{major}.{minor}.{patch + 1}"


def minor_key(plan) -> str:
    branches = sorted({v.version.split(".")[0] for v in getattr(plan, "driver_variants", ())}
                      | ({plan.driver_version.split(".")[0]} if plan.driver_version else set()))
    branch = "+".join(branches) or "none"
    images = ",".join(f"{k}={v.path}:{v.tag}" for k, v in plan.images if k != "driver")
    return hashlib.sha256(f"{plan.release}|{branch}|{images}".encode()).hexdigest()[:16]
