"""The alert rules (plan/alerts.py, outputs/alerts.py, components/gpu_alerts.py) against Prometheus' own
rule checker and rule unit tester (`promtool`, Debian's `prometheus` package): every example's rule file is
accepted, and every alert fires on synthetic series of a broken node and stays quiet on a healthy one. The
series are built from the plan (each pool's nodeSelector and per-node counts), so the missing-GPU alerts are
shown to use the counts after MIG and sharing (mig-sharing: a MIG pool with a time-sliced MIG profile, a
time-sliced pool and an MPS pool).
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from conftest import write_profile
from gpuop import catalog
from gpuop.errors import UserError
from gpuop.catalog import metrics as metrics_catalog
from gpuop.catalog import xids as xid_catalog
from gpuop.plan import pools as plan_pools
from gpuop.plan.alerts import STACK_DAEMONSETS
from gpuop.plan.build import build_plan
from gpuop.profile.load import load_profile
from gpuop.validate.runner import validate
from gpuop.outputs import alerts as alerts_output

REPO = Path(__file__).resolve().parents[1]
PROMTOOL = shutil.which("promtool")
needs_promtool = pytest.mark.skipif(PROMTOOL is None, reason="promtool (Debian's prometheus package) not installed")
KSM = metrics_catalog.load().kubeStateMetrics
HEALTH_VERSION = metrics_catalog.load().devicePluginHealth.version
EXAMPLES = sorted(p.stem for p in (REPO / "profiles").glob("[!_]*.yaml"))


def plan_of(name: str):
    cat = catalog.load()
    return build_plan(validate(load_profile(REPO / "profiles" / f"{name}.yaml"), cat), cat)


def series(name: str, labels: dict, values: str) -> dict:
    inner = ", ".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    return {"series": f"{name}{{{inner}}}", "values": values}


def node_labels(node: str, selector, extra: dict | None = None) -> dict:
    return series(KSM.nodeLabels, {"node": node, **{f"label_{KSM.sanitize(k)}": v for k, v in selector},
                                   **(extra or {})}, "1x500")


def render(template: str, labels: dict, value: str) -> str:
    out = re.sub(r"\{\{ \$value \| humanizePercentage \}\}", f"{float(value) * 100:g}%", template)
    out = out.replace("{{ $value }}", value)
    return re.sub(r"\{\{ \$labels\.(\w+) \}\}", lambda m: labels[m.group(1)], out)


class Case:
    """One alert's unit tests: series of a broken and a healthy node per pool, the alerts expected."""

    def __init__(self, plan, alert: str, eval_time: str):
        self.plan, self.alert, self.eval_time = plan, alert, eval_time
        self.bad: list[dict] = []
        self.good: list[dict] = []
        self.expected: list[dict] = []
        self.rules = {}
        for r in plan.alerts.rules:
            if r.alert == alert:
                self.rules.setdefault(dict(r.labels).get("pool"), []).append(r)

    def expect(self, rule, labels: dict, value: str):
        full = {**labels, "severity": rule.severity, "gpuop_cluster": self.plan.name, **dict(rule.labels)}
        self.expected.append({"exp_labels": full, "exp_annotations": {
            "summary": rule.summary, "description": render(rule.description, full, value), "runbook": rule.runbook}})

    def tests(self) -> list[dict]:
        both = {"interval": "1m", "input_series": self.bad + self.good,
                "alert_rule_test": [{"eval_time": self.eval_time, "alertname": self.alert, "exp_alerts": self.expected}]}
        healthy = {"interval": "1m", "input_series": self.good,
                   "alert_rule_test": [{"eval_time": self.eval_time, "alertname": self.alert, "exp_alerts": []}]}
        return [both, healthy]


