"""Writer: operator mode (`spec.delivery.mode: operator`) -- the inputs of NVIDIA's GPU Operator instead of
gpuop's own operands, from the plan's `OperatorPlan` (plan/operator.py).

What dist/<cluster>/ holds in operator mode (`write`, called by cluster.build_cluster):
- `operator/values.yaml` (install: helm): the values for NVIDIA's `gpu-operator` chart of the chosen version.
  Per-pool NVIDIADriver CRs and gpuop's per-pool label NodeFeatureRule go in through the chart's
  `extraObjects`; the device-plugin, mig-parted and DCGM metrics ConfigMaps through the chart's own
  `config.create` values, so the chart renders every object the ClusterPolicy references.
- `operator/olm/` (install: olm): Namespace, OperatorGroup, Subscription (package, channel, CSV and source
  from the operator catalog), then the ClusterPolicy `gpu-cluster-policy` (the CSV's alm-examples one, with the
  profile's settings over it; the release's own images are left to the CSV, which pins them by digest), the
  NVIDIADriver CRs, the ConfigMaps and the NodeFeatureRule, with a kustomization.yaml.
- `argocd/application.yaml` and `flux/*.yaml` deliver those, instead of the stack's GitOps objects: nothing
  deploys gpuop's own chart in operator mode (two controllers for one DaemonSet would fight). The operands
  gpuop would render are written for review only, under `preview/` (`preview/chart/`, `preview/manifests/`,
  `preview/overlay/`), which no Argo CD, Flux or Kustomize object gpuop writes points at, so `kubectl apply -k
  dist/<cluster>/overlay` or a GitOps tool pointed at the usual folders finds no second stack to run beside the
  operator's; `params/cluster.json` and `flux-overlay/` are left out so the GPU stacks' ApplicationSet skips the
  cluster, and `params/operator.json` (helm) or `params/operator-olm.json` (OLM) let the fleet's operator
  ApplicationSets deliver the operator's Application from a hub (outputs/fleet.py).
  DRA pools keep the standalone DRA driver chart's Application / HelmRelease (outputs/dra.py) beside the
  operator: NVIDIA's supported path, with the device plugin kept off DRA planes by gpuop's per-pool
  `nvidia.com/gpu.deploy.device-plugin=false` label (in the NodeFeatureRule below).

Helm delivery and CRDs: Helm never upgrades `crds/`; NVIDIA's chart upgrades them itself with its pre-upgrade
hook Job (`operator.upgradeCRD: true`, the chart default, kept). Flux also gets `crds: CreateReplace` on
install and upgrade (Flux's upgrade default is Skip); Argo CD applies `crds/` on every sync (skipCrds false) with
ServerSideApply, so the CRDs follow the chart version either way (NVIDIA/gpu-operator#431, #139).

Drift against CRD defaults (NVIDIA/gpu-operator#2795, #1986): the API server fills fields the ClusterPolicy CRD
defaults and the chart does not render; a GitOps diff then sees them as changes. Per field:

| ClusterPolicy field | CRD default | handled by |
|---|---|---|
| spec.hostPaths.kubeletRootDir | /var/lib/kubelet | written in the values (plan/chartmap.py's row; the chart passes it through) |
| spec.cdi.default | false | ignoreDifferences / driftDetection.ignore (the chart never renders it) |
| spec.cdi.nriPluginEnabled | false | ignoreDifferences / driftDetection.ignore while the profile leaves it off (the chart renders it only when true; spec.cdi.nriPluginEnabled: true is compared) |
| spec.driver.kernelModuleType | auto | NVIDIADriver CRD mode only: ignored (the chart leaves the driver fields out; the NVIDIADriver CRs carry kernelModuleType) |

With OLM gpuop writes the ClusterPolicy itself (`cluster_policy_spec`: the OperatorHub example with the profile's
settings over it); a field it leaves out and the API server defaults is no diff: Argo CD and Flux compare the fields
written, so there is nothing to ignore.
"""

