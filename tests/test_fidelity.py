"""Each operand, field by field, against what NVIDIA's GPU Operator v26.7 renders for the same settings.

The upstream side is built here from the Operator's own assets (../shared/refs/gpu-operator/assets,
byte-identical to NVIDIA/gpu-operator@a22dbf67 assets/) by the transform rules of
controllers/object_controls.go (`OC` below), ported one function at a time and named after it:
setContainerEnv (replace in place, else append), transformValidationInitContainer, handleDevicePluginConfig,
applyMIGConfiguration, transformDevicePluginCtrForCDI, TransformMIGManager, TransformToolkit /
transformForRuntime, TransformDriver (subscription mounts, DRIVER_CONFIG_DIGEST), OC:RuntimeClasses.
The gpuop side is a plan built from a profile (tests/test_plan_helpers.py plan_for) rendered through the
registry and filled with the chart's default values, as the manifests writer does.

Compared per container: names and order, command, args, env (ordered: name and value or fieldPath),
volume mounts, resources, privileged; per pod: hostPID, hostIPC, shareProcessNamespace,
runtimeClassName, volumes. Not compared here: images and pull policies (test_components.py), security
contexts beyond `privileged`, and the fields where gpuop differs on purpose, each tested on its own
below with the reason in the component's docstring (service account tokens, the MPS ServiceAccount,
the driver's DRIVER_CONFIG_DIGEST value).

Settings: containerd / CRI-O / docker, toolkit on / preinstalled, MIG none / single / mixed, MPS,
time-slicing, RHEL, SLES, OpenShift; every component with its own resources so a misrouted one shows.
"""

from __future__ import annotations

import copy

import pytest
import yaml

from gpuop.components.driver import config_digest
from gpuop.kube.slots import fill
from gpuop.stack.registry import component_props

from conftest import ASSETS, REFS
from test_plan_helpers import plan_for

# Distinct resources per component: where each lands tells which values key the Operator (and gpuop) used.
RES = {key: {"limits": {"cpu": f"{100 + i}m"}} for i, key in enumerate(
    ("devicePlugin", "gfd", "validator", "driver", "toolkit", "dcgm", "dcgmExporter", "migManager",
     "nodeStatusExporter"))}
TOOLKIT_INSTALL_DIR = "/usr/local/nvidia"          # ClusterPolicy CRD default toolkit.installDir
PLUGIN_CONFIG = "device-plugin-config"              # gpuop's devicePlugin.config.name (plugin_config.py)


def spec_with(**extra) -> dict:
    """A profile spec with every component's resources set (and DCGM on), plus `extra`."""
    spec: dict = {key: {"resources": r} for key, r in RES.items()}
    spec["dcgm"]["enabled"] = True
    spec["nodeStatusExporter"]["enabled"] = True
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(spec.get(key), dict):
            spec[key] = {**spec[key], **value}
        else:
            spec[key] = value
    return spec


def render(spec: dict) -> tuple[object, dict]:
    plan = plan_for(spec)
    out = {}
    for component, props in component_props(plan):
        for o in component.objects(props):
            o = fill(o, plan.values)
            out[(o["kind"], o["metadata"]["name"])] = o
    return plan, out


def pod(objs: dict, name: str) -> dict:
    return objs[("DaemonSet", name)]["spec"]["template"]["spec"]


# ---- the Operator's transforms (OC), on an asset ---------------------------------------------------

def asset_pod(path: str) -> dict:
    doc = yaml.safe_load((ASSETS / path).read_text())
    return copy.deepcopy(doc["spec"]["template"]["spec"])


def set_env(c: dict, name: str, value: str) -> None:
    """OC:setContainerEnv: replace the value in place, else append."""
    for e in c.setdefault("env", []):
        if e["name"] == name:
            e.pop("valueFrom", None)
            e["value"] = value
            return
    c["env"].append({"name": name, "value": value})


def ctr(p: dict, name: str) -> dict:
    return next(c for c in p.get("initContainers", []) + p["containers"] if c["name"] == name)


def drop(p: dict, *names: str) -> None:
    for key in ("initContainers", "containers"):
        p[key] = [c for c in p.get(key, []) if c["name"] not in names]


def validation_inits(p: dict) -> None:
    """OC:transformValidationInitContainer: validator resources on every `*validation*` init container."""
    for c in p.get("initContainers", []):
        if "validation" in c["name"]:
            c["resources"] = RES["validator"]


def all_containers(p: dict, key: str) -> None:
    """The Transform*'s "all containers" loop: the component's resources."""
    for c in p["containers"]:
        c["resources"] = RES[key]


def mig_configuration(c: dict, strategy: str | None) -> None:
    """OC:applyMIGConfiguration."""
    if not strategy:
        set_env(c, "NVIDIA_MIG_MONITOR_DEVICES", "all")
        return
    set_env(c, "MIG_STRATEGY", strategy)
    if strategy != "none":
        set_env(c, "NVIDIA_MIG_MONITOR_DEVICES", "all")