def dcgm_case(plan, alert, eval_time, per_pool, field):
    """A per-pool DCGM alert: GPU 0 of `<pool>-bad` has the bad values, of `<pool>-good` the good ones, where
    per_pool(pool) gives (bad values, good values, the alert's $value) or a tuple of them for each field."""
    c = Case(plan, alert, eval_time)
    for cap in plan.capacity.pools:
        if cap.pool not in c.rules:
            continue
        bad_values, good_values, value = per_pool(cap.pool)
        rule = c.rules[cap.pool][0]
        for kind, values, host_label in (("bad", bad_values, "Hostname"), ("good", good_values, "hostname")):
            node = f"{cap.pool}-{kind}"
            fields = field if isinstance(field, tuple) else (field,)
            target = c.bad if kind == "bad" else c.good
            target.append(node_labels(node, cap.node_selector))
            for f, v in zip(fields, values if isinstance(values, tuple) else (values,)):
                target.append(series(f, {host_label: node, "gpu": "0"}, v))
        c.expect(rule, {"Hostname": f"{cap.pool}-bad", "gpu": "0", "node": f"{cap.pool}-bad"}, value)
    return c


def count_cases(plan) -> list[Case]:
    visible = Case(plan, "GpuopGPUsVisibleBelowPlan", "20m")
    allocatable = Case(plan, "GpuopGPUsAllocatableBelowPlan", "20m")
    for cap in plan.capacity.pools:
        n = cap.gpus_per_node
        for kind, gpus, host_label in (("bad", n - 1, "Hostname"), ("good", n, "hostname")):
            node = f"{cap.pool}-{kind}"
            for case in (visible, allocatable):
                (case.bad if kind == "bad" else case.good).append(node_labels(node, cap.node_selector))
            for i in range(gpus):
                (visible.bad if kind == "bad" else visible.good).append(
                    series("DCGM_FI_DEV_GPU_TEMP", {host_label: node, "gpu": str(i), "UUID": f"GPU-{node}-{i}"}, "40x30"))
            for resource, count in cap.per_node or ():
                (allocatable.bad if kind == "bad" else allocatable.good).append(series(
                    KSM.allocatable, {"node": node, "resource": KSM.sanitize(resource), "unit": "integer"},
                    f"{count - 1 if kind == 'bad' else count}x30"))
        visible.expect(visible.rules[cap.pool][0], {"node": f"{cap.pool}-bad"}, str(n - 1))
        for rule in allocatable.rules.get(cap.pool, []):
            allocatable.expect(rule, {"node": f"{cap.pool}-bad"}, str(int(dict(rule.labels)["expected"]) - 1))
    return [visible, allocatable]


def _same(bad, good, value):
    return lambda pool: (bad, good, value)


PLUGIN = xid_catalog.load().plugin(HEALTH_VERSION)


def pool_policy(dist: Path, name: str, pool: str) -> xid_catalog.Policy | None:
    """The XID policy of the device plugin on a pool's nodes, read back from the compiled DaemonSet's env (operator
    mode: NVIDIA's chart values) through the plugin's own grammar (catalog/xids.py), not through the alerts' code:
    the pool's policy DaemonSet when its nodes carry one, else the cluster's; None where no device plugin serves it."""
    plan = plan_of(name)
    pool_labels = next(p for p in plan.pool_configs.pools if p.name == pool)
    chosen = {**dict(pool_labels.nfd), **dict(pool_labels.manual)}.get(plan_pools.HEALTH_LABEL)
    wanted = f"nvidia-device-plugin-{chosen}" if chosen else "nvidia-device-plugin-daemonset"
    for f in sorted((dist / plan.name / "manifests").glob("*.yaml")):
        for doc in yaml.safe_load_all(f.read_text()):
            if doc and doc.get("kind") == "DaemonSet" and doc["metadata"]["name"] == wanted:
                (ctr,) = [c for c in doc["spec"]["template"]["spec"]["containers"] if c["name"] == "nvidia-device-plugin"]
                return xid_catalog.read_policy_env({e["name"]: e.get("value", "") for e in ctr.get("env", [])})
    values = dist / plan.name / "operator" / "values.yaml"       # operator mode: NVIDIA's chart runs the plugin
    if values.exists():
        env = (yaml.safe_load(values.read_text()).get("devicePlugin") or {}).get("env") or []
        return xid_catalog.read_policy_env({e["name"]: e.get("value", "") for e in env})
    return None


