"""Fleet adoption: realistic live installs of NVIDIA's GPU Operator (tests/data/import-fleet: Helm values with the
ConfigMaps created beside them, and an OpenShift ClusterPolicy) -> `gpuop import -o` -> `gpuop import --check`
over NVIDIA's whole chart (every object: ClusterPolicy, ConfigMaps, NFD subchart, NodeFeatureRules, the operator
Deployment, RBAC) exits 0; then one deliberate hand edit of each imported profile, re-checked with `--profile`,
is reported: exit 3 and the located difference."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from conftest import REFS, REPO, run_gpuop, tool

FLEET = REPO / "tests" / "data" / "import-fleet"
CHART = REFS / "gpu-operator" / "chart"
CASES = sorted({p.name.split(".")[0] for p in FLEET.glob("*.yaml")})


def _pool(spec: dict, name: str) -> dict:
    return next(p for p in spec["nodePools"] if p["name"] == name)


def _set(spec: dict, dotted: str, value) -> None:
    node = spec
    *head, last = dotted.split(".")
    for part in head:
        node = node.setdefault(part, {})
    if value is None:
        node.pop(last)
    else:
        node[last] = value


# case -> (the hand edit of the imported profile's spec, what the located difference names)
CHANGES = {
    "aks-time-slicing": (lambda s: _set(_pool(s, "l40s-x4"), "sharing.timeSlicing.replicas", 3),
                         "ConfigMap time-slicing-config data.l40s-x4.sharing.timeSlicing.resources"),
    "dcgm-prometheus": (lambda s: _set(s, "dcgmExporter.serviceMonitor.interval", "60s"),
                        "ClusterPolicy spec.dcgmExporter.serviceMonitor.interval: imported 30s, gpuop's operator "
                        "input gives 60s"),
    "drain-policy": (lambda s: _set(s, "delivery.operator.gpuPodDeletionTimeoutSeconds", None),
                     "ClusterPolicy spec.driver.upgradePolicy.podDeletion.timeoutSeconds: imported 600, gpuop's "
                     "operator input gives 900"),
    "eks-mirror": (lambda s: _set(s, "delivery.operator.nfdValues", None),
                   "Deployment gpu-operator/gpu-operator-node-feature-discovery-gc "
                   "spec.template.spec.containers[gc].image: imported 123456789012.dkr.ecr.us-west-2.amazonaws.com/"
                   "nfd/node-feature-discovery:v0.19.0, gpuop's operator input gives "
                   "123456789012.dkr.ecr.us-west-2.amazonaws.com/nvidia/nfd/node-feature-discovery:v0.19.0"),
    "h100-two-mig": (lambda s: _set(_pool(s, "h100-small"), "mig.layout", {"1g.10gb": 6}),
                     "ConfigMap custom-mig-parted-config data.[\"config.yaml\"].mig-configs.h100-small"),
    "mps-and-time-slicing": (lambda s: _set(_pool(s, "ts-8"), "sharing.timeSlicing.replicas", 4),
                             "ConfigMap sharing-config data.ts-8.sharing.timeSlicing.resources"),
    "nfd-settings": (lambda s: _set(s, "delivery.operator.nvidiaNodeFeatureRules", None),
                     "NodeFeatureRule nvidia-kernel-modules: imported present, gpuop's operator input gives (absent)"),
    "openshift-mig": (lambda s: _set(_pool(s, "h100-3g"), "mig.layout", {"3g.40gb": 1}),
                      "ConfigMap h100-mig-configs data.[\"config.yaml\"].mig-configs.h100-3g"),
    "operator-deployment": (lambda s: _set(s, "delivery.operator.operatorValues.logging", None),
                            "Deployment gpu-operator/gpu-operator spec.template.spec.containers[gpu-operator].args[2]: "
                            "imported --zap-log-level=debug, gpuop's operator input gives --zap-log-level=info"),
    "private-registry": (lambda s: _set(s, "images.pullSecrets", ["other-pull"]),
                         "ClusterPolicy spec.driver.imagePullSecrets"),
    "proxy": (lambda s: _set(s, "proxy.httpProxy", "http://proxy2.corp.example:3128"),
              "ClusterPolicy spec.driver.env"),
    "rke2": (lambda s: _set(s, "platform.distribution", "k3s"), "ClusterPolicy spec.toolkit.env"),
}


def test_the_fleet_has_at_least_12_installs_each_with_a_deliberate_change():
    assert len(CASES) >= 12
    assert set(CHANGES) == set(CASES)
    for f in FLEET.glob("*.yaml"):
        assert f.read_text().startswith("# "), f


@pytest.mark.slow
@pytest.mark.parametrize("case", CASES)
def test_an_adopted_install_checks_clean_and_a_hand_edit_is_reported(case, tmp_path):
    live = [str(p) for p in sorted(FLEET.glob(f"{case}.*.yaml"))]
    (tmp_path / "profiles").mkdir()
    out = tmp_path / "profiles" / f"{case}.yaml"
    proc = run_gpuop("import", *live, "-o", str(out), "--check", "--chart", str(CHART), cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.rstrip().endswith("0 difference(s); the profile keeps the cluster as it is"), proc.stdout
    assert "cannot be expressed" not in out.read_text()
    # the written profile, re-checked as it is
    proc = run_gpuop("import", *live, "--check", "--profile", str(out), "--chart", str(CHART), cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    edit, expected = CHANGES[case]
    doc = yaml.safe_load(out.read_text())
    edit(doc["spec"])
    out.write_text(yaml.safe_dump(doc, sort_keys=False))
    proc = run_gpuop("import", *live, "--check", "--profile", str(out), "--chart", str(CHART), cwd=tmp_path)
    assert proc.returncode == 3, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    hit = [line for line in lines if expected in line]
    assert hit, proc.stdout
    # located: the input file the difference is read from, with line and column where the input sets it
    assert all(line.split(":", 1)[0] in {Path(p).name for p in live} or line.startswith(tuple(live))
               for line in hit), hit
    assert lines[-1].startswith("gpuop import --check: ") and "difference(s)" in lines[-1]


# installs whose operands NVIDIA's operator code renders in the fleet test (each run renders both sides)
OPERAND_CASES = ("h100-two-mig", "openshift-mig", "proxy")


@pytest.mark.slow
@pytest.mark.parametrize("case", OPERAND_CASES)
def test_nvidia_s_operator_creates_the_same_operands_from_the_adopted_profile(case, tmp_path):
    render = tool("nvidia-operator")
    live = [str(p) for p in sorted(FLEET.glob(f"{case}.*.yaml"))]
    proc = run_gpuop("import", *live, "--check", "--chart", str(CHART), "--operator-renderer", str(render),
                     cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.rstrip().endswith("0 difference(s) in the chart's objects and NVIDIA's operands; the profile "
                                         "keeps the cluster as it is"), proc.stdout


@pytest.mark.slow
def test_a_proxy_edit_reaches_the_operands_as_located_differences(tmp_path):
    render = tool("nvidia-operator")
    live = str(FLEET / "proxy.values.yaml")
    (tmp_path / "profiles").mkdir()
    out = tmp_path / "profiles" / "p.yaml"
    assert run_gpuop("import", live, "-o", str(out), cwd=tmp_path).returncode == 0
    out.write_text(out.read_text().replace("http://proxy.corp.example:3128", "http://proxy2.corp.example:3128"))
    proc = run_gpuop("import", live, "--check", "--profile", str(out), "--chart", str(CHART),
                     "--operator-renderer", str(render), cwd=tmp_path)
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert (f"{live}: operand DaemonSet gpu-operator/nvidia-driver-daemonset spec.template.spec.containers"
            "[nvidia-driver-ctr].env[HTTP_PROXY].value: imported http://proxy.corp.example:3128, gpuop's operator "
            "input gives http://proxy2.corp.example:3128") in proc.stdout.splitlines()
