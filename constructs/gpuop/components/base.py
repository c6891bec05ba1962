"""The construct base class every component extends, and `emit` (one plain dict -> one cdk8s ApiObject).

A component is a cdk8s `Construct` (`Component(scope, id, props)`) whose props are one frozen
pydantic model. `render(props)` is a pure function returning the component's objects as plain dicts
(bodies stay in Python: one cdk8s `ApiObject` call and one JSON patch per object, ≈3 bridge calls).
Props are derived from a plan outside the component (stack/derive.py), so a component is built and
tested from its props alone. `objects(props)` is what a construct emits: `render(props)` plus the platform's transforms (on
OpenShift, openshift.py's SCC per DaemonSet ServiceAccount, enabled by the props' Placement).
Construct ids are `<Kind>-<name>`: stable, since renaming one is a breaking change. Shared props live
in props.py, shared object builders in builders.py.

Value slots (kube/slots.py, ⟦tolerations⟧ and the like): a component fills them from `values=` (the
chart's values tree, e.g. gpuop.api.default_values()), else from its chart's FILL_CONTEXT (GpuStack,
`cdk8s synth`); gpuop's own synth keeps them for the Helm writer (KEEP_SLOTS_CONTEXT on its charts). Used
any other way, a component would write the markers into the YAML: it adds a validation, so the app's
synth fails naming each unfilled slot and how to fill it.
"""

from __future__ import annotations

import json
from typing import Any, ClassVar

from gpuop.components.runtime import start_cdk8s

cdk8s = start_cdk8s()  # gpuop's first `import cdk8s` (starts Node): a supported Node, or exit 2 saying what to install
import jsii  # noqa: E402
from constructs import Construct, IValidation  # noqa: E402

from gpuop.components.openshift import secure
from gpuop.components.props import Props
from gpuop.kube.order import with_wave
from gpuop.kube.slots import MARKER, fill, lookup, slot_paths

FILL_CONTEXT = "gpuop:fill-values"        # the chart's values tree (canonical JSON): slots filled from it
KEEP_SLOTS_CONTEXT = "gpuop:keep-slots"    # gpuop's own synth: slots kept, the Helm writer templates them


class Component(Construct):
    """A GPU Operator state as a construct. Subclasses set `name`, `values_key`, `Props` and `render`."""

    name: ClassVar[str]                 # stable component id (file prefix in charts)
    values_key: ClassVar[str | None]    # key under which Helm values enable/configure it (None: always on)
    props_type: ClassVar[type[Props]]
    deploy_label: ClassVar[str | None] = None   # nvidia.com/gpu.deploy.<this>: its node label (None: no DaemonSet)
    mig_capable_only: ClassVar[bool] = False    # node_labels.py publishes the deploy label on MIG-capable GPUs only

    def __init__(self, scope: Construct, id: str, props: Props, *, values: dict[str, Any] | None = None):
        super().__init__(scope, id)
        self.props = props
        if values is None:
            fill_json = self.node.try_get_context(FILL_CONTEXT)
            values = json.loads(fill_json) if fill_json else None
        bodies = [with_wave(body) for body in self.objects(props)]
        if values is not None:
            bodies = [_filled(self, body, values) for body in bodies]
        elif not self.node.try_get_context(KEEP_SLOTS_CONTEXT):
            self.node.add_validation(_NoUnfilledSlots(self))
        for body in bodies:
            emit(self, body)

    @classmethod
    def render(cls, props: Props) -> list[dict]:
        raise NotImplementedError

    @classmethod
    def objects(cls, props: Props) -> list[dict]:
        """`render(props)` and the platform's transforms on top (as the Operator applies its OpenShift
        transforms after each state's own): on OpenShift, the SCCs and their RBAC (openshift.py)."""
        objs = cls.render(props)
        placement = getattr(props, "placement", None)
        if placement is not None and placement.openshift:
            objs = secure(objs)
        return objs



def _filled(component: Component, body: dict, values: dict) -> dict:
    missing = [p for p in slot_paths(body) if not _has(values, p)]
    if missing:
        raise ValueError(f"{component.node.path}: values has no {', '.join(missing)} for the slots of "
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

    def __init__(self, component: Component):
        self.component = component

    def validate(self) -> list[str]:
        out = []
        for child in self.component.node.children:
            if isinstance(child, cdk8s.ApiObject):
                found = sorted(set(MARKER.findall(json.dumps(child.to_json(), ensure_ascii=False))))
                if found:
                    out.append(f"{child.kind} {child.name} would be written with unfilled value slots "
                               f"{', '.join(f'⟦{p}⟧' for p in found)}: pass values= to "
                               f"{type(self.component).__name__} (gpuop.api.default_values()), or add it to a "
                               "gpuop.api.GpuStack, which fills them from the profile")
        return out


def emit(scope: Construct, body: dict) -> cdk8s.ApiObject:
    """One plain-dict object -> one cdk8s ApiObject (metadata in the constructor, the rest as one patch)."""
    meta = body["metadata"]
    obj = cdk8s.ApiObject(
        scope, f"{body['kind']}-{meta['name']}",
        api_version=body["apiVersion"], kind=body["kind"],
        metadata=cdk8s.ApiObjectMetadata(
            name=meta["name"], namespace=meta.get("namespace"),
            labels=meta.get("labels"), annotations=meta.get("annotations")))
    rest = [cdk8s.JsonPatch.add(f"/{k}", v) for k, v in body.items() if k not in ("apiVersion", "kind", "metadata")]
    if rest:
        obj.add_json_patch(*rest)
    return obj
