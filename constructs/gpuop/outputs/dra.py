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
from gpuop.outputs.target import Target, Written

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
    """The HelmRepository and the HelmRelease; the release `dependsOn` the GPU stack's HelmRelease, which OLM
    operator mode has not (Flux then retries until the driver is up)."""
    d, f = plan.dra, gitops.flux
    if d is None:
        return []
    name = gitops_objects.flux_source_name(plan, REPO)
    repo = gitops_objects.helm_repository(name, f.namespace, d.repository, f.interval,
                                          secret=plan.delivery.secret("dra", "flux"))
    olm = plan.operator is not None and plan.operator.install == "olm"
    after = {} if olm else {"dependsOn": [{"name": f"gpuop-{plan.name}", "namespace": f.namespace}]}   # the GPU stack
    release = gitops_objects.chart_release(
        plan, gitops, f"gpuop-{plan.name}-dra", repository=name, chart=d.chart, version=d.chart_version,
        release_name=d.release_name, target_namespace=d.namespace, values=d.values, **after)
    return [repo, release]


def write(t: Target) -> Written:
    """Writer (outputs/target.py): dist/<cluster>/argocd/dra-application.yaml, flux/dra-helm{repository,release}.yaml
    and params/dra.json, in both deliveries (the standalone DRA chart beside NVIDIA's operator too), and the index
    entry's `dra`."""
    plan, f = t.plan, t.folders
    app = argocd_application(plan, t.gitops)
    if app is None:
        return Written({}, index_entry(plan))
    repo, release = flux_objects(plan, t.gitops)
    return Written({f"{f.params}/dra.json": gitops_objects.hub_params(plan, app),   # the fleet's `gpuop-fleet-dra`
                    f"{f.argocd}/dra-application.yaml": dump(app),
                    f"{f.flux}/dra-helmrepository.yaml": dump(repo),
                    f"{f.flux}/dra-helmrelease.yaml": dump(release)}, index_entry(plan))


def index_entry(plan: StackPlan) -> dict:
    """index.json: the DRA driver and, per DeviceClass, what one GPU / one node / the pool offers."""
    d = plan.dra
    if d is None:
        return {}
    return {"dra": {"version": d.version, "chart": d.chart, "chartVersion": d.chart_version,
                    "namespace": d.namespace, "pools": list(d.pools), "capacity": d.capacity()}}
