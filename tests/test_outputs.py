"""What synth writes: index.json, determinism, the committed dist/ and schemas/ being current, chart
versions that change exactly with content, and the atomic write."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest

from gpuop.kube.yamlio import load

from conftest import REPO, run_gpuop, run_main


def tree(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def test_index_lists_every_cluster_with_its_paths(dist, index):
    bundled = [load(f.read_text())["metadata"]["name"] for f in sorted((REPO / "profiles").glob("*.yaml"))
               if not f.name.startswith("_")]
    assert [c["name"] for c in index["clusters"]] == sorted(bundled)
    assert {"full-stack", "lab-west", "prod-east", "openshift"} <= set(bundled)
    for c in index["clusters"]:
        for k in ("name", "chart", "chartVersion", "digest", "manifests", "overlay", "argocd", "flux",
                  "releaseName", "namespace"):
            assert c[k], k
        for k in ("chart", "manifests", "overlay", "argocd", "flux"):
            assert (dist / c[k]).is_dir(), c[k]
        assert c["namespace"] == ("nvidia-gpu-operator" if c["platform"] == "openshift" else "gpu-operator")


@pytest.mark.slow                   # several compiles (15-40 s)
def test_same_profiles_compile_to_identical_bytes(workdir, dist, tmp_path):
    run_gpuop("synth", "profiles", "-o", str(tmp_path / "a"), cwd=workdir, check=True)
    run_gpuop("synth", "profiles", "-o", str(tmp_path / "b"), cwd=workdir, check=True)
    assert tree(tmp_path / "a") == tree(tmp_path / "b")
    shutil.copytree(dist, tmp_path / "c")
    run_gpuop("synth", "profiles", "-o", str(tmp_path / "c"), cwd=workdir, check=True)
    assert tree(tmp_path / "c") == tree(dist)


def test_committed_dist_and_schemas_are_current(dist):
    """dist/ and schemas/ in git are what the bundled profiles compile to today."""
    assert tree(REPO / "dist") == tree(dist), "run `make run` and commit dist/"
    from gpuop.profile.models import profile_json_schema
    from gpuop.outputs.values import values_schema
    from gpuop.kube.yamlio import dump_json

    assert (REPO / "schemas" / "profile.schema.json").read_text() == dump_json(profile_json_schema()), \
        "schemas/ is stale: run `make schema`"
    assert (REPO / "schemas" / "values.schema.json").read_text() == dump_json(values_schema())
    for chart in dist.glob("*/chart"):
        assert json.loads((chart / "values.schema.json").read_text()) == values_schema()


def _version(out: Path, cluster: str) -> str:
    return load((out / cluster / "chart" / "Chart.yaml").read_text())["version"]


@pytest.mark.slow                   # several compiles (15-40 s)
def test_chart_version_changes_exactly_with_content(workdir, tmp_path):
    w = tmp_path / "w"
    shutil.copytree(workdir / "profiles", w / "profiles")
    shutil.copy(workdir / "gpuop.yaml", w / "gpuop.yaml")
    run_gpuop("synth", "-o", "out", cwd=w, check=True)
    assert _version(w / "out", "prod-east") == "0.1.0"
    run_gpuop("synth", "-o", "out", cwd=w, check=True)          # nothing changed
    assert _version(w / "out", "prod-east") == "0.1.0"
    p = w / "profiles" / "prod-east.yaml"
    p.write_text(p.read_text().replace("containerRuntime: containerd",
                                       "containerRuntime: containerd\n  daemonsets: {priorityClassName: system-cluster-critical}"))
    run_gpuop("synth", "-o", "out", cwd=w, check=True)          # content change -> patch
    assert _version(w / "out", "prod-east") == "0.1.1"
    assert _version(w / "out", "lab-west") == "0.1.0"            # untouched cluster keeps its version
    p.write_text(p.read_text().replace("extends: _base.yaml", "extends: _base.yaml\n# comment only"))
    run_gpuop("synth", "-o", "out", cwd=w, check=True)          # comment: same content, same version
    assert _version(w / "out", "prod-east") == "0.1.1"
    p.write_text(p.read_text().replace("containerRuntime: containerd",
                                       "containerRuntime: containerd\n  driver: {version: \"595.91.07\"}"))
    run_gpuop("synth", "-o", "out", cwd=w, check=True)          # driver branch change -> minor
    assert _version(w / "out", "prod-east") == "0.2.0"
    lock = json.loads((w / "out" / "versions.lock.json").read_text())
    assert lock["clusters"]["prod-east"]["version"] == "0.2.0"


@pytest.mark.slow                   # several compiles (15-40 s)
def test_failed_compile_leaves_output_untouched(workdir, tmp_path):
    w = tmp_path / "w"
    shutil.copytree(workdir / "profiles", w / "profiles")
    shutil.copy(workdir / "gpuop.yaml", w / "gpuop.yaml")
    run_gpuop("synth", "-o", "out", cwd=w, check=True)
    before = tree(w / "out")
    (w / "profiles" / "broken.yaml").write_text("apiVersion: gpuop/v1alpha1\nkind: ClusterProfile\nmetadata: {name: x}\n"
                                                "spec: {platform: {type: kubernetes, version: '1.33'}, os: ubuntu24.04,"
                                                " nodePools: [{name: a, gpu: H100-SXM5-80GB, colour: red}]}\n")
    proc = run_gpuop("synth", "-o", "out", cwd=w)
    assert proc.returncode == 2
    assert tree(w / "out") == before
    assert not [p for p in w.iterdir() if p.name.startswith((".out.new-", ".out.old-"))], "temporary folders left behind"
    assert sorted(p.name for p in w.iterdir() if p.name.startswith(".out.")) == []     # the lock goes with the run


def test_apply_folders_hold_only_kubernetes_objects(dist, index):
    """`kubectl apply -f dist/<cluster>/<folder>/` must find only objects (a cluster.json there fails). kubectl cannot
    dry-run offline (it needs the server's discovery), so every file of every apply folder is parsed
    as kubectl would: each document a Kubernetes object with apiVersion, kind and metadata.name."""
    from gpuop.kube.yamlio import load_all

    for c in index["clusters"]:
        for key in ("argocd", "flux", "manifests"):
            folder = dist / c[key]
            for f in sorted(folder.iterdir()):
                assert f.suffix in (".yaml", ".yml", ".json"), f
                docs = [json.loads(f.read_text())] if f.suffix == ".json" else load_all(f.read_text())
                for obj in docs:
                    if f.name == "kustomization.yaml":      # kubectl apply -k reads it, -f skips nothing: a Kustomization object
                        assert obj["kind"] == "Kustomization"
                        continue
                    assert obj["apiVersion"] and obj["kind"] and obj["metadata"]["name"], f
    for params in sorted(dist.glob("*/params/cluster.json")):      # the ApplicationSet's parameters, apart
        assert json.loads(params.read_text())["name"] == params.parent.parent.name
    assert not list(dist.glob("*/argocd/cluster.json"))
    appset = load((dist / "fleet" / "argocd" / "applicationset.yaml").read_text())
    assert appset["spec"]["generators"][0]["git"]["files"] == [{"path": "dist/*/params/cluster.json"}]


@pytest.mark.slow                   # several compiles (15-40 s)
def test_deleted_charts_folder_is_rebuilt_and_validate_refuses_an_empty_repository_index(workdir, tmp_path):
    w = tmp_path / "w"
    shutil.copytree(workdir / "profiles", w / "profiles")
    shutil.copy(workdir / "gpuop.yaml", w / "gpuop.yaml")
    run_gpuop("synth", "-o", "out", cwd=w, check=True)
    before = tree(w / "out")
    (w / "out" / "charts" / "index.yaml").write_text("apiVersion: v1\nentries: {}\n")
    proc = run_main("validate", "out", cwd=w)
    assert proc.returncode == 2
    assert "out/charts/index.yaml: does not list prod-east-0.1.0.tgz; run gpuop synth to rebuild it" in proc.stderr
    shutil.rmtree(w / "out" / "charts")
    proc = run_main("validate", "out", cwd=w)
    assert proc.returncode == 2
    i = [c["name"] for c in json.loads((w / "out" / "index.json").read_text())["clusters"]].index("prod-east")
    assert (f"out/index.json: clusters[{i}].package: charts/prod-east-0.1.0.tgz is missing; run gpuop synth to rebuild "
            "it from the version lock") in proc.stderr.splitlines()
    run_gpuop("synth", "-o", "out", cwd=w, check=True)
    assert tree(w / "out") == before
    assert run_main("validate", "out", cwd=w).returncode == 0


@pytest.mark.slow                   # several compiles (15-40 s)
def test_validate_and_diff_on_a_bogus_index_json_are_exit_2(workdir, tmp_path):
    w = tmp_path / "w"
    shutil.copytree(workdir / "profiles", w / "profiles")
    shutil.copy(workdir / "gpuop.yaml", w / "gpuop.yaml")
    run_gpuop("synth", "-o", "dist", cwd=w, check=True)
    for text, message in (('{"clusters": 3}', "dist/index.json: kind: expected kind: Index; not an index.json "
                           "written by gpuop (restore it from git or recompile)"),
                          ('{"kind": "Index", "clusters": [{"name": "x"}]}', "dist/index.json: clusters[0].chart: "
                           "missing or not a string; not an index.json written by gpuop (restore it from git or recompile)"),
                          ("[1", "dist/index.json:1:3: not valid JSON (Expecting ',' delimiter); "
                           "restore it from git or recompile")):
        (w / "dist" / "index.json").write_text(text)
        for cmd in (("validate", "dist"), ("diff",)):
            proc = run_gpuop(*cmd, cwd=w)
            assert proc.returncode == 2, (cmd, proc.stderr)
            assert proc.stderr.splitlines()[0] == message, (cmd, proc.stderr)
            assert "Traceback" not in proc.stderr
