"""Writer: the Flux objects of a cluster: a GitRepository (`gpuop`) and a HelmRelease v2 built from the
chart path and, in `spec.nfd.mode: deploy`, a HelmRepository and HelmRelease for Node Feature
Discovery's own upstream chart (the objects' shape: outputs/gitops.py).

Signing: with `signing` in the settings the OCIRepository of the chart (`gitops.flux.source: oci`) carries
`spec.verify` (provider cosign, secretRef to the settings' publicKeySecret), so source-controller refuses a
chart version that the key did not sign. HelmRepository has no `verify` in Flux's API (its charts are verified
through a HelmChart's); the only one gpuop writes serves NFD's upstream chart, which gpuop does not sign.

Rollouts (outputs/rollout.py): the GPU HelmRelease's `timeout` is sized for a node-by-node driver
roll (the driver upgrade policy's maxParallelUpgrades, ~21 minutes per node) and an upgrade that times
out is not rolled back (that would roll every driver again); Flux's defaults (5 minutes, 3 rollbacks)
undo healthy driver upgrades.

The GPU HelmRelease uses `chart.spec` (not chartRef) with reconcileStrategy ChartVersion: gpuop bumps
the chart version exactly when content changes, so Flux upgrades exactly then. CRDs are created and
replaced on install and upgrade (Flux's upgrade default is Skip). The release is stored in Flux's
namespace, so the chart can create its own target namespace.

NFD: HelmRepository `node-feature-discovery` (the chart's HTTP repository, or `type: oci` for a registry
mirror's oci:// path) and HelmRelease
`gpuop-<cluster>-nfd` pinned to the stack release's chart version, with the settings the GPU stack
needs as `values`, into its own namespace (created on install), CRDs created and replaced. The GPU
HelmRelease `dependsOn` it, so Flux installs and upgrades NFD (and its NodeFeatureRule CRD) first and
waits for it to be ready.
"""

from __future__ import annotations

from gpuop.plan.model import StackPlan
from gpuop.kube.yamlio import dump
from gpuop.outputs import drift
from gpuop.outputs import gitops as gitops_objects
from gpuop.outputs import health
from gpuop.outputs import rollout
from gpuop.outputs.version import VERSION_PLACEHOLDER

NFD_REPO = "node-feature-discovery"


def nfd_objects(plan: StackPlan, gitops) -> list[dict]:
    n, f = plan.nfd, gitops.flux
    if n.mode != "deploy" or not n.chart:
        return []
    name = gitops_objects.flux_source_name(plan, NFD_REPO)
    repo = gitops_objects.helm_repository(name, f.namespace, n.repository, f.interval,
                                          secret=plan.delivery.secret("nfd", "flux"))
    release = gitops_objects.chart_release(plan, gitops, f"gpuop-{plan.name}-nfd", repository=name,
                                           chart=n.chart, version=n.version, release_name=n.release_name,
                                           target_namespace=n.namespace, values=n.values)
    return [repo, release]


def source(gitops) -> dict:
    return gitops_objects.git_repository(gitops)


def verify(signing) -> dict:
    """`spec.verify` of an OCIRepository of gpuop's charts: exactly when the settings configure signing
    (`gpuop publish --oci --sign-key` signs them with cosign), against the public key Secret they name."""
    if signing is None:
        return {}
    return {"verify": {"provider": signing.provider, "secretRef": {"name": signing.publicKeySecret}}}


def oci_repository(plan: StackPlan, gitops, signing=None) -> dict:
    """The chart as an OCI artifact (`gpuop publish --oci`), pinned to the chart version of this compile,
    verified by Flux when signing is configured."""
    f = gitops.flux
    return {"apiVersion": gitops_objects.SOURCE_API, "kind": "OCIRepository",
            "metadata": {"name": f"gpuop-{plan.name}", "namespace": f.namespace, "labels": gitops_objects.cluster_labels(plan)},
            "spec": {"url": f"{f.oci.rstrip('/')}/{plan.name}", "interval": f.interval,
                     "ref": {"tag": VERSION_PLACEHOLDER}, **gitops_objects.secret_ref(f.secretRef),
                     "layerSelector": {"mediaType": "application/vnd.cncf.helm.chart.content.v1.tar+gzip",
                                       "operation": "copy"}, **verify(signing)}}


def _gated(action: dict, plan: StackPlan) -> dict:
    """An install / upgrade spec whose remediation ignores the health gate's test failures."""
    return {**action, "remediation": rollout.flux_gate_remediation(action["remediation"], plan)}


