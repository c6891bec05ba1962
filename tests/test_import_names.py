"""The names a running cluster uses, kept by the profile: each pool's MIG and device-plugin config key
(`mig.configName`, `sharing.configName`: both the static stack and operator mode), the ConfigMap names and the
default device-plugin config NVIDIA's operator reads (`delivery.operator.devicePluginConfig` and siblings:
operator mode only, refused in stack mode), and the settings that reach the operator through the mapping table
(driver env, repo / cert configs, device plugin env and args, operand labels and annotations), rendered by
NVIDIA's own chart."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
import yaml

from gpuop import catalog
from gpuop.errors import UserError
from gpuop.ops.import_io import Doc
from gpuop.ops.importer import import_all
from gpuop.plan.build import build_plan
from gpuop.profile.load import load_profile
from gpuop.validate.runner import validate

from conftest import REFS

HEAD = "apiVersion: gpuop/v1alpha1\nkind: ClusterProfile\nmetadata: {name: c}\nspec:\n"
CHART = REFS / "gpu-operator" / "chart"
POOLS = """\
nodePools:
  - name: mig
    gpu: A100-SXM4-80GB
    mig: {strategy: single, layout: {1g.10gb: 7}, configName: a100-all-1g}
  - name: shared
    gpu: L40S
    sharing: {timeSlicing: {replicas: 4}, configName: shared-4}