from __future__ import annotations

import copy

from gpuop.catalog import operator as operator_catalog
from gpuop.kube.yamlio import dump
from gpuop.outputs import gitops as gitops_objects
from gpuop.outputs import rollout
from gpuop.outputs.target import Target, Written
from gpuop.plan import chartmap
from gpuop.plan.model import StackPlan

WAVE = gitops_objects.WAVE
SYNC_OPTIONS = "argocd.argoproj.io/sync-options"
HELM_CLUSTER_POLICY = "cluster-policy"          # NVIDIA's chart templates/clusterpolicy.yaml
OLM_CLUSTER_POLICY = "gpu-cluster-policy"       # the CSV's alm-examples
HOST_PATHS = {"rootFS": "/", "driverInstallDir": "/run/nvidia/driver", "kubeletRootDir": chartmap.KUBELET_ROOT}  # the operator's
DRIFT = (                                       # (group, kind, JSON pointers) the API server defaults
    ("nvidia.com", "ClusterPolicy", ("/spec/cdi/default", "/spec/cdi/nriPluginEnabled")),
)
CRD_MODE_DRIFT = ("/spec/driver/kernelModuleType",)   # the chart leaves it out with useNvidiaDriverCRD


def drift(values: dict) -> list[tuple[str, str, tuple[str, ...]]]:
    """The ignore rules for this cluster's values: kernelModuleType only in NVIDIADriver CRD mode (elsewhere the
    chart renders it, and ignoring it would stop Argo CD from syncing a real change); cdi.nriPluginEnabled only
    while it is off (spec.cdi.nriPluginEnabled: the chart renders it when true)."""
    out = [(g, k, tuple(p)) for g, k, p in DRIFT]
    if values.get("cdi", {}).get("nriPluginEnabled"):       # rendered, so compared: a change to it must sync
        out[0] = (out[0][0], out[0][1], tuple(p for p in out[0][2] if p != "/spec/cdi/nriPluginEnabled"))
    if values["driver"]["nvidiaDriverCRD"]["enabled"]:
        out[0] = (out[0][0], out[0][1], out[0][2] + CRD_MODE_DRIFT)
    return out


_labels = gitops_objects.cluster_labels


# ------------------------------------------------------------------------------------ objects the CRs need

def driver_fields(values: dict) -> dict:
    """The driver settings of the values an NVIDIADriver CR takes (as the chart's nvidiadriver.yaml renders them):
    env (the proxy's among them), args, the repo / cert ConfigMaps."""
    d = values["driver"]
    out = {k: copy.deepcopy(d[k]) for k in ("env", "args") if d.get(k)}
    if d.get("repoConfig"):
        out["repoConfig"] = {"name": d["repoConfig"]["configMapName"]}
    if d.get("certConfig"):
        out["certConfig"] = {"name": d["certConfig"]["name"]}
    return out


def nvidia_driver(name: str, spec: dict, values: dict | None = None) -> dict:
    spec = {**spec, **driver_fields(values)} if values else spec
    return {"apiVersion": "nvidia.com/v1alpha1", "kind": "NVIDIADriver", "metadata": {"name": name}, "spec": spec}


def node_feature_rule(plan: StackPlan) -> dict | None:
    rule = plan.operator.node_rule
    if rule is None:
        return None
    return {"apiVersion": "nfd.k8s-sigs.io/v1alpha1", "kind": "NodeFeatureRule",
            "metadata": {"name": "gpuop-pool-configs", "labels": {"app.kubernetes.io/managed-by": "gpuop"}},
            "spec": rule}


