"""Flux's own controllers (source-, kustomize-, helm-controller of Flux v2.9.5, built from the Go module proxy)
reconcile what gpuop writes, on the rehearsal rig's control plane with each cluster's simulated GPU fleet.

What a user does, step by step: `gpuop synth` with settings naming the git repository; commit dist/; apply
the cluster's dist/<cluster>/flux objects exactly as written. The git repository, NFD's and NVIDIA's chart
repositories and an OCI registry holding the DRA driver's chart are served on loopback over HTTPS. Every
example cluster is delivered; the dra cluster's releases install in their dependsOn order; the Kustomization
path (dist/<cluster>/flux-overlay) applies the overlay; and the upgrade lane checks that each change of a corpus,
a release move among them, rolls what `gpuop diff --impact` says, in its waves (docs/gitops-rehearsal.md). The node
agents kwok's nodes lack are played while Flux installs (rehearse/agents.py), so the health gate's checks are scheduled
and kwok completes them (tests/test_health_gate_rehearsal.py: a failing one holds the next wave).

Part of `make test`, which builds Flux's controllers first (`make flux`) as it builds the rig; `make test-gitops` runs
the lane alone (GPUOP_GITOPS=1: it builds what is missing). Without the controllers (or the rig) the lane fails under
CI and is skipped elsewhere, saying how to build them."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from conftest import REFS
from gpuop.cli.main import main
from gpuop.rehearse import fleet, objects, rig
from gpuop.rehearse.agents import Agents
from gpuop.rehearse.gitops import FLUX_NAMES, FLUX_NAMESPACE, HELM_LANE, Flux, Loopback, OciRegistry, flux_dir

pytestmark = [pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[1]
HR = "helm.toolkit.fluxcd.io/v2"
GIT = "source.toolkit.fluxcd.io/v1"
NFD_CHART = Path("deployment/helm/node-feature-discovery")
# NVIDIA's charts from the reference data (their SOURCES.md say which commits): the operator's at v26.7.0,
# the DRA driver's at the commit closest to 0.5.0
OPERATOR_CHART = REFS / "gpu-operator" / "chart"
DRA_CHART = REFS / "dra" / "chart"


def _missing(what: str, e: Exception):
    if os.environ.get("CI"):
        pytest.fail(f"{what} missing under CI: {e}")
    pytest.skip(f"{what} cannot be built here: {e}")


@pytest.fixture(scope="module")
def bins() -> dict[str, Path]:
    try:
        found = rig.binaries(build=True)
    except rig.RigError as e:
        _missing("the rehearsal rig is", e)
    if "nfd-master" not in found or "kwok" not in found:
        _missing("the rehearsal rig is", rig.RigError(f"no kwok or nfd-master in {sorted(found)}"))
    return found


def _flux(controllers: tuple[str, ...]) -> Path:
    """Flux's controllers: built by `make test` before the suite (`make flux`), and by this fixture under
    GPUOP_GITOPS (`make test-gitops`). Missing: the lane fails under CI or GPUOP_GITOPS, else it is skipped, saying
    how to build them."""
    wanted = bool(os.environ.get("GPUOP_GITOPS"))
    try:
        return flux_dir(build=wanted, controllers=controllers)
    except rig.RigError as e:
        if wanted:
            pytest.fail(f"Flux's controllers are missing: {e}")
        _missing("Flux's controllers", e)


@pytest.fixture(scope="module")
def flux_bin() -> Path:
    return _flux(HELM_LANE)


@pytest.fixture(scope="module")
def flux_all() -> Path:
    """All three controllers: the Kustomization path needs kustomize-controller beside the other two."""
    return _flux(FLUX_NAMES)


def _nfd_module_dir() -> Path:
    done = subprocess.run(["go", "list", "-m", "-f", "{{.Dir}}", "sigs.k8s.io/node-feature-discovery"],
                          cwd=ROOT / "tools" / "rehearsal" / "nfd", capture_output=True, text=True,
                          env={**os.environ, "GOFLAGS": "-mod=readonly"})
    assert done.returncode == 0, done.stderr
    return Path(done.stdout.strip())


# what a cluster running prometheus-operator serves: the ServiceMonitor and PrometheusRule kinds gpuop's charts
# write when monitoring is on (Helm refuses a chart whose kinds the API server does not serve)
PROMETHEUS_OPERATOR = "github.com/prometheus-operator/prometheus-operator@v0.85.0"
PROMETHEUS_CRDS = ("servicemonitors", "prometheusrules")


def _module_dir(module: str, cwd: Path = ROOT) -> Path:
    done = subprocess.run(["go", "mod", "download", "-json", module], cwd=cwd, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    return Path(json.loads(done.stdout)["Dir"])


def _profiles_for(src: Path, dst: Path, nfd_repo: str, operator_repo: str, mirror: str) -> None:
    """The example profiles, each chart pulled from a loopback mirror: the only change a mirror-only
    cluster's owner makes. NFD's chart from spec.nfd.chartRepository where gpuop deploys NFD; NVIDIA's
    operator chart from spec.delivery.operator.chartRepository (operator mode, install helm); a cluster with
    DRA pools names its registry mirror (spec.images.registry), which serves the DRA driver's chart."""
    dst.mkdir(parents=True)
    for f in sorted(src.glob("*.yaml")):
        doc = yaml.safe_load(f.read_text())
        spec = doc.setdefault("spec", {})
        platform = (spec.get("platform") or {}).get("type")
        nfd = spec.get("nfd") or {}
        delivery = spec.get("delivery") or {}
        if not f.name.startswith("_") and platform != "openshift" and nfd.get("mode") != "existing":
            spec["nfd"] = {**nfd, "chartRepository": nfd_repo}
        if delivery.get("mode") == "operator" and platform != "openshift":
            delivery["operator"] = {**(delivery.get("operator") or {}), "chartRepository": operator_repo}
        if any(pool.get("allocation") == "dra" for pool in spec.get("nodePools") or []):
            spec["images"] = {**(spec.get("images") or {}), "registry": mirror}
        (dst / f.name).write_text(yaml.safe_dump(doc, sort_keys=False))