def device_plugin_config(p: dict, config: bool, resources_key: str) -> None:
    """OC:handleDevicePluginConfig + transformConfigManager{Init,Sidecar}Container."""
    if not config:
        drop(p, "config-manager-init", "config-manager")
        return
    for c in p["containers"]:
        if c["name"] in ("nvidia-device-plugin", "gpu-feature-discovery", "mps-control-daemon-ctr"):
            set_env(c, "CONFIG_FILE", "/config/config.yaml")
            c["volumeMounts"] += [{"name": "config", "mountPath": "/config"},
                                  {"name": PLUGIN_CONFIG, "mountPath": "/available-configs"}]
    if not p.get("hostPID"):
        p["shareProcessNamespace"] = True
    p["volumes"] += [{"name": PLUGIN_CONFIG, "configMap": {"name": PLUGIN_CONFIG}}, {"name": "config", "emptyDir": {}}]
    for name in ("config-manager-init", "config-manager"):
        c = ctr(p, name)
        if name == "config-manager-init":      # configManagerResourceRequirements
            c["resources"] = RES["gfd" if any(x["name"] == "gpu-feature-discovery" for x in p["containers"])
                                 else "devicePlugin"]
        set_env(c, "DEFAULT_CONFIG", "default")
        set_env(c, "FALLBACK_STRATEGIES", "empty")
        c["volumeMounts"] = c.get("volumeMounts", []) + [{"name": "config", "mountPath": "/config"},
                                                         {"name": PLUGIN_CONFIG, "mountPath": "/available-configs"}]


def up_device_plugin(s: dict) -> dict:
    """OC:TransformDevicePlugin (CDI on, the v26.7 default)."""
    p = asset_pod("state-device-plugin/0500_daemonset.yaml")
    main = ctr(p, "nvidia-device-plugin")
    validation_inits(p)
    all_containers(p, "devicePlugin")
    device_plugin_config(p, s["config"], "devicePlugin")
    p["runtimeClassName"] = "nvidia"
    mig_configuration(main, s["mig"])
    set_env(main, "CDI_ENABLED", "true")                                  # transformDevicePluginCtrForCDI
    set_env(main, "DEVICE_LIST_STRATEGY", "cdi-annotations,cdi-cri")
    set_env(main, "CDI_ANNOTATION_PREFIX", "cdi.k8s.io/")
    if s["toolkit"]:
        set_env(main, "NVIDIA_CDI_HOOK_PATH", f"{TOOLKIT_INSTALL_DIR}/toolkit/nvidia-cdi-hook")
    return p


def up_mps(s: dict) -> dict:
    """OC:TransformMPSControlDaemon."""
    p = asset_pod("state-mps-control-daemon/0400_daemonset.yaml")
    validation_inits(p)
    ctr(p, "mps-control-daemon-mounts")["resources"] = RES["devicePlugin"]
    all_containers(p, "devicePlugin")
    device_plugin_config(p, s["config"], "devicePlugin")
    p["runtimeClassName"] = "nvidia"
    mig_configuration(ctr(p, "mps-control-daemon-ctr"), s["mig"])
    return p


def up_gfd(s: dict) -> dict:
    """OC:TransformGPUDiscoveryPlugin."""
    p = asset_pod("gpu-feature-discovery/0500_daemonset.yaml")
    validation_inits(p)
    all_containers(p, "gfd")
    if s["openshift"]:
        set_env(p["containers"][0], "USE_NODE_FEATURE_API", "false")
    device_plugin_config(p, s["config"], "gfd")
    p["runtimeClassName"] = "nvidia"
    mig_configuration(p["containers"][0], s["mig"])
    return p


def up_mig_manager(s: dict) -> dict:
    """OC:TransformMIGManager with a custom config (`migManager.config.name`)."""
    p = asset_pod("state-mig-manager/0600_daemonset.yaml")
    validation_inits(p)
    all_containers(p, "migManager")
    p["runtimeClassName"] = "nvidia"
    for v in p["volumes"]:
        if "mig-parted-config" in v["name"]:
            v["configMap"]["name"] = "custom-mig-parted-config"
        if "gpu-clients" in v["name"]:
            v["configMap"]["name"] = "default-gpu-clients"
    main = p["containers"][0]
    set_env(main, "CONFIG_FILE", "/mig-parted-config/config.yaml")
    set_env(main, "CDI_ENABLED", "true")
    if s["toolkit"]:
        set_env(main, "NVIDIA_CDI_HOOK_PATH", f"{TOOLKIT_INSTALL_DIR}/toolkit/nvidia-cdi-hook")
    return p


RUNTIME_FILES = {        # OC constants DefaultContainerdConfigFile ... and getRuntimeSocketFile
    "containerd": ("/etc/containerd/config.toml", "/etc/containerd/conf.d/99-nvidia.toml", "/run/containerd/containerd.sock"),
    "crio": ("/etc/crio/config.toml", "/etc/crio/crio.conf.d/99-nvidia.conf", ""),
    "docker": ("/etc/docker/daemon.json", "", "/var/run/docker.sock"),
}


