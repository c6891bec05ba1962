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


def test_manifest_kustomization_lists_every_object_file(dist, index):
    from gpuop.kube.yamlio import load

    for entry in index["clusters"]:
        folder = dist / entry["manifests"]
        listed = load((folder / "kustomization.yaml").read_text())["resources"]
        on_disk = sorted(f.name for f in folder.glob("*.yaml") if f.name != "kustomization.yaml")
        assert sorted(listed) == on_disk
        assert listed[0].startswith("namespace-"), "namespace first (install order)"
