"""Writer: the per-cluster Kustomize overlay. `kubectl kustomize dist/<cluster>/overlay` builds the
same objects as the rendered manifests; it is where a site adds its own patches without touching
gpuop's output (put them in a sibling overlay that lists this one as a resource, so recompiles keep them).
"""

from __future__ import annotations

from gpuop.kube.yamlio import dump_plain
from gpuop.outputs.target import Target, Written


def write(t: Target) -> Written:
    """Writer (outputs/target.py): the overlay of the rendered manifests."""
    return Written(files(t.folders.overlay))


def files(base: str) -> dict[str, str]:
    return {f"{base}/kustomization.yaml": (
        "# Kustomize overlay of the rendered manifests, built by Flux Kustomizations and `kubectl kustomize`.\n"
        + dump_plain({"apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization",
                      "resources": ["../manifests"]}))}
