"""Operator mode's companion delivery (outputs/addons.py): gpuop's own objects (alerts, dashboards, queues) packaged
as the chart `<cluster>-gpuop-addons` and delivered beside NVIDIA's chart. The chart renders with Helm's own engine
(helm-python-sdk) to its rendered manifests and to the same objects as the preview; every object passes the strict
schema checks the stack's pass; the Flux and Argo CD objects validate against the engines' CRDs and wait for NVIDIA's
release; stack-mode outputs do not change; a companion change is a non-destructive effect of `gpuop diff --impact`.

Set GPUOP_UPDATE_GOLDEN=1 to rewrite tests/golden/keep-operator-addons/ after an intended change."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import helm_python as helm
import pytest
import yaml

from gpuop.kube import components
from gpuop.kube.yamlio import load, load_all
from gpuop.ops import impact
from gpuop.outputs import addons
from gpuop.verify import cel
from gpuop.verify.crdschema import CrdValidator
from gpuop.verify.kubeschema import KubeValidator
from gpuop.verify.output import check_kueue_schema

from conftest import CRDS, REPO, by_key, load_dir, run_main
from test_openshift import PROMRULE_SCHEMA, _crd
from test_operator_impact import compiled, project  # noqa: F401 - the in-process compile and its project fixture

GOLDEN = Path(__file__).parent / "golden" / "keep-operator-addons"
KEEP = "keep-operator"


def _entry(index: dict, name: str = KEEP) -> dict:
    return next(e for e in index["clusters"] if e["name"] == name)


def _render(chart_dir: Path, release: str, namespace: str) -> list[dict]:
    chart = helm.Chart.load(str(chart_dir))
    try:
        out = chart.render({}, name=release, namespace=namespace)
    finally:
        chart.close()
    return [o for path in sorted(out) if not path.endswith("NOTES.txt") for o in load_all(out[path])]


@pytest.fixture(scope="module")
def engine_crds() -> CrdValidator:
    return CrdValidator.from_files([CRDS / "argoproj.io_applications.yaml", CRDS / "argoproj.io_applicationsets.yaml",
                                    CRDS / "helm.toolkit.fluxcd.io_helmreleases.yaml",
                                    CRDS / "source.toolkit.fluxcd.io_gitrepositories.yaml",
                                    CRDS / "source.toolkit.fluxcd.io_helmrepositories.yaml"])


def test_the_companion_components_are_marked_once_in_the_component_table():
    assert components.COMPANION == tuple(r.name for r in components.BY_RANK if r.companion)
    assert set(components.COMPANION) == {"gpu-alerts", "dashboards", "queues", "health-gate"}


def test_keep_operator_companion_chart_lints_and_renders_with_helm_to_its_manifests_and_the_preview(dist, index):
    e = _entry(index)
    a = e["addons"]
    assert a["name"] == "keep-operator-gpuop-addons" and a["components"] == ["gpu-alerts", "dashboards", "health-gate"]
    result = helm.lint(str(dist / a["chart"]), strict=True, kube_version=f"v{e['kubeVersion']}.0")
    assert not [m for m in result.get("messages", []) if m.get("severity", 0) >= 2] and not result.get("errors"), result
    rendered = by_key(_render(dist / a["chart"], a["releaseName"], e["namespace"]))
    manifests = by_key(load_dir(dist / a["manifests"]))
    assert rendered == manifests
    preview = by_key(load_dir(dist / e["manifests"]))          # operator mode: the preview's manifests
    assert {k: preview[k] for k in manifests} == manifests
    assert {k[0] for k in manifests} == {"PrometheusRule", "ConfigMap", "Job"}     # alerts, dashboards, health gate
    chart = load((dist / a["chart"] / "Chart.yaml").read_text())
    assert chart["name"] == a["name"] and chart["version"] == e["chartVersion"]    # versioned with the cluster's lock


def test_every_companion_object_passes_the_strict_schema_checks_of_the_stack(dist, index):
    rules = CrdValidator()
    rules.add_crd(_crd("monitoring.coreos.com", "PrometheusRule", "v1", PROMRULE_SCHEMA), "prometheus-operator v1")
    checked = set()
    for e in index["clusters"]:
        if "addons" not in e:
            continue
        kube = KubeValidator(e["kubeVersion"])
        for o in load_dir(dist / e["addons"]["manifests"]):
            if o["apiVersion"].startswith("kueue.x-k8s.io/"):
                errors = check_kueue_schema(o)
            elif rules.has_schema(o["apiVersion"], o["kind"]):
                errors = rules.errors(o)
            else:
                errors = kube.errors(o)
            assert errors == [], (e["name"], o["kind"], o["metadata"]["name"], errors)
            checked.add(o["kind"])
    assert {"PrometheusRule", "ConfigMap"} <= checked


def test_companion_flux_and_argocd_objects_validate_against_the_engines_crds_and_follow_nvidias(dist, index, engine_crds):
    e = _entry(index)
    flux = {o["metadata"]["name"]: o for o in load_dir(dist / e["flux"])}
    argo = {o["metadata"]["name"]: o for o in load_dir(dist / e["argocd"])}
    fleet = load((dist / "fleet" / "argocd" / "applicationset-addons.yaml").read_text())
    for obj in [*flux.values(), *argo.values(), fleet]:
        assert engine_crds.errors(obj) == [] and cel.errors(obj) == [], (obj["kind"], engine_crds.errors(obj))
    release, nvidia = flux["gpuop-keep-operator-addons"], flux["gpuop-keep-operator"]
    assert release["spec"]["dependsOn"] == [{"name": nvidia["metadata"]["name"], "namespace": nvidia["metadata"]["namespace"]}]
    assert release["spec"]["targetNamespace"] == nvidia["spec"]["targetNamespace"] == e["namespace"]
    assert release["spec"]["chart"]["spec"]["sourceRef"] == {"kind": "GitRepository", "name": "gpuop",
                                                             "namespace": "flux-system"}
    assert flux["gpuop"]["kind"] == "GitRepository"
    assert "createNamespace" not in release["spec"]["install"]       # the namespace is NVIDIA's release's
    app, op = argo["gpuop-keep-operator-addons"], argo["gpuop-keep-operator"]
    wave = lambda a: int((a["metadata"].get("annotations") or {}).get("argocd.argoproj.io/sync-wave", "0"))  # noqa: E731
    assert wave(app) > wave(op)
    assert app["spec"]["source"]["path"].endswith(e["addons"]["chart"])
    assert "CreateNamespace=false" in app["spec"]["syncPolicy"]["syncOptions"]
    params = json.loads((dist / KEEP / "params" / "addons.json").read_text())
    assert params["sourcePath"] == app["spec"]["source"]["path"] and params["releaseName"] == e["addons"]["releaseName"]
    assert release["spec"]["releaseName"] == app["spec"]["source"]["helm"]["releaseName"] == "gpuop-addons"
    assert "addons" in e["hub"]


def test_golden_files_of_the_companion_delivery(dist, index):
    e = _entry(index)
    files = {p.relative_to(dist / e["addons"]["chart"]).as_posix(): p.read_text()
             for p in sorted((dist / e["addons"]["chart"]).rglob("*")) if p.is_file() and p.name != "Chart.yaml"}
    files["flux-addons-helmrelease.yaml"] = (dist / KEEP / "flux" / "addons-helmrelease.yaml").read_text()
    files["argocd-addons-application.yaml"] = (dist / KEEP / "argocd" / "addons-application.yaml").read_text()
    for name, text in files.items():
        path = GOLDEN / name.replace("/", "__")
        if os.environ.get("GPUOP_UPDATE_GOLDEN"):
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        assert path.exists(), f"missing golden {path}; run with GPUOP_UPDATE_GOLDEN=1"
        assert path.read_text() == text, f"{path} differs; review and run with GPUOP_UPDATE_GOLDEN=1"


# ---- in-process compiles ----------------------------------------------------------------------------

def _operator(doc: dict) -> dict:
    doc = json.loads(json.dumps(doc))
    doc["spec"]["delivery"] = {"mode": "operator", "operator": {"install": "helm"}}
    return doc


def test_an_operator_profile_with_queues_alerts_and_dashboards_delivers_all_three(project):
    doc = _operator(yaml.safe_load((REPO / "profiles" / "mig-sharing.yaml").read_text()))
    doc["spec"]["alerts"] = {"prometheusRule": True}
    assert doc["spec"]["queues"]["enabled"]
    tree = compiled(project, doc)
    base = "mig-sharing/addons/manifests/"
    kinds = {o["kind"] for p, t in tree.items() if p.startswith(base) and not p.endswith("kustomization.yaml")
             for o in load_all(t.decode())}
    assert {"PrometheusRule", "ConfigMap", "ResourceFlavor", "ClusterQueue", "LocalQueue"} <= kinds
    assert sorted(p.removeprefix(base) for p in tree if p.startswith(base)) == [
        "15-gpu-alerts.yaml", "16-dashboards.yaml", "17-queues.yaml", "18-health-gate.yaml", "kustomization.yaml"]
    chart = "mig-sharing/addons/chart/templates/"
    assert sorted(p.removeprefix(chart) for p in tree if p.startswith(chart)) == [
        "15-gpu-alerts.yaml", "16-dashboards.yaml", "17-queues.yaml", "18-health-gate.yaml"]
    assert "mig-sharing/flux/addons-helmrelease.yaml" in tree and "mig-sharing/argocd/addons-application.yaml" in tree


def test_stack_mode_outputs_do_not_depend_on_the_companion_marks(project, monkeypatch):
    """The companion is operator mode's alone: with the table's marks removed, every stack-mode example compiles to
    the same bytes; an operator-mode one loses its companion."""
    docs = {p.stem: yaml.safe_load(p.read_text()) for p in sorted((REPO / "profiles").glob("[!_]*.yaml"))}
    stack = [d for d in docs.values() if (d["spec"].get("delivery") or {}).get("mode", "stack") == "stack"]
    assert len(stack) >= 5
    with_marks = {d["metadata"]["name"]: compiled(project, d) for d in stack}
    keep = compiled(project, docs[KEEP])
    monkeypatch.setattr(addons, "COMPANION", ())
    for d in stack:
        name = d["metadata"]["name"]
        assert compiled(project, d) == with_marks[name], name
    assert not any(p.startswith(f"{KEEP}/addons/") for p in compiled(project, docs[KEEP]))
    assert any(p.startswith(f"{KEEP}/addons/") for p in keep)


def test_a_dashboard_change_in_operator_mode_is_a_non_destructive_companion_effect(project):
    doc = yaml.safe_load((REPO / "profiles" / f"{KEEP}.yaml").read_text())
    old = compiled(project, doc)
    doc["spec"]["dashboards"] = {"folder": "GPU fleet"}
    new = compiled(project, doc)
    effects = impact.impact(old, new)
    assert [(e.kind, e.destructive, e.type) for e in effects] == [("companion-update", False, "companion")]
    assert effects[0].text == ("gpuop's own objects beside NVIDIA's operator change (dashboards): the companion "
                               "release keep-operator-gpuop-addons upgrades; nothing on the nodes")


def test_diff_shows_the_companion_change(tmp_path):
    shutil.copytree(REPO / "profiles", tmp_path / "profiles")
    shutil.copy(REPO / "gpuop.yaml", tmp_path / "gpuop.yaml")
    assert run_main("synth", "profiles", "-o", "dist", cwd=tmp_path).returncode == 0
    path = tmp_path / "profiles" / f"{KEEP}.yaml"
    path.write_text(path.read_text().replace("  dcgmExporter:\n", "  dashboards: {folder: GPUs}\n  dcgmExporter:\n"))
    r = run_main("diff", "profiles", "-o", "dist", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "  ~ addons/manifests/16-dashboards.yaml\n      metadata.annotations.grafana_folder: GPU -> GPUs\n" in r.stdout
    assert "  ~ addons/chart/templates/16-dashboards.yaml\n      ~ ConfigMap gpu-operator/gpuop-dashboards\n" in r.stdout


def test_a_companion_object_written_wrong_is_refused_by_validate_dist(dist, tmp_path):
    out = tmp_path / "dist"
    shutil.copytree(dist, out)
    f = out / KEEP / "addons" / "manifests" / "16-dashboards.yaml"
    f.write_text(f.read_text().replace("kind: ConfigMap", "kind: ConfigMap\nbogus: 1", 1))
    r = run_main("validate", str(out), cwd=tmp_path)
    assert r.returncode == 2 and "16-dashboards.yaml" in r.stderr and "bogus" in r.stderr, r.stderr



@pytest.mark.parametrize("extra", [50, 51])
def test_a_cluster_name_too_long_for_the_companions_objects_is_refused_located(tmp_path, extra):
    shutil.copytree(REPO / "profiles", tmp_path / "profiles")
    shutil.copy(REPO / "gpuop.yaml", tmp_path / "gpuop.yaml")
    path = tmp_path / "profiles" / f"{KEEP}.yaml"
    name = (KEEP + "-" + "x" * 60)[:extra]
    path.write_text(path.read_text().replace(f"  name: {KEEP}\n", f"  name: {name}\n"))
    r = run_main("validate", str(path.relative_to(tmp_path)), cwd=tmp_path)
    if extra == 50:
        assert r.returncode == 0, r.stderr
        return
    assert r.returncode == 2
    assert r.stderr == (
        f'profiles/{KEEP}.yaml:13:3: metadata.name: Invalid value: "{name}": Too long: must have at most 50 bytes in '
        "operator mode: gpuop's own objects (alerts, dashboards, queues) are delivered beside NVIDIA's operator by the "
        f'Flux HelmRelease and Argo CD Application "gpuop-{name}-addons", a name the engines write as a label value '
        "(at most 63 characters); choose a shorter cluster name, or turn spec.dashboards, spec.queues and "
        "spec.alerts.prometheusRule off\ngpuop: 1 error; nothing written\n")
