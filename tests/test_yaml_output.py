"""Every string gpuop writes reads back as that same string under every reader of its output: PyYAML (YAML
1.1), ruamel.yaml (YAML 1.2) and Kubernetes' own decoding (kubeval: sigs.k8s.io/yaml, as kubectl, Helm and
Argo CD read manifests, compared there with go-yaml v3's YAML 1.2 reading in `yaml11Drift`).

Generated strings (every YAML 1.1 bool/null/int/float/timestamp spelling, sexagesimals, 0o/0x/0b, .nan, `=`,
`<<`, number-like text with underscores, random unicode and control characters) are written as mapping
values, keys and list items by gpuop's writer (kube/yamlio.py, which every output goes through) and read
back. Then the compiled profiles, and a profile whose strings are the booleans and numbers of other
readers, are checked by kubeval (decoding errors, yaml11Drift) and, for the chart, through Helm's engine.
"""

from __future__ import annotations

import io
import json
import math
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ruamel.yaml import YAML

from conftest import REPO, TOOL_PATHS, TOOLS, run_gpuop
from gpuop.kube import yamlio

KUBEVAL = TOOLS / TOOL_PATHS["kubeval"]          # GPUOP_TOOLS, else ../shared/tools (conftest)
needs_kubeval = pytest.mark.skipif(not KUBEVAL.is_file(), reason="kubeval (../shared/tools/kubeval) not present")

SETTINGS = settings(max_examples=250, deadline=None, database=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

# Every spelling the YAML 1.1 types (yaml.org/type: bool, null, int, float, timestamp, merge, value), the
# YAML 1.2 core schema and go-yaml's resolver (strconv base prefixes, `_` removed, its float pattern) give a
# plain scalar, and strings next to them that must stay plain-or-quoted strings.
SPECIAL = """
y Y yes Yes YES n N no No NO true True TRUE false False FALSE on On ON off Off OFF yES oN nO tRUE
~ null Null NULL nULL <<  = ! & * - -- + . .. ._ -_ +_ _ __ _1 1_ 1__ +_1 -_1 1_e_3 0x_ 0b_ 0o_ 0x 0b 0o
0 00 007 08 09 0_7 017 +1 -1 +0 -0 1_000 1__000 12345678901234567890123 -12345678901234567890123
0b1 -0b1 +0b1 0B1 0b1_0 0b12 0o17 0O17 -0o17 0o18 0x1F 0X1F -0x1f +0x1F 0x1G 0x1.8p1 0x_1F 0xffffffffffffffffff
1e3 1E3 1e+3 1e-3 -1e3 +1e3 1E+03 1_0e3 1e_3 1. -1. .5 -.5 +.5 .5e3 .5e+3 .5E-3 ._5 1.5 -1.5 1_0.5 0.5_0
6.8523015e+5 685.230_15e+03 685_230.15 1.2.3 570.124.06 1e 1e+ e3 E3 .e3
.nan .NaN .NAN .Nan +.nan -.nan .inf .Inf .INF -.inf +.inf -.Inf +.INF .iNf inf nan NaN Infinity
1:20 -1:20 +1:20 190:20:30 190:20:30.15 1:20.5 1:60 1:_20 12:345 0:1 01:20 1:2:3:4
2001-12-14 2001-1-2 2001-12-14t21:59:43.10-05:00 2001-12-15T02:59:43.1Z 2002-12-14 2001-12-14T21:59:43Z
2001-12-1 20011214 2001-12-14x
100m 128Mi 1Gi 1Ei 2e 500M 1k 0.5 1/2 v1 v1.2 1-2 1_2_3 ab_1 nvidia.com/gpu
""".split() + [
    "", " ", "  y", "y ", " 1", "1 ", "a: b", "a #b", "#a", "-a", "- a", "? a", ": a", "a:", "'", '"', "''", "%a",
    "@a", "`a", "[a]", "{a}", "a,b", "|", ">", "*a", "&a", "!a", "!!str", "2001-12-14 21:59:43.10 -5",
    "2001-12-14 21:59:43.10", "2001-12-14\t21:59:43.10", "1\t", "y\n", "\n", "\ny", "a\nb", "a\n", "a\n\n",
    " a\nb", "a \nb", "a\n ", "\ta", "a\x00b", "\x07", "\x1b[1m", "\x7f", "\x85", "\u2028", "\u2029", "\ufeff",
    "\ufeffy", "y\ufeff", "\xa0", "\u00e9t\u00e9", "\U0001f600", "\ud7ff", "\ue000", "\ufffd", "\r", "a\rb",
    "a\r\nb", "\x0b", "\x0c", "---", "...", "--- a", "a\n---\nb", "a\n...\nb",
]

DIGITS = "0123456789"
numberish = st.text(alphabet=DIGITS + "_.:eE+-xXoObBaAfF", min_size=1, max_size=8)
timestamps = st.from_regex(r"\A[0-9]{4}-[0-9]{1,2}-[0-9]{1,2}([Tt ][0-9]{1,2}:[0-9]{2}:[0-9]{2}(\.[0-9]*)?"
                           r"( ?(Z|[-+][0-9]{1,2}(:[0-9]{2})?))?)?\Z")
# any character a Python str holds but a lone surrogate (not UTF-8: no writer can encode it)
text = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=12)
strings = st.one_of(st.sampled_from(SPECIAL), numberish, timestamps, text,
                    st.tuples(st.sampled_from(SPECIAL), text).map("".join),
                    st.tuples(text, st.sampled_from(SPECIAL)).map("".join))


