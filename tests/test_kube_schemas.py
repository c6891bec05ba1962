"""Every core object validates against the Kubernetes schemas of its cluster's version, strictly
(unknown fields such as `hostPid` are errors), with kubernetes-validate's own schemas."""

from __future__ import annotations

import kubernetes_validate

from gpuop.verify.output import check_kueue_schema
from gpuop.verify.kubeschema import KubeValidator

from conftest import load_dir


# Custom resources have no built-in schema; their structure is checked in test_stack_full.py
# (NodeFeatureRule: NFD's CRD is not among the reference CRDs; ServiceMonitor: neither is the
# Prometheus Operator's). OpenShift's kinds are not in kubernetes-validate either: test_openshift.py
# validates them, strictly, against schemas it writes from the OpenShift API's documented fields
# (SecurityContextConstraints, ImageStream) and the Prometheus Operator's (PrometheusRule).
CRD_KINDS = {("nfd.k8s-sigs.io/v1alpha1", "NodeFeatureRule"), ("monitoring.coreos.com/v1", "ServiceMonitor"),
             ("monitoring.coreos.com/v1", "PrometheusRule"), ("security.openshift.io/v1", "SecurityContextConstraints"),
             ("image.openshift.io/v1", "ImageStream")}
KUEUE = "kueue.x-k8s.io/v1beta2"        # Kueue's kinds: checked against Kueue's own CRDs (verify/crds/kueue)


def test_every_object_passes_strict_kubernetes_schemas(dist, index):
    checked = 0
    for entry in index["clusters"]:
        v = KubeValidator(entry["kubeVersion"])
        for obj in load_dir(dist / entry["manifests"]):
            if (obj["apiVersion"], obj["kind"]) in CRD_KINDS:
                continue
            if obj["apiVersion"] == KUEUE:
                assert check_kueue_schema(obj) == [], (entry["name"], obj["kind"], check_kueue_schema(obj))
                continue
            assert v.errors(obj) == [], (entry["name"], obj["kind"], obj["metadata"]["name"], v.errors(obj))
            checked += 1
    assert checked >= 40


def test_daemonsets_pass_kubernetes_validate_itself(dist, index):
    """Spot check with the library's own entry point (20 ms per object, so DaemonSets only)."""
    entry = next(e for e in index["clusters"] if e["name"] == "full-stack")   # every component on
    daemonsets = [o for o in load_dir(dist / entry["manifests"]) if o["kind"] == "DaemonSet"]
    # the MIG manager too (all-disabled on its MIG-capable pools), and the frontier pool's XID policy's own
    # device plugin
    assert len(daemonsets) == 10
    for ds in daemonsets:
        kubernetes_validate.validate(ds, f"{entry['kubeVersion']}.0", strict=True)


def test_validator_would_catch_a_typo_in_our_output(dist, index):
    entry = index["clusters"][0]
    ds = next(o for o in load_dir(dist / entry["manifests"]) if o["kind"] == "DaemonSet")
    ds["spec"]["template"]["spec"]["hostPid"] = True
    assert KubeValidator(entry["kubeVersion"]).errors(ds)
