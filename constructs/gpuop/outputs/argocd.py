"""Writer: the Argo CD Applications of a cluster: the GPU stack's chart from git and, in
`spec.nfd.mode: deploy`, Node Feature Discovery's own upstream chart.

GPU stack: Helm source on a git path (Argo CD syncs on the git revision); releaseName and kubeVersion
pinned so Argo CD renders what gpuop validated. Cascading delete via the resources finalizer; automated
sync with prune and self-heal; ServerSideApply so large objects never hit the annotation limit;
The GPU Application is in the least-privilege AppProject `gpuop` (fleet/argocd/appproject.yaml);
fields other controllers write are ignored (outputs/drift.py) and respected on sync.
SkipDryRunOnMissingResource when the stack holds custom resources (NodeFeatureRule, ServiceMonitor)
whose CRDs another Application installs, so the first sync does not fail before they exist.

NFD: in its own AppProject `gpuop-nfd-<cluster>` (nfd-appproject.yaml; least privilege, not the
permissive `default`), a Helm-repository source pinned to the stack release's chart version, with the settings the GPU
stack needs (catalog releases.yaml) as `valuesObject`, in its own namespace (created by the sync).
Ordering: the NFD Application has sync-wave -1 and the GPU stack's 0, so an app-of-apps that manages
both syncs NFD (and its NodeFeatureRule CRD) first. Waves between Applications need the Application
health check that Argo CD no longer ships (gitops-notes §1); without it they are only an order of
creation, and SkipDryRunOnMissingResource plus retries cover the gap.
"""

from __future__ import annotations

from gpuop.plan.model import StackPlan
from gpuop.kube.yamlio import dump
from gpuop.outputs import drift
from gpuop.outputs import rollout
from gpuop.outputs.fleet import PROJECT

WAVE = "argocd.argoproj.io/sync-wave"
# The chart's Namespace belongs to the release on this path (CreateNamespace=false); the `helm test` pod
# needs a GPU and is for people, not for every sync.
DELIVERY_HELM = {"skipTests": True, "valuesObject": {"createNamespace": True}}


def _metadata(name: str, plan: StackPlan, gitops, wave: str | None) -> dict:
    m = {"name": name, "namespace": gitops.argocd.namespace,
         "labels": {"app.kubernetes.io/managed-by": "gpuop", "gpuop/cluster": plan.name, **dict(plan.labels)},
         "finalizers": ["resources-finalizer.argocd.argoproj.io"]}
    if wave is not None:
        m["annotations"] = {WAVE: wave}
    return m


def application(plan: StackPlan, gitops, chart_path: str) -> dict:
    a = gitops.argocd
    options = ["ServerSideApply=true", "CreateNamespace=false", "RespectIgnoreDifferences=true"]
    if plan.uses_crd_kinds:
        options.append("SkipDryRunOnMissingResource=true")
    return {
        "apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
        "metadata": _metadata(f"gpuop-{plan.name}", plan, gitops, "0" if plan.nfd.mode == "deploy" else None),
        "spec": {
            "project": PROJECT,
            "destination": {"server": a.server, "namespace": plan.namespace},
            "source": {"repoURL": gitops.repoURL, "targetRevision": gitops.revision, "path": chart_path,
                       "helm": {"releaseName": plan.name, "kubeVersion": plan.kube_version, **DELIVERY_HELM}},
            "syncPolicy": {"automated": {"prune": True, "selfHeal": True}, "syncOptions": options,
                           "retry": rollout.argocd_retry(plan)},    # sized for a driver rebuild per node, if any
            "ignoreDifferences": drift.argocd_ignore_differences(),
        },
    }


