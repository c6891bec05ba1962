"""Stages 4-5, construct and synthesize: plans -> each cluster's objects as plain dicts, in kind order.

cdk8s is used as a cached stage: components are pure functions of their props, so each distinct
(component, props) variant is built and synthesized once (one cdk8s Chart, `to_json()`), and every
cluster that needs the same variant reuses the objects. A fleet of clusters built from a few designs
crosses into Node once per variant instead of once per object.

Importing this module does not load cdk8s (which starts Node): the registry and the chart, which do,
are imported when a `Synthesizer` is made.
"""

from __future__ import annotations

from gpuop.kube.order import sort_key
from gpuop.plan.model import StackPlan
from gpuop.stack.objects import StackObject, Synthesized


class Synthesizer:
    """Holds one cdk8s App and the variant cache for a compile run."""

    def __init__(self):
        from gpuop.components.runtime import start_cdk8s

        cdk8s = start_cdk8s()  # starts Node: only when synthesis is needed; no Node is a user error
        from gpuop.stack import chart, registry

        self._chart = chart
        self._registry = registry
        self._app = cdk8s.App()
        self._cache: dict[tuple[str, str], list[dict]] = {}
        self.cdk8s_charts = 0

    def variant(self, component, props) -> list[dict]:
        key = (component.name, props.model_dump_json())
        if key not in self._cache:
            self.cdk8s_charts += 1
            self._cache[key] = self._chart.component_variant(self._app, f"v{self.cdk8s_charts}", component, props)
        return self._cache[key]

    def synthesize(self, plan: StackPlan) -> Synthesized:
        objs: list[StackObject] = []
        for component, props in self._registry.component_props(plan):
            for body in self.variant(component, props):
                objs.append(StackObject(component.name, component.values_key, body))  # shared: never mutated
        objs.sort(key=lambda o: sort_key(o.body))
        return Synthesized(plan, tuple(objs))
