"""The previous output, read for the next compile: its version lock, its index.json (parsed once, or only
where it differs from a base's text), its chart archives and Helm repository index (`read_previous` ->
`Previous`), and the shard marker of a `synth --shard` folder's index.json. Every read is bounded
(profile/bounded.py); a damaged file means nothing is reused, or exit 2 where the caller says the folder
must be gpuop's.
"""

from __future__ import annotations

import json
import os
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from gpuop.errors import Issue, UserError
from gpuop.kube.folders import ENTRY_FOLDERS
from gpuop.kube.yamlio import dump_json
from gpuop.outputs.version import LOCK_FILE
from gpuop.profile.bounded import MAX_JSON_BYTES, parse_json, read_bytes, read_json


# ---- reading the previous output -----------------------------------------------------------------

def read_lock(out: Path) -> dict:
    path = out / LOCK_FILE
    if not os.path.lexists(path):
        return {}
    try:          # bounded, never through a symlink (gpuop.profile.bounded): the previous output is untrusted
        lock = read_json(path, str(path), what="a version lock")
        assert isinstance(lock, dict) and isinstance(lock.get("clusters"), dict)
        return lock
    except (UserError, AssertionError) as exc:
        why = exc.issues[0].message if isinstance(exc, UserError) else ""
        why = f" ({why})" if why and not why.startswith("not valid JSON") else ""
        raise UserError(Issue(str(path), 0, 0, "", f"version lock is not valid JSON of kind VersionLock{why}; "
                              "restore it from git (deleting it restarts every chart at version 0.1.0)"))


def read_index(out: Path, raw: bytes | None = None, *, ours: bool = False, beside: tuple | None = None,
               text: str | None = None) -> dict:
    """index.json of an output folder (or its bytes `raw`), checked for shape: a UserError (exit 2) when it is
    not an Index. `ours`: the file is as the last run wrote it (its stats, pipeline/noop.py), so the bound on
    its nesting is left to json's own recursion guard (a forged record only costs the bounded parse below).
    `beside`: (bytes, parsed document) of a trusted index.json (the review gate's base revision, from git):
    cluster items printed as they are there are taken from its parse, only the others are parsed (bounded),
    so reading a pull request's index.json costs its difference from the base. `text`: `raw` decoded as UTF-8
    (strictly) when the caller has it already (tens of MB at 10,000 clusters, decoded once)."""
    path = Path(out) / "index.json"
    try:          # bounded, never through a symlink (gpuop.profile.bounded): the previous output is untrusted
        raw = read_bytes(path, str(path), limit=MAX_JSON_BYTES, what="an index.json") if raw is None else raw
    except UserError as exc:
        raise UserError(Issue(str(path), 0, 0, "", f"{exc.issues[0].message}; not a gpuop output folder"))
    # one parse per process and content: the review gate reads the same index.json three times (tens of MB
    # at 10,000 clusters); callers must not change the document
    import hashlib

    key = hashlib.sha256(raw).digest()      # sha256 runs at twice blake2b's speed here (CPU instructions)
    if key in _READ_INDEX:
        return _READ_INDEX[key]
    _READ_INDEX.clear()
    with _held(freeze=len(raw) > _LARGE):
        doc = _read_index_doc(path, raw, ours, beside, text)
    _READ_INDEX[key] = doc
    return doc


_LARGE = 4 << 20       # bytes of index.json (some 800 clusters) from which its parse is frozen


@contextmanager
def _held(freeze: bool):
    """A document parsed without the cyclic collector and, when `freeze`, frozen after: a 10,000-cluster index.json
    is millions of containers, and every collection the parse and the rest of the run would trigger walks all of
    them (two thirds of the parse's time, measured). Parsed JSON holds no cycles: reference counting still frees it."""
    import gc

    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if freeze:          # later collections skip what exists now (a long-lived process freezes only large reads)
            gc.freeze()
        if was:
            gc.enable()


