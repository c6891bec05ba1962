"""The mapping table profile <-> NVIDIA's chart values (plan/chartmap.py), read both ways: every row's
transform and inverse agree (a property test over every setting the rows cover), absent values mean the
chart defaults of the operator version (gpuop's copy of NVIDIA's values.yaml), and what the profile cannot
express is reported, never dropped."""

from __future__ import annotations

import copy

import pytest
import yaml
from hypothesis import HealthCheck, given, settings, strategies as st

from gpuop.catalog import operator as operator_catalog
from gpuop.plan import chartmap as cm

from conftest import REFS

REL = cm.release_images()
LABEL = st.from_regex(r"\A[a-z][a-z0-9]{0,6}\Z")
RESOURCES = st.one_of(st.none(), st.fixed_dictionaries({}, optional={
    "limits": st.fixed_dictionaries({"cpu": st.sampled_from(["100m", "1"]), "memory": st.sampled_from(["64Mi", "1Gi"])}),
    "requests": st.fixed_dictionaries({"cpu": st.sampled_from(["50m", "2"])})}).filter(bool))
TOLERATION = st.fixed_dictionaries({"key": LABEL, "operator": st.just("Exists"), "effect": st.sampled_from(
    ["NoSchedule", "NoExecute"])})

ENV = st.lists(st.fixed_dictionaries({"name": st.sampled_from(["HTTPS_PROXY", "NO_PROXY", "LOG_LEVEL"]),
                                      "value": st.sampled_from(["http://proxy.example.com:3128", ".svc", ""])}),
               max_size=3, unique_by=lambda e: e["name"])

