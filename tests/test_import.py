"""`gpuop import`: an operator values.yaml or ClusterPolicy (+ NVIDIADriver CRs, ConfigMaps) -> a profile in
operator mode. Round trip: the imported profile compiles, and NVIDIA's chart rendered with its operator
values yields a ClusterPolicy (and NVIDIADriver CRs) equal to the original's field by field, apart from the
normalizations below (NORMALIZED) and the settings the importer commented as not
expressible."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from gpuop.kube.yamlio import dump, load
from gpuop.ops.importer import import_documents, read_inputs
from gpuop.outputs import operator as operator_out
from gpuop.pipeline.run import plan_all
from gpuop.validate.runner import validate
from gpuop.profile.load import load_profile

from conftest import REFS, REPO, run_gpuop
from test_operator import one, render_nvidia

# values paths where gpuop's operator values differ by design: the ConfigMaps gpuop writes and the config names
# inside them, the CRD default of kubeletRootDir written out, the chart's appVersion of this source tree
NORMALIZED = ("devicePlugin.config.name", "devicePlugin.config.default", "devicePlugin.config.data",
              "devicePlugin.config.create", "migManager.config.name", "migManager.config.data",
              "migManager.config.create", "dcgmExporter.config.name", "dcgmExporter.config.data",
              "dcgmExporter.config.create", "hostPaths.kubeletRootDir", "validator.version",
              "nodeStatusExporter.version")
DEFAULT_VALUES = REFS / "gpu-operator" / "values.yaml"
RENAMES = {("driver", "useNvidiaDriverCRD"): ("driver", "nvidiaDriverCRD", "enabled"),
           ("driver", "upgradePolicy", "podDeletion"): ("driver", "upgradePolicy", "gpuPodDeletion")}


def leaves(node, path=()):
    if isinstance(node, dict) and node:
        for k, v in node.items():
            yield from leaves(v, path + (k,))
    else:
        yield path, node


def get(node, path):
    for part in path:
        if not isinstance(node, dict) or part not in node:
            return KeyError
        node = node[part]
    return node


def values_path(cp_path: tuple) -> str:
    for old, new in RENAMES.items():
        if cp_path[:len(old)] == old:
            cp_path = new + cp_path[len(old):]
    return ".".join(cp_path)


def differences(original: dict, ours: dict, excused: list[str]) -> list:
    """Leaves (both ways) that differ and are neither a documented normalization nor a commented setting."""
    out = []
    paths = dict.fromkeys([p for p, _ in leaves(original)] + [p for p, _ in leaves(ours)])
    for p in paths:
        a, b = get(original, p), get(ours, p)
        if a == b or (a in ({}, [], KeyError) and b in ({}, [], KeyError)):
            continue
        vp = values_path(p)
        if any(vp == e or vp.startswith(e + ".") for e in excused):
            continue
        out.append((vp, a, b))
    return out


def compile_imported(tmp_path: Path, text: str):
    path = tmp_path / "imported.yaml"
    path.write_text(text)
    validate(load_profile(path))          # compiles: raises UserError with located issues otherwise
    plans, _ = plan_all([path])
    return plans[0]


def round_trip(tmp_path, docs):
    text, unexpressed = import_documents(docs, "imported", defaults=load(DEFAULT_VALUES.read_text()))
    plan = compile_imported(tmp_path, text)
    objs = render_nvidia(operator_out.chart_values(plan), plan.namespace)
    return text, unexpressed, objs


def test_default_values_round_trip(tmp_path):
    docs = read_inputs([DEFAULT_VALUES])
    text, unexpressed, objs = round_trip(tmp_path, docs)
    original = one(render_nvidia(load(DEFAULT_VALUES.read_text())), "ClusterPolicy")["spec"]
    ours = one(objs, "ClusterPolicy")["spec"]
    assert differences(original, ours, list(NORMALIZED) + unexpressed) == []
    assert "mode: operator" in text


PER_POOL_VALUES = {"driver": {"version": "580.173.02", "nvidiaDriverCRD": {"enabled": True}},
                   "dcgmExporter": {"serviceMonitor": {"enabled": False}}, "nfd": {"enabled": False}}
H100_DRIVER = {"apiVersion": "nvidia.com/v1alpha1", "kind": "NVIDIADriver", "metadata": {"name": "h100-595"},
               "spec": {"default": False, "driverType": "gpu", "repository": "nvcr.io/nvidia", "image": "driver",
                        "version": "595.91.07", "kernelModuleType": "auto", "usePrecompiled": False,
                        "nodeSelector": {"node.kubernetes.io/instance-type": "p5.48xlarge"},
                        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]}}


def test_per_pool_nvidiadriver_cluster_policy_round_trip(tmp_path):
    installed = render_nvidia(PER_POOL_VALUES)
    cp, default = one(installed, "ClusterPolicy"), one(installed, "NVIDIADriver", "default")
    src = tmp_path / "cluster.yaml"
    src.write_text(dump(cp) + "---\n" + dump(default) + "---\n" + dump(H100_DRIVER))
    text, unexpressed, objs = round_trip(tmp_path, read_inputs([src]))
    profile = load(text)
    assert profile["spec"]["nodePools"][0]["nodeSelector"] == {"node.kubernetes.io/instance-type": "p5.48xlarge"}
    assert profile["spec"]["nodePools"][0]["driver"] == {"version": "595.91.07"}
    excused = list(NORMALIZED) + unexpressed
    assert differences(cp["spec"], one(objs, "ClusterPolicy")["spec"], excused) == []
    ours = {o["spec"].get("nodeSelector", {}).get("node.kubernetes.io/instance-type"): o["spec"]
            for o in objs if o["kind"] == "NVIDIADriver"}
    assert set(ours) == {None, "p5.48xlarge"}
    assert differences(default["spec"], ours[None], excused) == []
    # gpuop writes the CR's priorityClassName, upgradePolicy and driver manager explicitly (the chart's values for
    # them; the manager so that a mirror reaches it)
    extra = {"priorityClassName", "upgradePolicy", "imagePullPolicy", "manager"}
    assert [d for d in differences(H100_DRIVER["spec"], ours["p5.48xlarge"], excused)
            if d[0].split(".")[0] not in extra] == []


MIG_CONFIG = """\
version: v1
mig-configs:
  all-disabled:
    - devices: all
      mig-enabled: false
  h100-balanced:
    - device-filter: ["0x233010DE"]
      devices: all
      mig-enabled: true
      mig-devices:
        "3g.40gb": 1
        "2g.20gb": 1
        "1g.10gb": 2
