"""Operator mode, proven against NVIDIA's own code: for every example profile that can run in operator mode and
a corpus of profiles (tests/data/operator-corpus: every setting the mapping table covers, each platform), the
profile compiled in operator mode -> NVIDIA's chart (Helm 4's engine) with gpuop's values -> the CRDs'
structural defaults -> NVIDIA's GPU Operator controller code of the profile's release (v26.7.0: the shared
../shared/tools/nvidia-operator; v26.3.3 and v25.10.1: the same tool built at their tags by
tools/nvidia-operator/build_release.py, `od.oracle`) gives
DaemonSets equal to gpuop's static stack for the same profile on every node-visible field (images, containers,
command/args, env, volumes and mounts, security context, host namespaces, tolerations, placement, runtimeClass,
probes, resources), except the differences in ALLOWED, each with its reason. Every case runs once per stack
release gpuop has (RELEASES), the profile pinned to it.

Placement is compared as the nodes each DaemonSet runs on (one node per pool, labelled as NVIDIA's operator
labels it): the two sides express it their own way (gpuop's stack with its opt-out labels and pool selectors,
the operator with its node labels and NVIDIADriver ownership).
"""

from __future__ import annotations

import copy
import os
import re
import shutil
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pytest
import yaml

from gpuop import catalog
from gpuop.catalog import operator as operator_catalog
from gpuop.errors import UserError
from gpuop.pipeline.run import plan_all
from gpuop.profile.load import load_profile
from gpuop.validate.runner import validate

import operator_differential as od
from conftest import REPO, tool

CORPUS = REPO / "tests" / "data" / "operator-corpus"
# example profiles that cannot run in operator mode, and why (each is refused with a located error)
NOT_OPERATOR = {
    "full-stack": "operand placement (spec.daemonsets.nodeSelector / nodeAffinity) and a node status exporter "
                  "ServiceMonitor, for which the ClusterPolicy has no field",
}


@dataclass(frozen=True)
class Allowed:
    id: str
    daemonset: str                   # regex on the paired DaemonSet key
    path: str                        # regex on the node-view field path
    when: Callable                   # (ours value, theirs value, case) -> bool
    reason: str


