"""The full GPU stack against what NVIDIA's GPU Operator v26.7 renders: GPU feature
discovery, DCGM exporter, DCGM, the operator validator, the node status exporter, the node-label
NodeFeatureRule, NFD's own chart in Argo CD and Flux, driver upgrades and the scheduling knobs.

Objects are read from the compiled output of profiles/full-stack.yaml (every component on) and compared
with the Operator's assets in ../shared/refs/gpu-operator/assets/, as the Operator transforms them
(NOTES.md §2). Switching components off is checked on the pure component renders of plans built from
in-memory profiles.
"""

from __future__ import annotations

import copy

import helm_python as helm
import pytest
import yaml

from gpuop import catalog
from gpuop.stack.registry import COMPONENTS, component_props
from gpuop.outputs import argocd
from gpuop.outputs import flux
from gpuop.kube.slots import fill

from conftest import ASSETS, by_key, load_dir
from test_helm import render
from test_plan_helpers import plan_for

NS = "gpu-operator"
FILLED = "FILLED BY THE OPERATOR"


def asset(path: str) -> dict:
    """An Operator asset with the operator's namespace placeholder filled, as the Operator does."""
    text = (ASSETS / path).read_text().replace(f'"{FILLED}"', NS)
    return yaml.safe_load(text)


@pytest.fixture(scope="module")
def entry(index) -> dict:
    return next(e for e in index["clusters"] if e["name"] == "full-stack")


@pytest.fixture(scope="module")
def full(dist, entry) -> dict:
    """The full-stack objects, without the delivery annotations gpuop adds (Argo CD sync wave, Flux
    substitution opt-out; tested in test_gitops_delivery.py), so they compare equal to the Operator's assets."""
    return by_key([without_wave(o) for o in load_dir(dist / entry["manifests"])])


def without_wave(obj: dict) -> dict:
    ann = dict(obj["metadata"].get("annotations", {}))
    wave = ann.pop("argocd.argoproj.io/sync-wave", None)
    subst = ann.pop("kustomize.toolkit.fluxcd.io/substitute", None)
    if wave is None and subst is None:
        return obj
    meta = {k: v for k, v in obj["metadata"].items() if k != "annotations"}
    if ann:
        meta["annotations"] = ann
    return {**obj, "metadata": meta}


def ds(objs, name) -> dict:
    return objs[("DaemonSet", NS, name)]


def pod(objs, name) -> dict:
    return ds(objs, name)["spec"]["template"]["spec"]


def envs(container) -> dict:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container.get("env", [])}


def image(component: str, tag: str | None = None) -> str:
    ref = catalog.load().release(None).components[component]
    return f"nvcr.io/nvidia/{ref.image}:{tag or ref.version}"


VALIDATOR = image("validator")


# ---- per component, against the Operator's assets ---------------------------------------------------

