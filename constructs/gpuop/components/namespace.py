"""Namespace of the stack, with Pod Security Admission labels set to `privileged`.

Mirrors the namespace the GPU Operator's Helm chart installs into (`gpu-operator`) with the labels of
its `psa.enabled=true` mode (pod-security.kubernetes.io/{enforce,audit,warn}=privileged): every
operand is privileged, so a cluster enforcing `baseline` or `restricted` by default would reject the
stack. gpuop sets them always, since it cannot ask the cluster which PSA level it enforces.
"""

from __future__ import annotations

from pydantic import Field

from .base import Component, Props, meta

PSA = {f"pod-security.kubernetes.io/{mode}": "privileged" for mode in ("audit", "enforce", "warn")}


class NamespaceProps(Props):
    labels: dict[str, str] = Field(default_factory=dict, description="Extra labels. Omitted: PSA labels only.")


class Namespace(Component):
    name = "namespace"
    values_key = None
    props_type = NamespaceProps

    @classmethod
    def from_plan(cls, plan) -> NamespaceProps:
        return NamespaceProps(namespace=plan.namespace)

    @classmethod
    def render(cls, props: NamespaceProps) -> list[dict]:
        labels = {**PSA, "app.kubernetes.io/managed-by": "gpuop", **props.labels}
        return [{"apiVersion": "v1", "kind": "Namespace", "metadata": meta(props.namespace, labels=labels)}]