@pytest.fixture(scope="module")
def delivered(tmp_path_factory):
    """One loopback server, one synth of every profile, one commit: what every cluster's Flux pulls."""
    root = tmp_path_factory.mktemp("gitops")
    with Loopback(root / "srv") as lo, OciRegistry(root / "oci", lo.pki) as oci:
        repo = lo.git_repository("gpu-clusters")
        _profiles_for(ROOT / "profiles", root / "profiles", f"{lo.base}/files/nfd", f"{lo.base}/files/nvidia",
                      f"{oci.host}/mirror")
        (root / "gpuop.yaml").write_text(yaml.safe_dump({
            "apiVersion": "gpuop/v1alpha1", "kind": "Settings",
            "gitops": {"repoURL": repo.url, "revision": "main", "path": "dist"}}))
        done = main(["synth", str(root / "profiles"), "-o", str(root / "dist"),
                     "--settings", str(root / "gpuop.yaml")])
        assert done == 0
        sha = repo.commit({"dist": root / "dist"}, "gpuop synth")
        versions = sorted({yaml.safe_load(p.read_text())["spec"]["chart"]["spec"]["version"]
                           for p in (root / "dist").glob("*/flux/nfd-helmrelease.yaml")})
        lo.chart_repository("nfd", [(_nfd_module_dir() / NFD_CHART, v) for v in versions])
        lo.chart_repository("nvidia", [(OPERATOR_CHART, v) for v in _chart_versions(root / "dist", "gpu-operator")])
        for v in _chart_versions(root / "dist", "dra-driver-nvidia-gpu"):
            oci.push_chart("mirror", DRA_CHART, v)
        yield {"root": root, "dist": root / "dist", "lo": lo, "repo": repo, "sha": sha}


def _chart_versions(dist: Path, chart: str) -> list[str]:
    """The versions of this chart the clusters' HelmReleases pin."""
    return sorted({d["spec"]["chart"]["spec"]["version"] for p in dist.glob("*/flux/*.yaml")
                   for d in yaml.safe_load_all(p.read_text()) if d and d["kind"] == "HelmRelease"
                   and d["spec"]["chart"]["spec"]["chart"] == chart})


def _plans(root: Path):
    from gpuop.pipeline.run import plan_all
    plans, _ = plan_all([root / "profiles"])
    return {p.name: p for p in plans}


# OpenShift serves these kinds itself (SecurityContextConstraints as a CRD of its cluster-version operator,
# ImageStream from openshift-apiserver); their definitions are in github.com/openshift/api, which the module
# proxy serves only at v3.9.0+incompatible (no CRD manifests), so the rehearsal stands in for them with
# schema-less CRDs: the kinds are served, their fields are not checked here (test_openshift.py checks them)
OPENSHIFT_KINDS = (("security.openshift.io", "SecurityContextConstraints", "securitycontextconstraints", "Cluster"),
                   ("image.openshift.io", "ImageStream", "imagestreams", "Namespaced"))


def _openshift_standins() -> list[dict]:
    return [{"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
             "metadata": {"name": f"{plural}.{group}"},
             "spec": {"group": group, "scope": scope,
                      "names": {"plural": plural, "singular": kind.lower(), "kind": kind},
                      "versions": [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {
                          "type": "object", "x-kubernetes-preserve-unknown-fields": True}}}]}}
            for group, kind, plural, scope in OPENSHIFT_KINDS]


