"""The impact of a change in operator mode (`spec.delivery.mode: operator`) is the impact of the same change
in stack mode: the same pools, node counts, waves and destructive effects, but for the documented
differences (docs/fleet-insight.md, "Operator mode"), each with the operator's reason.

Both modes of every example profile are compiled in-process (the pipeline `gpuop synth` runs), before and
after each change of a corpus, and their impacts compared; the keep-operator scenario runs through the CLI
(`diff --impact`, `--format json`, plain `diff`, `check`) with its exact output; moves between the modes
and operator version changes are read from real compiled outputs.
"""

from __future__ import annotations

import copy
import json
import math
import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from gpuop.errors import UserError
from gpuop.mig.geometry import attributes, family_of
from gpuop.ops import impact
from gpuop.pipeline.run import CompileOptions, compile_profiles
from gpuop.profile.settings import load_settings
from gpuop.verify.crdschema import CrdValidator

from conftest import CRDS, REPO, run_gpuop

EXAMPLES = sorted(p.stem for p in (REPO / "profiles").glob("[!_]*.yaml"))
BASE = yaml.safe_load((REPO / "profiles" / "_base.yaml").read_text())
NODES = 6          # pools without `nodes:` get this many in both modes, so waves and bounds are compared
# what operator mode refuses, with its reason (docs/operator.md, the operator's run-time rules)
REFUSED = {"full-stack": "spec.daemonsets.nodeAffinity cannot be passed to NVIDIA's operator"}


def _raw(name: str) -> dict:
    return yaml.safe_load((REPO / "profiles" / f"{name}.yaml").read_text())


def _mode(doc: dict, mode: str) -> dict:
    """The profile in one delivery mode, every pool with a node count."""
    doc = copy.deepcopy(doc)
    delivery = doc["spec"].setdefault("delivery", {})
    delivery["mode"] = mode
    if mode == "stack":
        delivery.pop("operator", None)
    for pool in doc["spec"]["nodePools"]:
        pool.setdefault("nodes", NODES)
    return doc


def _driver_on(doc: dict) -> bool:
    return (doc["spec"].get("driver") or {}).get("enabled", True) is not False


def driver_bump(doc: dict) -> dict | None:
    if not _driver_on(doc):
        return None
    version = str((doc["spec"].get("driver") or {}).get("version") or BASE["spec"]["driver"]["version"])
    doc["spec"].setdefault("driver", {})["version"] = "580.173.02" if version.startswith("595") else "595.91.07"
    return doc


def mig_layout(doc: dict) -> dict | None:
    """The first device-plugin MIG pool takes its GPU's smallest plain profile, as many as the GPU holds."""
    for pool in doc["spec"]["nodePools"]:
        if (pool.get("mig") or {}).get("layout") and pool.get("allocation") != "dra":     # claims name its profiles
            family = family_of(pool["gpu"])
            small = min((p for p in family.profiles if not attributes(p.name)), key=lambda p: (p.memory, p.compute))
            if pool["mig"]["layout"] == {small.name: small.max}:
                return None
            pool["mig"]["layout"] = {small.name: small.max}
            pool.pop("sharing", None)          # a replica count per MIG profile names the old profiles
            return doc
    return None


def sharing(doc: dict) -> dict | None:
    """The first device-plugin pool without MIG time-slices its GPUs 2 ways (or one more way than today)."""
    for pool in doc["spec"]["nodePools"]:
        if pool.get("mig") or pool.get("allocation") == "dra":
            continue
        current = (pool.get("sharing") or {}).get("timeSlicing")
        if current is not None and "replicas" in current:
            current["replicas"] += 1
        elif not pool.get("sharing"):
            pool["sharing"] = {"timeSlicing": {"replicas": 2}}
        else:
            continue
        return doc
    return None


def dcgm_exporter_off(doc: dict) -> dict | None:
    exporter = doc["spec"].setdefault("dcgmExporter", {})
    if exporter.get("enabled") is False:
        return None
    exporter["enabled"] = False
    exporter.pop("serviceMonitor", None)
    return doc


