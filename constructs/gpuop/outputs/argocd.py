"""Writer: the Argo CD Applications of a cluster: the GPU stack's chart from git and, in
`spec.nfd.mode: deploy`, Node Feature Discovery's own upstream chart (the objects' shape: outputs/gitops.py).

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
from gpuop.outputs import gitops as gitops_objects
from gpuop.outputs import rollout


def application(plan: StackPlan, gitops, chart_path: str) -> dict:
    app = gitops_objects.stack_application(plan, gitops, chart_path,
                                           rollout.argocd_retry(plan),    # sized for a driver rebuild per node
                                           "0" if plan.nfd.mode == "deploy" else None)
    app["spec"]["syncPolicy"]["syncOptions"] += rollout.move_sync_options(plan)   # a planned move: old objects last
    return app


def nfd_application(plan: StackPlan, gitops) -> dict | None:
    n = plan.nfd
    if n.mode != "deploy" or not n.chart:
        return None
    return gitops_objects.chart_application(
        plan, gitops, f"gpuop-{plan.name}-nfd", project=nfd_project_name(plan), namespace=n.namespace,
        repository=n.repository, chart=n.chart, version=n.version, release_name=n.release_name, values=n.values,
        wave="-1")


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
    return gitops_objects.argocd_repo_url(plan.nfd.repository)


def nfd_project_name(plan: StackPlan) -> str:
    return f"gpuop-nfd-{plan.name}"      # not the Application's name (gpuop-<cluster>-nfd): one name, one object


def nfd_project_spec(description: str, repos, destinations, namespaces, releases) -> dict:
    """An NFD AppProject's spec: these chart repositories, destinations and namespaces, NFD's kinds, and the
    cluster-scoped objects NFD creates, by name (its CRDs, its namespaces, the RBAC named after each release)."""
    rbac = "rbac.authorization.k8s.io"
    cluster = [{"group": "apiextensions.k8s.io", "kind": "CustomResourceDefinition", "name": "*.nfd.k8s-sigs.io"}]
    cluster += [{"group": "", "kind": "Namespace", "name": ns} for ns in sorted(set(namespaces))]   # CreateNamespace=true
    cluster += [{"group": rbac, "kind": k, "name": f"{r}*"} for k in ("ClusterRole", "ClusterRoleBinding")
                for r in sorted(set(releases))]
    return {"description": description, "sourceRepos": sorted(set(repos)), "destinations": list(destinations),
            "clusterResourceWhitelist": cluster,
            "namespaceResourceWhitelist": [{"group": g, "kind": k} for g, k in NFD_NAMESPACED]}


def nfd_app_project(plan: StackPlan, gitops) -> dict | None:
    """NFD's own AppProject (not `default`): its chart repository, its namespace, its kinds, and the
    cluster-scoped objects it creates by name, so NFD's Application cannot create anything else."""
    n = plan.nfd
    if n.mode != "deploy" or not n.chart:
        return None
    return {
        "apiVersion": "argoproj.io/v1alpha1", "kind": "AppProject",
        "metadata": {"name": nfd_project_name(plan), "namespace": gitops.argocd.namespace,
                     "labels": {**gitops_objects.MANAGED_BY, "gpuop/cluster": plan.name}},
        "spec": nfd_project_spec(f"Node Feature Discovery of GPU cluster {plan.name}: its chart, namespace and kinds only.",
                                 [nfd_repo_url(plan)], [gitops_objects.destination(plan, gitops, n.namespace)],
                                 [n.namespace], [n.release_name]),
    }


def index_entry(plan: StackPlan) -> dict:
    """index.json: what the fleet's NFD AppProject needs of this cluster (deploy mode), its profile destination
    and the credential Secrets it names, where set."""
    n, d = plan.nfd, plan.delivery
    out = {}
    if n.mode == "deploy" and n.chart and plan.operator is None:    # operator mode: NVIDIA's chart brings NFD
        out["nfd"] = {"repoURL": nfd_repo_url(plan), "namespace": n.namespace, "releaseName": n.release_name}
    if gitops_objects.argocd_target(plan):
        out["destination"] = gitops_objects.argocd_target(plan)
    if d.flux_kubeconfig:
        out["fluxKubeConfig"] = d.flux_kubeconfig
    if d.credentials:
        creds: dict = {}
        for repo, engine, secret in d.credentials:
            creds.setdefault(repo, {})[engine] = secret
        out["credentials"] = creds
    return out


def files(plan: StackPlan, gitops, base: str, chart_path: str) -> dict[str, str]:
    files = {f"{base}/application.yaml": dump(application(plan, gitops, chart_path))}
    nfd = nfd_application(plan, gitops)
    if nfd is not None:
        files[f"{base}/nfd-application.yaml"] = dump(nfd)
        files[f"{base}/nfd-appproject.yaml"] = dump(nfd_app_project(plan, gitops))
        # the fleet ApplicationSet `gpuop-fleet-nfd` delivers the same Application from a hub
        files[f"{base.rsplit('/', 1)[0]}/params/nfd.json"] = gitops_objects.hub_params(plan, nfd)
    return files
