"""Flux's own controllers (source-, kustomize-, helm-controller of Flux v2.9.5, built from the Go module proxy)
reconcile what gpuop writes, on the rehearsal rig's control plane with each cluster's simulated GPU fleet.

What a user does, step by step: `gpuop synth` with settings naming the git repository; commit dist/; apply
the cluster's dist/<cluster>/flux objects exactly as written. The git repository, NFD's and NVIDIA's chart
repositories and an OCI registry holding the DRA driver's chart are served on loopback over HTTPS. Every
example cluster is delivered; the dra cluster's releases install in their dependsOn order; and the upgrade
lane checks that each change of a corpus rolls what `gpuop diff --impact` says (docs/gitops-rehearsal.md). The lane is opt-in: Flux's first build takes about half an hour on two
cores, which CI's budget does not hold beside the rig's, so `make test-gitops` builds Flux and runs this file
(GPUOP_GITOPS=1, where a missing binary fails); the default suite skips it, saying how to run it. The rig itself: skipped only when it cannot be built and CI is unset."""

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
from gpuop.rehearse import fleet, rig
from gpuop.rehearse.gitops import FLUX_NAMESPACE, HELM_LANE, Flux, Loopback, OciRegistry, flux_dir

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not os.environ.get("GPUOP_GITOPS"),
                                 reason="the GitOps lane is opt-in: `make test-gitops` builds Flux's controllers and "
                                        "runs it")]

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


@pytest.fixture(scope="module")
def flux_bin() -> Path:
    wanted = bool(os.environ.get("GPUOP_GITOPS"))          # `make test-gitops`: build Flux, a missing one fails
    try:
        return flux_dir(build=wanted, controllers=HELM_LANE)
    except rig.RigError as e:
        if wanted:
            pytest.fail(f"Flux's controllers are missing: {e}")
        pytest.skip(f"{e}; `make test-gitops` builds them and runs this lane")


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
    # NFD's, and the tenants' namespaces the DRA claim templates live in: the user's, which gpuop does not create
    tenants = {t.namespace for t in plan.dra.claim_templates} if plan.dra is not None else set()
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


def deliver(delivered, plan, bins, flux_bin, workdir: Path) -> dict:
    """One cluster on a fresh control plane: its fleet, Flux, its dist/<cluster>/flux objects as written;
    what Flux and the cluster say once the releases are Ready (or the wait ends)."""
    folder = delivered["dist"] / plan.name / "flux"
    objs = [d for f in sorted(folder.glob("*.yaml")) for d in yaml.safe_load_all(f.read_text()) if d]
    seen: dict = {"cluster": plan.name, "objects": sorted(f"{o['kind']}/{o['metadata']['name']}" for o in objs)}
    with rig.ControlPlane(workdir / "cp", binaries=bins) as cp:
        fl = _fleet_on(cp, plan)
        seen["nodes"] = len(fl.nodes)
        with Flux(cp, workdir / "flux", folder=flux_bin, ca=delivered["lo"].ca, controllers=HELM_LANE) as flux:
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
            # Ready releases are not settled DaemonSets: kwok brings the pods up node by node after the
            # install, so the counts are read once they agree (or the bound ends and the test shows them)
            deadline = time.monotonic() + 300
            while True:
                seen["daemonsets"] = _daemonsets(cp, plan.namespace)
                settled = seen["daemonsets"] and all(d == r for d, r in seen["daemonsets"].values())
                if settled or time.monotonic() > deadline:
                    break
                time.sleep(2)
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


# ---- the upgrade lane: one commit's output, then the next one's ----------------------------------------

UPGRADE_CLUSTER = "mig-sharing"


def _edit(doc: dict, change: str) -> None:
    """One change of the corpus, as a user edits the profile."""
    spec = doc["spec"]
    pools = {p["name"]: p for p in spec["nodePools"]}
    if change == "driver bump":
        spec["driver"] = {**(spec.get("driver") or {}), "version": "595.91.07"}
    elif change == "MIG layout":
        pools["train"]["mig"]["layout"] = {"2g.20gb": 2, "1g.10gb": 3}
    elif change == "sharing":
        pools["infer"]["sharing"]["timeSlicing"]["replicas"] = 8
    elif change == "component toggle":
        spec["dcgm"] = {"enabled": True}
    else:
        raise AssertionError(change)


UPGRADES = ("driver bump", "MIG layout", "sharing", "component toggle")


# what an effect of the impact preview names as its cause, and the part of it the cluster acts on: a DaemonSet's
# pod template (its pods roll), a ConfigMap's data (the MIG manager's / device plugin's config), a
# NodeFeatureRule's rules (the nvidia.com/mig.config and device-plugin.config node labels)
WATCHED = (("apps/v1", "DaemonSet", lambda o: o["spec"]["template"]),
           ("v1", "ConfigMap", lambda o: o.get("data")),
           ("nfd.k8s-sigs.io/v1alpha1", "NodeFeatureRule", lambda o: o.get("spec")))


