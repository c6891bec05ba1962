"""OpenShift: profiles/openshift.yaml compiled, against what
NVIDIA's GPU Operator v26.7 renders on OpenShift (its `*openshift*` assets, the golden Driver Toolkit
render, NOTES.md §3), and the OpenShift objects of every compiled cluster against schemas written here
from the OpenShift API's documented fields (kubernetes-validate has none for them).

SCC assets, PrometheusRules and golden/driver-openshift-drivertoolkit.yaml are read from
../shared/refs/gpu-operator (never copied); the Operator fills `users` and namespaces at run time, the
tests do the same before comparing.
"""

from __future__ import annotations

import copy
from pathlib import Path

import helm_python as helm
import pytest
import yaml

from gpuop import catalog
from gpuop.verify.crdschema import CrdValidator
from gpuop.errors import UserError
from gpuop.profile.load import load_profile
from gpuop.validate.runner import validate
from gpuop.kube.yamlio import load_all

from conftest import ASSETS, REFS, by_key, load_dir, write_profile
from test_helm import render

NS = "nvidia-gpu-operator"
FILLED = "FILLED BY THE OPERATOR"
BUILDS = ("418.94.202506121335-0", "419.96.202507091512-0")
SCC_ASSETS = {       # ServiceAccount (= SCC name) -> the Operator's SCC asset
    "nvidia-driver": "state-driver/0410_scc.openshift.yaml",
    "nvidia-dcgm": "state-dcgm/0310_scc.openshift.yaml",
    "nvidia-dcgm-exporter": "state-dcgm-exporter/0700_scc.openshift.yaml",
    "nvidia-gpu-feature-discovery": "gpu-feature-discovery/0400_scc_openshift.yaml",
    "nvidia-mig-manager": "state-mig-manager/0500_scc.openshift.yaml",
    "nvidia-node-status-exporter": "state-node-status-exporter/0400_scc.openshift.yaml",
    "nvidia-operator-validator": "state-operator-validation/0400_scc_openshift.yaml",
}
HOST_FLAGS = ("allowHostIPC", "allowHostNetwork", "allowHostPID", "allowHostPorts")
NULLABLE = {"priority": 0, "defaultAddCapabilities": [], "requiredDropCapabilities": []}   # null in the assets


def asset(path: str) -> dict:
    return yaml.safe_load((ASSETS / path).read_text().replace(f'"{FILLED}"', NS))


@pytest.fixture(scope="module")
def entry(index) -> dict:
    return next(e for e in index["clusters"] if e["name"] == "openshift")


@pytest.fixture(scope="module")
def objs(dist, entry) -> dict:
    return by_key(load_dir(dist / entry["manifests"]))


def of_kind(objs: dict, kind: str) -> dict:
    return {k[2]: o for k, o in objs.items() if k[0] == kind}


def envs(container: dict) -> dict:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container.get("env", [])}


# ---- namespace, monitoring ----------------------------------------------------------------------------

def test_namespace_is_nvidia_gpu_operator_with_cluster_monitoring_and_psa(entry, objs):
    assert entry["namespace"] == NS and entry["platform"] == "openshift" and entry["kubeVersion"] == "1.32"
    labels = objs[("Namespace", "", NS)]["metadata"]["labels"]
    assert labels["openshift.io/cluster-monitoring"] == "true"
    assert {labels[f"pod-security.kubernetes.io/{m}"] for m in ("enforce", "audit", "warn")} == {"privileged"}
    # the platform Prometheus may read the namespace (state-operator-metrics *_prom_role*_openshift.yaml)
    role, binding = objs[("Role", NS, "prometheus-k8s")], objs[("RoleBinding", NS, "prometheus-k8s")]
    assert role["rules"] == [{"apiGroups": [""], "resources": ["services", "endpoints", "pods"],
                              "verbs": ["get", "list", "watch"]}]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "prometheus-k8s", "namespace": "openshift-monitoring"}]
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "prometheus-k8s"}


@pytest.mark.parametrize("name, path", [
    ("nvidia-dcgm-exporter", "state-dcgm-exporter/1000_prometheus_rule_openshift.yaml"),
    ("nvidia-node-status-exporter-alerts", "state-node-status-exporter/0800_prometheus_rule_openshift.yaml"),
])
def test_prometheus_rules_are_the_operators(objs, name, path):
    ours = copy.deepcopy(objs[("PrometheusRule", NS, name)])
    ours["metadata"].pop("annotations", None)
    assert ours == asset(path)