# one strategy per profile path of the table: a new row without one fails test_every_row_has_a_strategy
STRATEGIES = {
    "platform.type": st.sampled_from(["kubernetes", "openshift"]),
    "images.registry": st.one_of(st.none(), st.from_regex(r"\A[a-z][a-z0-9]{0,7}\.example\.com(/[a-z0-9]{1,6}){0,2}\Z")),
    "images.pullPolicy": st.sampled_from(["Always", "IfNotPresent", "Never"]),
    "delivery.operator.repositories": st.dictionaries(
        st.sampled_from(["driver", "driverManager", "toolkit", "devicePlugin", "dcgm", "dcgmExporter", "gfd",
                         "migManager", "nodeStatusExporter", "validator"]),
        st.sampled_from(["other.example.org/mirror", "registry.example.net/nvidia/k8s"]), max_size=3),
    "images.pullSecrets": st.one_of(st.none(), st.lists(LABEL, min_size=1, max_size=3, unique=True)),
    # at most 4 of the 9 components: the others keep images.pullSecrets the most common list
    "delivery.operator.pullSecrets": st.dictionaries(
        st.sampled_from(["driver", "toolkit", "devicePlugin", "dcgm", "dcgmExporter", "gfd", "migManager",
                         "nodeStatusExporter", "validator"]),
        st.sampled_from([["ngc-secret"], ["mirror-a", "mirror-b"]]), max_size=4),
    **{f"{k}.version": st.one_of(st.none(), st.from_regex(r"\Av[0-9]\.[0-9]{1,2}\.[0-9]-rc[0-9]\Z"))
       for k in cm.VERSIONED},
    **{f"{k}.enabled": st.booleans() for k in cm.SWITCHABLE},
    **{f"{k}.resources": RESOURCES for k in cm.RESOURCES},
    "driver.kernelModuleType": st.sampled_from(["auto", "open", "proprietary"]),
    "driver.precompiled": st.booleans(),
    "delivery.operator.nvidiaDriverCRD": st.sampled_from([None, True]),
    "delivery.operator.gds": st.booleans(),
    "cdi.nriPluginEnabled": st.booleans(),
    "delivery.operator.gdrcopy": st.booleans(),
    "delivery.operator.clusterPolicy": st.booleans(),
    "delivery.operator.gpuCluster": st.booleans(),
    "daemonsets.priorityClassName": st.sampled_from(["system-node-critical", "system-cluster-critical", "gpu-high"]),
    "daemonsets.tolerations": st.one_of(st.none(), st.lists(TOLERATION, min_size=1, max_size=2)),
    "dcgmExporter.podLabels": st.booleans(),
    "dcgmExporter.podUID": st.booleans(),
    "dcgmExporter.podLabelAllowlist": st.lists(st.sampled_from(["^app$", "^team$", r"^kueue\.x-k8s\.io/.*$"]),
                                               max_size=3, unique=True),
    "dcgmExporter.metrics": st.lists(st.fixed_dictionaries({
        "field": st.sampled_from(["DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_SM_CLOCK"]),
        "type": st.sampled_from(["gauge", "counter"]), "help": st.sampled_from(["GPU utilization", "FB used"])}),
        max_size=3),
    "driver.upgradePolicy.autoUpgrade": st.booleans(),
    "driver.upgradePolicy.maxParallelUpgrades": st.integers(0, 64),
    "driver.upgradePolicy.drain": st.booleans(),
    "driver.upgradePolicy.force": st.booleans(),
    "driver.upgradePolicy.timeoutSeconds": st.integers(0, 3600),
    "driver.upgradePolicy.deleteEmptyDir": st.booleans(),
    "driver.upgradePolicy.podSelector": st.sampled_from(["", "app!=critical", "tier=batch"]),
    "dcgmExporter.serviceMonitor.interval": st.sampled_from(["15s", "30s", "1m"]),
    "dcgmExporter.serviceMonitor.honorLabels": st.booleans(),
    "dcgmExporter.serviceMonitor.additionalLabels": st.dictionaries(LABEL, LABEL, max_size=2),
    "delivery.operator.devicePluginConfig": st.one_of(st.none(), st.fixed_dictionaries(
        {"name": st.sampled_from(["time-slicing-config", "plugin-cfg"])},
        optional={"default": st.sampled_from(["any", "", "tesla-t4"])})),
    "delivery.operator.migManagerConfig": st.one_of(st.none(), st.fixed_dictionaries(
        {"name": st.sampled_from(["custom-mig-config", "mig-cfg"])})),
    "delivery.operator.dcgmMetricsConfig": st.one_of(st.none(), st.fixed_dictionaries(
        {"name": st.sampled_from(["custom-dcgm-exporter-metrics", "metrics"])})),
    "driver.env": ENV,
    "delivery.operator.env": st.dictionaries(st.sampled_from(list(cm.ENV_ONLY_OPERATOR)), ENV.filter(bool),
                                             max_size=3),
    "devicePlugin.env": ENV,
    "devicePlugin.args": st.one_of(st.none(), st.lists(st.sampled_from(["--fail-on-init-error=false", "-v=4"]),
                                                       min_size=1, max_size=2, unique=True)),
    "daemonsets.labels": st.dictionaries(LABEL, LABEL, max_size=2),
    "daemonsets.annotations": st.dictionaries(st.sampled_from(["example.com/owner", "team"]), LABEL, max_size=2),
    "driver.repoConfig": st.one_of(st.none(), st.fixed_dictionaries({"configMapName": st.sampled_from(
        ["repo-config", "local-mirror"])})),
    "driver.certConfig": st.one_of(st.none(), st.fixed_dictionaries({"configMapName": st.sampled_from(
        ["cert-config", "proxy-ca"])})),
}
EXAMPLES = {       # a non-default value per profile path, for the per-row test
    "platform.type": "openshift", "images.registry": "registry.example.com/nvidia", "images.pullPolicy": "Always",
    "delivery.operator.repositories": {"validator": "other.example.org/mirror"},
    "images.pullSecrets": ["regcred"], "delivery.operator.pullSecrets": {"driver": ["ngc-secret"]},
    **{f"{k}.version": "v9.9.9" for k in cm.VERSIONED},
    **{f"{k}.enabled": k in ("dcgm", "nodeStatusExporter") for k in cm.SWITCHABLE},
    **{f"{k}.resources": {"limits": {"cpu": "1"}} for k in cm.RESOURCES},
    "driver.kernelModuleType": "open", "driver.precompiled": True, "delivery.operator.nvidiaDriverCRD": True,
    "delivery.operator.gds": True, "cdi.nriPluginEnabled": True, "delivery.operator.gdrcopy": True, "delivery.operator.clusterPolicy": False,
    "delivery.operator.gpuCluster": True, "daemonsets.priorityClassName": "gpu-high",
    "daemonsets.tolerations": [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}],
    "dcgmExporter.podLabels": True, "dcgmExporter.podUID": True, "dcgmExporter.podLabelAllowlist": ["^app$"],
    "dcgmExporter.metrics": [{"field": "DCGM_FI_DEV_GPU_UTIL", "type": "gauge", "help": "GPU utilization"}],
    "driver.upgradePolicy.autoUpgrade": False, "driver.upgradePolicy.maxParallelUpgrades": 4,
    "driver.upgradePolicy.drain": True, "driver.upgradePolicy.force": True,
    "driver.upgradePolicy.timeoutSeconds": 600, "driver.upgradePolicy.deleteEmptyDir": True,
    "driver.upgradePolicy.podSelector": "app!=critical", "dcgmExporter.serviceMonitor.interval": "30s",
    "dcgmExporter.serviceMonitor.honorLabels": True, "dcgmExporter.serviceMonitor.additionalLabels": {"release": "prom"},
    "delivery.operator.devicePluginConfig": {"name": "time-slicing-config", "default": "any"},
    "delivery.operator.migManagerConfig": {"name": "custom-mig-config"},
    "delivery.operator.dcgmMetricsConfig": {"name": "custom-dcgm-exporter-metrics"},
    "driver.env": [{"name": "HTTPS_PROXY", "value": "http://proxy.example.com:3128"}],
    "delivery.operator.env": {"dcgmExporter": [{"name": "DCGM_EXPORTER_INTERVAL", "value": "10000"}]},
    "devicePlugin.env": [{"name": "LOG_LEVEL", "value": "debug"}], "devicePlugin.args": ["-v=4"],
    "devicePlugin.health": {"ignoreXids": [63, 94], "fatalXids": [109]},
    "daemonsets.labels": {"team": "gpu"}, "daemonsets.annotations": {"example.com/owner": "gpu"},
    "driver.repoConfig": {"configMapName": "repo-config"}, "driver.certConfig": {"configMapName": "cert-config"},
}
# proxy values apart from ENV's: a driver env entry of the proxy's own value is the proxy's (one reading of it)
STRATEGIES["proxy"] = st.fixed_dictionaries({}, optional={
    "httpProxy": st.sampled_from(["http://proxy.corp.example:8080", "https://egress.corp.example"]),
    "httpsProxy": st.sampled_from(["http://proxy.corp.example:8080", "http://squid.corp.example:3128"]),
    "noProxy": st.lists(st.sampled_from([".cluster.local", "10.0.0.0/8", "metadata.internal"]), min_size=1,
                        max_size=3, unique=True)}).filter(bool)