def _templates(cp: rig.ControlPlane) -> dict[str, object]:
    """Every watched object, keyed as the impact preview names objects ("Kind namespace/name", "Kind name")."""
    out: dict[str, object] = {}
    for api, kind, part in WATCHED:
        for o in cp.list_objects(api, kind):
            ns = o["metadata"].get("namespace")
            if ns == "kube-system" or o["metadata"]["name"] == "kube-root-ca.crt":
                continue                    # the API server's own, not the output's
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


def _settle(cp: rig.ControlPlane, flux: Flux, release: str, version: str, timeout: float = 400) -> dict:
    """Until the release runs this chart version, Ready, and every DaemonSet's pods are updated and ready."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        flux.check_alive()
        hr = cp.read(HR, "HelmRelease", release, FLUX_NAMESPACE) or {}
        history = hr.get("status", {}).get("history", [])
        ready = flux.condition(HR, "HelmRelease", release)
        sets = [d for d in cp.list_objects("apps/v1", "DaemonSet")]
        settled = all(d.get("status", {}).get("observedGeneration") == d["metadata"]["generation"]
                      and d["status"].get("updatedNumberScheduled", 0) == d["status"].get("desiredNumberScheduled")
                      == d["status"].get("numberReady") for d in sets)
        if history and history[0].get("chartVersion") == version and ready.get("status") == "True" and settled:
            return hr
        time.sleep(2)
    raise AssertionError(f"{release} did not settle at {version}: {flux.condition(HR, 'HelmRelease', release)}")


def test_each_upgrade_rolls_exactly_the_daemonsets_the_impact_preview_names(bins, flux_bin, tmp_path, monkeypatch):
    """The upgrade lane: mig-sharing delivered by Flux from one commit, then each change of the corpus
    (driver bump, MIG layout, sharing, component toggle) as the next commit; the DaemonSets whose pod template
    changed (or that appeared), and the ConfigMaps and NodeFeatureRules whose content changed, are the ones
    `gpuop diff --impact` names as the causes of its effects for that change, no more, no fewer."""
    root = tmp_path
    monkeypatch.chdir(root)                 # gpuop's compile cache (.gpuop-cache) of this project, not the checkout's
    with Loopback(root / "srv") as lo:
        repo = lo.git_repository("gpu-clusters")
        _profiles_for(ROOT / "profiles", root / "all", f"{lo.base}/files/nfd", f"{lo.base}/files/nvidia", "unused")
        (root / "profiles").mkdir()
        for name in ("_base.yaml", f"{UPGRADE_CLUSTER}.yaml"):
            (root / "profiles" / name).write_bytes((root / "all" / name).read_bytes())
        (root / "gpuop.yaml").write_text(yaml.safe_dump({
            "apiVersion": "gpuop/v1alpha1", "kind": "Settings",
            "gitops": {"repoURL": repo.url, "revision": "main", "path": "dist"}}))
        synth = ["synth", str(root / "profiles"), "-o", str(root / "dist"), "--settings", str(root / "gpuop.yaml")]
        assert main(synth) == 0
        repo.commit({"dist": root / "dist"}, "gpuop synth")
        lo.chart_repository("nfd", [(_nfd_module_dir() / NFD_CHART, v)
                                    for v in _chart_versions(root / "dist", "node-feature-discovery")])
        plan = _plans(root)[UPGRADE_CLUSTER]
        release = f"gpuop-{UPGRADE_CLUSTER}"
        observed, predicted = {}, {}
        with rig.ControlPlane(root / "cp", binaries=bins) as cp:
            _fleet_on(cp, plan)
            with Flux(cp, root / "flux", folder=flux_bin, ca=lo.ca, controllers=HELM_LANE) as flux:
                assert flux.apply([root / "dist" / UPGRADE_CLUSTER / "flux"]) == []
                version = json.loads((root / "dist" / "index.json").read_text())["clusters"][0]["chartVersion"]
                _settle(cp, flux, release, version)
                for change in UPGRADES:
                    before = _templates(cp)
                    profile = root / "profiles" / f"{UPGRADE_CLUSTER}.yaml"
                    doc = yaml.safe_load(profile.read_text())
                    _edit(doc, change)
                    profile.write_text(yaml.safe_dump(doc, sort_keys=False))
                    predicted[change] = _predicted_rolls(_impact(root))
                    assert main(synth) == 0
                    repo.commit({"dist": root / "dist"}, f"gpuop synth: {change}")
                    version = json.loads((root / "dist" / "index.json").read_text())["clusters"][0]["chartVersion"]
                    flux.reconcile_now(GIT, "GitRepository", "gpuop")
                    flux.reconcile_now(HR, "HelmRelease", release)
                    _settle(cp, flux, release, version)
                    after = _templates(cp)
                    observed[change] = sorted(k for k in after if before.get(k) != after[k])
        print(json.dumps({"observed": observed, "predicted": predicted}, indent=1))
        assert observed == {c: sorted(p) for c, p in predicted.items()}
        # each change is one the preview sees reaching the nodes, with the effect it names
        assert {c: sorted({k for ks in p.values() for k in ks}) for c, p in predicted.items()} == {
            "driver bump": ["driver-reinstall"], "MIG layout": ["mig-reconfigure"],
            "sharing": ["plugin-config-switch"], "component toggle": ["metrics-gap"]}