def up_toolkit(s: dict) -> dict:
    """OC:TransformToolkit + transformToolkitCtrForCDI + transformForRuntime / transformRuntimeConfigAndSocketMounts."""
    p = asset_pod("state-container-toolkit/0500_daemonset.yaml")
    main = ctr(p, "nvidia-container-toolkit-ctr")
    validation_inits(p)
    all_containers(p, "toolkit")
    for name, value in (("CDI_ENABLED", "true"), ("NVIDIA_RUNTIME_SET_AS_DEFAULT", "false"),
                        ("NVIDIA_CONTAINER_RUNTIME_MODE", "cdi"), ("CRIO_CONFIG_MODE", "config")):
        set_env(main, name, value)
    rt = s["runtime"]
    if not s["openshift"] and rt == "crio":
        next(v for v in p["volumes"] if v["name"] == "crio-hooks")["hostPath"]["path"] = "/usr/share/containers/oci/hooks.d"
    set_env(main, "RUNTIME", rt)
    if rt == "containerd":
        set_env(main, "CONTAINERD_RUNTIME_CLASS", "nvidia")
    config, drop_in, socket = RUNTIME_FILES[rt]
    base = lambda path: path.rsplit("/", 1)[1]                     # noqa: E731
    parent = lambda path: path.rsplit("/", 1)[0]                   # noqa: E731
    set_env(main, "RUNTIME_CONFIG", "/runtime/config-dir/" + base(config))
    set_env(main, f"{rt.upper()}_CONFIG", "/runtime/config-dir/" + base(config))
    main["volumeMounts"].append({"name": f"{rt}-config", "mountPath": "/runtime/config-dir/"})
    p["volumes"].append({"name": f"{rt}-config", "hostPath": {"path": parent(config), "type": "DirectoryOrCreate"}})
    if drop_in:
        set_env(main, "RUNTIME_DROP_IN_CONFIG", "/runtime/config-dir.d/" + base(drop_in))
        set_env(main, "RUNTIME_DROP_IN_CONFIG_HOST_PATH", drop_in)
        main["volumeMounts"].append({"name": f"{rt}-drop-in-config", "mountPath": "/runtime/config-dir.d/"})
        p["volumes"].append({"name": f"{rt}-drop-in-config", "hostPath": {"path": parent(drop_in), "type": "DirectoryOrCreate"}})
    if socket:
        set_env(main, "RUNTIME_SOCKET", "/runtime/sock-dir/" + base(socket))
        set_env(main, f"{rt.upper()}_SOCKET", "/runtime/sock-dir/" + base(socket))
        main["volumeMounts"].append({"name": f"{rt}-socket", "mountPath": "/runtime/sock-dir/"})
        p["volumes"].append({"name": f"{rt}-socket", "hostPath": {"path": parent(socket)}})
    return p


def up_validator(s: dict) -> dict:
    """OC:TransformValidator + TransformValidatorComponent for driver, toolkit, cuda and plugin."""
    p = asset_pod("state-operator-validation/0500_daemonset.yaml")
    all_containers(p, "validator")                  # TransformValidatorShared
    p["runtimeClassName"] = "nvidia"
    for c in list(p["initContainers"]):
        c["resources"] = RES["validator"]
        component = c["name"].removesuffix("-validation")
        if component == "plugin" and not s["device_plugin"]:
            p["initContainers"].remove(c)
            continue
        if component in ("cuda", "plugin"):
            set_env(c, "VALIDATOR_IMAGE", s["validator_image"])
            # raw validator.imagePullPolicy upstream; gpuop's one pull policy (fidelity note: "Common")
            set_env(c, "VALIDATOR_IMAGE_PULL_POLICY", s["pull_policy"])
            set_env(c, "VALIDATOR_RUNTIME_CLASS", "nvidia")
        if component == "plugin":
            set_env(c, "MIG_STRATEGY", s["mig"] or "")
    return p


def up_node_status_exporter(s: dict) -> dict:
    """OC:TransformNodeStatusExporter."""
    p = asset_pod("state-node-status-exporter/0700_daemonset.yaml")
    all_containers(p, "nodeStatusExporter")
    return p


def up_dcgm(s: dict) -> dict:
    """OC:TransformDCGM."""
    p = asset_pod("state-dcgm/0400_dcgm.yml")
    validation_inits(p)
    all_containers(p, "dcgm")
    p["runtimeClassName"] = "nvidia"
    return p


def up_dcgm_exporter(s: dict) -> dict:
    """OC:TransformDCGMExporter, standalone DCGM on (DCGM_REMOTE_HOSTENGINE_INFO)."""
    p = asset_pod("state-dcgm-exporter/0800_daemonset.yaml")
    validation_inits(p)
    all_containers(p, "dcgmExporter")
    p["runtimeClassName"] = "nvidia"
    set_env(p["containers"][0], "DCGM_REMOTE_HOSTENGINE_INFO", "nvidia-dcgm:5555")
    return p


