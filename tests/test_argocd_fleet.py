"""The fleet-level Argo CD objects: an ApplicationSet over every cluster and a least-privilege
AppProject, valid against the upstream CRDs and consistent with what synth wrote."""

from __future__ import annotations

import fnmatch
import json
import re

import pytest

from gpuop.verify.crdschema import CrdValidator
from gpuop.kube.yamlio import load

from conftest import CRDS, load_dir, stack_clusters


@pytest.fixture(scope="module")
def crds() -> CrdValidator:
    return CrdValidator.from_files([CRDS / "argoproj.io_applicationsets.yaml", CRDS / "argoproj.io_appprojects.yaml",
                                    CRDS / "argoproj.io_applications.yaml"])


def test_fleet_objects_validate_against_upstream_crds(dist, crds):
    for name in ("applicationset.yaml", "appproject.yaml"):
        obj = load((dist / "fleet" / "argocd" / name).read_text())
        assert crds.errors(obj) == [], (name, crds.errors(obj))


def test_applicationset_generates_one_application_per_cluster(dist, index, crds):
    appset = load((dist / "fleet" / "argocd" / "applicationset.yaml").read_text())
    spec = appset["spec"]
    assert spec["goTemplate"] is True and spec["goTemplateOptions"] == ["missingkey=error"]
    (gen,) = spec["generators"]
    pattern = gen["git"]["files"][0]["path"]
    settings = load((dist.parent / "gpuop.yaml").read_text())["gitops"]
    files = sorted(str(p.relative_to(dist.parent)).replace(str(dist.name), settings["path"], 1)
                   for p in dist.glob("*/params/cluster.json"))
    assert [f for f in files if fnmatch.fnmatch(f, pattern)] == files
    assert len(files) == len(stack_clusters(index))
    template = json.dumps(spec["template"])
    keys = set(re.findall(r"\{\{\.(\w+)\}\}", template))
    for c in stack_clusters(index):
        params = json.loads((dist / c["name"] / "params" / "cluster.json").read_text())
        assert keys <= set(params), keys - set(params)      # missingkey=error would fail otherwise
        rendered = re.sub(r"\{\{\.(\w+)\}\}", lambda m: str(params[m.group(1)]), template)
        app = {"apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
               **{k: v for k, v in json.loads(rendered).items()}}
        app["metadata"]["namespace"] = "argocd"
        assert crds.errors(app) == [], crds.errors(app)
        assert app["spec"]["source"]["path"] == f"{settings['path']}/{c['chart']}"
        # the profile's destination, else the Argo CD cluster named like the profile (server "" is unset)
        assert {k: v for k, v in app["spec"]["destination"].items() if v} == \
            {**(c.get("destination") or {"name": c["name"]}), "namespace": c["namespace"]}


def test_appproject_allows_exactly_the_kinds_the_stacks_use(dist, index):
    project = load((dist / "fleet" / "argocd" / "appproject.yaml").read_text())["spec"]
    used_cluster, used_ns = set(), set()
    for c in stack_clusters(index):
        for obj in load_dir(dist / c["manifests"]):
            gk = (obj["apiVersion"].rpartition("/")[0], obj["kind"])
            (used_ns if "namespace" in obj["metadata"] else used_cluster).add(gk)
    assert {(w["group"], w["kind"]) for w in project["clusterResourceWhitelist"]} == used_cluster
    assert {(w["group"], w["kind"]) for w in project["namespaceResourceWhitelist"]} == used_ns
    assert project["sourceRepos"] == [load((dist.parent / "gpuop.yaml").read_text())["gitops"]["repoURL"]]
    assert {(d.get("name"), d["namespace"]) for d in project["destinations"] if "name" in d} == \
        {((c.get("destination") or {"name": c["name"]})["name"], c["namespace"]) for c in stack_clusters(index)
         if "server" not in c.get("destination", {})}


def test_appproject_allows_cluster_scoped_objects_only_by_name(dist, index):
    """The AppProject allows exactly the cluster-scoped objects compiled, by name: any ClusterRole,
    ClusterRoleBinding, SCC or Namespace would make repository write access cluster-admin."""
    project = load((dist / "fleet" / "argocd" / "appproject.yaml").read_text())["spec"]
    compiled = set()
    for c in stack_clusters(index):
        for obj in load_dir(dist / c["manifests"]):
            if "namespace" not in obj["metadata"]:
                compiled.add((obj["apiVersion"].rpartition("/")[0], obj["kind"], obj["metadata"]["name"]))
    allowed = {(w["group"], w["kind"], w.get("name")) for w in project["clusterResourceWhitelist"]}
    assert allowed == compiled
    assert all(w.get("name") and "*" not in w["name"] for w in project["clusterResourceWhitelist"])
    assert ("", "Namespace", "kube-system") not in allowed
    assert ("rbac.authorization.k8s.io", "ClusterRoleBinding", "cluster-admin") not in allowed


def test_nfd_application_has_its_own_least_privilege_project(dist, index, crds):
    """The NFD Application has a least-privilege project of its own, not the permissive `default`."""
    import helm_python as helm
    from gpuop.kube.yamlio import load_all

    from conftest import REFS

    deploying = [c for c in stack_clusters(index) if (dist / c["argocd"] / "nfd-application.yaml").is_file()]
    assert deploying, "an example profile deploys NFD (full-stack)"
    for c in deploying:
        app = load((dist / c["argocd"] / "nfd-application.yaml").read_text())
        project = load((dist / c["argocd"] / "nfd-appproject.yaml").read_text())
        assert crds.errors(project) == [] and crds.errors(app) == []
        assert app["spec"]["project"] == project["metadata"]["name"] == f"gpuop-nfd-{c['name']}"
        assert project["metadata"]["namespace"] == app["metadata"]["namespace"]
        spec = project["spec"]
        assert spec["sourceRepos"] == [app["spec"]["source"]["repoURL"]]
        assert spec["destinations"] == [app["spec"]["destination"]]
        # every object NFD's chart (0.19.0, the copy in ../shared/refs) renders with our values is allowed
        src = app["spec"]["source"]
        chart = helm.Chart.load(str(REFS / "gpu-operator" / "chart" / "charts" / "node-feature-discovery"))
        try:
            out = chart.render(src["helm"]["valuesObject"], name=src["helm"]["releaseName"],
                               namespace=app["spec"]["destination"]["namespace"])
        finally:
            chart.close()
        objs = [o for path in sorted(out) if path.endswith(".yaml") for o in load_all(out[path])]
        crd_file = REFS / "gpu-operator" / "chart" / "charts" / "node-feature-discovery" / "crds" / "nfd-api-crds.yaml"
        objs += load_all(crd_file.read_text())
        assert len(objs) > 5
        ns_allowed = {(w["group"], w["kind"]) for w in spec["namespaceResourceWhitelist"]}
        for o in objs:
            gk = (o["apiVersion"].rpartition("/")[0], o["kind"])
            if gk in {("rbac.authorization.k8s.io", "ClusterRole"), ("rbac.authorization.k8s.io", "ClusterRoleBinding"),
                      ("apiextensions.k8s.io", "CustomResourceDefinition"), ("", "Namespace")}:
                assert any(w["group"] == gk[0] and w["kind"] == gk[1]
                           and fnmatch.fnmatchcase(o["metadata"]["name"], w["name"])
                           for w in spec["clusterResourceWhitelist"]), (gk, o["metadata"]["name"])
            else:
                assert gk in ns_allowed, gk
        names = [w["name"] for w in spec["clusterResourceWhitelist"]]
        assert not any(fnmatch.fnmatchcase("cluster-admin", n) for n in names)
