"""Writer: the Flux objects of a cluster: a GitRepository (`gpuop`) and a HelmRelease v2 built from the
chart path and, in `spec.nfd.mode: deploy`, a HelmRepository and HelmRelease for Node Feature
Discovery's own upstream chart.

The GPU HelmRelease uses `chart.spec` (not chartRef) with reconcileStrategy ChartVersion: gpuop bumps
the chart version exactly when content changes, so Flux upgrades exactly then. CRDs are created and
replaced on install and upgrade (Flux's upgrade default is Skip). The release is stored in Flux's
namespace, so the chart can create its own target namespace.

NFD: HelmRepository `node-feature-discovery` (the chart's HTTP repository) and HelmRelease
`gpuop-<cluster>-nfd` pinned to the stack release's chart version, with the settings the GPU stack
needs as `values`, into its own namespace (created on install), CRDs created and replaced. The GPU
HelmRelease `dependsOn` it, so Flux installs and upgrades NFD (and its NodeFeatureRule CRD) first and
waits for it to be ready.
"""

from __future__ import annotations

from ..plan import StackPlan
from ..yamlio import dump

NFD_REPO = "node-feature-discovery"


def _labels(plan: StackPlan) -> dict:
    return {"app.kubernetes.io/managed-by": "gpuop", "gpuop/cluster": plan.name, **dict(plan.labels)}


def nfd_objects(plan: StackPlan, gitops) -> list[dict]:
    n, f = plan.nfd, gitops.flux
    if n.mode != "deploy" or not n.chart:
        return []
    repo = {"apiVersion": "source.toolkit.fluxcd.io/v1", "kind": "HelmRepository",
            "metadata": {"name": NFD_REPO, "namespace": f.namespace, "labels": {"app.kubernetes.io/managed-by": "gpuop"}},
            "spec": {"url": n.repository, "interval": f.interval}}
    release = {
        "apiVersion": "helm.toolkit.fluxcd.io/v2", "kind": "HelmRelease",
        "metadata": {"name": f"gpuop-{plan.name}-nfd", "namespace": f.namespace, "labels": _labels(plan)},
        "spec": {
            "interval": f.interval,
            "releaseName": n.release_name,
            "targetNamespace": n.namespace,
            "storageNamespace": f.namespace,
            "chart": {"spec": {"chart": n.chart, "version": n.version, "interval": f.interval,
                               "sourceRef": {"kind": "HelmRepository", "name": NFD_REPO, "namespace": f.namespace}}},
            "install": {"createNamespace": True, "crds": "CreateReplace", "remediation": {"retries": 3}},
            "upgrade": {"crds": "CreateReplace", "remediation": {"retries": 3}},
            "values": n.values,
        },
    }
    return [repo, release]


def objects(plan: StackPlan, gitops, chart_path: str) -> list[dict]:
    f = gitops.flux
    repo = {"apiVersion": "source.toolkit.fluxcd.io/v1", "kind": "GitRepository",
            "metadata": {"name": "gpuop", "namespace": f.namespace, "labels": {"app.kubernetes.io/managed-by": "gpuop"}},
            "spec": {"url": gitops.repoURL, "ref": {"branch": gitops.revision}, "interval": f.interval}}
    release = {
        "apiVersion": "helm.toolkit.fluxcd.io/v2", "kind": "HelmRelease",
        "metadata": {"name": f"gpuop-{plan.name}", "namespace": f.namespace, "labels": _labels(plan)},
        "spec": {
            "interval": f.interval,
            "releaseName": plan.name,
            "targetNamespace": plan.namespace,
            "storageNamespace": f.namespace,
            "chart": {"spec": {"chart": f"./{chart_path}", "reconcileStrategy": "ChartVersion", "interval": f.interval,
                               "sourceRef": {"kind": "GitRepository", "name": "gpuop", "namespace": f.namespace}}},
            "install": {"crds": "CreateReplace", "remediation": {"retries": 3}},
            "upgrade": {"crds": "CreateReplace", "remediation": {"retries": 3}},
        },
    }
    nfd = nfd_objects(plan, gitops)
    if nfd:
        release["spec"]["dependsOn"] = [{"name": nfd[1]["metadata"]["name"], "namespace": f.namespace}]
    return [repo, release] + nfd


def write(plan: StackPlan, gitops, base: str, chart_path: str) -> dict[str, str]:
    repo, release, *nfd = objects(plan, gitops, chart_path)
    files = {f"{base}/gitrepository.yaml": dump(repo), f"{base}/helmrelease.yaml": dump(release)}
    if nfd:
        files[f"{base}/nfd-helmrepository.yaml"] = dump(nfd[0])
        files[f"{base}/nfd-helmrelease.yaml"] = dump(nfd[1])
    return files
