"""Stage 1, load, the fast path: an ordinary profile parsed by libyaml (C), valued as ruamel would value it.

ruamel's round-trip loader (load.py) is what keeps every key's line and column, and it costs ~10 ms a
profile; libyaml's event parser reads the same document in a few hundred microseconds. `load` walks
libyaml's events into the plain values `load._plain` gives, resolving plain scalars with ruamel's own
YAML 1.2 table (`ruamel.yaml.resolver.implicit_resolvers`, the rows for 1.2), so `yes`/`on` stay strings,
`0580` is 580, `0o17` is 15 and `1:20` a string, exactly as the round-trip loader reads them (PyYAML's
own resolver is YAML 1.1 and would say True, 384 and 80). Positions are not computed here: load.py asks
ruamel for them from the same text when a message needs one.

`load` answers only for ordinary documents and returns None for anything else, which load.py then parses
with ruamel as before, so every refusal keeps ruamel's words: anchors and aliases, any tag, directives
(`%YAML 1.1` would change how scalars resolve), more or fewer than one document, a `...` end marker, a
top level that is not a mapping, merge keys (`<<`), duplicate or non-string keys, timestamps, a number
Python cannot convert, lone surrogates, tabs, characters ruamel's reader refuses or libyaml reads as
line breaks, too many values, and any error of libyaml's. tests/test_fast_parse.py compares the two
paths on real and generated documents.
"""

from __future__ import annotations

import re
from typing import Any

from ruamel.yaml.constructor import SafeConstructor
from ruamel.yaml.reader import Reader
from ruamel.yaml.resolver import implicit_resolvers
from yaml.cyaml import CParser
from yaml.events import (DocumentEndEvent, DocumentStartEvent, MappingEndEvent, MappingStartEvent, ScalarEvent,
                         SequenceEndEvent, SequenceStartEvent, StreamEndEvent, StreamStartEvent)


class _Unsure(Exception):
    """The document is not an ordinary one: ruamel reads it (and words any problem)."""


# ruamel's YAML 1.2 resolvers by first character, in ruamel's order (its VersionedResolver picks the
# first whose pattern matches); taken from ruamel itself so the two paths cannot drift apart
_RESOLVERS: dict[Any, list[tuple[str, re.Pattern]]] = {}
for _versions, _tag, _regexp, _first in implicit_resolvers:
    if (1, 2) in _versions:
        for _ch in _first or [None]:
            _RESOLVERS.setdefault(_ch, []).append((_tag.rpartition(":")[2], _regexp.lazy_self()))
_ANY = _RESOLVERS.pop(None, [])   # ruamel tries resolvers without a first character after the others

# ruamel's reader refuses these (load.py words it); libyaml also breaks lines at NEL, LS and PS, a byte
# order mark inside the text is read differently, and ruamel refuses some tabs libyaml takes as spaces
# (a tab after the last value of the file): all left to ruamel
_NON_PRINTABLE = Reader.NON_PRINTABLE.lazy_self()
_ODD = re.compile("[\t\x85\u2028\u2029\ufeff]")
_SURROGATE = re.compile(r"[\ud800-\udfff]")
_INF, _NAN = SafeConstructor.inf_value, SafeConstructor.nan_value   # ruamel's own (its NaN has the sign bit)


def load(text: str, max_values: int) -> dict | None:
    """The document as plain dicts, lists, str, int, float, bool and None (what load._plain gives), or
    None when the fast path cannot be sure of that and ruamel must read it. `max_values` bounds the
    values of the document as load._plain counts them (beyond it ruamel reports the limit)."""
    if _NON_PRINTABLE.search(text) or _ODD.search(text):
        return None
    parser = CParser(text)
    try:
        return _build(parser.get_event, max_values, text)
    except Exception:  # noqa: BLE001 - any failure here (libyaml's errors included) leaves the document to ruamel
        return None
    finally:
        parser.dispose()