def _fleet_on(cp: rig.ControlPlane, plan) -> fleet.Fleet:
    """The cluster's fake GPU nodes with what nfd-worker would report, and nfd-master labelling them."""
    fl = fleet.build(plan)
    prom = _module_dir(PROMETHEUS_OPERATOR) / "example" / "prometheus-operator-crd"
    problems = cp.apply([rig.nfd_crds(next(iter(cp._bins.values())).parent),
                         *(prom / f"monitoring.coreos.com_{k}.yaml" for k in PROMETHEUS_CRDS)])
    assert not problems, problems
    if plan.platform == "openshift":
        assert cp.apply(_openshift_standins()) == []
    if plan.queues is not None:         # a cluster whose profile has queues runs Kueue, which serves their kinds
        assert cp.apply(objects.kueue_crds()) == []
    # NFD's, and the tenants' namespaces the DRA claim templates and the LocalQueues live in: the user's, which
    # gpuop does not create
    tenants = {t.namespace for t in plan.dra.claim_templates} if plan.dra is not None else set()
    tenants |= set(plan.queues.namespaces) if plan.queues is not None else set()
    for ns in sorted({fleet.NFD_NAMESPACE} | tenants):
        cp.request("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    for n in fl.nodes:
        cp.request("POST", "/api/v1/nodes", n.node())
        cp.request("PATCH", f"/api/v1/nodes/{n.name}/status", {"status": fleet.node_status(n, advertised=False)},
                   content_type="application/merge-patch+json")
        obj = n.node_feature()
        cp.request("POST", cp.path_of(obj["apiVersion"], obj["kind"], obj["metadata"]["namespace"]), obj)
    # nfd-master annotates the node it runs on (NODE_NAME, the rig's "rehearsal") and exits when there is
    # none: the control-plane node a real nfd-master pod runs on, without GPUs
    cp.request("POST", "/api/v1/nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {
        "name": "rehearsal", "annotations": {rig.KWOK_NODE_ANNOTATION: "fake"},
        "labels": {"kubernetes.io/hostname": "rehearsal", "kubernetes.io/os": "linux"}}})
    cp.start_nfd_master()
    return fl


def _daemonsets(cp: rig.ControlPlane, namespace: str) -> dict[str, tuple[int, int]]:
    return {d["metadata"]["name"]: (d["status"].get("desiredNumberScheduled", 0), d["status"].get("numberReady", 0))
            for d in cp.list_objects("apps/v1", "DaemonSet") if d["metadata"]["namespace"] == namespace}


def _settled_daemonsets(cp: rig.ControlPlane, namespace: str, timeout: float = 300) -> dict[str, tuple[int, int]]:
    """The namespace's DaemonSets (desired, ready) once they agree, or as they are when the bound ends (the test
    shows them). Ready releases and Kustomizations are not settled DaemonSets: nfd-master labels the nodes from
    the NodeFeatureRule after the install, and kwok brings the pods up node by node."""
    deadline = time.monotonic() + timeout
    while True:
        sets = _daemonsets(cp, namespace)
        if (sets and all(d == r for d, r in sets.values())) or time.monotonic() > deadline:
            return sets
        time.sleep(2)


def _agents(cp: rig.ControlPlane, plan, fl: fleet.Fleet) -> Agents:
    """The node agents kwok's nodes lack, played while Flux installs the operands (rehearse/agents.py): the device
    plugin advertises the pool's resources where its pod runs, so the gate's checks can be scheduled; GFD labels
    MPS nodes, so the MPS control daemon runs; the DRA kubelet plugin publishes its ResourceSlices."""
    from gpuop.rehearse.run import Api
    return Agents(Api(cp, rig.ApiError), plan, fl)


def _gate_jobs(cp: rig.ControlPlane) -> dict[str, tuple[int, int, int]]:
    """The health gate's Jobs: name -> (completions, succeeded, failed)."""
    return {j["metadata"]["name"]: (j["spec"].get("completions", 1), j.get("status", {}).get("succeeded", 0),
                                    j.get("status", {}).get("failed", 0))
            for j in cp.list_objects("batch/v1", "Job")
            if j["metadata"].get("labels", {}).get("app.kubernetes.io/component") == "health-gate"}


