"""`gpuop import --check`'s object comparison (ops/import_check.py compare_objects): an object equals itself; one
changed leaf is exactly one difference at that leaf's path (named list entries by name, keys holding dots kept
whole); an absent field equals an empty or null one, as the API server stores objects."""

from __future__ import annotations

import copy

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuop.ops.import_check import MISSING, compare_objects

pytestmark = pytest.mark.fast

KEY = st.sampled_from(["image", "args", "nodeSelector", "app.kubernetes.io/name", "replicas", "value"])
LEAF = st.one_of(st.integers(-3, 3), st.sampled_from(["a", "b", "registry.k8s.io/nfd", "true"]), st.booleans())
TREE = st.recursive(LEAF, lambda inner: st.one_of(
    st.dictionaries(KEY, inner, min_size=1, max_size=3),
    st.lists(st.fixed_dictionaries({"name": st.sampled_from(["x", "y", "z"]), "value": inner}), min_size=1,
             max_size=3, unique_by=lambda e: e["name"])), max_leaves=12)


def leaf_paths(node, path=""):
    if isinstance(node, dict):
        for k, v in node.items():
            part = f'["{k}"]' if "." in k else k
            yield from leaf_paths(v, f"{path}.{part}" if path else part)
    elif isinstance(node, list):
        for e in node:
            yield from leaf_paths(e["value"], f"{path}[{e['name']}].value")
    else:
        yield path


def set_leaf(node, target, value, path=""):
    if isinstance(node, dict):
        for k in node:
            part = f'["{k}"]' if "." in k else k
            sub = f"{path}.{part}" if path else part
            if sub == target and not isinstance(node[k], (dict, list)):
                node[k] = value
                return True
            if set_leaf(node[k], target, value, sub):
                return True
    elif isinstance(node, list):
        for e in node:
            sub = f"{path}[{e['name']}].value"
            if sub == target and not isinstance(e["value"], (dict, list)):
                e["value"] = value
                return True
            if set_leaf(e["value"], target, value, sub):
                return True
    return False


OBJ = st.fixed_dictionaries({"spec": st.dictionaries(KEY, TREE, min_size=1, max_size=3)})


@settings(max_examples=200, deadline=None, derandomize=True)
@given(OBJ)
def test_an_object_equals_itself(obj):
    assert compare_objects(obj, copy.deepcopy(obj)) == []


@settings(max_examples=200, deadline=None, derandomize=True)
@given(OBJ, st.data())
def test_one_changed_leaf_is_one_difference_at_its_path(obj, data):
    paths = list(leaf_paths(obj))
    target = data.draw(st.sampled_from(paths))
    changed = copy.deepcopy(obj)
    assert set_leaf(changed, target, "changed-value")
    before = next(v for p, v in [(p, _get(obj, p)) for p in [target]])
    if before == "changed-value":
        return
    assert compare_objects(obj, changed) == [(target, before, "changed-value")]


def _get(obj, target):
    found = []

    def walk(node, path=""):
        if isinstance(node, dict):
            for k, v in node.items():
                part = f'["{k}"]' if "." in k else k
                walk(v, f"{path}.{part}" if path else part)
        elif isinstance(node, list):
            for e in node:
                walk(e["value"], f"{path}[{e['name']}].value")
        elif path == target:
            found.append(node)
    walk(obj)
    return found[0]


def test_absent_equals_empty_and_null_and_an_object_only_one_side_has_is_whole():
    assert compare_objects({"a": None, "b": [], "c": {}}, {}) == []
    assert compare_objects({"spec": {"x": 1}}, MISSING) == [("", {"spec": {"x": 1}}, MISSING)]
    assert compare_objects({"env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]},
                           {"env": [{"name": "B", "value": "2"}, {"name": "A", "value": "3"}]}) == \
        [("env[A].value", "1", "3")]