ALLOWED = (
    Allowed("config-digest", r".*", r".*\.env\.DRIVER_CONFIG_DIGEST$", lambda a, b, c: a and b,
            "both sides restart the driver when its install config changes, each with its own hash: gpuop's "
            "digest of the config it renders (components/driver.py config_digest), the operator's FNV hash of its "
            "own rendering"),
    Allowed("upgrade-controller", r"driver\[", r"initContainers\.k8s-driver-manager\.env\.(ENABLE_AUTO_DRAIN|"
            r"DRAIN_TIMEOUT_SECONDS|DRAIN_USE_FORCE|DRAIN_POD_SELECTOR_LABEL|DRAIN_DELETE_EMPTYDIR_DATA)$",
            lambda a, b, c: c.spec.driver.upgradePolicy.autoUpgrade,
            "autoUpgrade: the operator's upgrade controller drains the node (the ClusterPolicy's upgradePolicy "
            "carries drain, force, timeout, podSelector, deleteEmptyDir) and turns the driver manager's own drain "
            "off; gpuop's stack has no controller, its driver manager drains"),
    Allowed("visible-devices", r"driver\[", r"containers\.nvidia-driver-ctr\.env\.NVIDIA_VISIBLE_DEVICES$",
            lambda a, b, c: a == "void" and b is None,
            "gpuop's stack sets NVIDIA_VISIBLE_DEVICES=void on the driver container as the operator's NVIDIADriver "
            "rendering does (manifests/state-driver); the ClusterPolicy path's asset leaves it out. The driver "
            "container uses no GPU through the runtime either way"),
    Allowed("zero-quantity", r".*", r".*\.resources\.(limits|requests)\.(cpu|memory)$",
            lambda a, b, c: a is None and b == "0",
            "the operator's typed resources write the unset half of a limit/request pair as a zero quantity "
            "(\"0\"); the renderer shows it before the API server, which drops a zero limit the same way as none"),
    Allowed("per-pool-mig-strategy", r".*", r".*\.env\.MIG_STRATEGY$",
            lambda a, b, c: a in (None, "") and b == "mixed" and c.plan.pool_configs.per_pool_strategy,
            "pools with different MIG strategies: gpuop's stack leaves MIG_STRATEGY out (each pool's config carries "
            "flags.migStrategy); the ClusterPolicy always carries a strategy, the plan's mixed (NVIDIA's chart "
            "renders an empty one as a null spec.mig, which the API server refuses), and the operator sets it on "
            "its operands"),
    Allowed("dtk-image", r"driver\[", r"containers\.openshift-driver-toolkit-ctr\.image$", lambda a, b, c: True,
            "the Driver Toolkit image: gpuop's stack names the ImageStream tag of the RHCOS build (OpenShift's "
            "image lookup resolves it), the operator the image that ImageStream points at (the facts' dtkImages)"),
    Allowed("mixed-rhcos", r"driver\[.*RHCOS", r"containers\.nvidia-driver-ctr\.image$",
            lambda a, b, c: len({x[:3] for x in c.spec.driver.rhcosVersions}) > 1,
            "nodes of two RHCOS minors: the renderer takes the first GPU node's OS for every ClusterPolicy driver "
            "DaemonSet (a limit of ../shared/tools/nvidia-operator, its README), so the image's OS tag differs"),
    Allowed("dtk-firmware", r"driver\[", r"containers\.openshift-driver-toolkit-ctr\.volumeMounts\."
            r"(/lib/firmware|/sys/module/firmware_class/parameters/path)$", lambda a, b, c: b is None,
            "gpuop follows NVIDIA's golden render (refs/gpu-operator/golden/driver-openshift-drivertoolkit.yaml: "
            "the firmware mounts on the Driver Toolkit container), which v26.7.0's controller code does not add"),
    Allowed("os-release-openshift-version", r"driver\[", r"containers\.nvidia-driver-ctr\.env\.OPENSHIFT_VERSION$",
            lambda a, b, c: b is None and a == c.spec.platform.version and c.plan.release in OS_RELEASE_OPENSHIFT,
            "before v26.3 the operator reads OPENSHIFT_VERSION from its own node's /host-etc/os-release (v25.10.1 "
            "controllers/object_controls.go parseOSRelease, L3585-3590): RHCOS writes OPENSHIFT_VERSION=<minor> "
            "there, the renderer runs on no RHCOS node, so its render has none; gpuop's is the value RHCOS gives"),
    Allowed("config-source-mount", r"nvidia-container-toolkit-daemonset$",
            r"containers\.nvidia-container-toolkit-ctr\.env\.RUNTIME_CONFIG_SOURCE$",
            lambda a, b, c: a.startswith("file=/runtime/config-dir/") and b == "file=/host" + (
                od.config_source(c)), "the distribution's rendered containerd config, the same host file: "
            "gpuop's stack reads it through the config folder's mount, the operator through the toolkit's /host mount"),
)
# the releases whose operator takes OPENSHIFT_VERSION from its node's os-release (later ones: the ClusterVersion)
OS_RELEASE_OPENSHIFT = {"25.10"}
# DaemonSets only the operator creates, allowed when they run on no node of the profile
OPERATOR_ONLY = {
    "nvidia-device-plugin-mps-control-daemon": (False, "the operator always creates the MPS control daemon; it runs "
                                                "only on nodes labelled nvidia.com/mps.capable=true, which no pool "
                                                "without MPS sharing has"),
    # (may run on nodes, reason)
    "nvidia-mig-manager": (True, "no pool has a MIG layout: gpuop's stack runs no MIG manager, the operator runs its "
                           "own on every MIG-capable node while migManager.enabled (the chart's default, kept so that "
                           "adopting a running operator changes nothing; it applies the node's nvidia.com/mig.config, "
                           "all-disabled unless labelled); spec.migManager.enabled: false turns it off"),
}


