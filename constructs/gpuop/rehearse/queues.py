"""The queues step of a rehearsal: Kueue's own controller manager admits a probe Workload per ResourceFlavor.

gpuop's queue objects (components/queues.py: a ResourceFlavor per pool, a ClusterQueue with the plan's quotas,
LocalQueues) are applied with the rest of the output; whether Kueue *admits* work onto a pool's flavor is
Kueue's decision, so the rehearsal runs Kueue v0.19.2's manager (tools/rehearsal/build.py --kueue, the release
whose CRDs gpuop ships) against its API server and asks it: per flavor of each ClusterQueue, a Workload whose
pod set requests one unit of a resource that flavor has quota for, pinned as a user's job on that pool would
be (the flavor's nodeLabels as nodeSelector, its taints tolerated), must be admitted onto that flavor.

What the rehearsal plays that a cluster's kubelet and Kueue's install would do:
- Kueue's install (config/default) gives it a namespace, an empty webhook Secret, its webhook configurations and
  conversion webhooks on five CRDs; its internal certificate management fills the Secret and injects the CA into
  them before the manager starts. The webhook configurations here hold no webhooks: the API server never calls
  Kueue (no pod network), so Kueue's defaulting webhooks do not run, and the probe Workloads are written whole.
- The kubelet mounts that Secret into Kueue's pod; the rehearsal copies the certificate files into the manager's
  certificate folder once Kueue has written them (cert-controller waits for them there).
A DRA flavor (quota on a DeviceClass through Kueue's `deviceClassMappings`) is not probed: Kueue counts claims
only with its DynamicResourceAllocation gate and a Configuration gpuop does not write; the step says so.
"""

from __future__ import annotations

import base64
import time
from pathlib import Path

import yaml

from gpuop.kube.quantity import QuantityError, parse_quantity

API = "kueue.x-k8s.io/v1beta2"
NAMESPACE = "kueue-system"
SERVICE = "kueue-webhook-service"
SECRET = "kueue-webhook-server-cert"
# the names Kueue's cert bootstrap injects into (pkg/util/cert: the service name without "-webhook-service")
WEBHOOK_CONFIGS = (("admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration",
                    "kueue-validating-webhook-configuration"),
                   ("admissionregistration.k8s.io/v1", "MutatingWebhookConfiguration",
                    "kueue-mutating-webhook-configuration"))
# the CRDs whose conversion webhook the bootstrap injects into (pkg/util/cert buildCertRotatorConfig): without
# `conversion.webhook.clientConfig` it never reports ready. Storage and served versions are both v1beta2 here,
# so the API server never calls the conversion webhook.
CONVERSION_CRDS = ("localqueues.kueue.x-k8s.io", "clusterqueues.kueue.x-k8s.io", "workloads.kueue.x-k8s.io",
                   "cohorts.kueue.x-k8s.io", "multikueueclusters.kueue.x-k8s.io")
CRDS_FILE = "kueue-crds.yaml"          # tools/rehearsal/build.py writes it beside the kueue binary
PROBE_QUEUE = "gpuop-probe"
ADMIT_TIMEOUT = 60.0


def crds(folder: Path) -> list[dict]:
    """Every Kueue CRD (the manager waits for each kind it reconciles), the conversion webhook set on the five
    Kueue's install patches."""
    out = []
    for doc in yaml.safe_load_all((folder / CRDS_FILE).read_text()):
        if not doc:
            continue
        if doc["metadata"]["name"] in CONVERSION_CRDS:
            doc["spec"]["conversion"] = {"strategy": "Webhook", "webhook": {
                "conversionReviewVersions": ["v1"],
                "clientConfig": {"service": {"name": SERVICE, "namespace": NAMESPACE, "path": "/convert"}}}}
        out.append(doc)
    return out


def install_objects() -> list[dict]:
    """What Kueue's install creates before its manager runs, webhooks left out (see the module's docstring)."""
    return [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}},
            {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": SECRET, "namespace": NAMESPACE}},
            *({"apiVersion": a, "kind": k, "metadata": {"name": n}} for a, k, n in WEBHOOK_CONFIGS)]


def config(workdir: Path, ports: dict[str, int]) -> str:
    """Kueue's Configuration: loopback only, no leader election, its own certificates, batch Jobs only."""
    doc = {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration", "namespace": NAMESPACE,
           "health": {"healthProbeBindAddress": f"127.0.0.1:{ports['health']}"},
           "metrics": {"bindAddress": f"127.0.0.1:{ports['metrics']}"},
           "webhook": {"host": "127.0.0.1", "port": ports["webhook"], "certDir": str(workdir / "kueue-certs")},
           "leaderElection": {"leaderElect": False},
           "internalCertManagement": {"enable": True, "webhookServiceName": SERVICE, "webhookSecretName": SECRET},
           "integrations": {"frameworks": ["batch/job"]},
           # the on-demand visibility API server authenticates through the in-cluster config, which a manager
           # run out of cluster lacks (it exits); the pending-workloads view is not what the probe asks
           "featureGates": {"VisibilityOnDemand": False}}
    return yaml.safe_dump(doc, sort_keys=True)


