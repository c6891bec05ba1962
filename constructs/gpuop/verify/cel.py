"""The CEL validation rules (`x-kubernetes-validations`) of the CRDs gpuop's GitOps objects target,
evaluated with cel-python (celpy) the way the API server evaluates them on create.

JSON-Schema validators skip CEL, so an object can pass the CRD schema and still be rejected by the
API server. The rules are not written here: catalog/data/crd-cel-rules.yaml lists every rule of the
CRDs (Flux helm-controller, source-controller, kustomize-controller; NVIDIA's NVIDIADriver, for operator
mode; the Argo CD and ClusterPolicy CRDs carry none), generated from the upstream files by
tests/crd_cel_rules.py, with the schema node each sits on.

How a rule applies (apiextensions-apiserver, pkg/apiserver/schema/cel/validation.go):
- `self` is the node at the rule's schema path; a rule under an array's `items` (or a map's
  `additionalProperties`), written `[*]` in the path, applies to each element; an absent or null
  node is not validated.
- false -> the rule's message (or messageExpression, when it evaluates), at the node's field path
  plus the rule's fieldPath; an evaluation error -> "<error> evaluating rule: <message>".
- Transition rules (those reading `oldSelf`) compare an update with the stored object: they never
  run on create, which is what a compiled output is, so they are skipped.

celpy is imported and each rule compiled on first use, once per process: building celpy's parser
costs a few hundred ms and most objects (every core kind) have no rule. A rule's verdict depends only
on the fields of `self` it reads, so verdicts are cached on those fields: a fleet's objects differ in
names and labels, rarely in what a rule reads.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from dataclasses import dataclass, field
from functools import lru_cache

import yaml


# beside the catalogs, located without importing them (gpuop.catalog brings pydantic in: +0.2 s per start)
_FILE = Path(__file__).parents[1] / "catalog" / "data" / "crd-cel-rules.yaml"
_STEP = re.compile(r"\.([A-Za-z_][A-Za-z0-9_-]*)|\['((?:[^'\\]|\\.)*)'\]|\[\*\]")
_EACH = None            # a path step meaning "each element / each map value"
_CACHE_MAX = 50_000     # verdicts kept per process (a bound, not a tuning knob)


@dataclass(frozen=True)
class Rule:
    name: str           # "<Kind>/<version>#<n>", n counting the version's rules in schema order
    group: str          # apiVersion group
    kind: str
    version: str
    path: str           # JSONPath of the schema node: $ the object, [*] each element
    rule: str           # the CEL source, verbatim
    message: str | None = None
    messageExpression: str | None = None
    fieldPath: str | None = None
    reason: str | None = None
    optionalOldSelf: bool | None = None
    source: dict = field(default_factory=dict, compare=False, hash=False)   # crd, repo, path, commit

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}"

    @property
    def steps(self) -> tuple:
        return _steps(self.path)

    @property
    def transition(self) -> bool:
        """A transition rule: it reads oldSelf, so it only runs on update."""
        return bool(re.search(r"\boldSelf\b", self.rule))

    @property
    def failure(self) -> str:
        """The message when the rule is false: its message, or the API server's default."""
        return self.message.strip() if self.message else f"failed rule: {self.rule.strip()}"


@lru_cache(maxsize=None)
def _steps(path: str) -> tuple:
    if not path.startswith("$"):
        raise ValueError(f"{path!r}: a rule path starts at $")
    steps, pos = [], 1
    while pos < len(path):
        m = _STEP.match(path, pos)
        if not m:
            raise ValueError(f"{path!r}: cannot read the path from {path[pos:]!r}")
        if m.group(1) is not None:
            steps.append(m.group(1))
        elif m.group(2) is not None:
            steps.append(re.sub(r"\\(.)", r"\1", m.group(2)))
        else:
            steps.append(_EACH)
        pos = m.end()
    return tuple(steps)


@lru_cache(maxsize=1)
def rules() -> tuple[Rule, ...]:
    """Every rule of the data file, in its order."""
    doc = yaml.load(_FILE.read_bytes(), Loader=yaml.CSafeLoader)
    return tuple(Rule(**r) for r in doc["rules"])


@lru_cache(maxsize=1)
def _by_type() -> dict[tuple[str, str], tuple[Rule, ...]]:
    index: dict[tuple[str, str], list[Rule]] = {}
    for r in rules():
        # Transition rules never run on create (the API server evaluates them only with an old object).
        if not r.transition:
            index.setdefault((r.api_version, r.kind), []).append(r)
    return {k: tuple(v) for k, v in index.items()}


def _nodes(obj: object, steps: tuple, where: str = ""):
    """(field path, node) for every node the steps reach; absent and null nodes are not validated."""
    if obj is None:
        return
    if not steps:
        yield where, obj
        return
    step, rest = steps[0], steps[1:]
    if step is _EACH:
        if isinstance(obj, list):
            for i, item in enumerate(obj):
                yield from _nodes(item, rest, f"{where}[{i}]")
        elif isinstance(obj, dict):
            for k, v in obj.items():
                yield from _nodes(v, rest, f"{where}[{k}]")
    elif isinstance(obj, dict) and step in obj:
        yield from _nodes(obj[step], rest, f"{where}.{step}" if where else step)