def deliver(delivered, plan, bins, flux_bin, workdir: Path) -> dict:
    """One cluster on a fresh control plane: its fleet, Flux, its dist/<cluster>/flux objects as written;
    what Flux and the cluster say once the releases are Ready (or the wait ends)."""
    folder = delivered["dist"] / plan.name / "flux"
    objs = [d for f in sorted(folder.glob("*.yaml")) for d in yaml.safe_load_all(f.read_text()) if d]
    seen: dict = {"cluster": plan.name, "objects": sorted(f"{o['kind']}/{o['metadata']['name']}" for o in objs)}
    with rig.ControlPlane(workdir / "cp", binaries=bins) as cp:
        fl = _fleet_on(cp, plan)
        seen["nodes"] = len(fl.nodes)
        with Flux(cp, workdir / "flux", folder=flux_bin, ca=delivered["lo"].ca, controllers=HELM_LANE) as flux, \
                _agents(cp, plan, fl):
            seen["refused"] = [str(p) for p in flux.apply([folder])]
            for o in objs:
                api, kind, name = o["apiVersion"], o["kind"], o["metadata"]["name"]
                if kind == "HelmRepository" and o["spec"].get("type") == "oci":
                    continue        # static in Flux v2 (no status of its own): its HelmChart below says it pulled
                c = flux.wait_ready(api, kind, name, o["metadata"].get("namespace", FLUX_NAMESPACE))
                seen[f"{kind}/{name}"] = (c.get("status"), c.get("reason"), c.get("message", "")[:300])
            # the charts Flux fetched for the releases (from git, a chart repository or an OCI registry)
            for chart in cp.list_objects(GIT, "HelmChart"):
                c = flux.condition(GIT, "HelmChart", chart["metadata"]["name"])
                seen[f"HelmChart/{chart['metadata']['name']}"] = (c.get("status"), c.get("reason"),
                                                                  c.get("message", "")[:300])
            git = cp.read(GIT, "GitRepository", "gpuop", FLUX_NAMESPACE) or {}
            seen["revision"] = git.get("status", {}).get("artifact", {}).get("revision", "")
            if plan.operator is not None:
                seen["clusterpolicies"] = sorted(c["metadata"]["name"]
                                                 for c in cp.list_objects("nvidia.com/v1", "ClusterPolicy"))
            seen["daemonsets"] = _settled_daemonsets(cp, plan.namespace)
            # the health gate: Flux ran each gated release's Helm tests (its gate Jobs) before calling it Ready
            seen["tested"] = {o["metadata"]["name"]: flux.condition(HR, "HelmRelease", o["metadata"]["name"],
                                                                     type_="TestSuccess").get("reason")
                              for o in objs if o["kind"] == "HelmRelease" and (o["spec"].get("test") or {}).get("enable")}
            seen["gate"] = _gate_jobs(cp)
            releases = {o["metadata"]["name"]: cp.read(HR, "HelmRelease", o["metadata"]["name"], FLUX_NAMESPACE) or {}
                        for o in objs if o["kind"] == "HelmRelease"}
            seen["installed"] = {name: [(h.get("chartName"), h.get("chartVersion"), h.get("status"))
                                        for h in hr.get("status", {}).get("history", [])]
                                 for name, hr in releases.items()}
            # the order Flux kept: each release's dependsOn, when it first went Ready, when it was installed
            seen["dependsOn"] = [(name, d["name"]) for name, hr in releases.items()
                                 for d in hr.get("spec", {}).get("dependsOn", [])]
            seen["readyAt"] = {name: flux.condition(HR, "HelmRelease", name).get("lastTransitionTime", "")
                               for name in releases}
            seen["deployedAt"] = {name: (hr.get("status", {}).get("history") or [{}])[-1].get("firstDeployed", "")
                                  for name, hr in releases.items()}
    return seen


# every example cluster (docs/gitops-rehearsal.md: what each one proves)
CLUSTERS = tuple(sorted(yaml.safe_load(f.read_text())["metadata"]["name"]
                        for f in (ROOT / "profiles").glob("*.yaml") if not f.name.startswith("_")))


@pytest.mark.parametrize("cluster", CLUSTERS)
def test_flux_delivers_the_cluster_from_git_and_its_operands_run_on_the_fleet(delivered, bins, flux_bin,
                                                                           tmp_path, cluster):
    plan = _plans(delivered["root"])[cluster]
    seen = deliver(delivered, plan, bins, flux_bin, tmp_path)
    print(seen)
    assert seen["refused"] == []
    if "GitRepository/gpuop" in seen["objects"]:       # operator mode pulls NVIDIA's chart, nothing from git
        assert seen["revision"] == f"main@sha1:{delivered['sha']}"
    if plan.operator is not None:                      # NVIDIA's chart created the ClusterPolicy gpuop's values ask for
        assert seen["clusterpolicies"] == ["cluster-policy"]
    not_ready = {k: v for k, v in seen.items() if "/" in k and isinstance(v, tuple) and v[0] != "True"}
    assert not_ready == {}
    # the gate held each gated release until its checks passed: every check Job completed on each of its nodes
    if plan.health_gate is not None and plan.operator is None:
        assert seen["tested"] and set(seen["tested"].values()) == {"TestSucceeded"}, seen["tested"]
        assert seen["gate"] and all(n == ok and not bad for n, ok, bad in seen["gate"].values()), seen["gate"]
    assert seen["daemonsets"], "no DaemonSet of the GPU stack"
    assert {n: d for n, d in seen["daemonsets"].items() if d[0] != d[1]} == {}
    assert sum(d[0] for d in seen["daemonsets"].values()) > 0



def test_nfd_then_the_gpu_stack_then_the_dra_driver_install_in_their_dependson_order(delivered, bins, flux_bin,
                                                                                     tmp_path):
    """The dra cluster's three releases: NFD, then the GPU stack (dependsOn NFD), then the DRA driver
    (dependsOn the stack), each installed only once the release it depends on was Ready."""
    plan = _plans(delivered["root"])["dra"]
    seen = deliver(delivered, plan, bins, flux_bin, tmp_path)
    print(seen)
    edges = seen["dependsOn"]
    assert sorted(edges) == [("gpuop-dra", "gpuop-dra-nfd"), ("gpuop-dra-dra", "gpuop-dra")]
    for release, dependency in edges:
        assert seen["readyAt"][dependency] <= seen["deployedAt"][release], (release, dependency, seen)
    assert seen["deployedAt"]["gpuop-dra-nfd"] < seen["deployedAt"]["gpuop-dra-dra"]