def doc(s: str) -> dict:
    """`s` as a mapping value, a key and a list item."""
    return {"value": s, "keys": {s: "k"}, "list": [s, "x"]}


def writers(obj: dict) -> list[str]:
    return [yamlio.dump(obj), yamlio.dump_plain(obj)]


PYYAML = (yaml.SafeLoader, yaml.CSafeLoader)


def ruamel_load(text: str):
    return YAML(typ="safe").load(text)      # YAML 1.2, ruamel's default


def typed(v):
    """A value with its type, floats' NaN made comparable (an equality check alone calls 1 == True)."""
    if isinstance(v, dict):
        return {typed(k): typed(x) for k, x in v.items()}
    if isinstance(v, list):
        return [typed(x) for x in v]
    if isinstance(v, float) and math.isnan(v):
        return (float, "nan")
    return (type(v).__name__, v)


@SETTINGS
@given(strings)
def test_every_string_reads_back_as_itself_under_yaml_1_1_and_1_2(s):
    want = typed(doc(s))
    for out in writers(doc(s)):
        for loader in PYYAML:
            assert typed(yaml.load(out, Loader=loader)) == want, (loader.__name__, out)
        assert typed(ruamel_load(out)) == want, ("ruamel 1.2", out)


def test_the_special_forms_read_back_and_are_quoted_where_some_reader_types_them():
    for s in SPECIAL:
        for out in writers(doc(s)):
            for loader in PYYAML:
                assert typed(yaml.load(out, Loader=loader)) == typed(doc(s)), out
            assert typed(ruamel_load(out)) == typed(doc(s)), out
    # what PyYAML alone leaves plain although other readers type it
    for s in ("y", "Y", "n", "N", "0o17", "1e3", "08", "0B1", "1_e_3", "._", "-_", "2001-1-2"):
        assert yamlio.dump({"a": s}) == f"a: '{s}'\n", s
    for s in ("nvidia", "570.124.06", "128Mi", "v1", "yES", "Infinity", "1.2.3", "_1"):
        assert yamlio.dump({"a": s}) == f"a: {s}\n", s


def _resolvers():
    from ruamel.yaml.resolver import VersionedResolver

    py = yaml.resolver.Resolver()
    rts = [VersionedResolver(version=v) for v in ((1, 1), (1, 2))]
    scalar = yaml.ScalarNode
    from ruamel.yaml.nodes import ScalarNode as RScalar
    return [lambda s: py.resolve(scalar, s, (True, False))] + [
        lambda s, r=r: r.resolve(RScalar, s, (True, False)) for r in rts]