# SubscriptionPathMap (OC), mount path -> (host path, type)
SUBSCRIPTIONS = {
    "rhel": {"/run/secrets/etc-pki-entitlement": ("/etc/pki/entitlement", "Directory"),
             "/run/secrets/redhat.repo": ("/etc/yum.repos.d/redhat.repo", "File"),
             "/run/secrets/rhsm": ("/etc/rhsm", "Directory")},
    "sles": {"/etc/zypp/credentials.d": ("/etc/zypp/credentials.d", "Directory"),
             "/etc/SUSEConnect": ("/etc/SUSEConnect", "FileOrCreate")},
}


def subscription_mounts(os_id: str, runtime: str, openshift: bool) -> tuple[list, list]:
    """The end of OC:transformDriverContainer: (driver container mounts, pod volumes)."""
    if not ((os_id == "rhel" and not openshift and runtime != "crio") or os_id in ("sles", "sl-micro")):
        return [], []
    paths = SUBSCRIPTIONS[os_id]
    mounts, volumes = [], []
    for i, path in enumerate(sorted(paths)):
        mounts.append({"name": f"subscription-config-{i}", "mountPath": path, "readOnly": True})
        host, type_ = paths[path]
        volumes.append({"name": f"subscription-config-{i}", "hostPath": {"path": host, "type": type_}})
    return mounts, volumes


def golden_driver_pod() -> dict:
    """The Operator's own driver render (golden/driver-minimal.yaml), DRIVER_CONFIG_DIGEST taken out."""
    docs = yaml.safe_load_all((REFS / "gpu-operator" / "golden" / "driver-minimal.yaml").read_text())
    p = copy.deepcopy(next(d for d in docs if d and d["kind"] == "DaemonSet")["spec"]["template"]["spec"])
    for c in p["initContainers"] + p["containers"]:
        c["env"] = [e for e in c.get("env", []) if e["name"] != "DRIVER_CONFIG_DIGEST"]
    return p


# ---- comparison ------------------------------------------------------------------------------------

def env_view(c: dict) -> list:
    return [(e["name"], e["valueFrom"]["fieldRef"]["fieldPath"] if "valueFrom" in e else e.get("value", ""))
            for e in c.get("env", [])]


def container_view(c: dict) -> dict:
    return {"command": c.get("command"), "args": c.get("args"), "env": env_view(c),
            "volumeMounts": sorted((m["name"], m["mountPath"], bool(m.get("readOnly")), m.get("subPath"),
                                    m.get("mountPropagation")) for m in c.get("volumeMounts", [])),
            "resources": c.get("resources") or None,
            "privileged": (c.get("securityContext") or {}).get("privileged")}


def volume_view(v: dict) -> tuple:
    if "hostPath" in v:
        return ("hostPath", v["hostPath"]["path"], v["hostPath"].get("type"))
    if "configMap" in v:
        return ("configMap", v["configMap"]["name"], tuple((i["key"], i["path"]) for i in v["configMap"].get("items", [])))
    return tuple(sorted(k for k in v if k != "name"))


def pod_view(p: dict) -> dict:
    return {
        "initContainers": [c["name"] for c in p.get("initContainers", [])],
        "containers": [c["name"] for c in p["containers"]],
        **{c["name"]: container_view(c) for c in p.get("initContainers", []) + p["containers"]},
        **{f: p.get(f) for f in ("hostPID", "hostIPC", "shareProcessNamespace", "runtimeClassName")},
        "volumes": {v["name"]: volume_view(v) for v in p["volumes"]},
    }


def assert_same(ours: dict, upstream: dict) -> None:
    o, u = pod_view(ours), pod_view(upstream)
    for key in sorted(set(o) | set(u), key=str):
        assert o.get(key) == u.get(key), key


# ---- scenarios -------------------------------------------------------------------------------------

def pools(**pool) -> list[dict]:
    return [{"name": "a", "gpu": "H100-SXM5-80GB", **pool}]


