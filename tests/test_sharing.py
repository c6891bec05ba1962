"""GPU sharing: per-pool time-slicing and MPS in the device plugin's config ConfigMap, selected
per pool by `nvidia.com/device-plugin.config`; the config-manager containers and volumes exactly as the
Operator's handleDevicePluginConfig adds them; the MPS control daemon; the MIG strategy per pool; and the
combinations the device plugin would refuse, refused at compile time with their location.

The config format rules are k8s-device-plugin's (api/config/v1: version v1, flags, sharing.timeSlicing |
sharing.mps with renameByDefault / failRequestsGreaterThanOne / resources[name, replicas >= 2], resource
names nvidia.com/<DNS subdomain> of at most 63 characters; cmd/nvidia-device-plugin validateFlags: MPS
with mig-strategy mixed is refused; MPS shares nvidia.com/gpu only), encoded in `plugin_config_problems`.
"""

from __future__ import annotations

import re
import shutil

import pytest
import yaml

from gpuop.plan import pools
from gpuop.stack.registry import COMPONENTS, component_props
from gpuop.kube.slots import fill

from conftest import ASSETS, REFS, REPO, by_key, load_dir, run_main
from test_helm import render
from test_plan_helpers import plan_for

NS = "gpu-operator"
DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
SHARING_KEYS = {"renameByDefault", "failRequestsGreaterThanOne", "resources"}


# ---- the device plugin's config format ---------------------------------------------------------------

def plugin_config_problems(doc) -> list[str]:
    p: list[str] = []
    if not isinstance(doc, dict) or set(doc) - {"version", "flags", "resources", "sharing", "imex"}:
        return [f"unexpected top-level fields in {doc!r}"]
    if doc.get("version", "v1") != "v1":
        p.append(f"unknown version: {doc['version']}")
    strategy = (doc.get("flags") or {}).get("migStrategy")
    if strategy not in (None, "none", "single", "mixed"):
        p.append(f"unknown migStrategy {strategy!r}")
    sharing = doc.get("sharing") or {}
    if set(sharing) - {"timeSlicing", "mps"}:
        p.append(f"unknown sharing strategies {sorted(set(sharing) - {'timeSlicing', 'mps'})}")
    if "timeSlicing" in sharing and "mps" in sharing:
        p.append("timeSlicing and mps together (the plugin would ignore timeSlicing)")
    for kind, rr in sharing.items():
        if not isinstance(rr, dict) or set(rr) - SHARING_KEYS:
            p.append(f"{kind}: unexpected fields in {rr!r}")
            continue
        for flag in ("renameByDefault", "failRequestsGreaterThanOne"):
            if flag in rr and not isinstance(rr[flag], bool):
                p.append(f"{kind}.{flag} must be a boolean")
        resources = rr.get("resources")
        if not resources:
            p.append(f"{kind}: no resources specified")
            continue
        for r in resources:
            if set(r) - {"name", "rename", "devices", "replicas"} or "name" not in r or "replicas" not in r:
                p.append(f"{kind}: bad resource entry {r!r}")
                continue
            name = r["name"]
            if not name.startswith("nvidia.com/") or len(name) > 63 or not DNS_SUBDOMAIN.match(name.split("/", 1)[1]):
                p.append(f"{kind}: incorrect format for resource name {name!r}")
            if not isinstance(r["replicas"], int) or r["replicas"] < 2:
                p.append(f"{kind}: number of replicas must be >= 2 ({name})")
            if kind == "mps" and name != "nvidia.com/gpu":
                p.append(f"mps: only nvidia.com/gpu can be shared, not {name}")
        if kind == "mps" and strategy == "mixed":
            p.append("using --mig-strategy=mixed is not supported with MPS")
    return p


@pytest.mark.parametrize("bad, fragment", [
    ({"version": "v2"}, "unknown version"),
    ({"version": "v1", "flags": {"migStrategy": "both"}}, "migStrategy"),
    ({"version": "v1", "sharing": {"timeSlicing": {"resources": [{"name": "nvidia.com/gpu", "replicas": 1}]}}}, ">= 2"),
    ({"version": "v1", "sharing": {"timeSlicing": {"resources": []}}}, "no resources"),
    ({"version": "v1", "sharing": {"timeSlicing": {"resources": [{"name": "nvidia.com/GPU", "replicas": 2}]}}}, "format"),
    ({"version": "v1", "sharing": {"mps": {"resources": [{"name": "nvidia.com/mig-1g.10gb", "replicas": 2}]}}}, "only"),
    ({"version": "v1", "flags": {"migStrategy": "mixed"},
      "sharing": {"mps": {"resources": [{"name": "nvidia.com/gpu", "replicas": 2}]}}}, "mixed is not supported with MPS"),
    ({"version": "v1", "sharing": {"mps": {"resources": [{"name": "nvidia.com/gpu", "replicas": 2}]},
                                   "timeSlicing": {"resources": [{"name": "nvidia.com/gpu", "replicas": 2}]}}}, "together"),
    ({"version": "v1", "sharing": {"timeSlicing": {"replicas": 2}}}, "unexpected fields"),
])
def test_the_format_checker_catches_each_rule(bad, fragment):
    assert any(fragment in x for x in plugin_config_problems(bad)), plugin_config_problems(bad)