def xid_values(dist: Path, name: str):
    """Per pool: the XIDs a broken and a healthy GPU report for the two XID alerts, chosen by NVIDIA's device plugin
    rules (catalog/xids.py unhealthy) under the pool's policy: an XID that marks the GPU unhealthy, one it ignores."""
    plan = plan_of(name)
    codes = [x.xid for x in xid_catalog.load().xids]

    def picks(pool):
        cap = next(c for c in plan.capacity.pools if c.pool == pool)
        policy = pool_policy(dist, name, pool) if cap.allocation == "devicePlugin" else None
        if policy is None or not policy.checks:
            return None
        # the policy's own entries first: where it departs from NVIDIA's defaults the alerts must follow it
        fatal = next(x for x in (*policy.fatal, *codes) if xid_catalog.unhealthy(policy, x, PLUGIN))
        app = next((x for x in (*policy.ignore, *codes) if not xid_catalog.unhealthy(policy, x, PLUGIN)), None)
        return fatal, app

    def unhealthy(pool):
        fatal, app = picks(pool)
        return f"0x5 {fatal}x20", f"0x5 {app}x20" if app else "0x25", str(fatal)

    def application(pool):
        p = picks(pool)
        if p is None:            # every XID alike: any XID is the warning
            return "0x5 79x20", "0x25", "79"
        fatal, app = p
        return f"0x5 {app}x20", f"0x5 {fatal}x20", str(app)
    return unhealthy, application


def health_cases(plan, dist: Path, name: str) -> list[Case]:
    unhealthy, application = xid_values(dist, name)
    cases = [
        dcgm_case(plan, "GpuopGPUXidUnhealthy", "10m", unhealthy, "DCGM_FI_DEV_XID_ERRORS"),
        dcgm_case(plan, "GpuopGPUXidError", "10m", application, "DCGM_FI_DEV_XID_ERRORS"),
        dcgm_case(plan, "GpuopGPUEccUncorrectable", "10m", _same("0+1x30", "0x30", "10"), "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL"),
        dcgm_case(plan, "GpuopGPURowRemapFailed", "10m", _same("0x5 1x20", "0x30", "1"), "DCGM_FI_DEV_ROW_REMAP_FAILURE"),
        dcgm_case(plan, "GpuopGPURemappedRowsRising", "7h", _same("0+1x500", "3x500", "10080"),
                  "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS"),
        dcgm_case(plan, "GpuopGPURetiredPagesRising", "7h", _same(("0+1x500", "0x500"), ("2x500", "1x500"), "10080"),
                  ("DCGM_FI_DEV_RETIRED_SBE", "DCGM_FI_DEV_RETIRED_DBE")),
        dcgm_case(plan, "GpuopGPUPagesPendingRetirement", "10m", _same("0x2 2x20", "0x30", "2"),
                  "DCGM_FI_DEV_RETIRED_PENDING"),
        dcgm_case(plan, "GpuopGPUThermalThrottling", "30m", _same("0+30000000000x40", "0+1000000000x40", "0.5"),
                  "DCGM_FI_DEV_THERMAL_VIOLATION"),
        dcgm_case(plan, "GpuopGPUPowerThrottling", "30m", _same("0+30000000000x40", "0x40", "0.5"),
                  "DCGM_FI_DEV_POWER_VIOLATION"),
    ]
    return [c for c in cases if c.rules]


def mig_case(plan) -> list[Case]:
    c = Case(plan, "GpuopMIGConfigFailed", "10m")
    for cap in plan.capacity.pools:
        if cap.pool not in c.rules:
            continue
        c.bad.append(node_labels(f"{cap.pool}-bad", cap.node_selector, {"label_nvidia_com_mig_config_state": "failed"}))
        c.good.append(node_labels(f"{cap.pool}-good", cap.node_selector, {"label_nvidia_com_mig_config_state": "success"}))
        c.expect(c.rules[cap.pool][0], {"node": f"{cap.pool}-bad"}, "1")
    return [c] if c.rules else []


# a DaemonSet name of each component the "pods not ready" rule watches, as the components write them
DAEMONSET_OF = {"driver": "nvidia-driver-daemonset-ubuntu24.04", "device-plugin": "nvidia-device-plugin-daemonset",
                "dcgm": "nvidia-dcgm", "dcgm-exporter": "nvidia-dcgm-exporter"}