RESOLVERS = _resolvers()


@settings(SETTINGS, max_examples=150)
@given(strings)
def test_imported_profiles_read_back_generated_strings(s):
    text = ruamel_dump(doc(s))
    assert typed(yaml.load(text, Loader=yaml.CSafeLoader)) == typed(doc(s)), text
    assert typed(ruamel_load(text)) == typed(doc(s)), text


@SETTINGS
@given(strings)
def test_what_ambiguous_lets_through_every_resolver_reads_as_a_string(s):
    """yamlio's emitter answers "string" for every scalar `ambiguous` lets through without asking PyYAML:
    that holds only if `ambiguous` covers PyYAML's resolvers (and ruamel's, YAML 1.1 and 1.2). A string with
    a line break is never written plain, so only its quoted form's tag counts (and their patterns' `$`
    would match `yes` before a final newline)."""
    if "\n" not in s and not yamlio.ambiguous(s):
        assert {str(r(s)) for r in RESOLVERS} == {"tag:yaml.org,2002:str"}, s


def ruamel_dump(obj) -> str:
    """As `gpuop import` writes a profile (ruamel's round-trip dumper) with yamlio.quote_ambiguous."""
    y = YAML()
    yamlio.quote_ambiguous(y)
    out = io.StringIO()
    y.dump(obj, out)
    return out.getvalue()


def test_imported_profiles_quote_the_same_strings():
    for s in SPECIAL:
        text = ruamel_dump(doc(s))
        for loader in PYYAML:
            assert typed(yaml.load(text, Loader=loader)) == typed(doc(s)), text
        assert typed(ruamel_load(text)) == typed(doc(s)), text
    assert ruamel_dump({"a": "y", "b": "0o17", "c": "plain"}) == "a: 'y'\nb: '0o17'\nc: plain\n"
    out = io.StringIO()
    YAML().dump({"a": "y"}, out)
    assert out.getvalue() == "a: y\n"       # ruamel's own class is left as it was


# ---- Kubernetes' decoding (kubeval) ------------------------------------------------------------------


def kubeval(path: Path) -> list[dict]:
    proc = subprocess.run([str(KUBEVAL), str(path)], capture_output=True, text=True, timeout=120)
    assert proc.returncode in (0, 1), proc.stderr
    return [json.loads(line) for line in proc.stdout.split("\n") if line]


def decoding_problems(results: list[dict]) -> list[str]:
    """What kubectl could not decode as written, or reads otherwise than a YAML 1.2 reader."""
    out = []
    for r in results:
        for e in r["errors"]:
            if e.startswith(("YAML:", "decode:")):
                out.append(f"{r['file']}#{r['doc']} {r['kind']}/{r['name']}: {e}")
        out += [f"{r['file']}#{r['doc']} {r['kind']}/{r['name']}: {d}" for d in r.get("yaml11Drift") or []]
    return out


def config_maps(strings_: list[str]) -> str:
    """One ConfigMap per string: the string as its name, a data value and a finalizer (list item); then
    one with the string as a data key."""
    docs = []
    for s in strings_:
        docs.append(yamlio.dump({"apiVersion": "v1", "kind": "ConfigMap",
                                 "metadata": {"name": s, "namespace": "t", "finalizers": [s]}, "data": {"v": s}}))
        docs.append(yamlio.dump({"apiVersion": "v1", "kind": "ConfigMap",
                                 "metadata": {"name": "keys", "namespace": "t"}, "data": {s: "v"}}))
    return "---\n".join(docs)


def check_with_kubeval(strings_: list[str], tmp: Path):
    f = tmp / "strings.yaml"
    f.write_text(config_maps(strings_))
    results = kubeval(f)
    assert len(results) == 2 * len(strings_)
    assert decoding_problems(results) == []
    # kubectl's reading of each name: kubeval prints metadata.name as decoded (a bool prints as "true")
    assert [r["name"] for r in results[::2]] == strings_