def test_service_monitors_are_on_by_default(objs):
    assert {"nvidia-dcgm-exporter", "nvidia-node-status-exporter"} <= set(of_kind(objs, "ServiceMonitor"))
    assert of_kind(objs, "ServiceMonitor")["nvidia-dcgm-exporter"]["spec"]["endpoints"][0]["interval"] == "30s"


def test_nfd_comes_from_the_nfd_operator_and_the_rules_still_apply(dist, entry, objs):
    assert ("NodeFeatureRule", "", "nvidia-gpu-node-labels") in objs
    assert [a["metadata"]["name"] for a in load_dir(dist / entry["argocd"])] == ["gpuop-openshift"]
    assert not [o for o in load_dir(dist / entry["flux"]) if "nfd" in o["metadata"]["name"]]


# ---- SecurityContextConstraints and their RBAC ---------------------------------------------------------

def test_one_scc_per_privileged_component_bound_to_exactly_its_service_account(objs):
    sccs = of_kind(objs, "SecurityContextConstraints")
    daemonsets = of_kind(objs, "DaemonSet")
    accounts = {d["spec"]["template"]["spec"]["serviceAccountName"] for d in daemonsets.values()}
    assert all(c["securityContext"]["privileged"] for d in daemonsets.values()
               for c in d["spec"]["template"]["spec"]["containers"])
    assert set(sccs) == accounts
    assert {"nvidia-driver", "nvidia-container-toolkit", "nvidia-device-plugin", "nvidia-operator-validator",
            "nvidia-dcgm-exporter", "nvidia-gpu-feature-discovery", "nvidia-node-status-exporter"} <= set(sccs)
    for name, scc in sccs.items():
        assert scc["users"] == [f"system:serviceaccount:{NS}:{name}"] and scc["groups"] == [], name
        assert ("ServiceAccount", NS, name) in objs


def test_each_service_account_can_use_exactly_its_scc(objs):
    """Who may use which SCC: the SCCs' users and groups, plus every Role/ClusterRole `use` rule on
    securitycontextconstraints reached through a binding. Each component's ServiceAccount gets exactly
    its own SCC; nobody gets `privileged`, no rule grants every SCC."""
    can: dict[str, set] = {}
    for scc in of_kind(objs, "SecurityContextConstraints").values():
        assert not scc["groups"]
        for user in scc["users"]:
            can.setdefault(user.rsplit(":", 1)[1], set()).add(scc["metadata"]["name"])
    roles = {(k[0], k[1], k[2]): o for k, o in objs.items() if k[0] in ("Role", "ClusterRole")}
    for k, b in objs.items():
        if k[0] not in ("RoleBinding", "ClusterRoleBinding"):
            continue
        role = roles[(b["roleRef"]["kind"], k[1] if b["roleRef"]["kind"] == "Role" else "", b["roleRef"]["name"])]
        for rule in role["rules"]:
            if "securitycontextconstraints" in rule.get("resources", []) or "*" in rule.get("resources", []):
                assert rule["verbs"] == ["use"] and rule.get("resourceNames"), (k, rule)
                for s in b["subjects"]:
                    can.setdefault(s["name"], set()).update(rule["resourceNames"])
    for d in of_kind(objs, "DaemonSet").values():
        sa = d["spec"]["template"]["spec"]["serviceAccountName"]
        assert can[sa] == {sa}, sa
    assert not any("privileged" in v for v in can.values())


