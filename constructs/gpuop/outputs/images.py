"""Writer: the images a cluster's rendered manifests use (dist/<cluster>/images.txt), and on OpenShift an
oc-mirror ImageSetConfiguration (dist/<cluster>/oc-mirror/imageset-config.yaml) that mirrors them.

images.txt lists every image any output can pull, one per line, sorted, each once: what a disconnected
site copies into its mirror registry. That is the `image` of every container, init container and
ephemeral container of the rendered manifests (value slots filled with the chart's defaults, as
manifests/), the chart's `helm test` image, and NFD's image when gpuop deploys NFD (its chart's values
name it; `extra`). The oc-mirror file leaves out
references without a registry host (the Driver Toolkit sidecar's `driver-toolkit:<build>` is an
ImageStream tag of the OpenShift release payload, mirrored with the platform, not by this list).
"""

from __future__ import annotations

from gpuop.kube.yamlio import dump_plain
from gpuop.outputs.target import OPERATOR, Target, Written

IMAGESET_API = "mirror.openshift.io/v2alpha1"      # oc-mirror v2 ImageSetConfiguration


def _pod_spec(obj: dict) -> dict | None:
    spec = obj.get("spec") or {}
    if obj.get("kind") == "Pod":
        return spec
    if obj.get("kind") == "CronJob":
        return ((spec.get("jobTemplate") or {}).get("spec") or {}).get("template", {}).get("spec")
    return (spec.get("template") or {}).get("spec")


def image_refs(objects: list[dict]) -> list[str]:
    """Every container image of the objects, sorted and unique."""
    refs = set()
    for obj in objects:
        pod = _pod_spec(obj) or {}
        for key in ("initContainers", "containers", "ephemeralContainers"):
            refs.update(c["image"] for c in pod.get(key) or [] if c.get("image"))
    return sorted(refs)


def auxiliary_refs(plan) -> list[str]:
    """The images outside the manifests an output pulls: the chart's `helm test` pod and NFD's pods."""
    from gpuop.outputs.helm import smoke_refs

    return (smoke_refs(plan) + ([plan.nfd.image_ref] if plan.nfd.image_ref else [])
            + ([plan.dra.image_ref] if plan.dra is not None else []))


def cluster_refs(plan, objects: list[dict]) -> list[str]:
    """Every image of a cluster's outputs: images.txt."""
    return sorted(set(image_refs(objects)) | set(auxiliary_refs(plan)))


def images_txt(refs: list[str]) -> str:
    return "".join(f"{r}\n" for r in refs)


def has_registry(ref: str) -> bool:
    first, sep, _ = ref.partition("/")
    return bool(sep) and ("." in first or ":" in first or first == "localhost")


def imageset_config(refs: list[str]) -> str:
    return ("# Rendered by gpuop: `oc mirror -c imageset-config.yaml` copies the GPU stack's images into a\n"
            "# disconnected registry. Do not edit; change the profile.\n"
            + dump_plain({"kind": "ImageSetConfiguration", "apiVersion": IMAGESET_API,
                          "mirror": {"additionalImages": [{"name": r} for r in refs if has_registry(r)]}}))


def write(t: Target) -> Written:
    """Writer (outputs/target.py): the images of manifests/, for mirroring (stack mode; in operator mode NVIDIA's
    operator chooses the operands' images, and gpuop writes no list of them)."""
    from gpuop.outputs.manifests import rendered
    if t.folders.delivery == OPERATOR:
        return Written()
    return Written(files(rendered(t.stack), t.name, t.plan.platform == "openshift", extra=auxiliary_refs(t.plan)))


def files(objects: list[dict], base: str, openshift: bool, extra: list[str] = ()) -> dict[str, str]:
    refs = sorted(set(image_refs(objects)) | set(extra))
    files = {f"{base}/images.txt": images_txt(refs)}
    if openshift:
        files[f"{base}/oc-mirror/imageset-config.yaml"] = imageset_config(refs)
    return files