def operator_version_pin(doc: dict) -> dict | None:
    """Pinning the version the release ships (v26.7.0) is no change of what runs, in either mode."""
    operator = (doc["spec"].get("delivery") or {}).get("operator") or {}
    if operator.get("version"):
        return None
    doc["spec"].setdefault("delivery", {}).setdefault("operator", {})["version"] = "v26.7.0"
    return doc


CHANGES = {"driver-bump": driver_bump, "mig-layout": mig_layout, "sharing": sharing,
           "dcgm-exporter-off": dcgm_exporter_off, "operator-version-pin": operator_version_pin}


def _cases() -> list:
    out = []
    for name in EXAMPLES:
        if name in REFUSED:
            continue
        for change, fn in CHANGES.items():
            if fn(copy.deepcopy(_raw(name))) is not None:
                out.append(pytest.param(name, change, id=f"{name}-{change}"))
    return out


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    w = tmp_path_factory.mktemp("modes")
    (w / "profiles").mkdir()
    shutil.copy(REPO / "profiles" / "_base.yaml", w / "profiles" / "_base.yaml")
    shutil.copy(REPO / "gpuop.yaml", w / "gpuop.yaml")
    return w


def compiled(project: Path, doc: dict) -> dict:
    """The output tree one profile compiles to (as `gpuop synth` writes it)."""
    path = project / "profiles" / f"{doc['metadata']['name']}.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    cwd = os.getcwd()
    os.chdir(project)            # profiles resolve `extends` inside the profiles tree of the working directory
    try:
        result = compile_profiles([path.relative_to(project)], load_settings(Path("gpuop.yaml")), None,
                                  CompileOptions(reuse=False))
    finally:
        os.chdir(cwd)
    return {k: (v.encode() if isinstance(v, str) else v) for k, v in result.files.items()}


def node_effects(old: dict, new: dict) -> list[impact.Effect]:
    """The effects on the nodes (the delivery objects differ between the modes by design)."""
    # the companion release (operator mode's gpuop-own objects, which stack mode's chart carries) is no node effect
    return [e for e in impact.impact(old, new) if e.kind not in ("nothing", "gitops-deletion", "companion-update")]


def _key(e: impact.Effect) -> tuple:
    return (e.cluster, e.scope, e.pool, e.kind, e.type, e.destructive, e.nodes, e.trigger)


def _policy(doc: dict) -> dict:
    up = (doc["spec"].get("driver") or {}).get("upgradePolicy") or {}
    return {"auto": up.get("autoUpgrade", True), "parallel": up.get("maxParallelUpgrades", 1)}


def operator_waves(doc: dict, e: impact.Effect, managed: int) -> int:
    """NVIDIA's upgrade controller: maxParallelUpgrades nodes at a time (0: all), and no more than
    maxUnavailable (25%, rounded up) of the nodes its driver runs on."""
    parallel = _policy(doc)["parallel"] or managed
    return math.ceil(e.nodes / max(1, min(parallel, math.ceil(managed * 25 / 100))))


def managed_nodes(doc: dict, pool: str) -> int:
    """The nodes of the pools that run the same driver as `pool` (one NVIDIADriver CR, or the ClusterPolicy)."""
    spec = doc["spec"]
    cluster = str((spec.get("driver") or {}).get("version") or BASE["spec"]["driver"]["version"])
    version = {p["name"]: str((p.get("driver") or {}).get("version") or cluster) for p in spec["nodePools"]}
    return sum(p["nodes"] if isinstance(p["nodes"], int) else p["nodes"]["max"] for p in spec["nodePools"]
               if version[p["name"]] == version[pool])


