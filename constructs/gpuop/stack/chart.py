"""The cdk8s Chart that assembles one cluster's stack from the component registry.

`GpuStack(scope, id, plan)` adds every component the registry derives props for from the plan, with
the component's stable name as construct id. With `fill=True` (the `cdk8s synth` entry point) value
slots are filled with the chart's defaults before objects reach cdk8s, so cdk8s writes the rendered
manifests; gpuop's own synth keeps the slots for the Helm writer and fills them itself.
"""

from __future__ import annotations

from gpuop.components.runtime import start_cdk8s

cdk8s = start_cdk8s()  # picks the Node jsii starts (node_modules/.bin/node from `npm ci` first)
from constructs import Construct  # noqa: E402  (after Node is chosen)

from gpuop.components.base import Component  # noqa: E402
from gpuop.components.construct import FILL_CONTEXT, KEEP_SLOTS_CONTEXT  # noqa: E402
from gpuop.plan.model import StackPlan  # noqa: E402
from gpuop.stack.registry import component_props  # noqa: E402


class GpuStack(cdk8s.Chart):
    def __init__(self, scope: Construct, id: str, plan: StackPlan, *, fill: bool = False):
        super().__init__(scope, id, disable_resource_name_hashes=True)
        self.plan = plan
        if fill:
            self.node.set_context(FILL_CONTEXT, plan.values_json)
        else:                           # gpuop's own synth: the Helm writer turns the slots into templates
            self.node.set_context(KEEP_SLOTS_CONTEXT, True)
        self.components: dict[str, Component] = {}
        for component, props in component_props(plan):
            self.components[component.name] = component(self, component.name, props)


def component_variant(app: cdk8s.App, id: str, component: type[Component], props) -> list[dict]:
    """Synthesize one component with one set of props in a chart of its own; return its objects."""
    chart = cdk8s.Chart(app, id, disable_resource_name_hashes=True)
    chart.node.set_context(KEEP_SLOTS_CONTEXT, True)         # the Helm writer turns the slots into templates
    component(chart, component.name, props)
    return chart.to_json()
