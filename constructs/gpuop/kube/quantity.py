"""One parser of Kubernetes resource quantities (k8s.io/apimachinery pkg/api/resource quantity.go
ParseQuantity), shared by the profile models, validate/ and verify/.

`parse_quantity` gives the exact value (a Fraction) or raises QuantityError with the API server's
message. `SUBSET_PATTERN` is the narrower form gpuop's profile fields and the chart's values schema
accept (plain decimal numbers with the suffixes people write for CPU and memory); `in_int64_milli`
is gpuop's extra bound (the kubelet overflows on larger values the API server still accepts).
"""

from __future__ import annotations

import re
from fractions import Fraction

FORMAT_ERROR = "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
SUFFIX_ERROR = "unable to parse quantity's suffix"

# parseQuantityString's scan: sign, digits, '.', digits, then the suffix; an empty number reads as 0
# (so "Gi", "." and "-" are zero quantities upstream too), an empty string is refused.
_QUANTITY = re.compile(r"([+-]?)([0-9]*(?:\.[0-9]*)?)([eEinumkKMGTP]*[-+]?[0-9]*)")
_EXPONENT = re.compile(r"[eE]([-+]?[0-9]+)")
SUFFIXES: dict[str, Fraction] = {
    "": Fraction(1), "n": Fraction(1, 10**9), "u": Fraction(1, 10**6), "m": Fraction(1, 1000),
    "k": Fraction(10**3), "M": Fraction(10**6), "G": Fraction(10**9), "T": Fraction(10**12),
    "P": Fraction(10**15), "E": Fraction(10**18),
    "Ki": Fraction(2**10), "Mi": Fraction(2**20), "Gi": Fraction(2**30), "Ti": Fraction(2**40),
    "Pi": Fraction(2**50), "Ei": Fraction(2**60),
}

# The form profile quantities take (a JSON-schema pattern: anchored, as JSON Schema and pydantic read it).
SUBSET_PATTERN = r"^[0-9]+(\.[0-9]+)?(m|k|Ki|M|Mi|G|Gi|T|Ti)?$"
INT64_MAX = 2**63 - 1


class QuantityError(ValueError):
    pass


def parse_quantity(value: object) -> Fraction:
    """Exact value of a quantity; JSON numbers are quantities too (the API server decodes them)."""
    if isinstance(value, bool):
        raise QuantityError(FORMAT_ERROR)
    if isinstance(value, int):
        return Fraction(value)
    if isinstance(value, float):
        return Fraction(str(value))
    if not isinstance(value, str):
        raise QuantityError(FORMAT_ERROR)
    match = _QUANTITY.fullmatch(value)
    if not value or not match:
        raise QuantityError(FORMAT_ERROR)
    sign, number, suffix = match.groups()
    number = number[:-1] if number.endswith(".") else number
    magnitude = Fraction(number) if number else Fraction(0)
    if suffix in SUFFIXES:
        scale = SUFFIXES[suffix]
    elif exp := _EXPONENT.fullmatch(suffix):
        scale = Fraction(10) ** int(exp.group(1))
    else:
        raise QuantityError(SUFFIX_ERROR)
    result = magnitude * scale
    return -result if sign == "-" else result


def in_int64_milli(value: str) -> bool:
    """The quantity fits int64 in milli-units (Quantity.MilliValue() does not overflow); an unparseable
    value is left to the caller's pattern."""
    try:
        q = parse_quantity(value)
    except QuantityError:
        return True
    return int(abs(q) * 1000) <= INT64_MAX