@pytest.mark.parametrize(("name", "change"), _cases())
def test_operator_mode_impact_names_the_stack_modes_nodes_waves_and_destructive_effects(project, name, change):
    raw = _raw(name)
    impacts = {}
    docs = {}
    for mode in ("stack", "operator"):
        before = _mode(raw, mode)
        after = CHANGES[change](copy.deepcopy(before))
        docs[mode] = after
        impacts[mode] = node_effects(compiled(project, before), compiled(project, after))
    stack, operator = impacts["stack"], impacts["operator"]
    assert sorted(map(_key, stack)) == sorted(map(_key, operator))
    assert [e.destructive for e in impact.ordered(stack)] == [e.destructive for e in impact.ordered(operator)]
    by_key = {(_key(e)): e for e in operator}
    for s in stack:
        o = by_key[_key(s)]
        if s.kind == "driver-reinstall" and s.waves is not None and o.trigger == "merge" and "replaced by" not in s.text:
            # documented difference: the upgrade controller also caps by maxUnavailable (25% of its nodes)
            assert o.waves == operator_waves(docs["operator"], o, managed_nodes(docs["operator"], o.pool))
            assert "by the operator's upgrade controller" in o.text
        else:
            assert (o.waves, o.per_node_seconds, o.bound_seconds) == (s.waves, s.per_node_seconds, s.bound_seconds)
    if change == "operator-version-pin":
        assert stack == [] and operator == []
    if change in ("driver-bump", "mig-layout"):
        assert operator and all(e.destructive for e in operator if e.kind in ("driver-reinstall", "mig-reconfigure"))


def test_every_example_is_in_the_comparison_or_refused_in_operator_mode_with_its_reason(project):
    for name in EXAMPLES:
        doc = _mode(_raw(name), "operator")
        if name not in REFUSED:
            assert compiled(project, doc)
            continue
        with pytest.raises(UserError) as err:
            compiled(project, doc)
        assert REFUSED[name] in str(err.value)


# ---- the keep-operator scenario, through the CLI -----------------------------------------------------

KEEP = "profiles/keep-operator.yaml"
EXPECTED = (
    "!! 3 destructive effect(s): GPU workloads are interrupted\n"
    "cluster keep-operator:\n"
    "  !! pool infer: driver moves from the DaemonSet of NVIDIADriver driver-595.91.07 to that of ClusterPolicy "
    "cluster-policy (the operator deletes the old one with its owner): driver reinstall on every node of the pool "
    "at once, no update strategy or upgrade policy paces a new DaemonSet; GPU pods evicted by the driver manager, "
    "6 node(s) in 1 wave, up to 21m (startup probe)\n"
    "  !! pool train: driver moves from the DaemonSet of NVIDIADriver default to that of ClusterPolicy "
    "cluster-policy (the operator deletes the old one with its owner): driver reinstall (580.173.02-ubuntu24.04 -> "
    "595.91.07-ubuntu24.04) on every node of the pool at once, no update strategy or upgrade policy paces a new "
    "DaemonSet; GPU pods evicted by the driver manager, 8 node(s) in 1 wave, up to 21m (startup probe)\n"
    "  !! pool train: MIG reconfiguration (1x3g.40gb_1x2g.20gb_2x1g.10gb -> 7x1g.10gb): the MIG manager evicts "
    "the GPU pods on the pool's nodes and repartitions every GPU; the pool's GPUs are unavailable until it is done "
    "(8 node(s), 1 wave(s), no time bound: mig-parted has no timeout)\n"
    "     cluster: gpuop's own objects beside NVIDIA's operator change (dashboards, gpu-alerts, health-gate): the companion release "
    "keep-operator-gpuop-addons upgrades; nothing on the nodes\n")
GIT_ENV = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@example.com", "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, env={**os.environ, **GIT_ENV}, capture_output=True, text=True,
                          check=True).stdout


