"""Deterministic object order: the kind-rank table, then namespace, then name; and the file each
object is written to.

The table is Helm's install order (pkg/release/util/kind_sorter.go), which is also the order a
person reads a stack in: Namespace first, identities and RBAC, configuration, then workloads. Kinds
not in the table (custom resources, RuntimeClass) come after it, by kind name.

Files: one per component (`manifests/<NN>-<component>.yaml`, `chart/templates/<NN>-<component>.yaml`),
its objects in the order above, so a reviewer reads one component's objects together and a fleet
compile writes 10-15 files per folder instead of 40-60. `NN` is the component's place in
COMPONENT_ORDER, the Operator's state order (stack/registry.py; tests/test_kustomize.py keeps the two
equal). The prefix is needed: `ls` and `kubectl apply -f manifests/` take files by name, and by name
alone `dcgm-exporter.yaml` would come before `namespace.yaml`, whose Namespace must exist before
anything is created in it; the state order also puts the RuntimeClasses before the DaemonSets whose
pods name them and the device plugin's ConfigMap before the device plugin. The number belongs to the
component, not to its position in one cluster, so turning a component on or off renames no other file.
Helm, Kustomize, Argo CD and Flux order the objects by kind themselves, whatever the files.
"""

from __future__ import annotations

import json

from gpuop.kube import components

KIND_RANK = (
    "Namespace", "NetworkPolicy", "ResourceQuota", "LimitRange", "PodSecurityPolicy", "PodDisruptionBudget",
    "ServiceAccount", "Secret", "ConfigMap", "StorageClass", "PersistentVolume", "PersistentVolumeClaim",
    "CustomResourceDefinition", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding", "Service",
    "DaemonSet", "Pod", "ReplicationController", "ReplicaSet", "Deployment", "HorizontalPodAutoscaler",
    "StatefulSet", "Job", "CronJob", "IngressClass", "Ingress", "APIService",
    # Kueue's, after Helm's: a ClusterQueue names its ResourceFlavors, a LocalQueue its ClusterQueue
    "ResourceFlavor", "ClusterQueue", "LocalQueue",
)
_RANK = {kind: i for i, kind in enumerate(KIND_RANK)}


def sort_key(obj: dict) -> tuple:
    kind = obj["kind"]
    meta = obj.get("metadata", {})
    return (_RANK.get(kind, len(KIND_RANK)), kind, meta.get("namespace", ""), meta["name"])


# stack/registry.py's REGISTRY names, in its order (outputs must not import components, which start Node)
COMPONENT_ORDER = components.NAMES
_COMPONENT_RANK = {name: i for i, name in enumerate(COMPONENT_ORDER)}


def component_rank(component: str) -> int:
    """Place of a component's file; one missing from the table (tests/test_kustomize.py refuses that) goes last."""
    return _COMPONENT_RANK.get(component, 99)


def file_name(component: str) -> str:
    """Stable file name of one component's objects: `<NN>-<component>.yaml`."""
    return f"{component_rank(component):02d}-{component}.yaml"


def by_component(objects) -> list[tuple[str, list]]:
    """StackObjects (already in sort_key order) grouped by component, components in file order; each
    group keeps the objects' order."""
    groups: dict[str, list] = {}
    for o in objects:
        groups.setdefault(o.component, []).append(o)
    return sorted(groups.items(), key=lambda kv: (component_rank(kv[0]), kv[0]))


# Argo CD sync waves inside a stack: identities and configuration exist before the workloads that
# use them (Argo CD applies wave by wave and waits for each to be healthy). Kinds not listed, the
# DaemonSets and custom resources among them, stay in the default wave 0, so workload objects carry
# exactly the metadata upstream gives them. Flux and Helm ignore the annotation.
SYNC_WAVE = "argocd.argoproj.io/sync-wave"
WAVES = {
    "Namespace": "-3",
    "ServiceAccount": "-2", "Role": "-2", "ClusterRole": "-2", "RoleBinding": "-2", "ClusterRoleBinding": "-2",
    "SecurityContextConstraints": "-2",          # OpenShift: pods are admitted only once their SCC exists
    "ConfigMap": "-1", "Secret": "-1", "RuntimeClass": "-1",
    "ImageStream": "-1",                         # OpenShift: resolves the Driver Toolkit image when DaemonSets are applied
}


# Flux's postBuild substitution replaces `${VAR}` in every object of a Kustomization — and turns the
# operand scripts' shell variables into empty strings. Objects holding `${` opt out.
SUBSTITUTE = "kustomize.toolkit.fluxcd.io/substitute"


def with_wave(body: dict) -> dict:
    """The delivery annotations gpuop adds to an object: its Argo CD sync wave, and Flux's substitution
    opt-out where the object holds `${`."""
    extra = {}
    wave = WAVES.get(body["kind"])
    if wave is not None:
        extra[SYNC_WAVE] = wave
    if "${" in json.dumps(body):
        extra[SUBSTITUTE] = "disabled"
    if not extra:
        return body
    meta = body["metadata"]
    return {**body, "metadata": {**meta, "annotations": {**meta.get("annotations", {}), **extra}}}
