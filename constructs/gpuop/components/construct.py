"""The cdk8s construct of each component, and `emit` (one plain dict -> one cdk8s ApiObject).

`construct_type(Driver)` is the `Construct` subclass that `Driver(scope, id, props)` builds (made once per
component class, named as it): its constructor emits `Driver.objects(props)`, each object's sync wave
set, its value slots filled from `values=` or the chart's FILL_CONTEXT, or kept under KEEP_SLOTS_CONTEXT.
Bodies stay in Python: one cdk8s `ApiObject` call and one JSON patch per object (≈3 bridge calls).
This is gpuop's first `import cdk8s` for a construct (it starts Node): a supported Node, or exit 2 saying
what to install (runtime.py).
"""

from __future__ import annotations

import json
from typing import Any, ClassVar

from gpuop.components.runtime import start_cdk8s

cdk8s = start_cdk8s()
import jsii  # noqa: E402
from constructs import Construct, IValidation  # noqa: E402

from gpuop.components.props import Props  # noqa: E402
from gpuop.kube.order import with_wave  # noqa: E402
from gpuop.kube.slots import MARKER, fill, lookup, slot_paths  # noqa: E402


FILL_CONTEXT = "gpuop:fill-values"        # the chart's values tree (canonical JSON): slots filled from it
KEEP_SLOTS_CONTEXT = "gpuop:keep-slots"    # gpuop's own synth: slots kept, the Helm writer templates them


class ComponentConstruct(Construct):
    """The construct of one component class (`component`); `props` are the props it was built from."""

    component: ClassVar[type]               # the components/base.Component subclass (render, objects, name, ...)

    def __init__(self, scope: Construct, id: str, props: Props, *, values: dict[str, Any] | None = None):
        super().__init__(scope, id)
        self.props = props
        if values is None:
            fill_json = self.node.try_get_context(FILL_CONTEXT)
            values = json.loads(fill_json) if fill_json else None
        bodies = [with_wave(body) for body in self.component.objects(props)]
        if values is not None:
            bodies = [_filled(self, body, values) for body in bodies]
        elif not self.node.try_get_context(KEEP_SLOTS_CONTEXT):
            self.node.add_validation(_NoUnfilledSlots(self))
        for body in bodies:
            emit(self, body)


_TYPES: dict[type, type] = {}


def construct_type(component: type) -> type[ComponentConstruct]:
    """The construct class of `component` (made on first use; its name, module and docstring are the
    component's, its class attributes — name, values_key, props_type, ... — too)."""
    if component not in _TYPES:
        attrs = {k: getattr(component, k) for k in ("name", "values_key", "props_type", "deploy_label",
                                                      "mig_capable_only") if hasattr(component, k)}
        _TYPES[component] = type(component.__name__, (ComponentConstruct,), {
            **attrs, "component": component, "__module__": component.__module__,
            "__qualname__": component.__qualname__, "__doc__": component.__doc__})
    return _TYPES[component]


def _filled(construct: ComponentConstruct, body: dict, values: dict) -> dict:
    missing = [p for p in slot_paths(body) if not _has(values, p)]
    if missing:
        raise ValueError(f"{construct.node.path}: values has no {', '.join(missing)} for the slots of "
                         f"{body['kind']} {body['metadata']['name']} (start from gpuop.api.default_values())")
    return fill(body, values)


def _has(values: dict, path: str) -> bool:
    try:
        lookup(values, path)
    except (KeyError, TypeError):
        return False
    return True


@jsii.implements(IValidation)
class _NoUnfilledSlots:
    """At synth: the component's objects as cdk8s writes them (JSON patches applied) hold no slot marker."""

    def __init__(self, construct: ComponentConstruct):
        self.construct = construct

    def validate(self) -> list[str]:
        out = []
        for child in self.construct.node.children:
            if isinstance(child, cdk8s.ApiObject):
                found = sorted(set(MARKER.findall(json.dumps(child.to_json(), ensure_ascii=False))))
                if found:
                    out.append(f"{child.kind} {child.name} would be written with unfilled value slots "
                               f"{', '.join(f'⟦{p}⟧' for p in found)}: pass values= to "
                               f"{self.construct.component.__name__} (gpuop.api.default_values()), or add it "
                               "to a gpuop.api.GpuStack, which fills them from the profile")
        return out


def emit(scope: Construct, body: dict) -> cdk8s.ApiObject:
    """One plain-dict object -> one cdk8s ApiObject (metadata in the constructor, the rest as one patch).
    stack/apiobject.py writes, without Node, the JSON this gives."""
    meta = body["metadata"]
    cid = f"{body['kind']}-{meta['name']}"
    if scope.node.try_find_child(cid) is not None:      # one name in several namespaces (LocalQueues per tenant)
        cid = f"{body['kind']}-{meta.get('namespace')}-{meta['name']}"
    obj = cdk8s.ApiObject(
        scope, cid,
        api_version=body["apiVersion"], kind=body["kind"],
        metadata=cdk8s.ApiObjectMetadata(
            name=meta["name"], namespace=meta.get("namespace"),
            labels=meta.get("labels"), annotations=meta.get("annotations")))
    rest = [cdk8s.JsonPatch.add(f"/{k}", v) for k, v in body.items() if k not in ("apiVersion", "kind", "metadata")]
    if rest:
        obj.add_json_patch(*rest)
    return obj
