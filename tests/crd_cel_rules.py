"""Generates constructs/gpuop/catalog/data/crd-cel-rules.yaml: every CEL rule (`x-kubernetes-validations`)
of the CRDs in the reference set, with where it sits in the schema and which upstream file it came from.

An installed gpuop has no reference set, so verify/cel.py reads this generated file, never the CRDs;
tests/test_cel.py checks that regenerating it from the CRDs gives the committed file byte for byte.

    .venv/bin/python tests/crd_cel_rules.py [CRDS_DIR]     # rewrites the data file
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "constructs" / "gpuop" / "catalog" / "data" / "crd-cel-rules.yaml"
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*\Z")
# Schema keys that hold sub-schemas but not structural positions: the API server refuses CEL rules
# there (structural schemas), so meeting one means this generator is out of date, not a rule to drop.
_NOT_STRUCTURAL = ("allOf", "anyOf", "oneOf", "not")


def sources(crds: Path) -> dict[str, dict]:
    """file -> {repo, path, commit} from the table in SOURCES.md beside the CRDs."""
    found = {}
    for line in (crds / "SOURCES.md").read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 4 and cells[0].split()[0].endswith(".yaml") and re.fullmatch(r"[0-9a-f]{40}", cells[3]):
            found[cells[0].split()[0]] = {"repo": cells[1], "path": cells[2], "commit": cells[3]}
    return found


def _step(name: str) -> str:
    return f".{name}" if _NAME.match(name) else "['" + name.replace("\\", "\\\\").replace("'", "\\'") + "']"


def _walk(node: dict, path: str, out: list[tuple[str, dict]]) -> None:
    for r in node.get("x-kubernetes-validations", []):
        out.append((path, r))
    for name, sub in sorted(node.get("properties", {}).items()):
        _walk(sub, path + _step(name), out)
    if isinstance(node.get("items"), dict):
        _walk(node["items"], path + "[*]", out)            # each element of an array
    if isinstance(node.get("additionalProperties"), dict):
        _walk(node["additionalProperties"], path + "[*]", out)   # each value of a map
    for key in _NOT_STRUCTURAL:
        subs = node.get(key, [])
        for sub in subs if isinstance(subs, list) else [subs]:
            if "x-kubernetes-validations" in json.dumps(sub):
                raise ValueError(f"{path}: a CEL rule under {key} (not a structural position)")


def rules(crds: Path) -> list[dict]:
    src = sources(crds)
    out = []
    for f in sorted(crds.glob("*.yaml")):
        crd = yaml.load(f.read_bytes(), Loader=yaml.CSafeLoader)
        if src.get(f.name) is None:
            raise ValueError(f"{f.name} has no row in SOURCES.md")
        spec = crd["spec"]
        for v in spec["versions"]:
            if not v.get("served"):
                continue
            found: list[tuple[str, dict]] = []
            _walk(v["schema"]["openAPIV3Schema"], "$", found)
            for i, (path, r) in enumerate(found):
                entry = {"name": f"{spec['names']['kind']}/{v['name']}#{i}", "group": spec["group"],
                         "kind": spec["names"]["kind"], "version": v["name"], "path": path, "rule": r["rule"]}
                for key in ("message", "messageExpression", "fieldPath", "reason", "optionalOldSelf"):
                    if key in r:
                        entry[key] = r[key]
                unknown = set(r) - {"rule", "message", "messageExpression", "fieldPath", "reason", "optionalOldSelf"}
                if unknown:
                    raise ValueError(f"{f.name} {path}: unknown rule keys {sorted(unknown)}")
                entry["source"] = {"crd": f.name, **src[f.name]}
                out.append(entry)
    return out


def _scalar(v) -> str:
    # JSON strings are YAML double-quoted scalars: every value reads back as the same string under
    # YAML 1.1 and 1.2 (a bare commit hash such as 1234e56... would be a float under 1.2).
    return json.dumps(v, ensure_ascii=False)


def render(crds: Path) -> str:
    lines = ["# The CEL validation rules (x-kubernetes-validations) of the CRDs gpuop's GitOps objects target,",
             "# one entry per rule: the CRD's group, kind and served version, the JSONPath of the schema node the",
             "# rule sits on ($ = the object; [*] = each element of an array or each value of a map), the rule",
             "# and its message verbatim, and the upstream file it came from (repository, path, commit).",
             "# Read by verify/cel.py. GENERATED from ../shared/refs/crds by tests/crd_cel_rules.py: do not edit",
             "# (tests/test_cel.py fails when this file and the CRDs disagree).",
             "rules:"]
    for r in rules(crds):
        first = True
        for key, value in r.items():
            lead = "  - " if first else "    "
            first = False
            if isinstance(value, dict):
                lines.append(f"{lead}{key}:")
                lines += [f"      {k}: {_scalar(v)}" for k, v in value.items()]
            else:
                lines.append(f"{lead}{key}: {_scalar(value)}")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    crds = Path(sys.argv[1]) if len(sys.argv) > 1 else REPO.parent / "shared" / "refs" / "crds"
    DATA.write_text(render(crds))
    print(f"wrote {DATA.relative_to(REPO)}")
