"""Writer: packaged charts (`charts/<name>-<version>.tgz`) and the Helm repository `charts/index.yaml`,
so any static HTTP server (or git host's raw view) serves dist/charts as a Helm repository.

`helm package` stamps the current time into every tar header, so its archives differ run to run;
gpuop writes the archive itself in the same layout (`<name>/Chart.yaml`, values, schema, templates)
with fixed headers (mtime 0, uid/gid 0, mode 0644, sorted entries, gzip level 6 — Helm's own, Go's
default — without name or time): the same chart always gives the same bytes, on any machine. Archives of earlier versions are carried forward
from the previous output (a version's content never changes, the lock guarantees it), and index.yaml
lists every version, newest first, with each archive's sha256 digest. No timestamps, so the index is
reproducible too.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import re
import tarfile

from gpuop.catalog import versions
from gpuop.kube.yamlio import dump_plain

ORDER = {"Chart.yaml": 0, "values.yaml": 1, "values.schema.json": 2}


def archive(name: str, files: dict[str, str]) -> bytes:
    """A chart archive from the chart's files (paths relative to the chart folder)."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        for path in sorted(files, key=lambda p: (ORDER.get(p, 3), p)):
            data = files[path].encode("utf-8")
            info = tarfile.TarInfo(f"{name}/{path}")
            info.size, info.mtime, info.mode, info.uid, info.gid = len(data), 0, 0o644, 0, 0
            info.uname = info.gname = ""
            tar.addfile(info, io.BytesIO(data))
    out = io.BytesIO()
    # level 6, as Helm (Go's default): level 9 took 3x the time for 2 % fewer bytes
    with gzip.GzipFile(filename="", mode="wb", fileobj=out, mtime=0, compresslevel=6) as gz:
        gz.write(raw.getvalue())
    return out.getvalue()


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def entry(file: str, data: bytes) -> dict:
    """The index entry of one archive, read from its own Chart.yaml."""
    import yaml

    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        member = next(m for m in tar.getmembers() if m.name.endswith("/Chart.yaml") and m.name.count("/") == 1)
        meta = yaml.safe_load(tar.extractfile(member).read())
    return {"version": str(meta["version"]), "appVersion": str(meta.get("appVersion", "")),
            "kubeVersion": meta.get("kubeVersion", ""), "description": meta.get("description", ""),
            "digest": digest(data), "file": file, "name": meta["name"]}


def entry_of_chart(file: str, data: bytes, chart_yaml: str) -> dict:
    """The index entry of an archive just made from a chart whose Chart.yaml text is at hand (no unpacking)."""
    import yaml

    meta = yaml.load(chart_yaml, Loader=yaml.CSafeLoader)
    return {"version": str(meta["version"]), "appVersion": str(meta.get("appVersion", "")),
            "kubeVersion": meta.get("kubeVersion", ""), "description": meta.get("description", ""),
            "digest": digest(data), "file": file, "name": meta["name"]}


def entries_from(archives: dict, index: dict | None = None, made: dict | None = None,
                 trusted: bool = False) -> dict[str, list[dict]]:
    """Index entries of archives (name -> bytes or Path). `made`: entries of the archives made in this run;
    entries of a previous index.yaml are reused for archives whose digest they match; any other archive
    is opened and read. `trusted`: the archives (Paths) are as the run that wrote `index` left them
    (their stats, pipeline/noop.py), so its entries are taken without reading them again."""
    known = {}
    for name, versions in ((index or {}).get("entries") or {}).items():
        for e in versions:
            if e.get("urls"):
                known[e["urls"][0]] = {"version": str(e["version"]), "appVersion": str(e.get("appVersion", "")),
                                       "kubeVersion": e.get("kubeVersion", ""), "description": e.get("description", ""),
                                       "digest": e.get("digest"), "file": e["urls"][0], "name": name}
    out: dict[str, list[dict]] = {}
    for file in sorted(archives):
        if made and file in made:
            out.setdefault(made[file]["name"], []).append(made[file])
            continue
        data = archives[file]
        e = known.get(file)
        if e is not None and trusted and hasattr(data, "read_bytes"):
            out.setdefault(e["name"], []).append(e)
            continue
        data = data.read_bytes() if hasattr(data, "read_bytes") else data
        if e is None or e["digest"] != digest(data):
            e = entry(file, data)
        out.setdefault(e["name"], []).append(e)
    return out


