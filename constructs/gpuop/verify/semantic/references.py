"""Semantic rules on the references between the objects of one cluster's output (ServiceAccounts,
ConfigMaps, Secrets, RuntimeClasses, roles, SCCs, namespaces): what admission or the kubelet refuses when
the named object is missing."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from gpuop.kube.validation import (
    go_value, invalid, is_dns1123_label, is_dns1123_subdomain, not_supported, required,
)
from .objects import (
    rule,
    CLUSTER_SCOPED_KINDS, Context, Finding, Obj, PodSpecRef, TENANT_KINDS, _Emitter, _dict, _dicts, _list,
    child, containers, pod_specs,
)


@rule("service-account-exists", source="k8s plugin/pkg/admission/serviceaccount admission.go",
      refuses="A pod naming a ServiceAccount neither in the output nor external.")
# k8s plugin/pkg/admission/serviceaccount admission.go: pods naming a missing ServiceAccount are
#   refused ("service account %s/%s was not found, retry after the service account is created");
#   the "default" account always exists (the serviceaccounts controller creates it).
def check_service_account_exists(obj: Obj, ctx: Context) -> Iterable[Finding]:
    emit = _Emitter(obj)
    for ref in pod_specs(obj):
        for fname in ("serviceAccountName", "serviceAccount"):
            name = ref.spec.get(fname)
            if not isinstance(name, str) or not name or name == "default":
                continue
            if not ctx.exists("ServiceAccount", name, emit.namespace):
                emit(
                    child(ref.path, fname),
                    f"service account {emit.namespace}/{name} was not found, "
                    "retry after the service account is created",
                )
            break  # serviceAccountName wins over the deprecated serviceAccount
    return emit.findings


def _config_refs(ref: PodSpecRef, kind: str) -> Iterator[tuple[str, str, Mapping[str, Any], list[str]]]:
    """(path, name, source, keys) of every ConfigMap ('configMap') or Secret ('secret') reference."""
    vol_field, name_field = ("configMap", "name") if kind == "configMap" else ("secret", "secretName")
    key_ref, env_ref = ("configMapKeyRef", "configMapRef") if kind == "configMap" else ("secretKeyRef", "secretRef")
    for i, vol in _dicts(ref.spec.get("volumes")):
        vpath = child(ref.path, "volumes", i)
        src = vol.get(vol_field)
        if isinstance(src, Mapping):
            keys = [str(item.get("key")) for _, item in _dicts(src.get("items"))]
            yield child(vpath, vol_field, name_field), str(src.get(name_field, "")), src, keys
        for j, proj in _dicts(_dict(vol.get("projected")).get("sources")):
            psrc = proj.get(vol_field)
            if isinstance(psrc, Mapping):
                keys = [str(item.get("key")) for _, item in _dicts(psrc.get("items"))]
                yield child(vpath, "projected", "sources", j, vol_field, "name"), str(psrc.get("name", "")), psrc, keys
    for cpath, ctr, _ in containers(ref.spec, ref.path):
        for i, env_from in _dicts(ctr.get("envFrom")):
            src = env_from.get(env_ref)
            if isinstance(src, Mapping):
                yield child(cpath, "envFrom", i, env_ref, "name"), str(src.get("name", "")), src, []
        for i, env in _dicts(ctr.get("env")):
            src = _dict(env.get("valueFrom")).get(key_ref)
            if isinstance(src, Mapping):
                path = child(cpath, "env", i, "valueFrom", key_ref, "name")
                yield path, str(src.get("name", "")), src, [str(src.get("key", ""))]


def _check_config_refs(obj: Obj, ctx: Context, ref_kind: str, obj_kind: str, resource: str) -> list[Finding]:
    emit = _Emitter(obj)
    for ref in pod_specs(obj):
        for path, name, src, keys in _config_refs(ref, ref_kind):
            if not name or src.get("optional") is True:
                continue
            if not ctx.exists(obj_kind, name, emit.namespace):
                emit(path, f'{resource} {go_value(name)} not found')
                continue
            target = ctx.get(obj_kind, name, emit.namespace)
            if target is None:
                continue  # external: its keys are unknown
            available = (
                set(_dict(target.get("data")))
                | set(_dict(target.get("binaryData")))
                | set(_dict(target.get("stringData")))
            )
            for k in keys:
                if k not in available:
                    # kubelet: "couldn't find key %v in ConfigMap %v/%v" / volume
                    # "configmap references non-existent config key"
                    emit(path, f'{resource} {go_value(name)} has no key {go_value(k)}')
    return emit.findings


@rule("config-map-references",
      source="kubelet pkg/kubelet/kubelet_pods.go makeEnvironmentVariables and pkg/volume/configmap SetUpAt",
      refuses="A pod needing a ConfigMap (or key) neither in the output nor external.")
# kubelet pkg/kubelet/kubelet_pods.go makeEnvironmentVariables and pkg/volume/configmap SetUpAt:
#   a missing, non-optional ConfigMap (or key) keeps the pod in CreateContainerConfigError /
#   ContainerCreating.  Message: API NotFound wording 'configmaps "x" not found'.
def check_config_map_references(obj: Obj, ctx: Context) -> Iterable[Finding]:
    return _check_config_refs(obj, ctx, "configMap", "ConfigMap", "configmaps")


@rule("secret-references",
      source="kubelet pkg/kubelet/kubelet_pods.go makeEnvironmentVariables, pkg/volume/secret SetUpAt",
      refuses="A pod needing a Secret (or key) neither in the output nor external.")
# Same kubelet paths for Secrets (pkg/volume/secret SetUpAt).  imagePullSecrets are deliberately
# not checked: they are provided by the user.
def check_secret_references(obj: Obj, ctx: Context) -> Iterable[Finding]:
    return _check_config_refs(obj, ctx, "secret", "Secret", "secrets")


@rule("runtime-class-exists",
      source="k8s pkg/apis/core/validation/validation.go ValidateRuntimeClassName",
      refuses="A runtimeClassName that is not a DNS subdomain or names a RuntimeClass neither in the output nor "
              "external.")
# k8s pkg/apis/core/validation/validation.go ValidateRuntimeClassName (DNS subdomain) and
#   plugin/pkg/admission/runtimeclass admission.go: 'pod rejected: RuntimeClass "%s" not found'
def check_runtime_class_exists(obj: Obj, ctx: Context) -> Iterable[Finding]:
    emit = _Emitter(obj)
    for ref in pod_specs(obj):
        name = ref.spec.get("runtimeClassName")
        if not isinstance(name, str):
            continue
        path = child(ref.path, "runtimeClassName")
        errs = is_dns1123_subdomain(name)
        for msg in errs:
            emit(path, invalid(name, msg))
        if not errs and not ctx.exists("RuntimeClass", name):
            emit(path, f'pod rejected: RuntimeClass {go_value(name)} not found')
    return emit.findings


@rule("role-binding-role-ref",
      source="k8s pkg/apis/rbac/validation/validation.go ValidateRoleBinding / ValidateClusterRoleBinding",
      refuses="A binding whose roleRef is malformed or names a role neither in the output nor external.")
# k8s pkg/apis/rbac/validation/validation.go ValidateRoleBinding / ValidateClusterRoleBinding
#   (roleRef.apiGroup, roleRef.kind) and pkg/registry/rbac/rolebinding/policybased storage.go:
#   without "bind"/escalate rights, creating a binding resolves the role and fails with the
#   NotFound error 'clusterroles.rbac.authorization.k8s.io "x" not found'.
def check_role_binding_role_ref(obj: Obj, ctx: Context) -> Iterable[Finding]:
    emit = _Emitter(obj)
    kind = obj.get("kind")
    if kind not in ("RoleBinding", "ClusterRoleBinding"):
        return emit.findings
    role_ref = _dict(obj.get("roleRef"))
    group = role_ref.get("apiGroup", "")
    if group != "rbac.authorization.k8s.io":
        emit("roleRef.apiGroup", not_supported(group, ("rbac.authorization.k8s.io",)))
    ref_kind = role_ref.get("kind", "")
    allowed = ("Role", "ClusterRole") if kind == "RoleBinding" else ("ClusterRole",)
    if ref_kind not in allowed:
        emit("roleRef.kind", not_supported(ref_kind, allowed))
        return emit.findings
    name = str(role_ref.get("name", ""))
    if not name:
        emit("roleRef.name", required())
        return emit.findings
    namespace = emit.namespace if ref_kind == "Role" else ""
    if not ctx.exists(ref_kind, name, namespace):
        resource = "roles" if ref_kind == "Role" else "clusterroles"
        emit("roleRef.name", f'{resource}.rbac.authorization.k8s.io {go_value(name)} not found')
    return emit.findings


@rule("role-binding-subjects", source="k8s pkg/apis/rbac/validation/validation.go validateRoleBindingSubject",
      refuses="Binding subjects that are malformed, or ServiceAccounts neither in the output nor external.")
# k8s pkg/apis/rbac/validation/validation.go validateRoleBindingSubject (ServiceAccount subjects
#   need a namespace in ClusterRoleBindings) + reference check: a binding to a ServiceAccount
#   that is neither in the output nor external grants nothing to the workload.
def check_role_binding_subjects(obj: Obj, ctx: Context) -> Iterable[Finding]:
    emit = _Emitter(obj)
    kind = obj.get("kind")
    if kind not in ("RoleBinding", "ClusterRoleBinding"):
        return emit.findings
    for i, subject in _dicts(obj.get("subjects")):
        if subject.get("kind") != "ServiceAccount":
            continue
        path = child("subjects", i)
        namespace = subject.get("namespace") or (emit.namespace if kind == "RoleBinding" else "")
        if not namespace:
            emit(child(path, "namespace"), required())
            continue
        name = str(subject.get("name", ""))
        if name and name != "default" and not ctx.exists("ServiceAccount", name, namespace):
            emit(child(path, "name"),
                 f"serviceaccounts {go_value(name)} not found in namespace {go_value(namespace)}")
    return emit.findings


_SA_USER_RE = re.compile(r"system:serviceaccount:([^:]+):([^:]+)")


@rule("scc-users", source="OpenShift SecurityContextConstraints (security.openshift.io/v1)",
      refuses="An SCC user naming a ServiceAccount neither in the output nor external.")
# OpenShift SecurityContextConstraints: `users` entries "system:serviceaccount:NS:NAME" must name
#   an existing ServiceAccount, otherwise the SCC never applies to the workload.
def check_scc_users(obj: Obj, ctx: Context) -> Iterable[Finding]:
    emit = _Emitter(obj)
    if obj.get("kind") != "SecurityContextConstraints":
        return emit.findings
    for i, user in enumerate(_list(obj.get("users"))):
        match = _SA_USER_RE.fullmatch(str(user))
        if not match:
            continue
        namespace, name = match.groups()
        if name != "default" and not ctx.exists("ServiceAccount", name, namespace):
            emit(child("users", i),
                 f"serviceaccounts {go_value(name)} not found in namespace {go_value(namespace)}")
    return emit.findings


@rule("rbac-scc-use-resource-names", source="OpenShift SecurityContextConstraints (security.openshift.io/v1)",
      refuses="A role granting use of an SCC neither in the output nor external.")
# OpenShift: a Role/ClusterRole rule granting `use` on securitycontextconstraints by resourceName
#   must name an SCC that exists (in the output or external), else the grant is dead.
def check_rbac_scc_use_resource_names(obj: Obj, ctx: Context) -> Iterable[Finding]:
    emit = _Emitter(obj)
    if obj.get("kind") not in ("Role", "ClusterRole"):
        return emit.findings
    for i, rule in _dicts(obj.get("rules")):
        resources = _list(rule.get("resources"))
        verbs = _list(rule.get("verbs"))
        if "securitycontextconstraints" not in resources or not ({"use", "*"} & set(verbs)):
            continue
        for j, name in enumerate(_list(rule.get("resourceNames"))):
            if not ctx.exists("SecurityContextConstraints", str(name)):
                emit(
                    child("rules", i, "resourceNames", j),
                    f'securitycontextconstraints.security.openshift.io {go_value(name)} not found',
                )
    return emit.findings


@rule("namespace-exists", source="k8s plugin/pkg/admission/namespace/lifecycle admission.go",
      refuses="An object in a namespace neither in the output nor external.")
# k8s plugin/pkg/admission/namespace/lifecycle admission.go: objects in a namespace that does not
#   exist are refused ('namespaces "x" not found'). TENANT_KINDS go into the users' namespaces.
def check_namespace_exists(obj: Obj, ctx: Context) -> Iterable[Finding]:
    emit = _Emitter(obj)
    if obj.get("kind") in CLUSTER_SCOPED_KINDS or obj.get("kind") in TENANT_KINDS or not emit.namespace:
        return emit.findings
    # gpuop/tenant-namespace=true: a tenant's namespace the profile says exists (DRA claim templates)
    if ((obj.get("metadata") or {}).get("annotations") or {}).get("gpuop/tenant-namespace") == "true":
        return emit.findings
    if is_dns1123_label(emit.namespace):
        return emit.findings      # an invalid namespace is reported by the metadata rules
    if not ctx.exists("Namespace", emit.namespace):
        emit("metadata.namespace", f'namespaces {go_value(emit.namespace)} not found')
    return emit.findings
