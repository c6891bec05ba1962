"""YAML and JSON output in one fixed form, so the same objects always give the same bytes.

Key order: apiVersion, kind, metadata first, then every mapping's keys sorted (as `kubectl get -o
yaml`); lists keep their order. Multi-line strings are literal blocks. PyYAML's C emitter (libyaml) is
used for bulk output: measured 3.5x faster than ruamel.yaml's C emitter here.

Every string reads back as that same string under every reader of the output, so a string whose plain
form any of them types otherwise is single-quoted (`ambiguous`): kubectl, Helm and Argo CD read YAML
1.1 (sigs.k8s.io/yaml, go-yaml v2: `y`/`n`/`on` are booleans, `0o17`, `1e3` and `08` numbers),
kustomize YAML 1.2 (go-yaml v3), PyYAML YAML 1.1 and ruamel.yaml YAML 1.2. PyYAML alone would quote
only what its own YAML 1.1 resolver types (not `y`, `0o17`, `1e3`, `08`). `ambiguous` below lists the
forms.
"""

from __future__ import annotations

import json
import re
from typing import Any

import yaml

try:
    _Dumper = yaml.CSafeDumper
except AttributeError:  # pragma: no cover - libyaml is part of the PyYAML wheel
    _Dumper = yaml.SafeDumper


class _OutDumper(_Dumper):
    pass


# Plain scalars some reader resolves to a bool, null, merge key, value key or YAML tag indicator, in
# every spelling any of them accepts: YAML 1.1 bools (y|Y|yes|...|on|off, go-yaml v2 and the spec; PyYAML
# leaves out y/n), YAML 1.1 and 1.2 nulls (`~`, null, the empty string), `<<`, `=`, and `!`, `&`, `*`
# alone (ruamel's `yaml` tag).
WORDS = frozenset("""y Y yes Yes YES n N no No NO true True TRUE false False FALSE on On ON off Off OFF
                     ~ null Null NULL << = ! & *""".split()) | {""}
# Only a plain scalar starting with one of these can be a number or a timestamp for any reader.
_NUMERIC_START = frozenset("0123456789+-.")
# Numbers and timestamps, matched with every `_` removed: go-yaml (v2 and v3) removes them before Go's
# strconv.ParseInt(s, 0, 64) / ParseUint (base prefixes 0b 0o 0x in either case, a leading 0 is octal),
# then tries its float pattern `[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?` (so `08` and `1e3`
# are floats); PyYAML's and ruamel's YAML 1.1 and 1.2 patterns allow `_` between digits, and ruamel takes
# `0x_`, `-_` and `._` for numbers (and then fails converting them). Wider than any one reader on purpose
# (`0x`, `+`, `12:345` are quoted too): quoting a string never changes what it reads as.
_NUMBER = re.compile(r"""[-+]?(?:
      [0-9]*(?:\.[0-9]*)?(?:[eE][-+]?[0-9]+)?          # ints, leading zeros, floats, 1e3, 1., .5, -
    | 0[bBoOxX][0-9a-fA-F]*                            # 0b1, 0o17, 0x1F (Go takes 0B 0O 0X too)
    | [0-9]+(?::[0-9]+)+(?:\.[0-9]*)?                  # YAML 1.1 sexagesimals: 1:20, -1:20:30.5
    | \.(?:inf|Inf|INF|nan|NaN|NAN)                    # .inf, -.inf, .nan (+.nan too: harmless)
    | [0-9]{4}-[0-9]{1,2}-[0-9]{1,2}                   # timestamps (YAML 1.1 and 1.2, go-yaml's 2006-1-2)
      (?:(?:[Tt]|[ \t]+)[0-9]{1,2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]*)?(?:[ \t]*(?:Z|[-+][0-9]{1,2}(?::[0-9]{2})?))?)?
    )""", re.VERBOSE)


def ambiguous(s: str) -> bool:
    """True when some YAML 1.1 or 1.2 reader would type the plain scalar `s` as anything but this string
    (then it is written quoted). On the hot path of every writer: a string starting with anything but a
    digit, sign or dot is decided by one set lookup (no word starting with a letter is a number)."""
    if s in WORDS:
        return True
    if s[0] not in _NUMERIC_START:
        return False
    return _NUMBER.fullmatch(s.replace("_", "")) is not None


def _str(dumper, data: str):
    if "\n" in data:
        return dumper.represent_scalar("tag:yaml.org,2002:str", data, style="|")
    if ambiguous(data):
        # single quotes, as PyYAML quotes what its own resolver types (libyaml switches to double quotes
        # when the string has characters single quotes cannot hold)
        return dumper.represent_scalar("tag:yaml.org,2002:str", data, style="'")
    return dumper.represent_scalar("tag:yaml.org,2002:str", data)


def quote_ambiguous(ruamel_yaml) -> None:
    """Make a ruamel.yaml YAML() instance (before its first dump) quote what `ambiguous` names; ruamel
    itself quotes only what its YAML 1.2 resolver types. The same rule for text gpuop writes through ruamel
    (imported profiles). A subclass, not add_representer on ruamel's class: that would change every
    YAML() in the process."""
    base = ruamel_yaml.Representer
    if base not in _QUOTING:
        plain = base.represent_str

        def represent(self, data):
            if "\n" not in data and ambiguous(data):
                return self.represent_scalar("tag:yaml.org,2002:str", data, style="'")
            if any(c in data for c in _BREAKS):
                # ruamel writes NEL (and LS, PS) raw inside quotes, where YAML 1.1 readers take it for a line
                # break: escaped in double quotes instead
                return self.represent_scalar("tag:yaml.org,2002:str", data, style='"')
            return plain(self, data)
        _QUOTING[base] = type(f"Quoting{base.__name__}", (base,), {})
        _QUOTING[base].add_representer(str, represent)
    ruamel_yaml.Representer = _QUOTING[base]