@pytest.fixture
def keep(tmp_path) -> Path:
    """A project of the keep-operator example, compiled and committed."""
    (tmp_path / "profiles").mkdir()
    for f in ("_base.yaml", "keep-operator.yaml"):
        shutil.copy(REPO / "profiles" / f, tmp_path / "profiles" / f)
    shutil.copy(REPO / "gpuop.yaml", tmp_path / "gpuop.yaml")
    run_gpuop("synth", "--no-cache", cwd=tmp_path, check=True)
    git(tmp_path, "init", "-q", "-b", "main")
    git(tmp_path, "add", "-A")
    git(tmp_path, "commit", "-q", "-m", "keep-operator")
    return tmp_path


def edit(project: Path, old: str, new: str, path: str = KEEP) -> None:
    f = project / path
    text = f.read_text()
    assert old in text
    f.write_text(text.replace(old, new))


def driver_and_mig(project: Path) -> None:
    edit(project, 'version: "580.173.02", upgradePolicy', 'version: "595.91.07", upgradePolicy')
    edit(project, 'layout: {"3g.40gb": 1, "2g.20gb": 1, "1g.10gb": 2}', 'layout: {"1g.10gb": 7}')


def test_keep_operator_driver_bump_and_mig_layout_are_destructive_in_every_view(keep):
    driver_and_mig(keep)
    proc = run_gpuop("diff", "--impact", "--exit-code", cwd=keep)
    assert (proc.returncode, proc.stdout) == (3, EXPECTED), proc.stderr
    proc = run_gpuop("diff", "--impact", "--exit-code", "--format", "json", cwd=keep)
    assert proc.returncode == 3, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["destructive"] == 3
    assert [(e["pool"], e["type"], e["destructive"], e["nodes"], e["waves"]) for e in doc["effects"]] == [
        ("infer", "driver-reinstall", True, 6, 1), ("train", "driver-reinstall", True, 8, 1),
        ("train", "mig-repartition", True, 8, 1), (None, "companion", False, None, None)]
    proc = run_gpuop("diff", "--exit-code", cwd=keep)            # plain diff: the destructive effects first
    assert proc.returncode == 3, proc.stderr
    assert proc.stdout.startswith("DESTRUCTIVE: 3 effect(s) interrupt GPU workloads"), proc.stdout[:400]
    # the review gate: the committed change, compiled and reviewed, names the same effects
    run_gpuop("synth", cwd=keep, check=True)
    git(keep, "add", "-A")
    git(keep, "commit", "-q", "-m", "driver 595, 7x1g.10gb")
    proc = run_gpuop("check", "--against", "HEAD~1", cwd=keep)
    assert proc.returncode == 0, proc.stderr
    assert EXPECTED in proc.stdout


def test_keep_operator_default_driver_bump_rolls_through_the_operators_upgrade_controller(keep):
    # the train pool runs the cluster's driver (the `default` NVIDIADriver, kept by name): NVIDIA's upgrade
    # controller paces it, 2 nodes at a time (maxParallelUpgrades; 25% of 8 nodes is 2 too), each node's GPU pod
    # deletion and drain bounded by the profile's timeoutSeconds (600 s each) and the startup probe (21 min)
    edit(keep, 'version: "580.173.02", upgradePolicy', 'version: "610.57.04", upgradePolicy')
    proc = run_gpuop("diff", "--impact", "--exit-code", cwd=keep)
    assert (proc.returncode, proc.stdout) == (3, (
        "!! 1 destructive effect(s): GPU workloads are interrupted\n"
        "cluster keep-operator:\n"
        "  !! pool train: driver upgrade (580.173.02-ubuntu24.04 -> 610.57.04-ubuntu24.04) by the operator's upgrade "
        "controller: node cordoned, GPU pods deleted (up to 10m), node drained (up to 10m), 2 node(s) at a time "
        "(maxParallelUpgrades), at most 25% of its 8 node(s) unavailable, 8 node(s) -> 4 wave(s) of 2, each up to "
        "41m (pod deletion, drain, startup probe); up to 2h44m in all\n")), proc.stderr


