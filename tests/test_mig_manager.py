"""The MIG manager in the compiled stack: the mig-parted config gpuop emits follows
mig-parted's v1 format and holds exactly the pools' layouts; each pool's nodes are labelled with their
config; the DaemonSet, RBAC and ConfigMaps keep the shapes of the Operator's state-mig-manager assets; a
layout change touches exactly the config and the label rule.

The format rules are encoded from ../shared/refs/mig/FACTS.md §2 (mig-parted api/spec/v1/spec.go,
pkg/types/mig_config.go, pkg/types/device.go) in `mig_parted_problems`, which is itself tested on bad
documents so a rule that never fires cannot hide.
"""

from __future__ import annotations

import re
import shutil

import pytest
import yaml

from gpuop import catalog
from gpuop.plan import pools
from gpuop.outputs import node_labels
from gpuop.stack.registry import COMPONENTS, component_props
from gpuop.components.mig_manager import MigManager
from gpuop.mig import geometry
from gpuop.kube.slots import fill
from gpuop.kube.yamlio import load_all

from conftest import ASSETS, by_key, load_dir, run_gpuop, run_main
from test_plan_helpers import plan_for

NS = "gpu-operator"
SPEC_KEYS = {"device-filter", "devices", "mig-enabled", "mig-devices"}
LABEL_VALUE = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")
DEVICE_FILTER = re.compile(r"^0x[0-9A-Fa-f]{8}(:0x[0-9A-Fa-f]{8})?$")


# ---- the mig-parted v1 format (FACTS.md §2) ---------------------------------------------------------

def _filter_ids(spec) -> set | None:
    f = spec.get("device-filter")
    if f is None:
        return None                      # no filter: every GPU
    return {x.lower() for x in ([f] if isinstance(f, str) else f)}


def mig_parted_problems(doc) -> list[str]:
    """Every way `doc` breaks mig-parted's v1 parse rules (plus: names must be label values, specs of
    one config must not hit the same GPU twice). Empty when mig-parted would accept it."""
    p: list[str] = []
    if not isinstance(doc, dict) or set(doc) != {"version", "mig-configs"}:
        return [f"top level must be exactly version and mig-configs, got {sorted(doc) if isinstance(doc, dict) else doc!r}"]
    if doc["version"] != "v1":
        p.append(f"version must be v1, got {doc['version']!r}")
    configs = doc["mig-configs"]
    if not isinstance(configs, dict) or not configs:
        return p + ["mig-configs must be a non-empty map"]
    for name, specs in configs.items():
        if not isinstance(name, str) or not LABEL_VALUE.match(name):
            p.append(f"{name!r}: not usable as the value of the nvidia.com/mig.config label")
        if not isinstance(specs, list) or not specs:
            p.append(f"{name}: must be a non-empty list of specs")
            continue
        filters = []
        for i, s in enumerate(specs):
            where = f"{name}[{i}]"
            if not isinstance(s, dict):
                p.append(f"{where}: not a mapping")
                continue
            if set(s) - SPEC_KEYS:
                p.append(f"{where}: unexpected field(s) {sorted(set(s) - SPEC_KEYS)}")
            devices = s.get("devices")
            if devices != "all" and not (isinstance(devices, list) and devices
                                          and all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in devices)):
                p.append(f"{where}: devices must be 'all' or a list of GPU indexes, got {devices!r}")
            f = s.get("device-filter")
            if f is not None:
                items = [f] if isinstance(f, str) else f
                if not isinstance(items, list) or not items or not all(isinstance(x, str) and DEVICE_FILTER.match(x)
                                                                      for x in items):
                    p.append(f"{where}: device-filter must be 0x<DEVICE><VENDOR> (a string or a list), got {f!r}")
                elif any(int(x.split(":")[0], 0) >= 1 << 32 for x in items):
                    p.append(f"{where}: device-filter out of 32 bits")
            enabled = s.get("mig-enabled")
            if not isinstance(enabled, bool):
                p.append(f"{where}: mig-enabled must be true or false, got {enabled!r}")
            devs = s.get("mig-devices")
            if enabled is True and devs is None:
                p.append(f"{where}: missing required field 'mig-devices' when 'mig-enabled' is true")
            if enabled is False and devs:
                p.append(f"{where}: MIG devices included when 'mig-enabled' is false")
            if devs is not None:
                if not isinstance(devs, dict):
                    p.append(f"{where}: mig-devices must be a map of profile to count")
                    continue
                for prof, count in devs.items():
                    if not isinstance(prof, str) or not geometry.NAME.match(prof):
                        p.append(f"{where}: {prof!r} is not a MIG profile name")
                    if not isinstance(count, int) or isinstance(count, bool) or count < 0:
                        p.append(f"{where}: invalid count {count!r} for {prof}")
                if devs and all(isinstance(c, int) and c == 0 for c in devs.values()):
                    p.append(f"{where}: all counts for all MigProfiles are 0")
            filters.append((_filter_ids(s), devices))
        for a in range(len(filters)):
            for b in range(a + 1, len(filters)):
                (fa, da), (fb, db) = filters[a], filters[b]
                same_gpus = fa is None or fb is None or fa & fb
                same_idx = da == "all" or db == "all" or set(da) & set(db)
                if same_gpus and same_idx:
                    p.append(f"{name}: specs {a} and {b} both hit the same GPUs")
    return p