# ---- the Kustomization path: dist/<cluster>/flux-overlay -------------------------------------------------

KS = "kustomize.toolkit.fluxcd.io/v1"
KUSTOMIZE_CLUSTER = "mig-sharing"


def _inventory(ks: dict) -> list[str]:
    """A Kustomization's inventory as "Kind namespace/name" (its entries' ids are ns_name_group_kind)."""
    out = []
    for e in (ks.get("status", {}).get("inventory") or {}).get("entries", []):
        ns, name, _group, kind = e["id"].split("_")
        out.append(f"{kind} {ns}/{name}" if ns else f"{kind} {name}")
    return sorted(out)


def _keys(folder: Path) -> list[str]:
    objs = [d for f in sorted(folder.glob("*.yaml")) for d in yaml.safe_load_all(f.read_text())
            if d and f.name != "kustomization.yaml"]
    return sorted(f"{o['kind']} {o['metadata']['namespace']}/{o['metadata']['name']}" if o["metadata"].get("namespace")
                  else f"{o['kind']} {o['metadata']['name']}" for o in objs)


def test_flux_kustomizations_apply_the_overlay_from_git_and_the_stack_gets_ready(delivered, bins, flux_all, tmp_path):
    """The other way gpuop's output is consumed by Flux: dist/<cluster>/flux-overlay applied as written (its
    GitRepository and two Kustomizations). kustomize-controller builds the NFD folder (a HelmRelease that
    helm-controller installs) and, once that Kustomization is Ready (dependsOn), the cluster's overlay of the
    rendered manifests; the stack's Kustomization waits for its health checks (every DaemonSet) to be Ready. Its
    inventory is exactly the rendered manifests' objects."""
    plan = _plans(delivered["root"])[KUSTOMIZE_CLUSTER]
    dist = delivered["dist"]
    folder = dist / KUSTOMIZE_CLUSTER / "flux-overlay"
    top = sorted(folder.glob("*.yaml"))          # the objects a user applies; nfd/ is the NFD Kustomization's path
    kinds = sorted(d["kind"] for f in top for d in yaml.safe_load_all(f.read_text()) if d)
    assert kinds == ["GitRepository", "Kustomization", "Kustomization"]
    with rig.ControlPlane(tmp_path / "cp", binaries=bins) as cp:
        fl = _fleet_on(cp, plan)
        with Flux(cp, tmp_path / "flux", folder=flux_all, ca=delivered["lo"].ca, controllers=FLUX_NAMES) as flux, \
                _agents(cp, plan, fl):
            assert flux.apply(top) == []
            nfd_ks, stack_ks = f"gpuop-{KUSTOMIZE_CLUSTER}-nfd", f"gpuop-{KUSTOMIZE_CLUSTER}"
            conditions = {f"Kustomization/{n}": flux.wait_ready(KS, "Kustomization", n, timeout=600)
                          for n in (nfd_ks, stack_ks)}
            conditions[f"HelmRelease/{nfd_ks}"] = flux.wait_ready(HR, "HelmRelease", nfd_ks)
            seen = {k: (c.get("status"), c.get("reason"), c.get("message", "")[:300]) for k, c in conditions.items()}
            stack = cp.read(KS, "Kustomization", stack_ks, FLUX_NAMESPACE) or {}
            nfd = cp.read(KS, "Kustomization", nfd_ks, FLUX_NAMESPACE) or {}
            revision = stack.get("status", {}).get("lastAppliedRevision", "")
            ready_at = {n: flux.condition(KS, "Kustomization", n).get("lastTransitionTime", "") for n in (nfd_ks, stack_ks)}
            # the stack's namespace is one of the overlay's objects: when it appeared, the stack was being applied
            applied_at = (cp.read("v1", "Namespace", plan.namespace) or {}).get("metadata", {}).get("creationTimestamp", "")
            at_ready = _daemonsets(cp, plan.namespace)
            daemonsets = _settled_daemonsets(cp, plan.namespace)
    print(seen, at_ready, revision, ready_at, applied_at, daemonsets, _inventory(stack), _inventory(nfd))
    assert {k: v for k, v in seen.items() if v[0] != "True"} == {}
    assert revision == f"main@sha1:{delivered['sha']}"
    # what each Kustomization applied: the rendered manifests, and NFD's HelmRelease and HelmRepository
    assert _inventory(stack) == _keys(dist / KUSTOMIZE_CLUSTER / "manifests")
    assert _inventory(nfd) == _keys(folder / "nfd")
    # dependsOn: the stack's objects were applied only once NFD's Kustomization was Ready
    assert applied_at and ready_at[nfd_ks] <= applied_at, (ready_at, applied_at)
    assert daemonsets and all(d == r for d, r in daemonsets.values()), daemonsets
    assert sum(d for d, _ in daemonsets.values()) > 0


# ---- the upgrade lane: one commit's output, then the next one's ----------------------------------------