def test_scc_shape_is_the_operators_with_only_the_host_access_the_pods_use(objs):
    sccs = of_kind(objs, "SecurityContextConstraints")
    shape = asset(SCC_ASSETS["nvidia-driver"])
    for name, scc in sccs.items():
        up = asset(SCC_ASSETS.get(name, SCC_ASSETS["nvidia-driver"]))    # toolkit, device plugin: no asset upstream
        for k, v in up.items():
            if k in ("metadata", "users", "groups") + HOST_FLAGS:
                continue
            assert scc[k] == (NULLABLE[k] if v is None else v), (name, k)
        assert set(scc) == set(shape), name
        pods = [d["spec"]["template"]["spec"] for d in of_kind(objs, "DaemonSet").values()
                if d["spec"]["template"]["spec"]["serviceAccountName"] == name]
        used = {"allowHostPID": any(p.get("hostPID") for p in pods), "allowHostIPC": any(p.get("hostIPC") for p in pods),
                "allowHostNetwork": any(p.get("hostNetwork") for p in pods),
                "allowHostPorts": any(port.get("hostPort") for p in pods for c in p["containers"]
                                      for port in c.get("ports", []))}
        assert {f: scc[f] for f in HOST_FLAGS} == used, name
        if name in SCC_ASSETS:                                # never more than upstream allows
            assert all(up[f] or not scc[f] for f in HOST_FLAGS), name
    assert sccs["nvidia-driver"]["allowHostPID"] and sccs["nvidia-container-toolkit"]["allowHostPID"]
    assert not sccs["nvidia-gpu-feature-discovery"]["allowHostPID"]     # upstream allows it; GFD does not use it


def test_daemonsets_name_and_require_their_scc(objs):
    for name, d in of_kind(objs, "DaemonSet").items():
        sa = d["spec"]["template"]["spec"]["serviceAccountName"]
        assert d["metadata"]["annotations"]["openshift.io/scc"] == sa, name
        assert d["spec"]["template"]["metadata"]["annotations"]["openshift.io/required-scc"] == sa, name


def test_scc_wiring_reaches_every_daemonset_component():
    """Components added later (MIG manager, MPS) get their SCC through Placement, without code of their own."""
    from gpuop.stack.registry import COMPONENTS, component_props
    from test_plan_helpers import plan_for

    plan = plan_for({"platform": {"type": "openshift", "version": "4.19"}, "os": "rhcos4.19",
                     "driver": {"rhcosVersions": [BUILDS[1]]}, "dcgm": {"enabled": True},
                     "nodeStatusExporter": {"enabled": True},
                     "nodePools": [{"name": "a", "gpu": "H100-SXM5-80GB", "mig": {"strategy": "mixed",
                                                                                  "layout": {"3g.40gb": 2}}}]})
    sccs = {}
    for c, props in component_props(plan):
        out = c.objects(props)
        accounts = {o["spec"]["template"]["spec"]["serviceAccountName"] for o in out if o["kind"] == "DaemonSet"}
        assert {o["metadata"]["name"] for o in out if o["kind"] == "SecurityContextConstraints"} == accounts, c.name
        assert not any(o["kind"] == "SecurityContextConstraints" for o in c.render(props)), c.name
        sccs.update({o["metadata"]["name"]: o for o in out if o["kind"] == "SecurityContextConstraints"})
    assert set(SCC_ASSETS) <= set(sccs)          # every SCC the Operator ships, MIG manager and DCGM included
    for name in ("nvidia-mig-manager", "nvidia-driver", "nvidia-node-status-exporter"):    # pods use what upstream allows
        assert {f: sccs[name][f] for f in HOST_FLAGS} == {f: asset(SCC_ASSETS[name])[f] for f in HOST_FLAGS}, name


# ---- CRI-O ---------------------------------------------------------------------------------------------

def test_toolkit_is_configured_for_crio(objs):
    pod = of_kind(objs, "DaemonSet")["nvidia-container-toolkit-daemonset"]["spec"]["template"]["spec"]
    e = envs(pod["containers"][0])
    assert e["RUNTIME"] == "crio" and e["CRIO_CONFIG_MODE"] == "config"
    assert e["RUNTIME_CONFIG"] == e["CRIO_CONFIG"] == "/runtime/config-dir/config.toml"
    assert e["RUNTIME_DROP_IN_CONFIG"] == "/runtime/config-dir.d/99-nvidia.conf"
    assert e["RUNTIME_DROP_IN_CONFIG_HOST_PATH"] == "/etc/crio/crio.conf.d/99-nvidia.conf"
    assert not [k for k in e if k.startswith("CONTAINERD_") or k == "RUNTIME_SOCKET"]
    vols = {v["name"]: v.get("hostPath", {}).get("path") for v in pod["volumes"]}
    assert vols["crio-config"] == "/etc/crio" and vols["crio-drop-in-config"] == "/etc/crio/crio.conf.d"
    assert vols["crio-hooks"] == "/run/containers/oci/hooks.d"         # OpenShift keeps the asset's hooks dir
    assert not [n for n in vols if n.endswith("-socket")]


