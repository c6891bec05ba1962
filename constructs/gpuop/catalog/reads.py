"""Which catalog facts a compile reads: the record a cluster's provenance keeps, so that a catalog change
selects exactly the clusters that read what changed (pipeline/keys.py, pipeline/gate.py).

The dependency is taken from what the compile does, not from a list kept by hand: every catalog model is a
`Tracked` model, and while `recording()` is active each field a compile reads through any object of a loaded
catalog is noted with its access path from the catalog's root and a digest of what it read:
- a field holding a scalar, or a list / mapping of scalars: the digest of the value;
- a field holding another catalog object: a marker (that object's own fields are noted when they are read);
- a field holding a list or mapping of catalog objects: its shape (keys or length, with each element's
  marker), so adding, removing or reordering entries is seen by every compile that read the collection;
- the whole object (its `__dict__`: a dump, a copy, a comparison, a hash): the digest of all of it.
Plain-data access points (`driver_extras()`, the known issues, the operator chart's defaults) note what they
return when they are called. `encode` turns a record into what provenance keeps (the paths read, and one
digest of every path with its answer); `recheck` evaluates the same paths against the catalog as it is now,
so a record is checked by hashing the catalog only: the same answers mean the compile reads the same facts
and, being deterministic, writes the same output.

Derived values memoized outside the catalog would replay without reads: `memo` (an lru_cache that notes
again, on every hit, what the first call read) is what such a cache uses.

Imports nothing of the project (catalog rule).
"""

from __future__ import annotations

import hashlib
import json
import re
from contextlib import contextmanager
from functools import lru_cache, wraps

from pydantic import BaseModel

ABSENT = "-"                       # the answer for a path that does not resolve
NODE = "o"                         # the answer for a catalog object (its fields are answered on their own)
WHOLE = "*"                        # the path step meaning "every field of the object"
KEYS = ("name", "branch", "version", "id")   # the field naming an element of a list (else its position)

_stack: list[dict] = []            # the active records, innermost last
_paths: dict[int, tuple] = {}      # id(catalog object) -> its path from its root
_alive: list = []                  # the registered roots, kept so their objects' ids stay theirs
_roots: dict[str, object] = {}     # root name -> loader (no argument) or resolver (one argument: the next step)
_fields: dict[type, frozenset] = {}
_answers: dict[tuple, str] = {}    # (id(catalog object), field) -> the answer a read of it notes
_quiet = [0]                       # > 0: reads made by this module itself are not noted


