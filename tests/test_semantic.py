"""The semantic check of a compiled stack (gpuop.verify.semantic).

Unit part: each test starts from a valid GPU stack, breaks one rule once and asserts the exact finding.
Pipeline part: `gpuop validate DIST` finds a defect put back by hand into a compiled dist/; `gpuop synth`
refuses a stack that breaks a rule (exit 2, nothing written); the example profiles and a sample of the
bench fleet pass.
"""

from __future__ import annotations

import copy
import importlib.util
import inspect
import json
import re
import shutil
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO, run_gpuop, run_main
from gpuop.verify import semantic
from gpuop.verify.semantic import (
    CONTEXT_RULES,
    EXTERNAL,
    RULES,
    Finding,
    QuantityError,
    check_objects,
    manifest_issues,
    parse_quantity,
)

NS = "gpu-operator"
DS = "nvidia-device-plugin"
SPEC = "spec.template.spec"
CTR = f"{SPEC}.containers[0]"


def _fixture() -> list[dict[str, Any]]:
    labels = {"app.kubernetes.io/name": DS}
    objs: list[dict[str, Any]] = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}},
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": DS, "namespace": NS}},
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "plugin-config", "namespace": NS},
            "data": {"config.yaml": "version: v1\n"},
        },
        {"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass", "metadata": {"name": "nvidia"}, "handler": "nvidia"},
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": DS},
            "rules": [
                {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "watch"]},
                {
                    "apiGroups": ["security.openshift.io"],
                    "resources": ["securitycontextconstraints"],
                    "resourceNames": ["nvidia-device-plugin"],
                    "verbs": ["use"],
                },
            ],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": DS},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": DS},
            "subjects": [{"kind": "ServiceAccount", "name": DS, "namespace": NS}],
        },
        {
            "apiVersion": "security.openshift.io/v1",
            "kind": "SecurityContextConstraints",
            "metadata": {"name": "nvidia-device-plugin"},
            "allowPrivilegedContainer": True,
            "users": [f"system:serviceaccount:{NS}:{DS}"],
        },
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "device-plugin-metrics", "namespace": NS, "labels": dict(labels)},
            "spec": {
                "selector": dict(labels),
                "ports": [{"name": "metrics", "port": 9400, "targetPort": "metrics", "protocol": "TCP"}],
            },
        },
        {
            "apiVersion": "apps/v1",
            "kind": "DaemonSet",
            "metadata": {
                "name": DS,
                "namespace": NS,
                "labels": dict(labels),
                "annotations": {"example.com/owner": "gpu"},
            },
            "spec": {
                "selector": {"matchLabels": dict(labels)},
                "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "10%"}},
                "template": {
                    "metadata": {"labels": dict(labels)},
                    "spec": {
                        "serviceAccountName": DS,
                        "priorityClassName": "system-node-critical",
                        "runtimeClassName": "nvidia",
                        "hostPID": True,
                        "nodeSelector": {"nvidia.com/gpu.present": "true"},
                        "affinity": {
                            "nodeAffinity": {
                                "requiredDuringSchedulingIgnoredDuringExecution": {
                                    "nodeSelectorTerms": [
                                        {
                                            "matchExpressions": [
                                                {
                                                    "key": "feature.node.kubernetes.io/pci-10de.present",
                                                    "operator": "In",
                                                    "values": ["true"],
                                                },
                                                {"key": "nvidia.com/gpu.count", "operator": "Gt", "values": ["0"]},
                                            ]
                                        }
                                    ]
                                },
                                "preferredDuringSchedulingIgnoredDuringExecution": [
                                    {
                                        "weight": 50,
                                        "preference": {
                                            "matchExpressions": [
                                                {"key": "node-role.kubernetes.io/worker", "operator": "Exists"}
                                            ]
                                        },
                                    }
                                ],
                            }
                        },
                        "tolerations": [
                            {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
                            {
                                "key": "node.kubernetes.io/unreachable",
                                "operator": "Exists",
                                "effect": "NoExecute",
                                "tolerationSeconds": 300,
                            },
                            {"key": "dedicated", "value": "gpu", "effect": "PreferNoSchedule"},
                        ],
                        "imagePullSecrets": [{"name": "user-registry"}],
                        "initContainers": [
                            {
                                "name": "toolkit-validation",
                                "image": "nvcr.io/nvidia/validator:v1",
                                "command": ["sh", "-c", "true"],
                            }
                        ],
                        "containers": [
                            {
                                "name": "device-plugin",
                                "image": "nvcr.io/nvidia/k8s-device-plugin:v0.15.0",
                                "securityContext": {"privileged": True},
                                "env": [
                                    {"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"},
                                    {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
                                    {
                                        "name": "CONFIG_FILE",
                                        "valueFrom": {
                                            "configMapKeyRef": {"name": "plugin-config", "key": "config.yaml"}
                                        },
                                    },
                                ],
                                "envFrom": [{"configMapRef": {"name": "plugin-config"}}],
                                "ports": [{"name": "metrics", "containerPort": 9400, "protocol": "TCP"}],
                                "resources": {
                                    "requests": {"cpu": "100m", "memory": "64Mi"},
                                    "limits": {"cpu": "1", "memory": "256Mi"},
                                },
                                "livenessProbe": {
                                    "httpGet": {"path": "/health", "port": "metrics"},
                                    "periodSeconds": 10,
                                },
                                "readinessProbe": {"tcpSocket": {"port": 9400}, "successThreshold": 2},
                                "startupProbe": {"exec": {"command": ["nvidia-smi"]}, "failureThreshold": 30},
                                "volumeMounts": [
                                    {"name": "device-plugin", "mountPath": "/var/lib/kubelet/device-plugins"},
                                    {"name": "config", "mountPath": "/config", "readOnly": True},
                                    {
                                        "name": "run-nvidia",
                                        "mountPath": "/run/nvidia",
                                        "mountPropagation": "Bidirectional",
                                    },
                                    {"name": "host-root", "mountPath": "/host/etc", "subPath": "etc", "readOnly": True},
                                ],
                            }
                        ],
                        "volumes": [
                            {"name": "device-plugin", "hostPath": {"path": "/var/lib/kubelet/device-plugins"}},
                            {
                                "name": "config",
                                "configMap": {
                                    "name": "plugin-config",
                                    "items": [{"key": "config.yaml", "path": "config.yaml"}],
                                },
                            },
                            {"name": "run-nvidia", "hostPath": {"path": "/run/nvidia", "type": "DirectoryOrCreate"}},
                            {"name": "host-root", "hostPath": {"path": "/"}},
                            {"name": "optional-secret", "secret": {"secretName": "maybe-later", "optional": True}},
                        ],
                    },
                },
            },
        },
    ]
    return objs


@pytest.fixture
def objs() -> list[dict[str, Any]]:
    return _fixture()


def by_kind(objs: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    return next(o for o in objs if o["kind"] == kind)


def ds(objs: list[dict[str, Any]]) -> dict[str, Any]:
    return by_kind(objs, "DaemonSet")


def pod(objs: list[dict[str, Any]]) -> dict[str, Any]:
    return ds(objs)["spec"]["template"]["spec"]


def ctr(objs: list[dict[str, Any]]) -> dict[str, Any]:
    return pod(objs)["containers"][0]


def ds_finding(path: str, message: str) -> Finding:
    return Finding("DaemonSet", DS, NS, path, message)


def run(objs: list[dict[str, Any]], external: dict[str, set[str]] | None = None) -> list[Finding]:
    """The rules over `objs`, with the EXTERNAL table plus `external`."""
    return check_objects(objs, external=external)


# ---------------------------------------------------------------------------- baseline


def test_fixture_produces_no_findings(objs: list[dict[str, Any]]) -> None:
    assert run(objs) == []


def test_rules_are_named_functions_with_upstream_comment() -> None:
    for rule in RULES:
        assert rule.__name__.startswith("check_")
        source = Path(inspect.getsourcefile(rule)).read_text()
        header = source.split(f"def {rule.__name__}(")[0].rstrip().splitlines()[-1]
        assert header.startswith("#"), rule.__name__


# ---------------------------------------------------------------------------- 1. hostPID


def test_refuses_host_pid_with_share_process_namespace(objs: list[dict[str, Any]]) -> None:
    pod(objs)["shareProcessNamespace"] = True
    assert run(objs) == [
        ds_finding(
            f"{SPEC}.shareProcessNamespace",
            "Invalid value: true: ShareProcessNamespace and HostPID cannot both be enabled",
        )
    ]


# ---------------------------------------------------------------------------- 2. names and ports


def test_refuses_init_container_reusing_a_container_name(objs: list[dict[str, Any]]) -> None:
    pod(objs)["initContainers"][0]["name"] = "device-plugin"
    assert run(objs) == [ds_finding(f"{SPEC}.initContainers[0].name", 'Duplicate value: "device-plugin"')]


def test_refuses_container_name_that_is_not_a_dns_label(objs: list[dict[str, Any]]) -> None:
    ctr(objs)["name"] = "Device_Plugin"
    assert run(objs) == [
        ds_finding(
            f"{CTR}.name",
            'Invalid value: "Device_Plugin": a lowercase RFC 1123 label must consist of lower case '
            "alphanumeric characters or '-', and must start and end with an alphanumeric character "
            "(e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')",
        )
    ]


def test_refuses_duplicate_volume_name(objs: list[dict[str, Any]]) -> None:
    pod(objs)["volumes"].append({"name": "config", "emptyDir": {}})
    assert run(objs) == [ds_finding(f"{SPEC}.volumes[5].name", 'Duplicate value: "config"')]


def test_refuses_volume_with_two_sources(objs: list[dict[str, Any]]) -> None:
    pod(objs)["volumes"][0]["emptyDir"] = {}
    assert run(objs) == [
        ds_finding(f"{SPEC}.volumes[0].hostPath", "Forbidden: may not specify more than 1 volume type"),
        # ValidateVolumes leaves an invalid volume out of the names mounts may use
        ds_finding(f"{CTR}.volumeMounts[0].name", 'Not found: "device-plugin"'),
    ]


def test_refuses_port_name_that_is_not_an_iana_service_name(objs: list[dict[str, Any]]) -> None:
    ctr(objs)["ports"][0]["name"] = "dcgm-metrics-port"  # 17 characters
    ctr(objs)["livenessProbe"]["httpGet"]["port"] = 9400
    pod_port = f"{CTR}.ports[0].name"
    assert run(objs)[0] == ds_finding(
        pod_port, 'Invalid value: "dcgm-metrics-port": must be no more than 15 characters'
    )


def test_refuses_duplicate_port_name_in_one_container(objs: list[dict[str, Any]]) -> None:
    ctr(objs)["ports"].append({"name": "metrics", "containerPort": 9401})
    assert run(objs) == [ds_finding(f"{CTR}.ports[1].name", 'Duplicate value: "metrics"')]


def test_refuses_container_port_out_of_range(objs: list[dict[str, Any]]) -> None:
    ctr(objs)["ports"][0]["containerPort"] = 70000
    assert run(objs) == [
        ds_finding(f"{CTR}.ports[0].containerPort", "Invalid value: 70000: must be between 1 and 65535, inclusive")
    ]


def test_refuses_host_port_differing_from_container_port_under_host_network(objs: list[dict[str, Any]]) -> None:
    pod(objs)["hostNetwork"] = True
    ctr(objs)["ports"][0]["hostPort"] = 9500
    assert run(objs) == [
        ds_finding(
            f"{CTR}.ports[0].hostPort", "Invalid value: 9500: must match `containerPort` when `hostNetwork` is true"
        )
    ]


def test_refuses_service_port_out_of_range(objs: list[dict[str, Any]]) -> None:
    by_kind(objs, "Service")["spec"]["ports"][0]["port"] = 0
    assert run(objs) == [
        Finding(
            "Service",
            "device-plugin-metrics",
            NS,
            "spec.ports[0].port",
            "Invalid value: 0: must be between 1 and 65535, inclusive",
        )
    ]


def test_refuses_service_target_port_name_with_uppercase(objs: list[dict[str, Any]]) -> None:
    by_kind(objs, "Service")["spec"]["ports"][0]["targetPort"] = "Metrics"
    assert run(objs) == [
        Finding(
            "Service",
            "device-plugin-metrics",
            NS,
            "spec.ports[0].targetPort",
            'Invalid value: "Metrics": must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)',
        )
    ]


def test_refuses_node_port_outside_the_default_range(objs: list[dict[str, Any]]) -> None:
    svc = by_kind(objs, "Service")
    svc["spec"]["type"] = "NodePort"
    svc["spec"]["ports"][0]["nodePort"] = 8080
    assert run(objs) == [
        Finding(
            "Service",
            "device-plugin-metrics",
            NS,
            "spec.ports[0].nodePort",
            "Invalid value: 8080: provided port is not in the valid range. The range of valid ports is 30000-32767",
        )
    ]


def test_refuses_node_port_on_a_cluster_ip_service(objs: list[dict[str, Any]]) -> None:
    by_kind(objs, "Service")["spec"]["ports"][0]["nodePort"] = 30080
    assert run(objs) == [
        Finding(
            "Service",
            "device-plugin-metrics",
            NS,
            "spec.ports[0].nodePort",
            "Forbidden: may not be used when `type` is 'ClusterIP'",
        )
    ]


def test_requires_service_port_names_when_there_are_several(objs: list[dict[str, Any]]) -> None:
    by_kind(objs, "Service")["spec"]["ports"].append({"port": 9401})
    assert run(objs) == [Finding("Service", "device-plugin-metrics", NS, "spec.ports[1].name", "Required value")]


# ---------------------------------------------------------------------------- 3. volume mounts


def test_refuses_mount_of_a_volume_the_pod_does_not_have(objs: list[dict[str, Any]]) -> None:
    ctr(objs)["volumeMounts"][1]["name"] = "configuration"
    assert run(objs) == [ds_finding(f"{CTR}.volumeMounts[1].name", 'Not found: "configuration"')]


def test_refuses_absolute_sub_path(objs: list[dict[str, Any]]) -> None:
    ctr(objs)["volumeMounts"][3]["subPath"] = "/etc"
    assert run(objs) == [ds_finding(f"{CTR}.volumeMounts[3].subPath", 'Invalid value: "/etc": must be a relative path')]


def test_refuses_sub_path_with_backsteps(objs: list[dict[str, Any]]) -> None:
    ctr(objs)["volumeMounts"][3]["subPath"] = "etc/../root"
    assert run(objs) == [
        ds_finding(f"{CTR}.volumeMounts[3].subPath", "Invalid value: \"etc/../root\": must not contain '..'")
    ]


def test_refuses_two_mounts_on_the_same_path(objs: list[dict[str, Any]]) -> None:
    ctr(objs)["volumeMounts"][1]["mountPath"] = "/run/nvidia"
    assert run(objs) == [ds_finding(f"{CTR}.volumeMounts[2].mountPath", 'Invalid value: "/run/nvidia": must be unique')]


def test_refuses_bidirectional_propagation_in_unprivileged_container(objs: list[dict[str, Any]]) -> None:
    del ctr(objs)["securityContext"]
    assert run(objs) == [
        ds_finding(
            f"{CTR}.volumeMounts[2].mountPropagation",
            "Forbidden: Bidirectional mount propagation is available only to privileged containers",
        )
    ]


def test_accepts_relative_mount_path_because_the_kubelet_makes_it_absolute(objs: list[dict[str, Any]]) -> None:
    ctr(objs)["volumeMounts"][1]["mountPath"] = "config"
    assert run(objs) == []


# ---------------------------------------------------------------------------- 4. probes


def test_refuses_probe_with_two_handlers(objs: list[dict[str, Any]]) -> None:
    ctr(objs)["livenessProbe"]["tcpSocket"] = {"port": 9400}
    assert run(objs) == [
        ds_finding(f"{CTR}.livenessProbe.tcpSocket", "Forbidden: may not specify more than 1 handler type")
    ]


def test_refuses_probe_without_handler(objs: list[dict[str, Any]]) -> None:
    ctr(objs)["startupProbe"] = {"periodSeconds": 5}
    assert run(objs) == [ds_finding(f"{CTR}.startupProbe", "Required value: must specify a handler type")]


def test_refuses_liveness_success_threshold_other_than_one(objs: list[dict[str, Any]]) -> None:
    ctr(objs)["livenessProbe"]["successThreshold"] = 3
    assert run(objs) == [ds_finding(f"{CTR}.livenessProbe.successThreshold", "Invalid value: 3: must be 1")]


def test_refuses_negative_probe_timeout(objs: list[dict[str, Any]]) -> None:
    ctr(objs)["readinessProbe"]["timeoutSeconds"] = -1
    assert run(objs) == [
        ds_finding(f"{CTR}.readinessProbe.timeoutSeconds", "Invalid value: -1: must be greater than or equal to 0")
    ]


def test_refuses_probe_on_a_port_name_the_container_does_not_declare(objs: list[dict[str, Any]]) -> None:
    ctr(objs)["livenessProbe"]["httpGet"]["port"] = "health"
    assert run(objs) == [
        ds_finding(
            f"{CTR}.livenessProbe.httpGet.port",
            'Not found: "health": no container port with this name (kubelet: couldn\'t find port)',
        )
    ]


def test_refuses_probe_on_plain_init_container(objs: list[dict[str, Any]]) -> None:
    pod(objs)["initContainers"][0]["readinessProbe"] = {"exec": {"command": ["true"]}}
    assert run(objs) == [
        ds_finding(
            f"{SPEC}.initContainers[0].readinessProbe",
            "Forbidden: may not be set for init containers without restartPolicy=Always",
        )
    ]


# ---------------------------------------------------------------------------- 5. env


def test_accepts_env_names_of_the_relaxed_grammar(objs: list[dict[str, Any]]) -> None:
    """Since 1.33 the API server accepts any printable ASCII but '=' (RelaxedEnvironmentVariableValidation)."""
    ctr(objs)["env"][0]["name"] = "1GPU weird:name"
    assert run(objs) == []


@pytest.mark.parametrize("name", ["A=B", "GPU\n", "GPU\t1", "é"])
def test_refuses_env_name_outside_printable_ascii_or_with_equals(objs: list[dict[str, Any]], name: str) -> None:
    ctr(objs)["env"][0]["name"] = name
    shown = json.dumps(name, ensure_ascii=False)
    assert run(objs) == [
        ds_finding(
            f"{CTR}.env[0].name",
            f"Invalid value: {shown}: a valid environment variable name must consist only of printable ASCII "
            "characters other than '='",
        )
    ]


def test_refuses_env_with_value_and_value_from(objs: list[dict[str, Any]]) -> None:
    ctr(objs)["env"][1]["value"] = "node-1"
    assert run(objs) == [
        ds_finding(f"{CTR}.env[1].valueFrom", 'Invalid value: "": may not be specified when `value` is not empty')
    ]


def test_refuses_value_from_with_two_sources(objs: list[dict[str, Any]]) -> None:
    ctr(objs)["env"][1]["valueFrom"]["secretKeyRef"] = {"name": "creds", "key": "token", "optional": True}
    assert run(objs) == [
        ds_finding(f"{CTR}.env[1].valueFrom", 'Invalid value: "": may not have more than one field specified at a time')
    ]


def test_refuses_empty_value_from(objs: list[dict[str, Any]]) -> None:
    ctr(objs)["env"][1]["valueFrom"] = {}
    assert run(objs) == [
        ds_finding(
            f"{CTR}.env[1].valueFrom",
            'Invalid value: "": must specify one of: '
            "`fieldRef`, `resourceFieldRef`, `configMapKeyRef` or `secretKeyRef`",
        )
    ]


def test_accepts_duplicate_env_names_because_upstream_only_warns(objs: list[dict[str, Any]]) -> None:
    ctr(objs)["env"].append({"name": "NVIDIA_VISIBLE_DEVICES", "value": "none"})
    assert run(objs) == []


# ---------------------------------------------------------------------------- 6. resources


def test_refuses_malformed_quantity(objs: list[dict[str, Any]]) -> None:
    ctr(objs)["resources"]["limits"]["memory"] = "256MB"
    assert run(objs) == [
        ds_finding(
            f"{CTR}.resources.limits[memory]",
            'Invalid value: "256MB": quantities must match the regular expression '
            "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'",
        )
    ]


def test_refuses_unknown_quantity_suffix(objs: list[dict[str, Any]]) -> None:
    ctr(objs)["resources"]["limits"]["memory"] = "256K"
    assert run(objs) == [
        ds_finding(f"{CTR}.resources.limits[memory]", 'Invalid value: "256K": unable to parse quantity\'s suffix')
    ]


def test_refuses_request_above_limit(objs: list[dict[str, Any]]) -> None:
    ctr(objs)["resources"]["requests"]["memory"] = "0.5Gi"
    assert run(objs) == [
        ds_finding(
            f"{CTR}.resources.requests",   # upstream reports the comparison on the map
            'Invalid value: "0.5Gi": must be less than or equal to memory limit of 256Mi',
        )
    ]


def test_refuses_gpu_request_different_from_limit(objs: list[dict[str, Any]]) -> None:
    ctr(objs)["resources"]["requests"]["nvidia.com/gpu"] = "1"
    ctr(objs)["resources"]["limits"]["nvidia.com/gpu"] = "2"
    assert run(objs) == [
        ds_finding(
            f"{CTR}.resources.requests",
            'Invalid value: "1": must be equal to nvidia.com/gpu limit of 2',
        )
    ]


def test_refuses_gpu_request_without_limit(objs: list[dict[str, Any]]) -> None:
    ctr(objs)["resources"]["requests"]["nvidia.com/gpu"] = 1
    assert run(objs) == [
        ds_finding(
            f"{CTR}.resources.limits",
            "Required value: Limit must be set for non overcommitable resources",
        )
    ]


def test_refuses_fractional_gpu(objs: list[dict[str, Any]]) -> None:
    ctr(objs)["resources"]["limits"]["nvidia.com/gpu"] = "500m"
    assert run(objs) == [
        ds_finding(f"{CTR}.resources.limits[nvidia.com/gpu]", "Invalid value: 500m: must be an integer")
    ] + ([] if "nvidia.com/gpu" in ctr(objs)["resources"].get("requests", {}) else [   # defaulted request
        ds_finding(f"{CTR}.resources.requests[nvidia.com/gpu]", "Invalid value: 500m: must be an integer")])


def test_refuses_unqualified_non_standard_resource_name(objs: list[dict[str, Any]]) -> None:
    ctr(objs)["resources"]["limits"]["gpu"] = "1"
    assert run(objs) == [    # the limit and, by v1 defaulting, the request it implies
        ds_finding(f"{CTR}.resources.{section}[gpu]", f'Invalid value: "gpu": {msg}')
        for section in ("limits", "requests")
        for msg in ("must be a standard resource type or fully qualified", "must be a standard resource for containers")
    ]


# ---------------------------------------------------------------------------- 7. tolerations


def test_refuses_exists_toleration_with_a_value(objs: list[dict[str, Any]]) -> None:
    pod(objs)["tolerations"][0]["value"] = "true"
    assert run(objs) == [
        ds_finding(
            f"{SPEC}.tolerations[0].operator",
            "Invalid value: \"true\": value must be empty when `operator` is 'Exists'",
        )
    ]


def test_refuses_unknown_toleration_operator(objs: list[dict[str, Any]]) -> None:
    pod(objs)["tolerations"][0]["operator"] = "Exist"
    assert run(objs) == [
        ds_finding(f"{SPEC}.tolerations[0].operator", 'Unsupported value: "Exist": supported values: "Equal", "Exists"')
    ]


def test_refuses_unknown_toleration_effect(objs: list[dict[str, Any]]) -> None:
    pod(objs)["tolerations"][0]["effect"] = "NoScheduleNoAdmit"
    assert run(objs) == [
        ds_finding(
            f"{SPEC}.tolerations[0].effect",
            'Unsupported value: "NoScheduleNoAdmit": supported values: "NoSchedule", "PreferNoSchedule", "NoExecute"',
        )
    ]


def test_refuses_toleration_seconds_without_no_execute(objs: list[dict[str, Any]]) -> None:
    pod(objs)["tolerations"][0]["tolerationSeconds"] = 60
    assert run(objs) == [
        ds_finding(
            f"{SPEC}.tolerations[0].effect",
            "Invalid value: \"NoSchedule\": effect must be 'NoExecute' when `tolerationSeconds` is set",
        )
    ]


def test_refuses_empty_toleration_key_with_equal_operator(objs: list[dict[str, Any]]) -> None:
    pod(objs)["tolerations"][2]["key"] = ""
    assert run(objs) == [
        ds_finding(
            f"{SPEC}.tolerations[2].operator",
            'Invalid value: "": operator must be Exists when `key` is empty, '
            'which means "match all values and all keys"',
        )
    ]


def test_refuses_toleration_key_that_is_not_a_qualified_name(objs: list[dict[str, Any]]) -> None:
    pod(objs)["tolerations"][0]["key"] = "nvidia.com/gpu/present"
    assert run(objs)[0].path == f"{SPEC}.tolerations[0].key"
    assert run(objs)[0].message.startswith('Invalid value: "nvidia.com/gpu/present": a valid label key must consist')


# ---------------------------------------------------------------------------- 8. DaemonSet


def test_refuses_selector_that_does_not_match_template_labels(objs: list[dict[str, Any]]) -> None:
    ds(objs)["spec"]["selector"]["matchLabels"] = {"app": "device-plugin"}
    assert run(objs) == [
        ds_finding(
            "spec.template.metadata.labels",
            'Invalid value: map[string]string{"app.kubernetes.io/name":"nvidia-device-plugin"}: '
            "`selector` does not match template `labels`",
        )
    ]


def test_refuses_empty_selector(objs: list[dict[str, Any]]) -> None:
    ds(objs)["spec"]["selector"] = {}
    assert run(objs) == [ds_finding("spec.selector", "Invalid value: {}: empty selector is invalid for daemonset")]


def test_refuses_max_surge_next_to_defaulted_max_unavailable(objs: list[dict[str, Any]]) -> None:
    ds(objs)["spec"]["updateStrategy"]["rollingUpdate"] = {"maxSurge": 1}
    assert run(objs) == [
        ds_finding(
            "spec.updateStrategy.rollingUpdate.maxSurge",
            "Invalid value: 1: may not be set when maxUnavailable is non-zero",
        )
    ]


def test_refuses_max_unavailable_and_max_surge_both_zero(objs: list[dict[str, Any]]) -> None:
    ds(objs)["spec"]["updateStrategy"]["rollingUpdate"] = {"maxUnavailable": "0%"}
    assert run(objs) == [
        ds_finding("spec.updateStrategy.rollingUpdate.maxUnavailable", "Required value: cannot be 0 when maxSurge is 0")
    ]


def test_refuses_percentage_above_100(objs: list[dict[str, Any]]) -> None:
    ds(objs)["spec"]["updateStrategy"]["rollingUpdate"]["maxUnavailable"] = "150%"
    assert run(objs) == [
        ds_finding(
            "spec.updateStrategy.rollingUpdate.maxUnavailable", "Invalid value: 150%: must not be greater than 100%"
        )
    ]


def test_refuses_malformed_percentage(objs: list[dict[str, Any]]) -> None:
    ds(objs)["spec"]["updateStrategy"]["rollingUpdate"]["maxUnavailable"] = "10 %"
    assert run(objs) == [
        ds_finding(
            "spec.updateStrategy.rollingUpdate.maxUnavailable",
            "Invalid value: \"10 %\": a valid percent string must be a numeric string followed by an ending '%' "
            "(e.g. '1%',  or '93%', regex used for validation is '[0-9]+%')",
        )
    ]


def test_refuses_unknown_update_strategy_type(objs: list[dict[str, Any]]) -> None:
    ds(objs)["spec"]["updateStrategy"]["type"] = "Recreate"
    assert run(objs) == [
        ds_finding(
            "spec.updateStrategy.type", 'Unsupported value: "Recreate": supported values: "RollingUpdate", "OnDelete"'
        )
    ]


def test_reports_rolling_update_settings_under_on_delete(objs: list[dict[str, Any]]) -> None:
    ds(objs)["spec"]["updateStrategy"]["type"] = "OnDelete"
    assert run(objs) == [
        ds_finding(
            "spec.updateStrategy.rollingUpdate",
            "Invalid value: \"\": only allowed for updateStrategy 'RollingUpdate'",
        )
    ]


def test_refuses_daemonset_restart_policy_other_than_always(objs: list[dict[str, Any]]) -> None:
    pod(objs)["restartPolicy"] = "OnFailure"
    assert run(objs) == [
        ds_finding(f"{SPEC}.restartPolicy", 'Unsupported value: "OnFailure": supported values: "Always"')
    ]


# ---------------------------------------------------------------------------- 9. priorityClassName


def test_refuses_unknown_priority_class(objs: list[dict[str, Any]]) -> None:
    pod(objs)["priorityClassName"] = "gpu-critical"
    assert run(objs) == [
        ds_finding(f"{SPEC}.priorityClassName", "no PriorityClass with name gpu-critical was found")
    ]


def test_accepts_priority_class_from_output_or_external(objs: list[dict[str, Any]]) -> None:
    pod(objs)["priorityClassName"] = "gpu-critical"
    assert run(objs, {"PriorityClass": {"gpu-critical"}}) == []
    objs.append(
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": "gpu-critical"},
            "value": 1000,
        }
    )
    assert run(objs) == []


def test_refuses_priority_class_name_that_is_not_a_subdomain(objs: list[dict[str, Any]]) -> None:
    pod(objs)["priorityClassName"] = "GPU"
    [finding] = run(objs)
    assert finding.path == f"{SPEC}.priorityClassName"
    assert finding.message.startswith('Invalid value: "GPU": a lowercase RFC 1123 subdomain')


# ---------------------------------------------------------------------------- 10. Service selector


def test_reports_service_selector_matching_no_pod_template(objs: list[dict[str, Any]]) -> None:
    by_kind(objs, "Service")["spec"]["selector"] = {"app": "dcgm-exporter"}
    assert run(objs) == [
        Finding(
            "Service",
            "device-plugin-metrics",
            NS,
            "spec.selector",
            'selector {"app": "dcgm-exporter"} matches no pod template in namespace "gpu-operator"',
        )
    ]


# ---------------------------------------------------------------------------- 11. references


def test_refuses_pod_service_account_missing_from_output(objs: list[dict[str, Any]]) -> None:
    pod(objs)["serviceAccountName"] = "gpu-operator"
    assert run(objs) == [
        ds_finding(
            f"{SPEC}.serviceAccountName",
            "service account gpu-operator/gpu-operator was not found, retry after the service account is created",
        )
    ]


def test_accepts_service_account_listed_as_external(objs: list[dict[str, Any]]) -> None:
    pod(objs)["serviceAccountName"] = "gpu-operator"
    assert run(objs, {"ServiceAccount": {"gpu-operator/gpu-operator"}}) == []


def test_reports_config_map_volume_missing_from_output(objs: list[dict[str, Any]]) -> None:
    pod(objs)["volumes"][1]["configMap"]["name"] = "plugin-cfg"
    assert run(objs) == [ds_finding(f"{SPEC}.volumes[1].configMap.name", 'configmaps "plugin-cfg" not found')]


def test_accepts_optional_config_map_missing_from_output(objs: list[dict[str, Any]]) -> None:
    ctr(objs)["envFrom"] = [{"configMapRef": {"name": "extra-env", "optional": True}}]
    assert run(objs) == []


def test_reports_config_map_key_ref_to_absent_key(objs: list[dict[str, Any]]) -> None:
    ctr(objs)["env"][2]["valueFrom"]["configMapKeyRef"]["key"] = "config.yml"
    assert run(objs) == [
        ds_finding(f"{CTR}.env[2].valueFrom.configMapKeyRef.name", 'configmaps "plugin-config" has no key "config.yml"')
    ]


def test_reports_secret_env_from_missing_but_ignores_image_pull_secrets(objs: list[dict[str, Any]]) -> None:
    ctr(objs)["envFrom"].append({"secretRef": {"name": "ngc-api-key"}})
    assert run(objs) == [ds_finding(f"{CTR}.envFrom[1].secretRef.name", 'secrets "ngc-api-key" not found')]


def test_refuses_runtime_class_missing_from_output(objs: list[dict[str, Any]]) -> None:
    pod(objs)["runtimeClassName"] = "nvidia-cdi"
    assert run(objs) == [ds_finding(f"{SPEC}.runtimeClassName", 'pod rejected: RuntimeClass "nvidia-cdi" not found')]


def test_refuses_binding_to_cluster_role_missing_from_output(objs: list[dict[str, Any]]) -> None:
    by_kind(objs, "ClusterRoleBinding")["roleRef"]["name"] = "nvidia-device-plugin-role"
    assert run(objs) == [
        Finding(
            "ClusterRoleBinding",
            DS,
            "",
            "roleRef.name",
            'clusterroles.rbac.authorization.k8s.io "nvidia-device-plugin-role" not found',
        )
    ]


def test_refuses_cluster_role_binding_to_a_role(objs: list[dict[str, Any]]) -> None:
    by_kind(objs, "ClusterRoleBinding")["roleRef"]["kind"] = "Role"
    assert run(objs) == [
        Finding(
            "ClusterRoleBinding", DS, "", "roleRef.kind", 'Unsupported value: "Role": supported values: "ClusterRole"'
        )
    ]


def test_refuses_role_binding_to_role_in_another_namespace(objs: list[dict[str, Any]]) -> None:
    objs.append(
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": {"name": "leases", "namespace": "default"},
            "rules": [],
        }
    )
    objs.append(
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": "leases", "namespace": NS},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "leases"},
            "subjects": [{"kind": "ServiceAccount", "name": DS}],
        }
    )
    assert run(objs) == [
        Finding("RoleBinding", "leases", NS, "roleRef.name", 'roles.rbac.authorization.k8s.io "leases" not found')
    ]