@dataclass
class Case:
    name: str
    spec: object
    ours: dict
    theirs: dict
    nodes: dict
    olm: dict | None = None          # install: olm: what gpuop's own ClusterPolicy makes the operator deploy
    by_name: dict | None = None      # the operator's DaemonSets from NVIDIA's chart, by name (as `olm`)
    plan: object = None


# the releases compared, newest first: each profile pinned to the release (spec.release and, where the profile pins
# one, its operator version) against NVIDIA's code at that release's tag
RELEASES = ("26.7", "26.3", "25.10")
NEWEST = RELEASES[0]
# what an older release cannot compile, by the located message that says so: settings the release's chart and CRDs
# do not have, OS and Kubernetes versions outside its support matrix
OLDER_REFUSALS = ("does not have the setting", "is not in the support matrix", "not a supported",
                  "is not supported", "not in stack release", "Unsupported value")


def _pinned(doc: dict, release: str) -> dict:
    spec = doc["spec"]
    if release != NEWEST:
        spec["release"] = release
        op = spec.get("delivery", {}).get("operator")
        if isinstance(op, dict) and "version" in op:
            op["version"] = catalog.load().release(release).operatorVersion
    return doc


def operator_profiles(tmp: Path, release: str = NEWEST) -> list[Path]:
    """The example profiles switched to operator mode (those that validate), plus the corpus, each on `release`;
    on an older release, a profile that release cannot compile is left out (its refusal is located, and says
    what the release lacks)."""
    work = tmp / "examples"
    work.mkdir()
    shutil.copy(REPO / "profiles" / "_base.yaml", work / "_base.yaml")
    corpus = tmp / "corpus"
    corpus.mkdir()
    out, refused = [], set()
    sources = [(f, work) for f in sorted((REPO / "profiles").glob("*.yaml")) if not f.name.startswith("_")]
    sources += [(f, corpus) for f in sorted(CORPUS.glob("*.yaml")) if not f.name.startswith("_")]
    for f, dest in sources:
        doc = yaml.safe_load(f.read_text())
        if dest is work:
            doc["spec"].setdefault("delivery", {})["mode"] = "operator"
        _pinned(doc, release)
        (dest / f.name).write_text(yaml.safe_dump(doc, sort_keys=False))
        try:
            validate(load_profile(dest / f.name))
        except UserError as exc:
            if dest is work and doc["metadata"]["name"] in NOT_OPERATOR:
                refused.add(doc["metadata"]["name"])
                continue
            assert release != NEWEST, exc.issues
            assert all(any(r in i.message for r in OLDER_REFUSALS) for i in exc.issues), exc.issues
            continue
        out.append(dest / f.name)
    assert refused == set(NOT_OPERATOR), refused       # an example that cannot run in operator mode says why
    return out


def stack_variant(path: Path, tmp: Path) -> Path:
    """The same profile in stack mode: the operator-only sidecar switches become spec.driver's."""
    doc = yaml.safe_load(path.read_text())
    op = doc["spec"].get("delivery", {}).get("operator", {})
    for key in ("gds", "gdrcopy"):
        if op.get(key):
            doc["spec"].setdefault("driver", {})[key] = True
    doc["spec"]["delivery"] = {"mode": "stack"}
    out = tmp / "stack" / path.name
    out.parent.mkdir(exist_ok=True)
    if (path.parent / "_base.yaml").is_file():
        # the cases are built on two threads, each copying the shared parent here while the other may be reading it:
        # a copy in place would be seen empty for a moment, so each copy is put in place whole
        part = out.parent / f".{path.stem}._base.yaml"
        shutil.copy(path.parent / "_base.yaml", part)
        os.replace(part, out.parent / "_base.yaml")
    out.write_text(yaml.safe_dump(doc, sort_keys=False))
    return out