def chart_values(plan: StackPlan) -> dict:
    """NVIDIA's chart values: the plan's, plus the objects the chart only takes as extraObjects."""
    op = plan.operator
    v = copy.deepcopy(op.values)       # hostPaths.kubeletRootDir written: the CRD's default otherwise (drift)
    extra = [nvidia_driver(d["name"], d["spec"], v) for d in op.drivers if not d["spec"]["default"]]
    nfr = node_feature_rule(plan)
    if nfr is not None:
        extra.append(nfr)
    if extra:
        v["extraObjects"] = extra
    return v


IMAGE = ("repository", "image", "version")
PULL_POLICY = "IfNotPresent"                    # the operator's, for a section that names none
DEFAULT_PRIORITY_CLASS = "system-node-critical"  # every operand asset's (assets/*/..._daemonset.yaml)
SIDECARS = ("gds", "gdrcopy")                   # no fallback the CSV sets for GDS: always named when on


def release_images(plan: StackPlan) -> dict[str, dict]:
    """values key -> the release's own image of the component (repository, image, version): what a
    ClusterPolicy section that names no image runs under OLM, where the CSV's operator Deployment carries
    the release's images (pinned by digest) in its env and the operator falls back to them."""
    rel = chartmap.release_images(plan.operator_version, plan.release)
    defaults = chartmap.profile_to_values({}, rel)
    out = {k: {f: chartmap.get_path(defaults, f"{k}.{f}") for f in IMAGE} for k in chartmap.COMPONENTS}
    out["driver"]["version"] = rel.tag("driver").split("-")[0]
    return out


def _image(section: dict, default: dict | None = None, always: bool = False) -> dict:
    """A component's image fields for the OLM ClusterPolicy: repository / image / version only where they are
    not the release's own (`default`; OLM then runs the CSV's digest-pinned image of the same release), the pull
    policy where it is not the operator's IfNotPresent, pull secrets and resources where set."""
    out = {}
    img = {k: section.get(k) for k in IMAGE}
    if always or default is None or img != {k: default.get(k) for k in IMAGE}:
        out.update({k: v for k, v in img.items() if v not in (None, "")})
    if section.get("imagePullPolicy") not in (None, "", PULL_POLICY):
        out["imagePullPolicy"] = section["imagePullPolicy"]
    for k in ("imagePullSecrets", "resources", "env", "args"):
        if section.get(k):
            out[k] = copy.deepcopy(section[k])
    return out


def _over(spec: dict, key: str, fields: dict, drop: tuple[str, ...] = ()) -> dict:
    """spec[key] updated with `fields`, without the keys `drop` (the OperatorHub example's value of a field
    gpuop decides otherwise)."""
    sec = spec.setdefault(key, {})
    for k in drop:
        sec.pop(k, None)
    sec.update(fields)
    return sec


