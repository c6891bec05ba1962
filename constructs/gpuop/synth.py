"""Stage 4-5, construct and synthesize: plans -> each cluster's objects as plain dicts, in kind order.

cdk8s is used as a cached stage: components are pure functions of their props, so each distinct
(component, props) variant is built and synthesized once (one cdk8s Chart, `to_json()`), and every
cluster that needs the same variant reuses the objects. A fleet of clusters built from a few designs
crosses into Node once per variant instead of once per object.
"""

from __future__ import annotations

from .components import COMPONENTS
from .order import sort_key
from .plan import StackPlan
from .stackobjects import StackObject, Synthesized


class Synthesizer:
    """Holds one cdk8s App and the variant cache for a compile run."""

    def __init__(self):
        from . import stack  # imports cdk8s (starts Node) only when synthesis is needed
        import cdk8s

        self._stack = stack
        self._app = cdk8s.App()
        self._cache: dict[tuple[str, str], list[dict]] = {}
        self.cdk8s_charts = 0

    def variant(self, component, props) -> list[dict]:
        key = (component.name, props.model_dump_json())
        if key not in self._cache:
            self.cdk8s_charts += 1
            self._cache[key] = self._stack.component_variant(self._app, f"v{self.cdk8s_charts}", component, props)
        return self._cache[key]

    def synthesize(self, plan: StackPlan) -> Synthesized:
        objs: list[StackObject] = []
        for component in COMPONENTS:
            props = component.from_plan(plan)
            if props is None:
                continue
            for body in self.variant(component, props):
                objs.append(StackObject(component.name, component.values_key, body))  # shared: never mutated
        objs.sort(key=lambda o: sort_key(o.body))
        return Synthesized(plan, tuple(objs))
