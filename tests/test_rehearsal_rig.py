"""The rehearsal rig: a real control plane (etcd, kube-apiserver, kube-controller-manager, kube-scheduler)
built from the pinned wrapper modules (tools/rehearsal/), kwok's fake nodes and nfd-master, on loopback.

Skipped only when the rig cannot be built (no Go, no module proxy) and CI is unset; under CI a missing rig
fails (`make test` builds it first)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from gpuop.rehearse import rig
from gpuop.rehearse.rig import ControlPlane, Problem, RigError

pytestmark = pytest.mark.slow

FAKE = {rig.KWOK_NODE_ANNOTATION: "fake"}


@pytest.fixture(scope="module")
def bins() -> dict[str, Path]:
    try:
        return rig.binaries(build=True)
    except RigError as e:
        if os.environ.get("CI"):
            pytest.fail(f"the rehearsal rig is missing under CI: {e}")
        pytest.skip(f"the rehearsal rig cannot be built here: {e}")


@pytest.fixture(scope="module")
def cp(bins, tmp_path_factory):
    with ControlPlane(tmp_path_factory.mktemp("rig") / "cp", binaries=bins) as plane:
        yield plane


def fake_node(name: str, labels: dict[str, str] | None = None) -> dict:
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "annotations": dict(FAKE), "labels": {"kubernetes.io/hostname": name,
                                                                             **(labels or {})}},
            "spec": {"taints": [{"key": "kwok.x-k8s.io/node", "value": "fake", "effect": "NoSchedule"}]}}


CRD = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "rehearsals.example.gpuop.dev"},
    "spec": {"group": "example.gpuop.dev", "scope": "Namespaced",
             "names": {"plural": "rehearsals", "singular": "rehearsal", "kind": "Rehearsal"},
             "versions": [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {
                 "type": "object", "properties": {"spec": {"type": "object", "properties": {
                     "gpus": {"type": "integer", "minimum": 0}}}}}}}]},
}


def test_the_control_plane_serves_kubernetes_1_35_and_a_crd_and_its_object_apply(cp):
    version = cp.version()
    assert version["gitVersion"] == "v1.35.4" and (version["major"], version["minor"]) == ("1", "35")
    obj = {"apiVersion": "example.gpuop.dev/v1", "kind": "Rehearsal", "metadata": {"name": "first"},
           "spec": {"gpus": 8}}
    # the object comes first in the list: apply installs the CRD first and waits until it is served
    assert cp.apply([obj, CRD]) == []
    got = cp.read("example.gpuop.dev/v1", "Rehearsal", "first", "default")
    assert got["spec"] == {"gpus": 8}
    assert got["metadata"]["managedFields"][0]["manager"] == "gpuop-rehearse"


def test_the_admin_kubeconfig_names_a_server_ca_and_token_that_work(cp):
    """What a person's own kubectl reads (`kubectl --kubeconfig cp.kubeconfig`): its server, CA and token."""
    import ssl
    import urllib.request

    conf = json.loads(cp.kubeconfig.read_text())
    cluster = conf["clusters"][0]["cluster"]
    ctx = ssl.create_default_context(cafile=cluster["certificate-authority"])
    req = urllib.request.Request(cluster["server"] + "/api/v1/namespaces/kube-system",
                                 headers={"Authorization": f"Bearer {conf['users'][0]['user']['token']}"})
    with urllib.request.urlopen(req, context=ctx, timeout=30) as r:
        assert json.loads(r.read())["metadata"]["name"] == "kube-system"


def test_a_daemonset_pod_is_scheduled_and_running_on_a_fake_node(cp):
    node = "gpu-node-a"
    ds = {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "probe", "namespace": "rehearse-ds"},
          "spec": {"selector": {"matchLabels": {"app": "probe"}},
                   "template": {"metadata": {"labels": {"app": "probe"}}, "spec": {
                       "nodeSelector": {"gpuop.dev/pool": "a"},
                       "tolerations": [{"key": "kwok.x-k8s.io/node", "operator": "Exists", "effect": "NoSchedule"}],
                       "containers": [{"name": "probe", "image": "registry.example/probe:1",
                                       "securityContext": {"privileged": True}}]}}}}
    ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "rehearse-ds"}}
    assert cp.apply([fake_node(node, {"gpuop.dev/pool": "a"}), ds, ns]) == []

    def running():
        pods = cp.list_objects("v1", "Pod", "rehearse-ds", selector="app=probe")
        return [p for p in pods if p["spec"].get("nodeName") == node and p["status"].get("phase") == "Running"]

    (pod,) = cp.wait_for(running, 90, "the DaemonSet's pod Running on the fake node")
    assert pod["metadata"]["ownerReferences"][0]["kind"] == "DaemonSet"
    ready = cp.read("v1", "Node", node)["status"]["conditions"]
    assert any(c["type"] == "Ready" and c["status"] == "True" for c in ready)


