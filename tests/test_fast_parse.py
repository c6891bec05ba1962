"""Profiles are parsed by libyaml (profile/fastyaml.py) and ruamel computes positions only when
a message needs them. The fast path must give exactly ruamel's values and types, or hand the document
to ruamel: these tests compare the two on every bundled profile, a bench fleet, the hostile inputs, and
generated scalars and documents (YAML 1.2 as ruamel reads it: `yes` is a string, `0580` is 580), and check
that unusual documents fall back, that refusals keep their words, and that positions stay lazy.
"""

from __future__ import annotations

import math
import pickle
import sys
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuop import catalog
from gpuop.errors import UserError
from gpuop.profile import fastyaml, load
from gpuop.validate.runner import validate


REPO = Path(__file__).resolve().parents[1]
SETTINGS = settings(max_examples=300, deadline=None, database=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def ruamel(text: str):
    """The ruamel path's values (what every profile got before the fast path), or its UserError."""
    try:
        return load._ruamel_document("f.yaml", text, "a profile")[0]
    except UserError as exc:
        return exc


def fast(text: str):
    return fastyaml.load(text, load.MAX_VALUES)


def same(a, b) -> bool:
    """Equal values of exactly the same types, NaN equal to NaN, the sign of 0.0 and NaN compared too."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, float):
        return (a == b or (math.isnan(a) and math.isnan(b))) and math.copysign(1, a) == math.copysign(1, b)
    return a == b


def agrees(text: str) -> bool:
    """The fast path gives ruamel's values, or falls back (None); it never accepts what ruamel refuses."""
    got = fast(text)
    if got is None:
        return True
    want = ruamel(text)
    assert not isinstance(want, UserError), f"fast path accepted {text!r}, ruamel refuses: {want}"
    assert same(got, want), f"{text!r}: fast {got!r} != ruamel {want!r}"
    return True


def outcome(fn, text: str):
    """(values, table) or the exact issues raised, for comparing two readers."""
    try:
        data, table = fn("f.yaml", text)
    except UserError as exc:
        return [str(i) for i in exc.issues]
    return data, table() if callable(table) else table


# ---- the same values on real documents ------------------------------------------------------------

@pytest.mark.parametrize("path", sorted((REPO / "profiles").glob("*.yaml")), ids=lambda p: p.name)
def test_every_bundled_profile_is_read_fast_with_ruamels_values(path):
    text = path.read_text()
    got = fast(text)
    assert got is not None, "a bundled profile is an ordinary document: the fast path reads it"
    assert same(got, ruamel(text))


def test_every_bench_fleet_profile_is_read_fast_with_ruamels_values(tmp_path):
    sys.path.insert(0, str(REPO / "bench"))
    try:
        import fleet
    finally:
        sys.path.remove(str(REPO / "bench"))
    fleet.generate(200, tmp_path)   # every design of the generator, each with several variants
    files = sorted((tmp_path / "profiles").glob("*.yaml"))
    assert len(files) > 200, "the clusters and the partials they extend"
    for f in files:
        text = f.read_text()
        got = fast(text)
        assert got is not None and same(got, ruamel(text)), f.name


def _hostile_texts() -> list[tuple[str, str]]:
    out = []
    for case_file in sorted((REPO / "tests" / "hostile").glob("*.yaml")):
        for rel, spec in (yaml.safe_load(case_file.read_text()).get("files") or {}).items():
            if isinstance(spec, str) and rel.endswith((".yaml", ".yml")):
                out.append((f"{case_file.stem}:{rel}", spec))
    return out


@pytest.mark.parametrize("name,text", _hostile_texts(), ids=[n for n, _ in _hostile_texts()])
def test_hostile_profiles_get_the_same_values_or_the_same_refusal(name, text):
    """parse_document (fast path, then ruamel) and read_document (ruamel only) agree on every hostile
    profile: the same values and positions, or exactly the same located issues."""
    assert outcome(load.parse_document, text) == outcome(load.read_document, text)
    assert agrees(text)


# ---- scalars: YAML 1.2 as ruamel's round-trip loader reads them -----------------------------------

TRICKY = ["yes", "no", "on", "off", "y", "n", "Y", "N", "Yes", "NO", "On", "OFF", "true", "True", "TRUE", "tRue",
          "false", "False", "FALSE", "0580", "0o17", "0O17", "0x1F", "0X1F", "0x1f", "0b101", "0b", "0x", "0o8",
          "1_000", "1__0", "1_", "_1", "1:20", "-1:20", "1:20.5", "190:20:30", "2001-12-14", "2001-1-1",
          "2001-12-14t21:59:43.10-05:00", "2001-12-14 21:59:43.10 -5", ".inf", "-.inf", "+.Inf", ".INF", ".NaN",
          ".nan", ".NAN", "-.nan", "inf", "nan", "NaN", "~", "null", "Null", "NULL", "nULL", "", "=", "<<", "0", "-0",
          "+0", "00", "012", "09", "0777", "-0777", "0.", "-0.0", "0.5", ".5", "+.5", "1e3", "1E3", "1.0e+3",
          "1.e3", "4E-5", "12e03", "685.230_15e+03", "1_0.5", "01.5", "3.", "._", "0b_", "0x_", "0o_", "-_", "+_",
          "0x_1", "-0x1F", "+0o17", "-0b1", "1.2.3", "1,000", "+", "-1", "+12", "9" * 5000, "0x" + "f" * 4000]
SCALAR = st.one_of(st.sampled_from(TRICKY),
                   st.text(alphabet="0123456789_.:+-eEoxXbBaAfFinNTtrulsyYO~=< ", min_size=1, max_size=12))


@pytest.mark.parametrize("scalar", TRICKY[:-2] + ["9" * 50])
def test_each_tricky_plain_scalar_gets_ruamels_value_or_falls_back(scalar):
    for text in (f"k: {scalar}\n", f"k: [{scalar}, x]\n", f"k:\n- {scalar}\n", f"{scalar}: v\n"):
        assert agrees(text)


def test_yaml_1_1_words_and_numbers_are_read_as_yaml_1_2():
    text = "a: [yes, no, on, off, y, 0580, 0o17, 0x1F, 1_000, 1:20, .inf, .NaN, ~, Null, TRUE, '1', 012]\n"
    got = fast(text)["a"]
    assert got[:5] == ["yes", "no", "on", "off", "y"] and got[5:9] == [580, 15, 31, 1000] and got[9] == "1:20"
    assert got[10] == math.inf and math.isnan(got[11]) and got[12:] == [None, None, True, "1", 12]
    assert same(got, ruamel(text)["a"])


@SETTINGS
@given(value=SCALAR, quote=st.sampled_from(["", "", "'", '"']), place=st.sampled_from(["value", "item", "key", "flow"]))
def test_generated_scalars_get_ruamels_value_or_fall_back(value, quote, place):
    if quote == "'":
        value = "'" + value.replace("'", "''") + "'"
    elif quote == '"':
        value = '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    text = {"value": f"a: 1\nk: {value}\n", "item": f"k:\n  - {value}\n  - 2\n", "key": f"{value}: v\nz: 1\n",
            "flow": f"k: {{x: [{value}], y: {value}}}\n"}[place]
    assert agrees(text)


