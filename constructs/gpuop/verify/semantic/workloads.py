"""Semantic rules on workloads: the DaemonSet / Deployment / Job spec rules of k8s.io/kubernetes
pkg/apis/apps|batch/validation (selectors, restart policy, update strategy)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from gpuop.kube.validation import (
    IS_NEGATIVE_ERROR_MSG, forbidden, invalid, is_valid_percent, not_supported, required,
)
from .objects import rule, Context, Finding, Obj, _Emitter, _dict, _dicts, _list, child, pod_specs


def go_string_map(values: Mapping[str, Any]) -> str:
    """fmt %#v of a map[string]string (keys sorted, as fmt does)."""
    inner = ", ".join(f"{json.dumps(str(k))}:{json.dumps(str(v))}" for k, v in sorted(values.items()))
    return f"map[string]string{{{inner}}}"


def selector_matches(selector: Mapping[str, Any], labels: Mapping[str, Any]) -> bool:
    """metav1.LabelSelectorAsSelector(selector).Matches(labels) for a non-nil selector."""
    for k, v in _dict(selector.get("matchLabels")).items():
        if labels.get(k) != v:
            return False
    for _, expr in _dicts(selector.get("matchExpressions")):
        label_key, op, values = str(expr.get("key")), expr.get("operator"), _list(expr.get("values"))
        present = label_key in labels
        if op == "In" and not (present and labels[label_key] in values):
            return False
        if op == "NotIn" and present and labels[label_key] in values:
            return False
        if op == "Exists" and not present:
            return False
        if op == "DoesNotExist" and present:
            return False
    return True


@rule("workload-selector", source="k8s pkg/apis/apps/validation/validation.go ValidateDaemonSetSpec",
      refuses="Workload selectors empty or not matching the template's labels.")
# k8s pkg/apis/apps/validation/validation.go ValidateDaemonSetSpec ("`selector` does not match
#   template `labels`", "empty selector is invalid for daemonset"), and the same selector checks
#   of ValidateDeploymentSpec / ValidateStatefulSetSpec / ValidateReplicaSetSpec
def check_workload_selector(obj: Obj, ctx: Context) -> Iterable[Finding]:
    emit = _Emitter(obj)
    kind = obj.get("kind")
    if kind not in ("DaemonSet", "Deployment", "StatefulSet", "ReplicaSet"):
        return emit.findings
    spec = _dict(obj.get("spec"))
    selector = spec.get("selector")
    labels = _dict(_dict(_dict(spec.get("template")).get("metadata")).get("labels"))
    if not isinstance(selector, Mapping):
        emit("spec.selector", required())
        return emit.findings
    if not _dict(selector.get("matchLabels")) and not _list(selector.get("matchExpressions")):
        detail = (
            "empty selector is not valid for statefulset."
            if kind == "StatefulSet"
            else f"empty selector is invalid for {kind.lower()}"
        )
        emit("spec.selector", f"Invalid value: {{}}: {detail}")
        return emit.findings
    if not selector_matches(selector, labels):
        emit(
            "spec.template.metadata.labels",
            f"Invalid value: {go_string_map(labels)}: `selector` does not match template `labels`",
        )
    return emit.findings


@rule("pod-template-restart-policy",
      source="k8s pkg/apis/apps/validation/validation.go ValidateDaemonSetSpec / ValidateDeploymentSpec / "
             "ValidateStatefulSetSpec",
      refuses="Workload pod templates with another restartPolicy than their kind allows.")
# k8s pkg/apis/apps/validation/validation.go ValidateDaemonSetSpec / ValidateDeploymentSpec /
#   ValidateStatefulSetSpec ("Unsupported value ... supported values: \"Always\"") and
#   pkg/apis/batch/validation ValidateJobSpec (OnFailure or Never)
def check_pod_template_restart_policy(obj: Obj, ctx: Context) -> Iterable[Finding]:
    emit = _Emitter(obj)
    kind = obj.get("kind")
    for ref in pod_specs(obj):
        policy = ref.spec.get("restartPolicy") or "Always"  # v1 default
        if kind in ("DaemonSet", "Deployment", "StatefulSet", "ReplicaSet") and policy != "Always":
            emit(child(ref.path, "restartPolicy"), not_supported(policy, ("Always",)))
        elif kind in ("Job", "CronJob") and policy not in ("OnFailure", "Never"):
            emit(child(ref.path, "restartPolicy"), not_supported(policy, ("OnFailure", "Never")))
        if kind == "DaemonSet" and ref.spec.get("activeDeadlineSeconds") is not None:
            emit(
                child(ref.path, "activeDeadlineSeconds"),
                forbidden("activeDeadlineSeconds in DaemonSet is not Supported"),
            )
    return emit.findings