@pytest.mark.parametrize("state, name, role, cluster_role", [
    ("gpu-feature-discovery", "gpu-feature-discovery", "0200_role.yaml", "0210_clusterrole.yaml"),
    ("state-dcgm-exporter", "nvidia-dcgm-exporter", "0200_role.yaml", "0210_clusterrole.yaml"),
    ("state-dcgm", "nvidia-dcgm", "0200_role.yaml", None),
    ("state-operator-validation", "nvidia-operator-validator", "0200_role.yaml", "0210_clusterrole.yaml"),
    ("state-node-status-exporter", "nvidia-node-status-exporter", "0200_role.yaml", "0300_clusterrole.yaml"),
])
def test_daemonset_and_rbac_keep_upstream_shape(full, state, name, role, cluster_role):
    up_file = next(p.name for p in (ASSETS / state).iterdir() if p.read_text().find("kind: DaemonSet") >= 0)
    up = asset(f"{state}/{up_file}")
    ours = ds(full, name)
    assert ours["metadata"]["labels"] == up["metadata"]["labels"]
    assert ours["metadata"].get("annotations") == up["metadata"].get("annotations")
    assert ours["spec"]["selector"] == up["spec"]["selector"]
    assert ours["spec"]["template"]["metadata"]["labels"] == up["spec"]["template"]["metadata"]["labels"]
    up_pod, p = up["spec"]["template"]["spec"], ours["spec"]["template"]["spec"]
    assert up_pod["nodeSelector"].items() <= p["nodeSelector"].items()          # + the profile's additions
    for field in ("tolerations", "priorityClassName", "serviceAccountName"):
        assert p[field] == up_pod[field], field
    assert p["volumes"] == up_pod["volumes"] or name in ("nvidia-dcgm-exporter",)  # + metrics-config (checked below)
    main, up_main = p["containers"][0], up_pod["containers"][0]
    assert main["name"] == up_main["name"] and main["image"].startswith("nvcr.io/nvidia/")
    assert main.get("command") == up_main.get("command") and main.get("args") == up_main.get("args")
    assert main["securityContext"]["privileged"] is True
    assert {(m["name"], m["mountPath"]) for m in up_main.get("volumeMounts", [])} <= \
        {(m["name"], m["mountPath"]) for m in main.get("volumeMounts", [])}
    assert set(envs(up_main)) <= set(envs(main))
    assert main.get("ports") == up_main.get("ports")
    rbac_name = ours["spec"]["template"]["spec"]["serviceAccountName"]
    assert full[("Role", NS, rbac_name)]["rules"] == asset(f"{state}/{role}")["rules"]
    assert ("ServiceAccount", NS, rbac_name) in full and ("RoleBinding", NS, rbac_name) in full
    if cluster_role:
        up_cr = asset(f"{state}/{cluster_role}")
        assert full[("ClusterRole", "", up_cr["metadata"]["name"])]["rules"] == up_cr["rules"]


def test_images_come_from_the_stack_release(full):
    images = {c["name"]: c["image"] for d in [k[2] for k in full if k[0] == "DaemonSet"]
              for c in pod(full, d)["containers"]}
    assert images["gpu-feature-discovery"] == image("gfd")
    assert images["nvidia-dcgm-exporter"] == image("dcgmExporter")
    assert images["nvidia-dcgm-ctr"] == image("dcgm")
    assert images["nvidia-operator-validator"] == VALIDATOR
    assert images["nvidia-node-status-exporter"] == image("nodeStatusExporter")
    assert images["nvidia-driver-ctr"] == image("driver", "580.173.02-ubuntu24.04")   # branch "580" resolved
    for d in [k[2] for k in full if k[0] == "DaemonSet"]:
        for c in pod(full, d)["initContainers"] if "initContainers" in pod(full, d) else []:
            if c["name"].endswith("-validation"):
                assert c["image"] == VALIDATOR and c["securityContext"]["runAsUser"] == 0, (d, c["name"])


def test_gfd_as_transformed(full):
    p = pod(full, "gpu-feature-discovery")
    assert [c["name"] for c in p["initContainers"]] == ["toolkit-validation"]        # config-manager-init removed
    assert [c["name"] for c in p["containers"]] == ["gpu-feature-discovery"]         # config-manager removed
    up = asset("gpu-feature-discovery/0500_daemonset.yaml")["spec"]["template"]["spec"]
    assert p["initContainers"][0]["args"] == up["initContainers"][0]["args"]
    assert p["initContainers"][0]["volumeMounts"] == up["initContainers"][0]["volumeMounts"]
    e = envs(p["containers"][0])
    assert e["GFD_SLEEP_INTERVAL"] == "60s" and e["GFD_FAIL_ON_INIT_ERROR"] == "true"
    assert e["MIG_STRATEGY"] == "single" and e["NVIDIA_MIG_MONITOR_DEVICES"] == "all"
    assert p["containers"][0]["volumeMounts"] == up["containers"][0]["volumeMounts"]
    assert p["runtimeClassName"] == "nvidia"