# ---- Driver Toolkit: one driver DaemonSet per RHCOS build ----------------------------------------------

@pytest.fixture(scope="module")
def golden_dtk() -> dict:
    docs = load_all((REFS / "gpu-operator" / "golden" / "driver-openshift-drivertoolkit.yaml").read_text())
    return next(o for o in docs if o["kind"] == "DaemonSet")


def test_one_driver_daemonset_per_rhcos_build(objs):
    drivers = {n: d for n, d in of_kind(objs, "DaemonSet").items() if n.startswith("nvidia-driver-daemonset")}
    assert sorted(drivers) == [f"nvidia-driver-daemonset-{b}" for b in BUILDS]
    for build in BUILDS:
        name = f"nvidia-driver-daemonset-{build}"
        d = drivers[name]
        assert d["metadata"]["labels"]["app"] == name and d["spec"]["selector"]["matchLabels"] == {"app": name}
        assert d["metadata"]["labels"]["openshift.driver-toolkit"] == "true"
        assert d["metadata"]["labels"]["openshift.driver-toolkit.rhcos"] == build
        tl = d["spec"]["template"]["metadata"]["labels"]
        assert tl["app"] == name and tl["openshift.driver-toolkit"] == "true" and "openshift.driver-toolkit.rhcos" not in tl
        pod = d["spec"]["template"]["spec"]
        assert pod["nodeSelector"] == {"feature.node.kubernetes.io/system-os_release.OSTREE_VERSION": build,
                                       "nvidia.com/gpu.deploy.driver": "true"}
        minor = f"4.{int(build[1:3])}"
        main = pod["containers"][0]
        assert main["image"] == f"nvcr.io/nvidia/driver:580.173.02-rhcos{minor}"
        assert envs(main)["OPENSHIFT_VERSION"] == "4.19"
        dtk = pod["containers"][1]
        assert dtk["image"] == f"driver-toolkit:{build}" and envs(dtk)["RHCOS_VERSION"] == build


def test_driver_toolkit_wiring_matches_the_golden_render(objs, golden_dtk):
    g = golden_dtk["spec"]["template"]["spec"]
    pod = of_kind(objs, "DaemonSet")[f"nvidia-driver-daemonset-{BUILDS[1]}"]["spec"]["template"]["spec"]
    g_main, g_dtk = g["containers"]
    main, dtk = pod["containers"]
    assert (main["command"], main["args"]) == (g_main["command"], g_main["args"]) == (["ocp_dtk_entrypoint"], ["nv-ctr-run-with-dtk"])
    for field in ("name", "command", "args", "securityContext", "volumeMounts"):
        assert dtk[field] == g_dtk[field], field
    assert [e["name"] for e in dtk["env"]] == [e["name"] for e in g_dtk["env"]]   # DRIVER_CONFIG_DIGEST last
    trusted_ca = "gpu-operator-trusted-ca"          # the golden's cluster-wide proxy CA: not known at compile time
    assert main["volumeMounts"] == [m for m in g_main["volumeMounts"] if m["name"] != trusted_ca]
    assert pod["volumes"] == [v for v in g["volumes"] if v["name"] != trusted_ca]
    assert {"name": "shared-nvidia-driver-toolkit", "emptyDir": {}} in pod["volumes"]


def test_driver_toolkit_image_is_resolved_by_openshift(objs):
    ist = objs[("ImageStream", NS, "driver-toolkit")]
    assert ist["spec"]["lookupPolicy"] == {"local": True}
    assert ist["spec"]["tags"] == [{"name": b, "from": {"kind": "ImageStreamTag", "namespace": "openshift",
                                                         "name": f"driver-toolkit:{b}"},
                                    "referencePolicy": {"type": "Source"}} for b in BUILDS]
    assert ist["metadata"]["annotations"]["argocd.argoproj.io/sync-wave"] == "-1"     # before the DaemonSets


