"""Stage 6, package: synthesized stacks -> every output file (relative path -> text).

Two steps, so the expensive one can be cached and run in parallel per cluster:
- `build_cluster(stack, settings)`: everything under dist/<cluster>/ with the chart version left as
  a placeholder, plus the cluster's index entry. A pure function of the cluster's inputs.
- `assemble(builds, previous_lock)`: assigns chart versions from the lock (same content, same
  version), fills them in, and writes dist/index.json and dist/versions.lock.json.
Paths in index.json are relative to dist/.
"""

from __future__ import annotations

from dataclasses import dataclass

from .. import __version__
from ..yamlio import dump_json
from . import argocd, charts, fleet, flux, helm, kustomize, manifests, version

from .version import VERSION_PLACEHOLDER


@dataclass(frozen=True)
class ClusterBuild:
    name: str
    files: dict             # path relative to dist/ -> text; Chart.yaml carries VERSION_PLACEHOLDER
    digest: str             # chart content digest (placeholder version)
    minor_key: str          # what makes a content change a minor bump
    entry: dict             # index.json entry without chartVersion


def build_cluster(stack, settings) -> ClusterBuild:
    gitops = settings.gitops
    plan = stack.plan
    c = plan.name
    chart = helm.chart_files(stack, VERSION_PLACEHOLDER)
    files = {f"{c}/chart/{path}": text for path, text in chart.items()}
    files.update(manifests.write(stack, f"{c}/manifests"))
    files.update(kustomize.write(f"{c}/overlay"))
    chart_path = f"{gitops.path.rstrip('/')}/{c}/chart"
    files.update(argocd.write(plan, gitops, f"{c}/argocd", chart_path))
    kinds = sorted({(o.body["apiVersion"].rpartition("/")[0], o.body["kind"], "namespace" in o.body["metadata"])
                    for o in stack.objects})
    daemonsets = tuple(o.body["metadata"]["name"] for o in stack.objects if o.body["kind"] == "DaemonSet")
    files.update(flux.write(plan, gitops, f"{c}/flux", chart_path, frozenset(kinds), daemonsets))
    digest = version.content_digest(chart)
    entry = {
        "name": c, "chart": f"{c}/chart", "digest": digest,
        "manifests": f"{c}/manifests", "overlay": f"{c}/overlay", "argocd": f"{c}/argocd", "flux": f"{c}/flux",
        "releaseName": c, "namespace": plan.namespace, "platform": plan.platform,
        "platformVersion": plan.platform_version, "kubeVersion": plan.kube_version, "stackRelease": plan.release,
        "labels": dict(plan.labels), "objects": len(stack.objects),
        "kinds": kinds, "fluxOverlay": f"{c}/flux-overlay",
    }
    return ClusterBuild(c, files, digest, version.minor_key(plan), entry)


def assemble(builds: list[ClusterBuild], previous_lock: dict, previous_charts: dict | None = None,
             settings=None) -> dict:
    """Versions, the packaged charts and the Helm repository index, index.json and the lock.
    `previous_charts` is the previous output's charts/ folder (file name -> bytes), carried forward."""
    files: dict = {}
    lock = {name: dict(entry) for name, entry in previous_lock.get("clusters", {}).items()}
    index = []
    carried = dict(previous_charts or {})
    repo = charts.entries_from(carried)
    for b in sorted(builds, key=lambda b: b.name):
        chart_version = version.next_version(lock.get(b.name), b.digest, b.minor_key)
        lock[b.name] = {"version": chart_version, "digest": b.digest, "minorKey": b.minor_key}
        for path, text in b.files.items():      # the chart version, wherever the build left its placeholder
            files[path] = text.replace(VERSION_PLACEHOLDER, chart_version) if VERSION_PLACEHOLDER in text else text
        tgz_name = f"{b.name}-{chart_version}.tgz"
        if tgz_name not in carried:
            prefix = f"{b.name}/chart/"
            carried[tgz_name] = charts.archive(b.name, {p[len(prefix):]: t for p, t in files.items()
                                                         if p.startswith(prefix)})
            repo.setdefault(b.name, []).append(charts.entry(tgz_name, carried[tgz_name]))
        index.append({**b.entry, "chartVersion": chart_version, "package": f"charts/{tgz_name}"})
    for name, data in carried.items():
        files[f"charts/{name}"] = data
    files["charts/index.yaml"] = charts.index_yaml(repo)
    if settings is not None:
        files.update(fleet.write(settings.gitops, index))
    files["index.json"] = dump_json({"apiVersion": "gpuop/v1alpha1", "kind": "Index", "gpuop": __version__,
                                     "clusters": index})
    files[version.LOCK_FILE] = dump_json({"apiVersion": "gpuop/v1alpha1", "kind": "VersionLock",
                                          "clusters": dict(sorted(lock.items()))})
    return files


def package(stacks, settings, previous_lock: dict) -> dict[str, str]:
    return assemble([build_cluster(s, settings) for s in stacks], previous_lock, settings=settings)