@pytest.mark.parametrize("bad, fragment", [
    ({"version": "v2", "mig-configs": {"x": [{"devices": "all", "mig-enabled": False}]}}, "version must be v1"),
    ({"version": "v1", "mig-configs": {}}, "non-empty map"),
    ({"version": "v1", "mig-configs": {"x": []}, "extra": 1}, "top level"),
    ({"version": "v1", "mig-configs": {"x": []}}, "non-empty list"),
    ({"version": "v1", "mig-configs": {"x": [{"devices": "some", "mig-enabled": False}]}}, "devices must be"),
    ({"version": "v1", "mig-configs": {"x": [{"devices": "all", "mig-enabled": True}]}}, "missing required field 'mig-devices'"),
    ({"version": "v1", "mig-configs": {"x": [{"devices": "all", "mig-enabled": False, "mig-devices": {"1g.5gb": 1}}]}},
     "MIG devices included"),
    ({"version": "v1", "mig-configs": {"x": [{"devices": "all", "mig-enabled": True, "mig-devices": {"1g.5gb": 0}}]}},
     "all counts"),
    ({"version": "v1", "mig-configs": {"x": [{"devices": "all", "mig-enabled": True, "mig-devices": {"1G.5GB": 1}}]}},
     "not a MIG profile name"),
    ({"version": "v1", "mig-configs": {"x": [{"devices": "all", "mig-enabled": True, "mig-devices": {"1g.5gb": -1}}]}},
     "invalid count"),
    ({"version": "v1", "mig-configs": {"x": [{"device-filter": "20B010DE", "devices": "all", "mig-enabled": False}]}},
     "device-filter"),
    ({"version": "v1", "mig-configs": {"x": [{"devices": "all", "mig-enabled": False, "typo": 1}]}}, "unexpected field"),
    ({"version": "v1", "mig-configs": {"x y": [{"devices": "all", "mig-enabled": False}]}}, "label"),
    ({"version": "v1", "mig-configs": {"x": [{"devices": "all", "mig-enabled": False},
                                             {"device-filter": ["0x20B010DE"], "devices": [0], "mig-enabled": False}]}},
     "same GPUs"),
])
def test_the_format_checker_catches_each_rule(bad, fragment):
    assert any(fragment in problem for problem in mig_parted_problems(bad)), mig_parted_problems(bad)


def test_nvidias_default_config_passes_the_format_checker():
    cm = yaml.safe_load((ASSETS / "state-mig-manager" / "0400_configmap.yaml").read_text())
    assert mig_parted_problems(yaml.safe_load(cm["data"]["config.yaml"])) == []


# ---- the compiled stacks ----------------------------------------------------------------------------

def cluster(dist, index, name) -> dict:
    entry = next(e for e in index["clusters"] if e["name"] == name)
    return by_key(load_dir(dist / entry["manifests"]))


def mig_doc(objs) -> dict:
    return yaml.safe_load(objs[("ConfigMap", NS, "custom-mig-parted-config")]["data"]["config.yaml"])