def _read_index_doc(path: Path, raw: bytes, ours: bool, beside: tuple | None, text: str | None = None) -> dict:
    doc = None
    if ours:
        try:            # tens of MB at 10,000 clusters: the nesting pre-scan costs more than the parse
            doc = json.loads(text if text is not None else raw.decode("utf-8"))
        except (ValueError, RecursionError):          # UnicodeDecodeError included: the bounded parse says what
            doc = None
        if doc is not None and _index_problem(doc):
            doc = None
    if doc is None and beside is not None:
        doc = _parse_beside(path, raw, *beside)
    return doc if doc is not None else _parse_index(path, raw)


_ITEM_SEP = b"\n    },\n    {\n"
_LIST_OPEN = b'\n  "clusters": [\n    {\n'
_LIST_CLOSE = b"\n    }\n  ],\n"


def _items(raw: bytes) -> tuple[bytes, list[bytes], bytes] | None:
    """index.json as gpuop prints it (json.dumps, indent 2, keys sorted): the text before the cluster list, the
    text of each cluster item (without its braces) and the text after; None when it is not in that form."""
    start, end = raw.find(_LIST_OPEN), raw.rfind(_LIST_CLOSE)
    if start < 0 or end < start + len(_LIST_OPEN) - 1:
        return None
    return (raw[:start], raw[start + len(_LIST_OPEN):end].split(_ITEM_SEP), raw[end + len(_LIST_CLOSE):])


def _parse_beside(path: Path, raw: bytes, base_raw: bytes | None, base_doc: dict | None) -> dict | None:
    """The document parsed item by item, items printed as in the trusted base taken from its parse. Sound on any
    bytes: JSON strings hold no raw line break, so a split at a line-structured `},{` inside a nested value
    leaves pieces whose brackets do not balance, and one piece that does not parse sends the whole document to
    the full bounded parse (None); the text around the list must be the base's, byte for byte."""
    if not isinstance(base_doc, dict) or not isinstance(base_doc.get("clusters"), list) or base_raw is None:
        return None
    if raw == base_raw:
        return None if _index_problem(base_doc) else base_doc
    mine, theirs = _items(raw), _items(base_raw)
    if mine is None or theirs is None or mine[0] != theirs[0] or mine[2] != theirs[2] \
            or len(theirs[1]) != len(base_doc["clusters"]):
        return None
    known = dict(zip(theirs[1], base_doc["clusters"]))
    clusters = []
    for text in mine[1]:
        item = known.get(text)
        if item is None:
            try:
                item = parse_json(str(path), b"{\n" + text + b"\n    }")
            except UserError:
                return None
            if not isinstance(item, dict):
                return None
        clusters.append(item)
    doc = {**base_doc, "clusters": clusters}
    return None if _index_problem(doc) else doc


def _parse_index(path: Path, raw: bytes) -> dict:
    try:
        doc = parse_json(str(path), raw)
    except UserError as exc:
        i = exc.issues[0]
        raise UserError(Issue(i.file, i.line, i.col, "", f"{i.message}; restore it from git or recompile"))
    problem = _index_problem(doc)
    if problem:
        raise UserError(Issue(str(path), 0, 0, problem[0], f"{problem[1]}; not an index.json written by gpuop "
                              "(restore it from git or recompile)"))
    return doc


def _index_problem(doc) -> tuple[str, str] | None:
    if not isinstance(doc, dict) or doc.get("kind") != "Index":
        return "kind", "expected kind: Index"
    if not isinstance(doc.get("clusters"), list):
        return "clusters", "expected a list of clusters"
    for i, c in enumerate(doc["clusters"]):
        if not isinstance(c, dict):
            return f"clusters[{i}]", "expected an object"
        for key in ("name", "chart", "chartVersion", "package", *ENTRY_FOLDERS[1:], "namespace", "kubeVersion"):
            if not isinstance(c.get(key), str) or not c[key]:
                return f"clusters[{i}].{key}", "missing or not a string"
        if "/" in c["name"] or c["name"].startswith("."):
            return f"clusters[{i}].name", "not a cluster folder name"
    if "catalogReads" in doc and not isinstance(doc["catalogReads"], dict):
        return "catalogReads", "expected an object of catalog read sets by digest"
    return None


_PARSED_INDEX: dict = {}
_READ_INDEX: dict = {}