def cluster_policy_spec(values: dict, base: dict | None = None, images: dict[str, dict] | None = None) -> dict:
    """The ClusterPolicy gpuop writes itself for OLM: the one the OperatorHub form creates for the operator
    version (`base`: its CSV's alm-examples, catalog/operator.py olm_cluster_policy) with the profile's settings
    over it, each written as NVIDIA's chart renders it from the same values (templates/clusterpolicy.yaml) and
    left out where it is what the operator does without it (the release's images, `images`; the operands'
    own priority class and nvidia.com/gpu toleration; the host paths' defaults; IfNotPresent). A cluster
    installed from OperatorHub is so adopted without a change, and NVIDIA's code makes of this ClusterPolicy
    the operands it makes of the chart's."""
    spec = copy.deepcopy(base) if base else {}
    images = images or {}
    d = values["driver"]
    up = d["upgradePolicy"]
    operator = {"runtimeClass": values["operator"]["runtimeClass"]}
    if values["operator"].get("use_ocp_driver_toolkit"):
        operator["use_ocp_driver_toolkit"] = True
    _over(spec, "operator", operator)
    host = {k: v for k, v in (values.get("hostPaths") or {}).items() if v and v != HOST_PATHS.get(k)}
    if host:
        _over(spec, "hostPaths", host)
    ds = values["daemonsets"]
    daemonsets = {k: copy.deepcopy(ds[k]) for k in ("labels", "annotations") if ds.get(k)}
    if ds.get("priorityClassName") not in (None, "", DEFAULT_PRIORITY_CLASS):
        daemonsets["priorityClassName"] = ds["priorityClassName"]
    if ds.get("tolerations") and list(ds["tolerations"]) != [dict(t) for t in chartmap.UPSTREAM_TOLERATIONS]:
        daemonsets["tolerations"] = copy.deepcopy(ds["tolerations"])
    _over(spec, "daemonsets", {"updateStrategy": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "1"},
                               **daemonsets})
    mig = {k: v for k, v in values["mig"].items() if v}    # "": each pool's plugin config carries its own
    _over(spec, "mig", mig, drop=("strategy",))
    if not spec["mig"]:
        del spec["mig"]
    _over(spec, "cdi", {"enabled": values["cdi"]["enabled"]})
    crd = d["nvidiaDriverCRD"]["enabled"]
    driver = {"enabled": d["enabled"], "useNvidiaDriverCRD": crd}
    image_keys = IMAGE + ("imagePullPolicy", "imagePullSecrets", "resources", "env", "args")
    if not crd:                        # NVIDIADriver CRD mode: the CRs carry the driver (as the chart)
        driver["kernelModuleType"] = d["kernelModuleType"]
        if d["usePrecompiled"]:
            driver["usePrecompiled"] = True
        driver.update(_image(d, images.get("driver")))
        driver.update({k: copy.deepcopy(d[k]) for k in ("repoConfig", "certConfig") if d.get(k)})
        lic = {k: v for k, v in (d.get("licensingConfig") or {}).items() if v not in ("", None)}
        if lic.get("secretName") or lic.get("configMapName"):   # as the chart: only a configured reference
            driver["licensingConfig"] = lic
    # the driver manager: NVIDIADriver CRD mode takes it from the CRs (the chart leaves it out of the policy)
    manager = _image(d["manager"], images.get("driver.manager")) if not crd else {}
    drain = dict(up["drain"])
    if not drain.get("podSelector"):
        drain.pop("podSelector", None)
    driver["upgradePolicy"] = {"autoUpgrade": up["autoUpgrade"], "maxParallelUpgrades": up["maxParallelUpgrades"],
                               "maxUnavailable": "25%", "waitForCompletion": {"timeoutSeconds": 0},
                               "podDeletion": dict(up["gpuPodDeletion"]), "drain": drain}
    drv = _over(spec, "driver", driver, drop=image_keys + ("usePrecompiled", "manager"))
    if manager:
        drv["manager"] = manager
    _over(spec, "toolkit", {"enabled": values["toolkit"]["enabled"], **_image(values["toolkit"], images.get("toolkit"))})
    _over(spec, "validator", _image(values["validator"], images.get("validator")))
    for key in SIDECARS:
        side = values[key]
        _over(spec, key, {"enabled": side["enabled"], **(_image(side, always=True) if side["enabled"] else {})})
    dp = _over(spec, "devicePlugin", {"enabled": values["devicePlugin"]["enabled"],
                                      **_image(values["devicePlugin"], images.get("devicePlugin"))})
    if "config" in values["devicePlugin"]:
        dp["config"] = {"name": values["devicePlugin"]["config"]["name"],
                        "default": values["devicePlugin"]["config"]["default"]}
    for key in ("dcgm", "gfd", "nodeStatusExporter"):
        _over(spec, key, {"enabled": values[key]["enabled"], **_image(values[key], images.get(key))})
    ex = values["dcgmExporter"]
    sm = {"enabled": ex["serviceMonitor"]["enabled"]}
    if sm["enabled"]:
        sm.update({k: copy.deepcopy(v) for k, v in ex["serviceMonitor"].items()
                   if k != "enabled" and v not in (None, "", {}, [], False)})
    exp = _over(spec, "dcgmExporter", {"enabled": ex["enabled"], **_image(ex, images.get("dcgmExporter")),
                                       "serviceMonitor": sm})
    for key in ("enablePodLabels", "enablePodUID"):
        if ex.get(key):                # the chart writes them only when true
            exp[key] = True
    if "config" in ex:
        exp["config"] = {"name": ex["config"]["name"]}
    if ex.get("podLabelAllowlistRegex"):
        exp["podLabelAllowlistRegex"] = list(ex["podLabelAllowlistRegex"])
    mm = values["migManager"]
    mgr = _over(spec, "migManager", {"enabled": mm["enabled"], **_image(mm, images.get("migManager"))})
    if mm["config"].get("create"):     # a MIG layout: gpuop's mig-parted config, all-disabled for other nodes
        mgr["config"] = {k: mm["config"][k] for k in ("name", "default") if k in mm["config"]}
    return spec


