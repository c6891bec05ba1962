"""Strict, offline JSON-Schema check of built-in Kubernetes objects (DaemonSet, ConfigMap, ...).

What it checks: every field of an object whose (apiVersion, kind) is a built-in Kubernetes type,
against the STRICT schema of one Kubernetes minor version: unknown fields (typos such as `hostPid`),
wrong types (`hostPID: "yes"`), missing required fields, enums.

What it does not check: CRD kinds (see `crdschema`; here they raise `SchemaNotFound`), `format`
(int32, date-time, ... are annotations only, as in `kubernetes_validate`), anything the API server
decides at admission time (defaulting, immutable fields, quotas, names, webhooks, CEL policies) and
cross-object references.

Source: the schemas shipped in the `kubernetes_validate` package,
`kubernetes_validate/kubernetes-json-schema/v1.NN.0-local-strict/` — one file per type named
`<kind>-<group prefix>-<version>.json` (e.g. `daemonset-apps-v1.json`, `configmap-v1.json`,
`clusterrole-rbac-v1.json`), all `$ref`-ing `/api/_definitions.json#/$defs/...`, which resolves
against their `$id` to `https://kubernetes.io/api/_definitions.json`. We register that file once per
version and compile each kind's schema with `jsonschema_rs` once, then cache the compiled validator.
"""

from __future__ import annotations

import json
import re
from functools import cache
from importlib.resources import files
from pathlib import Path
from typing import Any

import jsonschema_rs

from gpuop.errors import field_path

DEFINITIONS_URI = "https://kubernetes.io/api/_definitions.json"
_FOLDER_RE = re.compile(r"^v(\d+)\.(\d+)\.0-local-strict$")
_VERSION_RE = re.compile(r"^v?(\d+)\.(\d+)(?:\.\d+)?$")
_GROUP_RE = re.compile(r"^([^./]*)(?:\.[^/]*)?/")


class SchemaNotFound(LookupError):
    """No schema for this (apiVersion, kind): a CRD kind we were not given, or a typo."""

    def __init__(self, kind: Any, api_version: Any, where: str = ""):
        self.kind, self.api_version, self.where = kind, api_version, where
        suffix = f" in {where}" if where else ""
        super().__init__(f"no schema for kind {kind!r} apiVersion {api_version!r}{suffix}")


def _schema_root() -> Path:
    return Path(str(files("kubernetes_validate") / "kubernetes-json-schema"))


def supported_versions() -> list[str]:
    """Kubernetes minor versions with strict schemas, oldest first: ["1.25", ..., "1.37"]."""
    return list(_supported())


@cache
def _supported() -> tuple[str, ...]:
    found = []
    for entry in _schema_root().iterdir():
        m = _FOLDER_RE.match(entry.name)
        if m and entry.is_dir():
            found.append((int(m[1]), int(m[2])))
    return tuple(f"{a}.{b}" for a, b in sorted(found))


def format_error(path: list, message: str, unexpected: list[str] | None = None) -> list[str]:
    """One human message per problem: `spec.template.spec.hostPid: Additional properties ...`.

    For an unknown field the path names the field itself, one message per unexpected field.
    """
    if unexpected:
        return [
            f"{field_path((*path, name))}: Additional properties are not allowed ({name!r} was unexpected)"
            for name in unexpected
        ]
    return [f"{field_path(tuple(path)) or '<root>'}: {message}"]


def rs_errors(validator: Any, obj: Any) -> list[str]:
    """Messages for every error a compiled `jsonschema_rs` validator finds, de-duplicated, in order."""
    out: list[str] = []
    for err in validator.iter_errors(obj):
        unexpected = getattr(err.kind, "unexpected", None) if err.kind.name == "additionalProperties" else None
        for msg in format_error(err.instance_path, err.message, unexpected):
            if msg not in out:
                out.append(msg)
    return out


def _file_stem(api_version: str, kind: str) -> str:
    # The package's own rule: "rbac.authorization.k8s.io/v1" -> "rbac-v1", "apps/v1" -> "apps-v1".
    return kind.lower() + "-" + _GROUP_RE.sub(r"\1-", api_version)


class KubeValidator:
    """Strict validator for built-in kinds of one Kubernetes minor version, e.g. KubeValidator("1.33")."""

    def __init__(self, version: str):
        m = _VERSION_RE.match(str(version).strip())
        minor = f"{m[1]}.{m[2]}" if m else str(version)
        supported = supported_versions()
        if minor not in supported:
            raise ValueError(
                f"Kubernetes version {version!r} is not supported; supported: {', '.join(supported)}"
            )
        self.version = minor
        self._dir = _schema_root() / f"v{minor}.0-local-strict"
        defs = json.loads((self._dir / "_definitions.json").read_text())
        self._registry = jsonschema_rs.Registry([(DEFINITIONS_URI, defs)])
        self._cache: dict[tuple[str, str], Any] = {}

    def _validator(self, api_version: Any, kind: Any) -> Any:
        key = (api_version, kind)
        if key in self._cache:
            validator = self._cache[key]
        else:
            validator = self._cache[key] = self._compile(api_version, kind)
        if validator is None:
            raise SchemaNotFound(kind, api_version, f"Kubernetes {self.version}")
        return validator

    def _compile(self, api_version: Any, kind: Any) -> Any:
        if not isinstance(api_version, str) or not isinstance(kind, str) or not kind.isalnum():
            return None
        path = self._dir / f"{_file_stem(api_version, kind)}.json"
        if not path.is_file():
            return None
        schema = json.loads(path.read_text())
        # Only top-level types whose group/version/kind really match: the folder also holds
        # sub-types (affinity-v1.json) and the file-name rule drops the group's domain.
        group, _, version = api_version.rpartition("/")
        gvks = schema.get("x-kubernetes-group-version-kind") or []
        if not any((g.get("group"), g.get("version"), g.get("kind")) == (group, version, kind) for g in gvks):
            return None
        # offline=True: a $ref outside the registry is a compile error, never a network fetch.
        return jsonschema_rs.validator_for(schema, registry=self._registry, offline=True)

    def has_schema(self, api_version: str, kind: str) -> bool:
        try:
            self._validator(api_version, kind)
        except SchemaNotFound:
            return False
        return True

    def errors(self, obj: dict) -> list[str]:
        """Human messages for every problem in `obj`; [] means valid. Raises SchemaNotFound."""
        if not isinstance(obj, dict):
            raise TypeError(f"expected a Kubernetes object (dict), got {type(obj).__name__}")
        return rs_errors(self._validator(obj.get("apiVersion"), obj.get("kind")), obj)