def test_the_upstream_examples_pass_the_format_checker():
    refs = REFS / "gpu-operator"
    docs = [yaml.safe_load((refs / "test-plugin-config.time-slicing.yaml").read_text())]
    for name in ("time-slicing-config-all.configmap.yaml", "time-slicing-config-fine.configmap.yaml"):
        docs += [yaml.safe_load(v) for v in yaml.safe_load((refs / name).read_text())["data"].values()]
    assert all(plugin_config_problems(d) == [] for d in docs)


# ---- the compiled mig-sharing cluster --------------------------------------------------------------

@pytest.fixture(scope="module")
def objs(dist, index) -> dict:
    entry = next(e for e in index["clusters"] if e["name"] == "mig-sharing")
    return by_key(load_dir(dist / entry["manifests"]))


def configs(objs) -> dict:
    return {k: yaml.safe_load(v) for k, v in objs[("ConfigMap", NS, "device-plugin-config")]["data"].items()}


def rules(objs) -> dict:
    return {r["name"]: r["labels"] for r in objs[("NodeFeatureRule", "", "nvidia-gpu-node-labels")]["spec"]["rules"]}


def pod(objs, name) -> dict:
    return objs[("DaemonSet", NS, name)]["spec"]["template"]["spec"]


def envs(c) -> dict:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in c.get("env", [])}


def test_every_emitted_plugin_config_passes_the_format(dist, index):
    for entry in index["clusters"]:
        o = by_key(load_dir(dist / entry["manifests"]))
        if ("ConfigMap", NS, "device-plugin-config") in o:
            for key, doc in configs(o).items():
                assert plugin_config_problems(doc) == [], (entry["name"], key)


def test_one_key_per_pool_config_plus_default_each_selected_by_its_pools_label(objs):
    c, r = configs(objs), rules(objs)
    selected = {gpu.removeprefix("gpuop.pool."): labels["nvidia.com/device-plugin.config"]
                for gpu, labels in r.items() if "nvidia.com/device-plugin.config" in labels}
    assert set(c) == {"default", *selected.values()}
    assert c["default"] == {"version": "v1", "flags": {"migStrategy": "none"}}
    assert c[selected["L40S"]] == {"version": "v1", "flags": {"migStrategy": "none"}, "sharing": {"timeSlicing": {
        "renameByDefault": False, "failRequestsGreaterThanOne": True,
        "resources": [{"name": "nvidia.com/gpu", "replicas": 4}]}}}
    assert c[selected["A100-SXM4-80GB"]] == {"version": "v1", "flags": {"migStrategy": "none"}, "sharing": {"mps": {
        "renameByDefault": False, "resources": [{"name": "nvidia.com/gpu", "replicas": 2}]}}}
    assert c[selected["H100-SXM5-80GB"]] == {"version": "v1", "flags": {"migStrategy": "mixed"}, "sharing": {"timeSlicing": {
        "renameByDefault": False, "failRequestsGreaterThanOne": False,
        "resources": [{"name": "nvidia.com/mig-1g.10gb", "replicas": 2}]}}}
    assert selected["L40S"].startswith("time-slicing-4-") and selected["A100-SXM4-80GB"].startswith("mps-2-")


def test_mixed_strategy_next_to_mps_moves_the_strategy_into_each_pools_config(objs):
    """The plugin refuses mig-strategy mixed with MPS, and MIG_STRATEGY (env) overrides the config file:
    with the H100 pool mixed and the A100 pool on MPS, no pod gets MIG_STRATEGY, every config says its own."""
    for name, main in (("nvidia-device-plugin-daemonset", "nvidia-device-plugin"),
                       ("gpu-feature-discovery", "gpu-feature-discovery"),
                       ("nvidia-device-plugin-mps-control-daemon", "mps-control-daemon-ctr")):
        c = next(x for x in pod(objs, name)["containers"] if x["name"] == main)
        e = envs(c)
        assert "MIG_STRATEGY" not in e and e["NVIDIA_MIG_MONITOR_DEVICES"] == "all", name
        assert e["CONFIG_FILE"] == "/config/config.yaml", name