@pytest.fixture(scope="module", params=RELEASES)
def cases(request, tmp_path_factory) -> list[Case]:
    release = request.param
    tmp = tmp_path_factory.mktemp(f"differential-{release}")
    cat = catalog.load()
    render, chart = od.oracle(cat.release(release).operatorVersion)
    if release != NEWEST and not chart.is_dir():      # the older releases' references are optional (refs.lock)
        pytest.skip(f"no reference chart of {cat.release(release).operatorVersion} at {chart}: `make refs` fetches the "
                    "optional older releases")
    if not os.access(render.parent / "bin" / "controllers.test", os.X_OK):     # what build.sh writes
        if release == NEWEST:
            tool("nvidia-operator")          # the shared tool: skipped or failed as every tool is (conftest)
        pytest.skip(f"NVIDIA's operator code at {cat.release(release).operatorVersion} is not built at {render}: run "
                    f"tools/nvidia-operator/build_release.py {cat.release(release).operatorVersion} on a checkout of "
                    f"that tag (docs/operator.md), or set {od.BUILDS_ENV}")

    def one(path: Path) -> Case:
        (plan,), _ = plan_all([path])
        profile = validate(load_profile(path)).profile
        (stack_plan,), _ = plan_all([stack_variant(path, tmp)])
        facts = od.facts(profile, plan, cat)
        by_name, _, nodes = od.operator_daemonsets(plan, facts, tmp / plan.name, render, chart)
        olm = od.olm_daemonsets(plan, facts, tmp / plan.name / "olm", render, chart) \
            if plan.operator.install == "olm" else None
        ours, theirs = od.paired(od.stack_daemonsets(stack_plan), by_name)
        return Case(plan.name, profile.spec, ours, theirs, nodes, olm, by_name, plan)

    with ThreadPoolExecutor(max_workers=2) as pool:      # the renderer runs while the next profile is planned
        return list(pool.map(one, operator_profiles(tmp, release)))


def unexplained(case: Case) -> list[str]:
    problems = []
    for name in sorted(set(case.ours) - set(case.theirs)):
        problems.append(f"{case.name}: {name}: only in gpuop's stack")
    for name in sorted(set(case.theirs) - set(case.ours)):
        placed = od.node_view(case.theirs[name], case.nodes)["placement"]
        if name not in OPERATOR_ONLY or placed and not OPERATOR_ONLY[name][0]:
            problems.append(f"{case.name}: {name}: only from the operator (runs on {placed})")
    for name in sorted(set(case.ours) & set(case.theirs)):
        for path, a, b in od.differences(case.ours[name], case.theirs[name], case.nodes):
            if not any(re.match(x.daemonset, name) and re.match(x.path, path) and x.when(a, b, case) for x in ALLOWED):
                problems.append(f"{case.name}: {name}: {path}: gpuop {a!r} != operator {b!r}")
    return problems


@pytest.mark.slow
def test_operator_mode_deploys_what_the_static_stack_deploys(cases):
    # every example and corpus profile on the newest release; on an older one those its chart and matrix allow
    assert len(cases) >= (15 if all(c.spec.release in (None, NEWEST) for c in cases) else 10)
    problems = [p for c in cases for p in unexplained(c)]
    assert problems == []