def _digest(value) -> str:
    body = json.dumps(_plain(value), sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(body.encode()).hexdigest()[:24]


def _plain(value):
    if isinstance(value, BaseModel):
        _quiet[0] += 1
        try:
            return {"~": type(value).__name__, **value.model_dump(mode="json", by_alias=True)}
        finally:
            _quiet[0] -= 1
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def _key_field(v) -> str | None:
    return next((k for k in KEYS if k in type(v).model_fields), None) if isinstance(v, BaseModel) else None


def _elements(seq) -> list:
    """The path step of each element of a list: its name (KEYS) when every element has a distinct one,
    else its position."""
    names = [object.__getattribute__(v, k) if (k := _key_field(v)) else None for v in seq]
    if all(isinstance(n, str) for n in names) and len(set(names)) == len(names):
        return names
    return list(range(len(seq)))


def _answer(value) -> str:
    """What a read of `value` noted: a marker for a catalog object, a shape for a collection holding some,
    else the digest of the value."""
    if isinstance(value, BaseModel):
        return NODE if id(value) in _paths else _digest(value)
    if isinstance(value, dict) and any(isinstance(v, BaseModel) for v in value.values()):
        return _digest([[k, NODE if isinstance(v, BaseModel) else _digest(v)] for k, v in value.items()])
    if isinstance(value, (list, tuple)) and any(isinstance(v, BaseModel) for v in value):
        return _digest([[k, NODE if isinstance(v, BaseModel) else _digest(v)]
                        for k, v in zip(_elements(value), value)])
    return _digest(value)


def _note(path: tuple, answer: str) -> None:
    for record in _stack:
        record[path] = answer


def note_call(path: tuple, value) -> None:
    """An access point returning plain data was called: note `path` with what it returned (a value the access
    point keeps for the process: its answer is computed once)."""
    if _stack and not _quiet[0]:
        key = (id(value), path)
        answer = _answers.get(key)
        if answer is None:
            answer = _answers[key] = _answer(value)
            _alive.append(value)
        _note(path, answer)


class Tracked(BaseModel):
    """A catalog model whose field reads are noted while a record is active (see the module's text)."""

    def __getattribute__(self, name: str):
        try:
            value = object.__getattribute__(self, name)
        except AttributeError:
            if _stack and not _quiet[0] and id(self) in _paths:     # an extra field (extra="allow"), or none
                extra = object.__getattribute__(self, "__pydantic_extra__") or {}
                _note(_paths[id(self)] + (name,), _answer(extra[name]) if name in extra else ABSENT)
            raise
        if not _stack or _quiet[0]:
            return value
        path = _paths.get(id(self))
        if path is None:
            return value
        cls = type(self)
        fields = _fields.get(cls)
        if fields is None:
            fields = _fields[cls] = frozenset(cls.model_fields)
        if name in fields:
            key = (id(self), name)      # a registered object lives as long as the process: its answers too
            answer = _answers.get(key)
            if answer is None:
                answer = _answers[key] = _answer(value)
            _note(path + (name,), answer)
        elif name in ("__dict__", "__pydantic_extra__") or not _on_class(cls, name):
            _note(path + (WHOLE,), _whole(self))     # all of it at once, or a value kept on the object
        return value


@lru_cache(maxsize=None)
def _on_class(cls: type, name: str) -> bool:
    return any(name in vars(c) for c in cls.__mro__)


_wholes: dict[int, str] = {}


def _whole(node) -> str:
    if id(node) not in _wholes:
        _wholes[id(node)] = _digest(node)
    return _wholes[id(node)]


def register(root: str, value, *step):
    """Give every catalog object reachable from `value` (a loaded catalog) its path below `root`; returns it."""
    _alive.append(value)

    def walk(v, path):
        if isinstance(v, Tracked):
            _paths[id(v)] = path
            for f in type(v).model_fields:
                walk(object.__getattribute__(v, f), path + (f,))
            for k, x in (object.__getattribute__(v, "__pydantic_extra__") or {}).items():
                walk(x, path + (k,))
        elif isinstance(v, dict):
            for k, x in v.items():
                walk(x, path + (k,))
        elif isinstance(v, (list, tuple)):
            for k, x in zip(_elements(v), v):
                walk(x, path + (k,))

    walk(value, (root, *step))
    return value


def root(name: str, loader) -> None:
    """Name the loader `answers` resolves paths below `name` with."""
    _roots[name] = loader


@contextmanager
def recording():
    """Note every catalog read made inside into the dict yielded ({path tuple: answer})."""
    record: dict = {}
    _stack.append(record)
    try:
        yield record
    finally:
        del _stack[next(i for i, r in enumerate(_stack) if r is record)]


# ---- the record as provenance keeps it: the paths read, as one string, and the digest of their answers

def encode(record: dict) -> dict:
    """{"reads": every path read (a trie written `step(child,child)`, `(,` when the step itself was read
    too), "digest": of every path with its answer}: the facts the compile read, and what they were."""
    key = frozenset(record.items())      # a fleet's clusters often read the very same facts
    hit = _encoded.get(key)
    if hit is None:
        if len(_encoded) > 1024:
            _encoded.clear()
        hit = _encoded[key] = _encode(record)
    return dict(hit)


_encoded: dict = {}


def _encode(record: dict) -> dict:
    wholes = {p[:-1] for p in record if p and p[-1] == WHOLE}
    if wholes:
        # a path below an object read whole says nothing more (its answer is part of that digest); dropped, so
        # the record does not depend on whether a memo elsewhere made this compile read the object field by field
        record = {p: a for p, a in record.items() if not any(p[:i] in wholes for i in range(1, len(p))) or
                  p[-1] == WHOLE and p[:-1] in wholes and not any(p[:i] in wholes for i in range(1, len(p) - 1))}
    trie: dict = {}
    for path in record:
        node = trie
        for step in path:
            node = node.setdefault(step, {})
        node[None] = True
    return {"reads": _write(trie), "digest": _combine(record.items())}


_SPECIAL = re.compile(r"[\\(),#]")


def _esc(step) -> str:
    if isinstance(step, int) and not isinstance(step, bool):
        return f"#{step}"
    text = str(step)
    return _SPECIAL.sub(lambda m: "\\" + m.group(), text) if _SPECIAL.search(text) else text


def _order(step) -> tuple:
    return (isinstance(step, int), str(step))


def _write(node: dict) -> str:
    items = [""] if None in node else []
    for step in sorted((k for k in node if k is not None), key=_order):
        child = node[step]
        if len(child) == (None in child):
            items.append(_esc(step))
        else:
            items.append(_esc(step) + "(" + _write(child) + ")")
    return ",".join(items)


def read_paths(text: str) -> list[tuple]:
    """The paths of a `reads` string (ValueError when it is not one)."""
    paths: list = []
    at = 0

    def step() -> object:
        nonlocal at
        out, raw = [], at < len(text) and text[at] == "#"
        if raw:
            at += 1
        while at < len(text) and text[at] not in "(),":
            if text[at] == "\\":
                at += 1
                if at >= len(text):
                    raise ValueError("reads: a dangling escape")
            out.append(text[at])
            at += 1
        word = "".join(out)
        if raw:
            if not word.isdigit():
                raise ValueError("reads: # names a position")
            return int(word)
        return word

    def items(prefix: tuple, top: bool) -> None:
        nonlocal at
        while True:
            if at < len(text) and text[at] in ",)" or at == len(text):
                if prefix or not top:
                    paths.append(prefix)
            else:
                s = step()
                if at < len(text) and text[at] == "(":
                    at += 1
                    items(prefix + (s,), False)
                    if at >= len(text) or text[at] != ")":
                        raise ValueError("reads: an unclosed (")
                    at += 1
                else:
                    paths.append(prefix + (s,))
            if at < len(text) and text[at] == ",":
                at += 1
                continue
            return

    if text:
        items((), True)
    if at != len(text):
        raise ValueError("reads: unexpected text at %d" % at)
    return paths


def _combine(pairs) -> str:
    body = "\n".join(sorted(f"{p!r}\t{a}" for p, a in pairs))     # repr: a position (int) is not a key (str)
    return "sha256:" + hashlib.sha256(body.encode()).hexdigest()


_rechecked: dict = {}


def recheck(section) -> dict:
    """A provenance `catalog` section as the catalog is now: the same reads, the digest recomputed from what
    those paths hold now (the same digest: the compile would read the same facts). Memoized per reads
    string (a fleet's clusters share few), per process (the catalog does not change under a process). The
    catalog modules must be imported (each names its root on import): a path below one that is not reads
    as absent."""
    reads = section.get("reads") if isinstance(section, dict) else None
    if not isinstance(reads, str):
        return {"reads": reads, "digest": ABSENT}
    if reads not in _rechecked:
        try:
            paths = read_paths(reads)
        except (ValueError, RecursionError):
            digest = ABSENT
        else:
            _quiet[0] += 1
            try:
                digest = _combine((p, _evaluate(p)) for p in paths)
            finally:
                _quiet[0] -= 1
        _rechecked[reads] = digest
    return {"reads": reads, "digest": _rechecked[reads]}


def _evaluate(path: tuple) -> str:
    loader = _roots.get(path[0]) if path else None
    if loader is None:
        return ABSENT
    rest = path[1:]
    if getattr(loader, "takes_step", False):
        if not rest:
            return ABSENT
        value, rest = loader(rest[0]), rest[1:]
    else:
        value = loader()
    whole = bool(rest) and rest[-1] == WHOLE
    for step in rest[:-1] if whole else rest:
        value = _step(value, step)
        if value is _MISSING:
            return ABSENT
    if whole:
        return _digest(value) if isinstance(value, BaseModel) else ABSENT
    return _answer(value)


_MISSING = object()


def _step(value, step):
    if isinstance(value, BaseModel):
        if not isinstance(step, str):
            return _MISSING
        if step in type(value).model_fields:
            return object.__getattribute__(value, step)
        extra = object.__getattribute__(value, "__pydantic_extra__") or {}
        return extra.get(step, _MISSING)
    if isinstance(value, dict):
        return value.get(step, _MISSING)
    if isinstance(value, (list, tuple)):
        steps = _elements(value)
        return value[steps.index(step)] if step in steps else _MISSING
    return _MISSING


def memo(maxsize: int = 128):
    """lru_cache for a value derived from catalog reads: a hit notes again what the first call read, so every
    compile that uses the cached value records the facts it depends on."""
    def wrap(fn):
        cache: dict = {}

        @wraps(fn)
        def inner(*args, **kwargs):
            key = (args, tuple(sorted(kwargs.items())))
            hit = cache.get(key)
            if hit is None:
                with recording() as record:
                    value = fn(*args, **kwargs)
                if len(cache) >= maxsize:
                    cache.clear()
                hit = cache[key] = (value, record)
            else:
                for record in _stack:
                    record.update(hit[1])
            return hit[0]

        inner.cache_clear = cache.clear
        return inner
    return wrap
