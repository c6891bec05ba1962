"""DCGM exporter: ServiceAccount/Role/RoleBinding `nvidia-dcgm-exporter`, Service `nvidia-dcgm-exporter`
(port `gpu-metrics` 9400), DaemonSet `nvidia-dcgm-exporter`; with pod labels or pod UIDs on, also
ClusterRole/ClusterRoleBinding `nvidia-dcgm-exporter-read-pods`; with the profile's metrics, ConfigMap
`nvidia-dcgm-exporter-metrics` (key dcgm-metrics.csv); with its ServiceMonitor on, ServiceMonitor
`nvidia-dcgm-exporter`. As the Operator's state-dcgm-exporter (assets/state-dcgm-exporter) after
TransformDCGMExporter and the ServiceMonitor transform (v26.7, vanilla Kubernetes).

Matched from upstream: the Service (`prometheus.io/scrape: "true"`, selector `app`), the exporter's
env (`DCGM_EXPORTER_LISTEN=:9400`, `DCGM_EXPORTER_KUBERNETES=true`, `DCGM_EXPORTER_COLLECTORS`), the
kubelet pod-resources mount (the volume under `kubelet_root_dir`, the container keeps /var/lib/kubelet/
pod-resources), the probes on /health, `automountServiceAccountToken: false` (true, with
the read-pods RBAC, only when pod labels/UIDs need the API), the toolkit-validation init container,
runtimeClassName `nvidia`, `DCGM_REMOTE_HOSTENGINE_INFO=nvidia-dcgm:5555` when the standalone DCGM
host engine runs, and the custom-metrics mount (`metrics-config` at /etc/dcgm-exporter/dcgm-metrics.csv).

Differences from upstream, and why:
- The ServiceMonitor is off unless the profile turns it on. Upstream's Helm default is on, but the
  Operator creates it only when the ServiceMonitor CRD exists; gpuop cannot look at the cluster, and a
  ServiceMonitor without its CRD fails the whole sync. The Service's scrape annotation works either way.
- The custom metrics ConfigMap is generated from a typed list in the profile (field, type, help) and
  has a fixed name, instead of a user-named ConfigMap holding free CSV text.
- OpenShift: PrometheusRule `nvidia-dcgm-exporter` (the asset 1000_prometheus_rule_openshift.yaml: the
  `accelerator_*` recording rules) and the ServiceMonitor on by default (the platform has its CRD); the
  SCC is openshift.py's. The Operator (v26.7 TransformDCGMExporter) adds nothing else OpenShift-specific
  to this DaemonSet.

Service account token: not mounted unless pod labels or pod UIDs are exported, as the asset
(`automountServiceAccountToken: false`) and TransformDCGMExporter (true only when
IsKubernetesPodMetadataEnabled); the exporter reads pods through the API only for those.
"""

from __future__ import annotations

from pydantic import Field

from gpuop.kube.slots import slot
from gpuop.components.base import Component
from gpuop.components.props import ServiceMonitorProps, ValidatedProps
from gpuop.components.builders import (SCC_RULE, daemonset, env, host_path, meta, mount, rbac, resources_slot,
                                       service, service_monitor, validation_init)
from gpuop.components.openshift import prometheus_rule

NAME = "nvidia-dcgm-exporter"
READ_PODS = "nvidia-dcgm-exporter-read-pods"
METRICS_CM = "nvidia-dcgm-exporter-metrics"
METRICS_FILE = "dcgm-metrics.csv"
METRICS_PATH = "/etc/dcgm-exporter/" + METRICS_FILE
DEFAULT_COLLECTORS = "/etc/dcgm-exporter/dcp-metrics-included.csv"
PORT = 9400
LABELS = {"app": NAME}