STRATEGIES["driver.args"] = st.one_of(st.none(), st.lists(st.sampled_from(["--debug", "-v=4"]), min_size=1,
                                                          max_size=2, unique=True))
STRATEGIES["hostPaths.rootFS"] = st.sampled_from(["/", "/host", "/var/lib/root"])
STRATEGIES["hostPaths.driverInstallDir"] = st.sampled_from([None, "/run/nvidia/driver", "/", "/opt/nvidia/driver"])
EXAMPLES["proxy"] = {"httpProxy": "http://proxy.corp.example:8080", "httpsProxy": "http://proxy.corp.example:8080",
                     "noProxy": [".cluster.local", "10.0.0.0/8"]}
EXAMPLES["driver.args"] = ["--debug"]
EXAMPLES["hostPaths.rootFS"] = "/host"
EXAMPLES["hostPaths.driverInstallDir"] = "/"
# what a live install sets that gpuop builds nothing of its own for (values other than the chart's defaults)
STRATEGIES["delivery.operator.gpuPodDeletionTimeoutSeconds"] = st.one_of(st.none(), st.integers(0, 3600))
STRATEGIES["delivery.operator.nvidiaNodeFeatureRules"] = st.booleans()
STRATEGIES["delivery.operator.nfdValues"] = st.fixed_dictionaries({}, optional={
    "image": st.fixed_dictionaries({"repository": st.sampled_from(["mirror.example.com/nfd/node-feature-discovery",
                                                                   "harbor.example.org/nfd/node-feature-discovery"])}),
    "gc": st.fixed_dictionaries({"enable": st.just(False)}),
    "worker": st.fixed_dictionaries({"tolerations": st.lists(TOLERATION, min_size=1, max_size=2)})})
STRATEGIES["delivery.operator.operatorValues"] = st.fixed_dictionaries({}, optional={
    "logging": st.fixed_dictionaries({"level": st.sampled_from(["debug", "error"])}),
    "nodeSelector": st.dictionaries(LABEL, LABEL, min_size=1, max_size=2),
    "priorityClassName": st.sampled_from(["system-cluster-critical", "gpu-high"]),
    "cleanupCRD": st.just(True), "env": ENV.filter(bool)})
