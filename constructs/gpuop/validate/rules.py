"""What every rule module shares: the context a rule reads and the runner that gathers its issues.

A rule is a small named function `check_<what>(ctx) -> list[Issue]` (as Helm's lint rules): it reads
the typed profile and the catalogs through `ctx` and returns every problem it finds as a located Issue
(severity "error" or "warning"). A module lists its rules in `RULES`, a tuple of phases: the rules of a
phase all run, and a later phase runs only when the earlier ones found no error (its rules need what
those checked, e.g. known OS and driver branches before driver DaemonSets can be computed). `check()`
of a module runs its phases; validate/runner.py calls every module's `check()`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from gpuop.errors import Issue


@dataclass(frozen=True)
class Context:
    loaded: Any          # profile.load.LoadedProfile: data, positions, sources
    profile: Any         # profile.models.ClusterProfile (typed)
    cat: Any             # catalog.Catalog
    release: Any         # the profile's catalog Release (None: unknown, the cluster rules report it)

    @classmethod
    def of(cls, loaded, profile, cat) -> "Context":
        return cls(loaded, profile, cat, cat.release(profile.spec.release))

    @property
    def spec(self):
        return self.profile.spec

    def at(self, loc: tuple, message: str, severity: str = "error") -> Issue:
        return self.loaded.positions.issue(loc, message, severity)


Rule = Callable[[Context], list[Issue]]


def run(phases: Sequence[Sequence[Rule]], ctx: Context) -> tuple[list[Issue], list[Issue]]:
    """Run the phases in order; stop before a phase when an error was found. -> (errors, warnings)."""
    errors: list[Issue] = []
    warnings: list[Issue] = []
    for phase in phases:
        if errors:
            break
        for rule in phase:
            for issue in rule(ctx):
                (errors if issue.severity == "error" else warnings).append(issue)
    return errors, warnings
