"""The rule registries: every rule of validate/ (profiles) and verify/ (compiled output) is a named
`check_*` function declared with an id, an upstream source and a default severity, gathered by its stage's
one runner (validate/runner.py REGISTRY, verify/output.py REGISTRY); docs/rules.md lists every one of them
(generated here: GPUOP_UPDATE_GOLDEN=1 rewrites it); and each rule fires: one minimal profile (or object)
per rule id that breaks that rule, asserting the issues carry that id and no other.
"""

from __future__ import annotations

import copy
import inspect
import os
from pathlib import Path

import pytest
import yaml

from gpuop.errors import UserError, registry, rule
from gpuop.profile.load import load_profile
from gpuop.validate import runner
from gpuop.validate.runner import REGISTRY, validate

from conftest import REFS, REPO
from test_semantic import NS, _fixture, by_kind, ctr, ds, pod

DOC = REPO / "docs" / "rules.md"

STACK = {"apiVersion": "gpuop/v1alpha1", "kind": "ClusterProfile", "metadata": {"name": "t"},
         "spec": {"platform": {"type": "kubernetes", "version": "1.33"}, "os": "ubuntu24.04",
                  "driver": {"version": "580"},
                  "nodePools": [{"name": "a", "gpu": "L40S", "nodeSelector": {"pool": "a"}}]}}
OCP = {"spec": {"platform": {"type": "openshift", "version": "4.19"}, "os": "rhcos4.19",
                "driver": {"version": "580", "rhcosVersions": ["419.96.202507091512-0"]}}}
OPERATOR = {"spec": {"delivery": {"mode": "operator"}}}
DRA = {"spec": {"platform": {"version": "1.34"}, "dra": {"version": "0.5.0"},
                "nodePools": [{"name": "infer", "gpu": "H100-SXM5-80GB", "allocation": "dra", "gpusPerNode": 8,
                               "nodeSelector": {"pool": "infer"}, "nodeGroup": "infer",
                               "mig": {"strategy": "mixed", "layout": {"3g.40gb": 1, "2g.20gb": 1, "1g.10gb": 2}}},
                              {"name": "train", "gpu": "H100-SXM5-80GB", "nodeSelector": {"pool": "train"},
                               "nodeGroup": "train"}]}}
H100_MIG = {"name": "m", "gpu": "H100-SXM5-80GB", "nodeSelector": {"pool": "m"}, "nodeGroup": "m",
            "mig": {"strategy": "single", "layout": {"1g.10gb": 7}}}
POOL_A, POOL_B = STACK["spec"]["nodePools"][0], {"name": "b", "gpu": "H100-SXM5-80GB", "nodeSelector": {"pool": "b"}}


def pools(*ps) -> dict:
    return {"spec": {"nodePools": list(ps)}}