def stack_case(plan) -> list[Case]:
    """Each watched component's DaemonSet with a pod not ready fires its rule; the same DaemonSets all ready, and
    a not-ready DaemonSet of another namespace or of an unwatched component (the MPS control daemon), do not."""
    broken = Case(plan, "GpuopStackPodsNotReady", "20m")
    ready = Case(plan, "GpuopStackPodsNotReady", "20m")
    for rule in broken.rules[None]:
        component = dict(rule.labels)["component"]
        own = {"namespace": plan.namespace, "daemonset": DAEMONSET_OF[component]}
        other = {"namespace": "other", "daemonset": DAEMONSET_OF[component]}
        broken.bad += [series(KSM.daemonsetDesired, own, "4x30"), series(KSM.daemonsetReady, own, "3x30")]
        broken.good += [series(KSM.daemonsetDesired, other, "4x30"), series(KSM.daemonsetReady, other, "3x30")]
        ready.good += [series(KSM.daemonsetDesired, own, "4x30"), series(KSM.daemonsetReady, own, "4x30")]
        broken.expect(rule, own, "1")
    mps = {"namespace": plan.namespace, "daemonset": "nvidia-device-plugin-mps-control-daemon"}
    ready.good += [series(KSM.daemonsetDesired, mps, "4x30"), series(KSM.daemonsetReady, mps, "3x30")]
    return [broken, ready]


def all_cases(plan, dist: Path, name: str) -> list[Case]:
    return count_cases(plan) + health_cases(plan, dist, name) + mig_case(plan) + stack_case(plan)


def run_promtool_tests(tmp_path: Path, plan, cases: list[Case]) -> subprocess.CompletedProcess:
    rules = tmp_path / "rules.yaml"
    rules.write_text(alerts_output.files(plan, "x")[f"x/{alerts_output.FILE}"])
    suite = tmp_path / "tests.yaml"
    suite.write_text(yaml.safe_dump({"rule_files": [rules.name], "evaluation_interval": "1m",
                                     "tests": [t for c in cases for t in c.tests()]}, sort_keys=False))
    return subprocess.run([PROMTOOL, "test", "rules", str(suite)], capture_output=True, text=True, cwd=tmp_path)


