"""Value slots: the places in an object a user may override at deploy time through Helm values.

A component writes `slot("tolerations")` where a value belongs, or embeds `slot("imageRegistry")`
inside a string. The marker travels through cdk8s untouched. Then:
- the manifests writer fills every slot with the chart's default value (`fill`);
- the Helm writer turns each slot into a template expression (outputs/helm.py).
A marker that is a whole mapping value is a *block* slot: rendered with `toYaml`, and the key is
omitted when the value is empty (so `tolerations: []` at deploy time removes the field). A marker
inside a longer string is an *inline* slot: string concatenation. Render with defaults == manifests
holds by construction; tests prove it with Helm's own engine.
"""

from __future__ import annotations

import re
from typing import Any

OPEN, CLOSE = "\u27e6", "\u27e7"  # ⟦ ⟧: never produced by YAML users in practice; refused in profiles
MARKER = re.compile(f"{OPEN}([A-Za-z0-9_.]+){CLOSE}")


def slot(path: str) -> str:
    return f"{OPEN}{path}{CLOSE}"


def lookup(values: dict, path: str) -> Any:
    node: Any = values
    for part in path.split("."):
        node = node[part]
    return node


def is_empty(value: Any) -> bool:
    return value is None or value == "" or value == [] or value == {}


def fill(obj: Any, values: dict) -> Any:
    """Replace every slot with its value from `values`; drop keys whose block slot is empty."""
    if isinstance(obj, dict):
        out = {}
        for key, value in obj.items():
            if isinstance(value, str):
                if OPEN not in value:           # most values: no slot, nothing to call (every object of a fleet)
                    out[key] = value
                    continue
                whole = MARKER.fullmatch(value)
                if whole:
                    resolved = lookup(values, whole.group(1))
                    if not is_empty(resolved):
                        out[key] = resolved
                    continue
            out[key] = fill(value, values) if isinstance(value, (dict, list, str)) else value
        return out
    if isinstance(obj, list):
        return [v if isinstance(v, str) and OPEN not in v else fill(v, values) for v in obj]
    if isinstance(obj, str) and OPEN in obj:
        return MARKER.sub(lambda m: str(lookup(values, m.group(1))), obj)
    return obj


def slot_paths(obj: Any) -> tuple[str, ...]:
    """Every value path the object's slots name, in a fixed order: what `fill(obj, values)` depends on."""
    found: list[str] = []
    stack = [obj]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
        elif isinstance(node, str) and OPEN in node:
            found += MARKER.findall(node)
    return tuple(sorted(set(found)))