SCENARIOS = {
    # id: (profile spec, the settings the Operator's transforms see)
    "containerd": (spec_with(), {}),
    "crio": (spec_with(containerRuntime="crio"), {"runtime": "crio"}),
    "docker": (spec_with(containerRuntime="docker"), {"runtime": "docker"}),
    "toolkit-preinstalled": (spec_with(toolkit={"enabled": False}), {"toolkit": False}),
    "mig-none": (spec_with(nodePools=pools(mig={"strategy": "none"})), {"mig": "none"}),
    "mig-single": (spec_with(nodePools=pools(mig={"strategy": "single", "layout": {"1g.10gb": 7}})), {"mig": "single"}),
    "mig-mixed": (spec_with(nodePools=pools(mig={"strategy": "mixed", "layout": {"3g.40gb": 1, "2g.20gb": 1, "1g.10gb": 2}})),
                  {"mig": "mixed"}),
    "time-slicing": (spec_with(nodePools=pools(sharing={"timeSlicing": {"replicas": 4}})), {"config": True}),
    "mps": (spec_with(nodePools=pools(sharing={"mps": {"replicas": 2}})), {"config": True}),
    "rhel": (spec_with(os="rhel9.4"), {"os_id": "rhel"}),
    "rhel-crio": (spec_with(os="rhel9.4", containerRuntime="crio"), {"os_id": "rhel", "runtime": "crio"}),
    "sles": (spec_with(os="sles15.6"), {"os_id": "sles"}),
    "device-plugin-off": (spec_with(devicePlugin={"enabled": False}), {"device_plugin": False}),
    "openshift": (spec_with(platform={"type": "openshift", "version": "4.19"}, os="rhcos4.19",
                            driver={"rhcosVersions": ["419.96.202507091512-0"], "resources": RES["driver"]}),
                  {"openshift": True, "runtime": "crio", "os_id": "rhcos"}),
}
DEFAULTS = {"runtime": "containerd", "toolkit": True, "mig": "single", "config": False, "openshift": False,
            "os_id": "ubuntu", "device_plugin": True}


@pytest.fixture(scope="module", params=sorted(SCENARIOS))
def scenario(request):
    spec, settings = SCENARIOS[request.param]
    plan, objs = render(spec)
    s = {**DEFAULTS, **settings, "validator_image": fill(plan.image("validator").ref, plan.values),
         "pull_policy": plan.values["imagePullPolicy"]}
    return request.param, s, plan, objs


@pytest.mark.parametrize("name, upstream, on", [
    ("nvidia-device-plugin-daemonset", up_device_plugin, "device_plugin"),
    ("gpu-feature-discovery", up_gfd, None),
    ("nvidia-container-toolkit-daemonset", up_toolkit, "toolkit"),
    ("nvidia-operator-validator", up_validator, None),
    ("nvidia-dcgm", up_dcgm, None),
    ("nvidia-dcgm-exporter", up_dcgm_exporter, None),
    ("nvidia-node-status-exporter", up_node_status_exporter, None),
])
def test_operand_matches_the_operators_rendering(scenario, name, upstream, on):
    sid, s, plan, objs = scenario
    if on is not None and not s[on]:                 # the profile switches it off: no object at all
        assert ("DaemonSet", name) not in objs, sid
        return
    assert_same(pod(objs, name), upstream(s))


def test_mps_control_daemon_matches_the_operators_rendering(scenario):
    sid, s, plan, objs = scenario
    if sid != "mps":
        assert ("DaemonSet", "nvidia-device-plugin-mps-control-daemon") not in objs
        return
    assert_same(pod(objs, "nvidia-device-plugin-mps-control-daemon"), up_mps(s))


def test_mig_manager_matches_the_operators_rendering(scenario):
    sid, s, plan, objs = scenario
    if ("DaemonSet", "nvidia-mig-manager") not in objs:
        # no layout on a GPU that has no MIG: nothing to enforce, no MIG manager (mig_manager.py)
        assert not sid.startswith("mig-") or sid == "mig-none", sid
        return
    # a layout, or a MIG-capable GPU without one (all-disabled enforced, as the Operator does)
    assert_same(pod(objs, "nvidia-mig-manager"), up_mig_manager(s))


# ---- operand fidelity details, each with the exact values the Operator renders ----------------------

def test_mps_daemon_has_host_pid_and_no_share_process_namespace():
    _, objs = render(SCENARIOS["mps"][0])
    p = pod(objs, "nvidia-device-plugin-mps-control-daemon")
    assert (p["hostPID"], "shareProcessNamespace" in p) == (True, False)
    # the device plugin and GFD have no hostPID, so they do share their process namespace
    assert pod(objs, "nvidia-device-plugin-daemonset")["shareProcessNamespace"] is True
    assert pod(objs, "gpu-feature-discovery")["shareProcessNamespace"] is True


def test_runtime_classes_are_emitted_with_a_preinstalled_toolkit():
    _, objs = render(SCENARIOS["toolkit-preinstalled"][0])
    classes = {k[1]: o["handler"] for k, o in objs.items() if k[0] == "RuntimeClass"}
    assert classes == {"nvidia": "nvidia", "nvidia-cdi": "nvidia-cdi", "nvidia-legacy": "nvidia-legacy"}
    assert ("DaemonSet", "nvidia-container-toolkit-daemonset") not in objs
    users = {k[1] for k, o in objs.items() if k[0] == "DaemonSet" and o["spec"]["template"]["spec"].get("runtimeClassName")}
    # the MIG manager enforces all-disabled on the scenario's MIG-capable GPUs (no layout)
    assert users == {"nvidia-device-plugin-daemonset", "gpu-feature-discovery", "nvidia-dcgm", "nvidia-dcgm-exporter",
                     "nvidia-operator-validator", "nvidia-mig-manager"}