def test_dcgm_exporter_as_transformed(full):
    svc, up_svc = full[("Service", NS, "nvidia-dcgm-exporter")], asset("state-dcgm-exporter/0400_service.yaml")
    assert svc == up_svc
    assert svc["spec"]["ports"] == [{"name": "gpu-metrics", "port": 9400, "targetPort": 9400, "protocol": "TCP"}]
    sm, up_sm = full[("ServiceMonitor", NS, "nvidia-dcgm-exporter")], asset("state-dcgm-exporter/0500_service_monitor.yaml")
    expected = copy.deepcopy(up_sm)
    expected["metadata"]["labels"]["release"] = "prometheus"            # serviceMonitor.additionalLabels
    expected["spec"]["endpoints"][0]["interval"] = "30s"                # serviceMonitor.interval
    assert sm == expected
    p = pod(full, "nvidia-dcgm-exporter")
    c = p["containers"][0]
    up_c = asset("state-dcgm-exporter/0800_daemonset.yaml")["spec"]["template"]["spec"]["containers"][0]
    assert c["livenessProbe"] == up_c["livenessProbe"] and c["readinessProbe"] == up_c["readinessProbe"]
    e = envs(c)
    assert (e["DCGM_EXPORTER_LISTEN"], e["DCGM_EXPORTER_KUBERNETES"]) == (":9400", "true")
    assert e["DCGM_EXPORTER_COLLECTORS"] == "/etc/dcgm-exporter/dcgm-metrics.csv"      # custom metrics
    assert e["DCGM_REMOTE_HOSTENGINE_INFO"] == "nvidia-dcgm:5555"                      # standalone DCGM on
    assert e["DCGM_EXPORTER_KUBERNETES_ENABLE_POD_LABELS"] == "true"
    assert e["DCGM_EXPORTER_KUBERNETES_POD_LABEL_ALLOWLIST_REGEX"] == r"^app$,^app\.kubernetes\.io/(name|instance)$"
    assert p["automountServiceAccountToken"] is True                                    # pod labels need the API
    assert {"name": "metrics-config", "mountPath": "/etc/dcgm-exporter/dcgm-metrics.csv", "readOnly": True,
            "subPath": "dcgm-metrics.csv"} in c["volumeMounts"]
    assert {"name": "metrics-config", "configMap": {"name": "nvidia-dcgm-exporter-metrics", "items": [
        {"key": "dcgm-metrics.csv", "path": "dcgm-metrics.csv"}]}} in p["volumes"]
    csv = full[("ConfigMap", NS, "nvidia-dcgm-exporter-metrics")]["data"]["dcgm-metrics.csv"]
    assert "DCGM_FI_DEV_GPU_UTIL, gauge, GPU utilization (in %).\n" in csv
    up_cr = asset("state-dcgm-exporter/0210_clusterrole.yaml")
    assert full[("ClusterRole", "", "nvidia-dcgm-exporter-read-pods")] == up_cr
    crb = full[("ClusterRoleBinding", "", "nvidia-dcgm-exporter-read-pods")]
    assert crb["subjects"] == [{"kind": "ServiceAccount", "name": "nvidia-dcgm-exporter", "namespace": NS}]
    assert [i["name"] for i in p["initContainers"]] == ["toolkit-validation"]


def test_dcgm_exporter_defaults_match_the_asset():
    """Vanilla exporter: built-in metrics, embedded host engine, no API token, no pod-reading RBAC."""
    from gpuop.components.dcgm_exporter import DcgmExporter

    objs = {(o["kind"], o["metadata"]["name"]): o for o in DcgmExporter.render(dict(component_props(plan_for({}))).get(DcgmExporter))}
    assert set(objs) == {("ServiceAccount", "nvidia-dcgm-exporter"), ("Role", "nvidia-dcgm-exporter"),
                         ("RoleBinding", "nvidia-dcgm-exporter"), ("Service", "nvidia-dcgm-exporter"),
                         ("DaemonSet", "nvidia-dcgm-exporter")}
    p = objs[("DaemonSet", "nvidia-dcgm-exporter")]["spec"]["template"]["spec"]
    up = asset("state-dcgm-exporter/0800_daemonset.yaml")["spec"]["template"]["spec"]
    assert p["automountServiceAccountToken"] is False and p["volumes"] == up["volumes"]
    assert envs(p["containers"][0]) == {k: v for k, v in envs(up["containers"][0]).items()}
    assert p["containers"][0]["volumeMounts"] == up["containers"][0]["volumeMounts"]