# One profile per validate rule id that breaks that rule (and, as far as can be, no other): patches deep-merged
# onto STACK in order (mappings merge, lists replace). None as a value removes the key.
VALIDATE_CASES: dict[str, tuple[dict, ...]] = {
    "profile-schema": ({"spec": {"nodePool": []}},),
    "cluster-name-reserved": ({"metadata": {"name": "charts"}},),
    "release-known": ({"spec": {"release": "9.9"}},),
    "platform-version-matrix": ({"spec": {"platform": {"version": "1.20"}}},),
    "os-matrix": ({"spec": {"os": "rhcos4.19"}},),
    "driver-branch-known": ({"spec": {"driver": {"version": "999"}}},),
    "pool-name-unique": (pools(POOL_A, {**POOL_A, "nodeSelector": {"pool": "b"}}),),
    "gpu-model-known": (pools({**POOL_A, "gpu": "X100"}),),
    "priority-class-exists": ({"spec": {"daemonsets": {"priorityClassName": "gpu-critical"}}},),
    "pool-driver-fits-gpu": ({"spec": {"driver": {"version": "535"}}}, pools({**POOL_A, "gpu": "B200-180GB"})),
    "os-partner-validated": ({"spec": {"os": "sles15.7"}},),
    "driver-eol": ({"spec": {"driver": {"version": "535"}}}, pools({**POOL_A, "gpu": "A100-SXM4-80GB"})),
    "runtime-matrix": ({"spec": {"containerRuntime": "docker"}},),
    "mig-layout-fits-gpu": (pools({**H100_MIG, "mig": {"strategy": "mixed", "layout": {"7g.80gb": 2}}}),),
    "pool-sharing": (pools({**POOL_A, "sharing": {"timeSlicing": {"replicas": 2}, "mps": {"replicas": 2}}}),),
    "mig-manager-off": ({"spec": {"migManager": {"enabled": False}}}, pools(H100_MIG)),
    "pool-labels-source": (pools({**H100_MIG, "nodeGroup": None},
                                 {**H100_MIG, "name": "n", "nodeGroup": None, "nodeSelector": {"pool": "n"},
                                  "mig": {"strategy": "single", "layout": {"2g.20gb": 3}}}),),
    "keep-mig-configs": (pools({**H100_MIG, "keepMigConfigs": ["bogus"]}),),
    "openshift": (OCP, {"spec": {"containerRuntime": "containerd"}}),
    "rhcos-builds-openshift-only": ({"spec": {"driver": {"rhcosVersions": ["419.96.202507091512-0"]}}},),
    "pool-os": (pools({**POOL_A, "os": "rhcos4.19"}),),
    "pool-driver-branch": (pools({**POOL_A, "driver": {"version": "999"}}),),
    "precompiled": ({"spec": {"driver": {"precompiled": True}}},),
    "disjoint-driver-pools": (pools({**POOL_A, "nodeSelector": {}}, {**POOL_B, "driver": {"version": "595"}}),),
    "driver-daemonset-name": ({"spec": {"driver": {"precompiled": True, "kernels": ["6.8.0-60-" + "x" * 50]}}},),
    "nvidiadriver-selectors-overlap": (OPERATOR, pools({**POOL_A, "nodeSelector": {}},
                                                       {**POOL_B, "driver": {"version": "595"}})),
    "operator-operand-placement": (OPERATOR, {"spec": {"daemonsets": {"nodeSelector": {"gpu": "yes"}}}}),
    "operator-distribution": (OPERATOR, {"spec": {"platform": {"distribution": "k0s"}}}),
    "operator-gpu-pod-deletion": (OPERATOR, {"spec": {"driver": {"upgradePolicy": {"gpuPodDeletion": False}}}}),
    "operator-node-status-monitor": (OPERATOR, {"spec": {"nodeStatusExporter": {"enabled": True,
                                                                                "serviceMonitor": {"enabled": False}}}}),
    "operator-sidecar-precompiled": (OPERATOR, {"spec": {
        "delivery": {"operator": {"gdrcopy": True}},
        "driver": {"precompiled": True, "kernels": ["6.8.0-60-generic"]}}}),
    "operator-gds-open-modules": (OPERATOR, {"spec": {"delivery": {"operator": {"gds": True}},
                                                      "driver": {"kernelModuleType": "proprietary"}}}),
    "operator-pool-sidecars-driver": (OPERATOR, pools(POOL_A, {**POOL_B, "driver": {"enabled": False, "gds": True}})),
    "operator-pool-sidecars-crd": (OPERATOR, {"spec": {"delivery": {"operator": {"nvidiaDriverCRD": False}}}},
                                   pools(POOL_A, {**POOL_B, "driver": {"rdma": {"enabled": True}}})),
    "operator-digest-precompiled": (OPERATOR, {"spec": {
        "delivery": {"operator": {"driverDigest": "sha256:" + "a" * 64}},
        "driver": {"precompiled": True, "kernels": ["6.8.0-60-generic"]}}}),
    "operator-one-cr": (OPERATOR, {"spec": {"platform": {"version": "1.34"},
                                            "delivery": {"operator": {"gpuCluster": True}}}}),
    "operator-gpu-cluster": (OPERATOR, {"spec": {"delivery": {"operator": {"gpuCluster": True, "clusterPolicy": False}}}}),
    "operator-companion-name": (OPERATOR, {"metadata": {"name": "c" * 51}}),
    "nri-plugin": ({"spec": {"cdi": {"nriPluginEnabled": True}}},),
    "dra-gpu-client-contract": (DRA, {"spec": {"migManager": {"version": "v0.12.3"}}}),
    "operator-device-plugin-dra": (OPERATOR, {"spec": {"platform": {"version": "1.34"}, "dra": {"version": "0.5.0"}}},
                                   pools({**POOL_A, "allocation": "dra", "nodeGroup": "a"},
                                         {**POOL_A, "name": "b", "nodeSelector": {"pool": "b"}, "nodeGroup": "b"})),
    "operator-version-settings": (OPERATOR, {"spec": {"delivery": {"operator": {"version": "v1.0.0"}}}}),
    "operator-version-catalog": (OPERATOR, {"spec": {"delivery": {"operator": {"version": "v26.3.3"}}}}),
    "operator-mig-strategy": (OPERATOR, pools({**POOL_B, "nodeGroup": "b", "mig": {"strategy": "single", "layout": {"3g.40gb": 2}}},
                                              {**POOL_B, "name": "c", "nodeSelector": {"pool": "c"}, "nodeGroup": "c",
                                               "mig": {"strategy": "mixed", "layout": {"3g.40gb": 2}}})),
    "operator-olm": (OPERATOR, {"spec": {"delivery": {"operator": {"install": "olm"}}}}),
    "operator-preinstalled-driver": (OPERATOR, pools(POOL_A, {**POOL_B, "driver": {"enabled": False}})),
    "priority-class-name": ({"spec": {"daemonsets": {"priorityClassName": "system-mine"}}},),
    "tolerations": ({"spec": {"daemonsets": {"tolerations": [{"key": "k", "operator": "Exists", "value": "v"}]}}},),
    "node-affinity-values": ({"spec": {"daemonsets": {"nodeAffinity": [
        {"key": "k", "operator": "In", "values": ["-bad-"]}]}}},),
    "env-name-kubernetes-version": ({"spec": {"platform": {"version": "1.32"},
                                              "driver": {"env": [{"name": "1ABC", "value": "x"}]}}},),
    "dra-version": (DRA, {"spec": {"dra": {"version": "9.9.9"}}}),
    "dra-declared": (DRA, {"spec": {"dra": None}}),
    "dra-kubernetes": (DRA, {"spec": {"platform": {"version": "1.33"}}}),
    "dra-driver-floor": (DRA, {"spec": {"driver": {"version": "535"}}}),
    "dra-cdi": (DRA, {"spec": {"containerRuntime": "docker"}}),
    "dra-feature-gates": (DRA, {"spec": {"dra": {"featureGates": {"NoSuchGate": True}}}}),
    "dra-extended-resources": (DRA, {"spec": {"dra": {"extendedResources": True}}}),
    "dra-pools": (DRA, {"spec": {"dra": {"featureGates": {"DynamicMIG": True}}}}),
    "dra-double-allocation": (DRA, pools({**DRA["spec"]["nodePools"][0], "nodeSelector": {}},
                                         DRA["spec"]["nodePools"][1])),
    "dra-claim-templates": (DRA, {"spec": {"claimTemplates": [
        {"name": "c", "namespace": "team", "pool": "infer", "devices": [{"profile": "7g.80gb"}]}]}}),
    "dra-device-classes": (DRA, {"spec": {"platform": {"version": "1.35"}, "dra": {"extendedResources": True}}},
                           pools(DRA["spec"]["nodePools"][0], {**DRA["spec"]["nodePools"][1], "allocation": "dra",
                                                               "mig": DRA["spec"]["nodePools"][0]["mig"]})),
    "os-required": ({"spec": {"os": None}},),
    "distribution-platform": (OCP, {"spec": {"platform": {"distribution": "k3s"}}}),
    "distribution-runtime": ({"spec": {"platform": {"distribution": "k3s"}, "containerRuntime": "crio"}},),
    "containerd-major": ({"spec": {"platform": {"containerdMajor": 2}, "containerRuntime": "crio"}},),
    "second-copy": ({"spec": {"platform": {"distribution": "aks"}}},),
    "operand-env": ({"spec": {"driver": {"env": [{"name": "X", "value": "1"}, {"name": "X", "value": "2"}]}}},),
    "pod-labels": ({"spec": {"daemonsets": {"labels": {"app": "mine"}}}},),
    "driver-config-files": ({"spec": {"driver": {"repoConfig": {"configMapName": "same", "files": ["a.repo"]},
                                                 "certConfig": {"configMapName": "same", "files": ["a.crt"]}}}},),
    "driver-sidecars": (pools(POOL_A, {**POOL_B, "driver": {"enabled": False, "rdma": {"enabled": True}}}),),
    "operator-not-carried": (OPERATOR, {"spec": {"platform": {"containerdMajor": 2}}}),
    "operator-kubelet-root-dir": (OPERATOR, {"spec": {"hostPaths": {"kubeletRootDir": "/var/lib/k0s/kubelet"}}}),
    "operator-only-field": ({"spec": {"delivery": {"operator": {"migManagerConfig": {"name": "custom-mig"}}}}},),
    "pool-config-names": (pools({**POOL_A, "sharing": {"timeSlicing": {"replicas": 2}, "configName": "shared"}},
                                {**POOL_B, "sharing": {"timeSlicing": {"replicas": 4}, "configName": "shared"}}),),
    "known-issue": ({"spec": {"driver": {"rdma": {"enabled": True}}}},),
    "reserved-names": (pools({**POOL_A, "sharing": {"timeSlicing": {"replicas": 2}, "configName": "default"}}),),
    "pool-taints-tolerated": (pools({**POOL_A, "taints": [{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]}),),
    "queues-capacity": ({"spec": {"queues": {"enabled": True}}},),
    "health-gate-dcgm-level": ({"spec": {"dcgm": {"enabled": True}, "healthGate": {"dcgmDiagLevel": 9}}},),
    "health-gate-dcgm-host-engine": ({"spec": {"healthGate": {"dcgmDiagLevel": 2}}},),
    "health-gate-nccl": ({"spec": {"healthGate": {"nccl": True}}},),
    "licence-vgpu-licensing": (OPERATOR, {"spec": {"driver": {"driverType": "vgpu"},
                                                   "images": {"registry": "registry.example.com/nvidia"}}}),
    "licence-vgpu-delivery": ({"spec": {"driver": {"driverType": "vgpu", "licensingConfig": {"secretName": "nls"}},
                                        "images": {"registry": "registry.example.com/nvidia"}}},),
    "licence-vgpu-private-registry": (OPERATOR, {"spec": {"driver": {"driverType": "vgpu",
                                                                     "licensingConfig": {"secretName": "nls"}}}}),
    "licence-entitled-pull-secret": ({"spec": {"images": {"registry": "nvcr.io/nvaie"}}},),
    "licence-allowed-drivers": ({"spec": {"licensing": {"allowedDrivers": ["open"]}}},),
    "xid-unknown": ({"spec": {"devicePlugin": {"health": {"ignoreXids": [999]}}}},),
    "xid-lists-conflict": ({"spec": {"devicePlugin": {"health": {"ignoreXids": [94, 94]}}}},),
    "xid-ignored-reset-required": ({"spec": {"devicePlugin": {"health": {"ignoreXids": [79]}}}},),
    "xid-fatal-unsupported": ({"spec": {"devicePlugin": {"health": {"checks": False, "fatalXids": [48]}}}},),
    "operator-device-plugin-health": (OPERATOR, pools({**POOL_A, "devicePluginHealth": {"fatalXids": [109]}})),
    "device-plugin-health-off": ({"spec": {"devicePlugin": {"enabled": False, "health": {"fatalXids": [109]}}}},),
}

# Rules that fire together with a case's rule by nature (one mistake, seen by both).
ALSO = {
    "dra-gpu-client-contract": {"pool-labels-source"},       # a warning: DRA's base has both planes on one GPU model
    "nvidiadriver-selectors-overlap": {"disjoint-driver-pools"},   # the stack's driver DaemonSets overlap as well
}


def merge(base: dict, patch: dict) -> dict:
    out = copy.deepcopy(base)
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        elif isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = merge(out[k], v)
        else:
            out[k] = copy.deepcopy(v)
    return out


def clean(node):
    """Pools written as {**POOL, "key": None} drop the key."""
    if isinstance(node, dict):
        return {k: clean(v) for k, v in node.items() if v is not None}
    if isinstance(node, list):
        return [clean(v) for v in node]
    return node


def issues_of(doc: dict, tmp_path: Path) -> list:
    path = tmp_path / "t.yaml"
    path.write_text(yaml.safe_dump(clean(doc), sort_keys=False))
    try:
        return list(validate(load_profile(path)).warnings)
    except UserError as exc:
        return list(exc.issues)


def profile_for(rule_id: str) -> dict:
    doc = STACK
    for patch in VALIDATE_CASES[rule_id]:
        doc = merge(doc, patch)
    return doc


# ----------------------------------------------------------------------------------- the declarations

def test_every_validate_rule_is_a_declared_check_of_its_module():
    for module in runner.RULE_MODULES:
        checks = [c for phase in module.RULES for c in phase]
        declared = [f for name, f in inspect.getmembers(module, inspect.isfunction)
                    if name.startswith("check_") and f.__module__ == module.__name__]
        assert sorted(c.__name__ for c in checks) == sorted(f.__name__ for f in declared), module.__name__
        for c in checks:
            r = c.rule
            assert (r.stage, r.name) == ("validate", c.__name__) and r.severity in ("error", "warning")
            assert r.source and r.refuses, r.id
    assert len(REGISTRY) == 1 + sum(len(phase) for m in runner.RULE_MODULES for phase in m.RULES)
    assert REGISTRY["profile-schema"].name == "check_shape"          # the model pass, before the modules


def test_a_check_must_be_declared_named_and_documented_and_ids_are_unique():
    def check_a(ctx):
        """Refuses a."""

    def undocumented(ctx):
        """Refuses b."""

    with pytest.raises(ValueError, match="must be named check_"):
        rule("b-rule", source="here")(undocumented)
    with pytest.raises(ValueError, match="bad rule declaration"):
        rule("Not_Kebab", source="here")
    with pytest.raises(ValueError, match="not declared with @rule"):
        registry([check_a])
    first = rule("a-rule", source="here")(check_a)

    def check_again(ctx):
        """Refuses a again."""
    with pytest.raises(ValueError, match="declared twice"):
        registry([first, rule("a-rule", source="there")(check_again)])


def test_the_rule_id_is_recorded_but_never_shown_nor_compared():
    from gpuop.errors import Issue
    a, b = Issue("f", 1, 2, "spec.x", "bad"), Issue("f", 1, 2, "spec.x", "bad", rule="some-rule")
    assert a == b and str(a) == str(b) == "f:1:2: spec.x: bad" and b.rule == "some-rule"


# ----------------------------------------------------------------------------------- every rule fires

def test_every_validate_rule_has_a_triggering_profile():
    assert sorted(VALIDATE_CASES) == sorted(REGISTRY)


@pytest.mark.parametrize("rule_id", sorted(VALIDATE_CASES))
def test_each_validate_rule_fires(rule_id, tmp_path, monkeypatch):
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1798761600")      # 2027-01-01: driver-eol does not follow the clock
    found = issues_of(profile_for(rule_id), tmp_path)
    assert {i.rule for i in found} == {rule_id} | ALSO.get(rule_id, set()), [(i.rule, str(i)) for i in found]
    assert REGISTRY[rule_id].severity in {i.severity for i in found if i.rule == rule_id}     # its default


# One change per output rule id to the valid stack of tests/test_semantic.py that breaks that rule.
def _set(node: dict, key: str, value):
    node[key] = value


SVC, CRB = "Service", "ClusterRoleBinding"
SEMANTIC_CASES = {
    "metadata-name": lambda o: _set(by_kind(o, SVC)["metadata"], "name", "Bad_Name"),
    "labels": lambda o: _set(ds(o)["metadata"]["labels"], "bad key!", "x"),
    "annotations": lambda o: _set(ds(o)["metadata"]["annotations"], "Bad Key", "x"),
    "duplicate-objects": lambda o: o.append(copy.deepcopy(by_kind(o, "ServiceAccount"))),
    "namespace-exists": lambda o: o.append({"apiVersion": "v1", "kind": "ServiceAccount",
                                            "metadata": {"name": "x", "namespace": "nowhere"}}),
    "host-pid-with-share-process-namespace": lambda o: _set(pod(o), "shareProcessNamespace", True),
    "container-names": lambda o: _set(ctr(o), "name", "Bad_Name"),
    "volumes": lambda o: pod(o)["volumes"].append({"name": "config", "emptyDir": {}}),
    "container-ports": lambda o: _set(ctr(o)["ports"][0], "containerPort", 70000),
    "volume-mounts": lambda o: ctr(o)["volumeMounts"].append({"name": "missing", "mountPath": "/x"}),
    "probes": lambda o: _set(ctr(o), "livenessProbe", {"periodSeconds": 10}),
    "env": lambda o: ctr(o)["env"].append({"name": "A=B", "value": "x"}),
    "container-image-and-policies": lambda o: _set(ctr(o), "imagePullPolicy", "Sometimes"),
    "security-context": lambda o: _set(ctr(o)["securityContext"], "runAsUser", -1),
    "sysctls": lambda o: _set(pod(o), "securityContext", {"sysctls": [{"name": "bad name!", "value": "1"}]}),
    "dns": lambda o: _set(pod(o), "dnsPolicy", "Bogus"),
    "pod-affinity": lambda o: _set(pod(o)["affinity"], "podAffinity", {
        "requiredDuringSchedulingIgnoredDuringExecution": [{"labelSelector": {}, "topologyKey": ""}]}),
    "pod-names-and-deadlines": lambda o: _set(pod(o), "hostname", "Bad_Host"),
    "resources": lambda o: _set(ctr(o)["resources"]["requests"], "cpu", "2"),
    "pod-tolerations": lambda o: pod(o)["tolerations"].append({"key": "k", "operator": "Bogus"}),
    "pod-priority-class-name": lambda o: _set(pod(o), "priorityClassName", "unknown-class"),
    "node-selector": lambda o: _set(pod(o)["nodeSelector"], "bad key!", "x"),
    "node-affinity": lambda o: _set(pod(o)["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"],
                                    "nodeSelectorTerms", []),
    "workload-selector": lambda o: _set(ds(o)["spec"], "selector", {"matchLabels": {"app": "other"}}),
    "pod-template-restart-policy": lambda o: _set(pod(o), "restartPolicy", "Never"),
    "daemonset-update-strategy": lambda o: _set(ds(o)["spec"], "updateStrategy", {"type": "Bogus"}),
    "service-ports": lambda o: _set(by_kind(o, SVC)["spec"]["ports"][0], "port", 0),
    "service-selector-matches-pods": lambda o: _set(by_kind(o, SVC)["spec"], "selector", {"app": "nothing"}),
    "service-account-exists": lambda o: _set(pod(o), "serviceAccountName", "missing-sa"),
    "config-map-references": lambda o: _set(ctr(o), "envFrom", [{"configMapRef": {"name": "missing-cm"}}]),
    "secret-references": lambda o: pod(o)["volumes"].append({"name": "s", "secret": {"secretName": "missing"}}),
    "runtime-class-exists": lambda o: _set(pod(o), "runtimeClassName", "missing"),
    "role-binding-role-ref": lambda o: _set(by_kind(o, CRB)["roleRef"], "name", "missing"),
    "role-binding-subjects": lambda o: _set(by_kind(o, CRB), "subjects", [
        {"kind": "ServiceAccount", "name": "missing", "namespace": NS}]),
    "scc-users": lambda o: _set(by_kind(o, "SecurityContextConstraints"), "users",
                                [f"system:serviceaccount:{NS}:missing"]),
    "rbac-scc-use-resource-names": lambda o: _set(by_kind(o, "ClusterRole")["rules"][1], "resourceNames", ["missing"]),
    "config-data-keys": lambda o: _set(by_kind(o, "ConfigMap")["data"], "bad key!", "x"),
}
# The checks of whole files and single objects, each with its input.
DECODE_TEXT = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x, namespace: ns}\ndata: {enabled: y}\n"
BAD_DAEMONSET = {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "x"},
                 "spec": {"selector": {"matchLabels": {"a": "b"}}, "template": {
                     "metadata": {"labels": {"a": "b"}},
                     "spec": {"hostPID": "yes", "containers": [{"name": "c", "image": "i"}]}}}}