def test_a_pool_driver_named_by_version_moves_to_a_new_nvidiadriver_at_once(keep):
    # gpuop names a pool's NVIDIADriver CR after its driver (driver-<version>): a new version is a new CR, whose
    # DaemonSet replaces the old one on every node of the pool together; the impact says so
    edit(keep, 'driver: {version: "595.91.07"}', 'driver: {version: "610.43.02"}')
    proc = run_gpuop("diff", "--impact", "--exit-code", "--format", "json", cwd=keep)
    assert proc.returncode == 3, proc.stderr
    (effect,) = json.loads(proc.stdout)["effects"]
    assert (effect["pool"], effect["type"], effect["destructive"], effect["nodes"], effect["waves"]) == (
        "infer", "driver-reinstall", True, 6, 1)
    assert effect["objects"][:2] == ["NVIDIADriver driver-595.91.07", "NVIDIADriver driver-610.43.02"]


# ---- a pinned operator version: compiled with its own catalog data, or refused ----------------------

def test_a_pinned_operator_version_of_another_release_is_refused_located(keep):
    edit(keep, "operator: {version: v26.7.0, install: helm}", "operator: {version: v26.3.3, install: helm}")
    before = git(keep, "status", "--porcelain", "--", "dist")
    proc = run_gpuop("synth", cwd=keep)
    assert (proc.returncode, proc.stdout) == (2, "")
    assert proc.stderr == (
        'profiles/keep-operator.yaml:18:16: spec.delivery.operator.version: Unsupported value: "v26.3.3": stack '
        "release 26.7 (spec.release) ships the operands of GPU Operator v26.7.0, not v26.3.3; pin the release that "
        "ships v26.3.3 or drop spec.delivery.operator.version\n"
        "profiles/keep-operator.yaml:19:35: spec.driver.upgradePolicy: GPU Operator v26.3.3 does not have the setting "
        "nvidiaDriverUpgradePolicy (catalog/data/operator.yaml); use a newer spec.delivery.operator.version or drop "
        "it\n"
        "gpuop: 2 errors; nothing written\n")
    assert git(keep, "status", "--porcelain", "--", "dist") == before


def _retag(tree: dict, cluster: str, version: str) -> dict:
    """The output as a gpuop that compiled `version` left it: index.json names that operator version."""
    tree = dict(tree)
    index = json.loads(tree["index.json"])
    for entry in index["clusters"]:
        if entry["name"] == cluster:
            entry["operator"]["version"] = version
    tree["index.json"] = json.dumps(index).encode()
    return tree


def test_an_operator_version_change_rolls_every_operand_and_keeps_the_loaded_drivers(project):
    doc = _mode(_raw("keep-operator"), "operator")
    new = compiled(project, doc)
    old = _retag(new, "keep-operator", "v26.3.3")          # an output of v26.3.3, now compiled for v26.7.0
    effects = impact.ordered(node_effects(old, new))
    assert not any(e.destructive for e in effects)
    assert effects[0].line() == (
        "cluster: GPU Operator v26.3.3 -> v26.7.0: the operator is replaced, its CRDs upgraded by the chart's "
        "pre-upgrade hook, and every operand DaemonSet of the ClusterPolicy rolls (the chart's helm.sh/chart label "
        "is on each one's pod template; NVIDIADriver CRs' driver DaemonSets do not carry it)")
    # keep-operator's drivers are NVIDIADriver CRs' (two drivers): their pods do not restart; the MIG manager's do,
    # and it leaves the applied MIG config as it is
    kinds = sorted((e.scope, e.kind, e.objects[0].rpartition("/")[2]) for e in effects[1:])
    assert kinds == [("all GPU nodes", "device-plugin-restart", "nvidia-device-plugin-daemonset"),
                     ("all GPU nodes", "labels-refresh", "gpu-feature-discovery"),
                     ("all GPU nodes", "labels-refresh", "nvidia-operator-validator"),
                     ("all GPU nodes", "metrics-gap", "nvidia-dcgm-exporter"),
                     ("all GPU nodes", "runtime-reconfigure", "nvidia-container-toolkit-daemonset"),
                     # the MIG manager runs on the MIG-capable GPUs' pool only (train's H100s, not infer's L40S)
                     ("pool train", "labels-refresh", "nvidia-mig-manager")], kinds
    assert "labels, annotations or delivery objects only" not in impact.render(impact.impact(old, new))