_QUOTING: dict = {}
_BREAKS = ("\x85", "\u2028", "\u2029")


_OutDumper.add_representer(str, _str)
_STR = "tag:yaml.org,2002:str"


def _resolve(self, kind, value, implicit, _scalar=yaml.ScalarNode, _resolve=_Dumper.resolve):
    """The emitter asks, for every scalar, which tag its plain and quoted forms resolve to. What
    `ambiguous` lets through is a string for every reader (a superset of PyYAML's own resolvers, checked by
    tests/test_yaml_output.py), so only the rest goes through PyYAML's regular expressions."""
    if kind is _scalar and (not implicit[0] or not ambiguous(value)):
        return _STR
    return _resolve(self, kind, value, implicit)


_OutDumper.resolve = _resolve

TOP = ("apiVersion", "kind", "metadata")


def canonical(obj: Any, top: bool = True) -> Any:
    if isinstance(obj, dict):
        keys = sorted(obj)
        if top:
            keys = [k for k in TOP if k in obj] + [k for k in keys if k not in TOP]
        return {k: canonical(obj[k], False) for k in keys}
    if isinstance(obj, list):
        return [canonical(v, False) for v in obj]
    return obj


def dump(obj: Any) -> str:
    """One document, canonical order."""
    return yaml.dump(canonical(obj), Dumper=_OutDumper, sort_keys=False, default_flow_style=False,
                     allow_unicode=True, width=1 << 16)


def by_content(fn):
    """Memoize a function of one JSON-like object by the object's content. A fleet built from a few
    designs repeats most objects verbatim; each distinct one is then rendered once per process."""
    store: dict[str, Any] = {}

    def wrapper(obj):
        k = json.dumps(obj, sort_keys=True, separators=(",", ":"))
        if k not in store:
            if len(store) > 200_000:
                store.clear()
            store[k] = fn(obj)
        return store[k]
    wrapper.__doc__, wrapper.__name__ = fn.__doc__, fn.__name__
    return wrapper


dump_memo = by_content(dump)

_LIST_MIN = 32      # shorter lists are dumped with the document


def _flat(item) -> bool:
    return isinstance(item, dict) and bool(item) and all(
        isinstance(k, str) and isinstance(v, str) and "\n" not in v and "\n" not in k for k, v in item.items())


# a word PyYAML writes plain wherever it stands (no indicator, no `: ` or ` #`, no space, no break) unless a
# resolver types it, which `ambiguous` decides (a superset of PyYAML's resolvers)
_PLAIN_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/-]*")


def _item_text(item: dict) -> str:
    """`dump([item])` of a flat string map: printed directly when every key and value is a plain word, else
    through the representer (once per distinct item)."""
    keys = sorted(item)
    if all(_PLAIN_WORD.fullmatch(w) and not ambiguous(w) for k in keys for w in (k, item[k])):
        return "- " + "\n  ".join(f"{k}: {item[k]}" for k in keys) + "\n"
    return dump_memo([item])


def dump_long_lists(obj: dict) -> str:
    """`dump(obj)`, byte for byte, with each long list of flat string maps in a mapping of its top two levels
    (a fleet's AppProject: two destinations per cluster) printed item by item, each distinct item once per
    process (dump_memo): the representer is pure Python, and these lists grow with the fleet. A block
    sequence under a mapping key is written at the key's indentation, every item alike, so an item's text
    alone (`dump([item])`) shifted by that indentation is its text inside the document."""
    doc = canonical(obj)
    spliced: dict[str, list] = {}

    def mark(m: dict, depth: int) -> dict:
        out = {}
        for k, v in m.items():
            if isinstance(v, list) and len(v) >= _LIST_MIN and all(_flat(i) for i in v):
                token = f"\0gpuop-list-{len(spliced)}\0"
                spliced[token] = v
                out[k] = token
            elif isinstance(v, dict) and depth < 2:
                out[k] = mark(v, depth + 1)
            else:
                out[k] = v
        return out
    marked = mark(doc, 1)
    if not spliced:
        return dump(obj)
    text = yaml.dump(marked, Dumper=_OutDumper, sort_keys=False, default_flow_style=False, allow_unicode=True,
                     width=1 << 16)
    for i, (token, items) in enumerate(spliced.items()):
        quoted = f': "\\0gpuop-list-{i}\\0"\n'
        at = text.find(quoted)
        start = text.rfind("\n", 0, at) + 1
        line = text[start:at]
        if at < 0 or text.find(quoted, at + 1) >= 0 or not line.strip() or ":" in line.strip():
            return dump(obj)            # not the simple form this relies on: the document dumped whole
        indent = " " * (len(line) - len(line.lstrip(" ")))
        body = "".join(indent + ln for item in items for ln in _item_text(item).splitlines(keepends=True))
        text = text[:at] + ":\n" + body + text[at + len(quoted):]
    return text


def dump_plain(obj: Any) -> str:
    """One document, keys in the order given (for files people read: Chart.yaml, values.yaml)."""
    return yaml.dump(obj, Dumper=_OutDumper, sort_keys=False, default_flow_style=False,
                     allow_unicode=True, width=1 << 16)


def dump_json(obj: Any) -> str:
    return json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def load(text: str) -> Any:
    return yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))


def load_all(text: str) -> list:
    return [d for d in yaml.load_all(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)) if d is not None]