def test_one_common_strategy_stays_in_the_env():
    plan = plan_for({"nodePools": [
        {"name": "a", "gpu": "H100-SXM5-80GB", "mig": {"strategy": "mixed", "layout": {"3g.40gb": 2}}},
        {"name": "b", "gpu": "L40S", "sharing": {"timeSlicing": {"replicas": 3, "renameByDefault": True}}}]})
    assert not plan.pool_configs.per_pool_strategy
    objs = component_objects(plan)
    e = envs(objs[("DaemonSet", "nvidia-device-plugin-daemonset")]["spec"]["template"]["spec"]["containers"][0])
    assert (e["MIG_STRATEGY"], e["NVIDIA_MIG_MONITOR_DEVICES"]) == ("mixed", "all")
    data = {k: yaml.safe_load(v) for k, v in objs[("ConfigMap", "device-plugin-config")]["data"].items()}
    assert all(d["flags"]["migStrategy"] == "mixed" for d in data.values())
    assert [p.name for p in plan.pool_configs.pools if p.nfd] == ["a", "b"]
    # the H100 pool has no sharing and the common strategy: it needs no plugin config label
    assert dict(plan.pool_configs.pools[0].nfd) == {"nvidia.com/mig.config": "2x3g.40gb"}
    plan = plan_for({"nodePools": [
        {"name": "a", "gpu": "H100-SXM5-80GB", "mig": {"strategy": "mixed", "layout": {"3g.40gb": 2}}},
        {"name": "b", "gpu": "A100-SXM4-80GB", "mig": {"strategy": "single", "layout": {"3g.40gb": 2}}}]})
    assert plan.pool_configs.per_pool_strategy                 # pools differ: each config carries its own
    data = dict(plan.pool_configs.plugin_configs)
    assert sorted(yaml.safe_load(v)["flags"]["migStrategy"] for v in data.values()) == ["mixed", "none", "single"]


def test_no_sharing_no_config_no_config_manager():
    objs = component_objects(plan_for({}))
    assert ("ConfigMap", "device-plugin-config") not in objs
    assert not [k for k in objs if "mps" in k[1]]
    for name in ("nvidia-device-plugin-daemonset", "gpu-feature-discovery"):
        p = objs[("DaemonSet", name)]["spec"]["template"]["spec"]
        assert [c["name"] for c in p["containers"]] == [p["containers"][0]["name"]]
        assert "shareProcessNamespace" not in p


def component_objects(plan) -> dict:
    out = {}
    for c, props in component_props(plan):
        for o in (c.render(props) if props else []):
            out[(o["kind"], o["metadata"]["name"])] = fill(o, plan.values)
    return out


# ---- handleDevicePluginConfig, against the assets ---------------------------------------------------

def asset(path: str) -> dict:
    return yaml.safe_load((ASSETS / path).read_text().replace('"FILLED BY THE OPERATOR"', NS))


def upstream_config_manager(container: dict, image: str) -> dict:
    """An asset's config-manager container as transformConfigManager*Container leaves it."""
    c = dict(container)
    c["image"], c["imagePullPolicy"] = image, "IfNotPresent"
    c["env"] = [({**e, "value": "default"} if e["name"] == "DEFAULT_CONFIG" else e) for e in c["env"]]
    c["env"].append({"name": "FALLBACK_STRATEGIES", "value": "empty"})
    c["volumeMounts"] = [{"name": "config", "mountPath": "/config"},
                         {"name": "device-plugin-config", "mountPath": "/available-configs"}]
    return c


def normalize(c: dict) -> dict:
    c = {k: v for k, v in c.items() if k != "resources"}
    c["env"] = [{**e, "valueFrom": {"fieldRef": {"fieldPath": e["valueFrom"]["fieldRef"]["fieldPath"]}}}
                if "valueFrom" in e else e for e in c["env"]]
    return c