def test_reports_binding_subject_service_account_missing(objs: list[dict[str, Any]]) -> None:
    by_kind(objs, "ClusterRoleBinding")["subjects"][0]["name"] = "device-plugin"
    assert run(objs) == [
        Finding(
            "ClusterRoleBinding",
            DS,
            "",
            "subjects[0].name",
            'serviceaccounts "device-plugin" not found in namespace "gpu-operator"',
        )
    ]


def test_reports_scc_user_naming_missing_service_account(objs: list[dict[str, Any]]) -> None:
    by_kind(objs, "SecurityContextConstraints")["users"].append("system:serviceaccount:gpu-operator:dcgm")
    assert run(objs) == [
        Finding(
            "SecurityContextConstraints",
            "nvidia-device-plugin",
            "",
            "users[1]",
            'serviceaccounts "dcgm" not found in namespace "gpu-operator"',
        )
    ]


def test_reports_scc_use_grant_for_unknown_scc(objs: list[dict[str, Any]]) -> None:
    by_kind(objs, "ClusterRole")["rules"][1]["resourceNames"] = ["nvidia-device-plugin", "hostmount"]
    assert run(objs) == [
        Finding(
            "ClusterRole",
            DS,
            "",
            "rules[1].resourceNames[1]",
            'securitycontextconstraints.security.openshift.io "hostmount" not found',
        )
    ]
    assert run(objs, {"SecurityContextConstraints": {"hostmount"}}) == []