def test_dcgm_hostengine_as_transformed(full):
    assert full[("Service", NS, "nvidia-dcgm")] == asset("state-dcgm/0500_service.yaml")
    p, up = pod(full, "nvidia-dcgm"), asset("state-dcgm/0400_dcgm.yml")["spec"]["template"]["spec"]
    c, up_c = p["containers"][0], up["containers"][0]
    assert (c["ports"], c["livenessProbe"], c["readinessProbe"]) == (up_c["ports"], up_c["livenessProbe"],
                                                                    up_c["readinessProbe"])
    assert p["initContainers"][0]["volumeMounts"] == up["initContainers"][0]["volumeMounts"]
    assert p["runtimeClassName"] == "nvidia"


def test_validator_runs_the_validation_chain(full):
    p = pod(full, "nvidia-operator-validator")
    up = asset("state-operator-validation/0500_daemonset.yaml")["spec"]["template"]["spec"]
    assert [c["name"] for c in p["initContainers"]] == [
        "driver-validation", "toolkit-validation", "cuda-validation", "plugin-validation"]
    for ours, theirs in zip(p["initContainers"], up["initContainers"]):
        assert ours["name"] == theirs["name"] and ours["args"] == theirs["args"]
        assert ours["volumeMounts"] == theirs["volumeMounts"]
        upstream_env = {k: v for k, v in envs(theirs).items() if v != "FILLED BY OPERATOR"}
        assert upstream_env.items() <= envs(ours).items(), ours["name"]
        assert [e["name"] for e in ours["env"]][:len(theirs["env"])] == [e["name"] for e in theirs["env"]]
        assert ours["securityContext"]["runAsUser"] == 0
    cuda, plugin = envs(p["initContainers"][2]), envs(p["initContainers"][3])
    for e in (cuda, plugin):
        assert (e["VALIDATOR_IMAGE"], e["VALIDATOR_IMAGE_PULL_POLICY"], e["VALIDATOR_RUNTIME_CLASS"]) == \
            (VALIDATOR, "IfNotPresent", "nvidia")
    assert plugin["MIG_STRATEGY"] == "single"
    main = p["containers"][0]
    assert main["lifecycle"] == up["containers"][0]["lifecycle"] and main["volumeMounts"] == up["containers"][0]["volumeMounts"]
    assert all(m["mountPath"] == "/run/nvidia/validations" for m in main["volumeMounts"])
    assert p["volumes"] == up["volumes"] and p["runtimeClassName"] == "nvidia"


def test_every_later_operand_waits_for_the_chain(full):
    """The driver-ready / toolkit-ready files of /run/nvidia/validations order the stack on a new node."""
    waits = {d[2]: [c["name"] for c in pod(full, d[2]).get("initContainers", [])] for d in full if d[0] == "DaemonSet"}
    assert waits == {
        "nvidia-driver-daemonset": ["k8s-driver-manager"],
        "nvidia-container-toolkit-daemonset": ["driver-validation"],
        "nvidia-operator-validator": ["driver-validation", "toolkit-validation", "cuda-validation", "plugin-validation"],
        "nvidia-device-plugin-daemonset": ["toolkit-validation"],
        "nvidia-device-plugin-health-f4899e": ["toolkit-validation"],       # the frontier pool's XID policy
        "nvidia-dcgm": ["toolkit-validation"],
        "nvidia-dcgm-exporter": ["toolkit-validation"],
        "gpu-feature-discovery": ["toolkit-validation"],
        "nvidia-node-status-exporter": [],
        "nvidia-mig-manager": ["toolkit-validation"],        # all-disabled on the MIG-capable pools
    }
    for name in ("nvidia-device-plugin-daemonset", "nvidia-dcgm", "nvidia-dcgm-exporter", "gpu-feature-discovery"):
        assert "/run/nvidia/validations/toolkit-ready" in pod(full, name)["initContainers"][0]["args"][0]