EXAMPLES["delivery.operator.gpuPodDeletionTimeoutSeconds"] = 600
EXAMPLES["delivery.operator.nvidiaNodeFeatureRules"] = True
EXAMPLES["delivery.operator.nfdValues"] = {"image": {"repository": "mirror.example.com/nfd/node-feature-discovery"}}
EXAMPLES["delivery.operator.operatorValues"] = {"logging": {"level": "debug"}, "resources": {"limits": {"cpu": "1"}}}
# a policy in its normal form (what the profile rules accept): unique lists, nothing both ignored and fatal, no
# ignored XIDs beside checks false
_XIDS = st.lists(st.sampled_from([13, 31, 45, 48, 63, 74, 79, 94, 95, 109, 119, 140]), max_size=4, unique=True)
STRATEGIES["devicePlugin.health"] = st.tuples(st.booleans(), _XIDS, _XIDS).map(lambda t: {
    **({} if t[0] else {"checks": False}),
    **({"ignoreXids": [x for x in t[1] if x not in t[2]]} if t[0] and [x for x in t[1] if x not in t[2]] else {}),
    **({"fatalXids": t[2]} if t[2] else {})}).filter(bool)
STRATEGIES["platform.distribution"] = st.sampled_from([None, "k3s", "rke2", "microk8s"])
STRATEGIES["toolkit.env"] = ENV
EXAMPLES["platform.distribution"] = "rke2"
EXAMPLES["toolkit.env"] = [{"name": "HTTPS_PROXY", "value": "http://proxy.example.com:3128"}]
# the vGPU guest driver's licensing reference (a Secret, or the deprecated ConfigMap) and the NVIDIADriver's type
_LICENSING_NAME = st.sampled_from(["licensing-config", "nls-token"])
STRATEGIES["driver.licensingConfig"] = st.one_of(
    st.none(), st.fixed_dictionaries({"secretName": _LICENSING_NAME}),
    st.fixed_dictionaries({"configMapName": _LICENSING_NAME}),
    st.fixed_dictionaries({"secretName": _LICENSING_NAME, "nlsEnabled": st.just(False)}))
STRATEGIES["driver.driverType"] = st.sampled_from([None, "gpu", "vgpu"])
EXAMPLES["driver.licensingConfig"] = {"secretName": "licensing-config"}
EXAMPLES["driver.driverType"] = "vgpu"
# export-side rows the importer does not read back (kept apart from STRATEGIES, which the import tests share)
EXPORT_STRATEGIES: dict = {}
PROFILE_ROWS = [r for r in cm.ROWS if r.profile]


def expected_profile(setting: dict) -> dict:
    """What values_to_profile gives back for these settings: every value but the profile's defaults."""
    rows = {r.profile: r for r in PROFILE_ROWS}
    out: dict = {}
    for path, value in setting.items():
        r = rows[path]
        if value is None or value == r.default or (r.profile.endswith(".version") and value == REL.tag(
                r.profile.split(".")[0])):
            continue
        if r.profile == "driver.upgradePolicy.timeoutSeconds" or value != r.default:
            cm.set_path(out, path, value)
    return out


def to_settings(flat: dict) -> dict:
    out: dict = {}
    for path, value in flat.items():
        cm.set_path(out, path, copy.deepcopy(value))
    return out


def test_every_row_has_a_strategy_and_an_example():
    assert sorted(r.profile for r in PROFILE_ROWS) == sorted({**STRATEGIES, **EXPORT_STRATEGIES}) == sorted(EXAMPLES)


def test_chart_defaults_are_nvidias_values_of_the_version():
    ours = operator_catalog.chart_defaults("v26.7.0")
    theirs = yaml.safe_load((REFS / "gpu-operator" / "chart" / "values.yaml").read_text())
    for key in ("validator", "operator", "nodeStatusExporter"):
        assert ours[key].pop("version") == "v26.7.0"           # the chart's appVersion
    assert ours == theirs
    assert operator_catalog.chart_defaults("v0.0.1") is None


