"""The ClusterPolicy / NVIDIADriver CRs NVIDIA's chart renders from gpuop's operator values, checked as the API
server checks them: CRD defaults applied (a null defaulted where the field has a default), every other null in a
field that is not nullable refused, located at the value that renders to it (`gpuop validate DIST`)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from gpuop.outputs import operator as operator_out
from gpuop.pipeline.run import plan_all
from gpuop.plan import chartmap
from gpuop.verify import nvidia_chart
from gpuop.verify.crdschema import CrdValidator
from gpuop.verify.output import validate_output

from conftest import REFS, REPO, run_gpuop

CHART = REFS / "gpu-operator" / "chart"
CORPUS_DIRS = (REPO / "tests" / "data" / "semantic-corpus", REPO / "tests" / "data" / "operator-corpus")


@pytest.fixture(autouse=True)
def chart_env(monkeypatch):
    monkeypatch.setenv(nvidia_chart.CHART_ENV, str(CHART))


@pytest.fixture(scope="module")
def crds() -> CrdValidator:
    return CrdValidator.from_files([CHART / "crds"])


def _operator_plans():
    plans, _ = plan_all(list(CORPUS_DIRS))
    return [p for p in plans if p.operator is not None]


def test_every_operator_corpus_cluster_renders_crs_the_api_server_accepts(crds):
    plans = _operator_plans()
    assert {"mig-per-pool", "mig-single-time-slicing", "mirror-everything"} <= {p.name for p in plans}
    found = {}
    for plan in plans:
        rendered = nvidia_chart.render(operator_out.chart_values(plan), CHART)
        for obj in rendered.objects:
            problems = nvidia_chart.cr_problems(obj, CHART, crds) if obj.get("kind") in nvidia_chart.KINDS else []
            if problems:
                found[(plan.name, obj["kind"], obj["metadata"]["name"])] = [m for _, m in problems]
    assert found == {}


def test_validate_dist_locates_a_null_the_chart_copies_into_the_cluster_policy(tmp_path):
    shutil.copy(REPO / "gpuop.yaml", tmp_path / "gpuop.yaml")
    shutil.copy(REPO / "tests" / "data" / "operator-corpus" / "mirror-everything.yaml", tmp_path / "p.yaml")
    run_gpuop("synth", "p.yaml", "-o", "dist", cwd=tmp_path, check=True)
    values = tmp_path / "dist" / "mirror-everything" / "operator" / "values.yaml"
    text = values.read_text()
    assert "    limits:\n      cpu: 102m\n" in text
    values.write_text(text.replace("    limits:\n      cpu: 102m\n", "    limits:\n      cpu: 102m\n      memory: null\n"))
    line = values.read_text().splitlines().index("      memory: null") + 1
    got = [str(i) for i in validate_output(tmp_path / "dist") if i.rule == "operator-cr-schema"]
    assert got == [f'{values}:{line}:15: devicePlugin.resources.limits.memory: ClusterPolicy/cluster-policy as '
                   "NVIDIA's chart renders it: spec.devicePlugin.resources.limits.memory: Invalid value: \"null\": "
                   'spec.devicePlugin.resources.limits.memory in body must be of type integer,string: "null"']


def test_validate_dist_refuses_the_null_spec_mig_an_empty_strategy_renders(tmp_path):
    shutil.copy(REPO / "gpuop.yaml", tmp_path / "gpuop.yaml")
    shutil.copy(REPO / "tests" / "data" / "operator-corpus" / "mig-per-pool.yaml", tmp_path / "p.yaml")
    run_gpuop("synth", "p.yaml", "-o", "dist", cwd=tmp_path, check=True)
    values = tmp_path / "dist" / "mig-per-pool" / "operator" / "values.yaml"
    assert validate_output(tmp_path / "dist") == []
    values.write_text(values.read_text().replace("  strategy: mixed\n", "  strategy: ''\n"))
    got = [(i.path, i.message) for i in validate_output(tmp_path / "dist") if i.rule == "operator-cr-schema"]
    assert got == [("mig", "ClusterPolicy/cluster-policy as NVIDIA's chart renders it: spec.mig: Invalid value: "
                           '"null": spec.mig in body must be of type object: "null"')]


SCHEMA = {"type": "object", "properties": {
    "defaulted": {"type": "string", "default": "d"},
    "optional": {"type": "object", "nullable": True},
    "required": {"type": "object", "properties": {"n": {"type": "integer"}}},
    "quantity": {"x-kubernetes-int-or-string": True},
    "items": {"type": "array", "items": {"type": "object", "properties": {"v": {"type": "string"}}}}}}


def test_nulls_are_defaulted_kept_when_nullable_and_refused_otherwise_as_the_api_server_does():
    obj = nvidia_chart.crd_defaults({"defaulted": None, "optional": None, "required": {"n": None},
                                     "quantity": None, "items": [{"v": None}]}, SCHEMA)
    assert obj["defaulted"] == "d" and obj["optional"] is None
    assert nvidia_chart.null_errors(obj, SCHEMA) == [
        (("required", "n"), 'required.n: Invalid value: "null": required.n in body must be of type integer: "null"'),
        (("quantity",), 'quantity: Invalid value: "null": quantity in body must be of type integer,string: "null"'),
        (("items", 0, "v"), 'items[0].v: Invalid value: "null": items[0].v in body must be of type string: "null"')]


optional = st.one_of(st.none(), st.sampled_from(["100m", "2Gi", "1"]))
resources = st.fixed_dictionaries({"limits": st.one_of(st.none(), st.fixed_dictionaries(
    {"cpu": optional, "memory": optional})), "requests": st.one_of(st.none(), st.fixed_dictionaries(
        {"cpu": optional, "memory": optional}))})
toleration = st.fixed_dictionaries({"key": st.sampled_from(["dedicated", "nvidia.com/gpu"]),
                                    "operator": st.sampled_from(["Equal", "Exists", None]),
                                    "value": st.one_of(st.none(), st.just("gpu")),
                                    "effect": st.sampled_from(["NoSchedule", "NoExecute", None]),
                                    "tolerationSeconds": st.one_of(st.none(), st.integers(0, 3600))})


def _nulls(tree, path=""):
    if isinstance(tree, dict):
        for k, v in tree.items():
            yield from _nulls(v, f"{path}.{k}")
    elif isinstance(tree, list):
        for i, v in enumerate(tree):
            yield from _nulls(v, f"{path}[{i}]")
    elif tree is None:
        yield path


@settings(max_examples=60, deadline=None)
@given(st.dictionaries(st.sampled_from(sorted(chartmap.RESOURCES)), resources, max_size=4),
       st.lists(toleration, max_size=3))
def test_values_for_the_cluster_policy_never_hold_a_null(res, tolerations):
    settings_ = {k: {"resources": v} for k, v in res.items()}
    settings_["daemonsets"] = {"tolerations": tolerations}
    values = chartmap.profile_to_values(settings_, chartmap.release_images())
    assert list(_nulls(values)) == []
