"""The decode step of the API server's clients: kubectl, Helm and Argo CD read YAML with
sigs.k8s.io/yaml, i.e. go-yaml v2, a YAML 1.1 reader. A plain scalar it resolves to a bool or a number
where the Kubernetes field is a string (an env value `y`, a label value `n`, an argument `1e3`) is
refused before any validation: `json: cannot unmarshal bool into Go struct field ... of type string`.
gpuop's own reader (PyYAML) reads those scalars as strings, so the check works on the text, node by node.

`kubectl_scalar` restates go-yaml v2's resolve.go for plain scalars (the resolve map of bools and nulls,
strconv.ParseInt with base 0 after dropping '_', yamlStyleFloat, 0b binaries; timestamps stay strings
when decoded into interface{}). Numbers are accepted where the field is an IntOrString or a Quantity.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import yaml

from gpuop.kube.validation import go_value

from .objects import Finding, child, key, rule

_TRUE = {"y", "Y", "yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON"}
_FALSE = {"n", "N", "no", "No", "NO", "false", "False", "FALSE", "off", "Off", "OFF"}
_FLOATS = {".nan", ".NaN", ".NAN", ".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF", "-.inf", "-.Inf", "-.INF"}
_YAML_STYLE_FLOAT = re.compile(r"[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?")
_DOT_FLOAT = re.compile(r"\.[0-9]+([eE][-+]?[0-9]+)?")
_GO_INT = re.compile(r"[-+]?(0[xX][0-9a-fA-F]+|0[oO][0-7]+|0[bB][01]+|0[0-7]*|[1-9][0-9]*)")
_INT64 = (-(2**63), 2**64 - 1)     # ParseInt, then ParseUint


def _go_int(text: str) -> int | None:
    if not _GO_INT.fullmatch(text):
        return None
    sign = -1 if text[0] == "-" else 1
    body = text.lstrip("+-").lower()
    if body.startswith(("0x", "0o", "0b")):
        value = int(body[2:], {"x": 16, "o": 8, "b": 2}[body[1]])
    elif len(body) > 1 and body[0] == "0":
        value = int(body, 8)
    else:
        value = int(body)
    value *= sign
    return value if _INT64[0] <= value <= _INT64[1] else None


def kubectl_scalar(text: str) -> Any:
    """What go-yaml v2 makes of a plain scalar: True/False/None, an int, a float, or the string itself."""
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    if text in ("", "~", "null", "Null", "NULL"):
        return None
    if text in _FLOATS:
        return float("nan") if "n" in text.lower().replace("inf", "") else float(text.replace(".", "", 1))
    if text[0] == ".":
        return float(text) if _DOT_FLOAT.fullmatch(text) else text
    if text[0].isdigit() or text[0] in "+-":
        plain = text.replace("_", "")
        value = _go_int(plain)
        if value is not None:
            return value
        if _YAML_STYLE_FLOAT.fullmatch(plain):
            return float(plain)
        if plain.startswith("0b") and re.fullmatch("[01]+", plain[2:]):
            return int(plain[2:], 2)
        if plain.startswith("-0b") and re.fullmatch("[01]+", plain[3:]):
            return -int(plain[3:], 2)
    return text


_STR_TAG = "tag:yaml.org,2002:str"
# Map-typed fields: their keys are written `field[key]` in field paths (field.Path.Key).
_MAP_FIELDS = frozenset({"labels", "annotations", "data", "binaryData", "stringData", "nodeSelector", "matchLabels",
                         "limits", "requests", "overhead", "capacity"})
# Fields that take a number as well as a string (IntOrString, resource.Quantity).
_NUMBER_OK = frozenset({"targetPort", "port", "maxUnavailable", "maxSurge", "divisor", "sizeLimit"})


def _scalar(node: yaml.Node, name: str) -> str:
    if isinstance(node, yaml.MappingNode):
        for k, v in node.value:
            if isinstance(k, yaml.ScalarNode) and k.value == name and isinstance(v, yaml.ScalarNode):
                return v.value
    return ""


def _walk(node: yaml.Node, path: str, is_map: bool, kind: str) -> Iterator[tuple[str, yaml.ScalarNode, Any]]:
    if isinstance(node, yaml.MappingNode):
        for k, v in node.value:
            if not isinstance(k, yaml.ScalarNode):
                continue
            sub = key(path, k.value) if is_map else child(path, k.value)
            map_child = not is_map and (k.value in _MAP_FIELDS or (sub == "spec.selector" and kind == "Service"))
            yield from _walk(v, sub, map_child, kind)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            yield from _walk(item, child(path, i), False, kind)
    elif isinstance(node, yaml.ScalarNode) and not node.style and node.tag == _STR_TAG:
        value = kubectl_scalar(node.value)
        if not isinstance(value, str) and value is not None:
            yield path, node, value


def _type(value: Any) -> str:
    return "bool" if isinstance(value, bool) else "number"


@rule("kubectl-decode", source="kubectl / Helm / Argo CD: sigs.k8s.io/yaml (YAML 1.1 scalars) into the typed "
      "Go structs of the API (json: cannot unmarshal)")
def check_kubectl_decode(text: str) -> list[Finding]:
    """A string field whose plain YAML scalar kubectl decodes as a bool or a number (a file's text)."""
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    out: list[Finding] = []
    for doc in yaml.compose_all(text, Loader=loader):
        if not isinstance(doc, yaml.MappingNode):
            continue
        kind, meta = _scalar(doc, "kind"), next((v for k, v in doc.value if getattr(k, "value", None) == "metadata"),
                                                None)
        name, namespace = _scalar(meta, "name"), _scalar(meta, "namespace")
        for path, node, value in _walk(doc, "", False, kind):
            last = re.split(r"[.\[]", path)[-1].rstrip("]")
            in_quantity_map = re.search(r"\.(limits|requests|overhead|capacity)\[[^\]]*\]$", path) is not None
            if not isinstance(value, bool) and (last in _NUMBER_OK or in_quantity_map):
                continue
            shown = go_value(value) if isinstance(value, bool) else node.value
            out.append(Finding(kind, name, namespace, path, rule="kubectl-decode", message=
                               f"decode: json: cannot unmarshal {_type(value)} into a field of type string: kubectl, "
                               f"Helm and Argo CD read YAML 1.1, where the plain scalar {node.value} is "
                               f"{_type(value)} {shown}; quote it"))
    return out


decode_findings = check_kubectl_decode
