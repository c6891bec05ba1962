"""A newcomer adopting a running GPU Operator: several configs for one GPU model (two mig-parted layouts for
H100, two time-slicing configs for L40S, chosen per node by label) import as pools that compile and keep the
cluster; a hand-edited profile is re-checked with `--check --profile`, its errors located in that file; a chart
whose template fails is a located exit 2; import never writes a profile gpuop refuses; the exit codes are the
ones `import --help` documents."""

from __future__ import annotations

import shutil

import pytest
import yaml

from conftest import REFS, REPO, run_gpuop

DATA = REPO / "tests" / "data" / "import-scenarios"
CHART = REFS / "gpu-operator" / "chart"


def live(case: str) -> list[str]:
    return [str(p) for p in sorted(DATA.glob(f"{case}.*.yaml"))]


@pytest.mark.slow
@pytest.mark.parametrize("case, label, pools", [
    ("h100-two-mig", "nvidia.com/mig.config", {"h100-balanced", "h100-small"}),
    ("l40s-two-time-slicing", "nvidia.com/device-plugin.config", {"l40s-x2", "l40s-x4"}),
])
def test_several_configs_for_one_gpu_model_become_pools_the_nodes_label_themselves(case, label, pools, tmp_path):
    (tmp_path / "profiles").mkdir()
    out = tmp_path / "profiles" / "p.yaml"
    proc = run_gpuop("import", *live(case), "-o", str(out), "--check", "--chart", str(CHART), cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.rstrip().endswith("the profile keeps the cluster as it is")
    spec = yaml.safe_load(out.read_text())["spec"]
    by_name = {p["name"]: p for p in spec["nodePools"]}
    assert pools <= set(by_name)
    # no NodeFeatureRule of gpuop's: it would label every node of the model with one config
    assert spec["nfd"]["rules"] is False
    labelled = [n for n in pools if by_name[n].get("labelsFrom") == "user"]
    assert labelled and f"carry {label}=" in out.read_text()


@pytest.mark.slow
def test_a_hand_edited_profile_is_rechecked_and_its_errors_are_located_in_it(tmp_path):
    (tmp_path / "profiles").mkdir()
    out = tmp_path / "profiles" / "p.yaml"
    proc = run_gpuop("import", *live("h100-two-mig"), "-o", str(out), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    text = out.read_text()
    lines = text.splitlines()
    at = next(i for i, line in enumerate(lines) if line.strip() == "1g.10gb: 7")
    lines[at] = lines[at].replace("7", "9")
    out.write_text("\n".join(lines) + "\n")
    proc = run_gpuop("import", *live("h100-two-mig"), "--check", "--profile", str(out), "--chart", str(CHART),
                     cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    # the layout the edit broke, in the edited file (line `at` holds `layout:`, above the edited count)
    assert lines[at - 1].strip() == "layout:"
    assert proc.stderr == (f"profiles/p.yaml:{at}:9: spec.nodePools[1].mig.layout: 1g.10gb x9 exceeds max 7 on "
                           "H100-SXM5-80GB\ngpuop: 1 error; nothing written\n")
    # fixed by hand: the check passes again, on that file
    out.write_text(text)
    proc = run_gpuop("import", *live("h100-two-mig"), "--check", "--profile", str(out), "--chart", str(CHART),
                     cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.slow
def test_import_never_writes_a_profile_gpuop_refuses(tmp_path):
    (tmp_path / "profiles").mkdir()
    out = tmp_path / "profiles" / "p.yaml"
    proc = run_gpuop("import", *live("no-gpu-holds-it"), "-o", str(out), cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert not out.exists()
    printed = proc.stdout.splitlines()
    first = proc.stderr.splitlines()[0]
    assert first.startswith("<stdout>:"), proc.stderr
    line, col = (int(x) for x in first.split(":")[1:3])
    # the line and column of the printed profile: the layout no GPU holds
    assert printed[line - 1][col - 1:] == "layout:" and printed[line].strip() == "1g.10gb: 9", printed
    assert "the imported profile does not compile: 1g.10gb x9 exceeds max 7" in first
    assert proc.stderr.rstrip().endswith("gpuop: 1 error; nothing written")


@pytest.mark.slow
def test_a_chart_template_that_fails_is_a_located_exit_2_with_helm_s_message(tmp_path):
    chart = tmp_path / "gpu-operator"
    shutil.copytree(CHART, chart)
    (chart / "templates" / "zz-site.yaml").write_text('{{ fail "site policy: set operator.nodeSelector" }}\n')
    proc = run_gpuop("import", *live("l40s-two-time-slicing"), "--check", "--chart", str(chart), cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stderr.splitlines()[0] == (
        f"{chart}/templates/zz-site.yaml:1:3: NVIDIA's chart does not render: execution error at "
        "(gpu-operator/templates/zz-site.yaml:1:3): site policy: set operator.nodeSelector")
    assert "internal error" not in proc.stderr


def test_import_help_documents_the_exit_codes():
    proc = run_gpuop("import", "--help", cwd=REPO)
    assert proc.returncode == 0
    text = " ".join(proc.stdout.split())
    assert "Exit codes: 0 a profile written (or, with --check, nothing differs); 2 bad input" in text
    assert "3 with --check, differences found; 1 only for a bug in gpuop." in text
    assert "(exit 0: none, 3: some)" in text
    readme = " ".join((REPO / "README.md").read_text().split())
    assert "gpuop import FILE... [-o OUT] [--check [--profile FILE]]" in readme


@pytest.mark.slow
def test_an_olm_subscription_is_kept_and_another_channel_is_a_located_difference(tmp_path):
    fleet = REPO / "tests" / "data" / "import-fleet"
    policy = [str(p) for p in sorted(fleet.glob("openshift-mig.*.yaml")) if "subscription" not in p.name]
    sub = (fleet / "openshift-mig.subscription.yaml").read_text()
    proc = run_gpuop("import", *policy, str(fleet / "openshift-mig.subscription.yaml"), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    op = yaml.safe_load(proc.stdout)["spec"]["delivery"]["operator"]
    assert op["install"] == "olm" and op["installPlanApproval"] == "Automatic"
    other = tmp_path / "sub.yaml"
    other.write_text(sub.replace("channel: v26.7", "channel: stable"))
    proc = run_gpuop("import", *policy, str(other), "--check", "--chart", str(CHART), cwd=tmp_path)
    assert proc.returncode == 3, proc.stdout + proc.stderr
    line = next(i for i, t in enumerate(other.read_text().splitlines(), 1) if t.strip() == "channel: stable")
    assert proc.stdout.splitlines() == [
        f"sub.yaml:{line}:3: Subscription nvidia-gpu-operator/gpu-operator-certified spec.channel: imported stable, "
        "gpuop's operator input gives v26.7", "gpuop import --check: 1 difference(s)"]


@pytest.mark.slow
def test_a_configmap_of_the_user_s_own_beside_the_install_is_no_difference(tmp_path):
    values = tmp_path / "values.yaml"
    values.write_text("# the device plugin's sharing configs\ndevicePlugin:\n  config:\n    name: ts\n"
                      "    default: l40s-x2\n")
    cms = tmp_path / "cms.yaml"
    cms.write_text((DATA / "l40s-two-time-slicing.configmaps.yaml").read_text()
                   + "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: team-notes\ndata:\n  a: b\n")
    proc = run_gpuop("import", str(values), str(cms), "--check", "--chart", str(CHART), cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout == "gpuop import --check: 0 difference(s); the profile keeps the cluster as it is\n"


def test_profile_is_for_check_only(tmp_path):
    proc = run_gpuop("import", *live("l40s-two-time-slicing"), "--profile", "p.yaml", cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr == ("--profile: is for --check: the profile to compare with the live install\n"
                           "gpuop: 1 error; nothing written\n")


@pytest.mark.slow
def test_a_stack_mode_profile_is_refused_by_the_check(tmp_path):
    profile = tmp_path / "stack.yaml"
    profile.write_text("apiVersion: gpuop/v1alpha1\nkind: ClusterProfile\nmetadata: {name: s}\nspec:\n"
                       "  platform: {type: kubernetes, version: \"1.33\"}\n  os: ubuntu24.04\n"
                       "  nodePools: [{name: a, gpu: L40S}]\n")
    proc = run_gpuop("import", *live("l40s-two-time-slicing"), "--check", "--profile", str(profile), "--chart",
                     str(CHART), cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stderr == ("stack.yaml:1:1: spec.delivery.mode: must be operator: `gpuop import --check` compares "
                           "what NVIDIA's operator is given\ngpuop: 1 error; nothing written\n")
