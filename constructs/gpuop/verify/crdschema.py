"""Strict, offline JSON-Schema check of custom resources (Argo CD Application, Flux HelmRelease, ...).

What it checks: an object whose (apiVersion, kind) is served by one of the CustomResourceDefinitions
we were given, against that version's `spec.versions[].schema.openAPIV3Schema`, made strict: unknown
fields, types, `required`, `pattern`, `enum`, min/max, int-or-string.

What it does NOT check:
- CEL rules (`x-kubernetes-validations`) are NOT handled here: they are not JSON Schema and are
  dropped. E.g. HelmRelease's "exactly one of chart or chartRef" is not enforced.
- `format` (int64, date-time) is an annotation only; list/map semantics (`x-kubernetes-list-type`);
  `metadata` beyond "is an object"; defaulting; anything only the API server or controller knows.
- Helm values (`HelmRelease.spec.values`, `Application...helm.valuesObject`): preserve-unknown-fields.

Source: CRD YAML files (apiextensions.k8s.io/v1), e.g. the snapshots in shared/refs/crds (see its
SOURCES.md). The OpenAPI -> JSON Schema conversion is the one that file's notes describe (and
kubeconform's `openapi2jsonschema` does):
- `x-kubernetes-int-or-string: true` -> `anyOf: [{type: integer}, {type: string}]`;
- `nullable: true` -> the type (or anyOf, or enum) also allows null;
- strict: `additionalProperties: false` on every object schema that lists `properties`, has no
  `x-kubernetes-preserve-unknown-fields` and no `additionalProperties` of its own (not inside
  allOf/anyOf/oneOf/not, whose `properties` only restate part of the structural schema);
- every other `x-kubernetes-*` key is dropped.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import jsonschema
import jsonschema_rs
import yaml

from gpuop.verify.kubeschema import SchemaNotFound, format_error, rs_errors

__all__ = ["CrdValidator", "SchemaNotFound", "to_json_schema"]

_JUNCTORS = ("allOf", "anyOf", "oneOf")


def to_json_schema(node: Any, strict: bool = True, in_junctor: bool = False) -> Any:
    """Convert one OpenAPI v3 (structural) schema node from a CRD into JSON Schema, recursively.

    Only schema positions are walked (properties, items, additionalProperties, junctors); values
    such as `default`, `enum` and `example` are copied untouched, and a field that happens to be
    named `nullable` or `x-kubernetes-...` under `properties` stays a field.
    """
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key.startswith("x-kubernetes-") or key == "nullable":
            continue
        if key == "properties":
            out[key] = {name: to_json_schema(sub, strict, in_junctor) for name, sub in value.items()}
        elif key in ("items", "additionalProperties"):
            if isinstance(value, list):
                out[key] = [to_json_schema(sub, strict, in_junctor) for sub in value]
            else:
                out[key] = to_json_schema(value, strict, in_junctor)
        elif key in _JUNCTORS:
            out[key] = [to_json_schema(sub, strict, in_junctor=True) for sub in value]
        elif key == "not":
            out[key] = to_json_schema(value, strict, in_junctor=True)
        else:
            out[key] = value
    # OpenAPI 3.0 boolean exclusiveMinimum/Maximum -> JSON Schema 2020-12 numbers.
    for excl, bound in (("exclusiveMinimum", "minimum"), ("exclusiveMaximum", "maximum")):
        if out.get(excl) is True and bound in out:
            out[excl] = out.pop(bound)
        elif isinstance(out.get(excl), bool):
            del out[excl]
    if node.get("x-kubernetes-int-or-string") is True:
        out["anyOf"] = [{"type": "integer"}, {"type": "string"}]
    if node.get("nullable") is True:
        if "type" in out:
            types = out["type"] if isinstance(out["type"], list) else [out["type"]]
            out["type"] = [*types, "null"] if "null" not in types else types
        elif "anyOf" in out:
            out["anyOf"] = [*out["anyOf"], {"type": "null"}]
        if isinstance(out.get("enum"), list) and None not in out["enum"]:
            out["enum"] = [*out["enum"], None]
    if (
        strict
        and not in_junctor
        and "properties" in node
        and "additionalProperties" not in node
        and not node.get("x-kubernetes-preserve-unknown-fields")
    ):
        out["additionalProperties"] = False
    return out


def _root_schema(openapi: dict, strict: bool) -> dict:
    schema = to_json_schema(openapi, strict)
    props = schema.setdefault("properties", {})
    props.setdefault("apiVersion", {"type": "string"})
    props.setdefault("kind", {"type": "string"})
    props.setdefault("metadata", {"type": "object"})  # name/labels/...: left to the API server
    schema.setdefault("type", "object")
    if strict:
        schema.setdefault("additionalProperties", False)
    return schema


def _compile(schema: dict) -> tuple[Any, bool]:
    """(validator, is_rust). jsonschema_rs first; offline=True so no $ref is ever fetched."""
    try:
        return jsonschema_rs.Draft202012Validator(schema, offline=True), True
    except Exception:  # noqa: BLE001 — any compile failure: retry with the pure-Python validator
        # Fallback only when jsonschema_rs rejects a schema (e.g. a regex its engine cannot
        # compile); the pure-Python `jsonschema` is much slower and matches patterns with Python `re`.
        jsonschema.Draft202012Validator.check_schema(schema)
        return jsonschema.Draft202012Validator(schema), False


def _unexpected(err) -> list[str] | None:
    if err.validator == "additionalProperties" and isinstance(err.instance, dict):
        known = set(err.schema.get("properties", {}))
        return [k for k in err.instance if k not in known]
    return None


def _py_errors(validator: Any, obj: Any) -> list[str]:
    out: list[str] = []
    for err in validator.iter_errors(obj):
        unexpected = None
        if err.validator == "additionalProperties" and isinstance(err.instance, dict):
            known = set(err.schema.get("properties", {}))
            unexpected = [k for k in err.instance if k not in known]
        for msg in format_error(list(err.absolute_path), err.message, unexpected):
            if msg not in out:
                out.append(msg)
    return out


class CrdValidator:
    """Validator for custom resources, keyed by (group/version, kind) of every served CRD version."""

    def __init__(self) -> None:
        self._validators: dict[tuple[str, str], tuple[Any, bool]] = {}
        self.sources: dict[tuple[str, str], str] = {}

    @classmethod
    def from_files(cls, paths: Iterable[str | Path], strict: bool = True) -> CrdValidator:
        """Read CRD YAML files (a directory means its *.yaml). Non-CRD documents are skipped."""
        self = cls()
        for path in paths:
            path = Path(path)
            for file in sorted(path.glob("*.yaml")) if path.is_dir() else [path]:
                with open(file, encoding="utf-8") as fh:
                    for doc in yaml.load_all(fh, Loader=yaml.CSafeLoader):
                        if isinstance(doc, dict) and doc.get("kind") == "CustomResourceDefinition":
                            self.add_crd(doc, str(file), strict)
        return self

    def add_crd(self, crd: dict, source: str = "<memory>", strict: bool = True) -> None:
        if crd.get("apiVersion") != "apiextensions.k8s.io/v1":
            raise ValueError(f"{source}: only apiextensions.k8s.io/v1 CRDs, got {crd.get('apiVersion')!r}")
        spec = crd["spec"]
        group, kind = spec["group"], spec["names"]["kind"]
        for version in spec["versions"]:
            if not version.get("served", True):
                continue
            api_version = f"{group}/{version['name']}"
            openapi = (version.get("schema") or {}).get("openAPIV3Schema")
            if openapi is None:
                continue  # a version without a schema: leave it unknown rather than accept anything
            schema = _root_schema(openapi, strict)
            self._validators[(api_version, kind)] = _compile(schema)
            self.sources[(api_version, kind)] = source

    def kinds(self) -> list[tuple[str, str]]:
        return sorted(self._validators)

    def has_schema(self, api_version: str, kind: str) -> bool:
        return (api_version, kind) in self._validators

    def located(self, obj: dict) -> list[tuple[tuple, str]]:
        """(instance path, message) of every problem in `obj`, the path of an unknown field naming the field.
        Raises SchemaNotFound."""
        key = (obj.get("apiVersion"), obj.get("kind"))
        if key not in self._validators:
            raise SchemaNotFound(key[1], key[0], "the loaded CRDs")
        validator, is_rust = self._validators[key]
        out: list[tuple[tuple, str]] = []
        found = ([(tuple(e.instance_path), e.message, getattr(e.kind, "unexpected", None)
                   if e.kind.name == "additionalProperties" else None) for e in validator.iter_errors(obj)]
                 if is_rust else [(tuple(e.absolute_path), e.message, _unexpected(e)) for e in validator.iter_errors(obj)])
        for path, message, unexpected in found:
            for name, msg in zip(unexpected or [None], format_error(list(path), message, unexpected)):
                item = ((*path, name) if name is not None else path, msg)
                if item not in out:
                    out.append(item)
        return out

    def errors(self, obj: dict) -> list[str]:
        """Human messages for every problem in `obj`; [] means valid. Raises SchemaNotFound."""
        if not isinstance(obj, dict):
            raise TypeError(f"expected a Kubernetes object (dict), got {type(obj).__name__}")
        key = (obj.get("apiVersion"), obj.get("kind"))
        if key not in self._validators:
            raise SchemaNotFound(key[1], key[0], "the loaded CRDs")
        validator, is_rust = self._validators[key]
        return rs_errors(validator, obj) if is_rust else _py_errors(validator, obj)
