"""kube/slots.fill against the rule it implements, written the plain way: every whole-value slot takes its
value (its key dropped when the value is empty), every slot inside a string is replaced by the value's text,
everything else is copied as it is."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from gpuop.kube.slots import MARKER, fill, is_empty, lookup, slot

VALUES = {"a": "x", "b": "", "c": [], "d": {"k": "v"}, "e": {"f": 3}, "g": None, "h": ["t"]}
PATHS = ["a", "b", "c", "d", "e.f", "g", "h"]


def plain_fill(obj, values):
    if isinstance(obj, dict):
        out = {}
        for key, value in obj.items():
            if isinstance(value, str) and MARKER.fullmatch(value):
                resolved = lookup(values, MARKER.fullmatch(value).group(1))
                if not is_empty(resolved):
                    out[key] = resolved
            else:
                out[key] = plain_fill(value, values)
        return out
    if isinstance(obj, list):
        return [plain_fill(v, values) for v in obj]
    if isinstance(obj, str):
        return MARKER.sub(lambda m: str(lookup(values, m.group(1))), obj)
    return obj


strings = st.one_of(st.text(max_size=8), st.sampled_from(PATHS).map(slot),
                    st.tuples(st.text(max_size=4), st.sampled_from(PATHS), st.text(max_size=4))
                    .map(lambda t: t[0] + slot(t[1]) + t[2]))
leaves = st.one_of(strings, st.integers(), st.booleans(), st.none(), st.floats(allow_nan=False))
objects = st.recursive(leaves, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                       st.dictionaries(st.text(max_size=5), inner, max_size=4)),
                       max_leaves=30)


@given(objects)
def test_fill_is_the_plain_rule(obj):
    assert fill(obj, VALUES) == plain_fill(obj, VALUES)


def test_an_empty_block_slot_drops_its_key_and_an_inline_one_prints_the_value():
    obj = {"tolerations": slot("c"), "image": f"{slot('a')}/driver", "env": [slot("a"), {"v": slot("e.f")}]}
    assert fill(obj, VALUES) == {"image": "x/driver", "env": ["x", {"v": 3}]}