def test_node_status_exporter_as_transformed(full):
    assert full[("Service", NS, "nvidia-node-status-exporter")] == asset("state-node-status-exporter/0500_service.yaml")
    sm = full[("ServiceMonitor", NS, "nvidia-node-status-exporter")]
    expected = asset("state-node-status-exporter/0600_service_monitor.yaml")
    expected["metadata"]["labels"]["release"] = "prometheus"
    expected["spec"]["endpoints"][0]["interval"] = "15s"
    assert sm == expected
    c = pod(full, "nvidia-node-status-exporter")["containers"][0]
    up_c = asset("state-node-status-exporter/0700_daemonset.yaml")["spec"]["template"]["spec"]["containers"][0]
    assert envs(c) == envs(up_c) and c["volumeMounts"] == up_c["volumeMounts"]
    assert c["imagePullPolicy"] == "IfNotPresent" and c["securityContext"]["runAsUser"] == 0


# ---- custom resources: structure checked by hand (their CRDs are not among the reference CRDs) --------

NFD_OPS = {"In", "NotIn", "InRegexp", "Exists", "DoesNotExist", "Gt", "Lt", "GtLt", "IsTrue", "IsFalse"}


def test_node_feature_rule_labels_every_deployed_component(full):
    (rule_key,) = [k for k in full if k[0] == "NodeFeatureRule"]
    nfr = full[rule_key]
    assert nfr["apiVersion"] == "nfd.k8s-sigs.io/v1alpha1" and "namespace" not in nfr["metadata"]  # cluster scoped
    rules = nfr["spec"]["rules"]
    for r in rules:
        assert set(r) == {"name", "labels", "matchFeatures"} and r["name"]
        for term in r["matchFeatures"]:
            assert term["feature"] == "pci.device"
            for expr in term["matchExpressions"].values():
                assert expr["op"] in NFD_OPS and isinstance(expr["value"], list)
            # the MIG-capable and per-pool rules also match the GPU models' PCI device ids
            assert {k: v for k, v in term["matchExpressions"].items() if k != "device"} == {
                "vendor": {"op": "In", "value": ["10de"]}, "class": {"op": "In", "value": ["0300", "0302"]}}
            assert r["name"] in ("nvidia.com/gpu.present", "nvidia.com/gpu.deploy") or "device" in term["matchExpressions"]
    assert rules[0]["labels"] == {"nvidia.com/gpu.present": "true"}
    published = {k: v for r in rules[1:] if r["name"].startswith("nvidia.com/gpu.deploy") for k, v in r["labels"].items()}
    # the frontier pool's XID policy: its own device plugin DaemonSet selects the label the pool's rule sets
    published.update({k: v for r in rules[1:] for k, v in r["labels"].items() if k == "nvidia.com/device-plugin.health"})
    selected = {}
    for k in full:
        if k[0] == "DaemonSet":
            selected.update({key: v for key, v in pod(full, k[2])["nodeSelector"].items() if key.startswith("nvidia.com/")})
    assert published == selected            # each DaemonSet's deploy label, and only those
    published.pop("nvidia.com/device-plugin.health")
    assert len(published) == 9


def test_service_monitors_select_their_services(full):
    for k in [k for k in full if k[0] == "ServiceMonitor"]:
        sm, svc = full[k], full[("Service", NS, k[2])]
        assert sm["spec"]["selector"]["matchLabels"].items() <= svc["metadata"]["labels"].items()
        assert sm["spec"]["endpoints"][0]["port"] in {p["name"] for p in svc["spec"]["ports"]}
        assert sm["spec"]["namespaceSelector"] == {"matchNames": [NS]}
        assert sm["spec"]["endpoints"][0]["path"] == "/metrics"


# ---- opt-out and scheduling knobs --------------------------------------------------------------------