def olm_cluster_policy(plan: StackPlan) -> dict:
    op = plan.operator
    return {"apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy", "metadata": {"name": OLM_CLUSTER_POLICY},
            "spec": cluster_policy_spec(op.values, operator_catalog.olm_cluster_policy(op.version),
                                        release_images(plan))}


def configmaps(plan: StackPlan) -> list[dict]:
    """OLM: the ConfigMaps the ClusterPolicy references (with Helm, NVIDIA's chart renders them)."""
    v = plan.operator.values
    out = []
    for key, data in (("devicePlugin", lambda c: c["data"]), ("migManager", lambda c: c["data"]),
                      ("dcgmExporter", lambda c: {"dcgm-metrics.csv": c["data"]})):
        c = v[key].get("config", {})
        if c.get("create"):
            out.append({"apiVersion": "v1", "kind": "ConfigMap",
                        "metadata": {"name": c["name"], "namespace": plan.namespace,
                                     "labels": {"app.kubernetes.io/managed-by": "gpuop"}}, "data": data(c)})
    return out


# ------------------------------------------------------------------------------------ helm delivery

def helm_sync(plan: StackPlan | None = None) -> dict:
    """The operator chart Application's sync policy (per cluster with its plan, and the fleet ApplicationSet's)."""
    privileged = {f"pod-security.kubernetes.io/{m}": "privileged" for m in ("enforce", "audit", "warn")}
    move = rollout.move_sync_options(plan) if plan is not None else []      # a planned move: old objects last
    return gitops_objects.sync_policy(["ServerSideApply=true", "CreateNamespace=true", "RespectIgnoreDifferences=true",
                                       "SkipDryRunOnMissingResource=true", *move], namespace_labels=privileged)


def ignore_differences(driver_crd: bool, nri: bool = False) -> list[dict]:
    """The operator Application's ignoreDifferences (with or without NVIDIADriver CRD mode's fields, and the NRI
    plugin's switch while it is off)."""
    return [{"group": g, "kind": k, "jsonPointers": list(p)}
            for g, k, p in drift({"driver": {"nvidiaDriverCRD": {"enabled": driver_crd}},
                                  "cdi": {"nriPluginEnabled": nri}})]


def helm_application(plan: StackPlan, gitops) -> dict:
    op = plan.operator
    helm = gitops_objects.helm("gpu-operator", plan.kube_version, skipCrds=False, valuesObject=chart_values(plan))
    return gitops_objects.application(
        gitops, f"gpuop-{plan.name}", _labels(plan), plan=plan, project=gitops.argocd.project, namespace=plan.namespace,
        source=gitops_objects.chart_source(op.chart_repository, op.chart, op.version, helm), sync=helm_sync(plan),
        ignore_differences=ignore_differences(op.values["driver"]["nvidiaDriverCRD"]["enabled"],
                                              bool(op.values.get("cdi", {}).get("nriPluginEnabled"))))


