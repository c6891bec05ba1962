"""Ordering, health and drift settings of the compiled output, asserted on what synth wrote, and the
Flux alternatives (OCI source, overlay Kustomizations) validated against the upstream CRDs."""

from __future__ import annotations

import json
import shutil

import pytest
import yaml

from gpuop.verify import cel
from gpuop.verify.crdschema import CrdValidator
from gpuop.kube.yamlio import load

from conftest import CRDS, load_dir, run_gpuop, stack_clusters

WAVE = "argocd.argoproj.io/sync-wave"


@pytest.fixture(scope="module")
def crds() -> CrdValidator:
    return CrdValidator.from_files([CRDS / "argoproj.io_applications.yaml",
                                    CRDS / "helm.toolkit.fluxcd.io_helmreleases.yaml",
                                    CRDS / "kustomize.toolkit.fluxcd.io_kustomizations.yaml",
                                    CRDS / "source.toolkit.fluxcd.io_gitrepositories.yaml",
                                    CRDS / "source.toolkit.fluxcd.io_ocirepositories.yaml",
                                    CRDS / "source.toolkit.fluxcd.io_helmrepositories.yaml"])


def _wave(obj) -> int:
    return int(obj["metadata"].get("annotations", {}).get(WAVE, "0"))


def test_waves_put_namespace_rbac_config_before_workloads(dist, index):
    for c in stack_clusters(index):
        objs = load_dir(dist / c["manifests"])
        by_kind = {}
        for o in objs:
            by_kind.setdefault(o["kind"], set()).add(_wave(o))
        assert by_kind["Namespace"] == {-3}
        for k in ("ServiceAccount", "Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding"):
            assert by_kind.get(k, {-2}) == {-2}, k
        assert by_kind["ConfigMap"] == {-1}
        assert by_kind["DaemonSet"] == {0}
        assert all(_wave(o) == 0 for o in objs if o["kind"] in ("DaemonSet", "NodeFeatureRule", "ServiceMonitor"))


def test_nfd_before_the_stack_and_dry_run_skipped_for_custom_kinds(dist, index):
    for c in stack_clusters(index):
        apps = {a["metadata"]["name"]: a for a in load_dir(dist / c["argocd"])}
        gpu = apps[f"gpuop-{c['name']}"]
        opts = gpu["spec"]["syncPolicy"]["syncOptions"]
        assert "ServerSideApply=true" in opts and "RespectIgnoreDifferences=true" in opts
        custom = any(k[1] in ("NodeFeatureRule", "ServiceMonitor") for k in c["kinds"])
        assert ("SkipDryRunOnMissingResource=true" in opts) == custom
        if f"gpuop-{c['name']}-nfd" in apps:
            assert _wave(apps[f"gpuop-{c['name']}-nfd"]) < _wave(gpu)
            hr = next(o for o in load_dir(dist / c["flux"]) if o["metadata"]["name"] == f"gpuop-{c['name']}")
            assert hr["spec"]["dependsOn"] == [{"name": f"gpuop-{c['name']}-nfd", "namespace": "flux-system"}]


def test_objects_over_the_annotation_limit_are_server_side_applied(dist, index):
    for c in stack_clusters(index):
        sizes = [len(json.dumps(o)) for o in load_dir(dist / c["manifests"])]
        gpu = next(a for a in load_dir(dist / c["argocd"]) if a["metadata"]["name"] == f"gpuop-{c['name']}")
        assert max(sizes) < 262144 or "ServerSideApply=true" in gpu["spec"]["syncPolicy"]["syncOptions"]


def test_health_checks_for_kinds_the_engines_lack(dist, index):
    cm = load((dist / "fleet" / "argocd" / "argocd-cm-health.yaml").read_text())
    assert cm["metadata"]["name"] == "argocd-cm"
    assert "resource.customizations.health.argoproj.io_Application" in cm["data"]
    assert 'hs.status = "Healthy"' in cm["data"]["resource.customizations.health.nfd.k8s-sigs.io_NodeFeatureRule"]
    for c in stack_clusters(index):
        hr = next(o for o in load_dir(dist / c["flux"]) if o["metadata"]["name"] == f"gpuop-{c['name']}")
        kinds = {k[1] for k in c["kinds"]}
        exprs = {e["kind"] for e in hr["spec"].get("healthCheckExprs", [])}
        assert exprs == kinds & {"NodeFeatureRule", "ServiceMonitor", "PrometheusRule", "SecurityContextConstraints"}


def test_drift_settings_for_fields_controllers_mutate(dist, index):
    for c in stack_clusters(index):
        app = next(a for a in load_dir(dist / c["argocd"]) if a["metadata"]["name"] == f"gpuop-{c['name']}")
        ign = {(d["group"], d["kind"]): d["jsonPointers"] for d in app["spec"]["ignoreDifferences"]}
        assert "/metadata/labels/kubernetes.io~1metadata.name" in ign[("", "Namespace")]
        assert ("apps", "DaemonSet") in ign
        hr = next(o for o in load_dir(dist / c["flux"]) if o["metadata"]["name"] == f"gpuop-{c['name']}")
        dd = hr["spec"]["driftDetection"]
        assert dd["mode"] == "enabled"
        assert {(i["target"]["group"], i["target"]["kind"]) for i in dd["ignore"]} == set(ign)