def test_refuses_object_in_namespace_missing_from_output(objs: list[dict[str, Any]]) -> None:
    objs.pop(0)
    findings = run(objs)
    assert {f.message for f in findings} == {'namespaces "gpu-operator" not found'}
    assert len(findings) == 4  # ServiceAccount, ConfigMap, Service, DaemonSet


# ---------------------------------------------------------------------------- 12. metadata


def test_refuses_name_that_is_not_a_subdomain(objs: list[dict[str, Any]]) -> None:
    by_kind(objs, "ConfigMap")["metadata"]["name"] = "plugin_config"
    ctr(objs)["envFrom"][0]["configMapRef"]["optional"] = True
    ctr(objs)["env"].pop(2)
    pod(objs)["volumes"][1]["configMap"]["optional"] = True
    [finding] = run(objs)
    assert (finding.kind, finding.name, finding.path) == ("ConfigMap", "plugin_config", "metadata.name")
    assert finding.message.startswith('Invalid value: "plugin_config": a lowercase RFC 1123 subdomain')


def test_refuses_service_name_that_is_not_a_dns1035_label(objs: list[dict[str, Any]]) -> None:
    by_kind(objs, "Service")["metadata"]["name"] = "1-metrics"
    assert run(objs) == [
        Finding(
            "Service",
            "1-metrics",
            NS,
            "metadata.name",
            'Invalid value: "1-metrics": a DNS-1035 label must consist of lower case alphanumeric characters or '
            "'-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  "
            "or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')",
        )
    ]


