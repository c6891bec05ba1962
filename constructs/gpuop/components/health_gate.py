"""Health gate: per pool, a Job per check that runs on the pool's nodes after the stack rolls, as a hook of both
GitOps engines (plan/health_gate.py decides the checks; docs/health-gate.md says which engine waits where).

Checks, each a Job `gpuop-gate-<pool>-<check>` with one pod per node of the pool (`completions` = `parallelism`
= the pool's nodes, pods spread one per node by a required pod anti-affinity on kubernetes.io/hostname), pinned to
the pool (its nodeSelector and nvidia.com/gpu.present=true, tolerations of its taints and of nvidia.com/gpu):
- `dcgm`: `dcgmi diag -r <level>` on the cluster's DCGM image, against the node's own host engine (the
  `nvidia-dcgm` Service, internalTrafficPolicy Local: each pod reaches its node's nv-hostengine, as the exporter);
- `cuda-<resource>`: NVIDIA's CUDA vectorAdd sample (the chart's smoke test image, catalog releases.yaml
  smokeTest) requesting one of each resource the pool advertises (nvidia.com/gpu, nvidia.com/mig-<profile>,
  shared replicas), so every kind of device the plan promises runs a kernel;
- `nccl`: nccl-tests' all_reduce_perf across every GPU of a node (`-g <GPUs per node>`, all of them requested).
A check fails when a pod fails (backoffLimit 0) or runs past its budget (activeDeadlineSeconds: twice the catalog's
duration of the check, for an image pull and a start).

Hooks: `helm.sh/hook: test` (`helm test`; Flux runs it with the HelmRelease's spec.test.enable, and a failed test
leaves the release not Ready, so a HelmRelease that dependsOn it waits) and `argocd.argoproj.io/hook: PostSync`
(Argo CD runs no Helm test hook; its own hook annotation replaces the Helm one on the object: the Job runs after
every sync, and a failed Job fails the sync operation). Each run replaces the last one's Job
(before-hook-creation / BeforeHookCreation); a failed Job stays for its logs. The rendered manifests and the
overlay carry the Jobs as objects: applying them runs the checks once; Flux's overlay Kustomization health-checks
them (outputs/flux.py) and recreates a changed one (kustomize.toolkit.fluxcd.io/force); with kubectl, delete the
last run's Jobs (label app.kubernetes.io/component=health-gate) before applying a changed check.

gpuop's own objects (no Operator state): in operator mode they go with gpuop's other own objects (alerts,
dashboards).
"""

from __future__ import annotations

import hashlib

from pydantic import BaseModel, ConfigDict, Field

from gpuop.components.base import Component
from gpuop.components.builders import meta, taint_toleration
from gpuop.components.props import Props
from gpuop.kube.slots import slot

COMPONENT = "health-gate"
POOL_LABEL = "gpuop/pool"
CHECK_LABEL = "gpuop/check"
GPU_PRESENT = "nvidia.com/gpu.present"
HOOKS = {"helm.sh/hook": "test", "helm.sh/hook-delete-policy": "before-hook-creation",
         "argocd.argoproj.io/hook": "PostSync", "argocd.argoproj.io/hook-delete-policy": "BeforeHookCreation",
         # the rendered overlay applies the Jobs as objects: Flux's kustomize-controller recreates a changed one
         # (a Job's pod template is immutable) instead of failing the apply
         "kustomize.toolkit.fluxcd.io/force": "enabled"}


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class CheckProps(_Frozen):
    kind: str = Field(description="dcgm, cuda or nccl. Required.")
    slug: str = Field(description="The check's part of the Job name (dcgm, cuda-gpu, cuda-mig-1g-10gb, nccl). Required.")
    image: str = Field(description="The container image. Required.")
    command: tuple[str, ...] = Field((), description="The container's command. Omitted: the image's entrypoint.")
    resources: dict[str, int] = Field(default_factory=dict, description=(
        "Extended resources the pod requests (and limits). Omitted: none (the DCGM check uses the host engine's GPUs)."))
    deadline: int = Field(description="activeDeadlineSeconds of the Job. Required.")