# ---- whole documents: random YAML-ish text ---------------------------------------------------------

KEYS = st.sampled_from(["a", "b", "spec", "name", "x y", "yes", "1", "'q'", '"d"', "a:b", "-k", "k#", "?x"])
PIECES = st.sampled_from(["\n", "\n  ", "\n    ", "\n- ", "\n  - ", ": ", ":", " ", "  ", "\t", "\r\n", "# c", " #c",
                          "[", "]", "{", "}", ", ", ",", "- ", "? ", "|", "|-", ">", ">+", "'", '"', "\\", "\\n",
                          "\\t", "\\x41", "\\u00e9", "\\U0001F600", "\\ud800", "&a ", "*a", "!!str ", "!x ", "<<: ",
                          "---\n", "...\n", "%YAML 1.1\n", "é", "\u2028", "\x85", "\ufeff", "\x07", "\U0001F600",
                          "''", "%", "\r", "-", "--- ", "\n---", "\n...", "... ", "\n\n", "#", ": |\n  ",
                          ": >-\n  ", "\\\n", "\" \"", " \n", "\n ", "@", "`"]) | KEYS | SCALAR


@SETTINGS
@given(pieces=st.lists(PIECES, min_size=1, max_size=30), head=st.sampled_from(["", "a: 1\n", "k:\n  ", "k: "]))
def test_generated_documents_get_ruamels_values_or_fall_back(pieces, head):
    text = head + "".join(pieces)
    assert agrees(text)
    assert outcome(load.parse_document, text) == outcome(load.read_document, text)


JSONISH = st.recursive(st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=8),
                                 SCALAR),
                       lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner,
                                                                                  max_size=4), max_leaves=20)


@SETTINGS
@given(doc=st.dictionaries(st.text(max_size=6), JSONISH, min_size=1, max_size=5),
       style=st.sampled_from([None, True, False]), width=st.sampled_from([20, 1000]))