def test_an_operator_version_change_restarts_the_cluster_policys_driver_pods_without_reinstall(project):
    doc = _mode(_raw("prod-east"), "operator")              # one driver: the ClusterPolicy's
    new = compiled(project, doc)
    effects = node_effects(_retag(new, "prod-east", "v26.3.3"), new)
    drivers = [e for e in effects if e.kind == "driver-restart"]
    assert [(e.pool, e.destructive) for e in drivers] == [("train", False)]
    assert drivers[0].text == (
        "driver pods of nvidia-driver-daemonset restart (GPU Operator v26.3.3 -> v26.7.0) with the same install "
        "config (DRIVER_CONFIG_DIGEST): the driver manager keeps the loaded driver; GPU pods keep running")


# ---- moves between the modes ---------------------------------------------------------------------------

def test_operator_to_stack_says_what_happens_in_order_and_no_mig_or_plugin_change(project):
    raw = _raw("keep-operator")
    old, new = compiled(project, _mode(raw, "operator")), compiled(project, _mode(raw, "stack"))
    effects = impact.ordered(node_effects(old, new))
    assert [(e.kind, e.destructive, e.nodes, e.waves) for e in effects] == [("delivery-switch", True, 14, 1)]
    assert effects[0].text == (
        "delivery operator -> stack: (1) the Application / HelmRelease gpuop-keep-operator switches from NVIDIA's "
        "chart to gpuop's: Argo CD prunes, Flux uninstalls, the old release's objects; (2) the ClusterPolicy goes "
        "with them (NVIDIA's chart marks it helm.sh/resource-policy: keep only with operator.cleanupCRD) and the "
        "garbage collector deletes every operand it owns (ownerReferences) on every GPU node at once: driver, "
        "toolkit, device plugin, GFD, DCGM exporter, MIG manager, validator; gpuop's DaemonSets of the same names, "
        "applied over them, keep the ClusterPolicy's ownerReference and go too; (3) gpuop's stack then starts on "
        "every node at once; its driver manager finds another install config (DRIVER_CONFIG_DIGEST) and reinstalls "
        "the driver: GPU pods evicted on every node; (4) the CRDs stay (operator.cleanupCRD false, Helm never "
        "deletes crds/); set spec.delivery.moveFrom: operator to move without deleting the operands")
    full = impact.impact(old, new)
    assert not [e for e in full if e.kind in ("mig-reconfigure", "plugin-config-switch")]


def test_stack_to_operator_says_what_happens_in_order(project):
    raw = _raw("keep-operator")
    old, new = compiled(project, _mode(raw, "stack")), compiled(project, _mode(raw, "operator"))
    effects = impact.ordered(node_effects(old, new))
    assert [(e.kind, e.destructive, e.nodes, e.waves) for e in effects] == [("delivery-switch", True, 14, 1)]
    assert effects[0].text.startswith(
        "delivery stack -> operator: (1) the Application / HelmRelease gpuop-keep-operator switches from gpuop's "
        "chart to NVIDIA's: Argo CD prunes, Flux uninstalls, gpuop's operands on every GPU node at once; (2) NVIDIA's "
        "operator starts")


# ---- a planned move: the output makes the safe order the only one -------------------------------------

def _app_and_release(tree: dict, cluster: str) -> tuple[dict, dict]:
    app = yaml.safe_load(tree[f"{cluster}/argocd/application.yaml"])
    release = yaml.safe_load(tree[f"{cluster}/flux/helmrelease.yaml"])
    return app, release