@dataclass(frozen=True)
class Previous:
    """What the next compile carries forward from the last output folder."""
    out: Path
    lock: dict            # versions.lock.json
    index: dict           # cluster name -> index.json entry
    charts: dict          # archive file name -> Path (published versions stay downloadable), verified

    charts_trusted: bool = False   # charts/ as the last run wrote it (stats): index.yaml's digests hold
    charts_doc: dict | None = None  # the Helm repository index to trust instead of charts/index.yaml (the base's)
    # index.json and the lock as gpuop printed them (vouched for by the caller), as outputs/fleet.listing_texts
    # (name -> (item, its text)): the item of a cluster that did not change is copied instead of printed again
    index_known: dict | None = None
    lock_known: dict | None = None
    charts_text: str | None = None  # charts/index.yaml as gpuop printed it (vouched for: trusted, or the base's)
    charts_blocks: dict | None = None   # outputs/charts.blocks of charts_text: chart name -> (archives, text)
    catalog_reads: dict = field(default_factory=dict)   # index.json's catalog read sets (outputs/fleet.reads_table)

    def charts_index(self) -> dict | None:
        """charts/index.yaml, parsed (only when a new chart version must be added to it). Parsed once per
        process and file version (a fleet's index has thousands of entries): the caller must not change it."""
        import yaml             # here, not at the top: the no-op path imports this module and never parses

        if self.charts_doc is not None:
            return self.charts_doc
        if self.charts_text is not None:
            key = ("text", id(self), len(self.charts_text))
            if key not in _PARSED_INDEX:
                _PARSED_INDEX.clear()
                try:
                    _PARSED_INDEX[key] = yaml.load(self.charts_text, Loader=yaml.CSafeLoader)
                except yaml.YAMLError:
                    _PARSED_INDEX[key] = None
            doc = _PARSED_INDEX[key]
            return doc if isinstance(doc, dict) else None

        path = self.out / "charts" / "index.yaml"
        try:
            st = os.stat(path)
            key = (str(path), st.st_ino, st.st_ctime_ns, st.st_size)
            if key not in _PARSED_INDEX:
                _PARSED_INDEX.clear()
                # bounded and never through a symlink; aliases stay shared (the C loader does not copy
                # them) and only two levels are ever walked, so an alias bomb costs nothing here
                raw = read_bytes(path, str(path), limit=MAX_JSON_BYTES, what="a Helm repository index")
                _PARSED_INDEX[key] = yaml.load(raw, Loader=yaml.CSafeLoader)
            doc = _PARSED_INDEX[key]
        except (OSError, UserError, yaml.YAMLError):
            return None
        return doc if isinstance(doc, dict) else None

    def charts_index_ok(self) -> bool:
        """The previous index.yaml can be kept as it is: it exists and lists exactly the archives."""
        if self.charts_blocks is not None:
            return {u for urls, _ in self.charts_blocks.values() for u in urls} == set(self.charts)
        doc = self.charts_index()
        listed = set()
        for versions in ((doc or {}).get("entries") or {}).values():
            for e in versions or ():
                if isinstance(e, dict) and e.get("urls"):
                    listed.add(e["urls"][0])
        return doc is not None and listed == set(self.charts)