def test_runtime_classes_match_the_pre_requisites_assets():
    _, objs = render(spec_with())
    for f in ("0200_runtime_class.yaml", "0210_runtime_class_legacy.yaml", "0220_runtime_class_cdi.yaml"):
        up = yaml.safe_load((ASSETS / "pre-requisites" / f).read_text())
        name = up["metadata"]["name"] if up["metadata"]["name"] != "FILLED_BY_OPERATOR" else "nvidia"
        ours = objs[("RuntimeClass", name)]
        assert (ours["apiVersion"], ours["metadata"]["labels"]) == (up["apiVersion"], up["metadata"]["labels"])
        assert ours["handler"] == (up["handler"] if up["handler"] != "FILLED_BY_OPERATOR" else "nvidia")


@pytest.mark.parametrize("toolkit, expected", [
    (True, [("NVIDIA_CDI_HOOK_PATH", "/usr/local/nvidia/toolkit/nvidia-cdi-hook")]),
    (False, []),
])
def test_cdi_hook_path_only_with_an_operator_installed_toolkit(toolkit, expected):
    spec = spec_with(toolkit={"enabled": toolkit}, nodePools=pools(mig={"strategy": "single", "layout": {"1g.10gb": 7}}))
    _, objs = render(spec)
    for name in ("nvidia-device-plugin-daemonset", "nvidia-mig-manager"):
        env = env_view(pod(objs, name)["containers"][0])
        assert [e for e in env if e[0] == "NVIDIA_CDI_HOOK_PATH"] == expected, name
        assert ("CDI_ENABLED", "true") in env, name


@pytest.mark.parametrize("sid, mounts, volumes", [
    ("rhel", [
        {"name": "subscription-config-0", "mountPath": "/run/secrets/etc-pki-entitlement", "readOnly": True},
        {"name": "subscription-config-1", "mountPath": "/run/secrets/redhat.repo", "readOnly": True},
        {"name": "subscription-config-2", "mountPath": "/run/secrets/rhsm", "readOnly": True}], [
        {"name": "subscription-config-0", "hostPath": {"path": "/etc/pki/entitlement", "type": "Directory"}},
        {"name": "subscription-config-1", "hostPath": {"path": "/etc/yum.repos.d/redhat.repo", "type": "File"}},
        {"name": "subscription-config-2", "hostPath": {"path": "/etc/rhsm", "type": "Directory"}}]),
    ("sles", [
        {"name": "subscription-config-0", "mountPath": "/etc/SUSEConnect", "readOnly": True},
        {"name": "subscription-config-1", "mountPath": "/etc/zypp/credentials.d", "readOnly": True}], [
        {"name": "subscription-config-0", "hostPath": {"path": "/etc/SUSEConnect", "type": "FileOrCreate"}},
        {"name": "subscription-config-1", "hostPath": {"path": "/etc/zypp/credentials.d", "type": "Directory"}}]),
    ("rhel-crio", [], []),           # CRI-O injects the subscriptions itself
    ("containerd", [], []),          # ubuntu
    ("openshift", [], []),           # RHCOS: the Driver Toolkit image is entitled
])
def test_driver_gets_the_hosts_subscription_mounts_as_upstream(sid, mounts, volumes):
    plan, objs = render(SCENARIOS[sid][0])
    s = {**DEFAULTS, **SCENARIOS[sid][1]}
    assert subscription_mounts(s["os_id"], s["runtime"], s["openshift"]) == (mounts, volumes)
    for key, d in objs.items():
        if key[0] == "DaemonSet" and key[1].startswith("nvidia-driver-daemonset"):
            p = d["spec"]["template"]["spec"]
            driver = ctr(p, "nvidia-driver-ctr")
            assert [m for m in driver["volumeMounts"] if m["name"].startswith("subscription-")] == mounts
            assert [v for v in p["volumes"] if v["name"].startswith("subscription-")] == volumes


def test_driver_pod_matches_the_operators_golden_render_plus_the_os_mounts():
    """golden/driver-minimal.yaml (ubuntu) for the pod, the subscription rule for RHEL on top."""
    for sid in ("containerd", "rhel", "sles"):
        _, objs = render(SCENARIOS[sid][0])
        s = {**DEFAULTS, **SCENARIOS[sid][1]}
        up = golden_driver_pod()
        mounts, volumes = subscription_mounts(s["os_id"], s["runtime"], s["openshift"])
        ctr(up, "nvidia-driver-ctr")["volumeMounts"] += mounts
        up["volumes"] += volumes
        ours = copy.deepcopy(pod(objs, "nvidia-driver-daemonset"))
        for c in ours["initContainers"] + ours["containers"]:
            c["env"] = [e for e in c["env"] if e["name"] != "DRIVER_CONFIG_DIGEST"]
        assert ours["volumes"] == up["volumes"], sid
        assert ctr(ours, "nvidia-driver-ctr")["volumeMounts"] == ctr(up, "nvidia-driver-ctr")["volumeMounts"], sid
        assert ctr(ours, "k8s-driver-manager")["env"] == ctr(up, "k8s-driver-manager")["env"], sid


