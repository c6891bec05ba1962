"""Writer: the fleet-level Argo CD objects — one ApplicationSet for every cluster and an AppProject
with least privilege.

ApplicationSet: a git files generator over `dist/*/argocd/cluster.json` (one small parameter file per
cluster, written here), goTemplate with `missingkey=error` so a missing parameter fails the render
instead of producing an empty string. Each generated Application installs the cluster's chart into
the Argo CD cluster registered under the cluster's gpuop name (`destination.name`), with the same
sync options as the per-cluster Application.

AppProject `gpuop`: only this repository as source, only each cluster's own namespace as
destination, and only the kinds the stacks contain (cluster-scoped and namespaced lists computed from
the compiled objects), so a chart can never create anything else.
"""

from __future__ import annotations

from gpuop.kube.yamlio import dump, dump_json
from gpuop.outputs import drift
from gpuop.outputs import health

PROJECT = "gpuop"


def cluster_params(entry: dict, chart_path: str) -> str:
    """dist/<cluster>/argocd/cluster.json: the ApplicationSet's parameters for one cluster."""
    return dump_json({"name": entry["name"], "namespace": entry["namespace"], "releaseName": entry["releaseName"],
                      "chartPath": chart_path, "kubeVersion": entry["kubeVersion"]})


def application_set(gitops) -> dict:
    a = gitops.argocd
    path = gitops.path.rstrip("/")
    return {
        "apiVersion": "argoproj.io/v1alpha1", "kind": "ApplicationSet",
        "metadata": {"name": "gpuop-fleet", "namespace": a.namespace, "labels": {"app.kubernetes.io/managed-by": "gpuop"}},
        "spec": {
            "goTemplate": True,
            "goTemplateOptions": ["missingkey=error"],
            "generators": [{"git": {"repoURL": gitops.repoURL, "revision": gitops.revision,
                                    "files": [{"path": f"{path}/*/argocd/cluster.json"}]}}],
            "template": {
                "metadata": {"name": "gpuop-{{.name}}", "labels": {"app.kubernetes.io/managed-by": "gpuop",
                                                                  "gpuop/cluster": "{{.name}}"},
                             "finalizers": ["resources-finalizer.argocd.argoproj.io"]},
                "spec": {
                    "project": PROJECT,
                    "destination": {"name": "{{.name}}", "namespace": "{{.namespace}}"},
                    "source": {"repoURL": gitops.repoURL, "targetRevision": gitops.revision, "path": "{{.chartPath}}",
                               "helm": {"releaseName": "{{.releaseName}}", "kubeVersion": "{{.kubeVersion}}"}},
                    "syncPolicy": {"automated": {"prune": True, "selfHeal": True},
                                   "syncOptions": ["ServerSideApply=true", "CreateNamespace=false",
                                                   "RespectIgnoreDifferences=true",
                                                   "SkipDryRunOnMissingResource=true"]},
                    "ignoreDifferences": drift.argocd_ignore_differences(),
                },
            },
        },
    }


def app_project(gitops, entries: list[dict]) -> dict:
    cluster_kinds, ns_kinds, destinations = set(), set(), set()
    for e in entries:
        for group, kind, namespaced in e["kinds"]:
            (ns_kinds if namespaced else cluster_kinds).add((group, kind))
        destinations.add((e["name"], e["namespace"]))
    a = gitops.argocd
    return {
        "apiVersion": "argoproj.io/v1alpha1", "kind": "AppProject",
        "metadata": {"name": PROJECT, "namespace": a.namespace, "labels": {"app.kubernetes.io/managed-by": "gpuop"}},
        "spec": {
            "description": "GPU stacks compiled by gpuop: only their repository, namespaces and kinds.",
            "sourceRepos": [gitops.repoURL],
            "destinations": [{"name": n, "namespace": ns} for n, ns in sorted(destinations)]
                            + [{"server": a.server, "namespace": ns} for ns in sorted({d[1] for d in destinations})],
            "clusterResourceWhitelist": [{"group": g, "kind": k} for g, k in sorted(cluster_kinds)],
            "namespaceResourceWhitelist": [{"group": g, "kind": k} for g, k in sorted(ns_kinds)],
        },
    }


def write(gitops, entries: list[dict]) -> dict[str, str]:
    files = {"fleet/argocd/applicationset.yaml": dump(application_set(gitops)),
             "fleet/argocd/appproject.yaml": dump(app_project(gitops, entries)),
             "fleet/argocd/argocd-cm-health.yaml": dump(health.argocd_cm(gitops, entries))}
    return files