def read_previous(out: Path, *, repair: bool = False, charts_unchanged: bool = False,
                  charts_doc: dict | None = None, skip: frozenset = frozenset(), texts: bool = False,
                  base_texts: tuple | None = None, charts_text: str | None = None) -> Previous:
    """`repair`: the folder is known to be gpuop's (check_target passed), so a damaged index.json only
    means nothing is reused; otherwise a present index.json that is not an Index is exit 2.
    `charts_unchanged`: charts/ is as the last run wrote it (its stats, pipeline/noop.py), so the
    archives are listed without reading them again. `charts_doc`: the Helm repository index whose digests
    are trusted (the review gate passes the base revision's, which git proves); `skip`: archives not carried
    (the gate drops those that differ from the base, so the compile packages them again to compare).
    `texts`: index.json and the lock are as the last run wrote them (their stats, pipeline/noop.py), so their
    texts are kept for the next index to copy unchanged items from; `base_texts`: such texts from elsewhere,
    (index.json text, its clusters, lock text, its clusters) — the review gate passes the base revision's,
    which git proves; `charts_text`: the base's charts/index.yaml likewise."""
    from gpuop.outputs import fleet

    out = Path(out)
    lock = read_lock(out)
    index, reads = {}, {}
    index_known = lock_known = None
    if (out / "index.json").exists():
        try:
            raw = text = None
            if texts:
                path = out / "index.json"
                raw = read_bytes(path, str(path), limit=MAX_JSON_BYTES, what="an index.json")
                try:
                    text = raw.decode("utf-8")
                except UnicodeDecodeError:      # the bounded parse says where; no item text is copied
                    text = None
            doc = read_index(out, raw, ours=texts, text=text)
            clusters = doc["clusters"]
            index = {c["name"]: c for c in clusters}
            reads = fleet.reads_table(doc)
            if text is not None:
                index_known = fleet.listing_texts(raw, clusters, "clusters")
        except UserError:
            if not repair:
                raise
    if texts and lock:
        try:
            lock_known = fleet.listing_texts((out / LOCK_FILE).read_bytes(), lock["clusters"], "clusters")
        except OSError:
            pass
    if base_texts is not None:
        index_known = fleet.listing_texts(base_texts[0], base_texts[1], "clusters")
        lock_known = fleet.listing_texts(base_texts[2], base_texts[3], "clusters")
    from gpuop.outputs import charts as charts_mod

    folder = out / "charts"
    if charts_unchanged and charts_text is None and charts_doc is None:
        try:          # as the last run wrote it (stats): its text is what the next index copies blocks from
            path = folder / "index.yaml"
            charts_text = read_bytes(path, str(path), limit=MAX_JSON_BYTES, what="a Helm repository index").decode()
        except (UserError, UnicodeDecodeError):
            charts_text = None
    blocks = charts_mod.blocks(charts_text) if charts_unchanged else None
    charts_text = charts_text if blocks is not None else None
    prev = Previous(out, lock, index, {}, charts_doc=charts_doc, charts_text=charts_text)
    charts = {}
    if folder.is_dir():
        known = {}
        if blocks is not None:     # trusted: the archives it lists are taken as they are (no digest needed)
            known = {u: "" for urls, _ in blocks.values() for u in urls}
        for versions in ((prev.charts_index() or {}).get("entries") or {}).values() if blocks is None else ():
            for e in versions or ():
                if isinstance(e, dict) and e.get("urls") and e.get("digest"):
                    known[e["urls"][0]] = e["digest"]

        # names from one folder read (d_type: a regular file, not a link, without a stat each; ten thousand archives)
        with os.scandir(folder) as it:
            names = sorted(e.name for e in it if e.name.endswith(".tgz") and e.is_file(follow_symlinks=False))
        for name in names:
            f = folder / name
            if f"charts/{name}" in skip:
                continue
            if charts_unchanged and f.name in known:
                charts[f.name] = f
                continue
            data = f.read_bytes()
            if known.get(f.name) not in (None, charts_mod.digest(data)):
                continue            # damaged: not carried (the current version is rebuilt from the lock)
            if f.name not in known:
                try:
                    charts_mod.entry(f.name, data)
                except Exception:   # noqa: BLE001 - not a chart archive: not carried, never served
                    continue
            charts[f.name] = f
    return Previous(out, lock, index, charts, charts_trusted=charts_unchanged, charts_doc=charts_doc,
                    index_known=index_known, lock_known=lock_known, charts_text=charts_text, charts_blocks=blocks,
                    catalog_reads=reads)


# The shard marker lives with the index it is written into: the compile (run.py) writes it, the merge
# (shards.py) reads it, and neither has to import the other.
SHARD_KEY = "shard"      # index.json of a `synth --shard K/N` folder: {"index": K, "count": N}


def mark_shard(files: dict, shard: tuple[int, int]) -> None:
    """Record which shard of how many a `synth --shard K/N` folder holds, in its index.json, so the merge
    can tell a whole fleet from a forgotten shard (whose clusters would otherwise leave the output)."""
    doc = json.loads(files["index.json"])
    doc[SHARD_KEY] = {"index": shard[0], "count": shard[1]}
    files["index.json"] = dump_json(doc)
