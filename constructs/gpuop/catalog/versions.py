"""Version numbers as the catalogs and the rules compare them: Kubernetes and OpenShift minors ("1.33"),
driver versions ("570.158.01", a branch "565"), DRA driver and chart versions ("0.5.0", "0.5.0-rc.1"),
stack releases ("26.7").

One parser, on packaging.version (PEP 440 ordering), so every comparison agrees: trailing zeros do not
count ("1.33" == "1.33.0"), a prerelease ranks below its release ("0.5.0-rc.1" < "0.5.0", "0.5.0-dev" <
"0.5.0-rc.1"), a leading "v" is dropped ("v1.34" == "1.34"), and numbers compare as numbers ("570.86.16" <
"570.158.01"). A string that is not a version (a semver prerelease packaging does not know, "1.0.0-foo")
is compared by its leading release numbers.
"""

from __future__ import annotations

import re
from functools import lru_cache

from packaging.version import InvalidVersion, Version

_RELEASE = re.compile(r"\d+(?:\.\d+)*")


@lru_cache(maxsize=4096)
def parse(text: str) -> Version:
    """`text` as a comparable Version; ValueError when it holds no version number at all."""
    s = str(text).strip()
    s = s[1:] if s[:1] in ("v", "V") else s
    try:
        return Version(s)
    except InvalidVersion:
        m = _RELEASE.match(s)
        if m is None:
            raise ValueError(f"{text!r} is not a version number") from None
        return Version(m.group())


def key(text: str) -> Version:
    """Sort key: sorted(versions, key=versions.key)."""
    return parse(text)


def at_least(version: str, floor: str) -> bool:
    """version >= floor."""
    return parse(version) >= parse(floor)


def older(version: str, other: str) -> bool:
    """version < other."""
    return parse(version) < parse(other)


def newest(*candidates: str) -> str:
    """The highest of the versions given (the first of equal ones)."""
    return max(candidates, key=parse)