def rules_by_name(objs) -> dict:
    return {r["name"]: r for r in objs[("NodeFeatureRule", "", "nvidia-gpu-node-labels")]["spec"]["rules"]}


def profile_pools(name):
    from gpuop.profile.load import load_profile
    from gpuop.validate.runner import validate
    from conftest import REPO

    return validate(load_profile(REPO / "profiles" / f"{name}.yaml")).profile.spec.nodePools


def test_every_emitted_mig_config_passes_the_format_rules(dist, index):
    seen = 0
    for entry in index["clusters"]:
        objs = by_key(load_dir(dist / entry["manifests"]))
        if ("ConfigMap", NS, "custom-mig-parted-config") in objs:
            seen += 1
            assert mig_parted_problems(mig_doc(objs)) == [], entry["name"]
    assert seen >= 2                                 # prod-east and mig-sharing


@pytest.mark.parametrize("name", ["prod-east", "mig-sharing"])
def test_the_config_holds_exactly_the_declared_layouts(dist, index, name):
    objs, gpus = cluster(dist, index, name), catalog.load().gpus
    configs = mig_doc(objs)["mig-configs"]
    declared = {}
    for pool in profile_pools(name):
        if pool.mig and pool.mig.layout:
            declared.setdefault(pools.mig_config_name(pool.mig.layout), []).append(
                (list(gpus[pool.gpu].pciDeviceIds), dict(pool.mig.layout)))
    assert configs.pop("all-disabled") == [{"devices": "all", "mig-enabled": False}]
    assert {n: [(s["device-filter"], s["mig-devices"]) for s in specs] for n, specs in configs.items()} == declared
    for specs in configs.values():
        for s in specs:
            assert s["devices"] == "all" and s["mig-enabled"] is True
            model = next(g for g in gpus.values() if g.pciDeviceIds and list(g.pciDeviceIds) == s["device-filter"])
            assert geometry.check_layout(model.name, s["mig-devices"]).ok


def test_each_pool_is_labelled_with_its_config(dist, index):
    objs = cluster(dist, index, "mig-sharing")
    rules, configs = rules_by_name(objs), mig_doc(objs)["mig-configs"]
    assert rules["gpuop.pool.H100-SXM5-80GB"]["labels"]["nvidia.com/mig.config"] == "1x3g.40gb_1x2g.20gb_2x1g.10gb"
    assert rules["gpuop.pool.A100-SXM4-80GB"]["labels"]["nvidia.com/mig.config"] == "all-disabled"   # no layout
    assert "nvidia.com/mig.config" not in rules["gpuop.pool.L40S"]["labels"]                      # not MIG-capable
    for gpu in ("H100-SXM5-80GB", "A100-SXM4-80GB", "L40S"):
        rule = rules[f"gpuop.pool.{gpu}"]
        assert rule["labels"].get("nvidia.com/mig.config", "all-disabled") in configs
        (term,) = rule["matchFeatures"]
        ids = [pools.nfd_id(x) for x in catalog.load().gpus[gpu].pciDeviceIds]
        assert term == {"feature": "pci.device", "matchExpressions": {
            "vendor": {"op": "In", "value": ["10de"]}, "device": {"op": "In", "value": ids},
            "class": {"op": "In", "value": ["0300", "0302"]}}}


def test_the_mig_manager_deploy_label_goes_to_mig_capable_gpus_only(dist, index):
    objs = cluster(dist, index, "prod-east")
    rules = rules_by_name(objs)
    assert "nvidia.com/gpu.deploy.mig-manager" not in rules["nvidia.com/gpu.deploy"]["labels"]
    rule = rules["nvidia.com/gpu.deploy.mig-capable"]
    assert rule["labels"] == {"nvidia.com/gpu.deploy.mig-manager": "true"}
    ids = set(rule["matchFeatures"][0]["matchExpressions"]["device"]["value"])
    gpus = catalog.load().gpus.values()
    assert ids == {pools.nfd_id(x) for g in gpus if g.migCapable for x in g.pciDeviceIds}
    assert not ids & {pools.nfd_id(x) for g in gpus if not g.migCapable for x in g.pciDeviceIds}
    ds = objs[("DaemonSet", NS, "nvidia-mig-manager")]["spec"]["template"]["spec"]
    assert ds["nodeSelector"] == {"nvidia.com/gpu.deploy.mig-manager": "true"}


