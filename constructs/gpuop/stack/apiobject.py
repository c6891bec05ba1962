"""cdk8s' JSON form of one emitted object, computed in Python: what `ApiObject.toJson()` returns for
`components/construct.emit(scope, body)`, read back through jsii — so gpuop's own synth needs no Node.

What cdk8s 2 does (lib/api-object.js, metadata.js, _util.js sanitizeValue; jsii's JSON bridge), mirrored:
- metadata: only name, namespace, labels and annotations reach cdk8s (emit passes those); empty maps are
  dropped, keys sorted (`Object.keys().sort()`: UTF-16 code units);
- the rest of the body is added as JSON patches after sanitizing, so it is kept as given but for the
  bridge: a null map value is dropped (a null list item kept), a float that is a whole number comes back as
  an int, and every map's keys that are array indexes ("0" ... "4294967294") come first in
  ascending order, as JavaScript orders an object's properties;
- top level: apiVersion, kind, metadata, then the patched fields in the order given.
Anything the bridge would change in a way not mirrored here (a number beyond 2**53, a non-finite float, a
non-string key, a type JSON has no form for, a string that is not UTF-8) makes `api_object_json` return
None: the caller then synthesizes that component through cdk8s itself. tests/test_apiobject.py checks the
mirror against cdk8s for every component variant of the example profiles and for generated bodies.
"""

from __future__ import annotations

import math

_MAX_SAFE = 2 ** 53
_MAX_INDEX = 2 ** 32 - 2          # the largest array index JavaScript orders first


class _Unmirrored(Exception):
    pass


def api_object_json(body: dict) -> dict | None:
    """The object as cdk8s synthesizes it, or None when the bridge would change it in a way not mirrored."""
    try:
        meta = body["metadata"]
        md = {}
        for key in ("annotations", "labels"):
            m = meta.get(key)
            if m:
                m = _sanitized(m)
                if m:
                    md[key] = m
        md["name"] = _text(meta["name"])
        if meta.get("namespace") is not None:
            md["namespace"] = _text(meta["namespace"])
        out = {"apiVersion": _text(body["apiVersion"]), "kind": _text(body["kind"]), "metadata": md}
        for k, v in body.items():
            if k in ("apiVersion", "kind", "metadata"):
                continue
            if type(k) is not str or "/" in k or "~" in k or _index(k):    # JSON-pointer escapes, JS key order
                raise _Unmirrored
            if v is not None:
                out[k] = _value(v)
        return out
    except (_Unmirrored, KeyError, TypeError):     # cdk8s reports a malformed body in its own words
        return None


def _sanitized(m: dict) -> dict:
    """sanitizeValue of a metadata map: sorted keys, nulls dropped (labels and annotations are strings)."""
    if type(m) is not dict or any(type(v) is not str for v in m.values()):
        raise _Unmirrored           # cdk8s' ApiObjectMetadata takes string maps only: its own error, through Node
    return _js_order({_value(k): v for k, v in sorted(m.items(), key=_utf16)})


def _text(v) -> str:
    """A string cdk8s types as one (apiVersion, kind, name, namespace): anything else fails there, through Node."""
    if type(v) is not str:
        raise _Unmirrored
    return _value(v)


def _utf16(item) -> bytes:
    k = item[0]
    if type(k) is not str:
        raise _Unmirrored
    return k.encode("utf-16-be", "surrogatepass")


def _value(v):
    # exact types only: a subclass (an Enum, an OrderedDict) crosses the bridge in ways not mirrored here
    t = type(v)
    if t is str:
        try:
            v.encode("utf-8")
        except UnicodeEncodeError:
            raise _Unmirrored from None
        return v
    if t is bool:
        return v
    if t is int:
        if -_MAX_SAFE <= v <= _MAX_SAFE:
            return int(v)
        raise _Unmirrored
    if t is float:
        if not math.isfinite(v):
            raise _Unmirrored
        if v.is_integer():
            if abs(v) <= _MAX_SAFE:
                return int(v)
            raise _Unmirrored       # JavaScript writes its own digits for a whole number that large
        return v
    if t is dict:
        out = {}
        for k, x in v.items():
            if type(k) is not str:
                raise _Unmirrored
            if x is not None:
                out[_value(k)] = _value(x)
        return _js_order(out)
    if t is list:
        return [None if x is None else _value(x) for x in v]
    raise _Unmirrored


def _index(k: str) -> bool:
    """An array index in JavaScript's sense: the canonical decimal form of an integer 0 .. 2**32-2."""
    return k.isascii() and k.isdigit() and (k == "0" or k[0] != "0") and int(k) <= _MAX_INDEX


def _js_order(d: dict) -> dict:
    if not any(_index(k) for k in d):
        return d
    first = sorted((k for k in d if _index(k)), key=int)
    return {**{k: d[k] for k in first}, **{k: v for k, v in d.items() if not _index(k)}}