def objects(plan: StackPlan, gitops, chart_path: str, kinds: frozenset = frozenset(), signing=None) -> list[dict]:
    f = gitops.flux
    if f.source == "oci":
        chart = {"chartRef": {"kind": "OCIRepository", "name": f"gpuop-{plan.name}", "namespace": f.namespace}}
        src = oci_repository(plan, gitops, signing)
    else:
        chart = {"chart": {"spec": {"chart": f"./{chart_path}", "reconcileStrategy": "ChartVersion",
                                    "interval": f.interval,
                                    "sourceRef": {"kind": "GitRepository", "name": "gpuop", "namespace": f.namespace}}}}
        src = source(gitops)
    release = gitops_objects.helm_release(
        f"gpuop-{plan.name}", f.namespace, gitops_objects.cluster_labels(plan), interval=f.interval, release_name=plan.name,
        target_namespace=plan.namespace, storage_namespace=gitops_objects.storage_namespace(plan, gitops, plan.namespace),
        chart=chart,
        timeout=rollout.flux_timeout(plan),          # sized for the driver roll (outputs/rollout.py)
        install=_gated(rollout.flux_install(), plan),
        upgrade=_gated(rollout.flux_upgrade(), plan),   # never rolls a slow driver upgrade back
        **rollout.flux_test(plan),                   # the health gate: helm test after each release
        driftDetection=drift.flux_drift_detection(),
        **rollout.move_uninstall(plan),              # a planned move: the old release's objects orphan what they own
        **gitops_objects.flux_remote(plan),          # a Flux hub: the cluster's kubeconfig Secret
        values={"createNamespace": True})            # the release owns its Namespace on this path
    exprs = health.flux_health_check_exprs({(g, k) for g, k, _ in kinds})
    if exprs:
        release["spec"]["healthCheckExprs"] = exprs
    nfd = nfd_objects(plan, gitops)
    if nfd:
        release["spec"]["dependsOn"] = [{"name": nfd[1]["metadata"]["name"], "namespace": f.namespace}]
    return [src, release] + nfd


def overlay_kustomizations(plan: StackPlan, gitops, overlay_path: str, nfd_path: str | None,
                           daemonsets: list[str], checks: tuple = ()) -> list[dict]:
    """The alternative delivery: Flux Kustomizations applying the rendered overlay (and NFD's HelmRelease
    first, in deploy mode), with health checks on every DaemonSet and on the health gate's Jobs (`checks`: a
    failed Job fails the Kustomization's health, so a Kustomization that dependsOn it waits, as a failed Helm
    test holds a HelmRelease; the Jobs carry kustomize.toolkit.fluxcd.io/force, so a changed check replaces the
    last one's immutable Job)."""
    f = gitops.flux
    ref = {"kind": "GitRepository", "name": "gpuop"}
    out = []
    if nfd_path:
        out.append({"apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
                    "metadata": {"name": f"gpuop-{plan.name}-nfd", "namespace": f.namespace, "labels": gitops_objects.cluster_labels(plan)},
                    "spec": {"interval": f.interval, "path": f"./{nfd_path}", "prune": True, "sourceRef": ref,
                             "wait": True, "timeout": "10m"}})     # applies NFD's HelmRelease on Flux's own cluster
    main = {"apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
            "metadata": {"name": f"gpuop-{plan.name}", "namespace": f.namespace, "labels": gitops_objects.cluster_labels(plan)},
            "spec": {"interval": f.interval, "path": f"./{overlay_path}", "prune": True, "sourceRef": ref,
                     "timeout": rollout.flux_timeout(plan), **gitops_objects.flux_remote(plan),
                     "healthChecks": [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": d,
                                       "namespace": plan.namespace} for d in daemonsets]
                     + [{"apiVersion": "batch/v1", "kind": "Job", "name": j, "namespace": plan.namespace}
                        for j in checks]}}
    if nfd_path:
        main["spec"]["dependsOn"] = [{"name": f"gpuop-{plan.name}-nfd"}]
    return out + [main]


def files(plan: StackPlan, gitops, base: str, chart_path: str, alt: str, overlay_path: str,
          kinds: frozenset = frozenset(), daemonsets: tuple = (), signing=None, checks: tuple = ()) -> dict[str, str]:
    """`base`: the flux/ folder (HelmRelease), `alt`: the flux-overlay/ folder (Kustomizations applying the overlay
    at `overlay_path`, its path in the repository); both as the cluster's folders say (outputs/target.py)."""
    src, release, *nfd = objects(plan, gitops, chart_path, kinds, signing)
    files = {f"{base}/{src['kind'].lower()}.yaml": dump(src), f"{base}/helmrelease.yaml": dump(release)}
    if nfd:
        files[f"{base}/nfd-helmrepository.yaml"] = dump(nfd[0])
        files[f"{base}/nfd-helmrelease.yaml"] = dump(nfd[1])
    # alternative: the overlay through Flux Kustomizations (dist/<cluster>/flux-overlay/)
    nfd_path = f"{gitops.path.rstrip('/')}/{alt}/nfd" if nfd else None
    files[f"{alt}/gitrepository.yaml"] = dump(source(gitops))
    for k in overlay_kustomizations(plan, gitops, overlay_path, nfd_path, list(daemonsets), checks):
        files[f"{alt}/{k['metadata']['name'].removeprefix('gpuop-' + plan.name).lstrip('-') or 'stack'}-kustomization.yaml"] = dump(k)
    if nfd:
        files[f"{alt}/nfd/helmrepository.yaml"] = dump(nfd[0])
        files[f"{alt}/nfd/helmrelease.yaml"] = dump(nfd[1])
    return files
