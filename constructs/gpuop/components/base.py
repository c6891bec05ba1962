"""The class every component extends: a cdk8s construct type whose objects are a pure function of its props.

A component is a cdk8s construct: `Component(scope, id, props)` adds it to `scope` (a Chart or any
Construct) and returns the construct, whose props are one frozen pydantic model. `render(props)` is a pure
function returning the component's objects as plain dicts; `objects(props)` is what the construct emits:
`render(props)` plus the platform's transforms (on OpenShift, openshift.py's SCC per DaemonSet
ServiceAccount, enabled by the props' Placement) and the release's (the env its operator does not set). Props are derived from a plan outside the component
(stack/derive.py), so a component is built and tested from its props alone. Construct ids of the objects
are `<Kind>-<name>`: stable, since renaming one is a breaking change. Shared props live in props.py, shared
object builders in builders.py.

Importing a component does not import cdk8s (which starts Node): the construct type of each component,
a subclass of cdk8s' `Construct` (construct.py), is made the first time the component is called with a
scope. gpuop's own synth needs only `objects(props)` and cdk8s' JSON form of each object
(stack/apiobject.py, proven equal to cdk8s' for every component variant by the tests), so it never starts
Node; a cdk8s app, `cdk8s synth` and gpuop.api build the constructs.

Value slots (kube/slots.py, ⟦tolerations⟧ and the like): a construct fills them from `values=` (the
chart's values tree, e.g. gpuop.api.default_values()), else from its chart's FILL_CONTEXT (construct.py;
GpuStack, `cdk8s synth`); gpuop's own synth keeps them for the Helm writer (KEEP_SLOTS_CONTEXT). Used
any other way, a construct would write the markers into the YAML: it adds a validation, so the app's
synth fails naming each unfilled slot and how to fill it.
"""

from __future__ import annotations

from typing import Any, ClassVar

from gpuop.components.builders import without_env
from gpuop.components.openshift import secure
from gpuop.components.props import Props


class _ConstructType(type):
    """Calling a component class builds its cdk8s construct; `isinstance(construct, Driver)` holds for it."""

    def __call__(cls, scope, id: str, props: Props, *, values: dict[str, Any] | None = None):
        from gpuop.components.construct import construct_type   # imports cdk8s: only when a construct is built

        return construct_type(cls)(scope, id, props, values=values)

    def __instancecheck__(cls, obj) -> bool:
        component = getattr(type(obj), "component", None)
        return isinstance(component, type) and issubclass(component, cls)


class Component(metaclass=_ConstructType):
    """A GPU Operator state as a construct. Subclasses set `name`, `values_key`, `props_type` and `render`."""

    name: ClassVar[str]                 # stable component id (file prefix in charts)
    values_key: ClassVar[str | None]    # key under which Helm values enable/configure it (None: always on)
    props_type: ClassVar[type[Props]]
    deploy_label: ClassVar[str | None] = None   # nvidia.com/gpu.deploy.<this>: its node label (None: no DaemonSet)
    mig_capable_only: ClassVar[bool] = False    # node_labels.py publishes the deploy label on MIG-capable GPUs only

    @classmethod
    def render(cls, props: Props) -> list[dict]:
        raise NotImplementedError

    @classmethod
    def objects(cls, props: Props) -> list[dict]:
        """`render(props)` and the platform's transforms on top (as the Operator applies its OpenShift
        transforms after each state's own): on OpenShift, the SCCs and their RBAC (openshift.py)."""
        objs = without_env(cls.render(props), getattr(props, "absent_env", {}))
        placement = getattr(props, "placement", None)
        if placement is not None and placement.openshift:
            objs = secure(objs)
        return objs