def nfd_application(plan: StackPlan, gitops) -> dict | None:
    n = plan.nfd
    if n.mode != "deploy" or not n.chart:
        return None
    a = gitops.argocd
    return {
        "apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
        "metadata": _metadata(f"gpuop-{plan.name}-nfd", plan, gitops, "-1"),
        "spec": {
            "project": nfd_project_name(plan),
            "destination": {"server": a.server, "namespace": n.namespace},
            "source": {"repoURL": nfd_repo_url(plan), "chart": n.chart, "targetRevision": n.version,
                       "helm": {"releaseName": n.release_name, "kubeVersion": plan.kube_version,
                                "valuesObject": n.values}},
            "syncPolicy": {"automated": {"prune": True, "selfHeal": True},
                           "syncOptions": ["ServerSideApply=true", "CreateNamespace=true"],
                           "retry": {"limit": 5, "backoff": {"duration": "10s", "factor": 2, "maxDuration": "3m"}}},
        },
    }


# What NFD's chart (node-feature-discovery 0.19, kubernetes-sigs) installs; tests render the chart (the
# copy in ../shared/refs) and check every object against the project. Cluster-scoped objects by name:
# its CRDs and the RBAC objects named after the release (`<fullname>`, `-worker`, `-gc`, ...).
NFD_NAMESPACED = (("", "ConfigMap"), ("", "Service"), ("", "ServiceAccount"), ("apps", "DaemonSet"),
                  ("apps", "Deployment"), ("batch", "Job"), ("monitoring.coreos.com", "PodMonitor"),
                  ("networking.k8s.io", "NetworkPolicy"), ("policy", "PodDisruptionBudget"),
                  ("rbac.authorization.k8s.io", "Role"), ("rbac.authorization.k8s.io", "RoleBinding"))


def nfd_repo_url(plan: StackPlan) -> str:
    """NFD's chart repository as Argo CD names it: an OCI Helm repository without the oci:// scheme
    (repoURL + chart; the repository's Argo CD Secret says enableOCI), an HTTP one as it is."""
    return plan.nfd.repository.removeprefix("oci://")


def nfd_project_name(plan: StackPlan) -> str:
    return f"gpuop-nfd-{plan.name}"      # not the Application's name (gpuop-<cluster>-nfd): one name, one object


def nfd_app_project(plan: StackPlan, gitops) -> dict | None:
    """NFD's own AppProject (not `default`): its chart repository, its namespace, its kinds, and the
    cluster-scoped objects it creates by name, so NFD's Application cannot create anything else."""
    n = plan.nfd
    if n.mode != "deploy" or not n.chart:
        return None
    a = gitops.argocd
    rbac = "rbac.authorization.k8s.io"
    cluster = [{"group": "apiextensions.k8s.io", "kind": "CustomResourceDefinition", "name": "*.nfd.k8s-sigs.io"},
               {"group": "", "kind": "Namespace", "name": n.namespace}]     # CreateNamespace=true
    cluster += [{"group": rbac, "kind": k, "name": f"{n.release_name}*"} for k in ("ClusterRole", "ClusterRoleBinding")]
    return {
        "apiVersion": "argoproj.io/v1alpha1", "kind": "AppProject",
        "metadata": {"name": nfd_project_name(plan), "namespace": a.namespace,
                     "labels": {"app.kubernetes.io/managed-by": "gpuop", "gpuop/cluster": plan.name}},
        "spec": {
            "description": f"Node Feature Discovery of GPU cluster {plan.name}: its chart, namespace and kinds only.",
            "sourceRepos": [nfd_repo_url(plan)],
            "destinations": [{"server": a.server, "namespace": n.namespace}],
            "clusterResourceWhitelist": cluster,
            "namespaceResourceWhitelist": [{"group": g, "kind": k} for g, k in NFD_NAMESPACED],
        },
    }


def write(plan: StackPlan, gitops, base: str, chart_path: str) -> dict[str, str]:
    files = {f"{base}/application.yaml": dump(application(plan, gitops, chart_path))}
    nfd = nfd_application(plan, gitops)
    if nfd is not None:
        files[f"{base}/nfd-application.yaml"] = dump(nfd)
        files[f"{base}/nfd-appproject.yaml"] = dump(nfd_app_project(plan, gitops))
    return files
