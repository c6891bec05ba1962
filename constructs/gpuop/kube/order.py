"""Deterministic object order: the kind-rank table, then namespace, then name.

The table is Helm's install order (pkg/release/util/kind_sorter.go), which is also the order a
person reads a stack in: Namespace first, identities and RBAC, configuration, then workloads. Kinds
not in the table (custom resources, RuntimeClass) come after it, by kind name.
"""

from __future__ import annotations

import json

KIND_RANK = (
    "Namespace", "NetworkPolicy", "ResourceQuota", "LimitRange", "PodSecurityPolicy", "PodDisruptionBudget",
    "ServiceAccount", "Secret", "ConfigMap", "StorageClass", "PersistentVolume", "PersistentVolumeClaim",
    "CustomResourceDefinition", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding", "Service",
    "DaemonSet", "Pod", "ReplicationController", "ReplicaSet", "Deployment", "HorizontalPodAutoscaler",
    "StatefulSet", "Job", "CronJob", "IngressClass", "Ingress", "APIService",
)
_RANK = {kind: i for i, kind in enumerate(KIND_RANK)}


def sort_key(obj: dict) -> tuple:
    kind = obj["kind"]
    meta = obj.get("metadata", {})
    return (_RANK.get(kind, len(KIND_RANK)), kind, meta.get("namespace", ""), meta["name"])


def file_name(obj: dict) -> str:
    """Stable file name of one object: `<kind>-<name>.yaml`, lower case."""
    return f"{obj['kind'].lower()}-{obj['metadata']['name']}.yaml"


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
