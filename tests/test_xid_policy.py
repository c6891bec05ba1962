"""The device plugin's XID health policy: NVIDIA's XID catalog as data, the profile fields as the plugin's env
(DP_DISABLE_HEALTHCHECKS / DP_ENABLE_HEALTHCHECKS) and back, one device plugin DaemonSet per pool policy in the
stack, one devicePlugin.env in operator mode, and every rule's message exactly as the CLI prints it."""

from __future__ import annotations

import shutil
import textwrap
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuop import catalog
from gpuop.catalog import xids as xc
from gpuop.components.device_plugin import DevicePlugin, DevicePluginProps, HealthPolicyProps
from gpuop.plan import chartmap as cm
from gpuop.plan import pools as plan_pools
from gpuop.profile.models import ClusterProfile

from conftest import REPO, run_gpuop, run_main

CAT = xc.load()
CODES = tuple(x.xid for x in CAT.xids)


# ---------------------------------------------------------------------------------------- the catalog

def test_the_catalog_lists_each_xid_of_nvidias_table_once_with_a_known_action():
    assert len(set(CODES)) == len(CODES) and CODES == tuple(sorted(CODES))
    assert CODES[0] == 1 and len(CODES) == 172            # NVIDIA's Xid Catalog table: codes 1..172
    assert all(x.action is None or x.action in CAT.actions for x in CAT.xids)
    assert CAT.get(79).mnemonic == "ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS" and CAT.reset_required(79)
    assert CAT.get(13).action == "RESTART_APP" and not CAT.reset_required(13)
    # NVIDIA/k8s-device-plugin#1974: 109 is RESET_GPU in the catalog, yet ignored by the plugin by default
    assert CAT.reset_required(109) and 109 in CAT.plugin("v0.20.0").ignoredByDefault


def test_each_row_records_which_nvidia_source_confirms_it():
    assert set(CAT.checkedAgainst) == {"catalog-page", "driver-header", "device-plugin"}
    assert all(set(x.checked) <= set(CAT.checkedAgainst) for x in CAT.xids)
    # the stored catalog page shows rows 1-13, and all of them; no later row claims it
    assert [x.xid for x in CAT.xids if "catalog-page" in x.checked] == list(range(1, 14))
    # a driver name is recorded exactly where the driver's names do not include the catalog's mnemonic
    assert not [x.xid for x in CAT.xids if x.driverName and "driver-header" in x.checked]
    renamed = {x.xid: x.driverName for x in CAT.xids if x.driverName}
    assert renamed[162] == "ISINK_REENGAGED" and set(renamed) == {13, 30, 152, 153, 162, 163, 164, 165, 166, 170}
    # the XIDs the alerts' runbook and the examples' policies name are all confirmed by an NVIDIA source
    for code in (13, 31, 43, 45, 48, 63, 64, 74, 79, 92, 94, 95, 109):
        assert CAT.get(code).checked, code
    unconfirmed = [x.xid for x in CAT.xids if not x.checked and not x.driverName]
    assert len(unconfirmed) == 30 and 109 not in unconfirmed and 48 not in unconfirmed


def test_every_release_s_device_plugin_has_its_health_behaviour():
    for release in catalog.load().releases:
        version = release.components["devicePlugin"].version
        plugin = CAT.plugin(version)
        assert plugin is not None and plugin.enableEnv, version        # every release deploys v0.18.0 or later
        assert plugin.ignoredByDefault == (13, 31, 43, 45, 68, 109)


def test_device_plugin_rows_follow_its_history():
    assert CAT.plugin("v0.17.0").ignoredByDefault == (13, 31, 43, 45, 68)         # before f74a958a2
    assert CAT.plugin("v0.17.4").ignoredByDefault[-1] == 109 and not CAT.plugin("v0.17.4").enableEnv
    assert CAT.plugin("v0.18.0").enableEnv                                        # 0900fac41
    assert CAT.plugin("latest") is None


# ------------------------------------------------------------------- the env grammar, both ways

