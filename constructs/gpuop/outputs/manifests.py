"""Writer: the rendered manifests (one file per object, stable names) and their kustomization.yaml.

Value slots are filled with the chart's default values, so these files are exactly what the Helm chart
renders with its defaults and what the Kustomize overlay builds.
"""

from __future__ import annotations

from gpuop.kube.order import file_name
from gpuop.kube.slots import fill
from gpuop.stack.objects import Synthesized
from gpuop.kube.yamlio import dump_memo, dump_plain


def rendered(stack: Synthesized) -> list[dict]:
    values = stack.plan.values
    return [fill(o.body, values) for o in stack.objects]


def write(stack: Synthesized, base: str) -> dict[str, str]:
    files: dict[str, str] = {}
    names = []
    values = stack.plan.values
    for o in stack.objects:
        name = file_name(o.body)
        if f"{base}/{name}" in files:
            raise AssertionError(f"two objects map to {name}")
        files[f"{base}/{name}"] = dump_memo(fill(o.body, values))
        names.append(name)
    files[f"{base}/kustomization.yaml"] = (
        "# Rendered by gpuop: the cluster's objects, in install order. Do not edit; change the profile.\n"
        + dump_plain({"apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization", "resources": names}))
    return files
