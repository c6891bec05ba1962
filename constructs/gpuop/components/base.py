"""The construct base class every component extends, and `emit` (one plain dict -> one cdk8s ApiObject).

A component is a cdk8s `Construct` (`Component(scope, id, props)`) whose props are one frozen
pydantic model. `render(props)` is a pure function returning the component's objects as plain dicts
(bodies stay in Python: one cdk8s `ApiObject` call and one JSON patch per object, ≈3 bridge calls).
Props are derived from a plan outside the component (stack/derive.py), so a component is built and
tested from its props alone. `objects(props)` is what a construct emits: `render(props)` plus the platform's transforms (on
OpenShift, openshift.py's SCC per DaemonSet ServiceAccount, enabled by the props' Placement).
Construct ids are `<Kind>-<name>`: stable, since renaming one is a breaking change. Shared props live
in props.py, shared object builders in builders.py.
"""

from __future__ import annotations

import json
from typing import ClassVar

from gpuop.components.runtime import start_cdk8s

cdk8s = start_cdk8s()  # gpuop's first `import cdk8s` (starts Node): a supported Node, or exit 2 saying what to install
from constructs import Construct  # noqa: E402

from gpuop.components.openshift import secure
from gpuop.components.props import Props
from gpuop.kube.order import with_wave
from gpuop.kube.slots import fill


class Component(Construct):
    """A GPU Operator state as a construct. Subclasses set `name`, `values_key`, `Props` and `render`."""

    name: ClassVar[str]                 # stable component id (file prefix in charts)
    values_key: ClassVar[str | None]    # key under which Helm values enable/configure it (None: always on)
    props_type: ClassVar[type[Props]]
    deploy_label: ClassVar[str | None] = None   # nvidia.com/gpu.deploy.<this>: its node label (None: no DaemonSet)
    mig_capable_only: ClassVar[bool] = False    # node_labels.py publishes the deploy label on MIG-capable GPUs only

    def __init__(self, scope: Construct, id: str, props: Props):
        super().__init__(scope, id)
        self.props = props
        fill_json = self.node.try_get_context("gpuop:fill-values")
        values = json.loads(fill_json) if fill_json else None
        for body in self.objects(props):
            body = with_wave(body)
            emit(self, fill(body, values) if values is not None else body)

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