@pytest.mark.parametrize("state, ds, main", [
    ("state-device-plugin/0500_daemonset.yaml", "nvidia-device-plugin-daemonset", "nvidia-device-plugin"),
    ("gpu-feature-discovery/0500_daemonset.yaml", "gpu-feature-discovery", "gpu-feature-discovery"),
    ("state-mps-control-daemon/0400_daemonset.yaml", "nvidia-device-plugin-mps-control-daemon", "mps-control-daemon-ctr"),
])
def test_config_manager_as_handle_device_plugin_config_renders_it(objs, state, ds, main):
    up = asset(state)["spec"]["template"]["spec"]
    p = pod(objs, ds)
    image = "nvcr.io/nvidia/k8s-device-plugin:v0.20.0"
    up_init = next(c for c in up["initContainers"] if c["name"] == "config-manager-init")
    up_side = next(c for c in up["containers"] if c["name"] == "config-manager")
    ours_init = next(c for c in p["initContainers"] if c["name"] == "config-manager-init")
    ours_side = next(c for c in p["containers"] if c["name"] == "config-manager")
    assert normalize(ours_init) == normalize(upstream_config_manager(up_init, image))
    assert normalize(ours_side) == normalize(upstream_config_manager(up_side, image))
    assert [c["name"] for c in p["initContainers"]] == [c["name"] for c in up["initContainers"]]
    assert [c["name"] for c in p["containers"]] == [c["name"] for c in up["containers"]]
    # handleDevicePluginConfig: shareProcessNamespace only where hostPID is not set (the MPS daemon has it)
    assert p.get("shareProcessNamespace") is (None if up.get("hostPID") else True)
    m = next(c for c in p["containers"] if c["name"] == main)
    assert m["volumeMounts"][-2:] == [{"name": "config", "mountPath": "/config"},
                                      {"name": "device-plugin-config", "mountPath": "/available-configs"}]
    assert p["volumes"][-2:] == [{"name": "device-plugin-config", "configMap": {"name": "device-plugin-config"}},
                                 {"name": "config", "emptyDir": {}}]


def test_mps_control_daemon_keeps_the_operators_shape(objs):
    up = asset("state-mps-control-daemon/0400_daemonset.yaml")
    ours = objs[("DaemonSet", NS, "nvidia-device-plugin-mps-control-daemon")]
    for f in ("labels", "annotations", "name"):
        assert ours["metadata"].get(f) == up["metadata"].get(f), f
    assert ours["spec"]["selector"] == up["spec"]["selector"]
    p, up_p = ours["spec"]["template"]["spec"], up["spec"]["template"]["spec"]
    for f in ("nodeSelector", "tolerations", "priorityClassName", "hostPID"):
        assert p[f] == up_p[f], f
    # its own ServiceAccount (the asset's RBAC name), so OpenShift gets one SCC per account (mps_control_daemon.py)
    assert (p["serviceAccountName"], up_p["serviceAccountName"]) == (
        "nvidia-device-plugin-mps-control-daemon", "nvidia-device-plugin")
    assert "shareProcessNamespace" not in p
    assert p["runtimeClassName"] == "nvidia"
    for ours_c, up_c in zip(p["initContainers"][:2], up_p["initContainers"][:2]):
        for f in ("name", "command", "args", "volumeMounts"):
            assert ours_c.get(f) == up_c.get(f), (ours_c["name"], f)
    main, up_main = p["containers"][0], up_p["containers"][0]
    assert (main["name"], main["command"], main["securityContext"]) == (up_main["name"], up_main["command"],
                                                                         up_main["securityContext"])
    assert main["env"][:3] == up_main["env"]
    assert main["volumeMounts"][:2] == up_main["volumeMounts"]
    assert p["volumes"][:3] == up_p["volumes"]
    name = "nvidia-device-plugin-mps-control-daemon"
    assert objs[("Role", NS, name)]["rules"] == asset("state-mps-control-daemon/0200_role.yaml")["rules"]
    assert objs[("ClusterRole", "", name)]["rules"] == asset("state-mps-control-daemon/0210_clusterrole.yaml")["rules"]


def test_helm_switching_the_device_plugin_off_removes_the_mps_daemon_but_keeps_the_config(dist, index):
    entry = next(e for e in index["clusters"] if e["name"] == "mig-sharing")
    names = {(o["kind"], o["metadata"]["name"]) for o in render(dist / entry["chart"], {"devicePlugin": {"enabled": False}},
                                                                 entry)}
    assert ("DaemonSet", "nvidia-device-plugin-mps-control-daemon") not in names
    assert ("DaemonSet", "nvidia-device-plugin-daemonset") not in names
    assert {("ConfigMap", "device-plugin-config"), ("DaemonSet", "gpu-feature-discovery")} <= names


# ---- refused combinations, with their location -------------------------------------------------------