@needs_kubeval
def test_kubectl_reads_the_special_forms_as_written(tmp_path):
    check_with_kubeval(SPECIAL, tmp_path)


@needs_kubeval
@settings(max_examples=3, deadline=None, database=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                 HealthCheck.function_scoped_fixture])
@given(st.lists(strings, min_size=300, max_size=300))
def test_kubectl_reads_generated_strings_as_written(tmp_path, batch):
    """One kubeval run per batch of 300 generated strings."""
    check_with_kubeval(batch, tmp_path)


@needs_kubeval
def test_kubeval_decodes_every_compiled_manifest_as_written(dist, index):
    files = sorted(p for c in index["clusters"] for key in ("manifests", "argocd", "flux")
                   for p in (dist / c[key]).glob("*.yaml") if p.name != "kustomization.yaml")
    files += sorted((dist / "fleet").rglob("*.yaml"))
    results = kubeval_many(files)
    assert len(results) > 400
    assert decoding_problems(results) == []
    assert [r for r in results if r["status"] == "checked" and r["errors"]] == []


def kubeval_many(files: list[Path]) -> list[dict]:
    proc = subprocess.run([str(KUBEVAL), *map(str, files)], capture_output=True, text=True, timeout=120)
    assert proc.returncode in (0, 1), proc.stderr
    return [json.loads(line) for line in proc.stdout.split("\n") if line]


# Strings other readers type, in every field of a profile that reaches output as written.
ODD = ["y", "on", "0o17", "1e3"]
ODD_PROFILE = f"""\
apiVersion: gpuop/v1alpha1
kind: ClusterProfile
metadata:
  name: odd
  labels: {{team: "y", tier: "on"}}
spec:
  namespace: "n"
  platform: {{type: kubernetes, version: "1.33"}}
  os: ubuntu24.04
  driver:
    version: "580.173.02"
    env: [{{name: FLAG, value: "y"}}, {{name: MODE, value: "0o17"}}, {{name: SIZE, value: "1e3"}}, {{name: SW, value: "on"}}]
  daemonsets:
    labels: {{a: "y", b: "on", c: "0o17", d: "1e3"}}
    nodeSelector: {{e: "y", f: "1e3"}}
    tolerations:
      - {{key: g, operator: Equal, value: "y", effect: NoSchedule}}
      - {{key: h, operator: Equal, value: "0o17", effect: NoSchedule}}
  nodePools:
    - name: p
      gpu: L40S
      nodes: 1
      nodeSelector: {{i: "on", j: "0o17"}}
"""


@pytest.fixture(scope="module")
def odd_dist(tmp_path_factory) -> Path:
    w = tmp_path_factory.mktemp("odd")
    (w / "profiles").mkdir()
    (w / "profiles" / "odd.yaml").write_text(ODD_PROFILE)
    shutil.copy(REPO / "gpuop.yaml", w / "gpuop.yaml")
    run_gpuop("synth", "profiles", "-o", "dist", cwd=w, check=True)
    return w / "dist"


def _strings(v) -> set:
    if isinstance(v, dict):
        return set().union(*map(_strings, v), *map(_strings, v.values())) if v else set()
    if isinstance(v, list):
        return set().union(*map(_strings, v)) if v else set()
    return {v} if isinstance(v, str) else set()


@needs_kubeval
def test_a_profile_of_other_readers_booleans_and_numbers_decodes_as_written(odd_dist):
    c = odd_dist / "odd"
    files = sorted(p for p in c.rglob("*.yaml") if "/chart/" not in str(p) and p.name != "kustomization.yaml")
    results = kubeval_many(files)
    assert decoding_problems(results) == []
    assert [r for r in results if r["status"] == "checked" and r["errors"]] == []
    assert {r["namespace"] for r in results if r["kind"] == "DaemonSet"} == {"n"}
    docs = [d for f in files for d in yamlio.load_all(f.read_text())]
    assert set(ODD) <= set().union(*map(_strings, docs))        # the strings did reach the output as strings
    # every YAML file of the cluster (chart values included) reads the same under YAML 1.1 and 1.2
    for f in sorted(c.rglob("*.yaml")):
        if "/templates/" in str(f):
            continue
        text = f.read_text()
        assert typed(list(yaml.load_all(text, Loader=yaml.CSafeLoader))) == typed(
            list(YAML(typ="safe").load_all(text))), f


