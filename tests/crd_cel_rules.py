"""Generates constructs/gpuop/catalog/data/crd-cel-rules.yaml: every CEL rule (`x-kubernetes-validations`)
of the CRDs gpuop's objects target, with where it sits in the schema and which upstream file it came from.

The CRDs: every file of the reference set's crds/ (Argo CD, Flux) and NVIDIA's ClusterPolicy and
NVIDIADriver CRDs (gpu-operator/), the kinds operator mode writes. Where each came from (repository,
upstream path, commit) is read from refs.lock, the pin `make refs` fetches by, so the generator runs on
any copy of the reference set.

An installed gpuop has no reference set, so verify/cel.py reads this generated file, never the CRDs;
tests/test_cel.py checks that regenerating it from the CRDs gives the committed file byte for byte.

    .venv/bin/python tests/crd_cel_rules.py [REFS_DIR]     # rewrites the data file
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "constructs" / "gpuop" / "catalog" / "data" / "crd-cel-rules.yaml"
LOCK = REPO / "refs.lock"
NVIDIA_CRDS = ("gpu-operator/nvidia.com_clusterpolicies.yaml", "gpu-operator/nvidia.com_nvidiadrivers.yaml")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*\Z")
# Schema keys that hold sub-schemas but not structural positions: the API server refuses CEL rules
# there (structural schemas), so meeting one means this generator is out of date, not a rule to drop.
_NOT_STRUCTURAL = ("allOf", "anyOf", "oneOf", "not")


def crd_files(refs: Path) -> list[Path]:
    """The CRD files, in the data file's order."""
    return sorted((refs / "crds").glob("*.yaml")) + [refs / f for f in NVIDIA_CRDS]


def sources(lock: Path = LOCK) -> dict[str, dict]:
    """refs-relative file -> {repo, path, commit}, from refs.lock."""
    doc = json.loads(lock.read_text())
    return {f["path"]: {"repo": doc["sources"][f["source"]]["repo"], "path": f["upstream"],
                        "commit": doc["sources"][f["source"]]["commit"]} for f in doc["files"]}


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


def rules(refs: Path) -> list[dict]:
    src = sources()
    out = []
    for f in crd_files(refs):
        crd = yaml.load(f.read_bytes(), Loader=yaml.CSafeLoader)
        name = f.relative_to(refs).as_posix()
        if src.get(name) is None:
            raise ValueError(f"{name} is not in refs.lock")
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
                entry["source"] = {"crd": name, **src[name]}
                out.append(entry)
    return out


def _scalar(v) -> str:
    # JSON strings are YAML double-quoted scalars: every value reads back as the same string under
    # YAML 1.1 and 1.2 (a bare commit hash such as 1234e56... would be a float under 1.2).
    return json.dumps(v, ensure_ascii=False)


def render(refs: Path) -> str:
    lines = ["# The CEL validation rules (x-kubernetes-validations) of the CRDs gpuop's GitOps objects target,",
             "# one entry per rule: the CRD's group, kind and served version, the JSONPath of the schema node the",
             "# rule sits on ($ = the object; [*] = each element of an array or each value of a map), the rule",
             "# and its message verbatim, and the upstream file it came from (repository, path, commit).",
             "# Read by verify/cel.py. GENERATED from the reference set's CRDs (crds/, NVIDIA's ClusterPolicy and",
             "# NVIDIADriver) by tests/crd_cel_rules.py: do not edit",
             "# (tests/test_cel.py fails when this file and the CRDs disagree).",
             "rules:"]
    for r in rules(refs):
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
    sys.path.insert(0, str(Path(__file__).parent))
    from conftest import REFS      # GPUOP_REFS, else ../shared/refs, else .refs/ (as the tests find it)

    DATA.write_text(render(Path(sys.argv[1]) if len(sys.argv) > 1 else REFS))
    print(f"wrote {DATA.relative_to(REPO)}")