class PoolGateProps(_Frozen):
    pool: str = Field(description="The pool's name. Required.")
    node_selector: dict[str, str] = Field(default_factory=dict, description="The pool's nodeSelector. Omitted: none.")
    tolerations: tuple[tuple[str, str, str], ...] = Field((), description=(
        "(key, value, effect) of each taint of the pool's nodes. Omitted: none."))
    nodes: int = Field(1, ge=1, description="Pods per check, one per node. Omitted: 1.")
    checks: tuple[CheckProps, ...] = Field(description="The pool's checks, in order. Required.")


class HealthGateProps(Props):
    pools: tuple[PoolGateProps, ...] = Field(description="Every gated pool. Required.")
    runtime_class: bool = Field(True, description=(
        "Run the CUDA and NCCL pods with runtimeClassName nvidia (the stack's RuntimeClass). Omitted: true."))
    openshift: bool = Field(False, description=(
        "OpenShift: the pods name no user id, so the restricted-v2 SCC gives them one from the namespace's range. "
        "Omitted: false (the pods run as user 10001)."))


def job_name(pool: str, slug: str) -> str:
    """gpuop-gate-<pool>-<check>, a DNS-1123 label (a Job's name is its pods' job-name label): a name over 63
    characters keeps a prefix and a digest of the whole, so two long names stay apart."""
    name = f"gpuop-gate-{pool}-{slug}"
    if len(name) <= 63:
        return name
    return f"{name[:54].rstrip('-')}-{hashlib.sha256(name.encode()).hexdigest()[:8]}"


def _job(p: HealthGateProps, pool: PoolGateProps, check: CheckProps, weight: int) -> dict:
    name = job_name(pool.pool, check.slug)
    labels = {"app.kubernetes.io/component": COMPONENT, "app.kubernetes.io/managed-by": "gpuop",
              POOL_LABEL: pool.pool, CHECK_LABEL: check.slug}
    container: dict = {"name": check.kind, "image": check.image, "imagePullPolicy": slot("imagePullPolicy")}
    if check.command:
        container["command"] = list(check.command)
    container["securityContext"] = {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                                    "capabilities": {"drop": ["ALL"]}}
    container["resources"] = {"requests": {"cpu": "100m", "memory": "128Mi", **{r: n for r, n in check.resources.items()}},
                              "limits": {"cpu": "1", "memory": "1Gi", **{r: n for r, n in check.resources.items()}}}
    tolerations = [taint_toleration(*t) for t in pool.tolerations]
    tolerations.append({"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"})
    spec: dict = {"restartPolicy": "Never",
                  "automountServiceAccountToken": False,             # no check calls the API
                  "nodeSelector": dict(sorted({**pool.node_selector, GPU_PRESENT: "true"}.items())),
                  "tolerations": tolerations,
                  "imagePullSecrets": slot("imagePullSecrets"),
                  # OpenShift's restricted-v2 SCC refuses a user id outside the namespace's range; it assigns one
                  "securityContext": {"runAsNonRoot": True, **({} if p.openshift else {"runAsUser": 10001}),
                                      "seccompProfile": {"type": "RuntimeDefault"}},
                  "containers": [container]}
    if check.resources and p.runtime_class:
        spec["runtimeClassName"] = "nvidia"
    if pool.nodes > 1:
        # one pod per node: the check covers pool.nodes distinct nodes, never one node twice
        spec["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{
            "labelSelector": {"matchLabels": {"batch.kubernetes.io/job-name": name}}, "topologyKey": "kubernetes.io/hostname"}]}}
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": meta(name, p.namespace, labels, {**HOOKS, "helm.sh/hook-weight": str(weight)}),
            "spec": {"backoffLimit": 0,                              # a failed check is a failed gate, not retried
                     "completions": pool.nodes, "parallelism": pool.nodes,
                     "activeDeadlineSeconds": check.deadline,
                     "template": {"metadata": {"labels": labels}, "spec": spec}}}


class HealthGate(Component):
    name = "health-gate"
    values_key = None
    props_type = HealthGateProps

    @classmethod
    def render(cls, props: HealthGateProps) -> list[dict]:
        out = []
        for pool in props.pools:
            for check in pool.checks:
                out.append(_job(props, pool, check, len(out)))
        return out