@needs_promtool
def test_every_example_rule_file_passes_promtool_check(dist):
    files = sorted(dist.glob("*/alerts/gpu-alerts.rules.yaml"))
    clusters = sorted(p.stem for p in (REPO / "profiles").glob("[!_]*.yaml"))
    assert sorted(f.parent.parent.name for f in files) == sorted(
        yaml.safe_load((REPO / "profiles" / f"{c}.yaml").read_text())["metadata"]["name"] for c in clusters)
    done = subprocess.run([PROMTOOL, "check", "rules", *map(str, files)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


@needs_promtool
@pytest.mark.parametrize("name", EXAMPLES)
def test_every_alert_of_every_example_fires_on_a_broken_node_and_not_on_a_healthy_one(tmp_path, dist, name):
    plan = plan_of(name)
    cases = all_cases(plan, dist, name)
    # every rule the plan writes (each alert of each pool, each resource, each component) is expected to fire
    expected = {(c.alert, tuple(sorted(e["exp_labels"].items()))) for c in cases for e in c.expected}
    assert {(r.alert, dict(r.labels).get("pool"), dict(r.labels).get("resource"), dict(r.labels).get("component"))
            for r in plan.alerts.rules} == {
        (a, d.get("pool"), d.get("resource"), d.get("component")) for a, labels in expected for d in [dict(labels)]}
    done = run_promtool_tests(tmp_path, plan, cases)
    assert done.returncode == 0, done.stdout + done.stderr


@needs_promtool
def test_the_xid_alerts_follow_each_pools_own_device_plugin_policy(tmp_path):
    # full-stack: frontier ignores 63, 92, 94 and makes 109 fatal (its own DaemonSet); train keeps NVIDIA's defaults
    plan = plan_of("full-stack")
    cases = []
    for alert, reported in (("GpuopGPUXidUnhealthy", {"train": 94, "frontier": 109}),
                            ("GpuopGPUXidError", {"train": 109, "frontier": 94})):
        quiet = {"train": 109, "frontier": 94} if alert == "GpuopGPUXidUnhealthy" else {"train": 94, "frontier": 109}
        cases.append(dcgm_case(plan, alert, "10m", lambda pool, r=reported, q=quiet: (
            f"0x5 {r[pool]}x20", f"0x5 {q[pool]}x20", str(r[pool])), "DCGM_FI_DEV_XID_ERRORS"))
    done = run_promtool_tests(tmp_path, plan, cases)
    assert done.returncode == 0, done.stdout + done.stderr


@needs_promtool
def test_missing_gpu_alerts_use_the_counts_after_mig_and_sharing(tmp_path):
    plan = plan_of("mig-sharing")
    expected = {(dict(r.labels)["pool"], dict(r.labels).get("resource")): dict(r.labels)["expected"]
                for r in plan.alerts.rules if r.alert.startswith("GpuopGPUs")}
    # 8 H100s with 1x3g.40gb + 1x2g.20gb + 2x1g.10gb each, the 1g.10gb time-sliced x2; 4 L40S time-sliced x4;
    # 8 A100s under MPS x2
    assert expected == {
        ("train", None): "8", ("train", "nvidia.com/mig-1g.10gb"): "32", ("train", "nvidia.com/mig-2g.20gb"): "8",
        ("train", "nvidia.com/mig-3g.40gb"): "8", ("infer", None): "4", ("infer", "nvidia.com/gpu"): "16",
        ("batch", None): "8", ("batch", "nvidia.com/gpu"): "16"}
    cases = count_cases(plan) + mig_case(plan)
    done = run_promtool_tests(tmp_path, plan, cases)
    assert done.returncode == 0, done.stdout + done.stderr


def test_stack_daemonset_names_match_the_compiled_daemonsets(dist):
    names = set()
    for f in dist.glob("*/manifests/*.yaml"):
        for doc in yaml.safe_load_all(f.read_text()):
            if doc and doc.get("kind") == "DaemonSet":
                names.add(doc["metadata"]["name"])
    for component, regex, _ in STACK_DAEMONSETS:
        assert any(re.fullmatch(regex, n) for n in names), (component, regex)
    # every device plugin DaemonSet is watched, a pool XID policy's own included (full-stack has one)
    plugin = dict((c, r) for c, r, _ in STACK_DAEMONSETS)["device-plugin"]
    plugins = {n for n in names if n.startswith("nvidia-device-plugin-") and "mps-control-daemon" not in n}
    assert any(n.startswith("nvidia-device-plugin-health-") for n in plugins)
    assert all(re.fullmatch(plugin, n) for n in plugins), plugins


def test_rules_needing_unexported_fields_are_left_out_and_named():
    plan = plan_of("mig-sharing")
    written = {r.alert for r in plan.alerts.rules}
    skipped = dict(plan.alerts.skipped)
    assert "GpuopGPUEccUncorrectable" not in written
    assert "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL" in skipped["GpuopGPUEccUncorrectable"]
    text = alerts_output.files(plan, "x")[f"x/{alerts_output.FILE}"]
    assert "# Not written: GpuopGPUEccUncorrectable: the exporter does not export DCGM_FI_DEV_ECC_DBE_VOL_TOTAL" in text
    assert "--metric-labels-allowlist=nodes=[node.kubernetes.io/instance-type,nvidia.com/mig.config.state]" in text


def test_diff_shows_an_alert_threshold_that_a_sharing_change_moves(tmp_path):
    from conftest import run_gpuop

    shutil.copytree(REPO / "profiles", tmp_path / "profiles")
    shutil.copy(REPO / "gpuop.yaml", tmp_path / "gpuop.yaml")
    run_gpuop("synth", "profiles", "-o", "dist", cwd=tmp_path, check=True)
    f = tmp_path / "profiles" / "mig-sharing.yaml"
    f.write_text(f.read_text().replace("timeSlicing: {replicas: 4,", "timeSlicing: {replicas: 2,"))
    done = run_gpuop("diff", "--exit-code", cwd=tmp_path)
    assert done.returncode == 3, done.stderr
    block = done.stdout.split("  ~ alerts/gpu-alerts.rules.yaml\n", 1)[1]
    assert re.search(r"^      groups\[gpuop\.gpu\]\.rules\[\d+\]\.labels\.expected: 16 -> 8$", block.split("\n  ~ ")[0], re.M)


LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
K8S_LABEL_KEY = st.from_regex(r"\A([a-z0-9]([a-z0-9.-]{0,20}[a-z0-9])?/)?[A-Za-z0-9]([A-Za-z0-9._-]{0,20}[A-Za-z0-9])?\Z")


@given(key=K8S_LABEL_KEY)
def test_a_node_label_key_becomes_a_valid_prometheus_label_name(key):
    name = f"{KSM.labelPrefix}{KSM.sanitize(key)}"
    assert LABEL_NAME.fullmatch(name)
    assert len(name) == len(KSM.labelPrefix) + len(key)        # one character for one, as kube-state-metrics


def test_the_prometheus_rule_carries_the_plain_rule_files_rules(dist):
    for cluster in ("full-stack", "openshift"):
        (rule,) = [d for d in yaml.safe_load_all((dist / cluster / "manifests" / "15-gpu-alerts.yaml").read_text()) if d]
        plain = yaml.safe_load((dist / cluster / "alerts" / alerts_output.FILE).read_text())
        assert rule["spec"]["groups"] == plain["groups"]
    assert not (dist / "mig-sharing" / "manifests" / "15-gpu-alerts.yaml").exists()   # no ServiceMonitor: no CRD expected


def test_alert_settings_are_refused_located(tmp_path):
    f = write_profile(tmp_path, """\
        platform: {type: kubernetes, version: "1.33"}
        os: ubuntu24.04
        alerts: {prometheusRule: true, additionalLabels: {"bad key!": x}, routing: pager}
        nodePools: [{name: a, gpu: L40S}]
        """)
    with pytest.raises(UserError) as err:
        validate(load_profile(f), catalog.load())
    located = sorted((i.path, i.line) for i in err.value.issues)
    assert located == [("spec.alerts.additionalLabels", 7), ("spec.alerts.routing", 7)]


HEALTH = metrics_catalog.load().devicePluginHealth
DEFAULT_IGNORED = frozenset({13, 31, 43, 45, 68, 109})


@pytest.mark.parametrize("env, ignored", [
    ({}, DEFAULT_IGNORED),
    ({"DP_DISABLE_HEALTHCHECKS": "94, 95,x"}, DEFAULT_IGNORED | {94, 95}),       # a malformed entry is skipped
    ({"DP_ENABLE_HEALTHCHECKS": "13,31"}, DEFAULT_IGNORED - {13, 31}),
    ({"DP_DISABLE_HEALTHCHECKS": "79", "DP_ENABLE_HEALTHCHECKS": "79"}, DEFAULT_IGNORED),
    ({"DP_ENABLE_HEALTHCHECKS": "ALL"}, frozenset()),
    ({"DP_DISABLE_HEALTHCHECKS": "all"}, None),
    ({"DP_DISABLE_HEALTHCHECKS": "xids", "DP_ENABLE_HEALTHCHECKS": "79"}, None),   # checkHealth returns first
])
def test_the_xids_the_device_plugin_ignores_follow_its_env(env, ignored):
    assert HEALTH.ignored_xids(env) == ignored


def test_the_health_policy_is_the_pinned_device_plugins():
    releases = yaml.safe_load((REPO / "constructs/gpuop/catalog/data/releases.yaml").read_text())
    newest = releases["releases"][0]
    assert (newest["name"], HEALTH.version) == ("26.7", newest["components"]["devicePlugin"]["version"])


def test_with_the_xid_check_off_every_xid_is_one_warning(tmp_path):
    f = write_profile(tmp_path, """\
        platform: {type: kubernetes, version: "1.33"}
        os: ubuntu24.04
        devicePlugin: {env: [{name: DP_DISABLE_HEALTHCHECKS, value: all}]}
        nodePools: [{name: a, gpu: L40S, gpusPerNode: 4}]
        """)
    cat = catalog.load()
    rules = build_plan(validate(load_profile(f), cat), cat).alerts.rules
    (xid,) = [r for r in rules if "XID" in r.expr]
    assert (xid.alert, xid.severity) == ("GpuopGPUXidError", "warning")
    assert "(DCGM_FI_DEV_XID_ERRORS > 0 and changes(DCGM_FI_DEV_XID_ERRORS[10m]) > 0, " in xid.expr