# ---- upstream shapes (assets/state-mig-manager) ------------------------------------------------------

def asset(path: str) -> dict:
    return yaml.safe_load((ASSETS / "state-mig-manager" / path).read_text().replace('"FILLED BY THE OPERATOR"', NS))


def test_daemonset_keeps_the_operators_shape(dist, index):
    objs = cluster(dist, index, "prod-east")
    ours, up = objs[("DaemonSet", NS, "nvidia-mig-manager")], asset("0600_daemonset.yaml")
    assert ours["metadata"]["labels"] == up["metadata"]["labels"]
    assert ours["spec"]["selector"] == up["spec"]["selector"]
    assert ours["spec"]["template"]["metadata"]["labels"] == up["spec"]["template"]["metadata"]["labels"]
    p, up_p = ours["spec"]["template"]["spec"], up["spec"]["template"]["spec"]
    for f in ("nodeSelector", "tolerations", "priorityClassName", "serviceAccountName", "hostPID", "hostIPC"):
        assert p[f] == up_p[f], f
    assert p["runtimeClassName"] == "nvidia"
    (init,), (up_init,) = p["initContainers"], up_p["initContainers"]
    assert (init["name"], init["args"], init["volumeMounts"]) == (up_init["name"], up_init["args"], up_init["volumeMounts"])
    assert init["securityContext"] == {"privileged": True, "runAsUser": 0}
    assert init["image"] == "nvcr.io/nvidia/gpu-operator:v26.7.0"
    (c,), (up_c,) = p["containers"], up_p["containers"]
    assert c["image"] == "nvcr.io/nvidia/cloud-native/k8s-mig-manager:v0.15.0"
    for f in ("name", "command", "args", "securityContext", "volumeMounts"):
        assert c[f] == up_c[f], f
    env = {e["name"]: e.get("value", e.get("valueFrom")) for e in c["env"]}
    up_env = {e["name"]: e.get("value", e.get("valueFrom")) for e in up_c["env"]}
    assert up_env.items() <= env.items()
    assert env["CONFIG_FILE"] == "/mig-parted-config/config.yaml"          # a custom config (TestMIGManager)
    assert (env["CDI_ENABLED"], env["NVIDIA_CDI_HOOK_PATH"]) == ("true", "/usr/local/nvidia/toolkit/nvidia-cdi-hook")
    names = {"gpu-clients": "default-gpu-clients", "mig-parted-config": "custom-mig-parted-config"}
    expected = [{**v, "configMap": {"name": names[v["name"]]}} if v["name"] in names else v for v in up_p["volumes"]]
    assert p["volumes"] == expected


def test_rbac_and_config_maps_are_upstreams(dist, index):
    objs = cluster(dist, index, "prod-east")
    assert objs[("Role", NS, "nvidia-mig-manager")]["rules"] == asset("0200_role.yaml")["rules"]
    assert objs[("ClusterRole", "", "nvidia-mig-manager")]["rules"] == asset("0210_clusterrole.yaml")["rules"]
    for kind in ("ServiceAccount", "RoleBinding"):
        assert (kind, NS, "nvidia-mig-manager") in objs
    crb = objs[("ClusterRoleBinding", "", "nvidia-mig-manager")]
    assert crb["subjects"] == asset("0310_clusterrolebinding.yaml")["subjects"]
    for ours, up in ((("ConfigMap", NS, "default-gpu-clients"), "0410_configmap.yaml"),
                     (("ConfigMap", NS, "nvidia-mig-manager-entrypoint"), "0420_configmap.yaml")):
        assert objs[ours]["data"] == asset(up)["data"]
        assert objs[ours]["metadata"].get("labels") == asset(up)["metadata"].get("labels")
    assert ("ConfigMap", NS, "default-mig-parted-config") not in objs    # skipped with a custom config, as upstream


# ---- when it exists --------------------------------------------------------------------------------

def objects(spec: dict) -> dict:
    plan = plan_for(spec)
    out = {}
    for c, props in component_props(plan):
        for o in (c.render(props) if props else []):
            out[(o["kind"], o["metadata"]["name"])] = fill(o, plan.values)
    return out, plan