@pytest.mark.parametrize("name, container, key", [
    ("nvidia-device-plugin-daemonset", "toolkit-validation", "validator"),
    ("nvidia-device-plugin-daemonset", "config-manager-init", "devicePlugin"),
    ("gpu-feature-discovery", "toolkit-validation", "validator"),
    ("gpu-feature-discovery", "config-manager-init", "gfd"),
    ("nvidia-device-plugin-mps-control-daemon", "toolkit-validation", "validator"),
    ("nvidia-device-plugin-mps-control-daemon", "mps-control-daemon-mounts", "devicePlugin"),
    ("nvidia-device-plugin-mps-control-daemon", "config-manager-init", "devicePlugin"),
    ("nvidia-container-toolkit-daemonset", "driver-validation", "validator"),
    ("nvidia-dcgm", "toolkit-validation", "validator"),
    ("nvidia-dcgm-exporter", "toolkit-validation", "validator"),
    ("nvidia-operator-validator", "driver-validation", "validator"),
    ("nvidia-operator-validator", "plugin-validation", "validator"),
    ("nvidia-driver-daemonset", "k8s-driver-manager", "driver"),
])
def test_init_containers_get_the_resources_the_operator_gives_them(name, container, key):
    _, objs = render(SCENARIOS["mps"][0])
    assert ctr(pod(objs, name), container)["resources"] == RES[key]


def test_mig_manager_validation_init_gets_the_validators_resources():
    _, objs = render(SCENARIOS["mig-single"][0])
    assert ctr(pod(objs, "nvidia-mig-manager"), "toolkit-validation")["resources"] == {"limits": {"cpu": "102m"}}


def digests(objs: dict) -> dict[str, list[str]]:
    out = {}
    for key, d in objs.items():
        if key[0] == "DaemonSet" and key[1].startswith("nvidia-driver-daemonset"):
            p = d["spec"]["template"]["spec"]
            out[key[1]] = [(c["name"], c["env"][-1]["name"], c["env"][-1]["value"])
                           for c in p["initContainers"] + p["containers"] if c["env"][-1]["name"] == "DRIVER_CONFIG_DIGEST"]
    return out


def test_driver_config_digest_is_last_on_the_manager_and_the_driver_and_the_dtk():
    _, objs = render(SCENARIOS["containerd"][0])
    (value,) = {v for _, _, v in digests(objs)["nvidia-driver-daemonset"]}
    assert [c for c, _, _ in digests(objs)["nvidia-driver-daemonset"]] == ["k8s-driver-manager", "nvidia-driver-ctr"]
    assert len(value) == 16 and int(value, 16) >= 0
    _, objs = render(SCENARIOS["openshift"][0])
    (d,) = digests(objs).values()
    assert [c for c, _, _ in d] == ["k8s-driver-manager", "nvidia-driver-ctr", "openshift-driver-toolkit-ctr"]
    assert len({v for _, _, v in d}) == 1


def digest_of(spec: dict) -> str:
    _, objs = render(spec)
    return digests(objs)["nvidia-driver-daemonset"][0][2]


def test_driver_config_digest_changes_with_the_install_config_only():
    base = digest_of(spec_with())
    # what DriverInstallState holds: image (version), driver env, mounts and volumes, manager env
    assert digest_of(spec_with(driver={"version": "535"})) != base
    assert digest_of(spec_with(driver={"kernelModuleType": "open"})) != base
    assert digest_of(spec_with(os="rhel9.4")) != base
    assert digest_of(spec_with(driver={"upgradePolicy": {"drain": True}})) != base
    assert digest_of(spec_with(images={"registry": "mirror.example.com/nvcr"})) != base   # another image
    # what it does not: placement, priority, tolerations, resources (a restart must not reinstall)
    assert digest_of(spec_with(daemonsets={"priorityClassName": "gpu-critical",
                                           "tolerations": [{"key": "x", "operator": "Exists"}]},
                               clusterOwned={"priorityClasses": ["gpu-critical"]})) == base
    assert digest_of(spec_with(driver={"resources": {"limits": {"cpu": "2"}}})) == base
    assert digest_of(spec_with()) == base                           # stable across compiles


