"""The per-cluster writers (outputs/target.py): one signature, called once each by outputs/cluster.py
`build_cluster`, each writing its own files where the delivery's folders say — none moved, dropped or
overwritten afterwards."""

from __future__ import annotations

import ast
import inspect

import pytest

from gpuop import catalog
from gpuop.kube.folders import ENTRY_FOLDERS
from gpuop.outputs import cluster
from gpuop.outputs.target import OPERATOR, PREVIEW, STACK, Folders, Target, Written
from gpuop.pipeline.run import _plan_one
from gpuop.profile.settings import load_settings
from gpuop.stack.synth import Synthesizer

from conftest import REPO


def _called_writers() -> list:
    """The writers build_cluster calls (`<module>.write(t)`) and the deliveries it chooses from."""
    tree = ast.parse(inspect.getsource(cluster.build_cluster))
    mods = [n.func.value.id for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
            and n.func.attr == "write" and isinstance(n.func.value, ast.Name)]
    return [getattr(cluster, m).write for m in mods] + list(cluster.DELIVERY.values())


def test_every_writer_build_cluster_calls_takes_the_target_and_gives_files_and_an_entry():
    writers = _called_writers()
    assert len(writers) >= 8
    for w in writers:
        sig = inspect.signature(w)
        assert [(p.name, p.annotation) for p in sig.parameters.values()] == [("t", "Target")], w.__module__
        assert sig.return_annotation == "Written", w.__module__


def test_the_deliveries_are_the_two_modes():
    assert set(cluster.DELIVERY) == {STACK, OPERATOR}


@pytest.mark.parametrize("mode", [STACK, OPERATOR])
def test_the_entry_names_each_output_folder_once_from_the_folders(mode):
    f = Folders("c", mode)
    entry = f.entry()
    assert tuple(k for k in entry if k in ENTRY_FOLDERS) == ENTRY_FOLDERS
    operand = f"c/{PREVIEW}/" if mode == OPERATOR else "c/"
    assert (entry["chart"], entry["manifests"], entry["overlay"]) == tuple(f"{operand}{n}" for n in
                                                                           ("chart", "manifests", "overlay"))
    assert (entry["argocd"], entry["flux"]) == ("c/argocd", "c/flux")
    assert entry.get("fluxOverlay") == (None if mode == OPERATOR else "c/flux-overlay")


def _stack(profile: str):
    plan, errors, _ = _plan_one(REPO / "profiles" / profile, catalog.load())
    assert plan is not None, errors
    return Synthesizer().synthesize(plan)


@pytest.mark.parametrize("profile,mode", [("full-stack.yaml", STACK), ("keep-operator.yaml", OPERATOR),
                                          ("dra.yaml", STACK)])
def test_no_writer_writes_a_file_another_writes_and_build_cluster_writes_exactly_theirs(profile, mode):
    stack = _stack(profile)
    settings = load_settings(REPO / "gpuop.yaml")
    assert (stack.plan.operator is not None) == (mode == OPERATOR)
    t = Target(stack, settings.gitops, Folders(stack.plan.name, mode))
    seen: dict[str, str] = {}
    for w in _called_writers():
        if w in cluster.DELIVERY.values() and w is not cluster.DELIVERY[mode]:
            continue
        out = w(t)
        assert isinstance(out, Written)
        for path in out.files:
            assert path not in seen, f"{path}: written by {seen.get(path)} and {w.__module__}"
            seen[path] = w.__module__
    built = cluster.build_cluster(stack, settings)
    assert set(built.files) == set(seen)
    for key in ENTRY_FOLDERS:           # every folder the entry names holds files of this cluster
        assert any(p.startswith(built.entry[key] + "/") for p in built.files), key


def test_operator_mode_writes_no_operand_outside_the_preview():
    stack = _stack("keep-operator.yaml")
    built = cluster.build_cluster(stack, load_settings(REPO / "gpuop.yaml"))
    c = stack.plan.name
    for folder in ("chart", "manifests", "overlay", "flux-overlay"):
        assert not [p for p in built.files if p.startswith(f"{c}/{folder}/")], folder
    assert f"{c}/params/cluster.json" not in built.files and f"{c}/images.txt" not in built.files
    assert f"{c}/{PREVIEW}/chart/Chart.yaml" in built.files and built.entry["delivery"] == "operator"