def test_every_daemonset_honours_the_opt_out_labels_and_the_profiles_placement(full):
    for k in [k for k in full if k[0] == "DaemonSet"]:
        p = pod(full, k[2])
        deploy = next(key for key in p["nodeSelector"] if key.startswith("nvidia.com/gpu.deploy."))
        component = deploy.removeprefix("nvidia.com/gpu.deploy.")
        policy = k[2].startswith("nvidia-device-plugin-health-")     # a pool XID policy's own device plugin
        assert p["nodeSelector"] == {deploy: "true", "kubernetes.io/os": "linux",
                                     **({"nvidia.com/device-plugin.health": k[2].removeprefix("nvidia-device-plugin-")}
                                        if policy else {})}
        terms = p["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
        # the cluster's device plugin stays off the nodes a pool policy's DaemonSet serves
        off_policy = [{"key": "nvidia.com/device-plugin.health", "operator": "DoesNotExist"}] \
            if k[2] == "nvidia-device-plugin-daemonset" else []
        assert terms == [{"matchExpressions": [
            {"key": "nvidia.com/gpu.deploy.operands", "operator": "NotIn", "values": ["false"]},
            {"key": f"gpuop/deploy.{component}", "operator": "NotIn", "values": ["false"]},
            {"key": "node.example.com/gpu-maintenance", "operator": "DoesNotExist"},
            *off_policy,
        ]}], k
        assert p["priorityClassName"] == "system-node-critical"
        assert p["tolerations"] == [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]


def test_registry_mirror_pull_secrets_and_resources_reach_the_new_components(dist, index):
    entry = next(e for e in index["clusters"] if e["name"] == "lab-west")
    objs = by_key(load_dir(dist / entry["manifests"]))
    for name in ("gpu-feature-discovery", "nvidia-dcgm-exporter", "nvidia-operator-validator"):
        p = pod(objs, name)
        assert p["imagePullSecrets"] == [{"name": "lab-registry"}]
        for c in p["containers"] + p.get("initContainers", []):
            assert c["image"].startswith("registry.lab.example.com/nvidia/"), (name, c["name"])
    cuda = envs(pod(objs, "nvidia-operator-validator")["initContainers"][2])
    assert cuda["VALIDATOR_IMAGE_PULL_SECRETS"] == "lab-registry"
    assert cuda["VALIDATOR_IMAGE"] == "registry.lab.example.com/nvidia/gpu-operator:v26.7.0"


def test_per_component_version_and_resources_overrides():
    plan = plan_for({"gfd": {"version": "v0.21.0", "resources": {"limits": {"memory": "1Gi"}}},
                     "dcgmExporter": {"version": "4.6.1-4.9.0-distroless"}, "validator": {"version": "v26.7.1"},
                     "dcgm": {"enabled": True, "version": "4.6.1-1-ubuntu24.04"}})
    objs = {}
    for c, props in component_props(plan):
        for o in (c.render(props) if props else []):
            objs[(o["kind"], o["metadata"].get("namespace", ""), o["metadata"]["name"])] = fill(o, plan.values)
    assert pod(objs, "gpu-feature-discovery")["containers"][0]["image"] == "nvcr.io/nvidia/k8s-device-plugin:v0.21.0"
    assert pod(objs, "gpu-feature-discovery")["containers"][0]["resources"] == {"limits": {"memory": "1Gi"}}
    assert pod(objs, "nvidia-dcgm-exporter")["containers"][0]["image"].endswith(":4.6.1-4.9.0-distroless")
    assert pod(objs, "nvidia-dcgm")["containers"][0]["image"].endswith("/cloud-native/dcgm:4.6.1-1-ubuntu24.04")
    # the validator version is also every validation init container's
    assert pod(objs, "nvidia-container-toolkit-daemonset")["initContainers"][0]["image"] == \
        "nvcr.io/nvidia/gpu-operator:v26.7.1"
    assert pod(objs, "nvidia-device-plugin-daemonset")["containers"][0]["image"].endswith(":v0.20.0")  # untouched


# ---- driver upgrades ---------------------------------------------------------------------------------

def test_upgrade_policy_reaches_the_driver_manager_and_the_rollout(full):
    d = ds(full, "nvidia-driver-daemonset")
    assert d["spec"]["updateStrategy"] == {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 2, "maxSurge": 0}}
    manager = pod(full, "nvidia-driver-daemonset")["initContainers"][0]
    e = envs(manager)
    assert (e["ENABLE_GPU_POD_EVICTION"], e["ENABLE_AUTO_DRAIN"], e["DRAIN_TIMEOUT_SECONDS"],
            e["DRAIN_DELETE_EMPTYDIR_DATA"], e["DRAIN_USE_FORCE"], e["DRAIN_POD_SELECTOR_LABEL"]) == \
        ("true", "true", "600s", "true", "false", "")
    up = asset("state-driver/0500_daemonset.yaml")["spec"]["template"]["spec"]["initContainers"][0]
    # same variables, same order, and the config digest TransformDriver appends
    assert [x["name"] for x in manager["env"]] == [x["name"] for x in up["env"]] + ["DRIVER_CONFIG_DIGEST"]