def test_an_object_the_api_server_refuses_comes_back_with_its_message(cp):
    bad = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "bad", "namespace": "default"},
           "spec": {"replicas": -1, "selector": {"matchLabels": {"app": "bad"}},
                    "template": {"metadata": {"labels": {"app": "bad"}},
                                 "spec": {"containers": [{"name": "c", "image": "x"}]}}}}
    good = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "fine"}, "data": {"a": "b"}}
    unknown = {"apiVersion": "example.gpuop.dev/v9", "kind": "Nothing", "metadata": {"name": "n"}}
    problems = cp.apply([bad, good, unknown])
    assert problems == [
        Problem("apps/v1", "Deployment", "default", "bad",
                'Deployment.apps "bad" is invalid: spec.replicas: Invalid value: -1: '
                'must be greater than or equal to 0', "Invalid", 422),
        Problem("example.gpuop.dev/v9", "Nothing", "", "n", 'no matches for kind "Nothing" in version '
                '"example.gpuop.dev/v9"'),
    ]
    assert str(problems[0]).startswith("Deployment.apps/v1 default/bad: Deployment.apps \"bad\" is invalid")
    assert cp.read("v1", "ConfigMap", "fine", "default")["data"] == {"a": "b"}


def test_a_field_the_schema_does_not_declare_is_refused_by_server_side_apply(cp, tmp_path):
    path = tmp_path / "cm.yaml"
    path.write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: typo}\ndatta: {a: b}\n")
    (problem,) = cp.apply([path])
    assert (problem.kind, problem.name, problem.source, problem.code) == ("ConfigMap", "typo", str(path), 500)
    assert ".datta: field not declared in schema" in problem.message


def test_nfd_master_labels_a_node_from_a_node_feature_and_a_rule(cp, bins):
    assert cp.apply([rig.nfd_crds(bins["nfd-master"].parent)]) == []
    cp.start_nfd_master()
    node = "gpu-node-nfd"
    feature = {"apiVersion": "nfd.k8s-sigs.io/v1alpha1", "kind": "NodeFeature",
               "metadata": {"name": node, "namespace": "default",
                            "labels": {"nfd.node.kubernetes.io/node-name": node}},
               "spec": {"features": {"instances": {"pci.device": {"elements": [
                   {"attributes": {"vendor": "10de", "device": "2330", "class": "0302"}}]}}}}}
    rule = {"apiVersion": "nfd.k8s-sigs.io/v1alpha1", "kind": "NodeFeatureRule",
            "metadata": {"name": "nvidia-gpu"},
            "spec": {"rules": [{"name": "an NVIDIA GPU", "labels": {"pci-10de.present": "true"},
                                "matchFeatures": [{"feature": "pci.device",
                                                   "matchExpressions": {"vendor": {"op": "In",
                                                                                   "value": ["10de"]}}}]}]}}
    assert cp.apply([fake_node(node), feature, rule]) == []
    label = "feature.node.kubernetes.io/pci-10de.present"
    labels = cp.wait_for(lambda: (cp.read("v1", "Node", node)["metadata"].get("labels", {}).get(label) and
                                  cp.read("v1", "Node", node)["metadata"]["labels"]), 60, f"the node labelled {label}")
    assert labels[label] == "true"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie (exited, not yet reaped by its parent) is not running
    stat = Path(f"/proc/{pid}/stat")
    return not (stat.exists() and stat.read_text().rsplit(")", 1)[1].split()[0] == "Z")


def test_leaving_the_block_on_ctrl_c_kills_every_process_and_removes_the_workdir(bins, tmp_path):
    work = tmp_path / "cp"
    pids = []
    with pytest.raises(KeyboardInterrupt):
        with ControlPlane(work, binaries=bins, kwok=False, controller_manager=False, scheduler=False) as plane:
            pids = [p.popen.pid for p in plane._procs.values()]
            raise KeyboardInterrupt
    assert len(pids) == 2 and not any(_alive(p) for p in pids)
    assert not work.exists()


def test_a_killed_gpuop_leaves_no_control_plane_running(bins, tmp_path):
    script = textwrap.dedent(f"""
        import json, sys, time
        from pathlib import Path
        from gpuop.rehearse.rig import ControlPlane
        bins = {{k: Path(v) for k, v in json.loads({json.dumps(json.dumps({k: str(v) for k, v in bins.items()}))}).items()}}
        with ControlPlane(Path({str(tmp_path / 'cp')!r}), binaries=bins, kwok=False, controller_manager=False,
                          scheduler=False) as plane:
            print(json.dumps([p.popen.pid for p in plane._procs.values()]), flush=True)
            time.sleep(600)
    """)
    child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        pids = json.loads(child.stdout.readline())
        assert len(pids) == 2 and all(_alive(p) for p in pids)
        child.send_signal(signal.SIGKILL)
        child.wait()
        deadline = time.monotonic() + 30     # the kernel's signal, then init reaps them
        while any(_alive(p) for p in pids) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not any(_alive(p) for p in pids)
    finally:
        if child.poll() is None:
            child.kill()
