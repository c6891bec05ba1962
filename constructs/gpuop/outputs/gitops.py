"""The GitOps objects, built in one place: Argo CD Applications (and the fleet ApplicationSet's template)
and Flux GitRepository / HelmRepository / HelmRelease. The writers (argocd.py, flux.py, dra.py, operator.py, fleet.py)
decide what each cluster delivers and in which order; this module gives every object the same shape.

What every object shares, and why:
- labels `app.kubernetes.io/managed-by: gpuop` (+ `gpuop/cluster` and the profile's labels on a cluster's
  objects), so `gpuop diff` and a person can tell gpuop's delivery objects from others;
- Argo CD: the resources finalizer (deleting the Application deletes what it deployed: gpuop's objects
  are never orphaned), automated sync with prune and self-heal, ServerSideApply (large CRDs and
  ConfigMaps never hit the last-applied annotation limit); an OCI Helm repository named without its
  oci:// scheme (Argo CD takes `repoURL` + `chart`; its repository Secret says enableOCI);
- Flux: one GitRepository source per Flux namespace, following the configured ref (a tag, a semver
  range or a commit too, never that string taken as a branch); a HelmRepository of `type: oci` exactly
  when its URL is oci://; a HelmRelease from such a
  repository installs and upgrades its CRDs (`crds: CreateReplace`: Flux's upgrade default is Skip) and
  retries a failed install or upgrade three times.
"""

from __future__ import annotations

import json

from gpuop.kube.yamlio import dump_json
from gpuop.outputs import drift

MANAGED_BY = {"app.kubernetes.io/managed-by": "gpuop"}
WAVE = "argocd.argoproj.io/sync-wave"
FINALIZER = "resources-finalizer.argocd.argoproj.io"
APPLICATION_API = "argoproj.io/v1alpha1"
SOURCE_API = "source.toolkit.fluxcd.io/v1"
HELM_API = "helm.toolkit.fluxcd.io/v2"
PROJECT = "gpuop"              # the GPU stacks' least-privilege AppProject (fleet/argocd/appproject.yaml)
ROLLOUT_WAVE = "gpuop/rollout-wave"   # profile metadata label: the cluster's rollout wave (outputs/fleet.py)
DEFAULT_WAVE = "default"              # clusters without the label: the last wave
# The GPU stack's chart from git: its Namespace belongs to the release (CreateNamespace=false). Tests are rendered
# (skipTests false): the health gate's Jobs are both `helm test` hooks and Argo CD PostSync hooks, and `helm
# template --skip-tests` would drop them; Argo CD runs no Helm test hook (its Helm hooks table: no equivalent), so
# the smoke-test pod, a Helm test hook only, still never runs on a sync.
STACK_HELM = {"skipTests": False, "valuesObject": {"createNamespace": True}}
STACK_SYNC_OPTIONS = ("ServerSideApply=true", "CreateNamespace=false", "RespectIgnoreDifferences=true")
# Charts from a Helm repository (NFD's, the DRA driver's, NVIDIA's operator chart): a bounded retry
CHART_RETRY = {"limit": 5, "backoff": {"duration": "10s", "factor": 2, "maxDuration": "3m"}}


def cluster_labels(plan) -> dict:
    """The labels of a cluster's delivery objects."""
    return {**MANAGED_BY, "gpuop/cluster": plan.name, **dict(plan.labels)}


# ------------------------------------------------------------------------------------ destinations
# Every destination of a cluster comes from its profile (spec.delivery.destination): the per-cluster objects and
# the fleet ApplicationSets' alike, the GPU stack, NVIDIA's operator, NFD and the DRA driver alike.

def argocd_target(plan) -> dict:
    """The profile's Argo CD destination ({name} or {server}); {} when the profile names none."""
    d = plan.delivery
    return {"name": d.argocd_name} if d.argocd_name else {"server": d.argocd_server} if d.argocd_server else {}