UPGRADE_CLUSTER = "mig-sharing"


def _edit(doc: dict, change: str) -> None:
    """One change of the corpus, as a user edits the profile."""
    spec = doc["spec"]
    pools = {p["name"]: p for p in spec["nodePools"]}
    if change == "release move":
        spec["release"] = MOVE[1]
    elif change == "driver bump":
        spec["driver"] = {**(spec.get("driver") or {}), "version": "595.91.07"}
    elif change == "MIG layout":
        pools["train"]["mig"]["layout"] = {"2g.20gb": 2, "1g.10gb": 3}
    elif change == "sharing":
        pools["infer"]["sharing"]["timeSlicing"]["replicas"] = 8
    elif change == "component toggle":
        spec["dcgm"] = {"enabled": True}
    else:
        raise AssertionError(change)


# the lane starts on the older of two releases NVIDIA supports a move between (catalog releases.yaml `upgrades`),
# so its first change is the release move; the others then run on the newer release
MOVE = ("26.3", "26.7")
# what the release move does on the nodes: every operand's image moves, so each DaemonSet restarts (the driver's
# pods reinstall it: its driver manager moves), and NFD's chart moves with the release
RELEASE_MOVE_EFFECTS = ["device-plugin-restart", "driver-reinstall", "labels-refresh", "metrics-gap",
                        "runtime-reconfigure"]
UPGRADES = ("release move", "driver bump", "MIG layout", "sharing", "component toggle")


# what an effect of the impact preview names as its cause, and the part of it the cluster acts on: a DaemonSet's
# pod template (its pods roll), a ConfigMap's data (the MIG manager's / device plugin's config), a
# NodeFeatureRule's rules (the nvidia.com/mig.config and device-plugin.config node labels)
WATCHED = (("apps/v1", "DaemonSet", lambda o: o["spec"]["template"]),
           ("v1", "ConfigMap", lambda o: o.get("data")),
           ("nfd.k8s-sigs.io/v1alpha1", "NodeFeatureRule", lambda o: o.get("spec")))


def _read_by_pods(sets: list[dict]) -> set[tuple[str, str]]:
    """(namespace, name) of every ConfigMap a DaemonSet's pods read: a configMap volume, an env or envFrom source."""
    out = set()
    for d in sets:
        ns, pod = d["metadata"]["namespace"], d["spec"]["template"]["spec"]
        out |= {(ns, v["configMap"]["name"]) for v in pod.get("volumes") or [] if "configMap" in v}
        for c in [*pod.get("containers", []), *pod.get("initContainers", [])]:
            out |= {(ns, e["configMapRef"]["name"]) for e in c.get("envFrom") or [] if "configMapRef" in e}
            out |= {(ns, e["valueFrom"]["configMapKeyRef"]["name"]) for e in c.get("env") or []
                    if "configMapKeyRef" in (e.get("valueFrom") or {})}
    return out


def _templates(cp: rig.ControlPlane) -> dict[str, object]:
    """Every watched object, keyed as the impact preview names objects ("Kind namespace/name", "Kind name").
    ConfigMaps only when a DaemonSet's pods read them: what reaches the nodes (not, say, the Grafana dashboards)."""
    out: dict[str, object] = {}
    read = _read_by_pods(cp.list_objects("apps/v1", "DaemonSet"))
    for api, kind, part in WATCHED:
        for o in cp.list_objects(api, kind):
            ns = o["metadata"].get("namespace")
            if ns == "kube-system" or o["metadata"]["name"] == "kube-root-ca.crt":
                continue                    # the API server's own, not the output's
            if kind == "ConfigMap" and (ns, o["metadata"]["name"]) not in read:
                continue
            out[f"{kind} {ns}/{o['metadata']['name']}" if ns else f"{kind} {o['metadata']['name']}"] = part(o)
    return out


def _impact(root: Path) -> dict:
    import contextlib
    import io
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(["diff", "--impact", "--format", "json", str(root / "profiles"), "-o", str(root / "dist"),
                     "--settings", str(root / "gpuop.yaml")])
    assert code in (0, 3), out.getvalue()
    return json.loads(out.getvalue())


def _predicted_rolls(report: dict) -> dict[str, list[str]]:
    """Watched object ("Kind namespace/name") -> the kinds of effect the impact preview gives it."""
    watched = {kind for _, kind, _ in WATCHED}
    out: dict[str, set[str]] = {}
    for e in report["effects"]:
        for o in e["objects"]:
            if o.partition(" ")[0] in watched:
                out.setdefault(o, set()).add(e["kind"])
    return {k: sorted(v) for k, v in out.items()}