def test_present_only_with_a_mig_capable_pool_and_switchable():
    objs, plan = objects({"nodePools": [{"name": "a", "gpu": "L40S"}]})          # not MIG-capable
    assert not [k for k in objs if "mig" in k[1]] and "migManager" not in plan.values
    bare = {"nodePools": [{"name": "a", "gpu": "H100-SXM5-80GB"}]}                # MIG-capable, no layout
    objs, plan = objects(bare)
    assert ("DaemonSet", "nvidia-mig-manager") in objs and plan.values["migManager"]["enabled"] is True
    objs, plan = objects({**bare, "migManager": {"disableMigWithoutLayout": False}})
    assert not [k for k in objs if "mig" in k[1]] and "migManager" not in plan.values
    layout = {"nodePools": [{"name": "a", "gpu": "H100-SXM5-80GB", "mig": {"strategy": "single", "layout": {"1g.10gb": 7}}}]}
    objs, plan = objects(layout)
    assert {("DaemonSet", "nvidia-mig-manager"), ("ConfigMap", "custom-mig-parted-config")} <= set(objs)
    assert plan.values["migManager"] == {"enabled": True, "resources": {}}
    objs, plan = objects({**layout, "migManager": {"enabled": False}})
    assert not [k for k in objs if "mig-manager" in k[1] or "mig-parted" in k[1]] and "migManager" not in plan.values
    objs, _ = objects({**layout, "migManager": {"version": "v0.15.1", "resources": {"limits": {"memory": "1Gi"}}}})
    c = objs[("DaemonSet", "nvidia-mig-manager")]["spec"]["template"]["spec"]["containers"][0]
    assert c["image"].endswith("/k8s-mig-manager:v0.15.1") and c["resources"] == {"limits": {"memory": "1Gi"}}


def test_pools_sharing_a_layout_share_a_config_with_one_entry_per_gpu_model():
    layout = {"strategy": "mixed", "layout": {"3g.40gb": 2}}
    plan = plan_for({"nodePools": [
        {"name": "a", "gpu": "H100-SXM5-80GB", "mig": layout},
        {"name": "b", "gpu": "A100-SXM4-80GB", "mig": layout},
        {"name": "c", "gpu": "H100-SXM5-80GB", "nodeSelector": {"x": "y"}, "mig": layout}]})
    doc = yaml.safe_load(plan.pool_configs.mig_parted)
    assert mig_parted_problems(doc) == []
    assert doc["mig-configs"]["2x3g.40gb"] == [
        {"device-filter": ["0x233010DE"], "devices": "all", "mig-enabled": True, "mig-devices": {"3g.40gb": 2}},
        {"device-filter": ["0x20B210DE"], "devices": "all", "mig-enabled": True, "mig-devices": {"3g.40gb": 2}}]
    assert [dict(p.nfd) for p in plan.pool_configs.pools] == [{"nvidia.com/mig.config": "2x3g.40gb"}] * 3


def test_config_names_are_readable_and_valid_label_values():
    assert pools.mig_config_name({"3g.40gb": 1, "2g.20gb": 1, "1g.10gb": 2}) == "1x3g.40gb_1x2g.20gb_2x1g.10gb"
    assert pools.mig_config_name({"1g.10gb+me": 1, "1g.10gb": 5}) == "5x1g.10gb_1x1g.10gb.me"
    assert pools.mig_config_name({"1g.24gb-me": 4}) == "4x1g.24gb-me"
    long = pools.mig_config_name({f"{g}g.{g}gb": 1 for g in range(1, 9)})
    assert LABEL_VALUE.match(long) and len(long) <= 63


# ---- pools NFD cannot tell apart ---------------------------------------------------------------------

