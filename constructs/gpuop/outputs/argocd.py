"""Writer: the Argo CD Application that installs a cluster's chart from git.

Helm source on a git path (Argo CD syncs on the git revision); releaseName and kubeVersion pinned so
Argo CD renders what gpuop validated. Cascading delete via the resources finalizer; automated sync
with prune and self-heal; ServerSideApply so large objects never hit the annotation limit.
"""

from __future__ import annotations

from ..plan import StackPlan
from ..yamlio import dump


def application(plan: StackPlan, gitops, chart_path: str) -> dict:
    a = gitops.argocd
    return {
        "apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
        "metadata": {"name": f"gpuop-{plan.name}", "namespace": a.namespace,
                     "labels": {"app.kubernetes.io/managed-by": "gpuop", "gpuop/cluster": plan.name, **dict(plan.labels)},
                     "finalizers": ["resources-finalizer.argocd.argoproj.io"]},
        "spec": {
            "project": a.project,
            "destination": {"server": a.server, "namespace": plan.namespace},
            "source": {"repoURL": gitops.repoURL, "targetRevision": gitops.revision, "path": chart_path,
                       "helm": {"releaseName": plan.name, "kubeVersion": plan.kube_version}},
            "syncPolicy": {"automated": {"prune": True, "selfHeal": True},
                           "syncOptions": ["ServerSideApply=true", "CreateNamespace=false"]},
        },
    }


def write(plan: StackPlan, gitops, base: str, chart_path: str) -> dict[str, str]:
    return {f"{base}/application.yaml": dump(application(plan, gitops, chart_path))}
