"""Namespace of the stack, with Pod Security Admission labels set to `privileged`; on OpenShift also the
cluster-monitoring label and Role/RoleBinding `prometheus-k8s` for the platform's Prometheus.

Mirrors the namespace the GPU Operator's Helm chart installs into (`gpu-operator`) with the labels of
its `psa.enabled=true` mode (pod-security.kubernetes.io/{enforce,audit,warn}=privileged): every
operand is privileged, so a cluster enforcing `baseline` or `restricted` by default would reject the
stack. gpuop sets them always, since it cannot ask the cluster which PSA level it enforces.

OpenShift (NOTES.md §3): the Operator's namespace `nvidia-gpu-operator` carries
`openshift.io/cluster-monitoring: "true"` (the Operator adds it; the CSV sets the PSA labels), so the
platform Prometheus picks up the ServiceMonitors and PrometheusRules in it, and its
state-operator-metrics assets 0100_prom_role_openshift.yaml / 0110_prom_rolebinding_openshift.yaml
let ServiceAccount openshift-monitoring/prometheus-k8s get/list/watch services, endpoints and pods
there. gpuop emits the same Role and RoleBinding here (there is no operator-metrics state without an
operator) with the assets' `app: gpu-operator` label.
"""

from __future__ import annotations

from pydantic import Field

from gpuop.components.base import Component
from gpuop.components.props import Props
from gpuop.components.builders import meta

PSA = {f"pod-security.kubernetes.io/{mode}": "privileged" for mode in ("audit", "enforce", "warn")}


class NamespaceProps(Props):
    labels: dict[str, str] = Field(default_factory=dict, description="Extra labels. Omitted: PSA labels only.")
    prometheus: tuple[str, str] | None = Field(None, description=(
        "(namespace, ServiceAccount) of the platform Prometheus to grant read access to (OpenShift). "
        "Omitted: none."))


class Namespace(Component):
    name = "namespace"
    values_key = None
    props_type = NamespaceProps

    @classmethod
    def render(cls, props: NamespaceProps) -> list[dict]:
        labels = {**PSA, "app.kubernetes.io/managed-by": "gpuop", **props.labels}
        objs = [{"apiVersion": "v1", "kind": "Namespace", "metadata": meta(props.namespace, labels=labels)}]
        if props.prometheus:
            ns, sa = props.prometheus
            rbac_meta = meta(sa, props.namespace, {"app": "gpu-operator"})
            objs += [
                {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": rbac_meta,
                 "rules": [{"apiGroups": [""], "resources": ["services", "endpoints", "pods"],
                            "verbs": ["get", "list", "watch"]}]},
                {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": dict(rbac_meta),
                 "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": sa},
                 "subjects": [{"kind": "ServiceAccount", "name": sa, "namespace": ns}]},
            ]
        return objs
