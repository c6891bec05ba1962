"""The fleet-level Argo CD objects: an ApplicationSet over every cluster and a least-privilege
AppProject, valid against the upstream CRDs and consistent with what synth wrote."""

from __future__ import annotations

import fnmatch
import json
import re

import pytest

from gpuop.verify.crdschema import CrdValidator
from gpuop.kube.yamlio import load

from conftest import CRDS, load_dir


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
                   for p in dist.glob("*/argocd/cluster.json"))
    assert [f for f in files if fnmatch.fnmatch(f, pattern)] == files
    assert len(files) == len(index["clusters"])
    template = json.dumps(spec["template"])
    keys = set(re.findall(r"\{\{\.(\w+)\}\}", template))
    for c in index["clusters"]:
        params = json.loads((dist / c["name"] / "argocd" / "cluster.json").read_text())
        assert keys <= set(params), keys - set(params)      # missingkey=error would fail otherwise
        rendered = re.sub(r"\{\{\.(\w+)\}\}", lambda m: str(params[m.group(1)]), template)
        app = {"apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
               **{k: v for k, v in json.loads(rendered).items()}}
        app["metadata"]["namespace"] = "argocd"
        assert crds.errors(app) == [], crds.errors(app)
        assert app["spec"]["source"]["path"] == f"{settings['path']}/{c['chart']}"
        assert app["spec"]["destination"] == {"name": c["name"], "namespace": c["namespace"]}


def test_appproject_allows_exactly_the_kinds_the_stacks_use(dist, index):
    project = load((dist / "fleet" / "argocd" / "appproject.yaml").read_text())["spec"]
    used_cluster, used_ns = set(), set()
    for c in index["clusters"]:
        for obj in load_dir(dist / c["manifests"]):
            gk = (obj["apiVersion"].rpartition("/")[0], obj["kind"])
            (used_ns if "namespace" in obj["metadata"] else used_cluster).add(gk)
    assert {(w["group"], w["kind"]) for w in project["clusterResourceWhitelist"]} == used_cluster
    assert {(w["group"], w["kind"]) for w in project["namespaceResourceWhitelist"]} == used_ns
    assert project["sourceRepos"] == [load((dist.parent / "gpuop.yaml").read_text())["gitops"]["repoURL"]]
    assert {(d.get("name"), d["namespace"]) for d in project["destinations"] if "name" in d} == \
        {(c["name"], c["namespace"]) for c in index["clusters"]}