def test_helm_switches_the_driver_and_its_openshift_objects_off_together(dist, entry):
    objs = by_key(render(dist / entry["chart"], {"driver": {"enabled": False}}, entry=entry))
    assert not [k for k in objs if k[2].startswith("nvidia-driver") or k[0] == "ImageStream"]
    assert ("SecurityContextConstraints", "", "nvidia-container-toolkit") in objs


# ---- schemas of the OpenShift kinds (kubernetes-validate has none) ------------------------------------

def _crd(group: str, kind: str, version: str, schema: dict, scope: str = "Namespaced") -> dict:
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": f"{kind.lower()}s.{group}"},
            "spec": {"group": group, "scope": scope, "names": {"kind": kind, "plural": f"{kind.lower()}s"},
                     "versions": [{"name": version, "served": True, "storage": True,
                                   "schema": {"openAPIV3Schema": schema}}]}}


S, B, I = {"type": "string"}, {"type": "boolean"}, {"type": "integer"}
STRINGS = {"type": "array", "items": S, "nullable": True}
META = {"apiVersion": S, "kind": S, "metadata": {"type": "object"}}
STRATEGY = {"type": "object", "nullable": True, "properties": {
    "type": S, "ranges": {"type": "array", "items": {"type": "object", "properties": {"min": I, "max": I}}}}}
# openshift/api security/v1 SecurityContextConstraints (the CRD openAPIV3Schema of
# 0000_03_config-operator_01_securitycontextconstraints.crd.yaml: fields, types, required keys).
SCC_SCHEMA = {"type": "object", "properties": {**META,
    "allowHostDirVolumePlugin": B, "allowHostIPC": B, "allowHostNetwork": B, "allowHostPID": B, "allowHostPorts": B,
    "allowPrivilegeEscalation": {**B, "nullable": True}, "allowPrivilegedContainer": B,
    "allowedCapabilities": STRINGS, "allowedFlexVolumes": {"type": "array", "nullable": True, "items": {
        "type": "object", "required": ["driver"], "properties": {"driver": S}}},
    "allowedUnsafeSysctls": STRINGS, "defaultAddCapabilities": STRINGS,
    "defaultAllowPrivilegeEscalation": {**B, "nullable": True}, "forbiddenSysctls": STRINGS, "fsGroup": STRATEGY,
    "groups": STRINGS, "priority": {**I, "nullable": True}, "readOnlyRootFilesystem": B,
    "requiredDropCapabilities": STRINGS,
    "runAsUser": {"type": "object", "nullable": True, "properties": {"type": S, "uid": I, "uidRangeMax": I, "uidRangeMin": I}},
    "seLinuxContext": {"type": "object", "nullable": True, "properties": {"type": S, "seLinuxOptions": {
        "type": "object", "properties": {"level": S, "role": S, "type": S, "user": S}}}},
    "seccompProfiles": STRINGS, "supplementalGroups": STRATEGY, "users": STRINGS, "volumes": STRINGS},
    "required": ["allowHostDirVolumePlugin", "allowHostIPC", "allowHostNetwork", "allowHostPID", "allowHostPorts",
                 "allowPrivilegedContainer", "allowedCapabilities", "defaultAddCapabilities", "priority",
                 "readOnlyRootFilesystem", "requiredDropCapabilities", "volumes"]}
# openshift/api image/v1 ImageStream: spec (ImageStreamSpec, TagReference, TagImportPolicy,
# TagReferencePolicy, ImageLookupPolicy) as documented in zz_generated.swagger_doc_generated.go.
OBJECT_REF = {"type": "object", "properties": {k: S for k in ("kind", "namespace", "name", "uid", "apiVersion",
                                                               "resourceVersion", "fieldPath")}}
IMAGESTREAM_SCHEMA = {"type": "object", "properties": {**META, "spec": {"type": "object", "properties": {
    "lookupPolicy": {"type": "object", "required": ["local"], "properties": {"local": B}},
    "dockerImageRepository": S,
    "tags": {"type": "array", "items": {"type": "object", "required": ["name"], "properties": {
        "name": S, "annotations": {"type": "object", "additionalProperties": S}, "from": OBJECT_REF,
        "reference": B, "generation": I,
        "importPolicy": {"type": "object", "properties": {"insecure": B, "scheduled": B,
                                                          "importMode": {"type": "string", "enum": ["Legacy", "PreserveOriginal"]}}},
        "referencePolicy": {"type": "object", "required": ["type"], "properties": {
            "type": {"type": "string", "enum": ["Source", "Local"]}}}}}}}}}}
