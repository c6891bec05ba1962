"""Flux's own controllers (source-, kustomize-, helm-controller of Flux v2.9.5, built from the Go module proxy)
reconcile what gpuop writes, on the rehearsal rig's control plane with each cluster's simulated GPU fleet.

What a user does, step by step: `gpuop synth` with settings naming the git repository; commit dist/; apply
the cluster's dist/<cluster>/flux objects exactly as written. The git repository and NFD's chart repository
are served on loopback over HTTPS. The lane is opt-in: Flux's first build takes about half an hour on two
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

from gpuop.cli.main import main
from gpuop.rehearse import fleet, rig
from gpuop.rehearse.gitops import FLUX_NAMESPACE, HELM_LANE, Flux, Loopback, flux_dir

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not os.environ.get("GPUOP_GITOPS"),
                                 reason="the GitOps lane is opt-in: `make test-gitops` builds Flux's controllers and "
                                        "runs it")]

ROOT = Path(__file__).resolve().parents[1]
HR = "helm.toolkit.fluxcd.io/v2"
GIT = "source.toolkit.fluxcd.io/v1"
NFD_CHART = Path("deployment/helm/node-feature-discovery")


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


def _profiles_for(src: Path, dst: Path, nfd_repo: str) -> None:
    """The example profiles, NFD's chart pulled from the loopback mirror (spec.nfd.chartRepository) where
    gpuop deploys NFD: the only change a mirror-only cluster's owner makes."""
    dst.mkdir(parents=True)
    for f in sorted(src.glob("*.yaml")):
        doc = yaml.safe_load(f.read_text())
        spec = doc.setdefault("spec", {})
        platform = (spec.get("platform") or {}).get("type")
        nfd = spec.get("nfd") or {}
        if not f.name.startswith("_") and platform != "openshift" and nfd.get("mode") != "existing":
            spec["nfd"] = {**nfd, "chartRepository": nfd_repo}
        (dst / f.name).write_text(yaml.safe_dump(doc, sort_keys=False))


@pytest.fixture(scope="module")
def delivered(tmp_path_factory):
    """One loopback server, one synth of every profile, one commit: what every cluster's Flux pulls."""
    root = tmp_path_factory.mktemp("gitops")
    with Loopback(root / "srv") as lo:
        repo = lo.git_repository("gpu-clusters")
        nfd_url = f"{lo.base}/files/nfd"
        _profiles_for(ROOT / "profiles", root / "profiles", nfd_url)
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
        yield {"root": root, "dist": root / "dist", "lo": lo, "repo": repo, "sha": sha}


def _plans(root: Path):
    from gpuop.pipeline.run import plan_all
    plans, _ = plan_all([root / "profiles"])
    return {p.name: p for p in plans}


def _fleet_on(cp: rig.ControlPlane, plan) -> fleet.Fleet:
    """The cluster's fake GPU nodes with what nfd-worker would report, and nfd-master labelling them."""
    fl = fleet.build(plan)
    prom = _module_dir(PROMETHEUS_OPERATOR) / "example" / "prometheus-operator-crd"
    problems = cp.apply([rig.nfd_crds(next(iter(cp._bins.values())).parent),
                         *(prom / f"monitoring.coreos.com_{k}.yaml" for k in PROMETHEUS_CRDS)])
    assert not problems, problems
    cp.request("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                              "metadata": {"name": fleet.NFD_NAMESPACE}})
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
                c = flux.wait_ready(api, kind, name, o["metadata"].get("namespace", FLUX_NAMESPACE))
                seen[f"{kind}/{name}"] = (c.get("status"), c.get("reason"), c.get("message", "")[:300])
            git = cp.read(GIT, "GitRepository", "gpuop", FLUX_NAMESPACE) or {}
            seen["revision"] = git.get("status", {}).get("artifact", {}).get("revision", "")
            # Ready releases are not settled DaemonSets: kwok brings the pods up node by node after the
            # install, so the counts are read once they agree (or the bound ends and the test shows them)
            deadline = time.monotonic() + 300
            while True:
                seen["daemonsets"] = _daemonsets(cp, plan.namespace)
                settled = seen["daemonsets"] and all(d == r for d, r in seen["daemonsets"].values())
                if settled or time.monotonic() > deadline:
                    break
                time.sleep(2)
            releases = [o for o in objs if o["kind"] == "HelmRelease"]
            seen["installed"] = {o["metadata"]["name"]: [
                (h.get("chartName"), h.get("chartVersion"), h.get("status"))
                for h in (cp.read(HR, "HelmRelease", o["metadata"]["name"], FLUX_NAMESPACE) or {})
                .get("status", {}).get("history", [])] for o in releases}
    return seen


# the clusters proven so far (docs/rehearsal.md, GitOps: where the others stand)
CLUSTERS = ("full-stack", "mig-sharing")


@pytest.mark.parametrize("cluster", CLUSTERS)
def test_flux_delivers_the_cluster_from_git_and_its_operands_run_on_the_fleet(delivered, bins, flux_bin,
                                                                           tmp_path, cluster):
    plan = _plans(delivered["root"])[cluster]
    seen = deliver(delivered, plan, bins, flux_bin, tmp_path)
    print(seen)
    assert seen["refused"] == []
    assert seen["revision"] == f"main@sha1:{delivered['sha']}"
    not_ready = {k: v for k, v in seen.items() if "/" in k and isinstance(v, tuple) and v[0] != "True"}
    assert not_ready == {}
    assert seen["daemonsets"], "no DaemonSet of the GPU stack"
    assert {n: d for n, d in seen["daemonsets"].items() if d[0] != d[1]} == {}
    assert sum(d[0] for d in seen["daemonsets"].values()) > 0