HELM_RELEASE_WITHOUT_CHART = {"apiVersion": "helm.toolkit.fluxcd.io/v2", "kind": "HelmRelease",
                              "metadata": {"name": "x"}, "spec": {"interval": "10m"}}


def test_every_output_rule_has_a_triggering_input():
    from gpuop.verify.output import REGISTRY as VERIFY
    assert sorted({*SEMANTIC_CASES, "kubectl-decode", "kube-schema", "crd-cel", "kueue-schema",
                   "operator-cr-schema"}) == sorted(VERIFY)


@pytest.mark.parametrize("rule_id", sorted(SEMANTIC_CASES))
def test_each_semantic_rule_fires(rule_id):
    from gpuop.verify.semantic import check_objects
    objs = _fixture()
    assert check_objects(objs) == []
    SEMANTIC_CASES[rule_id](objs)
    found = check_objects(objs)
    assert {f.rule for f in found} == {rule_id}, found


def test_the_file_and_object_checks_fire_and_tag_their_issues(tmp_path):
    from gpuop.verify import output
    from gpuop.verify.kubeschema import KubeValidator
    from gpuop.verify.semantic import check_kubectl_decode, manifest_issues
    assert {f.rule for f in check_kubectl_decode(DECODE_TEXT)} == {"kubectl-decode"}
    (tmp_path / "cm.yaml").write_text(DECODE_TEXT)
    assert [i.rule for i in manifest_issues(tmp_path, external={"Namespace": {"ns"}})] == ["kubectl-decode"]
    assert output.check_kube_schema(BAD_DAEMONSET, KubeValidator("1.33"))
    assert output.check_kube_schema(ds(_fixture()), KubeValidator("1.33")) == []
    assert output.check_crd_cel(HELM_RELEASE_WITHOUT_CHART)
    assert output.check_crd_cel({**HELM_RELEASE_WITHOUT_CHART, "spec": {
        "interval": "10m", "chart": {"spec": {"chart": "c", "sourceRef": {"kind": "HelmRepository", "name": "r"}}}}}) == []
    flavor = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "a"},
              "spec": {"nodeLabels": {"pool": "a"}}}
    assert output.check_kueue_schema(flavor) == []
    assert output.check_kueue_schema({**flavor, "spec": {"nodeLabel": {"pool": "a"}}})
    chart = REFS / "gpu-operator" / "chart"
    assert [(o["kind"], p) for o, p, _ in output.check_operator_crs({"mig": {"strategy": ""}}, chart)] == [
        ("ClusterPolicy", ("spec", "mig"))]
    assert output.check_operator_crs({}, chart) == []


