"""Writer: operator mode's companion delivery -- gpuop's own objects, which NVIDIA's GPU Operator does not make (the
alert rules, the Grafana dashboards' ConfigMap, the Kueue queues: the components the component table marks
`companion`, kube/components.py), packaged as the cluster's own small chart `<cluster>-gpuop-addons` and delivered
beside NVIDIA's chart by the same engine.

In operator mode the whole stack gpuop would render stays under `preview/` for review (outputs/operator.py); without
this companion nothing would deliver those objects. What it writes, in operator mode only (stack mode delivers them
in the stack's own chart, so nothing here):
- `dist/<cluster>/addons/chart/`: Chart.yaml (name `<cluster>-gpuop-addons`), values.yaml, README.md and one
  template per companion component, made as the stack chart's (outputs/helm.py); its version is the cluster's chart
  version: the cluster's one lock entry versions the preview chart, whose content holds every companion object,
  so a change of a companion object always bumps it (outputs/version.py);
- `addons/manifests/` (the objects rendered, with their kustomization.yaml) and `addons/overlay/` (a Kustomize
  overlay of them), as the stack's rendered manifests and overlay (outputs/manifests.py, kustomize.py);
- Flux: a HelmRelease `gpuop-<cluster>-addons` of the chart from the GitRepository `gpuop`
  (`reconcileStrategy: ChartVersion`), `dependsOn` NVIDIA's HelmRelease `gpuop-<cluster>`: the objects live in its
  namespace and the alerts read its DCGM exporter. OLM installs have no HelmRelease to wait for: Flux retries until
  the namespace is there (as the DRA driver's release, outputs/dra.py). The namespace is never created here: it
  belongs to NVIDIA's release (or the OLM Namespace object).
- Argo CD: an Application `gpuop-<cluster>-addons` of the chart's path, sync wave 1 (NVIDIA's chart is 0), in the
  settings' project as the operator's Application, `SkipDryRunOnMissingResource` (the PrometheusRule and Kueue
  CRDs arrive with other installs); `params/addons.json` lets the fleet's `gpuop-fleet-addons` ApplicationSet
  deliver the same Application from a hub (outputs/fleet.py).
"""

from __future__ import annotations

from gpuop import __version__
from gpuop.kube.components import COMPANION, COMPANION_OBJECT
from gpuop.kube.order import by_component, file_name
from gpuop.kube.slots import slot_paths
from gpuop.kube.yamlio import dump, dump_plain
from gpuop.outputs import gitops as gitops_objects
from gpuop.outputs import helm
from gpuop.outputs import kustomize
from gpuop.outputs import manifests
from gpuop.outputs import operator
from gpuop.outputs.target import OPERATOR, Target, Written
from gpuop.outputs.version import VERSION_PLACEHOLDER
from gpuop.stack.objects import Synthesized

SUFFIX = "gpuop-addons"                 # the chart: <cluster>-gpuop-addons
# the Helm release, one per cluster in its namespace as NVIDIA's `gpu-operator` is: a constant, so no cluster name
# meets Helm's 53-character release-name limit through it
RELEASE = "gpuop-addons"
APP_SUFFIX = COMPANION_OBJECT[1]        # the Argo CD Application and Flux HelmRelease: gpuop-<cluster>-addons
WAVE = "1"                              # after NVIDIA's chart (wave 0 by default)
# Kueue's and the Prometheus operator's CRDs come with their own installs, not with this chart
SYNC_OPTIONS = ("ServerSideApply=true", "CreateNamespace=false", "SkipDryRunOnMissingResource=true")


def chart_name(cluster: str) -> str:
    return f"{cluster}-{SUFFIX}"


def object_name(cluster: str) -> str:
    """The Argo CD Application's and the Flux HelmRelease's name."""
    return f"{COMPANION_OBJECT[0]}{cluster}{COMPANION_OBJECT[1]}"


def companion(stack: Synthesized) -> Synthesized | None:
    """The synthesized objects of the companion components (registry order kept), or None when there are none."""
    objs = tuple(o for o in stack.objects if o.component in COMPANION)
    return Synthesized(stack.plan, objs) if objs else None


def values(stack: Synthesized) -> dict:
    """The chart's default values: the top-level keys of the stack's values that the companion objects' slots
    or toggles name, as the stack chart has them (so both charts render the same objects)."""
    keys = {p.split(".", 1)[0] for o in stack.objects for p in slot_paths(o.body)}
    keys |= {o.values_key for o in stack.objects if o.values_key}
    return {k: stack.plan.values[k] for k in sorted(keys) if k in stack.plan.values}