def _int_or_percent(value: Any) -> tuple[int | None, bool]:
    """(value, is_percent); value None when unparseable (getIntOrPercentValue)."""
    if isinstance(value, bool):
        return None, False
    if isinstance(value, int):
        return value, False
    if isinstance(value, str) and not is_valid_percent(value):
        return int(value[:-1]), True
    return None, isinstance(value, str)


@rule("daemonset-update-strategy",
      source="k8s pkg/apis/apps/validation/validation.go ValidateDaemonSetUpdateStrategy / "
             "ValidateRollingUpdateDaemonSet / ValidatePositiveIntOrPercent / IsNotMoreThan100Percent, after "
             "pkg/apis/apps/v1 defaults.go SetDefaults_DaemonSet",
      refuses="Bad DaemonSet update strategies: types, percentages, maxUnavailable and maxSurge both zero.")
# k8s pkg/apis/apps/validation/validation.go ValidateDaemonSetUpdateStrategy /
#   ValidateRollingUpdateDaemonSet / ValidatePositiveIntOrPercent / IsNotMoreThan100Percent,
#   after pkg/apis/apps/v1 defaults.go SetDefaults_DaemonSet (type RollingUpdate,
#   maxUnavailable 1, maxSurge 0 when absent).
# "rollingUpdate with OnDelete" is NOT refused for DaemonSets upstream (it is silently ignored);
# it is reported with the wording StatefulSet validation uses for the same mistake.
def check_daemonset_update_strategy(obj: Obj, ctx: Context) -> Iterable[Finding]:
    emit = _Emitter(obj)
    if obj.get("kind") != "DaemonSet":
        return emit.findings
    base = "spec.updateStrategy"
    strategy = _dict(_dict(obj.get("spec")).get("updateStrategy"))
    stype = strategy.get("type") or "RollingUpdate"
    rolling = strategy.get("rollingUpdate")
    if stype == "OnDelete":
        if rolling is not None:
            emit(child(base, "rollingUpdate"), invalid("", "only allowed for updateStrategy 'RollingUpdate'"))
        return emit.findings
    if stype != "RollingUpdate":
        emit(child(base, "type"), not_supported(stype, ("RollingUpdate", "OnDelete")))
        return emit.findings
    rolling = _dict(rolling)
    values: dict[str, int | None] = {}
    for fname, default in (("maxUnavailable", 1), ("maxSurge", 0)):
        raw = rolling.get(fname, default)
        fpath = child(base, "rollingUpdate", fname)
        value, is_percent = _int_or_percent(raw)
        if isinstance(raw, str) and value is None:
            for msg in is_valid_percent(raw):
                emit(fpath, invalid(raw, msg))
        elif value is not None and value < 0:
            emit(fpath, f"Invalid value: {raw}: {IS_NEGATIVE_ERROR_MSG}")
        elif is_percent and value is not None and value > 100:
            emit(fpath, f"Invalid value: {raw}: must not be greater than 100%")
        values[fname] = value
    has_unavailable = values["maxUnavailable"] not in (0, None)
    has_surge = values["maxSurge"] not in (0, None)
    if has_unavailable and has_surge:
        emit(
            child(base, "rollingUpdate", "maxSurge"),
            f"Invalid value: {rolling.get('maxSurge')}: may not be set when maxUnavailable is non-zero",
        )
    elif values["maxUnavailable"] == 0 and values["maxSurge"] == 0:
        emit(child(base, "rollingUpdate", "maxUnavailable"), required("cannot be 0 when maxSurge is 0"))
    return emit.findings