def test_dumped_documents_get_ruamels_values(doc, style, width):
    """Documents PyYAML writes (quoting, folding, escapes, block and flow): read fast, as ruamel reads them."""
    text = yaml.safe_dump(doc, default_flow_style=style, width=width, allow_unicode=True)
    assert agrees(text)


@pytest.mark.parametrize("text", [
    'a: "\\x41\\u00e9\\U0001F600\\N\\_\\L\\P\\/\\e\\a\\0\\\\ \\t"\n',   # every escape
    'a: "x\n  y\n\n  z "\nb: \'p\n  q\'\n', "a: x\n  y\n\n  z\n", "a: [x\n  y, z]\n",      # folding
    "a: >\n  x\n\n   y\n  z\n", "a: |+\n  x\n\n", "a: >-\n\n  x\n", "a: |2\n    x\n", "a: | # c\n  x\n",
    "? a\n: b\nc:\n", "a: {b, c: }\n", "a: [b: c, d]\n", "a:   \n  - b\n", "a: x #c\n#d\nb: y\n",
    "a: 1\r\nb: |\r\n  x\r\n", "k" * 1100 + ": v\n", "k: " + "v" * 100_000 + "\n", "a: '\U0001F600 é'\n",
])
def test_edge_documents_get_ruamels_values_or_fall_back(text):
    assert agrees(text)
    assert outcome(load.parse_document, text) == outcome(load.read_document, text)


# ---- what falls back to ruamel, and refusals keep their words --------------------------------------

@pytest.mark.parametrize("text", [
    "a: &x {b: 1}\nc: *x\n",               # anchor and alias
    "a: &x 1\n",                           # an anchor alone
    "a: !!str 1\n",                        # a standard tag
    "a: !custom 1\n",                      # a custom tag
    "a: !!binary aGk=\n",
    "a: !!set {x}\n",
    "b: {x: 1}\n<<: {y: 2}\n",             # a merge key
    "a: 1\na: 2\n",                        # a duplicate key
    "a: 1\n'a': 2\n",                      # the same key, quoted
    "1: a\n", "true: a\n", "~: a\n", "[a]: b\n", "? {a: 1}\n: b\n",   # keys that are not strings
    "a: 1\n---\nb: 2\n", "---\n---\na: 1\n",   # more than one document
    "a: 1\n...\n", "a: 1\n...\n...\n",     # an end marker (ruamel refuses two where libyaml reads one)
    "%YAML 1.1\n---\na: yes\n",            # a directive (YAML 1.1 would read yes as true)
    "a: 2001-12-14\n", "a: 2001-12-14 21:59:43.10 -5\n",   # timestamps: ruamel's own datetime types
    "a: =\n",                              # YAML's value key
    "- a\n", "a\n", "", "# only a comment\n",   # not a mapping
    "a: [1\n", "a: 'x\n", "a:\n\t- b\n", "a: b: c\n",   # malformed
    "a: ._\n", "a: 0x_\n", "a: " + "9" * 5000 + "\n",   # numbers Python cannot convert
    "a: \"\\ud800\"\n", "\"\\udfff\": 1\n",  # lone surrogates
    "a: \x07\n", "a: b\u2028c\n", "a: b\x85c\n", "\ufeffa: 1\n",   # refused or read otherwise by ruamel's reader
    "k:\n  a\t", "a: 'b\tc'\n",            # tabs: ruamel refuses some that libyaml reads as spaces
    "k: |# c\n  x\n", "é: >-#\n  x\n",       # a comment right after a block scalar's header (libyaml takes it)
])
def test_unusual_documents_fall_back_to_ruamel_with_the_same_outcome(text):
    assert fast(text) is None
    assert outcome(load.parse_document, text) == outcome(load.read_document, text)


def test_refusals_keep_ruamels_words():
    def refusal(text):
        with pytest.raises(UserError) as exc:
            load.parse_document("f.yaml", text)
        return [str(i) for i in exc.value.issues]

    assert refusal("a: 1\na: 2\n") == ["f.yaml:2:1: malformed YAML: duplicate key 'a' in the mapping starting at "
                                       "line 1, column 1; each key may appear once"]
    assert refusal("a: !custom 1\n") == ["f.yaml:1:1: a: YAML tag !custom is not supported; remove it (profiles "
                                         "hold plain mappings, lists, strings, numbers and booleans)"]
    assert refusal("1: a\n") == ['f.yaml:1:1: key 1 is not a string; keys are names: quote it ("1")']
    assert refusal("- a\n") == ["f.yaml:1:1: the document is a list; a profile is one YAML mapping of fields"]
    assert refusal("a: 0x_\n") == ["f.yaml:1:4: malformed YAML: a value YAML reads as a number cannot be "
                                   "converted (no digits); put the value in quotes"]