def chart_files(stack: Synthesized, version: str) -> dict[str, str]:
    """The companion chart's files (`stack`: the companion objects only; `version`: the chart version)."""
    plan = stack.plan
    name = chart_name(plan.name)
    files = {
        "Chart.yaml": dump_plain({
            "apiVersion": "v2", "name": name,
            "description": f"gpuop's own objects for cluster {plan.name} beside NVIDIA's GPU Operator "
                           f"{plan.operator_version}, compiled by gpuop {__version__}",
            "type": "application", "version": version, "appVersion": plan.operator_version,
            "kubeVersion": f">= {plan.kube_version}.0-0", "icon": helm.ICON,
            "keywords": ["gpu", "nvidia", "gpuop"],
            "annotations": {"gpuop/release": plan.release, "gpuop/platform": plan.platform,
                            "gpuop/components": ",".join(c for c, _ in by_component(stack.objects))}}),
        "values.yaml": "# Default values of gpuop's objects beside NVIDIA's GPU Operator (from the cluster's profile).\n"
                       + dump_plain(values(stack)),
        "README.md": readme(stack),
    }
    for component, objs in by_component(stack.objects):
        key = objs[0].values_key
        text = "---\n".join(helm._document(o, plan) for o in objs)
        if key:                   # the component's toggle, as in the stack chart
            text = f"{{{{- if .Values.{key}.enabled }}}}\n{text}{{{{- end }}}}\n"
        files[f"templates/{file_name(component)}"] = (
            f"{{{{- /* gpuop: the {component} component's objects, in install order. Do not edit; change the "
            "profile. */}}\n" + text)
    return files


def readme(stack: Synthesized) -> str:
    plan = stack.plan
    name = chart_name(plan.name)
    return "\n".join([
        f"# {name}",
        "",
        f"gpuop's own objects for cluster `{plan.name}`, which NVIDIA's GPU Operator does not make: "
        + ", ".join(f"`{c}`" for c, _ in by_component(stack.objects)) + ".",
        "Installed beside NVIDIA's `gpu-operator` chart, into its namespace, after it. Generated: do not edit; change",
        "the profile and run `gpuop synth`.",
        "",
        "```sh",
        f"helm install {RELEASE} . -n {plan.namespace}      # after NVIDIA's chart created the namespace",
        "```",
        "",
    ])


def argocd_application(plan, gitops, chart_path: str) -> dict:
    source = gitops_objects.git_source(gitops.repoURL, gitops.revision, chart_path,
                                       gitops_objects.helm(RELEASE, plan.kube_version, skipTests=True))
    return gitops_objects.application(
        gitops, object_name(plan.name), gitops_objects.cluster_labels(plan), plan=plan,
        project=gitops.argocd.project, namespace=plan.namespace, source=source, wave=WAVE,
        sync=gitops_objects.sync_policy(list(SYNC_OPTIONS), gitops_objects.CHART_RETRY))


def flux_release(plan, gitops, chart_path: str) -> dict:
    f = gitops.flux
    olm = plan.operator.install == "olm"
    after = {} if olm else {"dependsOn": [{"name": f"gpuop-{plan.name}", "namespace": f.namespace}]}   # NVIDIA's release
    chart = {"chart": {"spec": {"chart": f"./{chart_path}", "reconcileStrategy": "ChartVersion", "interval": f.interval,
                                "sourceRef": {"kind": "GitRepository", "name": "gpuop", "namespace": f.namespace}}}}
    return gitops_objects.helm_release(
        object_name(plan.name), f.namespace, gitops_objects.cluster_labels(plan), interval=f.interval,
        release_name=RELEASE, target_namespace=plan.namespace,
        storage_namespace=gitops_objects.storage_namespace(plan, gitops, plan.namespace), chart=chart,
        # the namespace is NVIDIA's release's (createNamespace off); the chart has no CRDs
        install={"remediation": {"retries": 3}}, upgrade={"remediation": {"retries": 3}},
        **after, **gitops_objects.flux_remote(plan), values={})


def write(t: Target) -> Written:
    """Writer (outputs/target.py): the companion chart, its rendered manifests and overlay, and its Argo CD / Flux
    delivery, in operator mode when the cluster has companion objects; nothing otherwise."""
    if t.folders.delivery != OPERATOR:
        return Written()
    stack = companion(t.stack)
    if stack is None:
        return Written()
    plan, gitops, f = t.plan, t.gitops, t.folders
    base = f.addons
    chart = chart_files(stack, VERSION_PLACEHOLDER)
    files = {f"{base}/chart/{p}": text for p, text in chart.items()}
    files.update(manifests.files(stack, f"{base}/manifests"))
    files.update(kustomize.files(f"{base}/overlay"))
    chart_path = t.repo_path(f"{base}/chart")
    app = argocd_application(plan, gitops, chart_path)
    files[f"{f.argocd}/addons-application.yaml"] = dump(app)
    files[f"{f.params}/addons.json"] = gitops_objects.hub_params(    # the fleet's `gpuop-fleet-addons`
        plan, app, releaseName=RELEASE, kubeVersion=plan.kube_version)
    files[f"{f.flux}/addons-helmrelease.yaml"] = dump(flux_release(plan, gitops, chart_path))
    if plan.operator.install == "helm":     # NVIDIA's chart comes from its HelmRepository; this one from git
        files[f"{f.flux}/gitrepository.yaml"] = dump(operator.flux_git_repository(plan, gitops))
    return Written(files, {"addons": {
        "name": chart_name(plan.name), "releaseName": RELEASE, "chart": f"{base}/chart", "manifests": f"{base}/manifests",
        "overlay": f"{base}/overlay", "components": [c for c, _ in by_component(stack.objects)],
        "objects": len(stack.objects)}})