def _left_to_the_csv(case: Case, ds: dict, path: str, chart_value, olm_value) -> bool:
    """A difference of the OLM side that leaving the release's images to the CSV makes:
    - an image (a container's, or one the validator passes to its workload pods in VALIDATOR_IMAGE) the
      ClusterPolicy names none of: the operator ran the one the CSV's operator env names;
    - the driver's config digest, NVIDIA's hash of a rendering that holds such an image;
    - the validator's workload pull policy, empty where the section names no IfNotPresent: the API server
      defaults those pods' policy to IfNotPresent for the CSV's digest-pinned images."""
    from gpuop.catalog import operator as operator_catalog
    csv = set(operator_catalog.olm_operator_env(case.plan.operator.version).values())
    if path.endswith((".image", ".env.VALIDATOR_IMAGE")):
        return olm_value in csv
    if path.endswith(".env.DRIVER_CONFIG_DIGEST"):
        pod = ds["spec"]["template"]["spec"]
        return any(c["image"] in csv for c in pod["containers"] + pod.get("initContainers", [])
                   if c["name"] in ("nvidia-driver-ctr", "k8s-driver-manager"))
    if path.endswith(".env.VALIDATOR_IMAGE_PULL_POLICY"):
        return chart_value == "IfNotPresent" and olm_value == ""
    return False


@pytest.mark.slow
def test_the_olm_cluster_policy_deploys_what_nvidias_chart_deploys(cases):
    """With OLM gpuop writes the ClusterPolicy itself (the OperatorHub example with the profile's settings over
    it): NVIDIA's code makes of it exactly the DaemonSets it makes of the ClusterPolicy NVIDIA's chart renders
    from the same values, except the images the ClusterPolicy leaves to the CSV (the release's own: OLM runs
    the bundle's digest-pinned ones)."""
    olm = [c for c in cases if c.olm is not None]
    assert {c.spec.platform.type for c in olm} == {"openshift"}
    for c in olm:
        assert set(c.olm) == set(c.by_name), c.name
        for name in c.olm:
            diffs = [(p, a, b) for p, a, b in od.differences(c.by_name[name], c.olm[name], c.nodes)
                     if not _left_to_the_csv(c, c.olm[name], p, a, b)]
            assert diffs == [], (c.name, name, diffs)


@pytest.mark.slow
def test_the_differential_sees_a_setting_the_values_drop(cases):
    """The comparison is not blind: drop one value the table writes and the driver DaemonSet differs."""
    case = next(c for c in cases if c.name == "mirror-everything")
    theirs = copy.deepcopy(case.theirs)
    key = next(k for k in theirs if k.startswith("driver["))
    init = theirs[key]["spec"]["template"]["spec"]["initContainers"]
    manager = next(c for c in init if c["name"] == "k8s-driver-manager")
    manager["image"] = manager["image"].replace("registry.example.com/nvidia", "nvcr.io/nvidia")
    assert any("k8s-driver-manager.image" in p for p in unexplained(Case(case.name, case.spec, case.ours, theirs,
                                                                          case.nodes)))


@pytest.mark.slow
def test_every_platform_and_table_row_is_exercised(cases):
    specs = {c.name: c.spec for c in cases}
    assert {s.platform.type for s in specs.values()} == {"kubernetes", "openshift"}
    assert {s.platform.distribution for s in specs.values()} >= {None, "eks"}
    assert {s.containerRuntime for s in specs.values()} >= {"crio", "docker"}
    assert any(s.images.registry for s in specs.values())
    # the pod-label row where the release's ClusterPolicy has it (v25.10.1's has none: refused, operator.yaml)
    version = catalog.load().release(next(iter(specs.values())).release).operatorVersion
    if "dcgmExporterPodLabels" in operator_catalog.load().get(version).settings:
        assert any(s.dcgmExporter.podLabelAllowlist for s in specs.values())
    assert any(not s.driver.upgradePolicy.autoUpgrade for s in specs.values())
    assert any(s.delivery.operator.gds for s in specs.values())


if __name__ == "__main__":          # print the differences: python tests/test_operator_differential.py [RELEASE]
    import tempfile

    class _F:
        def mktemp(self, n):
            return Path(tempfile.mkdtemp(prefix=n))
    import sys
    from types import SimpleNamespace
    for c in cases.__wrapped__(SimpleNamespace(param=sys.argv[1] if len(sys.argv) > 1 else NEWEST), _F()):
        for p in unexplained(c):
            print(p[:400])
