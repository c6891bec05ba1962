"""User-facing errors: one located issue per problem, all reported together.

An `Issue` names the file, line and column, the field path and what is wrong and what is allowed.
`UserError` carries every issue found; the CLI prints them and exits 2. Anything else that escapes
is a bug: the CLI exits 1 with "please report".
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, order=True)
class Issue:
    file: str
    line: int
    col: int
    path: str
    message: str
    severity: str = "error"

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


def format_path(loc: tuple) -> str:
    """('spec', 'nodePools', 0, 'mig') -> 'spec.nodePools[0].mig'."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out
