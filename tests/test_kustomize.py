"""Every overlay builds with the real `kubectl kustomize` to exactly the rendered manifests."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from gpuop.kube.yamlio import load_all

from conftest import by_key, load_dir

pytestmark = pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl (with kustomize) not on PATH")


@pytest.mark.slow                   # one `kubectl kustomize` per cluster
def test_overlay_builds_to_the_manifests(dist, index):
    for entry in index["clusters"]:
        out = subprocess.run(["kubectl", "kustomize", str(dist / entry["overlay"])],
                             capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr
        built = by_key(load_all(out.stdout))
        assert built == by_key(load_dir(dist / entry["manifests"])), entry["name"]


def test_manifest_kustomization_lists_every_component_file_in_install_order(dist, index):
    """One file per component, named so `ls` (and `kubectl apply -f`) takes them in the
    order the kustomization lists: the namespace first, then the Operator's state order."""
    from gpuop.kube.yamlio import load

    for entry in index["clusters"]:
        folder = dist / entry["manifests"]
        listed = load((folder / "kustomization.yaml").read_text())["resources"]
        on_disk = sorted(f.name for f in folder.glob("*.yaml") if f.name != "kustomization.yaml")
        assert listed == on_disk, entry["name"]
        assert listed[0] == "00-namespace.yaml", "namespace first (install order)"
        assert len(listed) < entry["objects"], entry["name"]


def test_each_component_file_holds_its_objects_in_install_order(dist, index):
    from gpuop.kube.order import sort_key

    for entry in index["clusters"]:
        for f in sorted((dist / entry["manifests"]).glob("[0-9][0-9]-*.yaml")):
            text = f.read_text()
            component = f.name[3:].removesuffix(".yaml")
            assert text.startswith(f"# Rendered by gpuop: the {component} component's objects, in install order."), f
            objs = load_all(text)
            assert objs and objs == sorted(objs, key=sort_key), f
            assert text.count("\n---\n") == len(objs) - 1, f


def test_component_files_follow_the_registry_order():
    """kube/order.py repeats the registry's names (outputs cannot import the components, which start Node)."""
    from gpuop.kube.order import COMPONENT_ORDER
    from gpuop.stack.registry import COMPONENTS

    assert COMPONENT_ORDER == tuple(c.name for c in COMPONENTS)
