"""What every rule module shares: the rule declaration, the context a rule reads and the runner of phases.

A rule is a small named function `check_<what>(ctx) -> list[Issue]` (as Helm's lint rules), declared with
`@rule(id, source=..., severity=...)` (errors.py): it reads the profile and the catalogs through `ctx` and
returns every problem it finds as a located Issue (severity "error" or "warning"); its docstring says what
it refuses. A module lists its rules in `RULES`, a tuple of phases: the rules of a phase all run, and a
later phase runs only when the earlier ones found no error (its rules need what those checked, e.g. known
OS and driver branches before driver DaemonSets can be computed). `applies(ctx)` of a module says whether
its rules concern the profile at all (operator mode, a DRA pool, a known release). validate/runner.py is
the one runner: it gathers every module's rules into its REGISTRY and runs them with `run`, which records
each rule's id on the issues it returns.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any

from gpuop.errors import Issue
from gpuop.errors import rule as _rule
from gpuop.plan import defaults as defaulting

rule = partial(_rule, stage="validate")


@dataclass(frozen=True)
class Context:
    loaded: Any          # profile.load.LoadedProfile: data, positions, sources
    profile: Any         # profile.models.ClusterProfile (typed); None in the catalog pass of a mistyped profile
    cat: Any             # catalog.Catalog
    release: Any         # the profile's catalog Release (None: unknown, the cluster rules report it)
    memo: dict = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def of(cls, loaded, profile, cat) -> "Context":
        return cls(loaded, profile, cat, cat.release(profile.spec.release) if profile is not None else None)

    @property
    def spec(self):
        return self.profile.spec

    @property
    def data(self):
        """The plain merged document (what the catalog pass reads, and what the user wrote)."""
        return self.loaded.data

    @property
    def defaults(self) -> "defaulting.Defaults":
        """The defaulting pass over the typed profile (each pool's effective OS, driver, sidecars; the
        runtime): what the plan reads too, computed once per profile."""
        return self.derived("defaults", lambda: defaulting.of(self.spec))

    def at(self, loc: tuple, message: str, severity: str = "error") -> Issue:
        return self.loaded.positions.issue(loc, message, severity)

    def derived(self, key: str, make: Callable[[], Any]) -> Any:
        """A derivation several rules read (driver groups, pool configs), computed once per profile."""
        if key not in self.memo:
            self.memo[key] = make()
        return self.memo[key]


class Found(list):
    """The issues of a rule that reports as it goes (`out.error(loc, message)`, `out.warn(...)`): a list of
    Issues, returned as the rule's result like any other."""

    def __init__(self, ctx: Context):
        super().__init__()
        self._at = ctx.at

    def error(self, loc: tuple, message: str) -> None:
        self.append(self._at(loc, message))

    def warn(self, loc: tuple, message: str) -> None:
        self.append(self._at(loc, message, "warning"))


Check = Callable[[Context], list[Issue]]


def of_type(node, cls: type, loc: tuple):
    """(field path, value) of every value of type `cls` anywhere under `node` (a typed profile or part of it): what a
    rule about a kind of value checks, found by the field's type, so a new field of that type is checked too."""
    from pydantic import BaseModel

    if isinstance(node, cls):
        yield loc, node
    elif isinstance(node, BaseModel):
        for name in type(node).model_fields:
            yield from of_type(getattr(node, name), cls, loc + (name,))
    elif isinstance(node, (list, tuple)):
        for i, item in enumerate(node):
            yield from of_type(item, cls, loc + (i,))
    elif isinstance(node, dict):
        for k, item in node.items():
            yield from of_type(item, cls, loc + (k,))


def run(phases: Sequence[Sequence[Check]], ctx: Context) -> tuple[list[Issue], list[Issue]]:
    """Run the phases in order; stop before a phase when an error was found. -> (errors, warnings), each
    issue carrying the id of the rule that found it."""
    errors: list[Issue] = []
    warnings: list[Issue] = []
    for phase in phases:
        if errors:
            break
        for check in phase:
            rid = check.rule.id
            for issue in check(ctx):
                issue = issue if issue.rule else replace(issue, rule=rid)
                (errors if issue.severity == "error" else warnings).append(issue)
    return errors, warnings