@pytest.mark.parametrize("row", PROFILE_ROWS, ids=lambda r: r.profile)
def test_each_row_both_ways(row):
    value = EXAMPLES[row.profile]
    values = cm.profile_to_values(to_settings({row.profile: value}), REL)
    written = tuple(cm.get_path(values, p) for p in row.values)
    # a row may decide only some of its paths (delivery.operator.repositories: the components it names, over
    # images.registry's repositories); None leaves a path to the rows before it
    assert all(w == t for w, t in zip(written, row.to_values(value, REL)) if t is not None)
    assert any(w is not None for w in written)
    profile, lost = cm.values_to_profile(values)
    assert cm.get_path(profile, row.profile) == value
    assert lost == []


@pytest.mark.parametrize("row", PROFILE_ROWS, ids=lambda r: r.profile)
def test_each_row_at_its_default_reads_back_as_omitted(row):
    if row.profile == "driver.upgradePolicy.timeoutSeconds":
        pytest.skip("the profile's 0 (wait forever, the driver asset's) is not the chart's 300: written explicitly")
    values = cm.profile_to_values({}, REL)
    profile, lost = cm.values_to_profile(values)
    assert cm.get_path(profile, row.profile, cm.MISSING) is cm.MISSING
    assert lost == []


@pytest.mark.slow
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.fixed_dictionaries({}, optional={**STRATEGIES, **EXPORT_STRATEGIES}))
def test_round_trip_profile_values_profile(setting):
    values = cm.profile_to_values(to_settings(setting), REL)
    profile, lost = cm.values_to_profile(values)
    assert lost == []
    want = expected_profile(setting)
    drain = setting.get("driver.upgradePolicy.timeoutSeconds", 0)
    if setting.get("delivery.operator.gpuPodDeletionTimeoutSeconds") == drain:
        # the drain's own timeout: the same as omitting it (its description), so it reads back omitted
        op = want["delivery"]["operator"]
        del op["gpuPodDeletionTimeoutSeconds"]
        if not op:
            del want["delivery"]["operator"]
        if not want["delivery"]:
            del want["delivery"]
    if "driver.upgradePolicy.timeoutSeconds" not in setting:
        want.setdefault("driver", {}).setdefault("upgradePolicy", {})["timeoutSeconds"] = 0
        profile.setdefault("driver", {}).setdefault("upgradePolicy", {}).setdefault("timeoutSeconds", 0)
    assert profile == want


def test_absent_values_are_the_chart_defaults():
    profile, lost = cm.values_to_profile({})
    assert lost == []
    # the chart's drain / pod deletion timeout (300) is not the profile's default (0): it reads back explicitly
    assert profile == {"driver": {"upgradePolicy": {"timeoutSeconds": 300}}}


def test_a_mirror_that_misses_one_image_reads_back_as_that_component_s_repository():
    values = cm.profile_to_values({"images": {"registry": "registry.example.com/nvidia"}}, REL)
    values["driver"]["manager"]["repository"] = "nvcr.io/nvidia/cloud-native"
    profile, lost = cm.values_to_profile(values)
    assert profile["images"]["registry"] == "registry.example.com/nvidia"
    assert profile["delivery"]["operator"]["repositories"] == {"driverManager": "nvcr.io/nvidia/cloud-native"}
    assert lost == []
    del values["driver"]["manager"]                  # absent: the chart's default, nvcr.io -- still a difference
    profile, lost = cm.values_to_profile(values)
    assert profile["delivery"]["operator"]["repositories"] == {"driverManager": "nvcr.io/nvidia/cloud-native"}
    back = cm.profile_to_values(profile, REL)
    assert back["driver"]["manager"]["repository"] == "nvcr.io/nvidia/cloud-native"
    assert back["validator"]["repository"] == "registry.example.com/nvidia"


def test_unexpressible_values_are_listed_with_a_reason():
    values = {"driver": {"upgradePolicy": {"drain": {"force": True}, "gpuPodDeletion": {"force": False}},
                         "virtualTopology": {"config": "topo"}},
              "cdi": {"enabled": False}, "toolkit": {"env": [{"name": "A", "value": "b"}]},
              "brandNew": {"x": 1}}
    _, lost = cm.values_to_profile(values)
    paths = dict(lost)
    assert set(paths) == {"driver.upgradePolicy.drain.force",     # the one that is not the chart default
                          "driver.virtualTopology.config", "cdi.enabled", "brandNew.x"}
    assert "one setting for all of them" in paths["driver.upgradePolicy.drain.force"]
    assert paths["brandNew.x"] == "no profile setting"