def go_unhealthy(env: dict[str, str], xid: int, default_ignored: tuple[int, ...]) -> bool:
    """k8s-device-plugin v0.20.0 internal/rm/health.go, transcribed line by line (newHealthCheckXIDs,
    getDisabledHealthCheckXids, IsAllDisabled, IsDisabled): whether an XID event marks the device unhealthy."""
    def new_map(value: str) -> dict[int, bool]:
        out: dict[int, bool] = {}
        for item in value.lower().split(","):
            t = item.strip()
            if t in ("all", "xids"):
                return {0: True}
            if t == "":
                continue
            try:
                n = int(t, 10)
                if n < 0 or not t.isdigit():
                    raise ValueError
            except ValueError:
                continue
            out[n] = True
        return out

    disabled = new_map(env.get(xc.DISABLE_ENV, ""))
    enabled = new_map(env.get(xc.ENABLE_ENV, ""))
    for x in default_ignored:
        disabled[x] = True
    for x in enabled:
        disabled[x] = False
    if disabled.get(0) is True:                    # IsAllDisabled: checkHealth returns before watching
        return False
    if 0 in disabled and disabled[0] is False:     # enabled=all
        return True
    if xid in disabled:
        return not disabled[xid]
    return True


XIDS = st.lists(st.sampled_from(CODES), max_size=5, unique=True)
POLICIES = st.builds(lambda checks, ignore, fatal: xc.Policy(checks, () if not checks else tuple(
    x for x in ignore if x not in fatal), tuple(fatal)), st.booleans(), XIDS, XIDS)


@settings(max_examples=300, deadline=None)
@given(POLICIES)
def test_policy_env_policy_round_trip(policy):
    assert xc.read_policy_env(dict(xc.policy_env(policy))) == policy


@settings(max_examples=300, deadline=None)
@given(POLICIES, st.sampled_from(CODES))
def test_the_env_means_the_policy_under_the_plugins_own_parser(policy, xid):
    plugin = CAT.plugin("v0.20.0")
    assert go_unhealthy(dict(xc.policy_env(policy)), xid, plugin.ignoredByDefault) == xc.unhealthy(policy, xid, plugin)


ENV_VALUE = st.lists(st.sampled_from(["all", "XIDS", "0", "48", " 79 ", "13", "", "x1", "-3", "109", "٣"]),
                     max_size=4).map(",".join)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.sampled_from(xc.HEALTH_ENV), ENV_VALUE), st.sampled_from(CODES))
def test_an_env_read_as_a_policy_means_what_the_plugin_does(env, xid):
    """Any env a running cluster may carry: read as a policy only when the policy says exactly what the plugin does
    with it (else import keeps it as env)."""
    policy = xc.read_policy_env(env)
    plugin = CAT.plugin("v0.20.0")
    if policy is not None:
        assert xc.unhealthy(policy, xid, plugin) == go_unhealthy(env, xid, plugin.ignoredByDefault)


HEALTH = st.tuples(st.booleans(), XIDS, XIDS).map(lambda t: {
    **({} if t[0] else {"checks": False}),
    **({"ignoreXids": [x for x in t[1] if x not in t[2]]} if t[0] and [x for x in t[1] if x not in t[2]] else {}),
    **({"fatalXids": t[2]} if t[2] else {})})


@settings(max_examples=200, deadline=None)
@given(HEALTH, st.lists(st.sampled_from(["LOG_LEVEL", "FAIL_ON_INIT_ERROR"]), max_size=2, unique=True))
def test_profile_values_profile_keeps_the_policy_and_the_own_env(health, names):
    own = [{"name": n, "value": "1"} for n in names]
    values = cm.profile_to_values({"devicePlugin": {"env": own, "health": health}}, cm.release_images())
    profile, lost = cm.values_to_profile(values)
    assert lost == []
    assert profile.get("devicePlugin", {}).get("health") == (health or None)
    assert profile.get("devicePlugin", {}).get("env", []) == own


