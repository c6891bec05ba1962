"""Moving a cluster between NVIDIA releases (spec.release; in operator mode with spec.delivery.operator.version) is
previewed like any change, in both modes: the release's images that change, the DaemonSets that roll with their
waves (destructive first), and in operator mode the CRDs, the chart settings removed and the chart defaults
changed (NVIDIA's values.yaml of each tag, catalog/data/operator-chart). A move NVIDIA does not support (a skipped
release: "Upgrades are only supported within a major release or to the next major release.") is refused, located,
with the documented path, by `gpuop diff`, `diff --impact` and `check`."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from gpuop import catalog
from gpuop.ops import impact, moves

import test_operator_impact as toi
from conftest import REPO, run_gpuop
from test_operator_impact import git, project  # noqa: F401 (the compiled-project fixture)

OPERATOR = {"25.10": "v25.10.1", "26.3": "v26.3.3", "26.7": "v26.7.0"}
SUPPORTED = [("25.10", "26.3"), ("26.3", "26.7")]
# operator mode: the nodes carry their MIG config label themselves (v25.10.1's chart has no extraObjects to deliver
# gpuop's NodeFeatureRule: refused otherwise), on every release so a move changes only the release
OWN_LABELS = {"rules": False}


def at(project: Path, mode: str, release: str) -> dict:
    """prod-east (16 H100 nodes, MIG) compiled on `release`."""
    doc = toi._mode(toi._raw("prod-east"), mode)
    doc["spec"]["release"] = release
    if mode == "operator":
        doc["spec"]["delivery"]["operator"] = {"version": OPERATOR[release]}
        doc["spec"]["nfd"] = OWN_LABELS
    return toi.compiled(project, doc)


@pytest.mark.parametrize("mode", ["stack", "operator"])
@pytest.mark.parametrize("old, new", SUPPORTED, ids=lambda r: r)
def test_a_supported_move_names_images_rolls_and_destructive_waves_first(project, mode, old, new):
    effects = impact.ordered(toi.node_effects(at(project, mode, old), at(project, mode, new)))
    # destructive first: the driver DaemonSet's pod template changes (the release's driver manager), so every
    # node of the pool reinstalls the driver, one node per wave
    first = effects[0]
    assert (first.kind, first.destructive, first.pool, first.nodes, first.waves) == (
        "driver-reinstall", True, "train", 16, 16 if mode == "stack" else None) or (
        first.kind, first.destructive, first.pool, first.nodes) == ("driver-reinstall", True, "train", 16)
    assert "16 wave(s)" in first.line()
    assert not any(e.destructive for e in effects[1:])
    (move,) = [e for e in effects if e.kind == "release-move"]
    a, b = catalog.load().release(old), catalog.load().release(new)
    assert move.text.startswith(f"stack release {old} -> {new} (GPU Operator {a.operatorVersion} -> "
                                f"{b.operatorVersion}); release images: ")
    for k in ("toolkit", "devicePlugin", "driverManager", "migManager"):
        assert f"{k} {a.components[k].version} -> {b.components[k].version}" in move.text
    # every operand DaemonSet rolls: the release changes each one's image
    rolled = {e.kind for e in effects}
    assert {"runtime-reconfigure", "device-plugin-restart", "metrics-gap", "labels-refresh"} <= rolled
    if mode == "operator":
        assert "clusterpolicies.nvidia.com schema changed" in move.text
        assert any(e.kind == "operator-upgrade" for e in effects)
    else:
        assert "CRDs" not in move.text and "chart" not in move.text   # gpuop's stack: no NVIDIA chart or CRDs


def test_a_stack_move_names_the_mig_managers_restart_and_nfds_worker_and_rolls_node_by_node(project):
    """What Flux showed on a move (tests/test_gitops_rehearsal.py, the upgrade lane) that the preview did not say:
    the MIG manager's DaemonSet rolls (its image moves; it finds the applied MIG config and keeps it), NFD's worker
    rolls (the release brings its NFD chart), neither touching workloads, and every operand rolls node by node."""
    effects = toi.node_effects(at(project, "stack", "26.3"), at(project, "stack", "26.7"))
    named = {o.rpartition("/")[2]: (e.kind, e.destructive) for e in effects for o in e.objects}
    assert named["nvidia-mig-manager"] == ("labels-refresh", False)
    assert named["node-feature-discovery-worker"] == ("labels-refresh", False)
    (nfd,) = [e for e in effects if "node-feature-discovery-worker" in " ".join(e.objects)]
    assert nfd.objects == ("DaemonSet node-feature-discovery/node-feature-discovery-worker",)
    assert nfd.text.startswith("NFD chart 0.18.3 -> 0.19.0: the NFD worker restarts on every node, before the GPU "
                               "stack's release (dependsOn)")
    # the operands' DaemonSets set no update strategy: Kubernetes rolls them one node at a time (RollingUpdate,
    # maxUnavailable 1 by default), so each restart takes as many waves as it has nodes
    restarts = [e for e in effects if e.kind in ("runtime-reconfigure", "device-plugin-restart", "metrics-gap")]
    assert restarts and {(e.nodes, e.waves) for e in restarts} == {(16, 16)}
    # a change that leaves NFD's release as it is names no NFD effect
    same = at(project, "stack", "26.7")
    assert not [e for e in toi.node_effects(same, same) if "NFD" in e.text]


def test_operand_restarts_roll_over_the_nodes_each_daemonset_selects(project):
    """mig-sharing (train 6 H100, MIG; infer 10 L40S, time-slicing; batch 4 A100, MPS) moved 26.3 -> 26.7: the MIG
    manager restarts on the MIG-capable GPUs' pools only (the NodeFeatureRule's mig-capable device ids: H100 and
    A100, not L40S), the MPS control daemon on the MPS pool only (GFD's nvidia.com/mps.capable, from the pool's
    plugin config), the other operands on all 20 GPU nodes; one node per wave (no update strategy)."""
    def at_release(release: str) -> dict:
        doc = toi._raw("mig-sharing")
        doc["spec"]["release"] = release
        return toi.compiled(project, doc)

    effects = toi.node_effects(at_release("26.3"), at_release("26.7"))
    where = {o.rpartition("/")[2]: (e.scope, e.pool, e.nodes, e.waves) for e in effects for o in e.objects
             if o.startswith("DaemonSet gpu-operator/") and "driver" not in o}
    assert where.pop("nvidia-mig-manager") == ("pools train, batch", None, 10, 10)
    assert where.pop("nvidia-device-plugin-mps-control-daemon") == ("pool batch", "batch", 4, 4)
    assert where and set(where.values()) == {("all GPU nodes", None, 20, 20)}, where


def test_the_move_to_26_7_adds_the_crds_and_names_the_changed_servicemonitor_default(project):
    effects = toi.node_effects(at(project, "operator", "26.3"), at(project, "operator", "26.7"))
    (move,) = [e for e in effects if e.kind == "release-move"]
    assert ("CRDs (upgraded by the chart's pre-upgrade hook, operator.upgradeCRD): computedomaincliques.resource."
            "nvidia.com added, computedomains.resource.nvidia.com added, gpuclusters.nvidia.com added, "
            "clusterpolicies.nvidia.com schema changed, nvidiadrivers.nvidia.com schema changed") in move.text
    assert move.text.endswith("chart defaults changed: dcgmExporter.serviceMonitor.enabled: false -> true")


def test_the_move_to_26_3_names_the_chart_settings_it_removes(project):
    effects = toi.node_effects(at(project, "operator", "25.10"), at(project, "operator", "26.3"))
    (move,) = [e for e in effects if e.kind == "release-move"]
    assert "chart settings removed: ccManager.env, kataManager.config.artifactsDir" in move.text
    assert "operator.initContainer.image" in move.text
    assert 'chart defaults changed: ccManager.defaultMode: "off" -> "on", ccManager.enabled: false -> true' in move.text


def test_a_driver_kept_across_an_operator_move_below_26_7_is_drained_not_restarted_in_place(project):
    """Before v26.7.0 the upgrade controller evicts and drains for any pod-template change (26.7.0 release notes,
    PR #2527): an operator move to 26.3 whose driver DaemonSet only changes its chart label is destructive."""
    new = at(project, "operator", "26.3")
    effects = toi.node_effects(toi._retag(new, "prod-east", "v25.10.1"), new)
    drivers = [e for e in effects if e.pool == "train" and e.kind.startswith("driver")]
    assert [(e.kind, e.destructive) for e in drivers] == [("driver-reinstall", True)]
    assert "before GPU Operator v26.7.0 (release notes 26.7.0, PR #2527)" in drivers[0].text
    newer = at(project, "operator", "26.7")
    kept = [e for e in toi.node_effects(toi._retag(newer, "prod-east", "v26.3.3"), newer) if e.kind == "driver-restart"]
    assert [(e.pool, e.destructive) for e in kept] == [("train", False)]


@pytest.mark.fast
def test_the_catalog_refuses_exactly_the_skipping_moves():
    cat = catalog.load()
    assert [(a, b) for a in OPERATOR for b in OPERATOR if cat.unsupported_move(a, b)] == [("25.10", "26.7")]
    assert cat.unsupported_move("25.10", "26.7") == (
        "moving from release 25.10 to 26.7 skips 26.3: NVIDIA supports upgrades only within a major release or to "
        "the next one (NVIDIA/cloud-native-docs 52dcb7b8 gpu-operator/life-cycle-policy.rst); move through each: "
        "25.10 -> 26.3 -> 26.7")


@pytest.fixture
def on_25_10(tmp_path) -> Path:
    """prod-east on release 25.10 in both modes, compiled and committed."""
    return _committed_on(tmp_path, "25.10")


def _committed_on(tmp_path: Path, release: str) -> Path:
    """prod-east on `release` in both modes (east-stack, east-operator), compiled and committed on branch main."""
    (tmp_path / "profiles").mkdir()
    shutil.copy(REPO / "profiles" / "_base.yaml", tmp_path / "profiles" / "_base.yaml")
    shutil.copy(REPO / "gpuop.yaml", tmp_path / "gpuop.yaml")
    for mode in ("stack", "operator"):
        doc = yaml.safe_load((REPO / "profiles" / "prod-east.yaml").read_text())
        doc["metadata"]["name"] = f"east-{mode}"
        spec = doc["spec"]
        doc["spec"] = {"release": release, "delivery": {"mode": mode}, **spec}
        if mode == "operator":
            doc["spec"]["delivery"]["operator"] = {"version": OPERATOR[release]}
            doc["spec"]["nfd"] = OWN_LABELS
        (tmp_path / "profiles" / f"east-{mode}.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    run_gpuop("synth", "--no-cache", cwd=tmp_path, check=True)
    git(tmp_path, "init", "-q", "-b", "main")
    git(tmp_path, "add", "-A")
    git(tmp_path, "commit", "-q", "-m", release)
    return tmp_path


def _move(project: Path, old: str, new: str) -> None:
    """Both profiles moved from release `old` to `new` (spec.release; operator mode: the operator's version too)."""
    for mode in ("stack", "operator"):
        f = project / "profiles" / f"east-{mode}.yaml"
        f.write_text(f.read_text().replace(f"release: '{old}'", f"release: '{new}'").replace(
            f"version: {OPERATOR[old]}", f"version: {OPERATOR[new]}"))


@pytest.mark.slow
@pytest.mark.parametrize("old, new", SUPPORTED, ids=lambda r: r)
def test_a_supported_move_is_previewed_in_both_modes_by_diff_impact_and_by_the_review_gate(tmp_path, old, new):
    project = _committed_on(tmp_path, old)
    _move(project, old, new)
    a, b = OPERATOR[old], OPERATOR[new]
    moved = f"stack release {old} -> {new} (GPU Operator {a} -> {b})"
    preview = run_gpuop("diff", "--impact", "--exit-code", cwd=project)
    assert preview.returncode == 3, preview.stderr
    # the review gate reads the change as pushed: profiles and output committed on a branch
    run_gpuop("synth", cwd=project, check=True)
    git(project, "checkout", "-q", "-b", "move")
    git(project, "commit", "-qam", f"move to {new}")
    gate = run_gpuop("check", "--against", "main", cwd=project)
    assert gate.returncode == 0, gate.stderr
    for out in (preview.stdout, gate.stdout):
        # destructive first: each mode's 16 train nodes reinstall their driver, one node per wave
        head = "!! 2 destructive effect(s): GPU workloads are interrupted\n"
        assert head in out, out
        lines = out[out.index(head):].splitlines()
        assert [lines[1], lines[3]] == ["cluster east-operator:", "cluster east-stack:"], out
        for line in (lines[2], lines[4]):
            assert line.startswith("  !! pool train: driver ") and "16 node(s) -> 16 wave(s)" in line, out
        assert not any("!!" in line for line in lines[5:]), out          # the rest interrupts no workload
        assert out.count(moved) == 2, out                                # east-stack and east-operator
        assert "clusterpolicies.nvidia.com schema changed" in out, out   # operator mode's CRDs
        for rolled in ("container runtime reconfiguration", "device plugin restarts", "MIG manager restarts"):
            assert out.count(f"all GPU nodes: {rolled}") == 2, out


def _skip_to_26_7(project: Path) -> None:
    for mode in ("stack", "operator"):
        f = project / "profiles" / f"east-{mode}.yaml"
        text = f.read_text().replace("release: '25.10'", "release: '26.7'").replace("version: v25.10.1",
                                                                                    "version: v26.7.0")
        f.write_text(text)


REFUSED = (
    "profiles/east-operator.yaml:10:3: spec.release: Forbidden: moving from release 25.10 to 26.7 skips 26.3: NVIDIA "
    "supports upgrades only within a major release or to the next one (NVIDIA/cloud-native-docs 52dcb7b8 "
    "gpu-operator/life-cycle-policy.rst); move through each: 25.10 -> 26.3 -> 26.7\n"
    "profiles/east-stack.yaml:10:3: spec.release: Forbidden: moving from release 25.10 to 26.7 skips 26.3: NVIDIA "
    "supports upgrades only within a major release or to the next one (NVIDIA/cloud-native-docs 52dcb7b8 "
    "gpu-operator/life-cycle-policy.rst); move through each: 25.10 -> 26.3 -> 26.7\n"
    "gpuop: 2 errors; nothing written\n")


@pytest.mark.parametrize("command", [("diff", "--impact"), ("diff",), ("check", "--against", "main")],
                         ids=lambda c: " ".join(c))
def test_a_skipped_release_is_refused_located_with_the_documented_path_in_both_modes(on_25_10, command):
    _skip_to_26_7(on_25_10)
    if command[0] == "check":          # the review gate reads the change as pushed: profiles and output committed
        run_gpuop("synth", cwd=on_25_10, check=True)
        git(on_25_10, "checkout", "-q", "-b", "skip")
        git(on_25_10, "commit", "-qam", "skip a release")
    proc = run_gpuop(*command, cwd=on_25_10)
    assert (proc.returncode, proc.stdout) == (2, "")
    assert proc.stderr.endswith(REFUSED), proc.stderr


def test_the_documented_path_one_release_at_a_time_is_previewed(on_25_10):
    for mode in ("stack", "operator"):
        f = on_25_10 / "profiles" / f"east-{mode}.yaml"
        f.write_text(f.read_text().replace("release: '25.10'", "release: '26.3'").replace("version: v25.10.1",
                                                                                          "version: v26.3.3"))
    proc = run_gpuop("diff", "--impact", "--exit-code", cwd=on_25_10)
    assert proc.returncode == 3, proc.stderr
    assert proc.stdout.startswith("!! 2 destructive effect(s): GPU workloads are interrupted\n")
    assert proc.stdout.count("stack release 25.10 -> 26.3 (GPU Operator v25.10.1 -> v26.3.3)") == 2


@pytest.mark.fast
def test_refusals_read_the_releases_of_both_outputs():
    def tree(release):
        return {"index.json": json.dumps({"clusters": [{"name": "c", "stackRelease": release}]}).encode()}
    assert moves.refusals(tree("25.10"), tree("26.7"))[0][0] == "c"
    assert moves.refusals(tree("25.10"), tree("26.3")) == []
    assert moves.refusals(tree("26.7"), tree("25.10")) == []           # a downgrade: no documented rule