def test_refuses_namespace_name_with_dots(objs: list[dict[str, Any]]) -> None:
    objs.append({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "gpu.operator"}})
    assert run(objs) == [
        Finding(
            "Namespace", "gpu.operator", "", "metadata.name", 'Invalid value: "gpu.operator": must not contain dots'
        )
    ]


LABEL_VALUE_REGEX_MSG = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and "
    "must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', "
    "regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
)


def test_refuses_label_value_too_long(objs: list[dict[str, Any]]) -> None:
    ds(objs)["metadata"]["labels"]["version"] = "v" * 64
    path, value = "metadata.labels[version]", "v" * 64
    assert run(objs) == [ds_finding(path, f'Invalid value: "{value}": must be no more than 63 characters')]


def test_refuses_label_value_with_spaces(objs: list[dict[str, Any]]) -> None:
    ds(objs)["metadata"]["labels"]["product"] = "Tesla T4"
    assert run(objs) == [ds_finding("metadata.labels[product]", 'Invalid value: "Tesla T4": ' + LABEL_VALUE_REGEX_MSG)]


def test_refuses_label_key_with_empty_prefix(objs: list[dict[str, Any]]) -> None:
    pod_meta = ds(objs)["spec"]["template"]["metadata"]
    pod_meta["labels"]["/tier"] = "gpu"
    assert run(objs) == [
        ds_finding("spec.template.metadata.labels[/tier]", 'Invalid value: "/tier": prefix part must be non-empty')
    ]


