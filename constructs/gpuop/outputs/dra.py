"""Writer: the DRA driver's delivery: NVIDIA's DRA driver from its own upstream chart
(`dra-driver-nvidia-gpu`, OCI repository registry.k8s.io/dra-driver-nvidia/charts), pinned to the DRA
catalog's chart version, with the values plan/dra.py pins, in its own namespace; and the capacity entry of
index.json.

Like NFD's delivery (argocd.py, flux.py), and ordered *after* the GPU stack: the kubelet plugin needs the
GPU driver (gpuop's driver container or the host's) and the CDI-enabled runtime the toolkit configures,
and its nodes need the `nvidia.com/gpu.deploy.dra-driver` label the stack's NodeFeatureRule sets.
- Argo CD: an Application with sync-wave 1 (the GPU stack's is 0, NFD's -1).
- Flux: a HelmRepository of type oci and a HelmRelease that `dependsOn` the GPU stack's HelmRelease.
Differences from the chart's own install instructions: none beyond the pinned values (docs/install.md
uses `--set gpuResourcesEnabledOverride=true` too).
"""

from __future__ import annotations

from gpuop.kube.yamlio import dump
from gpuop.plan.model import StackPlan

WAVE = "argocd.argoproj.io/sync-wave"
REPO = "dra-driver-nvidia-gpu"


def _labels(plan: StackPlan) -> dict:
    return {"app.kubernetes.io/managed-by": "gpuop", "gpuop/cluster": plan.name, **dict(plan.labels)}


def argocd_application(plan: StackPlan, gitops) -> dict | None:
    d = plan.dra
    if d is None:
        return None
    a = gitops.argocd
    return {
        "apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
        "metadata": {"name": f"gpuop-{plan.name}-dra", "namespace": a.namespace, "labels": _labels(plan),
                     "finalizers": ["resources-finalizer.argocd.argoproj.io"], "annotations": {WAVE: "1"}},
        "spec": {
            "project": a.project,
            "destination": {"server": a.server, "namespace": d.namespace},
            # Argo CD takes an OCI Helm repository without the oci:// scheme (repoURL + chart)
            "source": {"repoURL": d.repository.removeprefix("oci://"), "chart": d.chart,
                       "targetRevision": d.chart_version,
                       "helm": {"releaseName": d.release_name, "kubeVersion": plan.kube_version,
                                "valuesObject": d.values}},
            "syncPolicy": {"automated": {"prune": True, "selfHeal": True},
                           "syncOptions": ["ServerSideApply=true", "CreateNamespace=true"],
                           "retry": {"limit": 5, "backoff": {"duration": "10s", "factor": 2, "maxDuration": "3m"}}},
        },
    }


def flux_objects(plan: StackPlan, gitops) -> list[dict]:
    d, f = plan.dra, gitops.flux
    if d is None:
        return []
    repo = {"apiVersion": "source.toolkit.fluxcd.io/v1", "kind": "HelmRepository",
            "metadata": {"name": REPO, "namespace": f.namespace, "labels": {"app.kubernetes.io/managed-by": "gpuop"}},
            "spec": {"type": "oci", "url": d.repository, "interval": f.interval}}
    release = {
        "apiVersion": "helm.toolkit.fluxcd.io/v2", "kind": "HelmRelease",
        "metadata": {"name": f"gpuop-{plan.name}-dra", "namespace": f.namespace, "labels": _labels(plan)},
        "spec": {
            "interval": f.interval,
            "releaseName": d.release_name,
            "targetNamespace": d.namespace,
            "storageNamespace": f.namespace,
            "chart": {"spec": {"chart": d.chart, "version": d.chart_version, "interval": f.interval,
                               "sourceRef": {"kind": "HelmRepository", "name": REPO, "namespace": f.namespace}}},
            "dependsOn": [{"name": f"gpuop-{plan.name}", "namespace": f.namespace}],   # after the GPU stack
            "install": {"createNamespace": True, "crds": "CreateReplace", "remediation": {"retries": 3}},
            "upgrade": {"crds": "CreateReplace", "remediation": {"retries": 3}},
            "values": d.values,
        },
    }
    return [repo, release]


def write(plan: StackPlan, gitops, base: str) -> dict[str, str]:
    """dist/<cluster>/argocd/dra-application.yaml and flux/dra-helm{repository,release}.yaml."""
    app = argocd_application(plan, gitops)
    if app is None:
        return {}
    repo, release = flux_objects(plan, gitops)
    return {f"{base}/argocd/dra-application.yaml": dump(app),
            f"{base}/flux/dra-helmrepository.yaml": dump(repo),
            f"{base}/flux/dra-helmrelease.yaml": dump(release)}


def index_entry(plan: StackPlan) -> dict:
    """index.json: the DRA driver and, per DeviceClass, what one GPU / one node / the pool offers."""
    d = plan.dra
    if d is None:
        return {}
    return {"dra": {"version": d.version, "chart": d.chart, "chartVersion": d.chart_version,
                    "namespace": d.namespace, "pools": list(d.pools), "capacity": d.capacity()}}