def test_same_gpu_different_layouts_get_no_guessed_rule():
    plan = plan_for({"nodePools": [
        {"name": "small", "gpu": "H100-SXM5-80GB", "nodeSelector": {"pool": "small"}, "nodeGroup": "ng-small",
         "mig": {"strategy": "single", "layout": {"1g.10gb": 7}}},
        {"name": "big", "gpu": "H100-SXM5-80GB", "nodeSelector": {"pool": "big"}, "labelsFrom": "user",
         "mig": {"strategy": "single", "layout": {"3g.40gb": 2}}},
        {"name": "infer", "gpu": "L40S"}]})
    pc = plan.pool_configs
    assert [r.gpu for r in pc.nfd_rules] == []                      # nothing NFD could set
    assert [(p.name, dict(p.manual)) for p in pc.manual] == [
        ("small", {"nvidia.com/mig.config": "7x1g.10gb"}), ("big", {"nvidia.com/mig.config": "2x3g.40gb"})]
    doc = node_labels.document(plan)
    assert doc["pools"][0] == {"name": "small", "gpu": "H100-SXM5-80GB", "nodeGroup": "ng-small",
                               "nodeSelector": {"pool": "small"},
                               "labels": {"nvidia.com/mig.config": "7x1g.10gb"}, "why": pc.manual[0].why}
    assert list(node_labels.files(plan, "t/node-labels.yaml")) == ["t/node-labels.yaml"]
    entry = node_labels.index_entry(plan)
    assert entry["nodeGroupLabels"] == {"small": {"nvidia.com/mig.config": "7x1g.10gb"},
                                        "big": {"nvidia.com/mig.config": "2x3g.40gb"}}
    assert entry["labelSources"]["small"] == {"nvidia.com/mig.config": "node group ng-small",
                                              "pool": "node group ng-small"}
    assert entry["labelSources"]["big"] == {"nvidia.com/mig.config": "user", "pool": "user"}
    assert entry["labelSources"]["infer"] == {}                    # L40S: no MIG, no sharing
    objs, _ = objects({"nodePools": [
        {"name": "small", "gpu": "H100-SXM5-80GB", "labelsFrom": "user",
         "mig": {"strategy": "single", "layout": {"1g.10gb": 7}}},
        {"name": "big", "gpu": "H100-SXM5-80GB", "labelsFrom": "user",
         "mig": {"strategy": "single", "layout": {"3g.40gb": 2}}}]})
    rules = objs[("NodeFeatureRule", "nvidia-gpu-node-labels")]["spec"]["rules"]
    assert not [r for r in rules if "nvidia.com/mig.config" in r["labels"]]
    assert node_labels.document(plan_for({})) is None and node_labels.files(plan_for({}), "x") == {}


@pytest.fixture()
def project(tmp_path):
    (tmp_path / "profiles").mkdir()
    shutil.copy(__import__("conftest").REPO / "gpuop.yaml", tmp_path / "gpuop.yaml")
    return tmp_path


HEAD = """\
apiVersion: gpuop/v1alpha1
kind: ClusterProfile
metadata: {name: c1}
spec:
  platform: {type: kubernetes, version: "1.33"}
  os: ubuntu24.04
"""