def flux_objects(plan: StackPlan, gitops) -> dict[str, dict]:
    op = plan.operator
    f = gitops.flux
    name = gitops_objects.flux_source_name(plan, "nvidia")
    repo = gitops_objects.helm_repository(name, f.namespace, op.chart_repository, "1h", _labels(plan),
                                          secret=plan.delivery.secret("operator", "flux"))
    release = gitops_objects.helm_release(
        f"gpuop-{plan.name}", f.namespace, _labels(plan), interval=f.interval, release_name="gpu-operator",
        target_namespace=plan.namespace, storage_namespace=plan.namespace,
        chart=gitops_objects.repository_chart(op.chart, op.version, name, f.namespace, None),
        **gitops_objects.flux_remote(plan),          # a Flux hub: the cluster's kubeconfig Secret
        driftDetection={"mode": "enabled", "ignore": [
            {"paths": list(p), "target": {"group": g, "kind": k}} for g, k, p in drift(op.values)]},
        **rollout.move_uninstall(plan),
        values=chart_values(plan))
    return {"helmrepository.yaml": repo, "helmrelease.yaml": release}


# ------------------------------------------------------------------------------------ OLM delivery

def _annotate(obj: dict, wave: str, skip_dry_run: bool = False) -> dict:
    ann = obj["metadata"].setdefault("annotations", {})
    ann[WAVE] = wave
    if skip_dry_run:                   # the CRD arrives with the CSV OLM installs from the Subscription
        ann[SYNC_OPTIONS] = "SkipDryRunOnMissingResource=true"
    return obj


def olm_operator(plan: StackPlan) -> list[dict]:
    op = plan.operator
    ns = plan.namespace
    return [
        _annotate({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns, "labels": {
            "openshift.io/cluster-monitoring": "true",
            **{f"pod-security.kubernetes.io/{m}": "privileged" for m in ("enforce", "audit", "warn")}}}}, "-3"),
        _annotate({"apiVersion": "operators.coreos.com/v1", "kind": "OperatorGroup",
                   "metadata": {"name": "nvidia-gpu-operator-group", "namespace": ns},
                   "spec": {"targetNamespaces": [ns]}}, "-2"),
        _annotate({"apiVersion": "operators.coreos.com/v1alpha1", "kind": "Subscription",
                   "metadata": {"name": op.olm_package, "namespace": ns},
                   "spec": {"channel": op.olm_channel, "installPlanApproval": op.install_plan_approval,
                            "name": op.olm_package, "source": op.olm_source,
                            "sourceNamespace": op.olm_source_namespace, "startingCSV": op.olm_csv}}, "-1"),
    ]


def olm_policy(plan: StackPlan) -> list[dict]:
    op = plan.operator
    out = [_annotate(cm, "0") for cm in configmaps(plan)]
    if op.values["clusterPolicy"]["deployCR"]:
        out.append(_annotate(olm_cluster_policy(plan), "1", True))
    for d in op.drivers:
        out.append(_annotate(nvidia_driver(d["name"], d["spec"], op.values), "1", True))
    nfr = node_feature_rule(plan)
    if nfr is not None:
        out.append(_annotate(nfr, "1", True))
    return out


def _file(obj: dict) -> str:
    return f"{obj['kind'].lower()}-{obj['metadata']['name']}.yaml"


def olm_files(plan: StackPlan, base: str) -> dict[str, str]:
    files = {}
    for part, objs in (("operator", olm_operator(plan)), ("policy", olm_policy(plan))):
        names = [_file(o) for o in objs]
        for name, obj in zip(names, objs):
            files[f"{base}/{part}/{name}"] = dump(obj)
        files[f"{base}/{part}/kustomization.yaml"] = dump({
            "apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization", "resources": names})
    files[f"{base}/kustomization.yaml"] = dump({"apiVersion": "kustomize.config.k8s.io/v1beta1",
                                                "kind": "Kustomization", "resources": ["operator", "policy"]})
    return files