def test_a_vgpu_licensing_reference_reads_back_as_the_profile_s_and_both_references_are_refused():
    profile, lost = cm.values_to_profile({"driver": {"licensingConfig": {"secretName": "nls", "nlsEnabled": True},
                                                     "nvidiaDriverCRD": {"driverType": "vgpu"}}})
    assert lost == [] and profile["driver"]["licensingConfig"] == {"secretName": "nls"}
    assert profile["driver"]["driverType"] == "vgpu"
    _, lost = cm.values_to_profile({"driver": {"licensingConfig": {"secretName": "a", "configMapName": "b"}}})
    assert {p for p, _ in lost} == {"driver.licensingConfig.secretName", "driver.licensingConfig.configMapName"}
    assert all("names one" in why for _, why in lost)


def test_derived_paths_are_left_to_the_importer():
    values = {"mig": {"strategy": "mixed"}, "devicePlugin": {"config": {"name": "time-slicing-config",
                                                                          "default": "any"}}}
    profile, lost = cm.values_to_profile(values)
    assert lost == [] and "mig" not in profile
    assert "mig.strategy" in cm.DERIVED_PATHS and "devicePlugin.config.data" in cm.DERIVED_PATHS
    # the ConfigMap's name and the config of unlabelled nodes are the table's: kept as the cluster has them
    assert profile["delivery"]["operator"]["devicePluginConfig"] == {"name": "time-slicing-config", "default": "any"}


def test_toolkit_env_holds_the_distribution_s_paths_and_the_profile_s_env():
    values = cm.profile_to_values({"platform": {"distribution": "k3s"},
                                   "toolkit": {"env": [{"name": "HTTPS_PROXY", "value": "http://p:3128"}]}}, REL)
    assert values["toolkit"]["env"] == cm.distribution_env("k3s") + [{"name": "HTTPS_PROXY", "value": "http://p:3128"}]
    profile, lost = cm.values_to_profile(values)
    assert lost == [] and profile["platform"] == {"distribution": "k3s"}
    assert profile["toolkit"]["env"] == [{"name": "HTTPS_PROXY", "value": "http://p:3128"}]


def test_config_map_names_read_back_as_omitted_when_they_are_gpuop_s():
    values = {"devicePlugin": {"config": {"name": cm.PLUGIN_CONFIG_MAP, "default": "default"}},
              "migManager": {"config": {"name": cm.MIG_CONFIG_MAP}},
              "dcgmExporter": {"config": {"name": cm.DCGM_METRICS_MAP, "data": "DCGM_FI_DEV_GPU_UTIL, gauge, u\n"}}}
    profile, lost = cm.values_to_profile(values)
    assert lost == [] and "operator" not in profile.get("delivery", {})
    # no ConfigMap: the default config names nothing, whatever it says
    profile, _ = cm.values_to_profile({"devicePlugin": {"config": {"default": "any"}}})
    assert "delivery" not in profile