@pytest.mark.parametrize("policy, strategy", [
    ({"autoUpgrade": False}, {"type": "OnDelete"}),
    ({"maxParallelUpgrades": 0}, {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "100%", "maxSurge": 0}}),
    ({}, {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}}),
])
def test_driver_update_strategy(policy, strategy):
    from gpuop.components.driver import Driver

    plan = plan_for({"driver": {"upgradePolicy": policy}})
    (daemonset,) = [o for o in Driver.render(dict(component_props(plan)).get(Driver)) if o["kind"] == "DaemonSet"]
    assert daemonset["spec"]["updateStrategy"] == strategy


# ---- turning a component off removes all its objects --------------------------------------------------

ALL_ON = {"dcgm": {"enabled": True}, "nodeStatusExporter": {"enabled": True, "serviceMonitor": {"enabled": True}},
          "dcgmExporter": {"podLabels": True, "serviceMonitor": {"enabled": True},
                           "metrics": [{"field": "DCGM_FI_DEV_GPU_UTIL", "type": "gauge", "help": "GPU utilization."}]}}


def objects(spec: dict) -> dict:
    plan = plan_for(spec)
    out = {}
    for c, props in component_props(plan):
        for o in (c.render(props) if props else []):
            out[(o["kind"], o["metadata"]["name"])] = (c.name, o)
    return out


@pytest.mark.parametrize("section, component, deploy", [
    ("driver", "driver", "driver"),
    ("toolkit", "toolkit", "container-toolkit"),
    ("devicePlugin", "device-plugin", "device-plugin"),
    ("dcgm", "dcgm", "dcgm"),
    ("dcgmExporter", "dcgm-exporter", "dcgm-exporter"),
    ("gfd", "gpu-feature-discovery", "gpu-feature-discovery"),
    ("nodeStatusExporter", "node-status-exporter", "node-status-exporter"),
])
def test_turning_a_component_off_removes_all_its_objects(section, component, deploy):
    on = objects(ALL_ON)
    off_spec = copy.deepcopy(ALL_ON)
    off_spec.setdefault(section, {})["enabled"] = False
    off = objects(off_spec)
    owned = {k for k, (c, _) in on.items() if c == component}
    assert owned and {k[0] for k in owned} >= {"ServiceAccount", "DaemonSet"}
    assert not owned & set(off), f"{component} left objects behind: {owned & set(off)}"
    rule = off[("NodeFeatureRule", "nvidia-gpu-node-labels")][1]["spec"]["rules"][1]["labels"]
    assert f"nvidia.com/gpu.deploy.{deploy}" not in rule
    if section == "dcgmExporter":
        assert {("Service", "nvidia-dcgm-exporter"), ("ServiceMonitor", "nvidia-dcgm-exporter"),
                ("ConfigMap", "nvidia-dcgm-exporter-metrics"), ("ClusterRole", "nvidia-dcgm-exporter-read-pods"),
                ("ClusterRoleBinding", "nvidia-dcgm-exporter-read-pods")} <= owned
    if section == "devicePlugin":        # the validator does not wait for a plugin that will not come
        validator = off[("DaemonSet", "nvidia-operator-validator")][1]["spec"]["template"]["spec"]
        assert "plugin-validation" not in [c["name"] for c in validator["initContainers"]]
    if section == "dcgm":                # the exporter falls back to its embedded host engine
        exporter = off[("DaemonSet", "nvidia-dcgm-exporter")][1]["spec"]["template"]["spec"]["containers"][0]
        assert "DCGM_REMOTE_HOSTENGINE_INFO" not in envs(exporter)