def destination(plan, gitops, namespace: str) -> dict:
    """A per-cluster Application's destination: the profile's, else gpuop.yaml's gitops.argocd.server (the
    cluster Argo CD runs in, by default)."""
    return {**(argocd_target(plan) or {"server": gitops.argocd.server}), "namespace": namespace}


def hub_target(plan) -> dict:
    """The fleet ApplicationSets' destination of a cluster: the profile's, else the Argo CD cluster registered
    under the cluster's gpuop name."""
    return argocd_target(plan) or {"name": plan.name}


def flux_remote(plan) -> dict:
    """`spec.kubeConfig` of a cluster's HelmReleases and Kustomizations when a Flux hub delivers it (the
    profile's kubeConfigSecret), else nothing: Flux applies to its own cluster."""
    secret = plan.delivery.flux_kubeconfig
    return {"kubeConfig": {"secretRef": {"name": secret}}} if secret else {}


def storage_namespace(plan, gitops, target: str) -> str:
    """Where a HelmRelease stores its release: Flux's namespace on Flux's own cluster; the release's target
    namespace (which the install creates) on a hub's remote cluster, which need not have Flux's namespace."""
    return target if plan.delivery.flux_kubeconfig else gitops.flux.namespace


def flux_source_name(plan, shared: str) -> str:
    """A chart repository's HelmRepository name: `shared` (one per Flux namespace, as a cluster running its own
    Flux has), or per cluster when a Flux hub delivers it, where clusters with different mirrors would
    otherwise overwrite one another's source."""
    return f"gpuop-{plan.name}-{shared}" if plan.delivery.flux_kubeconfig else shared


def hub_params(plan, app: dict, **extra: str) -> str:
    """dist/<cluster>/params/<kind>.json: what a fleet ApplicationSet needs to generate the Application `app` (the
    per-cluster one) on a hub: scalars only, each landing in a string field of a fixed template (the project and
    every other field are the ApplicationSet's own, never a parameter's); the chart values as one JSON text,
    Argo CD's `helm.values`. The destination is the profile's, else the Argo CD cluster named like the profile."""
    src, dest, target = app["spec"]["source"], app["spec"]["destination"], hub_target(plan)
    p = {"name": plan.name, "wave": dict(plan.labels).get(ROLLOUT_WAVE) or DEFAULT_WAVE,
         "namespace": dest["namespace"], "destinationName": target.get("name", ""),
         "destinationServer": target.get("server", ""), "repoURL": src["repoURL"], "revision": src["targetRevision"]}
    if "chart" in src:
        h = src["helm"]
        p.update(chart=src["chart"], releaseName=h["releaseName"], kubeVersion=h["kubeVersion"],
                 values=json.dumps(h["valuesObject"], sort_keys=True, separators=(",", ":"), ensure_ascii=False))
    else:   # not `path`: a git files generator gives every template `.path` (the params file's own folder)
        p["sourcePath"] = src["path"]
    return dump_json({**p, **extra})


def secret_ref(name: str | None) -> dict:
    """A Flux source's `secretRef` naming the Secret with its credentials (by name only), or nothing."""
    return {"secretRef": {"name": name}} if name else {}


# ------------------------------------------------------------------------------------------ Argo CD

def argocd_repo_url(repository: str) -> str:
    """A Helm repository as Argo CD names it: an OCI one without the oci:// scheme, an HTTP one as it is."""
    return repository.removeprefix("oci://")


def helm(release_name: str, kube_version: str, **extra) -> dict:
    """An Application source's `helm`: the release name and kubeVersion pinned, so Argo CD renders what
    gpuop validated."""
    return {"releaseName": release_name, "kubeVersion": kube_version, **extra}


def git_source(repo_url: str, revision: str, path: str, helm: dict | None = None) -> dict:
    """A source on a path of the repository holding the compiled output."""
    src = {"repoURL": repo_url, "targetRevision": revision, "path": path}
    if helm is not None:
        src["helm"] = helm
    return src