def test_env_with_value_from_and_selector_labels_are_not_expressible():
    values = {"driver": {"env": [{"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}]},
              "daemonsets": {"labels": {"app": "x", "team": "gpu"}}}
    profile, lost = cm.values_to_profile(values)
    assert dict(lost).keys() == {"driver.env", "daemonsets.labels"}
    assert "valueFrom" in dict(lost)["driver.env"]
    assert profile["daemonsets"]["labels"] == {"team": "gpu"} and "env" not in profile.get("driver", {})


def test_policy_paths_name_the_cluster_policy_fields():
    assert cm.policy_paths("driver.upgradePolicy.gpuPodDeletion.force") == ("driver.upgradePolicy.podDeletion.force",)
    assert cm.policy_paths("driver.nvidiaDriverCRD.enabled") == ("driver.useNvidiaDriverCRD",)
    assert cm.policy_paths("dcgmExporter.podLabelAllowlistRegex") == ("dcgmExporter.podLabelAllowlistRegex",)


def _corpus():
    from conftest import REPO
    return sorted((REPO / "tests" / "data" / "operator-corpus").glob("*.yaml")) + [REPO / "profiles" / "keep-operator.yaml"]


@pytest.mark.parametrize("path", _corpus(), ids=lambda p: p.stem)
def test_compiled_values_read_back_as_the_profiles_settings(path):
    """Export of a whole profile (plan/operator.py chart_values, outputs' extraObjects) read back by the inverse:
    every row gives the profile's own setting, and nothing is left unexpressed."""
    from gpuop.outputs import operator as operator_out
    from gpuop.pipeline.run import plan_all
    from gpuop.plan import operator as operator_plan
    from gpuop.profile.load import load_profile
    from gpuop.validate.runner import validate

    (plan,), _ = plan_all([path])
    spec = validate(load_profile(path)).profile.spec
    settings = spec.model_dump(mode="json")
    values = operator_out.chart_values(plan)
    profile, lost = cm.values_to_profile(values)
    assert lost == []
    rel = cm.release_images()
    for r in PROFILE_ROWS:
        want = cm.omit_nulls(cm.get_path(settings, r.profile))      # unset optional fields are left out
        if r.profile.endswith(".version") and want == rel.tag(r.profile.split(".")[0]):
            want = None
        if r.profile == "delivery.operator.nvidiaDriverCRD":
            want = True if values["driver"]["nvidiaDriverCRD"]["enabled"] else None
        if r.profile == "images.registry" and want == rel.registry:
            want = None
        if r.profile == "platform.distribution" and want not in cm.RUNTIME_ENV_DISTRIBUTIONS:
            want = None                  # managed images: their driver / toolkit switches say it
        if isinstance(want, dict) and (r.profile.endswith("Config") or r.profile in ("proxy", "devicePlugin.health")):
            want = {k: v for k, v in want.items()                              # fields left at their default
                    if v not in (None, []) and not (r.profile == "devicePlugin.health" and k == "checks" and v)}
        if r.profile == "delivery.operator.nfdValues":
            # the plan's NFD image under the mirror reads back as nfdValues here; the importer drops it again
            # (ops/importer.py nfd_image)
            mirrored = operator_plan.nfd_repository(spec, plan, rel.registry)
            if mirrored and not cm.get_path(want or {}, "image.repository"):
                want = {**(want or {}), "image": {**(want or {}).get("image", {}), "repository": mirrored}}
        if want == r.default or want in ([], {}):
            want = None
        assert cm.get_path(profile, r.profile) == want, r.profile


def test_a_proxy_reads_back_only_when_writing_it_gives_both_envs_exactly():
    proxy = {"httpsProxy": "http://proxy.corp.example:8080", "noProxy": [".svc", "10.0.0.0/8"]}
    own = [{"name": "HTTPS_PROXY", "value": "http://other.example:3128"}]      # the driver's own wins by name
    values = cm.profile_to_values({"proxy": proxy, "driver": {"env": own}}, REL)
    assert values["driver"]["env"] == own + [{"name": "https_proxy", "value": "http://proxy.corp.example:8080"},
                                             {"name": "NO_PROXY", "value": ".svc,10.0.0.0/8"},
                                             {"name": "no_proxy", "value": ".svc,10.0.0.0/8"}]
    assert values["toolkit"]["env"] == cm.proxy_env(proxy)
    profile, lost = cm.values_to_profile(values)
    assert lost == [] and profile["proxy"] == proxy and profile["driver"]["env"] == own
    assert "toolkit" not in profile
    # the driver's env alone (NVIDIA's documented proxy values): writing a proxy would add it to the toolkit's,
    # so it stays the driver's env, as it is
    alone = {"driver": {"env": cm.proxy_env(proxy)}}
    profile, lost = cm.values_to_profile(alone)
    assert lost == [] and "proxy" not in profile and profile["driver"]["env"] == cm.proxy_env(proxy)
    # a value the profile's Proxy refuses is env too
    odd = [{"name": "HTTPS_PROXY", "value": "proxy:3128"}, {"name": "https_proxy", "value": "proxy:3128"}]
    profile, _ = cm.values_to_profile({"driver": {"env": odd}, "toolkit": {"env": odd}})
    assert "proxy" not in profile and profile["driver"]["env"] == odd and profile["toolkit"]["env"] == odd


def test_host_paths_are_written_explicitly_and_read_back_as_omitted_at_their_defaults():
    values = cm.profile_to_values({}, REL)
    assert values["hostPaths"] == {"rootFS": "/", "driverInstallDir": "/run/nvidia/driver",
                                   "kubeletRootDir": cm.KUBELET_ROOT}
    profile, lost = cm.values_to_profile({"hostPaths": {"rootFS": "/host", "kubeletRootDir": "/data/kubelet"}})
    assert profile["hostPaths"] == {"rootFS": "/host"}
    assert dict(lost).keys() == {"hostPaths.kubeletRootDir"}       # operator mode: /var/lib/kubelet only
