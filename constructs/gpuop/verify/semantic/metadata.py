"""Semantic rules on object metadata: names by kind, namespaces, labels, annotations (k8s.io/apimachinery
pkg/api/validation objectmeta.go), and duplicate objects."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from gpuop.kube.validation import (
    duplicate, forbidden, invalid, is_dns1035_label, is_dns1123_label, is_dns1123_subdomain,
    is_path_segment_name, is_qualified_name, is_valid_label_value, required, too_long,
)
from .objects import rule, CLUSTER_SCOPED_KINDS, Context, Finding, Obj, _Emitter, _dict, _meta, child, key, pod_specs


_RBAC_KINDS = frozenset({"Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding"})


def name_errors(kind: str, name: str) -> list[str]:
    """The ValidateNameFunc upstream uses for each kind."""
    if kind == "Namespace":
        return is_dns1123_label(name)  # ValidateNamespaceName = NameIsDNSLabel
    if kind == "Service":
        return is_dns1035_label(name)  # ValidateServiceName = NameIsDNS1035Label
    if kind in _RBAC_KINDS:
        return is_path_segment_name(name)  # rbac minimalNameRequirements
    return is_dns1123_subdomain(name)  # NameIsDNSSubdomain (everything else, CRs included)


@rule("metadata-name", source="k8s.io/apimachinery/pkg/api/validation/objectmeta.go ValidateObjectMetaAccessor",
      refuses="An object name the kind's name rule refuses, a missing name, a namespace that is not a DNS-1123 label.")
# k8s.io/apimachinery/pkg/api/validation/objectmeta.go ValidateObjectMetaAccessor (name with the
#   kind's ValidateNameFunc, "name or generateName is required", namespace DNS-1123 label)
def check_metadata_name(obj: Obj, ctx: Context) -> Iterable[Finding]:
    emit = _Emitter(obj)
    meta = _meta(obj)
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        emit("metadata.name", required("name or generateName is required"))
    else:
        for msg in name_errors(emit.kind, name):
            emit("metadata.name", invalid(name, msg))
    namespace = meta.get("namespace")
    if namespace and emit.kind in CLUSTER_SCOPED_KINDS:
        emit("metadata.namespace", forbidden("not allowed on this type"))    # ValidateObjectMeta, namespaced=false
    elif isinstance(namespace, str) and namespace:
        for msg in is_dns1123_label(namespace):
            emit("metadata.namespace", invalid(namespace, msg))
    return emit.findings


def _metas(obj: Obj) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """(path, metadata) of the object and of its pod template, if any."""
    yield "metadata", _meta(obj)
    for ref in pod_specs(obj):
        if ref.meta_path:
            yield ref.meta_path, ref.meta


def _label_maps(obj: Obj) -> Iterator[tuple[str, Mapping[str, Any]]]:
    for path, meta in _metas(obj):
        yield child(path, "labels"), _dict(meta.get("labels"))
    spec = _dict(obj.get("spec"))
    if obj.get("kind") in ("DaemonSet", "Deployment", "StatefulSet", "ReplicaSet"):
        yield "spec.selector.matchLabels", _dict(_dict(spec.get("selector")).get("matchLabels"))
    if obj.get("kind") == "Service":
        yield "spec.selector", _dict(spec.get("selector"))


@rule("labels",
      source="k8s.io/apimachinery/pkg/apis/meta/v1/validation ValidateLabels",
      refuses="Label keys that are not qualified names and values that are not label values (objects, templates, "
              "selectors).")
# k8s.io/apimachinery/pkg/apis/meta/v1/validation ValidateLabels (IsQualifiedName keys,
#   IsValidLabelValue values) on object and template labels, workload and Service selectors
def check_labels(obj: Obj, ctx: Context) -> Iterable[Finding]:
    emit = _Emitter(obj)
    for base, labels in _label_maps(obj):
        for k, v in labels.items():
            for msg in is_qualified_name(str(k)):
                emit(key(base, str(k)), invalid(k, msg))
            if not isinstance(v, str):
                emit(key(base, str(k)), invalid(v, "label values must be strings"))
                continue
            for msg in is_valid_label_value(v):
                emit(key(base, str(k)), invalid(v, msg))
    return emit.findings


TOTAL_ANNOTATION_SIZE_LIMIT_B = 256 * (1 << 10)


@rule("annotations", source="k8s.io/apimachinery/pkg/api/validation/objectmeta.go ValidateAnnotations",
      refuses="Annotation keys that are not qualified names; annotations over 256 KiB in total.")
# k8s.io/apimachinery/pkg/api/validation/objectmeta.go ValidateAnnotations (lower-cased keys are
#   qualified names; total size of keys+values <= 256KiB: "Too long: must have at most 262144 bytes")
def check_annotations(obj: Obj, ctx: Context) -> Iterable[Finding]:
    emit = _Emitter(obj)
    for path, meta in _metas(obj):
        base, annotations = child(path, "annotations"), _dict(meta.get("annotations"))
        size = 0
        for k, v in annotations.items():
            for msg in is_qualified_name(str(k).lower()):
                emit(key(base, str(k)), invalid(k, msg))
            size += len(str(k).encode()) + len(str(v).encode())
        if size > TOTAL_ANNOTATION_SIZE_LIMIT_B:
            emit(base, too_long(TOTAL_ANNOTATION_SIZE_LIMIT_B))
    return emit.findings


@rule("duplicate-objects",
      source="gpuop (not an API-server check): two objects with the same kind/namespace/name in one output means "
             "the second silently overwrites the first on apply",
      refuses="Two objects with the same kind, namespace and name in one output (the second overwrites the first).")
# Not an API-server check: two objects with the same kind/namespace/name in one output means
#   the second silently overwrites the first on apply.
def check_duplicate_objects(obj: Obj, ctx: Context) -> Iterable[Finding]:
    emit = _Emitter(obj)
    if ctx.first(obj) is not obj:
        emit("metadata.name", duplicate(emit.name))
    return emit.findings