def test_config_digest_covers_each_documented_input():
    _, objs = render(SCENARIOS["containerd"][0])
    p = copy.deepcopy(pod(objs, "nvidia-driver-daemonset"))
    for c in p["initContainers"] + p["containers"]:
        c["env"] = c["env"][:-1]
    base = config_digest(p)
    changes = {
        "driver image": lambda q: ctr(q, "nvidia-driver-ctr").update(image="x/driver:1"),
        "driver args": lambda q: ctr(q, "nvidia-driver-ctr").update(args=["init", "--x"]),
        "driver env": lambda q: ctr(q, "nvidia-driver-ctr")["env"].append({"name": "X", "value": "1"}),
        "driver mount": lambda q: ctr(q, "nvidia-driver-ctr")["volumeMounts"].append({"name": "v", "mountPath": "/v"}),
        "pod volume": lambda q: q["volumes"].append({"name": "v", "hostPath": {"path": "/v"}}),
        "manager image": lambda q: ctr(q, "k8s-driver-manager").update(image="x/manager:1"),
        "manager env": lambda q: ctr(q, "k8s-driver-manager")["env"].append({"name": "X", "value": "1"}),
    }
    for what, change in changes.items():
        q = copy.deepcopy(p)
        change(q)
        assert config_digest(q) != base, what
    q = copy.deepcopy(p)
    ctr(q, "nvidia-driver-ctr")["resources"] = {"limits": {"cpu": "9"}}
    q["tolerations"] = []
    assert config_digest(q) == base


def test_openshift_mps_and_device_plugin_get_one_scc_each():
    spec = spec_with(platform={"type": "openshift", "version": "4.19"}, os="rhcos4.19",
                     driver={"rhcosVersions": ["419.96.202507091512-0"]}, nodePools=pools(sharing={"mps": {"replicas": 2}}))
    plan = plan_for(spec)
    sccs: dict[str, list] = {}
    for component, props in component_props(plan):
        for o in component.objects(props):
            if o["kind"] == "SecurityContextConstraints":
                sccs.setdefault(o["metadata"]["name"], []).append(o)
    assert {n: len(v) for n, v in sccs.items() if "device-plugin" in n} == {
        "nvidia-device-plugin": 1, "nvidia-device-plugin-mps-control-daemon": 1}
    assert sccs["nvidia-device-plugin"][0]["allowHostPID"] is False
    assert sccs["nvidia-device-plugin-mps-control-daemon"][0]["allowHostPID"] is True
    assert sccs["nvidia-device-plugin-mps-control-daemon"][0]["users"] == [
        "system:serviceaccount:nvidia-gpu-operator:nvidia-device-plugin-mps-control-daemon"]


# ---- MIG strategy none ------------------------------------------------------------------------------

def test_mig_strategy_none_without_a_layout_reaches_the_env_as_none():
    plan, objs = render(SCENARIOS["mig-none"][0])
    assert plan.mig_strategy == "none"
    for name in ("nvidia-device-plugin-daemonset", "gpu-feature-discovery"):
        env = dict(env_view(pod(objs, name)["containers"][0]))
        assert env["MIG_STRATEGY"] == "none" and "NVIDIA_MIG_MONITOR_DEVICES" not in env, name
    plugin = dict(env_view(ctr(pod(objs, "nvidia-operator-validator"), "plugin-validation")))
    assert plugin["MIG_STRATEGY"] == "none"


def test_a_pool_without_mig_settings_keeps_the_operators_default_single():
    plan, objs = render(spec_with())
    assert plan.mig_strategy == "single"
    env = dict(env_view(pod(objs, "nvidia-device-plugin-daemonset")["containers"][0]))
    assert (env["MIG_STRATEGY"], env["NVIDIA_MIG_MONITOR_DEVICES"]) == ("single", "all")


# ---- service account tokens ------------------------------------------------------------------------

TOKEN = {    # DaemonSet -> automountServiceAccountToken (None: the default, mounted); why: the component docstrings
    "nvidia-dcgm": False,                          # nv-hostengine never calls the API
    "nvidia-dcgm-exporter": False,                 # pod labels off
    "nvidia-device-plugin-daemonset": False,       # no plugin config: no config-manager
    "gpu-feature-discovery": True,                 # NodeFeature API
    "nvidia-container-toolkit-daemonset": None,    # driver-validation lists DaemonSets
    "nvidia-operator-validator": None,             # workload pods, node reads
    "nvidia-node-status-exporter": None,           # reads the node's allocatable
    "nvidia-driver-daemonset": None,               # driver manager: evicts, cordons, labels
    "nvidia-mig-manager": None,                    # reads and labels its node (all-disabled enforced here)
}


def test_service_account_token_only_where_the_pod_calls_the_api():
    _, objs = render(spec_with())
    assert {k[1]: d["spec"]["template"]["spec"].get("automountServiceAccountToken")
            for k, d in objs.items() if k[0] == "DaemonSet"} == TOKEN


def test_service_account_token_follows_the_config_manager_and_the_node_feature_api():
    _, objs = render(SCENARIOS["mps"][0])
    assert pod(objs, "nvidia-device-plugin-daemonset")["automountServiceAccountToken"] is True
    assert pod(objs, "nvidia-device-plugin-mps-control-daemon").get("automountServiceAccountToken") is None
    _, objs = render(SCENARIOS["openshift"][0])
    assert pod(objs, "gpu-feature-discovery")["automountServiceAccountToken"] is False   # feature files, no config
    _, objs = render(spec_with(dcgmExporter={"podLabels": True}))
    assert pod(objs, "nvidia-dcgm-exporter")["automountServiceAccountToken"] is True