HEADER = "# Helm repository index of gpuop's packaged charts (`helm repo add NAME URL-of-this-folder`).\n"


def _versions(name: str, entries: list[dict]) -> list[dict]:
    return [{"apiVersion": "v2", "name": name, "version": e["version"], "appVersion": e["appVersion"],
             "kubeVersion": e["kubeVersion"], "description": e["description"], "type": "application",
             "digest": e["digest"], "urls": [e["file"]]}
            for e in sorted(entries, key=lambda e: versions.key(e["version"]), reverse=True)]


def index_yaml(entries: dict[str, list[dict]]) -> str:
    """entries: chart name -> [{version, appVersion, kubeVersion, description, digest, file}]."""
    doc = {"apiVersion": "v1", "entries": {}}
    for name in sorted(entries):
        doc["entries"][name] = _versions(name, entries[name])
    return HEADER + dump_plain(doc)


# ---- the Helm repository index at the cost of the change ------------------------------------------------
# index.yaml lists every chart version of the fleet (megabytes at 10,000 clusters); parsing it and printing
# it again with PyYAML costs seconds. Each chart's block is self-contained (block style, no anchors), so the
# index is the header and the blocks in name order: a block whose archives did not change is copied from the
# previous index's text, which the caller vouches for (as the last run wrote it, or the base revision's in
# git); only the blocks of charts with a new or dropped archive are parsed and printed again.

_TOP = "apiVersion: v1\nentries:\n"
_BLOCK = re.compile(r"^  (?=[^ -])", re.M)
_HEAD = re.compile(r"  ([a-z0-9][a-z0-9.-]*):\n")
_URL = re.compile(r"^    - (.+)$", re.M)


def blocks(text: str | None) -> dict | None:
    """chart name -> (archive files, block text) of an index.yaml index_yaml wrote; None when the text is not
    laid out so (then the index is parsed and printed whole)."""
    if not text or not text.startswith(HEADER + _TOP):
        return None
    body = text[len(HEADER) + len(_TOP):]
    starts = [m.start() for m in _BLOCK.finditer(body)]
    if not starts or starts[0] != 0 or not body.endswith("\n"):
        return None
    out = {}
    for a, b in zip(starts, starts[1:] + [len(body)]):
        block = body[a:b]
        head = _HEAD.match(block)
        if head is None or head.group(1) in out:
            return None
        out[head.group(1)] = (tuple(_URL.findall(block)), block)
    return out


def splice_index(archives: dict, known: dict, made: dict | None = None, trusted: bool = False) -> str | None:
    """index_yaml(entries_from(archives, ...)) with the blocks of `known` (blocks()) copied where a chart's
    archives are the same; None when an archive is not accounted for (the caller prints the whole index)."""
    import yaml

    owner = {u: name for name, (urls, _) in known.items() for u in urls}
    by_name: dict[str, set] = {}
    for file in archives:
        name = made[file]["name"] if made and file in made else owner.get(file)
        if name is None:
            return None
        by_name.setdefault(name, set()).add(file)
    if not by_name:
        return None
    parts = []
    for name in sorted(by_name):
        files = by_name[name]
        block = known.get(name)
        if block is not None and set(block[0]) == files and not (made and files & set(made)):
            parts.append(block[1])
            continue
        previous = yaml.load(_TOP + block[1], Loader=yaml.CSafeLoader) if block is not None else None
        mine = entries_from({f: archives[f] for f in files}, previous, made, trusted=trusted)
        if set(mine) != {name}:      # an archive naming another chart: the whole index decides
            return None
        parts.append(dump_plain({"entries": {name: _versions(name, mine[name])}})[len("entries:\n"):])
    return HEADER + _TOP + "".join(parts)