# prometheus-operator monitoring.coreos.com/v1 PrometheusRule (the CRD's openAPIV3Schema).
DURATION = {"type": "string", "pattern": r"^(0|(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?)$"}
STRMAP = {"type": "object", "additionalProperties": S}
PROMRULE_SCHEMA = {"type": "object", "required": ["spec"], "properties": {**META, "spec": {"type": "object", "properties": {
    "groups": {"type": "array", "items": {"type": "object", "required": ["name"], "properties": {
        "name": {"type": "string", "minLength": 1}, "interval": DURATION, "query_offset": DURATION, "limit": I,
        "labels": STRMAP, "partial_response_strategy": S,
        "rules": {"type": "array", "items": {"type": "object", "required": ["expr"], "properties": {
            "record": S, "alert": S, "expr": {"x-kubernetes-int-or-string": True}, "for": DURATION,
            "keep_firing_for": DURATION, "labels": STRMAP, "annotations": STRMAP}}}}}}}}}}


@pytest.fixture(scope="module")
def openshift_schemas() -> CrdValidator:
    v = CrdValidator()
    v.add_crd(_crd("security.openshift.io", "SecurityContextConstraints", "v1", SCC_SCHEMA, "Cluster"), "openshift/api security/v1")
    v.add_crd(_crd("image.openshift.io", "ImageStream", "v1", IMAGESTREAM_SCHEMA), "openshift/api image/v1")
    v.add_crd(_crd("monitoring.coreos.com", "PrometheusRule", "v1", PROMRULE_SCHEMA), "prometheus-operator v1")
    return v


def test_openshift_objects_of_every_cluster_pass_their_schemas_strictly(dist, index, openshift_schemas):
    checked = set()
    for e in index["clusters"]:
        for o in load_dir(dist / e["manifests"]):
            if openshift_schemas.has_schema(o["apiVersion"], o["kind"]):
                assert openshift_schemas.errors(o) == [], (e["name"], o["kind"], o["metadata"]["name"])
                checked.add(o["kind"])
    assert checked == {"SecurityContextConstraints", "ImageStream", "PrometheusRule"}


def test_the_schemas_catch_mistakes(objs, openshift_schemas):
    scc = copy.deepcopy(objs[("SecurityContextConstraints", "", "nvidia-driver")])
    scc["allowHostPid"] = True
    del scc["priority"]
    errors = openshift_schemas.errors(scc)
    assert any("allowHostPid" in m for m in errors) and any("priority" in m for m in errors)
    ist = copy.deepcopy(objs[("ImageStream", NS, "driver-toolkit")])
    ist["spec"]["tags"][0]["referencePolicy"] = {"type": "Remote"}
    assert openshift_schemas.errors(ist)
    rule = copy.deepcopy(objs[("PrometheusRule", NS, "nvidia-node-status-exporter-alerts")])
    rule["spec"]["groups"][0]["rules"][0]["for"] = "half an hour"
    assert openshift_schemas.errors(rule)


def test_chart_lints_for_the_openshift_kube_version(dist, entry):
    result = helm.lint(str(dist / entry["chart"]), strict=True, kube_version=f"v{entry['kubeVersion']}.0")
    assert not [m for m in result.get("messages", []) if m.get("severity", 0) >= 2] and not result.get("errors")


# ---- rules: each broken one has its exact, located message --------------------------------------------

OK = """\
platform: {type: openshift, version: "4.19"}
os: rhcos4.19
driver: {rhcosVersions: ["419.96.202507091512-0"]}
nodePools: [{name: a, gpu: H100-SXM5-80GB}]
"""


def errors(tmp_path: Path, spec: str) -> list[tuple[str, str]]:
    f = write_profile(tmp_path, spec)
    try:
        validate(load_profile(f), catalog.load())
    except UserError as exc:
        return [(i.path, i.message) for i in exc.issues]
    return []


def test_a_valid_openshift_profile_has_no_issues(tmp_path):
    assert errors(tmp_path, OK) == []