@pytest.mark.parametrize(("old", "new"), [("operator", "stack"), ("stack", "operator")])
def test_a_planned_move_prunes_the_old_delivery_last_and_orphans_its_operands(project, old, new):
    raw = _raw("keep-operator")
    moved = _mode(raw, new)
    moved["spec"]["delivery"]["moveFrom"] = old
    before, after, plain = compiled(project, _mode(raw, old)), compiled(project, moved), compiled(project, _mode(raw, new))
    app, release = _app_and_release(after, "keep-operator")
    options = app["spec"]["syncPolicy"]["syncOptions"]
    # Argo CD: the old delivery's objects are pruned after the new ones are synced and healthy, orphaning
    assert options[-2:] == ["PruneLast=true", "PrunePropagationPolicy=orphan"]
    assert app["spec"]["syncPolicy"]["automated"] == {"prune": True, "selfHeal": True}
    # Flux: the old release (another chart and release name) is uninstalled orphaning what it owns
    assert release["spec"]["uninstall"] == {"deletionPropagation": "orphan"}
    # without the move the output is the mode's own
    plain_app, plain_release = _app_and_release(plain, "keep-operator")
    assert "PrunePropagationPolicy=orphan" not in plain_app["spec"]["syncPolicy"]["syncOptions"]
    assert "uninstall" not in plain_release["spec"]
    effects = impact.ordered(node_effects(before, after))
    move = [e for e in effects if e.kind == "delivery-move"]
    assert len(move) == 1 and not move[0].destructive
    assert move[0].text.startswith(f"planned move {old} -> {new}: (1) ")
    # the drivers are replaced at the new delivery's pace (another install config), never all at once
    drivers = [e for e in effects if e.kind == "driver-reinstall"]
    assert sorted((e.pool, e.nodes, e.waves) for e in drivers) == [("infer", 6, 3), ("train", 8, 4)]
    assert all(("upgrade controller" in e.text) == (new == "operator") for e in drivers)
    full = impact.impact(before, after)
    assert not [e for e in full if e.kind in ("mig-reconfigure", "plugin-config-switch", "delivery-switch")]
    assert not [e for e in full if e.kind == "gitops-deletion" and "release replaced" in e.text]


def test_an_unplanned_move_names_the_setting_that_plans_it(project):
    raw = _raw("keep-operator")
    effects = node_effects(compiled(project, _mode(raw, "operator")), compiled(project, _mode(raw, "stack")))
    (switch,) = effects
    assert switch.destructive and switch.text.endswith(
        "; set spec.delivery.moveFrom: operator to move without deleting the operands")


@pytest.mark.parametrize(("old", "new"), [("operator", "stack"), ("stack", "operator")])
def test_a_planned_moves_application_and_helmrelease_validate_against_the_upstream_crds(project, old, new):
    validator = CrdValidator.from_files([CRDS / "argoproj.io_applications.yaml",
                                         CRDS / "helm.toolkit.fluxcd.io_helmreleases.yaml"])
    moved = _mode(_raw("keep-operator"), new)
    moved["spec"]["delivery"]["moveFrom"] = old
    app, release = _app_and_release(compiled(project, moved), "keep-operator")
    assert validator.errors(app) == [] and validator.errors(release) == []
    release["spec"]["uninstall"]["deletionPropagation"] = "cascade"      # not one of Flux's policies
    assert validator.errors(release)


def test_move_from_the_mode_itself_is_refused_located(keep):
    edit(keep, "    mode: operator\n", "    mode: operator\n    moveFrom: operator\n")
    proc = run_gpuop("synth", cwd=keep)
    assert (proc.returncode, proc.stdout) == (2, "")
    assert proc.stderr == (
        "profiles/keep-operator.yaml:16:3: spec.delivery: moveFrom: operator names the mode itself; a move comes "
        "from the other mode, drop moveFrom once the move is done\n"
        "gpuop: 1 error; nothing written\n")