def test_a_document_over_the_value_budget_falls_back_and_ruamel_reports_the_limit(monkeypatch):
    """Without aliases a document can still pass MAX_VALUES (2 bytes a value fit 128,000 in 256 KB): the
    fast path counts as load._plain does (the document and every value, keys not) and leaves a document
    over the budget to ruamel, which words the limit."""
    text = "a: {b: [1, 2], c: x}\nd: [[]]\n"   # the document, {b, c}, [1, 2], 1, 2, x, [[]], []: 8 values
    assert fastyaml.load(text, 8) is not None and fastyaml.load(text, 7) is None
    monkeypatch.setattr(load, "MAX_VALUES", 8)
    assert load.parse_document("f.yaml", text)[0] == load.read_document("f.yaml", text)[0]
    monkeypatch.setattr(load, "MAX_VALUES", 7)
    with pytest.raises(UserError, match="the document holds more than 7 values"):
        load.parse_document("f.yaml", text)


def test_the_structure_check_runs_before_either_path():
    with pytest.raises(UserError, match=f"nested more than {load.MAX_DEPTH} levels deep"):
        load.parse_document("f.yaml", "a: " + "[" * 40 + "]" * 40 + "\n")
    with pytest.raises(UserError, match=f"more than {load.MAX_ITEMS} entries"):
        load.parse_document("f.yaml", "a: [" + ", ".join(["1"] * 1002) + "]\n")


# ---- positions: the same table, computed only when asked ------------------------------------------

def _tree(tmp_path: Path) -> Path:
    prof = tmp_path / "profiles"
    prof.mkdir()
    (prof / "_base.yaml").write_text("apiVersion: gpuop/v1alpha1\nkind: ClusterProfile\n"
                                     "spec:\n  os: ubuntu24.04\n  driver: {version: '580'}\n")
    (prof / "c1.yaml").write_text("extends: _base.yaml\nmetadata:\n  name: c1\nspec:\n  driver:\n"
                                  "    version: 595.91.07\n  nodePools:\n  - {name: p, gpu: L40S}\n")
    return prof / "c1.yaml"


def test_positions_are_computed_on_first_use_and_match_the_ruamel_path(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = _tree(tmp_path)
    loaded = load.load_profile(Path("profiles/c1.yaml"))
    assert loaded.positions._table is None, "loading alone computes no positions"
    assert loaded.data == {"apiVersion": "gpuop/v1alpha1", "kind": "ClusterProfile", "metadata": {"name": "c1"},
                           "spec": {"os": "ubuntu24.04", "driver": {"version": "595.91.07"},
                                    "nodePools": [{"name": "p", "gpu": "L40S"}]}}
    assert loaded.positions.of(("spec", "os")) == ("profiles/_base.yaml", 4, 3)
    assert loaded.positions.of(("spec", "driver", "version")) == ("profiles/c1.yaml", 6, 5)
    assert loaded.positions.of(("spec", "nodePools", 0, "gpu")) == ("profiles/c1.yaml", 8, 15)
    assert loaded.positions.of(("spec", "nodePools", 0, "mig")) == ("profiles/c1.yaml", 8, 5)
    # the table the ruamel path computed eagerly: each file's, merged as values merge
    child, base = (load.read_document(f"profiles/{name}", (path.parent / name).read_text())
                   for name in ("c1.yaml", "_base.yaml"))
    del child[0]["extends"]
    assert loaded.positions.table == load._merge_positions(base[1], child[1], child[0])
    assert pickle.loads(pickle.dumps(loaded.positions)) == loaded.positions


def test_an_extends_problem_is_located_on_the_extends_line(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "profiles").mkdir()
    (tmp_path / "profiles" / "c.yaml").write_text("metadata: {name: c}\nextends: missing.yaml\n")
    with pytest.raises(UserError) as exc:
        load.load_profile(Path("profiles/c.yaml"))
    assert [(i.file, i.line, i.col, i.path) for i in exc.value.issues] == [("profiles/c.yaml", 2, 1, "extends")]


def test_validating_the_bundled_profiles_computes_no_positions(monkeypatch):
    """The happy path never asks ruamel: no rule reads positions unless it reports something."""
    monkeypatch.chdir(REPO)
    load._parsed.clear()
    calls = []
    real = load._ruamel_document
    monkeypatch.setattr(load, "_ruamel_document", lambda *a: calls.append(a[0]) or real(*a))
    cat = catalog.load()
    for f in load.discover([Path("profiles")]):
        valid = validate(load.load_profile(f), cat)
        assert not valid.warnings, f
    assert calls == []
