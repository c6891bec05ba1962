"""Moves between stack releases NVIDIA does not support, refused before any preview: a change of `spec.release`
(in operator mode with `spec.delivery.operator.version`) that skips a release, which NVIDIA's life-cycle policy
rules out ("Upgrades are only supported within a major release or to the next major release.", catalog
releases.yaml `upgrades`). `gpuop diff`, `diff --impact`, `report` and `check` compare the last output with the
next one; each refuses such a move with exit 2, located at the profile's field, naming the documented path.
What a supported move does is ops/impact.py's (`_release_move` and the per-component effects).
"""

from __future__ import annotations

import json
from pathlib import Path

from gpuop.errors import Issue, UserError


def _releases(tree: dict) -> dict[str, str]:
    try:
        return {c["name"]: str(c.get("stackRelease") or "") for c in json.loads(tree["index.json"])["clusters"]}
    except (KeyError, ValueError, TypeError):
        return {}


def refusals(old: dict, new: dict) -> list[tuple[str, str]]:
    """(cluster, why) of every move from the last output's release to the next one's that NVIDIA does not support."""
    from gpuop import catalog as catalog_mod

    cat = catalog_mod.load()
    before, after = _releases(old), _releases(new)
    return [(c, why) for c in sorted(set(before) & set(after))
            if (why := cat.unsupported_move(before[c], after[c]))]


def _field(data: dict) -> tuple:
    """Where the release is decided: spec.release, else the pinned operator version, else spec (the newest)."""
    spec = data.get("spec") if isinstance(data.get("spec"), dict) else {}
    if "release" in spec:
        return ("spec", "release")
    op = ((spec.get("delivery") or {}).get("operator") or {}) if isinstance(spec.get("delivery"), dict) else {}
    return ("spec", "delivery", "operator", "version") if isinstance(op, dict) and "version" in op else ("spec",)


def refuse(old: dict, new: dict, paths: list[Path]) -> None:
    """UserError (exit 2) with each unsupported move located in its profile; nothing when every move is supported."""
    found = refusals(old, new)
    if not found:
        return
    from gpuop.profile.load import discover, load_profile

    why_of = dict(found)
    issues = []
    for f in discover(paths):
        loaded = load_profile(f)
        name = (loaded.data.get("metadata") or {}).get("name")
        if name in why_of:
            issues.append(loaded.positions.issue(_field(loaded.data), "Forbidden: " + why_of.pop(name)))
    issues += [Issue(c, 0, 0, "spec.release", "Forbidden: " + why) for c, why in sorted(why_of.items())]
    raise UserError(issues)
