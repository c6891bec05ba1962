"""Tests for gpuop.checks: strict built-in schemas (kubeschema) and CRD schemas (crdschema)."""

from __future__ import annotations

import copy
from pathlib import Path

import kubernetes_validate
import pytest

from conftest import CRDS
from gpuop.verify import crdschema
from gpuop.verify.crdschema import CrdValidator, to_json_schema
from gpuop.verify.kubeschema import KubeValidator, SchemaNotFound, supported_versions

CRD_DIR = CRDS

_POD = {
    "hostPID": True,
    "nodeSelector": {"nvidia.com/gpu.present": "true"},
    "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
    "containers": [{
        "name": "plugin", "image": "nvcr.io/nvidia/k8s-device-plugin:v0.17.0",
        "securityContext": {"privileged": True}, "resources": {"limits": {"memory": "64Mi", "cpu": 1}},
        "volumeMounts": [{"name": "dp", "mountPath": "/var/lib/kubelet/device-plugins"}],
    }],
    "volumes": [{"name": "dp", "hostPath": {"path": "/var/lib/kubelet/device-plugins"}}],
}
DAEMONSET = {
    "apiVersion": "apps/v1",
    "kind": "DaemonSet",
    "metadata": {"name": "nvidia-device-plugin", "namespace": "gpu-operator", "labels": {"app": "dp"}},
    "spec": {
        "selector": {"matchLabels": {"app": "dp"}},
        "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "10%"}},
        "template": {"metadata": {"labels": {"app": "dp"}}, "spec": _POD},
    },
}

APPLICATION = {
    "apiVersion": "argoproj.io/v1alpha1",
    "kind": "Application",
    "metadata": {"name": "gpu-operator", "namespace": "argocd"},
    "spec": {
        "project": "default",
        "destination": {"server": "https://kubernetes.default.svc", "namespace": "gpu-operator"},
        "source": {"repoURL": "https://example.com/fleet.git", "path": "dist/a100", "targetRevision": "HEAD"},
    },
}


def _flux(api_version: str, kind: str, spec: dict) -> dict:
    metadata = {"name": "gpu", "namespace": "flux-system"}
    return {"apiVersion": api_version, "kind": kind, "metadata": metadata, "spec": spec}


def _pod_spec(obj: dict) -> dict:
    return obj["spec"]["template"]["spec"]


@pytest.fixture(scope="module")
def kube() -> KubeValidator:
    return KubeValidator("1.33")


@pytest.fixture(scope="module")
def crds() -> CrdValidator:
    return CrdValidator.from_files(sorted(CRD_DIR.glob("*.yaml")))


# --- kubeschema ---------------------------------------------------------------------------------


def test_kube_validator_versions():
    assert supported_versions() == [f"1.{minor}" for minor in range(25, 38)]
    assert KubeValidator("v1.33.4").version == "1.33"
    with pytest.raises(ValueError, match=r"1\.19.*1\.25.*1\.37"):  # names the supported ones
        KubeValidator("1.19")


def test_kube_validator_accepts_valid_daemonset(kube):
    assert kube.errors(DAEMONSET) == []


def test_kube_validator_refuses_unknown_field(kube):
    obj = copy.deepcopy(DAEMONSET)
    _pod_spec(obj)["hostPid"] = _pod_spec(obj).pop("hostPID")
    assert kube.errors(obj) == [
        "spec.template.spec.hostPid: Additional properties are not allowed ('hostPid' was unexpected)"
    ]


def test_kube_validator_refuses_wrong_type(kube):
    obj = copy.deepcopy(DAEMONSET)
    _pod_spec(obj)["hostPID"] = "yes"
    assert kube.errors(obj) == ['spec.template.spec.hostPID: "yes" is not of types "null", "boolean"']


def test_kube_validator_reports_every_error_with_list_indexes(kube):
    obj = copy.deepcopy(DAEMONSET)
    container = _pod_spec(obj)["containers"][0]
    container["imagePullPolicy"] = 3
    container["volumeMounts"][0]["mountpath"] = container["volumeMounts"][0].pop("mountPath")
    errors = kube.errors(obj)
    assert "spec.template.spec.containers[0].imagePullPolicy: 3 is not of types \"null\", \"string\"" in errors
    assert any(e.startswith("spec.template.spec.containers[0].volumeMounts[0].mountpath: Additional") for e in errors)
    assert any(e.startswith("spec.template.spec.containers[0].volumeMounts[0]: ") and "mountPath" in e for e in errors)


def test_kube_validator_raises_schema_not_found_for_crd_kind(kube):
    with pytest.raises(SchemaNotFound) as info:
        kube.errors(APPLICATION)
    assert (info.value.kind, info.value.api_version) == ("Application", "argoproj.io/v1alpha1")


def test_kube_validator_does_not_treat_sub_types_or_foreign_groups_as_kinds(kube):
    with pytest.raises(SchemaNotFound):
        kube.errors({"apiVersion": "v1", "kind": "Affinity"})  # affinity-v1.json exists: not a kind
    assert not kube.has_schema("apps.example.com/v1", "DaemonSet")
    assert kube.has_schema("rbac.authorization.k8s.io/v1", "ClusterRole")


