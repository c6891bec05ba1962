"""Argo CD and Flux objects validate against the upstream CRDs (../shared/refs/crds, strict
openAPIV3Schema), point at what synth wrote, and set what Flux needs."""

from __future__ import annotations

import pytest

from gpuop.verify.crdschema import CrdValidator
from gpuop.kube.yamlio import load

from conftest import CRDS, load_dir, stack_clusters


@pytest.fixture(scope="module")
def crds() -> CrdValidator:
    assert CRDS.is_dir(), f"upstream CRDs expected at {CRDS}"
    return CrdValidator.from_files([CRDS / "argoproj.io_applications.yaml", CRDS / "argoproj.io_appprojects.yaml",
                                    CRDS / "helm.toolkit.fluxcd.io_helmreleases.yaml",
                                    CRDS / "source.toolkit.fluxcd.io_gitrepositories.yaml",
                                    CRDS / "source.toolkit.fluxcd.io_helmrepositories.yaml"])


def test_gitops_objects_validate_against_upstream_crds(dist, index, crds):
    for entry in stack_clusters(index):
        objs = load_dir(dist / entry["argocd"]) + load_dir(dist / entry["flux"])
        # + HelmRepository for NFD's chart and NFD's AppProject when the profile deploys NFD (spec.nfd.mode: deploy)
        assert {o["kind"] for o in objs} <= {"Application", "AppProject", "GitRepository", "HelmRelease", "HelmRepository"}
        for obj in objs:
            assert crds.errors(obj) == [], (entry["name"], obj["kind"], crds.errors(obj))


def test_helmrelease_sets_what_flux_needs(dist, index):
    settings = load((dist.parent / "gpuop.yaml").read_text())["gitops"]
    for entry in stack_clusters(index):
        hr = next(o for o in load_dir(dist / entry["flux"])
                  if o["kind"] == "HelmRelease" and o["metadata"]["name"] == f"gpuop-{entry['name']}")
        spec = hr["spec"]
        assert ("chart" in spec) != ("chartRef" in spec), "exactly one of chart / chartRef"
        assert spec["install"]["crds"] == "CreateReplace" and spec["upgrade"]["crds"] == "CreateReplace"
        assert spec["releaseName"] == entry["releaseName"] and spec["targetNamespace"] == entry["namespace"]
        chart_path = spec["chart"]["spec"]["chart"]
        assert chart_path == f"./{settings['path']}/{entry['chart']}"
        assert (dist / entry["chart"] / "Chart.yaml").is_file()
        assert spec["chart"]["spec"]["reconcileStrategy"] == "ChartVersion"


def test_application_points_at_the_chart(dist, index):
    settings = load((dist.parent / "gpuop.yaml").read_text())["gitops"]
    for entry in stack_clusters(index):
        (app,) = [a for a in load_dir(dist / entry["argocd"]) if a["metadata"]["name"] == f"gpuop-{entry['name']}"]
        src = app["spec"]["source"]
        assert src["repoURL"] == settings["repoURL"] and src["targetRevision"] == settings["revision"]
        assert src["path"] == f"{settings['path']}/{entry['chart']}"
        assert src["helm"]["releaseName"] == entry["releaseName"]
        assert src["helm"]["kubeVersion"] == entry["kubeVersion"]
        assert app["spec"]["destination"]["namespace"] == entry["namespace"]


def test_crd_check_rejects_a_broken_helmrelease(dist, index, crds):
    entry = index["clusters"][0]
    hr = next(o for o in load_dir(dist / entry["flux"]) if o["kind"] == "HelmRelease")
    hr["spec"]["interval"] = "ten minutes"
    assert crds.errors(hr)