def test_refuses_annotations_over_256_kib(objs: list[dict[str, Any]]) -> None:
    ds(objs)["metadata"]["annotations"]["example.com/blob"] = "x" * (256 * 1024)
    assert run(objs) == [ds_finding("metadata.annotations", "Too long: must have at most 262144 bytes")]


def test_reports_duplicate_object(objs: list[dict[str, Any]]) -> None:
    objs.append(copy.deepcopy(by_kind(objs, "ConfigMap")))
    assert run(objs) == [Finding("ConfigMap", "plugin-config", NS, "metadata.name", 'Duplicate value: "plugin-config"')]


# ---------------------------------------------------------------------------- 13. scheduling


def test_refuses_node_selector_value_with_spaces(objs: list[dict[str, Any]]) -> None:
    pod(objs)["nodeSelector"]["nvidia.com/gpu.product"] = "Tesla T4"
    [finding] = run(objs)
    assert finding.path == f"{SPEC}.nodeSelector[nvidia.com/gpu.product]"
    assert finding.message.startswith('Invalid value: "Tesla T4": a valid label must be an empty string')


def _expr(objs: list[dict[str, Any]], i: int) -> dict[str, Any]:
    na = pod(objs)["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    return na["nodeSelectorTerms"][0]["matchExpressions"][i]


EXPR = (
    f"{SPEC}.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions"
)


def test_refuses_in_expression_without_values(objs: list[dict[str, Any]]) -> None:
    _expr(objs, 0)["values"] = []
    assert run(objs) == [
        ds_finding(f"{EXPR}[0].values", "Required value: must be specified when `operator` is 'In' or 'NotIn'")
    ]


def test_refuses_exists_expression_with_values(objs: list[dict[str, Any]]) -> None:
    _expr(objs, 0)["operator"] = "Exists"
    assert run(objs) == [
        ds_finding(f"{EXPR}[0].values", "Forbidden: may not be specified when `operator` is 'Exists' or 'DoesNotExist'")
    ]


def test_refuses_gt_expression_with_two_values(objs: list[dict[str, Any]]) -> None:
    _expr(objs, 1)["values"] = ["0", "1"]
    assert run(objs) == [
        ds_finding(
            f"{EXPR}[1].values", "Required value: must be specified single value when `operator` is 'Lt' or 'Gt'"
        )
    ]


def test_refuses_gt_expression_with_non_integer_value(objs: list[dict[str, Any]]) -> None:
    _expr(objs, 1)["values"] = ["one"]
    assert run(objs) == [
        ds_finding(
            f"{EXPR}[1].values[0]", "Invalid value: \"one\": for 'Gt', 'Lt' operators, the value must be an integer"
        )
    ]


def test_refuses_preferred_term_weight_out_of_range(objs: list[dict[str, Any]]) -> None:
    na = pod(objs)["affinity"]["nodeAffinity"]
    na["preferredDuringSchedulingIgnoredDuringExecution"][0]["weight"] = 0
    assert run(objs) == [
        ds_finding(
            f"{SPEC}.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].weight",
            "Invalid value: 0: must be in the range 1-100",
        )
    ]


# ---------------------------------------------------------------------------- quantity grammar


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("1", Fraction(1)),
        ("100m", Fraction(1, 10)),
        ("1.5Gi", Fraction(3 * 2**29)),
        ("1e3", Fraction(1000)),
        ("2E-2", Fraction(2, 100)),
        (".5", Fraction(1, 2)),
        ("5.", Fraction(5)),
        ("+3k", Fraction(3000)),
        ("-1", Fraction(-1)),
        ("10u", Fraction(1, 10**5)),
        (4, Fraction(4)),
    ],
)
def test_parses_kubernetes_quantities(text: object, value: Fraction) -> None:
    assert parse_quantity(text) == value


