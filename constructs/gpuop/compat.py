"""Compatibility rules from the catalogs (driver branch x GPU, kernel modules, OS / Kubernetes matrix).

`check(loaded, profile, catalog) -> (errors, warnings)`: every broken rule as a located Issue.
"""

from __future__ import annotations


def check(loaded, profile, cat) -> tuple[list, list]:
    return [], []
