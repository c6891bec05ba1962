"""Argo CD's generator lane (constructs/gpuop/rehearse/argocd.py): the Applications gpuop's ApplicationSets
create from gpuop's committed output, computed as the ApplicationSet controller computes them, and every
Argo CD object gpuop writes, server-side applied to the rehearsal API server with Argo CD's own CRDs.

Argo CD's controllers are not built (docs/gitops-rehearsal.md: why, with the module proxy's error), so
nothing syncs here: this proves the API server accepts every Application the fleet's ApplicationSets would
create and every Application, ApplicationSet and AppProject gpuop writes, as Argo CD's CRDs define them."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml

from conftest import CRDS
from gpuop.cli.main import main
from gpuop.rehearse import rig
from gpuop.rehearse.argocd import TemplateError, generated, render

ROOT = Path(__file__).resolve().parents[1]
ARGOCD_CRDS = ("argoproj.io_applications.yaml", "argoproj.io_applicationsets.yaml", "argoproj.io_appprojects.yaml")


@pytest.fixture(scope="module")
def dist(tmp_path_factory) -> Path:
    """Every example cluster compiled, as it is committed (the repository root holds dist/)."""
    root = tmp_path_factory.mktemp("argocd")
    (root / "gpuop.yaml").write_text(yaml.safe_dump({
        "apiVersion": "gpuop/v1alpha1", "kind": "Settings",
        "gitops": {"repoURL": "https://git.example.com/platform/gpu-clusters.git", "revision": "main",
                   "path": "dist"}}))
    assert main(["synth", str(ROOT / "profiles"), "-o", str(root / "dist"), "--settings", str(root / "gpuop.yaml")]) == 0
    return root


def _appsets(root: Path) -> list[dict]:
    return [d for f in sorted((root / "dist" / "fleet" / "argocd").glob("applicationset*.yaml"))
            for d in yaml.safe_load_all(f.read_text()) if d]


@pytest.mark.slow
def test_every_application_the_applicationsets_generate_and_every_argocd_object_gpuop_writes_is_accepted(
        dist, tmp_path):
    try:
        bins = rig.binaries(build=True)
    except rig.RigError as e:
        if os.environ.get("CI"):
            pytest.fail(f"the rehearsal rig is missing under CI: {e}")
        pytest.skip(f"the rehearsal rig cannot be built here: {e}")
    apps = [a for s in _appsets(dist) for a in generated(s, dist)]
    clusters = {p.parent.parent.name for p in (dist / "dist").glob("*/params/*.json")}
    # one Application per params file: every cluster, its NFD and DRA deliveries, operator mode's release
    assert len(apps) == len(list((dist / "dist").glob("*/params/*.json")))
    assert {a["metadata"]["labels"]["gpuop/cluster"] for a in apps} == clusters
    written = sorted((dist / "dist").glob("*/argocd/*.yaml")) + sorted((dist / "dist" / "fleet" / "argocd").glob("*.yaml"))
    with rig.ControlPlane(tmp_path / "cp", binaries=bins) as cp:
        assert cp.apply([CRDS / f for f in ARGOCD_CRDS]) == []
        cp.request("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                                  "metadata": {"name": "argocd"}})
        assert cp.apply(written, field_manager="gpuop-argocd-written") == []
        # the generated ones under their own names beside gpuop's own Applications: the same names, so the
        # ApplicationSet controller's field manager takes them over, as it would in a cluster that has both
        assert cp.apply(apps, field_manager="applicationset-controller") == []
        stored = {a["metadata"]["name"] for a in cp.list_objects("argoproj.io/v1alpha1", "Application")}
    assert {a["metadata"]["name"] for a in apps} <= stored


@pytest.mark.parametrize("template, params, want", [
    ("gpuop-{{.name}}", {"name": "a"}, "gpuop-a"),
    ("{{.path.basename}}", {"path": {"basename": "x"}}, "x"),
    ("a  {{- if eq .f \"true\" }} yes {{- else }} no {{- end }}", {"f": "true"}, "a yes"),
    ("a  {{- if eq .f \"true\" }} yes {{- else }} no {{- end }}", {"f": "false"}, "a no"),
    ("{{ if .on }}1{{ end }}", {"on": False}, ""),
])
def test_the_template_subset_renders_as_go_text_template(template, params, want):
    assert render(template, params) == want


@pytest.mark.parametrize("template, params", [
    ("{{.missing}}", {}),                                # missingkey=error
    ("{{ printf \"%s\" .name }}", {"name": "a"}),        # a function outside the subset
    ("{{ if .a }}x", {"a": True}),                       # unterminated
    ("{{ end }}", {}),
])
def test_a_template_outside_the_subset_or_a_missing_key_is_refused(template, params):
    with pytest.raises(TemplateError):
        render(template, params)


def test_a_generator_other_than_git_files_is_refused(tmp_path):
    appset = {"metadata": {"name": "x", "namespace": "argocd"},
              "spec": {"goTemplate": True, "generators": [{"list": {"elements": []}}], "template": {}}}
    with pytest.raises(TemplateError, match="git files generators only"):
        generated(appset, tmp_path)