@pytest.mark.parametrize("change", ["none", "typo", "wrong_type"])
def test_kube_validator_agrees_with_kubernetes_validate(kube, change):
    obj = copy.deepcopy(DAEMONSET)
    if change == "typo":
        _pod_spec(obj)["hostPid"] = True
    elif change == "wrong_type":
        _pod_spec(obj)["hostPID"] = "yes"
    ours = kube.errors(obj)
    try:
        kubernetes_validate.validate(obj, "1.33.0", strict=True)
        theirs = None
    except kubernetes_validate.ValidationError as err:
        theirs = err
    assert (ours == []) == (theirs is None)
    if theirs is not None:  # same place, same complaint (their message text differs for types)
        where = ".".join(str(p) for p in theirs.path)
        # For an unknown field their path is the parent object; ours names the field itself.
        assert any(e.startswith((where + ":", where + ".")) for e in ours), (ours, where, theirs.message)
        assert theirs.validator in ("additionalProperties", "type")


# --- crdschema ----------------------------------------------------------------------------------


def test_crd_validator_loads_every_served_kind(crds):
    assert ("argoproj.io/v1alpha1", "Application") in crds.kinds()
    assert ("helm.toolkit.fluxcd.io/v2", "HelmRelease") in crds.kinds()
    assert len(crds.kinds()) == 9


def test_crd_validator_accepts_minimal_argo_application(crds):
    assert crds.errors(APPLICATION) == []


def test_crd_validator_refuses_unknown_field_under_spec(crds):
    obj = copy.deepcopy(APPLICATION)
    obj["spec"]["sources_"] = []
    assert crds.errors(obj) == ["spec.sources_: Additional properties are not allowed ('sources_' was unexpected)"]


def test_crd_validator_leaves_preserve_unknown_fields_open(crds):
    obj = copy.deepcopy(APPLICATION)
    obj["spec"]["source"]["helm"] = {"valuesObject": {"driver": {"anything": [1, 2]}}}
    assert crds.errors(obj) == []


def test_crd_validator_refuses_bad_helmrelease_interval(crds):
    chart = {"spec": {"chart": "gpu-operator", "sourceRef": {"kind": "HelmRepository", "name": "nvidia"}}}
    spec = {"interval": "10 minutes", "chart": chart, "values": {"driver": {"enabled": False}}}
    obj = _flux("helm.toolkit.fluxcd.io/v2", "HelmRelease", spec)
    errors = crds.errors(obj)
    assert len(errors) == 1 and errors[0].startswith('spec.interval: "10 minutes" does not match ')
    obj["spec"]["interval"] = "10m"
    assert crds.errors(obj) == []


def test_crd_validator_requires_kustomization_prune(crds):
    spec = {"interval": "10m", "path": "./dist/a100", "sourceRef": {"kind": "GitRepository", "name": "fleet"}}
    obj = _flux("kustomize.toolkit.fluxcd.io/v1", "Kustomization", spec)
    assert crds.errors(obj) == ['spec: "prune" is a required property']
    obj["spec"]["prune"] = True
    assert crds.errors(obj) == []


def test_crd_validator_accepts_gitrepository(crds):
    spec = {"interval": "5m", "url": "https://example.com/fleet.git", "ref": {"branch": "main"}}
    obj = _flux("source.toolkit.fluxcd.io/v1", "GitRepository", spec)
    assert crds.errors(obj) == []


def test_crd_validator_raises_schema_not_found(crds):
    with pytest.raises(SchemaNotFound):
        crds.errors({"apiVersion": "helm.toolkit.fluxcd.io/v2beta1", "kind": "HelmRelease"})
    with pytest.raises(SchemaNotFound):
        crds.errors(DAEMONSET)


def test_to_json_schema_conversion():
    openapi = {
        "type": "object",
        "properties": {
            "port": {"x-kubernetes-int-or-string": True, "anyOf": [{"type": "integer"}, {"type": "string"}]},
            "note": {"type": "string", "nullable": True},
            "nullable": {"type": "boolean"},  # a field named like a keyword stays a field
            "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": True, "properties": {"a": {}}},
            "tags": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}},
        },
    }
    schema = to_json_schema(openapi)
    assert schema["additionalProperties"] is False
    assert schema["properties"]["port"] == {"anyOf": [{"type": "integer"}, {"type": "string"}]}
    assert schema["properties"]["note"]["type"] == ["string", "null"]
    assert schema["properties"]["nullable"] == {"type": "boolean"}
    assert "additionalProperties" not in schema["properties"]["free"]
    assert schema["properties"]["tags"] == {"type": "array", "items": {"type": "string"}}


def test_crd_validator_falls_back_to_python_jsonschema(monkeypatch):
    def refuse(*args, **kwargs):
        raise ValueError("jsonschema_rs cannot compile this schema")

    monkeypatch.setattr(crdschema.jsonschema_rs, "Draft202012Validator", refuse)
    validator = CrdValidator.from_files([CRD_DIR / "kustomize.toolkit.fluxcd.io_kustomizations.yaml"])
    spec = {"interval": "10m", "prune": True, "sourceRef": {"kind": "GitRepository", "name": "f"}, "pruen": 1}
    obj = _flux("kustomize.toolkit.fluxcd.io/v1", "Kustomization", spec)
    assert validator.errors(obj) == ["spec.pruen: Additional properties are not allowed ('pruen' was unexpected)"]
