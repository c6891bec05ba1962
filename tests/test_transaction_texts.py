"""The fleet files of a commit printed at the cost of the change (outputs/fleet.listing_json,
outputs/charts.splice_index) are byte for byte what printing them whole gives, whatever changed; a previous
text not laid out as gpuop prints it is never copied from; the nesting bound of untrusted JSON
(profile/bounded), decided at C speed, agrees with the located scan."""

from __future__ import annotations

import copy
import json
import random
from pathlib import Path

import pytest

from gpuop.errors import UserError
from gpuop.kube.yamlio import dump_json
from gpuop.outputs import charts, fleet
from gpuop.profile import bounded


def _entry(rng: random.Random, i: int) -> dict:
    return {"name": f"cluster-{i:04d}", "chartVersion": f"0.{rng.randint(1, 3)}.0", "labels": {"région": "eu\n"},
            "capacity": {"pools": [{"gpu": "L40S", "perGpu": {}, "nodes": None, "total": rng.randint(0, 9)}]},
            "kinds": [["", "Namespace", False], ["apps", "DaemonSet", True]], "clusterObjects": [],
            "provenance": {"files": {f"profiles/c{i}.yaml": "sha256:ab"}, "inputs": f"sha256:{i}"}}


def _index(entries: list) -> dict:
    return {"apiVersion": "gpuop/v1alpha1", "kind": "Index", "gpuop": "0.1.0", "clusters": entries}


@pytest.mark.parametrize("seed", range(5))
def test_index_and_lock_printed_item_by_item_are_the_bytes_of_the_whole_document(seed):
    rng = random.Random(seed)
    before = [_entry(rng, i) for i in range(40)]
    text = dump_json(_index(before))
    assert fleet.listing_json(_index(before), "clusters") == text.encode()
    known = fleet.listing_texts(text, json.loads(text)["clusters"], "clusters")
    assert len(known) == 40
    after = copy.deepcopy(before)
    after[rng.randrange(40)]["chartVersion"] = "9.9.9"          # one changed
    del after[rng.randrange(39)]                                # one removed
    after.insert(rng.randrange(39), _entry(rng, 900))           # one added
    assert fleet.listing_json(_index(after), "clusters", known) == dump_json(_index(after)).encode()
    lock = {"apiVersion": "gpuop/v1alpha1", "kind": "VersionLock",
            "clusters": {e["name"]: {"version": e["chartVersion"], "digest": "sha256:x"} for e in before}}
    lock_text = dump_json(lock)
    known = fleet.listing_texts(lock_text, json.loads(lock_text)["clusters"], "clusters")
    lock2 = copy.deepcopy(lock)
    lock2["clusters"]["cluster-0003"]["version"] = "0.4.0"
    lock2["clusters"]["a-new-one"] = {"version": "0.1.0", "digest": "sha256:y"}
    assert fleet.listing_json(lock2, "clusters", known) == dump_json(lock2).encode()
    assert fleet.listing_json(_index([]), "clusters") == dump_json(_index([])).encode()


def test_a_previous_text_not_laid_out_as_gpuop_prints_it_is_not_copied_from():
    entries = [_entry(random.Random(1), i) for i in range(5)]
    compact = json.dumps(_index(entries))                        # same content, other layout
    assert fleet.listing_texts(compact, entries, "clusters") == {}
    shifted = dump_json(_index(entries)).replace('\n      "chartVersion"', '\n       "chartVersion"')
    known = fleet.listing_texts(shifted, json.loads(shifted)["clusters"], "clusters")
    # a text vouched for is copied as it is (it is the caller's to vouch: the last run's, or the base's in git);
    # here the pairing by position still holds, so the item is the edited one: the bytes follow the text
    assert all(known[e["name"]][0] == e for e in entries)
    # an item that differs from the text's is printed again
    changed = copy.deepcopy(entries)
    changed[2]["chartVersion"] = "7.0.0"
    out = fleet.listing_json(_index(changed), "clusters", {k: v for k, v in known.items() if k == "cluster-0002"})
    assert out == dump_json(_index(changed)).encode()