def test_ambiguous_pools_are_located_errors_until_the_profile_says_where_their_labels_come_from(project):
    """Two pools of one GPU model with different layouts: no NodeFeatureRule can label them, and an
    unlabelled MIG pool silently advertises whole GPUs, so the profile must name the node group (or say
    the user labels the nodes); then it is a warning saying what to put there."""
    pools = """\
  nodePools:
    - name: small
      gpu: H100-SXM5-80GB%s
      mig: {strategy: single, layout: {"1g.10gb": 7}}
    - name: big
      gpu: H100-SXM5-80GB%s
      mig: {strategy: single, layout: {"3g.40gb": 2}}
"""
    (project / "profiles" / "c1.yaml").write_text(HEAD + pools % ("", ""))
    proc = run_main("validate", cwd=project)
    why = ("NFD tells nodes apart by hardware (PCI device ids), not by node labels, so no NodeFeatureRule can set them")
    where = "node group template (cloud node group, Karpenter NodePool or OpenShift MachineSet labels)"
    fix = (f"without them the nodes get no MIG layout and no sharing config. Set nodeGroup to the node group whose "
           f"{where} carries them, or labelsFrom: user if you label the nodes yourself")
    assert (proc.returncode, proc.stderr.splitlines()) == (2, [
        f"profiles/c1.yaml:8:7: spec.nodePools[0]: this pool's nodes need nvidia.com/mig.config=7x1g.10gb, and no "
        f"NodeFeatureRule can set them (pool(s) big have the same GPU model (H100-SXM5-80GB) with other labels, and "
        f"{why}); {fix}",
        f"profiles/c1.yaml:11:7: spec.nodePools[1]: this pool's nodes need nvidia.com/mig.config=2x3g.40gb, and no "
        f"NodeFeatureRule can set them (pool(s) small have the same GPU model (H100-SXM5-80GB) with other labels, and "
        f"{why}); {fix}",
        "gpuop: 2 errors; nothing written"])
    (project / "profiles" / "c1.yaml").write_text(HEAD + pools % ("\n      nodeGroup: h100-small",
                                                                  "\n      labelsFrom: user"))
    proc = run_main("validate", cwd=project)
    assert (proc.returncode, proc.stderr.splitlines()) == (0, [
        f"profiles/c1.yaml:8:7: warning: spec.nodePools[0]: label this pool's nodes nvidia.com/mig.config=7x1g.10gb "
        f"through its {where} (node group h100-small): pool(s) big have the same GPU model (H100-SXM5-80GB) with "
        f"other labels, and {why}",
        f"profiles/c1.yaml:12:7: warning: spec.nodePools[1]: label this pool's nodes nvidia.com/mig.config=2x3g.40gb "
        f"through its {where}: pool(s) small have the same GPU model (H100-SXM5-80GB) with other labels, and {why}",
        "gpuop: 1 profile(s) valid"])


def test_keep_mig_configs_must_name_a_config_of_the_pools_gpu(project):
    (project / "profiles" / "c1.yaml").write_text(HEAD + """\
  nodePools:
    - name: small
      gpu: H100-SXM5-80GB
      keepMigConfigs: [2x3g.40gb, 2x4g.99gb]
      mig: {strategy: single, layout: {"1g.10gb": 7}}
""")
    proc = run_main("validate", cwd=project)
    assert proc.returncode == 2
    assert proc.stderr.splitlines()[0].startswith(
        "profiles/c1.yaml:10:35: spec.nodePools[0].keepMigConfigs[1]: '2x4g.99gb' is not a MIG config name of "
        "H100-SXM5-80GB")


def test_mig_capable_pools_without_a_layout_get_all_disabled_unless_the_profile_opts_out(project):
    """As NVIDIA's operator applies all-disabled on MIG-capable nodes without a config: a GPU that arrives
    with MIG mode on is returned to whole GPUs."""
    (project / "profiles" / "c1.yaml").write_text(HEAD + """\
  nodePools:
    - name: whole
      gpu: H100-SXM5-80GB
    - name: l4
      gpu: L4
""")
    run_gpuop("synth", "--no-cache", cwd=project, check=True)
    objs = {(o["kind"], o["metadata"]["name"]): o for f in sorted((project / "dist" / "c1" / "manifests").glob("*.yaml"))
            for o in load_all(f.read_text()) if isinstance(o, dict) and "metadata" in o}
    assert ("DaemonSet", "nvidia-mig-manager") in objs
    config = load_all(objs[("ConfigMap", "custom-mig-parted-config")]["data"]["config.yaml"])[0]
    assert config == {"version": "v1", "mig-configs": {"all-disabled": [{"devices": "all", "mig-enabled": False}]}}
    (rule,) = [r for r in objs[("NodeFeatureRule", "nvidia-gpu-node-labels")]["spec"]["rules"]
               if r["name"] == "gpuop.pool.H100-SXM5-80GB"]
    assert rule["labels"]["nvidia.com/mig.config"] == "all-disabled"
    assert not any(r["name"] == "gpuop.pool.L4" and "nvidia.com/mig.config" in r.get("labels", {})
                   for r in objs[("NodeFeatureRule", "nvidia-gpu-node-labels")]["spec"]["rules"])
    text = (project / "profiles" / "c1.yaml").read_text()
    (project / "profiles" / "c1.yaml").write_text(text.replace("  nodePools:", "  migManager: {disableMigWithoutLayout: false}\n  nodePools:"))
    run_gpuop("synth", "--no-cache", cwd=project, check=True)
    names = {o["metadata"]["name"] for f in (project / "dist" / "c1" / "manifests").glob("*.yaml")
             for o in load_all(f.read_text()) if isinstance(o, dict) and "metadata" in o}
    assert "nvidia-mig-manager" not in names and "custom-mig-parted-config" not in names