class DcgmExporterProps(ValidatedProps):
    image: str = Field(description="dcgm-exporter image. Required.")
    remote_hostengine: bool = Field(False, description="Connect to the standalone nvidia-dcgm Service. Omitted: false.")
    metrics: tuple[tuple[str, str, str], ...] = Field((), description="Custom metrics (field, type, help). Omitted: built-in list.")
    pod_labels: bool = Field(False, description="Export pod labels. Omitted: false.")
    pod_uid: bool = Field(False, description="Export pod UIDs. Omitted: false.")
    pod_label_allowlist: tuple[str, ...] = Field((), description="Pod label key regexes. Omitted: all labels.")
    service_monitor: ServiceMonitorProps | None = Field(None, description="ServiceMonitor settings. Omitted: none emitted.")
    prometheus_rule: bool = Field(False, description="Emit the OpenShift PrometheusRule. Omitted: false.")
    probes: bool = Field(True, description=(
        "The exporter's /health liveness / readiness probes, as v26.3's asset on; false: none, as v25.10's "
        "(catalog/data/releases.yaml assets.hostEngineProbes). Omitted: true."))
    pod_resources_init: str | None = Field(None, description=(
        "OpenShift before v26.3: the image of the init container that relabels the kubelet's pod-resources socket "
        "for SELinux (`init-pod-nvidia-node-status-exporter`, its entrypoint in ConfigMap nvidia-dcgm-exporter), as "
        "v25.10's transformDCGMExporterForOpenShift (catalog assets.openshiftPodResourcesInit). Omitted: none."))
    kubelet_root_dir: str = Field("/var/lib/kubelet", description=(
        "The kubelet's root directory: the `pod-gpu-resources` volume is its pod-resources/ (hostPaths."
        "kubeletRootDir, as TransformDCGMExporter). Omitted: /var/lib/kubelet."))


def metrics_csv(metrics) -> str:
    lines = ["# Generated by gpuop from spec.dcgmExporter.metrics.", "# DCGM FIELD, Prometheus metric type, help message"]
    return "\n".join(lines + [f"{f}, {t}, {h}" for f, t, h in metrics]) + "\n"


# v25.10.1 assets/state-dcgm-exporter/0600_configmap_openshift.yaml: the SELinux relabel the init container runs
RELABEL_CM = NAME
RELABEL = ("#!/bin/sh\nchcon -t  container_file_t /var/lib/kubelet/pod-resources\n"
           "chcon -t  container_file_t /var/lib/kubelet/pod-resources/*")


def pod_resources_init(image: str) -> dict:
    """v25.10.1 transformDCGMExporterForOpenShift: the relabel script on the operator's initContainer image,
    privileged, NVIDIA_DISABLE_REQUIRE, the pod-resources socket and the script mounted."""
    return {"name": "init-pod-nvidia-node-status-exporter", "image": image, "imagePullPolicy": slot("imagePullPolicy"),
            "command": ["/bin/entrypoint.sh"], "securityContext": {"privileged": True},
            "env": [env("NVIDIA_DISABLE_REQUIRE", "true")],
            "volumeMounts": [mount("pod-gpu-resources", "/var/lib/kubelet/pod-resources"),
                             mount("init-config", "/bin/entrypoint.sh", read_only=True, sub_path="entrypoint.sh")]}