@needs_kubeval
def test_the_chart_of_that_profile_renders_the_strings_as_written(odd_dist, tmp_path):
    """Helm reads values.yaml and the templates with sigs.k8s.io/yaml (YAML 1.1): rendered with its own
    engine, the chart gives objects kubectl decodes as written."""
    helm = pytest.importorskip("helm_python")
    entry = next(e for e in json.loads((odd_dist / "index.json").read_text())["clusters"] if e["name"] == "odd")
    chart = helm.Chart.load(str(odd_dist / "odd" / "chart"))
    try:
        out = chart.render({"createNamespace": True}, name=entry["releaseName"], namespace=entry["namespace"])
    finally:
        chart.close()
    rendered = tmp_path / "rendered.yaml"
    rendered.write_text("\n---\n".join(t for p, t in sorted(out.items()) if not p.endswith("NOTES.txt")))
    results = kubeval(rendered)
    assert decoding_problems(results) == []
    assert [r for r in results if r["status"] == "checked" and r["errors"]] == []
    assert set(ODD) <= set().union(*map(_strings, yamlio.load_all(rendered.read_text())))


@pytest.mark.slow           # Node and jsii start: ~5 s
@needs_kubeval
@pytest.mark.skipif(not (REPO / "node_modules" / ".bin" / "node").exists(), reason="node_modules not installed")
def test_the_cdk8s_entry_point_writes_that_profile_as_kubectl_reads_it(tmp_path):
    """`cdk8s synth` runs gpuop.cli.cdk8s_app: cdk8s's own writer leaves `0o17` plain (an int to kubectl);
    the app's files are gpuop's writer's."""
    import os
    import sys

    (tmp_path / "profiles").mkdir()
    (tmp_path / "profiles" / "odd.yaml").write_text(ODD_PROFILE)
    env = {**os.environ, "CDK8S_OUTDIR": str(tmp_path / "out"), "GPUOP_PROFILES": str(tmp_path / "profiles"),
           "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20"}
    proc = subprocess.run([sys.executable, "-m", "gpuop.cli.cdk8s_app"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    results = kubeval(tmp_path / "out" / "odd.k8s.yaml")
    assert len(results) > 30
    assert decoding_problems(results) == []
    assert [r for r in results if r["status"] == "checked" and r["errors"]] == []


_WORDS = st.one_of(st.sampled_from(["", "y", "on", "0123", "1e3", "-a", "a: b", "a #b", "gpu-operator", "c0",
                                    "2024-01-01", "https://kubernetes.default.svc", "x/y", "~", "é", "'q'", "null", "Y"]),
                   st.text(alphabet="abz09.-/_: #'\"", min_size=0, max_size=8))
_ITEMS = st.dictionaries(st.sampled_from(["name", "namespace", "group", "kind", "server", "0"]), _WORDS,
                         min_size=1, max_size=4)


@settings(max_examples=200, deadline=None)
@given(items=st.lists(_ITEMS, min_size=32, max_size=60), other=st.lists(_WORDS, max_size=3),
       nested=st.booleans(), broken=st.booleans())
def test_long_lists_printed_item_by_item_are_the_whole_dump(items, other, nested, broken):
    """yamlio.dump_long_lists (a fleet's AppProject) gives dump's bytes, whatever the words (a list holding a
    multi-line word, or deeper than two levels, is dumped with the document)."""
    if broken:
        items = items + [{"name": "a\nb"}]
    spec = {"destinations": items, "sourceRepos": other, "clusterResourceWhitelist": items[:40]}
    doc = {"apiVersion": "argoproj.io/v1alpha1", "kind": "AppProject", "metadata": {"name": "gpuop"},
           "spec": {"inner": spec} if nested else spec}
    assert yamlio.dump_long_lists(doc) == yamlio.dump(doc)