def olm_application(plan: StackPlan, gitops, path: str) -> dict:
    return gitops_objects.application(
        gitops, f"gpuop-{plan.name}", _labels(plan), plan=plan, project=gitops.argocd.project, namespace=plan.namespace,
        source=gitops_objects.git_source(gitops.repoURL, gitops.revision, path), sync=olm_sync(plan))


def olm_sync(plan: StackPlan | None = None) -> dict:
    """The OLM Application's sync policy (per cluster with its plan, and the fleet ApplicationSet's): retries
    while OLM installs the CSV whose CRDs the ClusterPolicy needs."""
    move = rollout.move_sync_options(plan) if plan is not None else []      # a planned move: old objects last
    return gitops_objects.sync_policy(["ServerSideApply=true", *move], {"limit": 10, "backoff": {
        "duration": "30s", "factor": 2, "maxDuration": "5m"}})


def olm_flux(plan: StackPlan, gitops, path: str) -> dict[str, dict]:
    f = gitops.flux
    source = {"kind": "GitRepository", "name": "gpuop"}

    def ks(name: str, sub: str, depends: str | None) -> dict:
        spec = {"interval": f.interval, "path": f"./{path}/{sub}", "prune": True, "sourceRef": source,
                "wait": True, "timeout": "10m", **gitops_objects.flux_remote(plan)}
        if depends:
            spec["dependsOn"] = [{"name": depends}]
        return {"apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
                "metadata": {"name": name, "namespace": f.namespace, "labels": _labels(plan)}, "spec": spec}

    first = f"gpuop-{plan.name}-operator"
    return {"kustomization-operator.yaml": ks(first, "operator", None),
            "kustomization-policy.yaml": ks(f"gpuop-{plan.name}-policy", "policy", first)}


def flux_git_repository(plan: StackPlan, gitops) -> dict:
    # the configured ref: a tag stays a tag. On a Flux hub every cluster's folder holds this one GitRepository:
    # no cluster's labels on it there, so applying another cluster's folder does not rewrite it
    labels = None if plan.delivery.flux_kubeconfig else _labels(plan)
    return gitops_objects.git_repository(gitops, labels)


# ------------------------------------------------------------------------------------ dist/<cluster>/

def write(t: Target) -> Written:
    """Writer (outputs/target.py), operator mode: the operator's inputs and its delivery objects (see the module
    docstring); the operands gpuop would render are written by their own writers under `preview/`
    (target.Folders)."""
    plan, gitops, f = t.plan, t.gitops, t.folders
    op = plan.operator
    out = {}
    base = f.operator
    if op.install == "helm":
        out[f"{base}/values.yaml"] = dump(chart_values(plan))
        app = helm_application(plan, gitops)
        out[f"{f.argocd}/application.yaml"] = dump(app)
        # the fleet ApplicationSet `gpuop-fleet-operator` delivers the same Application from a hub
        out[f"{f.params}/operator.json"] = gitops_objects.hub_params(
            plan, app, driverCRD="true" if op.values["driver"]["nvidiaDriverCRD"]["enabled"] else "false")
        for name, obj in flux_objects(plan, gitops).items():
            out[f"{f.flux}/{name}"] = dump(obj)
    else:
        out.update(olm_files(plan, f"{base}/olm"))
        git_path = t.repo_path(f"{base}/olm")
        app = olm_application(plan, gitops, git_path)
        out[f"{f.argocd}/application.yaml"] = dump(app)
        out[f"{f.params}/operator-olm.json"] = gitops_objects.hub_params(plan, app)   # `gpuop-fleet-operator-olm`
        out[f"{f.flux}/gitrepository.yaml"] = dump(flux_git_repository(plan, gitops))
        for name, obj in olm_flux(plan, gitops, git_path).items():
            out[f"{f.flux}/{name}"] = dump(obj)
    return Written(out, {"delivery": "operator",
                         "operator": {"version": op.version, "install": op.install, "path": base}})