def _container(p: DcgmExporterProps) -> dict:
    e = [env("DCGM_EXPORTER_LISTEN", f":{PORT}"), env("DCGM_EXPORTER_KUBERNETES", "true"),
         env("DCGM_EXPORTER_COLLECTORS", METRICS_PATH if p.metrics else DEFAULT_COLLECTORS),
         env("NODE_NAME", field_path="spec.nodeName")]
    if p.remote_hostengine:
        e.append(env("DCGM_REMOTE_HOSTENGINE_INFO", "nvidia-dcgm:5555"))
    if p.pod_labels:
        e.append(env("DCGM_EXPORTER_KUBERNETES_ENABLE_POD_LABELS", "true"))
    if p.pod_uid:
        e.append(env("DCGM_EXPORTER_KUBERNETES_ENABLE_POD_UID", "true"))
    if p.pod_label_allowlist:
        e.append(env("DCGM_EXPORTER_KUBERNETES_POD_LABEL_ALLOWLIST_REGEX", ",".join(p.pod_label_allowlist)))
    mounts = [mount("pod-gpu-resources", "/var/lib/kubelet/pod-resources", read_only=True)]
    if p.metrics:
        mounts.append(mount("metrics-config", METRICS_PATH, read_only=True, sub_path=METRICS_FILE))
    probe = {"httpGet": {"port": PORT, "path": "/health"}, "initialDelaySeconds": 45}
    return {
        "name": NAME, "image": p.image, "imagePullPolicy": slot("imagePullPolicy"),
        "env": e, "ports": [{"name": "metrics", "containerPort": PORT}],
        **({"livenessProbe": {**probe, "periodSeconds": 5}, "readinessProbe": probe} if p.probes else {}),
        "resources": resources_slot("dcgmExporter"),
        "securityContext": {"privileged": True},
        "volumeMounts": mounts,
    }


class DcgmExporter(Component):
    name = "dcgm-exporter"
    values_key = "dcgmExporter"
    props_type = DcgmExporterProps
    deploy_label = "dcgm-exporter"

    @classmethod
    def render(cls, p: DcgmExporterProps) -> list[dict]:
        needs_api = p.pod_labels or p.pod_uid
        volumes = [host_path("pod-gpu-resources", f"{p.kubelet_root_dir}/pod-resources"),
                   host_path("run-nvidia", "/run/nvidia")]
        if p.metrics:
            volumes.append({"name": "metrics-config", "configMap": {
                "name": METRICS_CM, "items": [{"key": METRICS_FILE, "path": METRICS_FILE}]}})
        pod_spec = {
            "serviceAccountName": NAME,
            "automountServiceAccountToken": needs_api,
            "runtimeClassName": "nvidia",
            "initContainers": [validation_init("toolkit", p, [
                mount("run-nvidia", "/run/nvidia", propagation="HostToContainer")], wait_for="toolkit")],
            "containers": [_container(p)],
            "volumes": volumes,
        }
        if p.pod_resources_init:
            pod_spec["initContainers"].append(pod_resources_init(p.pod_resources_init))
            volumes.append({"name": "init-config", "configMap": {"name": RELABEL_CM, "defaultMode": 0o700}})
        objs = rbac(NAME, p.namespace, [SCC_RULE, {"apiGroups": [""], "resources": ["configmaps"],
                                                   "verbs": ["get", "list"]}])
        for o in objs:
            o["metadata"]["labels"] = dict(LABELS)
        if needs_api:
            subject = [{"kind": "ServiceAccount", "name": NAME, "namespace": p.namespace}]
            objs += [
                {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": meta(READ_PODS, labels=LABELS),
                 "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]}]},
                {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                 "metadata": meta(READ_PODS, labels=LABELS), "subjects": subject,
                 "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": READ_PODS}},
            ]
        if p.pod_resources_init:
            objs.append({"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta(RELABEL_CM, p.namespace, LABELS),
                         "data": {"entrypoint.sh": RELABEL}})
        if p.metrics:
            objs.append({"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta(METRICS_CM, p.namespace, LABELS),
                         "data": {METRICS_FILE: metrics_csv(p.metrics)}})
        objs.append(service(NAME, p.namespace, app=NAME, port_name="gpu-metrics", port=PORT,
                            annotations={"prometheus.io/scrape": "true"}))
        if p.service_monitor:
            objs.append(service_monitor(NAME, p.namespace, app=NAME, port_name="gpu-metrics", job_label="app",
                                        monitor=p.service_monitor))
        if p.prometheus_rule:
            objs.append(prometheus_rule(NAME, p.namespace, NAME, "dcgm-exporter-rules.yaml"))
        objs.append(daemonset(NAME, p.namespace, app=NAME, labels=LABELS, deploy=cls.deploy_label,
                              placement=p.placement, annotations={"openshift.io/scc": NAME}, pod_spec=pod_spec))
        return objs