def mount_certs(secret: dict, certdir: Path) -> bool:
    """The kubelet's secret volume: the Secret's tls.crt / tls.key as files. False while Kueue has not written them."""
    data = secret.get("data") or {}
    if not {"tls.crt", "tls.key"} <= set(data):
        return False
    certdir.mkdir(parents=True, exist_ok=True)
    for key in ("tls.key", "tls.crt"):          # tls.crt last: cert-controller waits for that file
        tmp = certdir / f".{key}.tmp"
        tmp.write_bytes(base64.b64decode(data[key]))
        tmp.replace(certdir / key)
    return True


def _quantity_positive(q) -> bool:
    try:
        return parse_quantity(q) > 0
    except QuantityError:        # the API server refused such a ClusterQueue already (a `refused` finding)
        return False


def probes(objs: list[dict], probe_namespace: str) -> tuple[list[dict], list[tuple[str, str]], list[dict]]:
    """(probe Workloads, (flavor, why) for flavors not probed, LocalQueues the rehearsal adds) from the output's
    queue objects. A Workload per flavor of each ClusterQueue: queued to a LocalQueue of the output that feeds
    that ClusterQueue (else one the rehearsal adds in `probe_namespace`), one pod requesting one unit of the
    flavor's first resource with quota, the pod pinned and tolerating as the flavor says."""
    flavors = {o["metadata"]["name"]: o.get("spec") or {} for o in objs if o.get("kind") == "ResourceFlavor"}
    locals_ = [o for o in objs if o.get("kind") == "LocalQueue"]
    workloads, skipped, added = [], [], []
    for cq in sorted((o for o in objs if o.get("kind") == "ClusterQueue"), key=lambda o: o["metadata"]["name"]):
        cq_name = cq["metadata"]["name"]
        feeding = sorted((lq for lq in locals_ if (lq.get("spec") or {}).get("clusterQueue") == cq_name),
                         key=lambda lq: (lq["metadata"].get("namespace", ""), lq["metadata"]["name"]))
        if feeding:
            ns, queue = feeding[0]["metadata"].get("namespace", "default"), feeding[0]["metadata"]["name"]
        else:
            ns, queue = probe_namespace, f"{PROBE_QUEUE}-{cq_name}"
            added.append({"apiVersion": API, "kind": "LocalQueue", "metadata": {"name": queue, "namespace": ns},
                          "spec": {"clusterQueue": cq_name}})
        for group in (cq.get("spec") or {}).get("resourceGroups") or []:
            for fl in group.get("flavors") or []:
                name = fl["name"]
                quota = [r["name"] for r in fl.get("resources") or [] if _quantity_positive(r.get("nominalQuota"))]
                plugin = [r for r in quota if "/" in r]       # extended resources; a DeviceClass name has none
                if not plugin:
                    skipped.append((name, "a DRA flavor (quota on DeviceClasses): Kueue counts claims only with "
                                          "its DynamicResourceAllocation gate and deviceClassMappings, not probed")
                                   if quota else (name, "no resource with a quota above 0"))
                    continue
                spec = flavors.get(name, {})
                pod = {"restartPolicy": "Never",
                       "containers": [{"name": "probe", "image": "registry.k8s.io/pause:3.10",
                                       "resources": {"requests": {plugin[0]: "1"}, "limits": {plugin[0]: "1"}}}]}
                if spec.get("nodeLabels"):
                    pod["nodeSelector"] = dict(spec["nodeLabels"])
                if spec.get("tolerations"):
                    pod["tolerations"] = list(spec["tolerations"])
                workloads.append({
                    "apiVersion": API, "kind": "Workload",
                    "metadata": {"name": f"probe-{cq_name}-{name}"[:63].rstrip("-."), "namespace": ns,
                                 "labels": {"gpuop.dev/probe-flavor": name, "gpuop.dev/probe-resource":
                                            plugin[0].replace("/", "_")}},
                    "spec": {"queueName": queue,
                             "podSets": [{"name": "main", "count": 1, "template": {"spec": pod}}]}})
    return workloads, skipped, added


def admitted(wl: dict) -> tuple[bool, str]:
    """Whether Kueue admitted the Workload, and what it says (its admission's flavors, or its conditions)."""
    status = wl.get("status") or {}
    conds = {c.get("type"): c for c in status.get("conditions") or []}
    if (conds.get("Admitted") or {}).get("status") == "True":
        assigned = [a.get("flavors") or {} for a in (status.get("admission") or {}).get("podSetAssignments") or []]
        return True, ", ".join(f"{r} on flavor {f}" for a in assigned for r, f in sorted(a.items()))
    why = "; ".join(f"{t}: {c.get('reason', '')}: {c.get('message', '')}" for t, c in sorted(conds.items())
                    if c.get("message"))
    return False, why or "no condition yet"


def wait_admitted(read, workloads: list[dict], alive, timeout: float = ADMIT_TIMEOUT, poll: float = 0.2) -> list[dict]:
    """Each Workload as last read, once every one is admitted or the time is up; `alive` raises when Kueue's
    manager has exited (its log's tail said, rather than a wait for conditions nobody will set)."""
    got = [read(w) for w in workloads]
    deadline = time.monotonic() + timeout
    while not all(admitted(g)[0] for g in got) and time.monotonic() < deadline:
        alive()
        time.sleep(poll)
        got = [g if admitted(g)[0] else read(w) for w, g in zip(workloads, got)]
    return got