"""


def write(tmp_path: Path, body: str) -> Path:
    f = tmp_path / "c.yaml"
    f.write_text(HEAD + textwrap.indent(textwrap.dedent(body), "  "))
    return f


def plan_of(path: Path):
    cat = catalog.load()
    return build_plan(validate(load_profile(path), cat), cat)


def issues(path: Path) -> list[tuple[str, int, str]]:
    with pytest.raises(UserError) as exc:
        validate(load_profile(path), catalog.load())
    return [(i.path, i.line, i.message) for i in exc.value.issues]


def rule_labels(plan) -> dict[str, dict]:
    return {r.gpu: dict(r.labels) for r in plan.pool_configs.nfd_rules}


def operator_values(path: Path) -> dict:
    from gpuop.outputs import operator as operator_out
    from gpuop.pipeline.run import plan_all

    (plan,), _ = plan_all([path])
    return operator_out.chart_values(plan)


def test_pool_config_names_are_the_static_stack_s_config_keys_and_labels(tmp_path):
    plan = plan_of(write(tmp_path, "platform: {type: kubernetes, version: \"1.33\"}\nos: ubuntu24.04\n" + POOLS))
    pc = plan.pool_configs
    assert "a100-all-1g" in yaml.safe_load(pc.mig_parted)["mig-configs"]
    assert [k for k, _ in pc.plugin_configs] == ["default", "shared-4"]
    labels = rule_labels(plan)
    assert labels["A100-SXM4-80GB"]["nvidia.com/mig.config"] == "a100-all-1g"
    assert labels["L40S"]["nvidia.com/device-plugin.config"] == "shared-4"


def test_the_operator_s_default_config_is_a_pool_s_and_its_nodes_carry_no_label(tmp_path):
    f = write(tmp_path, "platform: {type: kubernetes, version: \"1.33\"}\nos: ubuntu24.04\n"
              "delivery:\n  mode: operator\n  operator:\n    devicePluginConfig: {name: time-slicing-config, "
              "default: shared-4}\n    migManagerConfig: {name: custom-mig-config}\n" + POOLS)
    plan = plan_of(f)
    assert [k for k, _ in plan.pool_configs.plugin_configs] == ["shared-4"]     # no gpuop `default`
    assert "nvidia.com/device-plugin.config" not in rule_labels(plan).get("L40S", {})
    v = operator_values(f)
    assert {k: v["devicePlugin"]["config"][k] for k in ("create", "name", "default")} == {
        "create": True, "name": "time-slicing-config", "default": "shared-4"}
    assert sorted(v["devicePlugin"]["config"]["data"]) == ["shared-4"]
    assert v["migManager"]["config"]["name"] == "custom-mig-config"


def test_a_default_config_of_no_pool_is_gpuop_s_default_under_that_name(tmp_path):
    f = write(tmp_path, "platform: {type: kubernetes, version: \"1.33\"}\nos: ubuntu24.04\n"
              "delivery: {mode: operator, operator: {devicePluginConfig: {default: any}}}\n" + POOLS)
    v = operator_values(f)
    assert v["devicePlugin"]["config"]["name"] == "device-plugin-config"
    assert sorted(v["devicePlugin"]["config"]["data"]) == ["any", "shared-4"]
    assert yaml.safe_load(v["devicePlugin"]["config"]["data"]["any"]) == {"version": "v1",
                                                                          "flags": {"migStrategy": "single"}}


def test_operator_only_names_are_refused_in_stack_mode(tmp_path):
    f = write(tmp_path, "platform: {type: kubernetes, version: \"1.33\"}\nos: ubuntu24.04\n"
              "delivery:\n  operator:\n    devicePluginConfig: {default: shared-4}\n" + POOLS)
    assert issues(f) == [("spec.delivery.operator.devicePluginConfig", 9,
                          "spec.delivery.operator.devicePluginConfig names what NVIDIA's operator reads; gpuop's "
                          "stack names its ConfigMaps and the device plugin's default config (`default`) itself, "
                          "pulls every image with spec.images.pullSecrets and sets its operands' env; remove it or "
                          "use spec.delivery.mode: operator")]


@pytest.mark.parametrize("field, value", [
    ("gpuPodDeletionTimeoutSeconds", "600"), ("nvidiaNodeFeatureRules", "true"),
    ("nfdValues", "{image: {repository: mirror.example.com/nfd/node-feature-discovery}}"),
    ("operatorValues", "{logging: {level: debug}}")])
def test_the_kept_chart_values_are_refused_in_stack_mode(tmp_path, field, value):
    f = write(tmp_path, "platform: {type: kubernetes, version: \"1.33\"}\nos: ubuntu24.04\n"
              f"delivery:\n  operator:\n    {field}: {value}\n" + POOLS)
    found = issues(f)
    assert [(p, line) for p, line, _ in found] == [(f"spec.delivery.operator.{field}", 9)]
    assert found[0][2].startswith(f"spec.delivery.operator.{field} names what NVIDIA's operator reads")


def test_one_config_name_for_two_different_configs_is_refused(tmp_path):
    f = write(tmp_path, """\
        platform: {type: kubernetes, version: "1.33"}
        os: ubuntu24.04
        nodePools:
          - {name: a, gpu: L40S, sharing: {timeSlicing: {replicas: 4}, configName: shared}}
          - {name: b, gpu: L4, sharing: {timeSlicing: {replicas: 2}, configName: shared}}
        """)
    assert issues(f) == [("spec.nodePools[1].sharing.configName", 9, "'shared' is the device-plugin config of pool "
                          "'a' with other sharing or MIG settings; one name is one config")]


def test_repo_config_files_are_needed_by_the_stack_only(tmp_path):
    body = "platform: {type: kubernetes, version: \"1.33\"}\nos: ubuntu24.04\n" \
           "driver: {repoConfig: {configMapName: repo-config}}\n{mode}nodePools: [{name: a, gpu: L40S}]\n"
    assert issues(write(tmp_path, body.replace("{mode}", ""))) == [
        ("spec.driver.repoConfig", 7, "repoConfig.files: required in stack mode (gpuop mounts each listed key; "
                                      "only NVIDIA's operator reads the keys of the live ConfigMap)")]
    v = operator_values(write(tmp_path, body.replace("{mode}", "delivery: {mode: operator}\n")))
    assert v["driver"]["repoConfig"] == {"configMapName": "repo-config"}


@pytest.mark.slow
def test_operator_mode_carries_env_args_labels_and_config_maps_into_nvidia_s_cluster_policy(tmp_path):
    from gpuop.plan import chartmap
    from gpuop.verify import nvidia_chart

    f = write(tmp_path, """\
        platform: {type: kubernetes, version: "1.33", distribution: rke2}
        os: ubuntu24.04
        toolkit: {env: [{name: HTTPS_PROXY, value: "http://proxy.example.com:3128"}]}
        driver:
          env: [{name: HTTPS_PROXY, value: "http://proxy.example.com:3128"}]
          certConfig: {configMapName: proxy-ca}
        devicePlugin: {env: [{name: LOG_LEVEL, value: debug}], args: ["-v=4"]}
        daemonsets: {labels: {team: gpu}, annotations: {example.com/owner: gpu}}
        delivery:
          mode: operator
          operator:
            dcgmMetricsConfig: {name: my-metrics}
            env: {dcgmExporter: [{name: DCGM_EXPORTER_INTERVAL, value: "10000"}]}
        nodePools: [{name: a, gpu: L40S}]
        """)
    cp = nvidia_chart.render(operator_values(f), CHART).cluster_policy["spec"]
    assert cp["driver"]["env"] == [{"name": "HTTPS_PROXY", "value": "http://proxy.example.com:3128"}]
    assert cp["toolkit"]["env"] == chartmap.distribution_env("rke2") + cp["driver"]["env"]
    assert cp["driver"]["certConfig"] == {"name": "proxy-ca"}
    assert cp["devicePlugin"]["env"] == [{"name": "LOG_LEVEL", "value": "debug"}]
    assert cp["devicePlugin"]["args"] == ["-v=4"]
    assert cp["daemonsets"]["labels"]["team"] == "gpu"
    assert cp["daemonsets"]["annotations"] == {"example.com/owner": "gpu"}
    assert cp["dcgmExporter"]["config"] == {"name": "my-metrics"}
    assert cp["dcgmExporter"]["env"] == [{"name": "DCGM_EXPORTER_INTERVAL", "value": "10000"}]


def test_import_writes_the_distribution_its_containerd_paths_name():
    from gpuop.plan import chartmap

    values = {"toolkit": {"env": chartmap.distribution_env("rke2")}}
    result = import_all([Doc("values.yaml", values, {})], "rke2")
    assert result.unexpressed == []
    assert yaml.safe_load(result.text)["spec"]["platform"]["distribution"] == "rke2"


@pytest.mark.slow
def test_a_component_s_own_pull_secrets_are_kept(tmp_path):
    from gpuop.ops import import_check
    from gpuop.ops.importer import _locate

    values = {"driver": {"imagePullSecrets": ["ngc-secret"]}, "devicePlugin": {"imagePullSecrets": ["ngc-secret"]}}
    result = import_all([Doc(str(tmp_path / "values.yaml"), values, {})], "secrets")
    assert yaml.safe_load(result.text)["spec"]["delivery"]["operator"]["pullSecrets"] == {
        "driver": ["ngc-secret"], "devicePlugin": ["ngc-secret"]}
    diffs = import_check.check_text(result.inputs, result.text, result.unexpressed, _locate, CHART)
    assert diffs == [], "\n".join(map(str, diffs))


@pytest.mark.slow
def test_a_config_map_the_input_does_not_hold_is_left_to_the_user_and_named_as_before(tmp_path):
    from gpuop.ops import import_check
    from gpuop.ops.importer import _locate

    values = {"devicePlugin": {"config": {"name": "plugin-config", "default": "shared"}},
              "migManager": {"config": {"name": "my-mig-config"}}}
    result = import_all([Doc(str(tmp_path / "values.yaml"), values, {})], "names")
    op = yaml.safe_load(result.text)["spec"]["delivery"]["operator"]
    assert op["devicePluginConfig"] == {"name": "plugin-config", "default": "shared"}
    assert op["migManagerConfig"] == {"name": "my-mig-config"}
    assert "its ConfigMap was not given" in result.text and result.unexpressed == []
    diffs = import_check.check_text(result.inputs, result.text, result.unexpressed, _locate, CHART)
    assert diffs == [], "\n".join(map(str, diffs))


def test_a_config_key_no_label_can_carry_is_reported_not_kept():
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "ts"},
          "data": {"-odd key-": "version: v1\nsharing:\n  timeSlicing:\n    resources:\n"
                                "    - {name: nvidia.com/gpu, replicas: 2}\n"}}
    values = {"devicePlugin": {"config": {"name": "ts"}}}
    result = import_all([Doc("values.yaml", values, {}), Doc("cms.yaml", cm, {})], "odd")
    pool = yaml.safe_load(result.text)["spec"]["nodePools"][0]
    assert "configName" not in pool["sharing"] and result.unexpressed == ["devicePlugin.config.data"]
    assert "'-odd key-' is no label value" in result.text