def _build(next_event, budget: int, text: str) -> dict:
    """Plain values from the events of one document whose top level is a mapping; _Unsure otherwise."""
    if type(next_event()) is not StreamStartEvent:
        raise _Unsure
    start = next_event()
    if type(start) is not DocumentStartEvent or start.version is not None or start.tags:
        raise _Unsure
    event = next_event()
    if type(event) is not MappingStartEvent or event.anchor is not None or event.tag is not None:
        raise _Unsure   # a list, a scalar, an empty file: ruamel words what the document is
    budget -= 1
    root: dict = {}
    nokey = object()
    frames = [[root, nokey]]   # a frame is [container, key awaiting its value or `nokey`]
    while frames:
        event = next_event()
        kind = type(event)
        if kind is MappingEndEvent or kind is SequenceEndEvent:
            frames.pop()
            continue
        frame = frames[-1]
        container = frame[0]
        if kind is not ScalarEvent and kind is not MappingStartEvent and kind is not SequenceStartEvent:
            raise _Unsure   # an alias
        if event.anchor is not None or event.tag is not None:
            raise _Unsure
        if frame[1] is nokey and type(container) is dict:   # a key: a string, new in its mapping
            if kind is not ScalarEvent:
                raise _Unsure
            key = event.value
            if (event.implicit[0] and _resolve(key) is not None) or key in container or _SURROGATE.search(key):
                raise _Unsure
            frame[1] = key
            continue
        budget -= 1
        if budget < 0:
            raise _Unsure
        if kind is ScalarEvent:
            if event.style == "|" or event.style == ">":
                _block_header(text, event.start_mark)
            value = _scalar(event.value) if event.implicit[0] else _string(event.value)
        else:
            value = {} if kind is MappingStartEvent else []
            frames.append([value, nokey])
        if type(container) is dict:
            container[frame[1]] = value
            frame[1] = nokey
        else:
            container.append(value)
    end = next_event()
    if type(end) is not DocumentEndEvent or end.explicit or type(next_event()) is not StreamEndEvent:
        raise _Unsure   # a second document, or a `...` marker (ruamel refuses two where libyaml reads one)
    return root


# a block scalar's header as YAML 1.2 has it: `|` or `>`, indentation and chomping indicators, then
# nothing, or spaces and maybe a comment; libyaml also takes `|# c`, which ruamel refuses
_BLOCK_HEADER = re.compile(r"[|>](?:[1-9][-+]?|[-+][1-9]?)?(?: +(?:#.*)?)?$")


def _block_header(text: str, mark: Any) -> None:
    line = re.split(r"\r\n|\r|\n", text)[mark.line]   # libyaml counts lines and columns in characters
    if not _BLOCK_HEADER.match(line, mark.column):
        raise _Unsure


def _resolve(value: str) -> str | None:
    """The YAML 1.2 type ruamel gives a plain scalar (bool, int, float, null, timestamp, merge, value), or
    None for a string."""
    resolvers = _RESOLVERS.get(value[:1], ())   # '' holds the resolvers of the empty scalar
    for tag, regexp in (resolvers + _ANY if _ANY else resolvers):
        if regexp.match(value):
            return tag
    return None


def _scalar(value: str) -> Any:
    """A plain scalar's value, converted as ruamel's RoundTripConstructor converts it under YAML 1.2."""
    tag = _resolve(value)
    if tag is None:
        return _string(value)
    if tag == "null":
        return None
    if tag == "bool":   # 1.2: only true/True/TRUE/false/False/FALSE resolve here
        return value.lower() == "true"
    if tag == "int":
        return _int(value)
    if tag == "float":
        return _float(value)
    raise _Unsure   # timestamp (ruamel gives its own datetime type), merge `<<`, value `=`


def _string(value: str) -> str:
    if _SURROGATE.search(value):
        raise _Unsure   # ruamel's path locates and words it
    return value


def _int(value: str) -> int:
    """As construct_yaml_int: underscores dropped, 0b/0x/0o prefixes, and (1.2) a leading 0 is decimal."""
    digits = value.replace("_", "")
    sign = -1 if digits[:1] == "-" else 1
    if digits[:1] in ("-", "+"):
        digits = digits[1:]
    base = {"0b": 2, "0x": 16, "0o": 8}.get(digits[:2], 10)
    if base != 10:
        digits = digits[2:]
    if not digits:
        raise _Unsure   # `0x_`, `-_`: ruamel fails on these; load.py reports it
    return sign * int(digits, base)   # ValueError (over 4,300 digits): ruamel's path words it


def _float(value: str) -> float:
    """As construct_yaml_float: underscores dropped, any case, .inf/.nan, sign applied last."""
    digits = value.replace("_", "").lower()
    sign = -1 if digits[:1] == "-" else 1
    if digits[:1] in ("-", "+"):
        digits = digits[1:]
    if digits == ".inf":
        return sign * _INF
    if digits == ".nan":
        return _NAN
    return sign * float(digits)   # ValueError (`._`): ruamel's path locates and words it
