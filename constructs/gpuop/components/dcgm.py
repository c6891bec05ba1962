"""Standalone DCGM host engine: ServiceAccount/Role/RoleBinding `nvidia-dcgm`, Service `nvidia-dcgm`
(port `dcgm` 5555, internalTrafficPolicy Local), DaemonSet `nvidia-dcgm`; as the Operator's state-dcgm
(assets/state-dcgm) after TransformDCGM (v26.7).

Off by default, as the Operator's Helm chart (`dcgm.enabled: false`): the DCGM exporter then runs its
embedded nv-hostengine. When on, the exporter is pointed at this Service
(`DCGM_REMOTE_HOSTENGINE_INFO=nvidia-dcgm:5555`, set in dcgm_exporter.py) and, because the Service
routes only to the local node's pod, each exporter reads its own node's GPUs.

Service account token: not mounted (`automountServiceAccountToken: false`): nv-hostengine never calls
the Kubernetes API, and the toolkit-validation init container only waits for a file.

Differences from upstream: the token (the asset leaves it mounted). On OpenShift the SCC is
openshift.py's (SCC `nvidia-dcgm`, upstream's state-dcgm/0310_scc.openshift.yaml name).
"""

from __future__ import annotations

from pydantic import Field

from gpuop.kube.slots import slot
from gpuop.components.base import Component
from gpuop.components.props import ValidatedProps
from gpuop.components.builders import (SCC_RULE, daemonset, host_path, mount, rbac, resources_slot, service,
                                       validation_init)

NAME = "nvidia-dcgm"
PORT = 5555


class DcgmProps(ValidatedProps):
    image: str = Field(description="DCGM image. Required.")
    probes: bool = Field(True, description=(
        "The host engine's tcpSocket liveness / readiness probes, as v26.3's asset on; false: none, as v25.10's "
        "(catalog/data/releases.yaml assets.hostEngineProbes). Omitted: true."))


class Dcgm(Component):
    name = "dcgm"
    values_key = "dcgm"
    props_type = DcgmProps
    deploy_label = "dcgm"

    @classmethod
    def render(cls, p: DcgmProps) -> list[dict]:
        probe = {"tcpSocket": {"port": PORT}, "initialDelaySeconds": 15}
        container = {
            "name": "nvidia-dcgm-ctr", "image": p.image, "imagePullPolicy": slot("imagePullPolicy"),
            "ports": [{"name": "dcgm", "containerPort": PORT}],
            **({"livenessProbe": probe, "readinessProbe": probe} if p.probes else {}),
            "resources": resources_slot("dcgm"),
            "securityContext": {"privileged": True},
        }
        pod_spec = {
            "serviceAccountName": NAME,
            "automountServiceAccountToken": False,     # nv-hostengine never calls the API
            "runtimeClassName": "nvidia",
            "initContainers": [validation_init("toolkit", p, [
                mount("run-nvidia", "/run/nvidia", propagation="HostToContainer")], wait_for="toolkit")],
            "containers": [container],
            "volumes": [host_path("run-nvidia", "/run/nvidia", "Directory")],
        }
        svc = service(NAME, p.namespace, app=NAME, port_name="dcgm", port=PORT,
                      extra={"internalTrafficPolicy": "Local", "type": "ClusterIP"})
        del svc["spec"]["ports"][0]["targetPort"]          # the asset leaves it to default to the port
        return rbac(NAME, p.namespace, [SCC_RULE]) + [
            svc,
            daemonset(NAME, p.namespace, app=NAME, labels={"app": NAME}, deploy=cls.deploy_label,
                      placement=p.placement, annotations={"openshift.io/scc": "hostmount-anyuid"}, pod_spec=pod_spec),
        ]
