"""Stages 4-5, construct and synthesize: plans -> each cluster's objects as plain dicts, in kind order.

Components are pure functions of their props, so each distinct (component, props) variant is built once
and every cluster that needs the same variant reuses the objects. A variant's objects are what its cdk8s
construct synthesizes: `component.objects(props)`, each with its sync wave, in cdk8s' JSON form
(stack/apiobject.py, checked against cdk8s for every variant of the example profiles by the tests). That
form is computed without Node; a variant holding a value the mirror does not cover (an int beyond 2**53,
say) is synthesized by cdk8s itself (one cdk8s Chart, `to_json()`), which starts Node the first time.
"""

from __future__ import annotations

from gpuop.kube.order import sort_key, with_wave
from gpuop.plan.model import StackPlan
from gpuop.stack.apiobject import api_object_json
from gpuop.stack.objects import StackObject, Synthesized


class Synthesizer:
    """The variant cache of a compile run (and the cdk8s App for variants the mirror leaves to cdk8s)."""

    def __init__(self):
        from gpuop.stack import registry

        self._registry = registry
        self._app = None
        self._cache: dict[tuple[str, str], list[dict]] = {}
        self.variants = 0           # distinct (component, props) built
        self.cdk8s_charts = 0       # of which synthesized through cdk8s (Node)

    def variant(self, component, props) -> list[dict]:
        key = (component.name, props.model_dump_json())
        if key not in self._cache:
            self.variants += 1
            objs = [api_object_json(with_wave(body)) for body in component.objects(props)]
            if any(o is None for o in objs):
                objs = self._through_cdk8s(component, props)
            self._cache[key] = objs
        return self._cache[key]

    def _through_cdk8s(self, component, props) -> list[dict]:
        from gpuop.components.runtime import start_cdk8s

        cdk8s = start_cdk8s()  # starts Node: no Node is a user error (exit 2 saying what to install)
        from gpuop.stack import chart

        if self._app is None:
            self._app = cdk8s.App()
        self.cdk8s_charts += 1
        return chart.component_variant(self._app, f"v{self.cdk8s_charts}", component, props)

    def synthesize(self, plan: StackPlan) -> Synthesized:
        objs: list[StackObject] = []
        for component, props in self._registry.component_props(plan):
            for body in self.variant(component, props):
                objs.append(StackObject(component.name, component.values_key, body))  # shared: never mutated
        objs.sort(key=lambda o: sort_key(o.body))
        return Synthesized(plan, tuple(objs))
