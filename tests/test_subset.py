"""Subset compiles and where a cluster leaves dist/: `gpuop synth FILE...` rebuilds only
those clusters and keeps every other cluster's folder, index entry, lock entry, chart history and
fleet objects; a cluster is removed only by a compile of the profiles tree after its profile was
deleted, and synth says so."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from conftest import run_gpuop

pytestmark = pytest.mark.slow       # each test compiles a project twice, ~5 s (`make test-fast` leaves these out)
from test_fleet import make_fleet, tree


@pytest.fixture
def project(tmp_path) -> Path:
    w = make_fleet(tmp_path / "w", n=4)
    run_gpuop("synth", "-o", "dist", "--cache", "cache", cwd=w, check=True)
    return w


def _index(out: Path) -> dict:
    return {c["name"]: c for c in json.loads((out / "index.json").read_text())["clusters"]}


def test_subset_compile_keeps_every_other_cluster_its_index_entry_history_and_fleet_objects(project):
    w = project
    before, index_before = tree(w / "dist"), _index(w / "dist")
    lock_before = json.loads((w / "dist" / "versions.lock.json").read_text())["clusters"]
    one = w / "profiles" / "c01.yaml"
    doc = yaml.safe_load(one.read_text())
    doc["spec"]["driver"] = {"version": "595.91.07"}          # a new driver branch: chart 0.2.0
    one.write_text(yaml.safe_dump(doc))
    proc = run_gpuop("synth", "profiles/c01.yaml", "-o", "dist", "--cache", "cache", cwd=w, check=True)
    assert proc.stderr.strip().splitlines()[-1] == \
        "gpuop: compiled 1 cluster(s) into dist (1 built, 0 reused from the cache, 0 unchanged on disk, 3 kept as they were)"
    after, index_after = tree(w / "dist"), _index(w / "dist")
    assert sorted(index_after) == ["c00", "c01", "c02", "c03"]
    for name in ("c00", "c02", "c03"):
        assert index_after[name] == index_before[name]
        assert {k: v for k, v in after.items() if k.startswith(f"{name}/")} == \
            {k: v for k, v in before.items() if k.startswith(f"{name}/")}
    assert index_after["c01"]["chartVersion"] == "0.2.0"
    assert {"charts/c01-0.1.0.tgz", "charts/c01-0.2.0.tgz"} <= set(after)      # history kept
    lock_after = json.loads((w / "dist" / "versions.lock.json").read_text())["clusters"]
    assert {k: v for k, v in lock_after.items() if k != "c01"} == {k: v for k, v in lock_before.items() if k != "c01"}
    project_doc = yaml.safe_load((w / "dist" / "fleet" / "argocd" / "appproject.yaml").read_text())
    assert sorted(d["name"] for d in project_doc["spec"]["destinations"] if "name" in d) == ["c00", "c01", "c02", "c03"]
    assert sorted(p.parent.parent.name for p in (w / "dist").glob("*/params/cluster.json")) == ["c00", "c01", "c02", "c03"]


def test_subset_compile_keeps_a_cluster_whose_profile_was_deleted(project):
    w = project
    (w / "profiles" / "c03.yaml").unlink()
    proc = run_gpuop("synth", "profiles/c00.yaml", "-o", "dist", "--cache", "cache", cwd=w, check=True)
    assert "removed" not in proc.stderr
    assert "c03" in _index(w / "dist") and (w / "dist" / "c03" / "chart" / "Chart.yaml").is_file()


def test_full_compile_removes_a_deleted_profiles_cluster_and_says_so(project):
    w = project
    (w / "profiles" / "c03.yaml").unlink()
    proc = run_gpuop("synth", "-o", "dist", "--cache", "cache", cwd=w, check=True)
    assert "gpuop: cluster c03 removed: Argo CD / Flux will delete its GPU stack\n" in proc.stderr
    assert sorted(_index(w / "dist")) == ["c00", "c01", "c02"]
    assert not (w / "dist" / "c03").exists()
    assert (w / "dist" / "charts" / "c03-0.1.0.tgz").is_file()    # a published version stays downloadable
    lock = json.loads((w / "dist" / "versions.lock.json").read_text())["clusters"]
    assert "c03" in lock                                          # numbering continues if it comes back


def test_subset_compile_warns_about_a_damaged_kept_cluster(project):
    w = project
    edited = w / "dist" / "c02" / "manifests" / "kustomization.yaml"
    edited.write_text(edited.read_text() + "# hand edit\n")
    proc = run_gpuop("synth", "profiles/c00.yaml", "-o", "dist", "--cache", "cache", cwd=w, check=True)
    assert ("dist/c02: warning: does not match its digest in index.json (edited by hand?); kept as it is "
            "by this subset compile, a compile of the profiles tree (`gpuop synth`) rebuilds it") in proc.stderr
    run_gpuop("synth", "-o", "dist", "--cache", "cache", cwd=w, check=True)
    assert "hand edit" not in edited.read_text()
    shutil.rmtree(w / "cache")
