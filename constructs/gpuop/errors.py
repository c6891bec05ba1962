"""User-facing errors: one located issue per problem, all reported together.

An `Issue` names the file, line and column, the field path and what is wrong and what is allowed.
`UserError` carries every issue found; the CLI prints them and exits 2. Anything else that escapes
is a bug: the CLI exits 1 with "please report".
"""

from __future__ import annotations

import json
import re
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

    def __reduce__(self):            # raised in a spawned build worker, it reaches the parent whole
        return (UserError, (list(self.issues),))


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
