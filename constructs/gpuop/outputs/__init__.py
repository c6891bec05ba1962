"""Stage 6, package: synthesized stacks -> every output file (relative path -> text).

One writer per output form (manifests, helm, kustomize, argocd, flux); this module assigns chart
versions from the lock and writes dist/index.json, the table of contents tools and tests read.
Paths in index.json are relative to dist/.
"""

from __future__ import annotations

from .. import __version__
from ..yamlio import dump_json
from . import argocd, flux, helm, kustomize, manifests, version


def package(stacks, settings, previous_lock: dict) -> dict[str, str]:
    gitops = settings.gitops
    files: dict[str, str] = {}
    lock = {name: dict(entry) for name, entry in previous_lock.get("clusters", {}).items()}
    index = []
    for stack in stacks:
        plan = stack.plan
        c = plan.name
        unversioned = helm.chart_files(stack, "0.0.0")
        digest = version.content_digest(unversioned)
        key = version.minor_key(plan)
        chart_version = version.next_version(lock.get(c), digest, key)
        lock[c] = {"version": chart_version, "digest": digest, "minorKey": key}
        for path, text in unversioned.items():
            files[f"{c}/chart/{path}"] = text
        files[f"{c}/chart/Chart.yaml"] = helm.chart_yaml(plan, chart_version)
        files.update(manifests.write(stack, f"{c}/manifests"))
        files.update(kustomize.write(f"{c}/overlay"))
        chart_path = f"{gitops.path.rstrip('/')}/{c}/chart"
        files.update(argocd.write(plan, gitops, f"{c}/argocd", chart_path))
        files.update(flux.write(plan, gitops, f"{c}/flux", chart_path))
        index.append({
            "name": c, "chart": f"{c}/chart", "chartVersion": chart_version, "digest": digest,
            "manifests": f"{c}/manifests", "overlay": f"{c}/overlay", "argocd": f"{c}/argocd", "flux": f"{c}/flux",
            "releaseName": c, "namespace": plan.namespace, "platform": plan.platform,
            "platformVersion": plan.platform_version, "kubeVersion": plan.kube_version, "stackRelease": plan.release,
            "labels": dict(plan.labels), "objects": len(stack.objects),
        })
    files["index.json"] = dump_json({"apiVersion": "gpuop/v1alpha1", "kind": "Index", "gpuop": __version__,
                                     "clusters": index})
    files[version.LOCK_FILE] = dump_json({"apiVersion": "gpuop/v1alpha1", "kind": "VersionLock",
                                          "clusters": dict(sorted(lock.items()))})
    return files
