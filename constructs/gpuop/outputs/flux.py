"""Writer: the Flux objects that install a cluster's chart from git: a GitRepository (`gpuop`) and a
HelmRelease v2 built from the chart path.

The HelmRelease uses `chart.spec` (not chartRef) with reconcileStrategy ChartVersion: gpuop bumps the
chart version exactly when content changes, so Flux upgrades exactly then. CRDs are created and
replaced on install and upgrade (Flux's upgrade default is Skip). The release is stored in Flux's
namespace, so the chart can create its own target namespace.
"""

from __future__ import annotations

from ..plan import StackPlan
from ..yamlio import dump


def objects(plan: StackPlan, gitops, chart_path: str) -> list[dict]:
    f = gitops.flux
    labels = {"app.kubernetes.io/managed-by": "gpuop", "gpuop/cluster": plan.name, **dict(plan.labels)}
    repo = {"apiVersion": "source.toolkit.fluxcd.io/v1", "kind": "GitRepository",
            "metadata": {"name": "gpuop", "namespace": f.namespace, "labels": {"app.kubernetes.io/managed-by": "gpuop"}},
            "spec": {"url": gitops.repoURL, "ref": {"branch": gitops.revision}, "interval": f.interval}}
    release = {
        "apiVersion": "helm.toolkit.fluxcd.io/v2", "kind": "HelmRelease",
        "metadata": {"name": f"gpuop-{plan.name}", "namespace": f.namespace, "labels": labels},
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
    return [repo, release]


def write(plan: StackPlan, gitops, base: str, chart_path: str) -> dict[str, str]:
    repo, release = objects(plan, gitops, chart_path)
    return {f"{base}/gitrepository.yaml": dump(repo), f"{base}/helmrelease.yaml": dump(release)}