def chart_source(repository: str, chart: str, version: str, helm: dict) -> dict:
    """A source on an upstream chart of a Helm repository, pinned to one chart version."""
    return {"repoURL": argocd_repo_url(repository), "chart": chart, "targetRevision": version, "helm": helm}


def sync_policy(options: list[str], retry: dict | None = None, namespace_labels: dict | None = None) -> dict:
    """Automated sync with prune and self-heal, the given sync options first-class."""
    policy = {"automated": {"prune": True, "selfHeal": True}, "syncOptions": list(options)}
    if retry is not None:
        policy["retry"] = retry
    if namespace_labels is not None:          # CreateNamespace=true: labels of the Namespace Argo CD creates
        policy["managedNamespaceMetadata"] = {"labels": namespace_labels}
    return policy


def application_metadata(name: str, labels: dict, namespace: str | None = None, wave: str | None = None) -> dict:
    """An Application's metadata; `namespace` None for an ApplicationSet template (its own namespace)."""
    m = {"name": name, **({"namespace": namespace} if namespace is not None else {}), "labels": labels,
         "finalizers": [FINALIZER]}
    if wave is not None:
        m["annotations"] = {WAVE: wave}
    return m


def application_spec(project: str, destination: dict, source: dict, sync: dict,
                     ignore_differences: list | None = None) -> dict:
    spec = {"project": project, "destination": destination, "source": source, "syncPolicy": sync}
    if ignore_differences is not None:
        spec["ignoreDifferences"] = ignore_differences
    return spec


def application(gitops, name: str, labels: dict, *, plan, project: str, namespace: str, source: dict, sync: dict,
                wave: str | None = None, ignore_differences: list | None = None) -> dict:
    """An Argo CD Application in the configured Argo CD namespace, deploying `source` into `namespace` of
    the cluster's destination (`destination`)."""
    return {"apiVersion": APPLICATION_API, "kind": "Application",
            "metadata": application_metadata(name, labels, gitops.argocd.namespace, wave),
            "spec": application_spec(project, destination(plan, gitops, namespace), source, sync, ignore_differences)}


def stack_spec(destination: dict, repo_url: str, revision: str, chart_path: str, release_name: str,
               kube_version: str, retry: dict, crd_kinds: bool = True) -> dict:
    """The spec of the Application of a GPU stack's chart (per cluster, and the fleet ApplicationSet's
    template): fields other controllers write ignored and respected on sync (outputs/drift.py);
    SkipDryRunOnMissingResource when the stack holds custom resources whose CRDs another Application
    installs, so the first sync does not fail before they exist."""
    options = list(STACK_SYNC_OPTIONS) + (["SkipDryRunOnMissingResource=true"] if crd_kinds else [])
    return application_spec(PROJECT, destination,
                            git_source(repo_url, revision, chart_path, helm(release_name, kube_version, **STACK_HELM)),
                            sync_policy(options, retry), drift.argocd_ignore_differences())


def stack_application(plan, gitops, chart_path: str, retry: dict, wave: str | None) -> dict:
    """The Application of one cluster's GPU stack chart, on this repository's compiled output."""
    a = gitops.argocd
    return {"apiVersion": APPLICATION_API, "kind": "Application",
            "metadata": application_metadata(f"gpuop-{plan.name}", cluster_labels(plan), a.namespace, wave),
            "spec": stack_spec(destination(plan, gitops, plan.namespace), gitops.repoURL, gitops.revision,
                               chart_path, plan.name, plan.kube_version, retry, plan.uses_crd_kinds)}


def chart_application(plan, gitops, name: str, *, project: str, namespace: str, repository: str, chart: str,
                      version: str, release_name: str, values: dict, wave: str | None = None) -> dict:
    """An upstream chart (NFD's, the DRA driver's) into its own namespace, created by the sync."""
    return application(gitops, name, cluster_labels(plan), plan=plan, project=project, namespace=namespace, wave=wave,
                       source=chart_source(repository, chart, version,
                                           helm(release_name, plan.kube_version, valuesObject=values)),
                       sync=sync_policy(["ServerSideApply=true", "CreateNamespace=true"], CHART_RETRY))