def test_no_rules_and_mig_manager_off_warn(project):
    (project / "profiles" / "c1.yaml").write_text(HEAD + """\
  nfd: {rules: false}
  nodePools:
    - name: train
      gpu: H100-SXM5-80GB
      mig: {strategy: mixed, layout: {"3g.40gb": 1, "1g.10gb": 4}}
""")
    proc = run_main("validate", cwd=project)
    assert proc.returncode == 0
    assert proc.stderr.splitlines()[0] == (
        "profiles/c1.yaml:9:7: warning: spec.nodePools[0]: label this pool's nodes "
        "nvidia.com/mig.config=1x3g.40gb_4x1g.10gb through its node group template (cloud node group, Karpenter "
        "NodePool or OpenShift MachineSet labels): spec.nfd.rules is false, so no NodeFeatureRule sets them")
    text = (project / "profiles" / "c1.yaml").read_text().replace("nfd: {rules: false}", "migManager: {enabled: false}")
    (project / "profiles" / "c1.yaml").write_text(text)
    proc = run_main("validate", cwd=project)
    assert proc.stderr.splitlines()[0] == (
        "profiles/c1.yaml:7:16: warning: spec.migManager.enabled: pools declare MIG layouts but the MIG manager is "
        "off: nothing applies them on the nodes (partition the GPUs yourself)")


# ---- a layout change, seen by `gpuop diff` -------------------------------------------------------------

def test_changing_a_layout_changes_exactly_the_mig_config_and_the_label_rule(workdir, tmp_path):
    w = tmp_path / "w"
    shutil.copytree(workdir / "profiles", w / "profiles")
    shutil.copy(workdir / "gpuop.yaml", w / "gpuop.yaml")
    run_gpuop("synth", "-o", "dist", cwd=w, check=True)
    path = w / "profiles" / "prod-east.yaml"
    text = path.read_text()
    assert '"3g.40gb": 1, "2g.20gb": 1, "1g.10gb": 2' in text
    path.write_text(text.replace('"3g.40gb": 1, "2g.20gb": 1, "1g.10gb": 2', '"3g.40gb": 2'))
    out = run_gpuop("diff", cwd=w, check=True).stdout
    assert out.startswith("DESTRUCTIVE: 1 effect(s) interrupt GPU workloads or delete things on clusters\n"
                          "  !! cluster prod-east: mig-repartition: pool train: MIG reconfiguration "
                          "(1x3g.40gb_1x2g.20gb_2x1g.10gb -> 2x3g.40gb)")
    section = out.split("\ncluster prod-east: ")[1].split("\ncluster ")[0]
    changed = [l for l in section.splitlines() if re.match(r"^  (!! )?[~+-] [A-Z][A-Za-z]+ \S+( .*)?$", l)]
    # and the dashboard, whose planned series count the new layout's devices (no effect on the nodes)
    assert changed == ["  !! ~ ConfigMap gpu-operator/custom-mig-parted-config  (mig-repartition)",
                       "  !! ~ NodeFeatureRule nvidia-gpu-node-labels  (mig-repartition)",
                       # the health gate's CUDA samples follow the pool's MIG profiles (one per advertised resource)
                       "  - Job gpu-operator/gpuop-gate-train-cuda-mig-1g-10gb",
                       "  - Job gpu-operator/gpuop-gate-train-cuda-mig-2g-20gb",
                       "  ~ ConfigMap gpu-operator/gpuop-dashboards",
                       "  ~ Job gpu-operator/gpuop-gate-train-cuda-mig-3g-40gb"]
    assert ("spec.rules[gpuop.pool.H100-SXM5-80GB].labels.nvidia.com/mig.config: "
            "1x3g.40gb_1x2g.20gb_2x1g.10gb -> 2x3g.40gb") in section
    assert section.startswith("chart 0.1.0 -> 0.1.1")
    for other in ("full-stack", "lab-west", "mig-sharing"):
        assert f"cluster {other}: unchanged" in out