@pytest.mark.parametrize("text", ["", "1.2.3", "1Gb", "1 Gi", "1e", "1K", "1ki", "1Gi\n"])
def test_rejects_malformed_quantities(text: str) -> None:
    with pytest.raises(QuantityError):
        parse_quantity(text)


# ---------------------------------------------------------------------------- the EXTERNAL table


def test_external_table_gives_one_reason_per_name() -> None:
    names = [(e.kind, e.name) for e in EXTERNAL]
    assert len(names) == len(set(names))
    assert all(e.reason.strip() for e in EXTERNAL)


def test_refuses_scc_use_grant_and_prometheus_binding_without_the_external_table(monkeypatch, dist, index) -> None:
    """What the example stacks reference outside themselves is exactly what the table documents."""
    monkeypatch.setattr(semantic.objects, "EXTERNAL", ())   # the table external_names() reads
    missing = set()
    for c in index["clusters"]:
        for issue in manifest_issues(dist / c["manifests"]):
            missing.add(issue.message)
    assert missing == {
        'securitycontextconstraints.security.openshift.io "privileged" not found',
        'serviceaccounts "prometheus-k8s" not found in namespace "openshift-monitoring"',
        "no PriorityClass with name system-node-critical was found",
    }


def test_accepts_tenant_claim_template_in_a_namespace_outside_the_output(objs) -> None:
    objs.append({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
                 "metadata": {"name": "h100-3g", "namespace": "team-a"}, "spec": {"spec": {}}})
    assert run(objs) == []
    objs.append({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x", "namespace": "team-a"}})
    assert run(objs) == [Finding("ConfigMap", "x", "team-a", "metadata.namespace", 'namespaces "team-a" not found')]


# ---------------------------------------------------------------------------- the pipeline

MPS = "nvidia-device-plugin-mps-control-daemon"
MPS_FILE = "08-mps-control-daemon.yaml"           # the component's file holds its one DaemonSet
MPS_MESSAGE = "Invalid value: true: ShareProcessNamespace and HostPID cannot both be enabled"


def test_example_profiles_pass_the_semantic_check(dist, index) -> None:
    examples = [f for f in (REPO / "profiles").glob("*.yaml") if not f.name.startswith("_")]
    assert len(index["clusters"]) == len(examples) >= 5
    for c in index["clusters"]:
        assert manifest_issues(dist / c["manifests"]) == [], c["name"]


def test_validate_dist_finds_the_mps_defect_put_back_by_hand(dist, tmp_path) -> None:
    shutil.copytree(dist, tmp_path / "dist")
    f = tmp_path / "dist" / "mig-sharing" / "manifests" / MPS_FILE
    text = f.read_text()
    assert "shareProcessNamespace" not in text
    f.write_text(re.sub(r"^( +)hostPID: true$", r"\1hostPID: true\n\1shareProcessNamespace: true", text, count=1,
                        flags=re.MULTILINE))
    proc = run_main("validate", "dist", cwd=tmp_path)
    assert (proc.returncode, proc.stderr) == (2, (     # the hand edit itself too: the folder's recorded digest
        "dist/mig-sharing: does not hold the files index.json records for it (treeDigest: a file added, removed or "
        "edited by hand); run gpuop synth and commit the output\n"
        f"dist/mig-sharing/manifests/{MPS_FILE}: DaemonSet/{MPS} spec.template.spec.shareProcessNamespace: "
        f"{MPS_MESSAGE}\n"
        "gpuop: 2 errors; nothing written\n"))


def _project(tmp_path: Path) -> Path:
    shutil.copytree(REPO / "profiles", tmp_path / "profiles")
    shutil.copy(REPO / "gpuop.yaml", tmp_path / "gpuop.yaml")
    return tmp_path


def test_synth_refuses_a_priority_class_that_exists_nowhere_and_writes_nothing(tmp_path) -> None:
    w = _project(tmp_path)
    prof = w / "profiles" / "prod-east.yaml"
    prof.write_text(prof.read_text().replace(
        "  containerRuntime: containerd\n",
        "  containerRuntime: containerd\n  daemonsets: {priorityClassName: gpu-critical}\n"))
    # undeclared (spec.clusterOwned.priorityClasses), it is refused once, at its line, as `gpuop validate` does
    line = prof.read_text().splitlines().index("  daemonsets: {priorityClassName: gpu-critical}") + 1
    column = len("  daemonsets: {") + 1
    proc = run_gpuop("synth", "profiles/prod-east.yaml", "-o", "dist", cwd=w)
    assert (proc.returncode, proc.stderr) == (2, (
        f"profiles/prod-east.yaml:{line}:{column}: spec.daemonsets.priorityClassName: Invalid value: \"gpu-critical\": "
        "no PriorityClass with name gpu-critical was found; gpuop cannot see the cluster: name a built-in one "
        "(system-node-critical, system-cluster-critical) or declare the cluster's own in "
        "spec.clusterOwned.priorityClasses\ngpuop: 1 error; nothing written\n"))
    assert run_gpuop("validate", "profiles/prod-east.yaml", cwd=w).stderr == proc.stderr
    assert not (w / "dist").exists()
    cache = w / ".gpuop-cache"
    assert sorted(p.name for p in cache.rglob("*") if p.is_file()) in ([], [".lock"])   # no build cached


def test_synth_refuses_the_mps_defect_put_back_in_the_component_and_writes_nothing(
        tmp_path, monkeypatch, capsys) -> None:
    """In process, so the component can be changed: the check runs on the synthesized objects, before the
    writers, whatever the component renders."""
    from gpuop.cli.main import main
    from gpuop.components.mps_control_daemon import MpsControlDaemon
    from gpuop.pipeline import run

    render = MpsControlDaemon.render.__func__

    def defective(cls, props):
        objs = render(cls, props)
        for o in objs:
            if o["kind"] == "DaemonSet":
                o["spec"]["template"]["spec"]["shareProcessNamespace"] = True
        return objs

    monkeypatch.setattr(MpsControlDaemon, "render", classmethod(defective))
    monkeypatch.setattr(run, "_worker_synth", None)      # a fresh variant cache: no unpatched objects
    monkeypatch.chdir(_project(tmp_path))
    assert main(["synth", "profiles/mig-sharing.yaml", "-o", "dist", "--no-cache", "-j", "1"]) == 2
    assert capsys.readouterr().err == (
        f"profiles/mig-sharing.yaml: DaemonSet/{MPS} spec.template.spec.shareProcessNamespace: {MPS_MESSAGE} "
        "(the stack compiled for cluster mig-sharing)\n"
        "gpuop: 1 error; nothing written\n")
    assert not (tmp_path / "dist").exists()


@pytest.fixture(scope="module")
def fleet_stacks(tmp_path_factory) -> list:
    """The bench fleet's first 40 profiles (every one of its 20 designs twice), planned and synthesized."""
    from gpuop.pipeline.run import plan_all
    from gpuop.stack.synth import Synthesizer

    spec = importlib.util.spec_from_file_location("bench_fleet", REPO / "bench" / "fleet.py")
    fleet = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fleet)
    folder = tmp_path_factory.mktemp("bench")
    fleet.generate(40, folder)
    plans, _ = plan_all([folder / "profiles"])
    synth = Synthesizer()
    return [synth.synthesize(p) for p in plans]


def test_bench_fleet_sample_passes_the_semantic_check(fleet_stacks) -> None:
    assert len(fleet_stacks) == 40
    assert [i for s in fleet_stacks for i in semantic.stack_issues(s, s.plan.name)] == []


def test_memoized_stack_check_agrees_with_checking_the_rendered_objects(fleet_stacks) -> None:
    from gpuop.outputs.manifests import rendered

    checker = semantic.StackChecker()
    broken = copy.deepcopy(rendered(fleet_stacks[0]))
    ds_obj = next(o for o in broken if o["kind"] == "DaemonSet")
    ds_obj["spec"]["template"]["spec"]["shareProcessNamespace"] = True
    ds_obj["spec"]["template"]["spec"]["hostPID"] = True
    cases = [([o.body for o in s.objects], s.plan.values_json, rendered(s)) for s in fleet_stacks]
    cases.append((broken, fleet_stacks[0].plan.values_json, broken))
    for bodies, values_json, objs in cases + cases:         # twice: the second round from the memo
        assert checker.check(bodies, values_json) == semantic.check_indexed(objs)
    assert checker.check(broken, fleet_stacks[0].plan.values_json)[0][1].message == MPS_MESSAGE


def test_context_free_rules_ignore_the_context(objs) -> None:
    """The memo reuses a local rule's findings in every cluster: they must not depend on the others."""
    pod(objs)["shareProcessNamespace"] = True
    ctr(objs)["resources"]["requests"]["memory"] = "1Gi"
    lone = semantic.Context(objects=[])
    full = semantic.Context(objects=objs, external=semantic.external_names())
    for rule in RULES:
        if rule not in CONTEXT_RULES:
            for obj in objs:
                assert list(rule(obj, lone)) == list(rule(obj, full)), rule.__name__


# ---------------------------------------------------------------------------- pod spec rules held to kubeval
# (the messages as Kubernetes v1.35.4's validation prints them; test_kubeval_differential.py compares the
# paths with the real code on compiled output)

SYSCTLS = f"{SPEC}.securityContext.sysctls"


def _env(objs, entry):
    ctr(objs)["env"].append(entry)
    return f"{CTR}.env[{len(ctr(objs)['env']) - 1}]"


def test_refuses_env_field_ref_the_api_does_not_support(objs) -> None:
    path = _env(objs, {"name": "F", "valueFrom": {"fieldRef": {"fieldPath": "spec.foo"}}})
    assert run(objs) == [ds_finding(f"{path}.valueFrom.fieldRef.fieldPath", 'Invalid value: "spec.foo": error converting '
                                    "fieldPath: field label not supported: spec.foo")]


def test_refuses_env_field_ref_not_available_as_env(objs) -> None:
    path = _env(objs, {"name": "F", "valueFrom": {"fieldRef": {"fieldPath": "status.phase"}}})
    [f] = run(objs)
    assert f.path == f"{path}.valueFrom.fieldRef.fieldPath"
    assert f.message.startswith('Unsupported value: "status.phase": supported values: "metadata.name", ')


def test_accepts_env_field_ref_of_a_label(objs) -> None:
    _env(objs, {"name": "F", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['app.kubernetes.io/name']"}}})
    assert run(objs) == []


def test_refuses_privileged_without_privilege_escalation(objs) -> None:
    ctr(objs)["securityContext"] = {"privileged": True, "allowPrivilegeEscalation": False}
    [f] = run(objs)
    assert f.path == f"{CTR}.securityContext"
    assert f.message == (
        'Invalid value: {"Capabilities":null,"Privileged":true,"SELinuxOptions":null,"WindowsOptions":null,'
        '"RunAsUser":null,"RunAsGroup":null,"RunAsNonRoot":null,"ReadOnlyRootFilesystem":null,'
        '"AllowPrivilegeEscalation":false,"ProcMount":null,"SeccompProfile":null,"AppArmorProfile":null}: '
        "cannot set `allowPrivilegeEscalation` to false and `privileged` to true")


@pytest.mark.parametrize("name, spec, message", [
    ("net.core.somaxconn", {"hostNetwork": True}, "may not be specified when 'hostNetwork' is true"),
    ("net/ipv4/ip_forward", {"hostNetwork": True}, "may not be specified when 'hostNetwork' is true"),
    ("kernel.msgmax", {"hostIPC": True}, "may not be specified when 'hostIPC' is true"),
    ("Net.core", {}, "must have at most 253 characters and match regex "
                     "^([a-z0-9]([-_a-z0-9]*[a-z0-9])?[\\./])*[a-z0-9]([-_a-z0-9]*[a-z0-9])?$"),
    ("net.core.somaxconn\n", {}, "must have at most 253 characters and match regex "
                                 "^([a-z0-9]([-_a-z0-9]*[a-z0-9])?[\\./])*[a-z0-9]([-_a-z0-9]*[a-z0-9])?$"),
])
def test_refuses_sysctls(objs, name: str, spec: dict, message: str) -> None:
    pod(objs).update(spec, securityContext={"sysctls": [{"name": name, "value": "1"}]})
    assert run(objs) == [ds_finding(f"{SYSCTLS}[0].name", f"Invalid value: {json.dumps(name)}: {message}")]


def test_accepts_a_sysctl_of_no_namespace_the_host_shares(objs) -> None:
    pod(objs).update(hostNetwork=True, securityContext={"sysctls": [{"name": "kernel.domainname", "value": "x"}]})
    assert run(objs) == []


def test_refuses_dns_policy_none_without_dns_config(objs) -> None:
    pod(objs)["dnsPolicy"] = "None"
    assert run(objs) == [ds_finding(f"{SPEC}.dnsConfig",
                                    "Required value: must provide `dnsConfig` when `dnsPolicy` is None")]


def test_refuses_configmap_data_key(objs) -> None:
    by_kind(objs, "ConfigMap")["data"]["bad key"] = "v"
    [f] = run(objs)
    assert (f.kind, f.path) == ("ConfigMap", "data[bad key]")
    assert f.message.startswith('Invalid value: "bad key": a valid config key must consist of alphanumeric characters')


def test_refuses_a_namespace_on_a_cluster_scoped_object(objs) -> None:
    by_kind(objs, "Namespace")["metadata"]["namespace"] = "x"
    assert [(f.kind, f.path, f.message) for f in run(objs)] == [
        ("Namespace", "metadata.namespace", "Forbidden: not allowed on this type")]


def test_manifest_check_refuses_strings_kubectl_reads_as_bools(tmp_path) -> None:
    (tmp_path / "cm.yaml").write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c, namespace: default}\n"
                                      "data: {flag: y, quoted: 'n', count: 0o17, text: yes please}\n")
    issues = manifest_issues(tmp_path)
    assert [(i.path, i.message.split(":", 3)[:3]) for i in issues] == [
        ("ConfigMap/c data[flag]", ["decode", " json", " cannot unmarshal bool into a field of type string"]),
        ("ConfigMap/c data[count]", ["decode", " json", " cannot unmarshal number into a field of type string"]),
    ]
