"""Writer: the DRA driver's delivery: NVIDIA's DRA driver from its own upstream chart
(`dra-driver-nvidia-gpu`, OCI repository registry.k8s.io/dra-driver-nvidia/charts), pinned to the DRA
catalog's chart version, with the values plan/dra.py pins, in its own namespace; and the capacity entry of
index.json. The objects' shape is outputs/gitops.py's.

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
from gpuop.outputs import gitops as gitops_objects
from gpuop.plan.model import StackPlan

REPO = "dra-driver-nvidia-gpu"


def argocd_application(plan: StackPlan, gitops) -> dict | None:
    d = plan.dra
    if d is None:
        return None
    return gitops_objects.chart_application(
        plan, gitops, f"gpuop-{plan.name}-dra", project=gitops.argocd.project, namespace=d.namespace,
        repository=d.repository, chart=d.chart, version=d.chart_version, release_name=d.release_name,
        values=d.values, wave="1")


def flux_objects(plan: StackPlan, gitops) -> list[dict]:
    d, f = plan.dra, gitops.flux
    if d is None:
        return []
    name = gitops_objects.flux_source_name(plan, REPO)
    repo = gitops_objects.helm_repository(name, f.namespace, d.repository, f.interval,
                                          secret=plan.delivery.secret("dra", "flux"))
    release = gitops_objects.chart_release(
        plan, gitops, f"gpuop-{plan.name}-dra", repository=name, chart=d.chart, version=d.chart_version,
        release_name=d.release_name, target_namespace=d.namespace, values=d.values,
        dependsOn=[{"name": f"gpuop-{plan.name}", "namespace": f.namespace}])   # after the GPU stack
    return [repo, release]


def write(plan: StackPlan, gitops, base: str) -> dict[str, str]:
    """dist/<cluster>/argocd/dra-application.yaml and flux/dra-helm{repository,release}.yaml."""
    app = argocd_application(plan, gitops)
    if app is None:
        return {}
    repo, release = flux_objects(plan, gitops)
    return {f"{base}/params/dra.json": gitops_objects.hub_params(plan, app),   # the fleet's `gpuop-fleet-dra`
            f"{base}/argocd/dra-application.yaml": dump(app),
            f"{base}/flux/dra-helmrepository.yaml": dump(repo),
            f"{base}/flux/dra-helmrelease.yaml": dump(release)}


def index_entry(plan: StackPlan) -> dict:
    """index.json: the DRA driver and, per DeviceClass, what one GPU / one node / the pool offers."""
    d = plan.dra
    if d is None:
        return {}
    return {"dra": {"version": d.version, "chart": d.chart, "chartVersion": d.chart_version,
                    "namespace": d.namespace, "pools": list(d.pools), "capacity": d.capacity()}}
