"""Pydantic's validation errors in gpuop's wording: each becomes a located `Issue` that says what is
wrong and what is allowed (the field's description, its literals, close names), at the document path
the error is about. Used for profiles (validate stage) and for the settings file alike.
"""

from __future__ import annotations

import datetime
import re
import typing

from pydantic import BaseModel, ValidationError

from gpuop.catalog.names import did_you_mean
from gpuop.errors import Issue
from gpuop.profile.models import ClusterProfile


def _unwrap(ann):
    """The pydantic model inside an annotation (X, X | None, list[X], Annotated[...]), else the annotation."""
    for arg in (typing.get_args(ann) or (ann,)):
        if isinstance(arg, type) and issubclass(arg, BaseModel):
            return arg
        for a in typing.get_args(arg):
            if isinstance(a, type) and issubclass(a, BaseModel):
                return a
    return ann


def _is_model(obj) -> bool:
    return isinstance(obj, type) and issubclass(obj, BaseModel)


def _field_at(model: type[BaseModel], loc: tuple):
    """The pydantic FieldInfo of the field at `loc` (list indexes skipped), or None."""
    current: object = model
    info = None
    for part in loc:
        if isinstance(part, int):
            continue
        if not _is_model(current) or part not in current.model_fields:
            return None
        info = current.model_fields[part]
        current = _unwrap(info.annotation)
    return info


def _model_at(model: type[BaseModel], loc: tuple) -> type[BaseModel] | None:
    """The model class at `loc` (for listing allowed fields): the root for (), else the field's model."""
    if not loc:
        return model
    info = _field_at(model, loc)
    inner = _unwrap(info.annotation) if info else None
    return inner if _is_model(inner) else None


def _literals(ann) -> list[str]:
    """The allowed values of a Literal field (also inside Optional)."""
    if typing.get_origin(ann) is typing.Literal:
        return [str(a) for a in typing.get_args(ann)]
    for arg in typing.get_args(ann):
        if typing.get_origin(arg) is typing.Literal:
            return [str(a) for a in typing.get_args(arg)]
    return []


def _shown(value) -> str:
    """A value as YAML wrote it, for 'got ...'."""
    if value is None:
        return "null (an empty value)"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, str):
        return repr(value)
    if isinstance(value, (int, float)):
        return f"the number {value}"
    if isinstance(value, (datetime.date, datetime.datetime)):
        return f"the date {value.isoformat()}"
    return repr(value)


def _quote_hint(value) -> str:
    if isinstance(value, (bool, int, float, datetime.date, datetime.datetime)):
        return "; put the value in quotes (YAML reads it as a " + (
            "boolean" if isinstance(value, bool) else "date" if isinstance(value, datetime.date)
            else "number") + ")"
    return ""


# Human words for the patterns the models use: pattern -> (what a value must be, what is allowed).
PATTERNS = {
    r"^\d+\.\d+$": ("a minor version", 'MAJOR.MINOR in quotes, e.g. "1.33"'),
    r"^\d{3}(\.\d+){0,2}$": ("a driver branch or version", 'a branch such as "580" or a version such as '
                             '"580.173.02", in quotes'),
    r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$": ("an image tag", "letters, digits, '_', '.' and '-', at most 128 "
                                             "characters, not starting with '.' or '-'"),
    r"^[0-9]+(\.[0-9]+)?(m|k|Ki|M|Mi|G|Gi|T|Ti)?$": ("a Kubernetes quantity", "a number with an optional "
                                                     "suffix m, k, Ki, M, Mi, G, Gi, T or Ti, e.g. 200m, 1, 256Mi"),
    r"^[a-z0-9.-]+(:[0-9]+)?(/[a-z0-9._-]+)*$": ("a registry", "lowercase host[:port][/path] without a scheme, "
                                                "e.g. registry.example.com/nvidia"),
    r"^([0-9]+(\.[0-9]+)?(ms|s|m|h))+$": ("a duration", "numbers with units ms, s, m or h, e.g. 10m, 1h30m"),
    r"^[A-Za-z0-9._/-]+$": ("a path", "letters, digits, '.', '_', '/' and '-'"),
    r"^[0-9]+\.[0-9]+\.[0-9]+-[A-Za-z0-9._-]+$": ("a kernel version", "the node's `uname -r`, e.g. "
                                                 "6.8.0-45-generic"),
    r"^([0-9a-f]{40}|[0-9a-f]{64})$": ("a full commit SHA", "40 or 64 lowercase hex digits"),
    r"^4[0-9]{1,2}\.[0-9]+\.[0-9]{12}-[0-9]+$": ("an RHCOS build", "the node's OSTREE_VERSION label, e.g. "
                                               "419.96.202507091512-0"),
}


