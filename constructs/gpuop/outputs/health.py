"""Health checks the engines lack for kinds in the stack.

Argo CD ships no health check for NodeFeatureRule, ServiceMonitor, PrometheusRule or OpenShift's
SecurityContextConstraints (none has a status: present means applied) and no longer ships the one for Applications, which waves between Applications (NFD
before the GPU stack in an app-of-apps) need. gpuop writes them as an `argocd-cm` snippet
(fleet/argocd/argocd-cm-health.yaml: merge its data into Argo CD's argocd-cm). Flux gets the same
knowledge as CEL `healthCheckExprs` on the HelmRelease.
"""

from __future__ import annotations

NO_STATUS_LUA = """hs = {}
hs.status = "Healthy"
hs.message = "applied (this kind has no status)"
return hs
"""

APPLICATION_LUA = """hs = {}
hs.status = "Progressing"
hs.message = ""
if obj.status ~= nil then
  if obj.status.health ~= nil then
    hs.status = obj.status.health.status
    if obj.status.health.message ~= nil then
      hs.message = obj.status.health.message
    end
  end
end
return hs
"""

# group, kind, apiVersion of the custom kinds gpuop emits that have no status of their own
NO_STATUS_KINDS = (("nfd.k8s-sigs.io", "NodeFeatureRule", "nfd.k8s-sigs.io/v1alpha1"),
                   ("monitoring.coreos.com", "ServiceMonitor", "monitoring.coreos.com/v1"),
                   ("monitoring.coreos.com", "PrometheusRule", "monitoring.coreos.com/v1"),
                   ("security.openshift.io", "SecurityContextConstraints", "security.openshift.io/v1"))


def argocd_cm(gitops, entries: list[dict]) -> dict:
    used = {(g, k) for e in entries for g, k, _ in e["kinds"]}
    data = {"resource.customizations.health.argoproj.io_Application": APPLICATION_LUA}
    for group, kind, _ in NO_STATUS_KINDS:
        if (group, kind) in used:
            data[f"resource.customizations.health.{group}_{kind}"] = NO_STATUS_LUA
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "argocd-cm", "namespace": gitops.argocd.namespace,
                         "labels": {"app.kubernetes.io/name": "argocd-cm", "app.kubernetes.io/part-of": "argocd"}},
            "data": data}


def flux_health_check_exprs(kinds: set[tuple[str, str]]) -> list[dict]:
    return [{"apiVersion": api, "kind": kind, "current": "true"}
            for group, kind, api in NO_STATUS_KINDS if (group, kind) in kinds]
