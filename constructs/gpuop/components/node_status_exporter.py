"""Node status exporter: ServiceAccount/Role/RoleBinding/ClusterRole/ClusterRoleBinding
`nvidia-node-status-exporter`, Service `nvidia-node-status-exporter` (port `node-status` 8000),
DaemonSet `nvidia-node-status-exporter`; with its ServiceMonitor on, ServiceMonitor
`nvidia-node-status-exporter`. As the Operator's state-node-status-exporter
(assets/state-node-status-exporter) after TransformNodeStatusExporter (v26.7).

It is the validator image run as `nvidia-validator` with `COMPONENT=metrics`: it exports, per node,
whether the driver, toolkit, CUDA and plugin validations passed (the files in
/run/nvidia/validations) and how many GPUs the device plugin advertises. Off by default, as upstream.

Service account token: mounted (the default): it counts the GPUs the device plugin advertises from the
node object (cmd/nvidia-validator metrics.go watchDevicePluginValidation).

Differences from upstream, and why:
- The ServiceMonitor is emitted only when the profile turns it on (upstream: only when the CRD exists,
  which gpuop cannot check); the Service carries `prometheus.io/scrape: "true"` either way.
- The asset's `imagePullPolicy: Always` is replaced by the stack's pull policy, as the Operator's
  transform does.
- OpenShift: PrometheusRule `nvidia-node-status-exporter-alerts` (the asset
  0800_prometheus_rule_openshift.yaml: alerts when a node cannot expose GPUs for 30 minutes) and the
  ServiceMonitor on by default; the SCC is openshift.py's.
"""

from __future__ import annotations

from pydantic import Field

from gpuop.kube.slots import slot
from gpuop.components.base import Component
from gpuop.components.props import DaemonSetProps, ServiceMonitorProps
from gpuop.components.builders import (daemonset, env, host_path, mount, rbac, resources_slot, service,
                                       service_monitor)
from gpuop.components.openshift import prometheus_rule

NAME = "nvidia-node-status-exporter"
PORT = 8000
ROLE_RULES = [
    {"apiGroups": ["security.openshift.io"], "resources": ["securitycontextconstraints"], "verbs": ["use"]},
    {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]},
    {"apiGroups": ["apps"], "resources": ["daemonsets"], "verbs": ["get", "list", "watch"]},
]
CLUSTER_RULES = [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "watch"]}]


class NodeStatusExporterProps(DaemonSetProps):
    image: str = Field(description="gpu-operator (validator) image. Required.")
    service_monitor: ServiceMonitorProps | None = Field(None, description="ServiceMonitor settings. Omitted: none emitted.")
    prometheus_rule: bool = Field(False, description="Emit the OpenShift PrometheusRule. Omitted: false.")


class NodeStatusExporter(Component):
    name = "node-status-exporter"
    values_key = "nodeStatusExporter"
    props_type = NodeStatusExporterProps
    deploy_label = "node-status-exporter"

    @classmethod
    def render(cls, p: NodeStatusExporterProps) -> list[dict]:
        labels = {"app": NAME}
        container = {
            "name": NAME, "image": p.image, "imagePullPolicy": slot("imagePullPolicy"),
            "command": ["nvidia-validator"],
            "env": [env("NVIDIA_VISIBLE_DEVICES", "void"), env("COMPONENT", "metrics"), env("METRICS_PORT", str(PORT)),
                    env("NODE_NAME", field_path="spec.nodeName"),
                    env("OPERATOR_NAMESPACE", field_path="metadata.namespace")],
            "ports": [{"name": "node-status", "containerPort": PORT}],
            "resources": resources_slot("nodeStatusExporter"),
            "securityContext": {"privileged": True, "runAsUser": 0},
            "volumeMounts": [mount("run-nvidia", "/run/nvidia", propagation="HostToContainer"),
                             mount("host-root", "/host", propagation="HostToContainer", read_only=True)],
        }
        pod_spec = {
            "serviceAccountName": NAME,
            "containers": [container],
            "volumes": [host_path("run-nvidia", "/run/nvidia", "Directory"), host_path("host-root", "/")],
        }
        objs = rbac(NAME, p.namespace, ROLE_RULES, CLUSTER_RULES)
        for o in objs:
            if o["kind"] in ("ServiceAccount", "Role", "RoleBinding"):
                o["metadata"]["labels"] = dict(labels)
        objs.append(service(NAME, p.namespace, app=NAME, port_name="node-status", port=PORT,
                            annotations={"prometheus.io/scrape": "true"}))
        if p.service_monitor:
            objs.append(service_monitor(NAME, p.namespace, app=NAME, port_name="node-status", job_label="node-status",
                                        monitor=p.service_monitor))
        if p.prometheus_rule:
            objs.append(prometheus_rule(f"{NAME}-alerts", p.namespace, NAME, "node-status-exporter-rules.yaml"))
        objs.append(daemonset(NAME, p.namespace, app=NAME, labels=labels, deploy=cls.deploy_label,
                              placement=p.placement, annotations={"openshift.io/scc": NAME}, pod_spec=pod_spec))
        return objs