# ------------------------------------------------------------------------------------------- Flux

def git_repository(gitops, labels: dict | None = None) -> dict:
    """The GitRepository `gpuop` of this repository, following the configured ref (a branch, a tag, a semver
    range or a commit: settings gitops.ref, else the revision as a branch), with the credentials Secret the
    settings name (gitops.flux.secretRef)."""
    f = gitops.flux
    return {"apiVersion": SOURCE_API, "kind": "GitRepository",
            "metadata": {"name": "gpuop", "namespace": f.namespace, "labels": labels or dict(MANAGED_BY)},
            "spec": {"url": gitops.repoURL, "ref": gitops.flux_ref, "interval": f.interval, **secret_ref(f.secretRef)}}


def helm_repository(name: str, namespace: str, url: str, interval: str, labels: dict | None = None,
                    secret: str | None = None) -> dict:
    """A HelmRepository (`type: oci` exactly for an oci:// URL), with `secretRef` to the Secret named `secret`."""
    spec = {**({"type": "oci"} if url.startswith("oci://") else {}), "url": url, "interval": interval,
            **secret_ref(secret)}
    return {"apiVersion": SOURCE_API, "kind": "HelmRepository",
            "metadata": {"name": name, "namespace": namespace, "labels": labels or dict(MANAGED_BY)},
            "spec": spec}


def repository_chart(chart: str, version: str, repository: str, namespace: str, interval: str | None) -> dict:
    """A HelmRelease's `chart.spec` on a HelmRepository (`interval` None: the HelmRelease's own)."""
    spec = {"chart": chart, "version": version, **({"interval": interval} if interval is not None else {}),
            "sourceRef": {"kind": "HelmRepository", "name": repository, "namespace": namespace}}
    return {"chart": {"spec": spec}}


def helm_release(name: str, namespace: str, labels: dict, *, interval: str, release_name: str,
                 target_namespace: str, storage_namespace: str, chart: dict, values: dict,
                 install: dict | None = None, upgrade: dict | None = None, **extra) -> dict:
    """A Flux HelmRelease v2. `chart` is `{"chart": {"spec": ...}}` or `{"chartRef": ...}`; `install` and
    `upgrade` default to CRDs created and replaced with three retries; `extra` adds spec fields
    (timeout, driftDetection, dependsOn, ...)."""
    spec = {"interval": interval, "releaseName": release_name, "targetNamespace": target_namespace,
            "storageNamespace": storage_namespace, **chart,
            "install": install if install is not None else
            {"createNamespace": True, "crds": "CreateReplace", "remediation": {"retries": 3}},
            "upgrade": upgrade if upgrade is not None else {"crds": "CreateReplace", "remediation": {"retries": 3}},
            **extra, "values": values}
    return {"apiVersion": HELM_API, "kind": "HelmRelease",
            "metadata": {"name": name, "namespace": namespace, "labels": labels}, "spec": spec}


def chart_release(plan, gitops, name: str, *, repository: str, chart: str, version: str, release_name: str,
                  target_namespace: str, values: dict, **extra) -> dict:
    """An upstream chart (NFD's, the DRA driver's) from the HelmRepository `repository` in Flux's namespace,
    its release stored there too (on the cluster the release goes to: a hub's remote cluster included)."""
    f = gitops.flux
    return helm_release(name, f.namespace, cluster_labels(plan), interval=f.interval, release_name=release_name,
                        target_namespace=target_namespace,
                        storage_namespace=storage_namespace(plan, gitops, target_namespace),
                        chart=repository_chart(chart, version, repository, f.namespace, f.interval),
                        values=values, **flux_remote(plan), **extra)