# --- celpy, built on first use --------------------------------------------------------------------

_CEL: list = []                   # [celpy module, Environment]; celpy's lark parser is a process singleton
_PROGRAMS: dict[str, tuple] = {}  # CEL source -> (program, fields of self it reads or None for all of self)
_VERDICTS: dict[tuple, tuple] = {}


def _celpy():
    if not _CEL:
        import celpy

        _CEL.extend((celpy, celpy.Environment()))
    return _CEL


def _self_fields(tree) -> frozenset | None:
    """The names X of every `self.X` / `has(self.X)` in the parse tree, or None when the expression
    uses `self` any other way (a method call on it, an index, the whole value)."""
    names, uses = set(), 0
    for node in tree.iter_subtrees():
        if node.data == "ident" and str(node.children[0]) == "self":
            uses += 1
        if node.data == "member_dot" and len(node.children) == 2:
            inner = node.children[0]
            if getattr(inner, "data", None) == "member" and len(inner.children) == 1:
                prim = inner.children[0]
                if getattr(prim, "data", None) == "primary" and len(prim.children) == 1:
                    ident = prim.children[0]
                    if getattr(ident, "data", None) == "ident" and str(ident.children[0]) == "self":
                        names.add(str(node.children[1]))
                        uses -= 1
    return frozenset(names) if uses == 0 else None


def _program(source: str) -> tuple:
    if source not in _PROGRAMS:
        celpy, env = _celpy()
        tree = env.compile(source)
        _PROGRAMS[source] = (env.program(tree), _self_fields(tree))
    return _PROGRAMS[source]


def _error_text(exc: Exception) -> str:
    """celpy's evaluation error in cel-go's words where they differ ("no such key: name")."""
    text = str(exc.args[0]) if getattr(exc, "args", None) else str(exc)
    m = re.fullmatch(r"no such member in mapping: '(.*)'", text)
    return f"no such key: {m.group(1)}" if m else text


def _evaluate(r: Rule, node: object) -> tuple[bool, str | None, bool]:
    """(holds, detail, failed to evaluate): detail is the message expression's text or the evaluation
    error, when any."""
    celpy, _ = _celpy()
    program, _fields = _program(r.rule)
    activation = {"self": celpy.json_to_cel(node)}
    try:
        value = program.evaluate(activation)
    except celpy.CELEvalError as exc:
        return False, f"{_error_text(exc)} evaluating rule: {(r.message or r.rule).strip()}", True
    if isinstance(value, celpy.celtypes.BoolType) and bool(value):
        return True, None, False
    if r.messageExpression:
        # As the API server: a message expression that fails or yields no single-line text falls
        # back to the message.
        try:
            text = str(_program(r.messageExpression)[0].evaluate(activation)).strip()
        except celpy.CELEvalError:
            text = ""
        if text and "\n" not in text:
            return False, text, False
    return False, None, False


def _projection(r: Rule, node: object) -> object:
    """The part of `node` the rule (and its message expression) can read: the fields it names."""
    fields = _program(r.rule)[1]
    if fields is not None and r.messageExpression:
        more = _program(r.messageExpression)[1]
        fields = None if more is None else fields | more
    if fields is None or not isinstance(node, dict):
        return node
    return {k: node[k] for k in sorted(fields) if k in node}


def _verdict(r: Rule, node: object) -> tuple[bool, str | None, bool]:
    part = _projection(r, node)
    key = (r.name, json.dumps(part, sort_keys=True, separators=(",", ":"), default=str))
    hit = _VERDICTS.get(key)
    if hit is None:
        hit = _evaluate(r, part)
        if len(_VERDICTS) >= _CACHE_MAX:
            _VERDICTS.clear()
        _VERDICTS[key] = hit
    return hit


def violations(obj: dict) -> list[tuple[Rule, str, str]]:
    """(rule, field path, message) for every CEL rule the object breaks, in the data file's order."""
    found = _by_type().get((str(obj.get("apiVersion", "")), str(obj.get("kind", ""))))
    if not found:
        return []
    out = []
    for r in found:
        for where, node in _nodes(obj, r.steps):
            holds, detail, failed = _verdict(r, node)
            if holds:
                continue
            # The rule's fieldPath locates a false rule; an evaluation error stays at the node.
            extra = "" if failed else (r.fieldPath or "")
            out.append((r, where + extra if where else extra.lstrip("."), detail or r.failure))
    return out


def errors(obj: dict) -> list[str]:
    """Messages `path: message` for every CEL rule the object breaks (rules on absent fields do not apply)."""
    return [f"{at}: {text}" if at else text for _, at, text in violations(obj)]