def _live_waves(ds: dict) -> int:
    """The rounds the DaemonSet controller rolls this DaemonSet's pods in: ceil(desired / maxUnavailable), from
    the update strategy as the API server defaulted it (RollingUpdate, maxUnavailable 1 when a manifest sets none)."""
    strategy = ds["spec"].get("updateStrategy") or {}
    desired = ds.get("status", {}).get("desiredNumberScheduled", 0)
    if strategy.get("type") == "OnDelete" or not desired:
        return 0
    per = (strategy.get("rollingUpdate") or {}).get("maxUnavailable", 1)
    if isinstance(per, str) and per.endswith("%"):
        per = max(1, -(-desired * int(per[:-1]) // 100))     # the controller rounds a percentage up, at least 1
    return -(-desired // int(per))


def _settle(cp: rig.ControlPlane, flux: Flux, versions: dict[str, str], before: dict[str, int] | None = None,
            timeout: float = 900) -> dict:
    """Until every release runs its chart version, Ready, and every DaemonSet's pods are updated and ready.
    What the rollout looked like: per DaemonSet whose generation moved past `before` (name -> generation), the
    moment it was first seen moving (its place in the order), its waves and the most pods seen unavailable."""
    deadline = time.monotonic() + timeout
    started, seen_unavailable, t0 = {}, {}, time.monotonic()
    while time.monotonic() < deadline:
        flux.check_alive()
        sets = cp.list_objects("apps/v1", "DaemonSet")
        for d in sets:
            key = f"DaemonSet {d['metadata']['namespace']}/{d['metadata']['name']}"
            if before is not None and d["metadata"]["generation"] != before.get(key):
                started.setdefault(key, round(time.monotonic() - t0, 1))
                unavailable = d["status"].get("desiredNumberScheduled", 0) - d["status"].get("numberAvailable", 0)
                seen_unavailable[key] = max(seen_unavailable.get(key, 0), unavailable)
        settled = all(d.get("status", {}).get("observedGeneration") == d["metadata"]["generation"]
                      and d["status"].get("updatedNumberScheduled", 0) == d["status"].get("desiredNumberScheduled")
                      == d["status"].get("numberReady") for d in sets)
        done = True
        for release, version in versions.items():
            hr = cp.read(HR, "HelmRelease", release, FLUX_NAMESPACE) or {}
            history = hr.get("status", {}).get("history", [])
            ready = flux.condition(HR, "HelmRelease", release)
            done &= bool(history) and history[0].get("chartVersion") == version and ready.get("status") == "True" \
                and ready.get("observedGeneration") == ready.get("generation")
        if done and settled:
            live = {f"DaemonSet {d['metadata']['namespace']}/{d['metadata']['name']}": d for d in sets}
            return {k: {"order": started[k], "waves": _live_waves(live[k]), "maxUnavailable": seen_unavailable[k]}
                    for k in sorted(started, key=started.get) if k in live}
        time.sleep(0.5)
    raise AssertionError(f"{versions} did not settle: "
                         f"{ {r: flux.condition(HR, 'HelmRelease', r) for r in versions} }")


def _generations(cp: rig.ControlPlane) -> dict[str, int]:
    return {f"DaemonSet {d['metadata']['namespace']}/{d['metadata']['name']}": d["metadata"]["generation"]
            for d in cp.list_objects("apps/v1", "DaemonSet")}


def _versions(dist: Path, cluster: str) -> dict[str, str]:
    """Release -> the chart version the cluster's HelmReleases in this output run: gpuop's chart (index.json),
    NFD's (its HelmRelease)."""
    out = {f"gpuop-{cluster}": json.loads((dist / "index.json").read_text())["clusters"][0]["chartVersion"]}
    for d in yaml.safe_load_all((dist / cluster / "flux" / "nfd-helmrelease.yaml").read_text()):
        out[d["metadata"]["name"]] = d["spec"]["chart"]["spec"]["version"]
    return out


def _predicted_waves(report: dict) -> dict[str, int]:
    """Watched DaemonSet -> the waves the impact preview gives the effects naming it (a driver's per pool, summed:
    one DaemonSet spanning the pools rolls them one after the other)."""
    out: dict[str, int] = {}
    for e in report["effects"]:
        for o in e["objects"]:
            if o.startswith("DaemonSet ") and e.get("waves") is not None:
                out[o] = out.get(o, 0) + e["waves"] if e["kind"] == "driver-reinstall" else max(out.get(o, 0), e["waves"])
    return out


def test_each_upgrade_rolls_exactly_the_daemonsets_the_impact_preview_names(bins, flux_bin, tmp_path, monkeypatch):
    """The upgrade lane: mig-sharing on release 26.3 delivered by Flux from one commit, then each change of the
    corpus (release move to 26.7, driver bump, MIG layout, sharing, component toggle) as the next commit, the
    cluster's flux objects of that commit applied as its owner applies them; the DaemonSets whose pod template
    changed (or that appeared), and the ConfigMaps and NodeFeatureRules whose content changed, are the ones
    `gpuop diff --impact` names as the causes of its effects for that change, no more, no fewer. Each rolled
    DaemonSet's order (NFD's release before the stack's: dependsOn) and waves are recorded beside it."""
    root = tmp_path
    monkeypatch.chdir(root)                 # gpuop's compile cache (.gpuop-cache) of this project, not the checkout's
    with Loopback(root / "srv") as lo:
        repo = lo.git_repository("gpu-clusters")
        _profiles_for(ROOT / "profiles", root / "all", f"{lo.base}/files/nfd", f"{lo.base}/files/nvidia", "unused")
        (root / "profiles").mkdir()
        for name in ("_base.yaml", f"{UPGRADE_CLUSTER}.yaml"):
            (root / "profiles" / name).write_bytes((root / "all" / name).read_bytes())
        profile = root / "profiles" / f"{UPGRADE_CLUSTER}.yaml"
        doc = yaml.safe_load(profile.read_text())
        doc["spec"]["release"] = MOVE[0]
        profile.write_text(yaml.safe_dump(doc, sort_keys=False))
        (root / "gpuop.yaml").write_text(yaml.safe_dump({
            "apiVersion": "gpuop/v1alpha1", "kind": "Settings",
            "gitops": {"repoURL": repo.url, "revision": "main", "path": "dist"}}))
        synth = ["synth", str(root / "profiles"), "-o", str(root / "dist"), "--settings", str(root / "gpuop.yaml")]
        flux_folder = root / "dist" / UPGRADE_CLUSTER / "flux"
        nfd_versions: set[str] = set()

        def commit(message: str) -> dict[str, str]:
            """Commit dist/, serve NFD's chart at every version a commit pinned; the releases' versions."""
            repo.commit({"dist": root / "dist"}, message)
            nfd_versions.update(_chart_versions(root / "dist", "node-feature-discovery"))
            lo.chart_repository("nfd", [(_nfd_module_dir() / NFD_CHART, v) for v in sorted(nfd_versions)])
            return _versions(root / "dist", UPGRADE_CLUSTER)

        assert main(synth) == 0
        versions = commit("gpuop synth")
        plan = _plans(root)[UPGRADE_CLUSTER]
        observed, predicted, rollouts, waves = {}, {}, {}, {}
        with rig.ControlPlane(root / "cp", binaries=bins) as cp:
            fl = _fleet_on(cp, plan)
            with Flux(cp, root / "flux", folder=flux_bin, ca=lo.ca, controllers=HELM_LANE) as flux, \
                    _agents(cp, plan, fl):
                assert flux.apply([flux_folder]) == []
                _settle(cp, flux, versions)
                for change in UPGRADES:
                    before, generations = _templates(cp), _generations(cp)
                    doc = yaml.safe_load(profile.read_text())
                    _edit(doc, change)
                    profile.write_text(yaml.safe_dump(doc, sort_keys=False))
                    report = _impact(root)
                    predicted[change] = _predicted_rolls(report)
                    assert main(synth) == 0
                    versions = commit(f"gpuop synth: {change}")
                    flux.reconcile_now(GIT, "GitRepository", "gpuop")
                    assert flux.apply([flux_folder]) == []           # the commit's HelmReleases, as the owner applies them
                    # NFD's repository index gained the new release's chart: fetched now, not at its 10m interval
                    flux.reconcile_now(GIT, "HelmRepository", "node-feature-discovery")
                    for release in versions:
                        flux.reconcile_now(HR, "HelmRelease", release)
                    rollouts[change] = _settle(cp, flux, versions, generations)
                    after = _templates(cp)
                    observed[change] = sorted(k for k in after if before.get(k) != after[k])
                    waves[change] = ({k: r["waves"] for k, r in rollouts[change].items()}, _predicted_waves(report))
        print(json.dumps({"observed": observed, "predicted": predicted, "rollouts": rollouts, "waves": waves},
                         indent=1))
        assert observed == {c: sorted(p) for c, p in predicted.items()}
        # each change is one the preview sees reaching the nodes, with the effect it names
        assert {c: sorted({k for ks in p.values() for k in ks}) for c, p in predicted.items()} == {
            "release move": RELEASE_MOVE_EFFECTS,
            "driver bump": ["driver-reinstall"], "MIG layout": ["mig-reconfigure"],
            "sharing": ["plugin-config-switch"], "component toggle": ["metrics-gap"]}
        # waves: the rounds the DaemonSet controller rolls each DaemonSet in (its live update strategy over its
        # pods' nodes) are the preview's, wherever the preview gives a count: the MIG manager's over the MIG-capable
        # pools' 10 nodes, the MPS control daemon's over the MPS pool's 4, the others' over all 20
        for change, (live, preview) in waves.items():
            differ = {k: (live[k], preview[k]) for k in live.keys() & preview.keys() if live[k] != preview[k]}
            assert differ == {}, (change, differ)
        assert waves["release move"][0]["DaemonSet gpu-operator/nvidia-mig-manager"] == 10
        assert waves["release move"][0]["DaemonSet gpu-operator/nvidia-device-plugin-mps-control-daemon"] == 4
        # the order Flux keeps: NFD's release is upgraded before the stack's (the stack's dependsOn)
        move = rollouts["release move"]
        nfd_worker = next(k for k in move if k.startswith(f"DaemonSet {fleet.NFD_NAMESPACE}/"))
        assert all(move[nfd_worker]["order"] <= r["order"] for r in move.values()), move