# ----------------------------------------------------------------------------------- docs/rules.md

DOC_HEAD = """\
# Rules

Every problem gpuop finds in a profile or in a compiled output is found by a named rule: a `check_<what>`
function declared with an id, the upstream source of the refusal and a default severity. An `error` stops the compile (exit 2, every problem
listed with its file, line, column and field); a `warning` is printed and the compile goes on. A rule may
report a milder case of what it checks with the other severity.

This page is generated from the rule registries (`GPUOP_UPDATE_GOLDEN=1 pytest tests/test_rule_registry.py`
rewrites it); a test keeps it in step with the code and makes every rule fire once.

To add a profile rule: write `check_<what>(ctx) -> list[Issue]` in the module of `constructs/gpuop/validate/`
it belongs to, declared with `@rule("<id>", source="<where upstream refuses it>")` and a docstring saying what
it refuses; list it in the module's `RULES`; add a profile that breaks it to `VALIDATE_CASES` in
`tests/test_rule_registry.py`; regenerate this page. An output rule is declared the same way in
`constructs/gpuop/verify/semantic/` (listed in its `RULES`, with a case in `SEMANTIC_CASES`).
"""

SECTIONS = (
    ("Profile rules", "validate",
     "Run by `gpuop synth` (and everything that compiles a profile) on each profile, in "
     "`constructs/gpuop/validate/`: `profile-schema` (the profile's shape and types) and, once the profile has "
     "its shape, the others."),
    ("Output rules", "verify",
     "Run on the compiled objects: the semantic rules on every `gpuop synth` before anything is written, and "
     "all of them by `gpuop validate DIST` over a compiled output folder, in `constructs/gpuop/verify/`."),
)


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def rules_doc() -> str:
    from gpuop.verify.output import REGISTRY as VERIFY
    out = [DOC_HEAD.rstrip("\n")]
    for title, stage, intro in SECTIONS:
        rules = REGISTRY if stage == "validate" else VERIFY
        out += ["", f"## {title}", "", intro, "", "| Rule | Severity | Refuses | Source | Check |",
                "| --- | --- | --- | --- | --- |"]
        out += [f"| `{r.id}` | {r.severity} | {_cell(r.refuses)} | {_cell(r.source)} | "
                f"`{r.module.removeprefix('gpuop.')}.{r.name}` |"
                for r in sorted(rules.values(), key=lambda r: r.id)]
    return "\n".join(out) + "\n"


def test_docs_list_every_rule():
    text = rules_doc()
    if os.environ.get("GPUOP_UPDATE_GOLDEN"):
        DOC.write_text(text)
    assert DOC.is_file(), f"missing {DOC}; run with GPUOP_UPDATE_GOLDEN=1"
    assert DOC.read_text() == text, f"{DOC} differs from the rule registries; run with GPUOP_UPDATE_GOLDEN=1"


def test_rule_ids_are_unique_across_the_stages():
    from gpuop.verify.output import REGISTRY as VERIFY
    assert not set(REGISTRY) & set(VERIFY)
    assert all(r.stage == "verify" for r in VERIFY.values())
