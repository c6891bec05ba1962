"""Kueue ResourceFlavors (one per GPU pool), the ClusterQueue `gpus` and a LocalQueue per tenant namespace.

The objects OpenShift AI's and Kueue's own docs write by hand per GPU model ("Setup a ClusterQueue with
ResourceFlavors", kubernetes-sigs/kueue site/content/en/docs/tasks/manage/administer_cluster_quotas.md), here from
the plan's capacity: a ResourceFlavor's nodeLabels are the pool's nodeSelector (Kueue adds them to an admitted
workload's pods, so they land on the pool), its tolerations the pool's taints; the ClusterQueue's nominal quota per
flavor and resource is what the pool's nodes advertise (full GPUs, MIG profiles, shared replicas; DRA DeviceClasses
as logical resources). Kueue's rule that a resource belongs to one resource group and each flavor of a group lists
every resource of the group is kept by grouping flavors that share a resource (plan QueuesPlan.resource_groups).

API: kueue.x-k8s.io/v1beta2 (Kueue v0.15 and later; CRDs in verify/crds/kueue/, kubernetes-sigs/kueue v0.19.2).
Not rendered: Kueue itself, its Configuration (DRA's deviceClassMappings), AdmissionChecks, Cohort objects.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from gpuop.components.base import Component
from gpuop.components.builders import meta, taint_toleration
from gpuop.components.props import Props

API = "kueue.x-k8s.io/v1beta2"
LABELS = {"app.kubernetes.io/component": "gpu-queues", "app.kubernetes.io/managed-by": "gpuop"}


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class FlavorProps(_Frozen):
    name: str = Field(description="ResourceFlavor name: the pool's. Required.")
    node_labels: dict[str, str] = Field(default_factory=dict, description=(
        "spec.nodeLabels: the pool's nodeSelector. Omitted: none (the flavor matches every node).")
    )
    tolerations: tuple[tuple[str, str, str], ...] = Field((), description=(
        "(key, value, effect) of each taint of the pool's nodes: spec.tolerations. Omitted: none."))
    quota: dict[str, int] = Field(description="Nominal quota per resource of this flavor. Required.")


class QueuesProps(Props):
    cluster_queue: str = Field("gpus", description="The ClusterQueue's name. Omitted: gpus.")
    cohort: str | None = Field(None, description="spec.cohortName. Omitted: none.")
    local_queue: str = Field("gpus", description="Name of each LocalQueue. Omitted: gpus.")
    namespaces: tuple[str, ...] = Field((), description="Namespaces that get a LocalQueue. Omitted: none.")
    groups: tuple[tuple[tuple[str, ...], tuple[FlavorProps, ...]], ...] = Field(description=(
        "Resource groups: (covered resources, flavors); a flavor's quota of a covered resource it does not "
        "advertise is 0. Required."))


class KueueQueues(Component):
    name = "queues"
    values_key = None
    props_type = QueuesProps

    @classmethod
    def render(cls, props: QueuesProps) -> list[dict]:
        flavors = [f for _, fl in props.groups for f in fl]
        out = []
        for f in sorted(flavors, key=lambda f: f.name):
            spec: dict = {}
            if f.node_labels:
                spec["nodeLabels"] = dict(sorted(f.node_labels.items()))
            if f.tolerations:
                spec["tolerations"] = [taint_toleration(*t) for t in f.tolerations]
            out.append({"apiVersion": API, "kind": "ResourceFlavor", "metadata": meta(f.name, labels=LABELS),
                        "spec": spec})
        groups = [{"coveredResources": list(covered),
                   "flavors": [{"name": f.name, "resources": [{"name": r, "nominalQuota": f.quota.get(r, 0)}
                                                              for r in covered]} for f in fl]}
                  for covered, fl in props.groups]
        cq: dict = {"namespaceSelector": {}, "resourceGroups": groups}
        if props.cohort:
            cq["cohortName"] = props.cohort
        out.append({"apiVersion": API, "kind": "ClusterQueue", "metadata": meta(props.cluster_queue, labels=LABELS),
                    "spec": cq})
        out += [{"apiVersion": API, "kind": "LocalQueue", "metadata": meta(props.local_queue, ns, labels=LABELS),
                 "spec": {"clusterQueue": props.cluster_queue}} for ns in props.namespaces]
        return out
