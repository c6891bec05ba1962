"""gpuop's own synth writes each object in the JSON form cdk8s gives it, without Node (stack/apiobject.py):
checked here against cdk8s itself (the real library, through jsii and Node) for every component variant
of the example profiles, the semantic corpus and the bench fleet's designs, and for generated bodies.
"""

from __future__ import annotations

import json
import math
import os
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuop.kube.order import with_wave
from gpuop.pipeline.run import plan_all
from gpuop.stack.apiobject import api_object_json
from gpuop.stack.registry import component_props

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def cdk8s_app():
    from gpuop.components.runtime import start_cdk8s

    cdk8s = start_cdk8s()
    return cdk8s, cdk8s.App()


def _through_cdk8s(app, n: list, bodies: list[dict]) -> list[dict]:
    """What cdk8s synthesizes for `bodies` emitted as components/construct.emit emits them."""
    cdk8s, app = app
    from gpuop.components.construct import emit

    n.append(1)
    chart = cdk8s.Chart(app, f"t{len(n)}", disable_resource_name_hashes=True)
    for body in bodies:
        emit(chart, body)
    return chart.to_json()


def _bench_designs(tmp: Path) -> list[Path]:
    sys.path.insert(0, str(REPO / "bench"))
    try:
        import fleet
    finally:
        sys.path.pop(0)
    fleet.generate(40, tmp)
    return [tmp / "profiles"]


def test_every_component_variant_of_the_examples_is_what_cdk8s_synthesizes(cdk8s_app, tmp_path):
    from gpuop.stack.chart import component_variant

    plans, _ = plan_all([REPO / "profiles", REPO / "tests" / "data" / "semantic-corpus",
                         *_bench_designs(tmp_path)])
    seen, n = set(), 0
    for plan in plans:
        for component, props in component_props(plan):
            key = (component.name, props.model_dump_json())
            if key in seen:
                continue
            seen.add(key)
            mirrored = [api_object_json(with_wave(b)) for b in component.objects(props)]
            assert None not in mirrored, f"{plan.name}: {component.name} left to cdk8s"
            n += 1
            real = component_variant(cdk8s_app[1], f"variant{n}", component, props)
            # order-sensitive: the same keys in the same order, the same types (1 is not 1.0)
            assert json.dumps(mirrored) == json.dumps(real), f"{plan.name}: {component.name}"
    assert n > 100, n          # the corpus covers well over a hundred distinct variants


_KEYS = st.one_of(st.sampled_from(["0", "1", "2", "10", "01", "-1", "1.5", "4294967294", "4294967295", "a", "B",
                                   "é", "\U0001f600", "\uff5e", "x/y", ""]),
                  st.text(min_size=0, max_size=6))
_SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-2 ** 60, 2 ** 60),
                     st.floats(allow_nan=True, allow_infinity=True, width=64), st.text(max_size=8))
_VALUES = st.recursive(_SCALARS, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                         st.dictionaries(_KEYS, inner, max_size=5)), max_leaves=12)
_BODIES = st.fixed_dictionaries(
    {"apiVersion": st.sampled_from(["v1", "apps/v1"]), "kind": st.sampled_from(["ConfigMap", "DaemonSet"]),
     "metadata": st.fixed_dictionaries(
         {"name": st.sampled_from(["a", "b-1"])},
         optional={"namespace": st.one_of(st.none(), st.sampled_from(["", "gpu-operator"])),
                   "labels": st.dictionaries(_KEYS, st.one_of(st.none(), st.text(max_size=4)), max_size=4),
                   "annotations": st.dictionaries(_KEYS, st.text(max_size=4), max_size=4)})},
    optional={"spec": _VALUES, "data": _VALUES, "aaa": _VALUES, "status": _VALUES})


@settings(max_examples=int(os.environ.get("GPUOP_APIOBJECT_EXAMPLES", "150")), deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(body=_BODIES)
def test_any_body_the_mirror_accepts_is_what_cdk8s_synthesizes(cdk8s_app, body):
    mirrored = api_object_json(body)
    if mirrored is None:        # left to cdk8s: the synthesizer then asks cdk8s (next test)
        return
    real = _through_cdk8s(cdk8s_app, _COUNT, [body])
    assert json.dumps(mirrored) == json.dumps(real[0])


_COUNT: list = []


@pytest.mark.parametrize("value", [2 ** 60, -(2 ** 53) - 1, math.inf, float("nan"), (1, 2)],
                         ids=["big-int", "below-safe", "inf", "nan", "tuple"])
def test_values_the_bridge_changes_unmirrored_are_left_to_cdk8s(value):
    assert api_object_json({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"},
                            "data": {"x": [value]}}) is None


def test_a_variant_the_mirror_leaves_is_synthesized_by_cdk8s():
    from gpuop.components.base import Component
    from gpuop.components.props import Props
    from gpuop.stack.synth import Synthesizer

    class Huge(Component):
        name = "huge"
        values_key = None
        props_type = Props

        @classmethod
        def render(cls, props):
            return [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "huge"},
                     "data": {"n": 2 ** 60}}]

    synth = Synthesizer()
    (obj,) = synth.variant(Huge, Props())
    assert obj["data"] == {"n": 1152921504606847000}     # what JavaScript's numbers make of 2**60
    assert (synth.variants, synth.cdk8s_charts) == (1, 1)

