"""User-facing errors: one located issue per problem, all reported together, and the record every rule
that finds them is registered with.

An `Issue` names the file, line and column, the field path and what is wrong and what is allowed, and
the id of the rule that found it (not printed: the id is for tests and docs/rules.md). `UserError`
carries every issue found; the CLI prints them and exits 2. Anything else that escapes is a bug: the
CLI exits 1 with "please report".

A rule, in validate/ (profiles) and verify/ (compiled output) alike, is a named `check_<what>` function
declared with `@rule(id, source=..., severity=...)` (as Helm's lint rules): its id, where the refusal
comes from upstream and its default severity, and its docstring saying what it refuses. Each stage's one
runner gathers its rules into a registry (validate/runner.py REGISTRY, verify/semantic RULES) and records
the rule id on every issue it produces; docs/rules.md is the table of every rule
(tests/test_rule_registry.py keeps it in step and makes each rule fire once).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass(frozen=True, order=True)
class Issue:
    file: str
    line: int
    col: int
    path: str
    message: str
    severity: str = "error"
    # Which rule found it: not part of what the user reads, nor of equality (the same problem found by two
    # rules is reported once).
    rule: str = field(default="", compare=False)

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}:{self.col}" if self.line else self.file
        field = f" {self.path}:" if self.path else ""
        prefix = "" if self.severity == "error" else f" {self.severity}:"
        return f"{where}:{prefix}{field} {self.message}"


class UserError(Exception):
    """Bad input. Holds every issue found, in file/line order."""

    def __init__(self, issues: list[Issue] | Issue):
        self.issues = sorted(set(issues if isinstance(issues, list) else [issues]))
        super().__init__("\n".join(str(i) for i in self.issues))

    def __reduce__(self):            # raised in a spawned build worker, it reaches the parent whole
        return (UserError, (list(self.issues),))


SEVERITIES = ("error", "warning")
_RULE_ID = re.compile(r"^[a-z][a-z0-9]*(-[a-z0-9]+)*$")


@dataclass(frozen=True)
class Rule:
    """A registered rule: what docs/rules.md lists for it."""
    id: str              # kebab-case, unique in its stage
    stage: str           # "validate" (profiles) or "verify" (compiled output)
    severity: str        # the default: what most of its issues carry ("error" stops the compile)
    source: str          # where the refusal comes from upstream (code, docs, catalog data)
    refuses: str         # the first paragraph of the check's docstring
    name: str            # the check function's name (check_<what>)
    module: str          # where it is defined (gpuop.validate.dra ...)


def rule(id: str, *, source: str, severity: str = "error", stage: str = "validate",
         refuses: str | None = None) -> Callable:
    """Declare a `check_<what>` function a rule: `fn.rule` holds its Rule record. The function is returned
    unchanged; the stage's runner gathers the records and tags the issues with the id. What it refuses is
    `refuses`, else the first paragraph of its docstring."""
    if not _RULE_ID.match(id) or severity not in SEVERITIES or stage not in ("validate", "verify") or not source:
        raise ValueError(f"bad rule declaration {id!r} ({severity}, {stage}, source {source!r})")

    def register(fn: Callable) -> Callable:
        doc = (refuses or fn.__doc__ or "").strip()
        if not fn.__name__.startswith("check_") or not doc:
            raise ValueError(f"rule {id}: {fn.__name__} must be named check_<what> and say what it refuses "
                             "(refuses= or its docstring)")
        fn.rule = Rule(id, stage, severity, source, " ".join(doc.split("\n\n")[0].split()), fn.__name__,
                       fn.__module__)
        return fn
    return register


def registry(checks) -> dict[str, Rule]:
    """{id: Rule} of the given check functions, refusing undeclared checks and duplicate ids."""
    out: dict[str, Rule] = {}
    for fn in checks:
        r = getattr(fn, "rule", None)
        if r is None:
            raise ValueError(f"{fn.__module__}.{fn.__name__} is not declared with @rule")
        if r.id in out and out[r.id] is not r:
            raise ValueError(f"rule id {r.id} is declared twice ({out[r.id].name}, {r.name})")
        out[r.id] = r
    return out


_PLAIN_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*$")


def field_path(loc: tuple) -> str:
    """('spec', 'nodePools', 0, 'mig', 'layout', '1g.10gb') -> 'spec.nodePools[0].mig.layout["1g.10gb"]'.

    The one formatter of field paths, for profiles and compiled objects alike. Keys that are not plain
    names (dots, slashes, spaces, newlines...) are quoted, so a path is always one unambiguous line,
    whatever the keys hold."""
    out = ""
    for part in loc:
        if isinstance(part, int) and not isinstance(part, bool):
            out += f"[{part}]"
        elif isinstance(part, str) and _PLAIN_KEY.match(part):
            out += ("." if out else "") + part
        else:
            out += f"[{json.dumps(str(part))}]"
    return out