@pytest.mark.parametrize("later", [[{"a": 1}], [{"a": 1}, {"b": [2]}], [], {"x": {"y": 1}}])
def test_a_list_or_object_printed_after_the_items_is_never_taken_for_the_last_item(later):
    entries = [_entry(random.Random(2), i) for i in range(3)]
    doc = {**_index(entries), "zLater": later}
    text = dump_json(doc)
    known = fleet.listing_texts(text, json.loads(text)["clusters"], "clusters")
    # each text copied is its item's own print, or nothing is copied
    assert all(bytes(t) == ("    " + fleet._item_text(i)).encode() for i, t in known.values())
    assert fleet.listing_json(doc, "clusters", known) == text.encode()


def _chart(name: str, version: str) -> dict:
    return {"version": version, "appVersion": "v26.7.0", "kubeVersion": ">= 1.34.0-0", "description": f"for {name}",
            "digest": f"{name}{version}".encode().hex()[:16], "file": f"{name}-{version}.tgz", "name": name}


def test_the_helm_index_with_copied_blocks_is_the_bytes_of_the_whole_index():
    made0 = {c["file"]: c for n in range(30) for c in [_chart(f"c{n:02d}", "0.1.0")]}
    made0.update({c["file"]: c for c in [_chart("c03", "0.2.0"), _chart("c03", "0.10.0")]})
    archives = dict.fromkeys(made0, b"")
    text = charts.index_yaml(charts.entries_from(archives, None, made0))
    known = charts.blocks(text)
    assert known is not None and len(known) == 30
    previous = __import__("yaml").safe_load(text)
    new = _chart("c07", "0.2.0")
    # the carried archives (paths, trusted) are taken from the previous index without being read
    later = {**{f: Path(f) for f in archives}, new["file"]: b""}
    del later["c11-0.1.0.tgz"]
    whole = charts.index_yaml(charts.entries_from(later, previous, {new["file"]: new}, trusted=True))
    assert charts.splice_index(later, known, {new["file"]: new}, trusted=True) == whole
    assert charts.blocks(text.replace("entries:\n", "entries: \n")) is None      # another layout: not split
    assert charts.splice_index({"stray-0.1.0.tgz": b""}, known) is None          # an archive no block lists


@pytest.mark.parametrize("text,deep", [
    ("[" * 64 + "]" * 64, False), ("[" * 65 + "]" * 65, True), ('{"a": "' + "[" * 100 + '"}', False),
    ('["\\\\", ' + "[" * 63 + "]" * 63 + "]", False), ('["\\"[[[", ' + ", ".join(["{}"] * 5) + "]", False),
    ('[' * 40 + '{"k": ' * 30 + "1" + "}" * 30 + "]" * 40, True)])
def test_json_nesting_bound(text, deep):
    json.loads(text)
    assert bounded._shallow(text.encode()) is not deep
    if deep:
        with pytest.raises(UserError, match=r"nests deeper than 64 levels"):
            bounded.parse_json("index.json", text.encode())
    else:
        bounded.parse_json("index.json", text.encode())


def test_json_nesting_bound_agrees_with_the_located_scan_on_random_documents():
    rng = random.Random(3)

    def gen(d):
        if d > 70 or rng.random() < 0.15:
            return rng.choice(['1', '"a\\\\"', '"[\\"{"', '"]}"', 'null', '"\\u005b"'])
        if rng.random() < 0.5:
            return "[" + ",".join(gen(d + 1) for _ in range(rng.randint(0, 2))) + "]"
        return "{" + ",".join(f'"k{i}\\\\": {gen(d + 1)}' for i in range(rng.randint(0, 2))) + "}"

    for _ in range(500):
        text = gen(0)
        json.loads(text)
        try:
            bounded._check_depth("x", text, b"[")       # b"[" is never settled fast: the located scan decides
            scan_deep = False
        except UserError:
            scan_deep = True
        assert bounded._shallow(text.encode()) is not scan_deep, text[:120]
