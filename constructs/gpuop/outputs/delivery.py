"""Writer: the delivery of gpuop's own stack (`spec.delivery.mode: stack`, the default) — the Argo CD
Application(s) (outputs/argocd.py), the Flux objects and the alternative overlay through Flux Kustomizations
(outputs/flux.py), and the fleet ApplicationSet's parameters of the cluster (`params/cluster.json`,
outputs/fleet.py). Operator mode's delivery is outputs/operator.py; outputs/cluster.py calls one of the two.
"""

from __future__ import annotations

from gpuop.outputs import argocd
from gpuop.outputs import fleet
from gpuop.outputs import flux
from gpuop.outputs.manifests import kinds
from gpuop.outputs.target import Target, Written


def write(t: Target) -> Written:
    plan, f = t.plan, t.folders
    chart_path = t.repo_path(f.chart)
    files = argocd.files(plan, t.gitops, f.argocd, chart_path)
    daemonsets = tuple(o.body["metadata"]["name"] for o in t.stack.objects if o.body["kind"] == "DaemonSet")
    # the health gate's Jobs (test hooks): the overlay's Kustomization waits for them as Helm's test does
    checks = tuple(o.body["metadata"]["name"] for o in t.stack.objects
                   if o.body["kind"] == "Job" and (o.body["metadata"].get("annotations") or {}).get("helm.sh/hook") == "test")
    files.update(flux.files(plan, t.gitops, f.flux, chart_path, f.flux_overlay, t.repo_path(f.overlay),
                            frozenset(kinds(t.stack)), daemonsets, t.signing, checks))
    # outside argocd/: not an object
    files[f"{t.name}/{fleet.PARAMS}"] = fleet.cluster_params({**t.identity(), **argocd.index_entry(plan)}, chart_path)
    return Written(files)