def test_flux_overlay_kustomizations(dist, index, crds):
    for c in stack_clusters(index):
        objs = load_dir(dist / c["fluxOverlay"])
        for o in objs:
            assert crds.errors(o) == [] and cel.errors(o) == [], (o["metadata"]["name"], crds.errors(o))
        main = next(o for o in objs if o["metadata"]["name"] == f"gpuop-{c['name']}")
        assert main["spec"]["path"] == f"./dist/{c['overlay']}"
        # every DaemonSet rolled, and the health gate's Jobs (a Job is healthy once it completed)
        waited = {(o["kind"], o["metadata"]["name"]) for o in load_dir(dist / c["manifests"])
                  if o["kind"] in ("DaemonSet", "Job")}
        assert {(h["kind"], h["name"]) for h in main["spec"]["healthChecks"]} == waited
        nfd = [o for o in objs if o["metadata"]["name"] == f"gpuop-{c['name']}-nfd"]
        if nfd:
            assert main["spec"]["dependsOn"] == [{"name": f"gpuop-{c['name']}-nfd"}]
            assert nfd[0]["spec"]["wait"] is True
            assert (dist / c["fluxOverlay"] / "nfd" / "helmrelease.yaml").is_file()


def test_substitution_is_disabled_exactly_where_dollar_braces_appear(dist, index):
    for c in stack_clusters(index):
        for o in load_dir(dist / c["manifests"]):
            ann = o["metadata"].get("annotations", {})
            has = "${" in json.dumps({k: v for k, v in o.items() if k != "metadata"})
            assert (ann.get("kustomize.toolkit.fluxcd.io/substitute") == "disabled") == has, o["metadata"]["name"]


def test_oci_source_uses_chart_ref_with_the_helm_layer(workdir, tmp_path, crds):
    w = tmp_path / "w"
    shutil.copytree(workdir / "profiles", w / "profiles")
    settings = yaml.safe_load((workdir / "gpuop.yaml").read_text())
    settings["gitops"]["flux"] = {"source": "oci", "oci": "oci://registry.example.com/gpu"}
    (w / "gpuop.yaml").write_text(yaml.safe_dump(settings))
    run_gpuop("synth", "-o", "out", cwd=w, check=True)
    index = json.loads((w / "out" / "index.json").read_text())
    for c in stack_clusters(index):
        objs = {o["kind"]: o for o in load_dir(w / "out" / c["flux"]) if o["metadata"]["name"].startswith("gpuop-")
                and not o["metadata"]["name"].endswith("-nfd")}
        hr, oci = objs["HelmRelease"], objs["OCIRepository"]
        assert "chart" not in hr["spec"] and hr["spec"]["chartRef"]["kind"] == "OCIRepository"
        assert oci["spec"]["ref"] == {"tag": c["chartVersion"]}
        assert oci["spec"]["url"] == f"oci://registry.example.com/gpu/{c['name']}"
        assert oci["spec"]["layerSelector"] == {"mediaType": "application/vnd.cncf.helm.chart.content.v1.tar+gzip",
                                                "operation": "copy"}
        for o in (hr, oci):
            assert crds.errors(o) == [] and cel.errors(o) == []
    bad = dict(settings)
    bad["gitops"]["flux"] = {"source": "oci"}
    (w / "gpuop.yaml").write_text(yaml.safe_dump(bad))
    proc = run_gpuop("synth", "-o", "out", cwd=w)
    assert proc.returncode == 2 and "source: oci needs `oci: oci://HOST/PATH`" in proc.stderr


def test_warns_about_the_chart_version_trap_when_the_lock_is_missing(workdir, tmp_path):
    w = tmp_path / "w"
    shutil.copytree(workdir / "profiles", w / "profiles")
    shutil.copy(workdir / "gpuop.yaml", w / "gpuop.yaml")
    run_gpuop("synth", "-o", "out", cwd=w, check=True)
    (w / "out" / "versions.lock.json").unlink()
    proc = run_gpuop("synth", "-o", "out", cwd=w, check=True)
    assert "warning: packaged charts but no version lock" in proc.stderr
    assert "reconcileStrategy ChartVersion" in proc.stderr


def test_every_gitops_object_synth_writes_passes_crd_schemas_and_cel(dist, index):
    """All Argo CD and Flux objects of the whole output, fleet objects included, against the upstream
    CRDs (strict) and the hand-coded CEL rules."""
    every = CrdValidator.from_files(sorted(CRDS.glob("*.yaml")))
    folders = [dist / "fleet" / "argocd"] + [dist / c[k] for c in stack_clusters(index)
                                             for k in ("argocd", "flux", "fluxOverlay")]
    folders += [f / "nfd" for f in folders if (f / "nfd").is_dir()]
    checked = set()
    for folder in folders:
        for obj in load_dir(folder):
            if obj["kind"] == "ConfigMap":          # the argocd-cm health snippet
                continue
            assert every.errors(obj) == [] and cel.errors(obj) == [], (folder, obj["kind"], every.errors(obj))
            checked.add(obj["kind"])
    assert {"Application", "ApplicationSet", "AppProject", "GitRepository", "HelmRelease", "HelmRepository",
            "Kustomization"} <= checked