@pytest.mark.parametrize("env", [
    [{"name": "DP_ENABLE_HEALTHCHECKS", "value": "all"}],            # every XID fatal: no profile field says it
    [{"name": "DP_DISABLE_HEALTHCHECKS", "value": "48,48"}],         # not gpuop's form
    [{"name": "DP_ENABLE_HEALTHCHECKS", "value": "79"}, {"name": "DP_DISABLE_HEALTHCHECKS", "value": "all"}],
    [{"name": "DP_DISABLE_HEALTHCHECKS", "value": "all,48"}],        # the plugin drops 48
])
def test_an_env_no_policy_says_exactly_stays_the_plugins_env(env):
    profile, lost = cm.values_to_profile({"devicePlugin": {"env": env}})
    assert lost == [] and profile["devicePlugin"] == {"env": env}


# --------------------------------------------------------------------------------- the component

PROPS = DevicePluginProps(namespace="gpu-ops", image="registry.test/k8s-device-plugin:v0.20.0",
                          validator_image="registry.test/gpu-operator:v1")


def _daemonsets(objs):
    return {o["metadata"]["name"]: o for o in objs if o["kind"] == "DaemonSet"}


def _env(ds):
    return {e["name"]: e.get("value") for e in ds["spec"]["template"]["spec"]["containers"][0]["env"]}


def test_no_policy_is_nvidias_defaults_one_daemonset_no_env():
    (ds,) = _daemonsets(DevicePlugin.render(PROPS)).values()
    assert not set(_env(ds)) & set(xc.HEALTH_ENV)


