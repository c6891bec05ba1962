"""Import keeps the cluster as it is: import -> profile -> operator-mode values -> NVIDIA's chart -> ClusterPolicy
(and NVIDIADriver CRs, ConfigMaps) equal to the input after CRD defaulting, for everything the mapping table
covers (`gpuop import --check`), over a corpus after NVIDIA's documented examples (tests/data/import-corpus) and
a property test over every setting of the table; and a live install (its values override, as `kubectl get`
shows the result) reproduced."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuop.ops import import_check
from gpuop.ops.import_io import Doc, read_inputs
from gpuop.ops.importer import _locate, import_all, run
from gpuop.plan import chartmap as cm
from gpuop.verify import nvidia_chart

from conftest import REFS, REPO, run_gpuop
from test_chartmap import STRATEGIES, to_settings

CORPUS = REPO / "tests" / "data" / "import-corpus"
CHART = REFS / "gpu-operator" / "chart"
CASES = sorted({p.name.split(".")[0] for p in CORPUS.glob("*.yaml")})
# what the profile cannot say yet, each listed in the imported profile's comments and accepted by
# --accept-unexpressed; these cases are not reproduced exactly without that flag
NAMES_GPUOP_CHOOSES = {
    # a non-default NVIDIADriver CR that leaves out imagePullPolicy, manager, tolerations, priorityClassName,
    # upgradePolicy and usePrecompiled: gpuop writes every CR from the cluster-wide settings (plan/operator.py
    # driver_spec), since a CR without them gets the operator's built-ins (no upgrade policy, the driver manager
    # of the operator's env, not the mirror's); a pool has no setting for "leave it out"
    "nvidiadriver-crs",
    # the OperatorHub ClusterPolicy's ServiceMonitor names no interval (Prometheus's own)
    "openshift-olm",
}
KNOWN_GAPS: dict[str, str] = {}


def files(case: str) -> list[Path]:
    return sorted(CORPUS.glob(f"{case}.*.yaml"))


def test_the_corpus_has_at_least_15_cases_each_naming_its_source():
    assert len(CASES) >= 15
    for case in CASES:
        for f in files(case):
            assert f.read_text().startswith("# "), f


@pytest.mark.slow
@pytest.mark.parametrize("case", [pytest.param(c, marks=pytest.mark.xfail(strict=True, reason=KNOWN_GAPS[c]))
                                  if c in KNOWN_GAPS else c for c in CASES])
def test_import_check_over_the_corpus(case):
    result = import_all(read_inputs(files(case)), case)
    diffs = import_check.check_text(result.inputs, result.text, result.unexpressed, _locate, CHART)
    text, code = import_check.report(diffs, accept_unexpressed=True)
    assert code == 0, text
    assert text.rstrip().endswith("the profile keeps the cluster as it is")
    strict, strict_code = import_check.report(diffs, accept_unexpressed=False)
    assert (strict_code == 0) == (case not in NAMES_GPUOP_CHOOSES), strict
    if strict_code:                      # every difference left is one the profile's comments name
        assert all("(not expressible: listed in the profile's comments)" in line
                   for line in strict.splitlines()[:-1]), strict


@pytest.mark.slow
def test_import_check_cli_prints_located_differences_and_exits_3(tmp_path):
    src = tmp_path / "values.yaml"
    src.write_text("# an update strategy gpuop does not write\ndaemonsets:\n  updateStrategy: OnDelete\n")
    proc = run_gpuop("import", str(src), "--check", "--chart", str(CHART), cwd=tmp_path)
    assert proc.returncode == 3, proc.stderr
    assert ("values.yaml:3:3: ClusterPolicy spec.daemonsets.updateStrategy: imported OnDelete, gpuop's operator "
            "input gives RollingUpdate (not expressible: listed in the profile's comments)") in proc.stdout
    assert proc.stdout.rstrip().endswith("gpuop import --check: 1 difference(s)")
    proc = run_gpuop("import", str(src), "--check", "--chart", str(CHART), "--accept-unexpressed", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "0 difference(s), 1 accepted as not expressible" in proc.stdout


def test_nvidia_s_default_values_import_without_a_comment_on_chart_defaults(tmp_path):
    proc = run_gpuop("import", str(CHART / "values.yaml"), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "cannot be expressed" not in proc.stdout
    assert [line.strip() for line in proc.stdout.splitlines() if "# gpuop import:" in line and "set" not in line] == []


def test_import_check_needs_the_chart_folder(tmp_path):
    src = tmp_path / "values.yaml"
    src.write_text("driver:\n  enabled: false\n")
    proc = run_gpuop("import", str(src), "--check", "--chart", str(tmp_path), cwd=tmp_path)
    assert proc.returncode == 2 and "--chart is the folder of NVIDIA's gpu-operator chart" in proc.stderr


# ---- a live install ----------------------------------------------------------------------------------

def live_install(tmp_path: Path) -> Path:
    """NVIDIA's chart rendered with the live install's override, as `kubectl get -o yaml` shows it, plus the
    ConfigMaps created beside it."""
    values = yaml.safe_load((CORPUS / "live-install.values.yaml").read_text())
    rendered = nvidia_chart.render(values, CHART)
    objs = [rendered.cluster_policy] + list(yaml.safe_load_all((CORPUS / "live-install.configmaps.yaml").read_text()))
    live = tmp_path / "live.yaml"
    live.write_text(yaml.safe_dump_all(objs, sort_keys=False))
    return live


@pytest.mark.slow
def test_the_live_install_is_kept(tmp_path):
    live = live_install(tmp_path)
    result = import_all(read_inputs([live]), "live")
    profile = yaml.safe_load(result.text)["spec"]
    pools = {p["name"]: p for p in profile["nodePools"]}
    # time-slicing x4 is the config of every node without a label (default: any), not of labelled nodes
    assert pools["any"]["sharing"] == {"timeSlicing": {"replicas": 4}, "configName": "any"}
    assert "nvidia.com/device-plugin.config=any" not in result.text
    assert "every GPU node without a nvidia.com/device-plugin.config label runs this config" in result.text
    # the mirror of one component is kept, the MIG pool's GPU can hold its layout
    assert profile["delivery"]["operator"]["repositories"] == {"validator": "registry.example.com/nvidia"}
    assert pools["h100-balanced"]["gpu"] == "H100-SXM5-80GB"
    assert profile["driver"]["enabled"] is False and profile["dcgmExporter"]["serviceMonitor"]["enabled"] is True
    # the live names are kept: the ConfigMaps, the default config, every config key (node label value)
    assert profile["delivery"]["operator"]["devicePluginConfig"] == {"name": "time-slicing-config", "default": "any"}
    assert pools["any"]["sharing"]["configName"] == "any"
    assert pools["h100-balanced"]["mig"]["configName"] == "h100-balanced"
    assert result.unexpressed == []
    # the ClusterPolicy, its ConfigMaps and the chart's objects reproduced exactly, without accepting anything
    diffs = import_check.check_text(result.inputs, result.text, result.unexpressed, _locate, CHART)
    assert diffs == [], "\n".join(map(str, diffs))
    text, code = run([live], None, check=True, chart=CHART, accept_unexpressed=False)
    assert code == 0 and text.rstrip().endswith("the profile keeps the cluster as it is"), text


# ---- every setting the table covers ------------------------------------------------------------------

POLICY_SHAPE = {("driver", "nvidiaDriverCRD", "enabled"): ("driver", "useNvidiaDriverCRD"),
                ("driver", "upgradePolicy", "gpuPodDeletion"): ("driver", "upgradePolicy", "podDeletion")}
SETTINGS = {k: v for k, v in STRATEGIES.items()
            # rows whose profile value needs more than the table (the plan decides them, or the profile refuses
            # them in operator mode without further settings)
            if k not in ("delivery.operator.gpuCluster", "delivery.operator.clusterPolicy", "platform.type",
                         "driver.precompiled", "delivery.operator.nvidiaDriverCRD", "delivery.operator.gds",
                         "delivery.operator.gdrcopy", "nodeStatusExporter.enabled",
                         "driver.upgradePolicy.maxParallelUpgrades")}


def _values_doc(values: dict) -> list[Doc]:
    return [Doc("values.yaml", values, {})]


def _nfd_mirror(values: dict, mirror: str | None, release_registry: str) -> None:
    """What the plan adds beside the table (plan/operator.py nfd_repository): under a mirror, NFD's image below it
    unless nfdValues names one (NFD is deployed: the platform here is Kubernetes)."""
    if mirror not in (None, "", release_registry) and not cm.get_path(values, "node-feature-discovery.image.repository"):
        values.setdefault("node-feature-discovery", {}).setdefault("image", {})["repository"] = (
            f"{mirror}/nfd/node-feature-discovery")


@settings(max_examples=40, deadline=None, database=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(st.fixed_dictionaries({}, optional=SETTINGS))
def test_every_table_setting_survives_import_and_export(setting):
    """values the table writes for a setting -> gpuop import -> the imported profile through the table again:
    the same values on every path a row decides (compiling in operator mode is the corpus test's part)."""
    rel = cm.release_images()
    values = cm.profile_to_values(to_settings(setting), rel)
    registry = setting.get("images.registry") or rel.registry
    for key in ("gds", "gdrcopy"):           # derived rows: the sidecars under the same mirror (plan/operator.py)
        values.setdefault(key, {})["repository"] = f"{registry}/cloud-native"
    values.setdefault("operator", {})["repository"] = registry
    _nfd_mirror(values, setting.get("images.registry"), rel.registry)
    result = import_all(_values_doc(copy.deepcopy(values)), "prop")
    assert result.unexpressed == []
    spec = yaml.safe_load(result.text)["spec"]
    ours = cm.profile_to_values(spec, rel)
    _nfd_mirror(ours, cm.get_path(spec, "images.registry"), rel.registry)
    ours = cm.effective(ours)
    values = cm.effective(values)
    for row in cm.ROWS:
        if row.kind == "derived":
            continue
        for p in row.values:
            a, b = cm.get_path(values, p), cm.get_path(ours, p)
            assert a == b or (a in (None, [], {}) and b in (None, [], {})), (p, a, b, result.text)