def test_no_node_labels_rule_when_the_profile_labels_nodes_itself():
    assert ("NodeFeatureRule", "nvidia-gpu-node-labels") not in objects({"nfd": {"rules": False}})


def test_helm_values_switch_a_component_off_at_deploy_time(dist, entry):
    objs = render(dist / entry["chart"], {"dcgmExporter": {"enabled": False}, "nodeStatusExporter": {"enabled": False}},
                  entry)
    names = {(o["kind"], o["metadata"]["name"]) for o in objs}
    assert not {n for n in names if "dcgm-exporter" in n[1] or "node-status-exporter" in n[1]}
    assert ("DaemonSet", "nvidia-dcgm") in names


# ---- NFD itself: Argo CD Application and Flux HelmRepository + HelmRelease ---------------------------

def test_nfd_is_deployed_from_its_own_chart_before_the_stack(dist, entry):
    nfd = catalog.load().release(None).nfd
    apps = {a["metadata"]["name"]: a for a in load_dir(dist / entry["argocd"])}
    gpu, app = apps["gpuop-full-stack"], apps["gpuop-full-stack-nfd"]
    wave = "argocd.argoproj.io/sync-wave"
    assert int(app["metadata"]["annotations"][wave]) < int(gpu["metadata"]["annotations"][wave])
    src = app["spec"]["source"]
    assert (src["repoURL"], src["chart"], src["targetRevision"]) == (nfd.repository, nfd.chart, nfd.version)
    values = src["helm"]["valuesObject"]
    assert values["master"]["config"]["extraLabelNs"] == ["nvidia.com"]
    assert values["worker"]["config"]["sources"]["pci"] == {"deviceClassWhitelist": ["02", "0200", "0207", "0300", "0302"],
                                                            "deviceLabelFields": ["vendor"]}
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in values["worker"]["tolerations"]
    assert app["spec"]["destination"]["namespace"] == nfd.namespace and "CreateNamespace=true" in app["spec"]["syncPolicy"]["syncOptions"]
    assert "SkipDryRunOnMissingResource=true" in gpu["spec"]["syncPolicy"]["syncOptions"]
    fl = {(o["kind"], o["metadata"]["name"]): o for o in load_dir(dist / entry["flux"])}
    repo = fl[("HelmRepository", "node-feature-discovery")]
    release = fl[("HelmRelease", "gpuop-full-stack-nfd")]
    assert repo["spec"]["url"] == nfd.repository
    assert release["spec"]["chart"]["spec"] == {"chart": nfd.chart, "version": nfd.version, "interval": "10m",
                                                "sourceRef": {"kind": "HelmRepository", "name": "node-feature-discovery",
                                                              "namespace": "flux-system"}}
    assert release["spec"]["values"] == values and release["spec"]["install"]["createNamespace"] is True
    assert fl[("HelmRelease", "gpuop-full-stack")]["spec"]["dependsOn"] == [
        {"name": "gpuop-full-stack-nfd", "namespace": "flux-system"}]


def test_existing_nfd_gets_no_nfd_objects():
    from gpuop.profile.settings import GitOps

    plan = plan_for({"nfd": {"mode": "existing"}})
    gitops = GitOps(repoURL="https://git.example.com/x.git")
    assert list(argocd.files(plan, gitops, "c/argocd", "dist/c/chart")) == ["c/argocd/application.yaml"]
    objs = flux.objects(plan, gitops, "dist/c/chart")
    assert [o["kind"] for o in objs] == ["GitRepository", "HelmRelease"] and "dependsOn" not in objs[1]["spec"]
    assert ("NodeFeatureRule", "nvidia-gpu-node-labels") in objects({"nfd": {"mode": "existing"}})


def test_helm_chart_lints_with_the_crd_kinds(dist, entry):
    result = helm.lint(str(dist / entry["chart"]), strict=True, kube_version=f"v{entry['kubeVersion']}.0")
    assert not [m for m in result.get("messages", []) if m.get("severity", 0) >= 2]