def test_pool_policies_get_a_daemonset_each_and_the_main_one_leaves_their_nodes():
    props = PROPS.model_copy(update={
        "health_env": (("DP_ENABLE_HEALTHCHECKS", "109"),),
        "health_policies": (HealthPolicyProps(name="health-abc123", env=(("DP_DISABLE_HEALTHCHECKS", "all"),
                                                                         ("DP_ENABLE_HEALTHCHECKS", "48,79"))),),
        "env_overrides": (("LOG_LEVEL", "5"),)})
    ds = _daemonsets(DevicePlugin.render(props))
    assert sorted(ds) == ["nvidia-device-plugin-daemonset", "nvidia-device-plugin-health-abc123"]
    main, pool = ds["nvidia-device-plugin-daemonset"], ds["nvidia-device-plugin-health-abc123"]
    assert _env(main)["DP_ENABLE_HEALTHCHECKS"] == "109" and "DP_DISABLE_HEALTHCHECKS" not in _env(main)
    assert _env(pool)["DP_DISABLE_HEALTHCHECKS"] == "all" and _env(pool)["DP_ENABLE_HEALTHCHECKS"] == "48,79"
    assert _env(pool)["LOG_LEVEL"] == "5"
    term = main["spec"]["template"]["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0]["matchExpressions"]
    assert {"key": "nvidia.com/device-plugin.health", "operator": "DoesNotExist"} in term
    assert pool["spec"]["template"]["spec"]["nodeSelector"]["nvidia.com/device-plugin.health"] == "health-abc123"
    assert pool["spec"]["selector"] == {"matchLabels": {"app": "nvidia-device-plugin-health-abc123"}}


def test_the_profiles_own_env_still_wins_by_name_on_every_daemonset():
    props = PROPS.model_copy(update={
        "health_env": (("DP_ENABLE_HEALTHCHECKS", "109"),),
        "health_policies": (HealthPolicyProps(name="health-abc123", env=(("DP_ENABLE_HEALTHCHECKS", "48"),)),),
        "env_overrides": (("DP_ENABLE_HEALTHCHECKS", "31"),)})
    assert {_env(d)["DP_ENABLE_HEALTHCHECKS"] for d in _daemonsets(DevicePlugin.render(props)).values()} == {"31"}


# ------------------------------------------------------------------------------------------ the plan

def _spec(pools: list[dict], health: dict | None = None, mode: str = "stack"):
    doc = {"apiVersion": "gpuop/v1alpha1", "kind": "ClusterProfile", "metadata": {"name": "c"},
           "spec": {"platform": {"type": "kubernetes", "version": "1.33"}, "os": "ubuntu24.04",
                    "delivery": {"mode": mode}, "devicePlugin": {"health": health}, "nodePools": pools}}
    return ClusterProfile.model_validate(doc).spec


def test_pools_with_the_same_policy_share_a_daemonset_and_others_get_their_own():
    same = {"fatalXids": [109]}
    spec = _spec([{"name": "a", "gpu": "H100-SXM5-80GB", "devicePluginHealth": same},
                  {"name": "b", "gpu": "L40S"},
                  {"name": "c", "gpu": "A100-SXM4-80GB", "devicePluginHealth": {"checks": False, "fatalXids": [48]}},
                  {"name": "d", "gpu": "B200-180GB", "devicePluginHealth": {"fatalXids": [48], "checks": False}}],
                 health=same)
    configs = plan_pools.build(spec, catalog.load())
    assert configs.health_env == (("DP_ENABLE_HEALTHCHECKS", "109"),)
    (name, env), = configs.health_policies
    assert env == (("DP_DISABLE_HEALTHCHECKS", "all"), ("DP_ENABLE_HEALTHCHECKS", "48"))
    labels = {p.name: dict(p.nfd) for p in configs.pools}
    assert labels["a"].get(plan_pools.HEALTH_LABEL) is None and labels["b"].get(plan_pools.HEALTH_LABEL) is None
    assert labels["c"][plan_pools.HEALTH_LABEL] == labels["d"][plan_pools.HEALTH_LABEL] == name


def test_a_policy_change_renames_only_that_policys_daemonset():
    def names(fatal):
        spec = _spec([{"name": "a", "gpu": "H100-SXM5-80GB"},
                      {"name": "b", "gpu": "L40S", "devicePluginHealth": {"fatalXids": fatal}},
                      {"name": "c", "gpu": "A100-SXM4-80GB", "devicePluginHealth": {"ignoreXids": [94]}}])
        return {n for n, _ in plan_pools.build(spec, catalog.load()).health_policies}
    before, after = names([109]), names([109, 119])
    assert len(before & after) == 1 and len(before - after) == 1


def test_a_dra_pool_runs_no_device_plugin_so_gets_no_policy_daemonset():
    spec = _spec([{"name": "a", "gpu": "H100-SXM5-80GB", "allocation": "dra",
                   "devicePluginHealth": {"fatalXids": [109]}}])
    assert plan_pools.build(spec, catalog.load()).health_policies == ()


# ------------------------------------------------------------------------------- the rules, as printed

BASE = """\
apiVersion: gpuop/v1alpha1
kind: ClusterProfile
metadata:
  name: c1
spec:
  platform: {type: kubernetes, version: "1.33"}
  os: ubuntu24.04
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    (root / "profiles").mkdir(parents=True)
    shutil.copy(REPO / "gpuop.yaml", root / "gpuop.yaml")
    return root


def validate(project: Path, body: str):
    (project / "profiles" / "c1.yaml").write_text(BASE + textwrap.indent(textwrap.dedent(body), "  "))
    return run_main("validate", "profiles/c1.yaml", cwd=project)


def refused(proc, expected: str) -> None:
    assert "Traceback" not in proc.stderr and "please report" not in proc.stderr, proc.stderr
    assert (proc.returncode, proc.stderr) == (2, textwrap.dedent(expected)), proc.stderr


def test_an_xid_nvidias_catalog_lacks_is_refused_where_it_is_written(project):
    refused(validate(project, """\
        devicePlugin:
          health: {ignoreXids: [31, 999]}
        nodePools:
          - {name: train, gpu: H100-SXM5-80GB}
        """), """\
        profiles/c1.yaml:9:31: spec.devicePlugin.health.ignoreXids[1]: Invalid value: 999: not an XID of NVIDIA's XID catalog (codes 1 to 172, catalog/data/xids.yaml)
        gpuop: 1 error; nothing written
        """)


def test_xid_zero_is_refused_by_the_schema_since_the_plugin_reads_it_as_every_xid(project):
    proc = validate(project, """\
        devicePlugin:
          health: {fatalXids: [0]}
        nodePools:
          - {name: train, gpu: H100-SXM5-80GB}
        """)
    assert proc.returncode == 2 and "spec.devicePlugin.health.fatalXids[0]:" in proc.stderr, proc.stderr


def test_conflicting_lists_are_refused_each_at_its_entry(project):
    refused(validate(project, """\
        devicePlugin:
          health: {ignoreXids: [94, 94, 48], fatalXids: [48]}
        nodePools:
          - name: train
            gpu: H100-SXM5-80GB
            devicePluginHealth: {checks: false, ignoreXids: [31]}
        """), """\
        profiles/c1.yaml:9:31: spec.devicePlugin.health.ignoreXids[1]: Duplicate value: 94
        profiles/c1.yaml:9:35: spec.devicePlugin.health.ignoreXids[2]: Invalid value: 48: also in fatalXids, which wins (DP_ENABLE_HEALTHCHECKS overrides DP_DISABLE_HEALTHCHECKS), so ignoring it does nothing
        profiles/c1.yaml:13:43: spec.nodePools[0].devicePluginHealth.ignoreXids: Forbidden: checks is false, so every XID is already ignored (DP_DISABLE_HEALTHCHECKS=all); drop ignoreXids, or keep checks on
        gpuop: 3 errors; nothing written
        """)


def test_the_env_and_a_policy_both_writing_the_variables_is_refused(project):
    refused(validate(project, """\
        devicePlugin:
          env: [{name: DP_DISABLE_HEALTHCHECKS, value: "all"}]
          health: {fatalXids: [48]}
        nodePools:
          - {name: train, gpu: H100-SXM5-80GB}
        """), """\
        profiles/c1.yaml:9:12: spec.devicePlugin.env[0].name: Forbidden: DP_DISABLE_HEALTHCHECKS is written from the device plugin health policy (spec.devicePlugin.health, nodePools[].devicePluginHealth); set the XIDs there
        gpuop: 1 error; nothing written
        """)


def test_fatal_xids_on_a_plugin_that_never_reads_them_are_refused(project):
    refused(validate(project, """\
        devicePlugin:
          version: v0.17.4
          health: {fatalXids: [48]}
        nodePools:
          - {name: train, gpu: H100-SXM5-80GB}
        """), """\
        profiles/c1.yaml:10:14: spec.devicePlugin.health.fatalXids: Forbidden: the device plugin v0.17.4 does not read DP_ENABLE_HEALTHCHECKS (from v0.18.0 on), so these XIDs would not mark a GPU unhealthy; use a release whose device plugin is v0.18.0 or later, or drop fatalXids
        gpuop: 1 error; nothing written
        """)


def test_fatal_xids_beside_checks_off_are_refused_since_the_plugin_then_watches_nothing(project):
    refused(validate(project, """\
        nodePools:
          - name: train
            gpu: H100-SXM5-80GB
            devicePluginHealth: {checks: false, fatalXids: [48, 79]}
        """), """\
        profiles/c1.yaml:11:43: spec.nodePools[0].devicePluginHealth.fatalXids: Forbidden: with checks false the device plugin v0.20.0 watches no XID at all (DP_DISABLE_HEALTHCHECKS=all: checkHealth returns on IsAllDisabled before DP_ENABLE_HEALTHCHECKS counts), so these XIDs would not mark a GPU unhealthy; keep checks on and list the XIDs to leave out in ignoreXids
        gpuop: 1 error; nothing written
        """)


def test_with_every_xid_disabled_the_plugins_parser_marks_none_fatal_whatever_is_enabled():
    """The catalog's fatalWithChecksOff: false, by health.go's own logic (IsAllDisabled reads only the `all` entry)."""
    plugin = CAT.plugin("v0.20.0")
    env = {xc.DISABLE_ENV: "all", xc.ENABLE_ENV: "48,79"}
    assert not plugin.fatalWithChecksOff
    assert not any(go_unhealthy(env, x, plugin.ignoredByDefault) for x in CODES)


def test_a_policy_on_a_dra_pool_is_refused(project):
    proc = validate(project, """\
        nodePools:
          - name: train
            gpu: H100-SXM5-80GB
            allocation: dra
            devicePluginHealth: {fatalXids: [48]}
        """)
    assert proc.returncode == 2
    assert ("profiles/c1.yaml:12:7: spec.nodePools[0].devicePluginHealth: Forbidden: allocation is dra, so no device "
            "plugin runs on this pool's nodes to read the policy\n") in proc.stderr, proc.stderr


def test_operator_mode_refuses_a_pool_policy_of_its_own_with_the_reason(project):
    refused(validate(project, """\
        delivery: {mode: operator}
        devicePlugin:
          health: {fatalXids: [109]}
        nodePools:
          - {name: train, gpu: H100-SXM5-80GB, devicePluginHealth: {fatalXids: [109]}}
          - name: infer
            gpu: L40S
            devicePluginHealth: {ignoreXids: [94]}
        """), """\
        profiles/c1.yaml:15:7: spec.nodePools[1].devicePluginHealth: Forbidden: NVIDIA's ClusterPolicy has one devicePlugin.env for the device plugin of every node, so a pool cannot have a health policy of its own in operator mode; set it in spec.devicePlugin.health for every pool, or use spec.delivery.mode: stack
        gpuop: 1 error; nothing written
        """)


def test_ignoring_a_reset_required_or_default_xid_is_warned_with_nvidias_action(project):
    proc = validate(project, """\
        devicePlugin:
          health: {ignoreXids: [79, 13, 94]}
        nodePools:
          - {name: train, gpu: H100-SXM5-80GB}
        """)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == (
        "profiles/c1.yaml:9:27: warning: spec.devicePlugin.health.ignoreXids[0]: XID 79 "
        "(ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS: GPU has fallen off the bus): NVIDIA's immediate action is "
        "RESTART_BM (reboot the bare-metal node); ignored, the GPU stays allocatable and new pods are scheduled on it "
        "until something else takes it out of service\n"
        "profiles/c1.yaml:9:31: warning: spec.devicePlugin.health.ignoreXids[1]: XID 13 (Graphics Engine Exception) is "
        "already ignored by the device plugin v0.20.0 by default; the entry changes nothing\n"
        "gpuop: 1 profile(s) valid\n")


def test_the_fields_say_what_omitted_means_in_the_schema():
    schema = ClusterProfile.model_json_schema()
    health = schema["$defs"]["DevicePluginHealth"]["properties"]
    assert all("Omitted:" in health[f]["description"] for f in ("checks", "ignoreXids", "fatalXids"))
    assert "Omitted:" in schema["$defs"]["DevicePluginSettings"]["properties"]["health"]["description"]
    assert "Omitted:" in schema["$defs"]["NodePool"]["properties"]["devicePluginHealth"]["description"]


# ------------------------------------------------------------------------------------------ gpuop diff

@pytest.mark.slow
def test_diff_names_the_daemonset_a_pool_policy_change_rolls(tmp_path):
    w = tmp_path / "w"
    shutil.copytree(REPO / "profiles", w / "profiles")
    shutil.copy(REPO / "gpuop.yaml", w / "gpuop.yaml")
    run_gpuop("synth", "-o", "dist", "profiles/full-stack.yaml", cwd=w, check=True)
    path = w / "profiles" / "full-stack.yaml"
    text = path.read_text()
    old = "devicePluginHealth: {ignoreXids: [63, 92, 94], fatalXids: [109]}"
    assert old in text
    path.write_text(text.replace(old, "devicePluginHealth: {ignoreXids: [63, 92, 94], fatalXids: [109, 119]}"))
    out = run_gpuop("diff", "profiles/full-stack.yaml", cwd=w, check=True).stdout
    before = plan_pools.health_name((("DP_DISABLE_HEALTHCHECKS", "63,92,94"), ("DP_ENABLE_HEALTHCHECKS", "109")))
    after = plan_pools.health_name((("DP_DISABLE_HEALTHCHECKS", "63,92,94"), ("DP_ENABLE_HEALTHCHECKS", "109,119")))
    assert f"DaemonSet gpu-operator/nvidia-device-plugin-{before}" in out, out
    assert f"+ DaemonSet gpu-operator/nvidia-device-plugin-{after}" in out, out
    assert "~ DaemonSet gpu-operator/nvidia-device-plugin-daemonset" not in out, out
    assert f"nvidia.com/device-plugin.health: {before} -> {after}" in out, out
