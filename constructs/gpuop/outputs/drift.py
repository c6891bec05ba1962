"""Drift contracts: fields of gpuop's objects that something other than the GitOps engine sets, so
the engines neither report them as drift nor fight over them.

| kind | field | who writes it |
|---|---|---|
| Namespace | labels `kubernetes.io/metadata.name` | the API server, on every namespace |
| Namespace | annotations `openshift.io/sa.scc.*` | OpenShift's namespace controller |
| ServiceAccount | `imagePullSecrets`, `secrets` | OpenShift adds its registry pull secret to every SA |
| DaemonSet | pod template annotation `kubectl.kubernetes.io/restartedAt` | `kubectl rollout restart` |
| DaemonSet | image of the `openshift-driver-toolkit-ctr` sidecar | OpenShift's image policy resolves the ImageStream tag to a digest |

Argo CD gets `ignoreDifferences` (with `RespectIgnoreDifferences=true`, so a sync does not write the
fields back); Flux gets `driftDetection.ignore` on the HelmRelease.
"""

from __future__ import annotations

RULES = (
    ("", "Namespace", ("/metadata/labels/kubernetes.io~1metadata.name",
                       "/metadata/annotations/openshift.io~1sa.scc.mcs",
                       "/metadata/annotations/openshift.io~1sa.scc.supplemental-groups",
                       "/metadata/annotations/openshift.io~1sa.scc.uid-range")),
    ("", "ServiceAccount", ("/imagePullSecrets", "/secrets")),
    ("apps", "DaemonSet", ("/spec/template/metadata/annotations/kubectl.kubernetes.io~1restartedAt",)),
)


# fields inside lists, matched by name (Argo CD only: Flux's drift detection compares with a dry run,
# which applies the same image-policy admission)
JQ_RULES = (
    ("apps", "DaemonSet",
     ('.spec.template.spec.containers[] | select(.name == "openshift-driver-toolkit-ctr") | .image',)),
)


def argocd_ignore_differences() -> list[dict]:
    out = [{"group": g, "kind": k, "jsonPointers": list(paths)} for g, k, paths in RULES]
    for g, k, exprs in JQ_RULES:
        entry = next(e for e in out if (e["group"], e["kind"]) == (g, k))
        entry["jqPathExpressions"] = list(exprs)
    return out


def flux_drift_detection() -> dict:
    return {"mode": "enabled",
            "ignore": [{"paths": list(paths), "target": {"group": g, "kind": k}} for g, k, paths in RULES]}
