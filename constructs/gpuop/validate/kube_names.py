"""Kubernetes field rules: every profile string that reaches a Kubernetes object must be one the API
server accepts, refused here at the profile's line instead of at `kubectl apply` (or, worse, by an
Argo CD sync that fails on one object of the stack).

The single-field syntax rules (names, label keys and values, quantities, integer ranges) live in the
profile models through the types of gpuop/kube/types.py. This module holds the rules that need the
field's context or combine fields, each with its upstream source:
- priorityClassName: a DNS-1123 subdomain (k8s.io/apimachinery pkg/util/validation IsDNS1123Subdomain,
  as ValidatePriorityClassName); the `system-` prefix is reserved for the two built-in classes
  (k8s.io/kubernetes pkg/apis/scheduling SystemPriorityClasses), any other is refused at admission.
- tolerations: ValidateTolerations (k8s.io/kubernetes pkg/apis/core/validation): an empty key needs
  Exists, Exists takes no value, a value is a label value, tolerationSeconds only with NoExecute.
- node affinity: ValidateNodeSelectorRequirement: In/NotIn values are label values (IsValidLabelValue),
  Gt/Lt take one int64.
- env var names: the profile models accept what the newest API server does (any printable ASCII but
  '='); a cluster older than 1.33 (RelaxedEnvironmentVariableValidation off) refuses names outside the
  older grammar (IsEnvVarName), so they are refused here for such a platform.
"""

from __future__ import annotations

import json

from pydantic import BaseModel

from gpuop.kube import validation as kv
from gpuop.kube.types import (DNS_SUBDOMAIN_RULE, INT64_MAX, LABEL_VALUE_RULE, SYSTEM_PRIORITY_CLASSES,
                              is_dns_subdomain, is_label_value, toleration_problems)
from gpuop.profile.models import EnvVar
from gpuop.validate.rules import Context, of_type, rule



@rule("priority-class-name", source="k8s.io/apimachinery pkg/util/validation IsDNS1123Subdomain; "
      "k8s.io/kubernetes pkg/apis/scheduling SystemPriorityClasses")
def check_priority_class_name(ctx: Context) -> list:
    """spec.daemonsets.priorityClassName: a DNS subdomain; `system-` only for the built-in classes."""
    name = ctx.spec.daemonsets.priorityClassName
    loc = ("spec", "daemonsets", "priorityClassName")
    if not is_dns_subdomain(name):
        return [ctx.at(loc, f"{name!r} is not a PriorityClass name: {DNS_SUBDOMAIN_RULE}")]
    if name.startswith("system-") and name not in SYSTEM_PRIORITY_CLASSES:
        return [ctx.at(loc, f"{name!r}: the system- prefix is reserved for Kubernetes' own priority classes; "
                       f"allowed with it: {', '.join(SYSTEM_PRIORITY_CLASSES)}")]
    return []


@rule("priority-class-exists", source="k8s.io/kubernetes plugin/pkg/admission/priority (a pod's priorityClassName "
      "must name an existing PriorityClass); pkg/apis/scheduling SystemPriorityClasses (the built-in ones)")
def check_priority_class_exists(ctx: Context) -> list:
    """A spec.daemonsets.priorityClassName that is neither built in nor declared as the cluster's own
    (spec.clusterOwned.priorityClasses): the API server would refuse every GPU pod, and `gpuop synth` the stack
    (its semantic check); checked here so `gpuop validate` says what synth does, at the field. A name that is not
    a PriorityClass name at all is check_priority_class_name's."""
    name = ctx.spec.daemonsets.priorityClassName
    if name in SYSTEM_PRIORITY_CLASSES or name in ctx.spec.clusterOwned.priorityClasses \
            or not is_dns_subdomain(name) or name.startswith("system-"):
        return []
    return [ctx.at(("spec", "daemonsets", "priorityClassName"),
                   f"Invalid value: {json.dumps(name)}: no PriorityClass with name {name} was found; gpuop cannot see "
                   f"the cluster: name a built-in one ({', '.join(SYSTEM_PRIORITY_CLASSES)}) or declare the "
                   "cluster's own in spec.clusterOwned.priorityClasses")]


@rule("tolerations", source="k8s.io/kubernetes pkg/apis/core/validation ValidateTolerations")
def check_tolerations(ctx: Context) -> list:
    """Each toleration of spec.daemonsets.tolerations against ValidateTolerations."""
    out = []
    for i, t in enumerate(ctx.spec.daemonsets.tolerations or []):
        for field, message in toleration_problems(t):
            out.append(ctx.at(("spec", "daemonsets", "tolerations", i, field), message))
    return out


@rule("node-affinity-values", source="k8s.io/kubernetes pkg/apis/core/validation "
      "ValidateNodeSelectorRequirement")
def check_node_affinity_values(ctx: Context) -> list:
    """spec.daemonsets.nodeAffinity values: label values for In/NotIn, one int64 for Gt/Lt."""
    out = []
    for i, req in enumerate(ctx.spec.daemonsets.nodeAffinity):
        for j, value in enumerate(req.values):
            loc = ("spec", "daemonsets", "nodeAffinity", i, "values", j)
            if req.operator in ("In", "NotIn") and not is_label_value(value):
                out.append(ctx.at(loc, f"{value!r} is not a valid label value ({LABEL_VALUE_RULE})"))
            elif req.operator in ("Gt", "Lt") and abs(int(value)) > INT64_MAX:
                out.append(ctx.at(loc, f"{value} is beyond the int64 range Gt/Lt compare in"))
    return out


def _kube_version(ctx: Context) -> str | None:
    """The Kubernetes minor of the cluster (OpenShift's through the release matrix); None: unknown."""
    p = ctx.spec.platform
    if p.type == "openshift":
        return ctx.release.matrix.openshiftKubernetes.get(p.version) if ctx.release else None
    return p.version


def _env_vars(node, loc: tuple):
    """(loc, EnvVar) of every env entry anywhere in the profile's spec."""
    return of_type(node, EnvVar, loc)


@rule("env-name-kubernetes-version", source="k8s.io/apimachinery pkg/util/validation IsEnvVarName (before "
      "1.33), RelaxedEnvironmentVariableValidation (1.33 on)")
def check_env_names_for_the_kubernetes_version(ctx: Context) -> list:
    """Env var names the cluster's API server accepts (IsEnvVarName before 1.33, IsRelaxedEnvVarName since)."""
    kube = _kube_version(ctx)
    if kube is None or kv.kube_minor(kube) >= kv.RELAXED_ENV_VAR_NAMES_FROM:
        return []
    out = []
    for loc, env in _env_vars(ctx.spec, ("spec",)):
        errs = kv.is_env_var_name(env.name, kube)
        if errs:
            out.append(ctx.at(loc + ("name",), f"{env.name!r}: {errs[0]} (Kubernetes {kube}; names outside this "
                                               "grammar are accepted from 1.33 on)"))
    return out


RULES = ((check_priority_class_name, check_priority_class_exists, check_tolerations, check_node_affinity_values,
          check_env_names_for_the_kubernetes_version),)


def applies(ctx: Context) -> bool:
    return True