"""
PLUGIN_CONFIG = {"any": "version: v1\nflags:\n  migStrategy: mixed\n",
                 "shared-4": "version: v1\nflags:\n  migStrategy: mixed\nsharing:\n  timeSlicing:\n    resources:\n"
                             "    - name: nvidia.com/gpu\n      replicas: 4\n"}


def test_mig_mixed_with_custom_configs_round_trip(tmp_path):
    values = {"mig": {"strategy": "mixed"},
              "migManager": {"config": {"name": "custom-mig-config", "default": "all-disabled"}},
              "devicePlugin": {"config": {"name": "time-slicing-config", "default": "any"}}}
    cp = one(render_nvidia(values), "ClusterPolicy")
    cms = [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "custom-mig-config"},
            "data": {"config.yaml": MIG_CONFIG}},
           {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "time-slicing-config"},
            "data": PLUGIN_CONFIG}]
    src = tmp_path / "cluster.yaml"
    src.write_text("---\n".join(dump(o) for o in [cp] + cms))
    text, unexpressed, objs = round_trip(tmp_path, read_inputs([src]))
    pools = {p["name"]: p for p in load(text)["spec"]["nodePools"]}
    assert pools["h100-balanced"]["gpu"] == "H100-SXM5-80GB"
    assert pools["h100-balanced"]["mig"] == {"strategy": "mixed", "layout": {"3g.40gb": 1, "2g.20gb": 1, "1g.10gb": 2},
                                             "configName": "h100-balanced"}
    assert pools["shared-4"]["sharing"] == {"timeSlicing": {"replicas": 4}, "configName": "shared-4"}
    # the live names: the ConfigMaps and the default config (`any`, no sharing: gpuop's default under that name)
    assert load(text)["spec"]["delivery"]["operator"]["devicePluginConfig"] == {"name": "time-slicing-config",
                                                                                "default": "any"}
    assert load(text)["spec"]["delivery"]["operator"]["migManagerConfig"] == {"name": "custom-mig-config"}
    ours = one(objs, "ClusterPolicy")["spec"]
    assert differences(cp["spec"], ours, list(NORMALIZED) + unexpressed) == []
    assert ours["mig"]["strategy"] == "mixed"
    assert ours["devicePlugin"]["config"] == {"name": "time-slicing-config", "default": "any"}
    plugin = one(objs, "ConfigMap", "time-slicing-config")["data"]
    assert sorted(plugin) == ["any", "shared-4"]
    mig = load(one(objs, "ConfigMap", ours["migManager"]["config"]["name"])["data"]["config.yaml"])
    assert {"3g.40gb": 1, "2g.20gb": 1, "1g.10gb": 2} in [e["mig-devices"] for c in mig["mig-configs"].values()
                                                         for e in c if e.get("mig-enabled")]


def test_comments_every_setting_gpuop_cannot_express(tmp_path):
    src = tmp_path / "values.yaml"
    src.write_text("driver:\n  rdma:\n    enabled: true\n  version: 580.173.02\ncdi:\n  enabled: false\n"
                   "daemonsets:\n  updateStrategy: OnDelete\n")
    proc = run_gpuop("import", str(src), "--chart-defaults", str(DEFAULT_VALUES), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert ("# gpuop import: driver.rdma.enabled: true cannot be expressed in a gpuop profile: GPUDirect RDMA of the "
            "ClusterPolicy (per pool: spec.nodePools[].driver.rdma) (chart default: false)") in proc.stdout
    assert ("# gpuop import: daemonsets.updateStrategy: OnDelete cannot be expressed in a gpuop profile: the "
            "operands' update strategy (chart default: RollingUpdate)") in proc.stdout
    assert ("# gpuop import: cdi.enabled: false cannot be expressed in a gpuop profile: gpuop always sets "
            "cdi.enabled: True (gpuop's stack always runs CDI, as the operator's default) (chart default: true)") \
        in proc.stdout
    out = tmp_path / "profile.yaml"
    proc = run_gpuop("import", str(src), "--chart-defaults", str(DEFAULT_VALUES), "-o", str(out), cwd=tmp_path)
    assert proc.returncode == 0 and proc.stdout == ""
    assert load(out.read_text())["spec"]["driver"]["version"] == "580.173.02"
    validate(load_profile(out))


def test_comments_nvidiadriver_fields_a_pool_cannot_carry(tmp_path):
    cr = {**H100_DRIVER, "spec": {**H100_DRIVER["spec"], "driverType": "vgpu", "labels": {"team": "ml"}}}
    src = tmp_path / "cr.yaml"
    src.write_text(dump(cr))
    proc = run_gpuop("import", str(src), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "# gpuop import: NVIDIADriver h100-595 driverType: vgpu cannot be expressed per pool; gpuop writes the " \
        "cluster-wide setting" in proc.stdout
    assert "# gpuop import: NVIDIADriver h100-595 labels: {team: ml} cannot be expressed per pool" in proc.stdout


def test_a_field_of_the_wrong_shape_is_a_located_error(tmp_path):
    src = tmp_path / "values.yaml"
    src.write_text("mig: {strategy: single}\ndriver: 5\n")
    proc = run_gpuop("import", str(src), "--chart-defaults", str(DEFAULT_VALUES), cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert "values.yaml:2:1: driver: must be a mapping, as in NVIDIA's chart (got a number)" in proc.stderr
    assert proc.stdout == ""


@pytest.mark.parametrize("content, message", [
    (None, "file not found"),
    ("driver: [unclosed\n", "malformed YAML: "),
    ("- a\n- b\n", "the document is a list; an operator input is a YAML mapping"),
])
def test_refuses_unreadable_input_with_exit_2(tmp_path, content, message):
    src = tmp_path / "in.yaml"
    if content is not None:
        src.write_text(content)
    proc = run_gpuop("import", str(src), cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.startswith("in.yaml") and message in proc.stderr
    assert "Traceback" not in proc.stderr and proc.stdout == ""


def test_imported_profile_compiles_with_gpuop_synth(tmp_path):
    (tmp_path / "profiles").mkdir()
    shutil.copy(REPO / "gpuop.yaml", tmp_path / "gpuop.yaml")
    proc = run_gpuop("import", str(DEFAULT_VALUES), "--chart-defaults", str(DEFAULT_VALUES),
                     "-o", str(tmp_path / "profiles" / "imported.yaml"), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    proc = run_gpuop("synth", "profiles", "-o", "dist", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "dist" / "values" / "operator" / "values.yaml").is_file()   # named after the input file


def test_chart_defaults_are_known_without_chart_defaults(tmp_path):
    src = tmp_path / "values.yaml"
    src.write_text("driver:\n  rdma:\n    enabled: false\n  version: 580.95.05\ndaemonsets:\n  updateStrategy: OnDelete\n")
    proc = run_gpuop("import", str(src), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "driver.rdma.enabled" not in proc.stdout           # equal to NVIDIA's chart default (gpuop's catalog)
    assert "daemonsets.updateStrategy: OnDelete cannot be expressed in a gpuop profile" in proc.stdout
    assert "(chart default: RollingUpdate)" in proc.stdout
    # placeholders, the one setting and the operator version the input does not name; no chart defaults
    assert proc.stdout.count("# gpuop import:") <= 5
    assert "the input names no GPU Operator version" in proc.stdout