HEAD = """\
apiVersion: gpuop/v1alpha1
kind: ClusterProfile
metadata: {name: c1}
spec:
  platform: {type: kubernetes, version: "1.33"}
  os: ubuntu24.04
"""


@pytest.fixture()
def project(tmp_path):
    (tmp_path / "profiles").mkdir()
    shutil.copy(REPO / "gpuop.yaml", tmp_path / "gpuop.yaml")
    return tmp_path


def refused(project, body: str) -> list[str]:
    (project / "profiles" / "c1.yaml").write_text(HEAD + body)
    proc = run_main("validate", cwd=project)
    assert proc.returncode == 2, proc.stderr
    return proc.stderr.splitlines()


def test_refuses_sharing_combinations_the_device_plugin_refuses(project):
    assert refused(project, """\
  nodePools:
    - name: train
      gpu: H100-SXM5-80GB
      mig: {strategy: mixed, layout: {"3g.40gb": 2}}
      sharing:
        mps: {replicas: 2}
    - name: both
      gpu: L4
      sharing:
        timeSlicing: {replicas: 2}
        mps: {replicas: 2}
    - name: none
      gpu: T4
      sharing: {}
    - name: nothing-shared
      gpu: A10
      sharing: {timeSlicing: {renameByDefault: true}}
    - name: wrong
      gpu: A100-SXM4-80GB
      mig: {strategy: single, layout: {"1g.10gb": 7}}
      sharing:
        timeSlicing:
          resources:
            - {name: nvidia.com/mig-1g.10gb, replicas: 2}
            - {name: nvidia.com/gpu, replicas: 3}
            - {name: nvidia.com/gpu, replicas: 4}
""") == [
        "profiles/c1.yaml:12:9: spec.nodePools[0].sharing.mps: sharing using MPS is not supported for MIG devices "
        "(k8s-device-plugin), and this pool has a MIG layout; use timeSlicing or drop the layout",
        "profiles/c1.yaml:15:7: spec.nodePools[1].sharing: timeSlicing and mps are exclusive (the device plugin would "
        "use mps and silently ignore timeSlicing); keep one",
        "profiles/c1.yaml:20:7: spec.nodePools[2].sharing: sharing needs timeSlicing or mps",
        "profiles/c1.yaml:23:17: spec.nodePools[3].sharing.timeSlicing: set replicas (every device the pool "
        "advertises) or resources (only those)",
        "profiles/c1.yaml:30:16: spec.nodePools[4].sharing.timeSlicing.resources[0].name: 'nvidia.com/mig-1g.10gb' "
        "is not a resource this pool advertises, so the entry would never apply; allowed: nvidia.com/gpu",
        "profiles/c1.yaml:32:16: spec.nodePools[4].sharing.timeSlicing.resources[2].name: 'nvidia.com/gpu' is "
        "listed twice",
        "gpuop: 6 errors; nothing written"]


def test_refuses_sharing_without_the_device_plugin_and_too_few_replicas(project):
    assert refused(project, """\
  devicePlugin: {enabled: false}
  nodePools:
    - name: infer
      gpu: L40S
      sharing: {timeSlicing: {replicas: 4}}
""") == ["profiles/c1.yaml:11:7: spec.nodePools[0].sharing: sharing needs the device plugin (its config does the "
         "sharing), but spec.devicePlugin.enabled is false", "gpuop: 1 error; nothing written"]
    assert refused(project, """\
  nodePools:
    - name: infer
      gpu: L40S
      sharing: {mps: {replicas: 1}}
""") == ["profiles/c1.yaml:10:23: spec.nodePools[0].sharing.mps.replicas: must be at least 2, got the number 1",
         "gpuop: 1 error; nothing written"]


def test_mixed_mig_resources_can_be_time_sliced():
    plan = plan_for({"nodePools": [{"name": "a", "gpu": "A100-SXM4-40GB",
                                    "mig": {"strategy": "mixed", "layout": {"3g.20gb": 1, "2g.10gb": 1, "1g.5gb+me": 1}},
                                    "sharing": {"timeSlicing": {"replicas": 2}}}]})
    (key, text), = [(k, v) for k, v in plan.pool_configs.plugin_configs if k != pools.DEFAULT_PLUGIN_CONFIG]
    doc = yaml.safe_load(text)
    assert plugin_config_problems(doc) == []
    assert [r["name"] for r in doc["sharing"]["timeSlicing"]["resources"]] == [
        "nvidia.com/mig-1g.5gb.me", "nvidia.com/mig-2g.10gb", "nvidia.com/mig-3g.20gb"]
    assert key.startswith("time-slicing-2-")