@pytest.mark.parametrize("change, path, message", [
    ("containerRuntime: containerd\n", "spec.containerRuntime",
     "OpenShift runs CRI-O only, the toolkit cannot configure containerd there; allowed: crio (or omit the field)"),
    ("nfd: {mode: deploy}\n", "spec.nfd.mode",
     "on OpenShift NFD comes from Red Hat's NFD Operator (namespace openshift-nfd), not from NFD's upstream chart; "
     "gpuop's NodeFeatureRule still applies; allowed: existing (or omit the field)"),
    ("namespace: openshift-gpu\n", "spec.namespace",
     "'openshift-gpu': OpenShift resolves the Driver Toolkit image through an image stream lookup, which does not "
     "work in default, openshift, openshift-* or kube-* namespaces; allowed: another namespace (omitted: "
     "nvidia-gpu-operator)"),
])
def test_openshift_rules(tmp_path, change, path, message):
    assert errors(tmp_path, OK + change) == [(path, message)]


@pytest.mark.parametrize("spec, path, message", [
    (OK.replace('version: "4.19"', 'version: "4.17"'), "spec.platform.version",
     "OpenShift 4.17 is outside stack release 26.7's support matrix; allowed: 4.18, 4.19, 4.20, 4.21, 4.22"),
    (OK.replace("os: rhcos4.19", "os: rhcos4.18"), "spec.os",
     "rhcos4.18 is the OS of OpenShift 4.18, not 4.19; allowed with OpenShift 4.19: rhcos4.19"),
    (OK.replace("os: rhcos4.19", "os: ubuntu24.04"), "spec.os",
     "ubuntu24.04 is an OS for kubernetes, not openshift; allowed: rhcos4.18, rhcos4.19, rhcos4.20, rhcos4.21, rhcos4.22"),
    (OK.replace('driver: {rhcosVersions: ["419.96.202507091512-0"]}', "driver: {}"), "spec.driver.rhcosVersions",
     "OpenShift builds the driver with the Driver Toolkit of each RHCOS build: list the GPU nodes' builds (`oc get "
     "nodes -L feature.node.kubernetes.io/system-os_release.OSTREE_VERSION`), e.g. [\"419.96.202507091512-0\"]"),
    (OK.replace("419.96.202507091512-0", "420.96.202510011200-0"), "spec.driver.rhcosVersions[0]",
     "420.96.202510011200-0 is an RHCOS 4.20 build, newer than the cluster (OpenShift 4.19); allowed: builds of "
     "OpenShift 4.19 or older (nodes not yet updated)"),
    (OK.replace("419.96.202507091512-0", "417.94.202410011200-0"), "spec.driver.rhcosVersions[0]",
     "417.94.202410011200-0 is an RHCOS 4.17 build, outside stack release 26.7's support matrix; allowed: builds "
     "of RHCOS 4.18, 4.19, 4.20, 4.21, 4.22"),
    (OK.replace("419.96.202507091512-0", "4.19"), "spec.driver.rhcosVersions[0]",
     "'4.19' is not an RHCOS build; allowed: the node's OSTREE_VERSION label, e.g. 419.96.202507091512-0"),
    (OK.replace("gpu: H100-SXM5-80GB}", "gpu: H100-SXM5-80GB, os: rhcos4.19}"), "spec.nodePools[0].os",
     "OpenShift nodes run RHCOS; a pool's driver image follows its RHCOS build (spec.driver.rhcosVersions); remove "
     "the field"),
])
def test_openshift_versions_and_builds(tmp_path, spec, path, message):
    assert errors(tmp_path, spec) == [(path, message)]


def test_no_rhcos_builds_needed_without_a_driver(tmp_path):
    assert errors(tmp_path, OK.replace('driver: {rhcosVersions: ["419.96.202507091512-0"]}',
                                       "driver: {enabled: false}")) == []


def test_rhcos_builds_are_openshift_only(tmp_path):
    spec = """\
        platform: {type: kubernetes, version: "1.33"}
        os: ubuntu24.04
        driver: {rhcosVersions: ["419.96.202507091512-0"]}
        nodePools: [{name: a, gpu: H100-SXM5-80GB}]
        """
    assert errors(tmp_path, spec) == [("spec.driver.rhcosVersions", "RHCOS builds are for OpenShift (Driver Toolkit "
                                       "builds); remove the field on Kubernetes")]
