""""Did you mean": the allowed names close to a name that is not one of them, for error messages.

Close, in this order: the same name in another case, then (loose, for catalog names such as GPU models
and releases, where a user types a part: "H100") names that start with it, names that contain it and names it
extends with a "-" suffix ("A10G-24GB": A10G), then
difflib's spelling matches (ratio >= cutoff, the closest first); each name once. Field names use spelling
only (loose=False): "nodes" is a typo of nodePools, not the start of nodeStatusExporter.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable


def close_matches(value: str, allowed: Iterable[str], *, limit: int = 4, cutoff: float = 0.6,
                  loose: bool = True) -> list[str]:
    allowed = [str(a) for a in allowed]
    low = str(value).lower()
    out: list[str] = []

    def add(names) -> None:
        out.extend(a for a in names if a not in out)

    add(a for a in allowed if a.lower() == low)
    if loose and low:
        add(a for a in allowed if a.lower().startswith(low))
        add(a for a in allowed if low in a.lower())
        # a name with a suffix the user added ("A10G-24GB"): the name it extends, before spelling, which would
        # rank another model of the same memory (A30-24GB, another PCI id) first
        add(a for a in allowed if low.startswith(a.lower() + "-"))
    lowered: dict[str, str] = {}
    for a in allowed:
        lowered.setdefault(a.lower(), a)
    add(lowered[c] for c in difflib.get_close_matches(low, list(lowered), n=3, cutoff=cutoff))
    return out[:limit]


def did_you_mean(value: str, allowed: Iterable[str], *, limit: int = 4, cutoff: float = 0.6,
                 loose: bool = True) -> str:
    """"did you mean A, B?" for the close names, or "" when none is close."""
    close = close_matches(value, allowed, limit=limit, cutoff=cutoff, loose=loose)
    return f"did you mean {', '.join(close)}?" if close else ""