def _first_sentence(text: str | None) -> str:
    if not text:
        return ""
    sentence = re.split(r"(?<!e\.g)(?<!i\.e)\.\s|;\s", text.strip(), maxsplit=1)[0].rstrip(".")
    if sentence.startswith("Omitted") or sentence == "Required":
        return ""
    return sentence if sentence[1:2].isupper() else sentence[0].lower() + sentence[1:]


def _expected(info, model) -> str:
    """What a field holds, for 'required field is missing; ...' and 'must be ...' messages."""
    if info is None:
        return ""
    allowed = _literals(info.annotation)
    if allowed:
        return f"allowed: {', '.join(allowed)}"
    if model is not None:
        kind = "a list of mappings" if typing.get_origin(info.annotation) is list else "a mapping"
        return f"{kind} with fields {', '.join(model.model_fields)}"
    return _first_sentence(info.description)


def _message(err: dict, root: type[BaseModel] = ClusterProfile, loc: tuple | None = None) -> str:
    """One pydantic error as `what is wrong; allowed: ...`. `loc` is the data path of the error."""
    kind, msg, value, ctx = err["type"], err["msg"], err.get("input"), err.get("ctx") or {}
    loc = tuple(err["loc"]) if loc is None else loc
    info = _field_at(root, loc)
    model = _model_at(root, loc) if info is not None or not loc else None
    if kind == "extra_forbidden":
        owner = _model_at(root, loc[:-1])
        names = list(owner.model_fields) if owner else []
        if loc[:-1] == () and root is ClusterProfile:
            names.append("extends")
        hint = did_you_mean(str(loc[-1]), names, limit=1, loose=False) if loc else ""
        hint = f" ({hint})" if hint else ""
        return f"unknown field{hint}; allowed: {', '.join(names) or 'see schemas/profile.schema.json'}"
    if kind == "missing":
        what = _expected(info, model)
        return "required field is missing" + (f"; {what}" if what else "")
    if kind == "literal_error":
        allowed = re.findall(r"'([^']*)'", str(ctx.get("expected", ""))) or _literals(info.annotation if info else None)
        return f"{_shown(value)} is not allowed; allowed: {', '.join(allowed)}"
    if kind == "string_type":
        return f"must be a string, got {_shown(value)}{_quote_hint(value)}"
    if kind in ("int_type", "int_parsing", "int_from_float"):
        return f"must be a whole number, got {_shown(value)}"
    if kind in ("bool_type", "bool_parsing"):
        return f"must be true or false, got {_shown(value)}"
    if kind == "list_type":
        what = _expected(info, model) if model is not None else ""
        return f"must be a list, got {_shown(value)}" + (f"; {what}" if what else "")
    if kind in ("model_type", "model_attributes_type", "dict_type"):
        if model is not None and kind != "dict_type":
            return f"must be a mapping, got {_shown(value)}; allowed fields: {', '.join(model.model_fields)}"
        return f"must be a mapping of names to strings, got {_shown(value)}"
    if kind == "greater_than_equal":
        return f"must be at least {ctx.get('ge')}, got {_shown(value)}"
    if kind == "less_than_equal":
        return f"must be at most {ctx.get('le')}, got {_shown(value)} (the Kubernetes field's integer range)"
    if kind == "too_long" and isinstance(value, (list, dict)):
        n = ctx.get("max_length")
        what = "entries" if isinstance(value, dict) else "items"
        return f"at most {n} {what} (limit {n}), got {len(value)}"
    if kind == "too_short":
        if isinstance(value, list):
            n = ctx.get("min_length")
            return f"must have at least {n} item{'' if n == 1 else 's'}, got {len(value) or 'an empty list'}"
    if kind == "string_too_short":
        return "must not be empty"
    if kind == "string_pattern_mismatch":
        pattern = str(ctx.get("pattern", ""))
        what, allowed = PATTERNS.get(pattern, (f"matching {pattern}", pattern))
        return f"{_shown(value)} is not {what}; allowed: {allowed}"
    if msg.startswith("Value error, "):
        return msg[len("Value error, "):]
    return f"{msg[0].lower()}{msg[1:]} (got {_shown(value)})"


def data_loc(data, loc: tuple) -> tuple:
    """pydantic's error location -> the path in the document: parts that are not keys or indexes of the
    input (pydantic's union and validator tags, e.g. 'function-after[check(), str]') are dropped; a last
    part that names a missing field of a mapping is kept."""
    out: list = []
    node = data
    for i, part in enumerate(loc):
        if isinstance(node, dict) and isinstance(part, str) and part in node:
            node = node[part]
            out.append(part)
        elif isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node):
            node = node[part]
            out.append(part)
        elif i == len(loc) - 1 and isinstance(part, str) and isinstance(node, dict):
            out.append(part)
    return tuple(out)


def model_issues(exc: ValidationError, data, positions, root: type[BaseModel]) -> list[Issue]:
    issues = []
    for err in exc.errors():
        loc = data_loc(data, tuple(err["loc"]))
        issues.append(positions.issue(loc, _message(err, root, loc)))
    return sorted(set(issues))
