"""Operator mode (spec.delivery.mode: operator, docs/operator.md): NVIDIA's own chart rendered with gpuop's
values through Helm 4's engine yields a ClusterPolicy and NVIDIADriver CRs that pass the upstream CRDs and
carry the profile's settings; the OLM objects pass the OLM CRDs; the operator's run-time rules refuse
mistakes at compile time with exact, located messages."""

from __future__ import annotations

import copy
import json
import shutil
import textwrap
from pathlib import Path

import helm_python as helm
import pytest
import yaml

from gpuop.errors import UserError
from gpuop.kube.yamlio import load, load_all
from gpuop.outputs import operator as operator_out
from gpuop.profile.load import load_profile
from gpuop.validate.runner import validate
from gpuop.verify.crdschema import CrdValidator

from conftest import REFS, REPO, run_gpuop, run_main

CHART = REFS / "gpu-operator" / "chart"
GPU_CRDS = [REFS / "gpu-operator" / f for f in ("nvidia.com_clusterpolicies.yaml", "nvidia.com_nvidiadrivers.yaml",
                                                  "nvidia.com_gpuclusters.yaml")]
OLM = REFS / "olm"

OCP = """
metadata: {name: ocp-operator}
spec:
  platform: {type: openshift, version: "4.19"}
  os: rhcos4.19
  driver: {version: "580"}            # no rhcosVersions: the operator finds each node's Driver Toolkit itself
  delivery: {mode: operator, operator: {installPlanApproval: Automatic}}
  nodePools:
    - name: train
      gpu: H100-SXM5-80GB
      mig: {strategy: single, layout: {"1g.10gb": 7}}
"""
MIRROR = """
metadata: {name: mirror-operator}
spec:
  platform: {type: kubernetes, version: "1.33"}
  os: ubuntu22.04
  delivery: {mode: operator}
  images: {registry: registry.example.com/nvidia, pullSecrets: [regcred]}
  toolkit: {version: v1.19.0}
  dcgmExporter:
    metrics:
      - {field: DCGM_FI_DEV_GPU_UTIL, type: gauge, help: GPU utilization}
  nodePools:
    - name: infer
      gpu: L40S
"""


def write_profile(folder: Path, name: str, body: str) -> Path:
    text = "apiVersion: gpuop/v1alpha1\nkind: ClusterProfile\n" + textwrap.dedent(body)
    path = folder / f"{name}.yaml"
    path.write_text(text)
    return path


@pytest.fixture(scope="module")
def odist(tmp_path_factory) -> Path:
    w = tmp_path_factory.mktemp("operator")
    (w / "profiles").mkdir()
    for f in ("_base.yaml", "keep-operator.yaml"):
        shutil.copy(REPO / "profiles" / f, w / "profiles" / f)
    write_profile(w / "profiles", "ocp-operator", OCP)
    write_profile(w / "profiles", "mirror-operator", MIRROR)
    shutil.copy(REPO / "gpuop.yaml", w / "gpuop.yaml")
    run_gpuop("synth", "profiles", "-o", "dist", cwd=w, check=True)
    return w / "dist"


def render_nvidia(values: dict, namespace: str = "gpu-operator") -> list[dict]:
    chart = helm.Chart.load(str(CHART))
    try:
        out = chart.render(values, name="gpu-operator", namespace=namespace)
    finally:
        chart.close()
    objs = []
    for path in sorted(out):
        objs += [o for o in load_all(out[path]) if isinstance(o, dict)]
    return objs


def one(objs, kind, name=None) -> dict:
    found = [o for o in objs if o["kind"] == kind and (name is None or o["metadata"]["name"] == name)]
    assert len(found) == 1, (kind, name, [o["metadata"]["name"] for o in found])
    return found[0]


@pytest.fixture(scope="module")
def gpu_crds() -> CrdValidator:
    return CrdValidator.from_files(GPU_CRDS)


@pytest.fixture(scope="module")
def keep(odist) -> tuple[dict, list[dict]]:
    values = load((odist / "keep-operator" / "operator" / "values.yaml").read_text())
    return values, render_nvidia(values)


def leaves(node, path=""):
    if isinstance(node, dict) and node:
        for k, v in node.items():
            yield from leaves(v, f"{path}/{k}")
    else:
        yield path, node


def at(node, pointer):
    for part in pointer.strip("/").split("/"):
        if not isinstance(node, dict) or part not in node:
            return KeyError
        node = node[part]
    return node


# ---------------------------------------------------------------------------------------- helm install

def test_nvidias_chart_renders_a_cluster_policy_that_passes_the_upstream_crd(odist, gpu_crds):
    for name in ("keep-operator", "mirror-operator"):
        values = load((odist / name / "operator" / "values.yaml").read_text())
        objs = render_nvidia(values)
        cp = one(objs, "ClusterPolicy", "cluster-policy")
        assert gpu_crds.errors(cp) == [], name
        for d in [o for o in objs if o["kind"] == "NVIDIADriver"]:
            assert gpu_crds.errors(d) == [], (name, d["metadata"]["name"])
        assert not [o for o in objs if o["kind"] == "GPUCluster"]


def test_cluster_policy_carries_the_profiles_driver_mig_plugin_config_and_toolkit(keep):
    _, objs = keep
    spec = one(objs, "ClusterPolicy")["spec"]
    assert spec["driver"]["useNvidiaDriverCRD"] is True
    assert "version" not in spec["driver"]                 # NVIDIADriver CRD mode: the CRs carry the driver
    assert spec["driver"]["upgradePolicy"]["maxParallelUpgrades"] == 2
    assert spec["driver"]["upgradePolicy"]["drain"]["enable"] is True
    assert spec["driver"]["upgradePolicy"]["drain"]["timeoutSeconds"] == 600
    default = one(objs, "NVIDIADriver", "default")["spec"]
    assert default["version"] == "580.173.02"
    assert default["kernelModuleType"] == "auto"
    assert default["upgradePolicy"]["maxParallelUpgrades"] == 2
    assert spec["mig"]["strategy"] == "mixed"
    assert spec["devicePlugin"]["config"] == {"name": "device-plugin-config", "default": "default"}
    assert spec["migManager"]["config"] == {"name": "custom-mig-parted-config", "default": "all-disabled"}
    assert spec["toolkit"]["enabled"] is True
    assert spec["toolkit"]["repository"] == "nvcr.io/nvidia/k8s"
    assert spec["toolkit"]["image"] == "container-toolkit"
    assert spec["toolkit"]["version"] == "v1.20.0"
    assert spec["dcgmExporter"]["serviceMonitor"]["interval"] == "30s"
    assert spec["hostPaths"]["kubeletRootDir"] == "/var/lib/kubelet"


def test_registry_mirror_pull_secrets_and_version_override_reach_every_operand(odist):
    values = load((odist / "mirror-operator" / "operator" / "values.yaml").read_text())
    spec = one(render_nvidia(values), "ClusterPolicy")["spec"]
    assert spec["toolkit"]["repository"] == "registry.example.com/nvidia/k8s"
    assert spec["toolkit"]["version"] == "v1.19.0"
    assert spec["toolkit"]["imagePullSecrets"] == ["regcred"]
    assert spec["driver"]["repository"] == "registry.example.com/nvidia"
    assert spec["driver"]["useNvidiaDriverCRD"] is False
    assert spec["dcgmExporter"]["config"] == {"name": "nvidia-dcgm-exporter-metrics"}
    images = {k: spec[k]["repository"] for k in ("validator", "devicePlugin", "dcgm", "dcgmExporter", "gfd",
                                                  "migManager", "nodeStatusExporter", "gds", "gdrcopy")}
    images["driver.manager"] = spec["driver"]["manager"]["repository"]
    assert all(r.startswith("registry.example.com/nvidia") for r in images.values()), images
    assert values["operator"]["repository"] == "registry.example.com/nvidia"


def test_one_nvidiadriver_per_driver_default_without_selector(keep):
    _, objs = keep
    drivers = {o["metadata"]["name"]: o["spec"] for o in objs if o["kind"] == "NVIDIADriver"}
    assert set(drivers) == {"default", "driver-595.91.07"}
    assert drivers["default"]["default"] is True and "nodeSelector" not in drivers["default"]
    assert drivers["default"]["version"] == "580.173.02"
    other = drivers["driver-595.91.07"]
    assert other["default"] is False and other["version"] == "595.91.07"
    assert other["nodeSelector"] == {"node.kubernetes.io/instance-type": "g6e.12xlarge"}


def test_chart_renders_the_configmaps_the_cluster_policy_references(keep):
    _, objs = keep
    spec = one(objs, "ClusterPolicy")["spec"]
    plugin = one(objs, "ConfigMap", spec["devicePlugin"]["config"]["name"])
    mig = one(objs, "ConfigMap", spec["migManager"]["config"]["name"])
    nfr = one(objs, "NodeFeatureRule", "gpuop-pool-configs")
    labels = {k: v for r in nfr["spec"]["rules"] for k, v in r["labels"].items()}
    assert labels["nvidia.com/device-plugin.config"] in plugin["data"]
    assert labels["nvidia.com/mig.config"] in load(mig["data"]["config.yaml"])["mig-configs"]
    assert spec["devicePlugin"]["config"]["default"] in plugin["data"]


def test_crd_defaulted_fields_are_written_out_or_ignored(keep):
    """Every field the API server would default into the chart's ClusterPolicy is either in the values
    (normalized) or in the ignoreDifferences gpuop writes: no permanent diff in Argo CD."""
    values, objs = keep
    cp = copy.deepcopy(one(objs, "ClusterPolicy"))
    crd = load((GPU_CRDS[0]).read_text())
    schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]

    def fill(sch, obj, path):
        added = []
        for k, sub in (sch.get("properties") or {}).items():
            if isinstance(obj, dict) and k not in obj and "default" in sub:
                obj[k] = sub["default"]
                added.append(f"{path}/{k}")
            if isinstance(obj, dict) and isinstance(obj.get(k), dict):
                added += fill(sub, obj[k], f"{path}/{k}")
        return added

    added = fill(schema, cp, "")
    ignored = {p for _, kind, ptrs in operator_out.drift(values) if kind == "ClusterPolicy" for p in ptrs}
    assert added and set(added) <= ignored, added


def test_argocd_and_flux_install_nvidias_chart_with_crds_upgraded(odist):
    crds = CrdValidator.from_files([REFS / "crds"])
    values = load((odist / "keep-operator" / "operator" / "values.yaml").read_text())
    app = load((odist / "keep-operator" / "argocd" / "application.yaml").read_text())
    assert crds.errors(app) == []
    src = app["spec"]["source"]
    assert (src["repoURL"], src["chart"], src["targetRevision"]) == (
        "https://helm.ngc.nvidia.com/nvidia", "gpu-operator", "v26.7.0")
    assert src["helm"]["skipCrds"] is False and src["helm"]["valuesObject"] == values
    assert {"group": "nvidia.com", "kind": "ClusterPolicy",
            "jsonPointers": ["/spec/cdi/default", "/spec/cdi/nriPluginEnabled", "/spec/driver/kernelModuleType"]} \
        in app["spec"]["ignoreDifferences"]
    hr = load((odist / "keep-operator" / "flux" / "helmrelease.yaml").read_text())
    repo = load((odist / "keep-operator" / "flux" / "helmrepository.yaml").read_text())
    assert crds.errors(hr) == [] and crds.errors(repo) == []
    assert hr["spec"]["install"]["crds"] == "CreateReplace" and hr["spec"]["upgrade"]["crds"] == "CreateReplace"
    assert hr["spec"]["chart"]["spec"]["version"] == "v26.7.0" and hr["spec"]["values"] == values


def test_operator_mode_deploys_no_stack_objects(odist):
    index = {c["name"]: c for c in json.loads((odist / "index.json").read_text())["clusters"]}
    for name in ("keep-operator", "ocp-operator", "mirror-operator"):
        assert index[name]["delivery"] == "operator"
        # no GPU stack parameters (the stacks' ApplicationSet skips it); the operator's own for the hub
        assert not (odist / name / "params" / "cluster.json").exists() and not (odist / name / "flux-overlay").exists()
        # and the companion's (gpuop's own objects beside the operator: alerts, dashboards, queues)
        assert sorted(p.name for p in (odist / name / "params").iterdir()) in (
            ["addons.json", "operator.json"], ["addons.json", "operator-olm.json"])
        for f in (odist / name / "argocd").glob("*.yaml"):
            assert f"{name}/chart" not in f.read_text()
    appset = (odist / "fleet" / "argocd" / "applicationset.yaml")
    assert appset.is_file()


def test_the_operand_preview_is_outside_every_folder_gitops_or_kustomize_applies(odist):
    index = {c["name"]: c for c in json.loads((odist / "index.json").read_text())["clusters"]}
    for name in ("keep-operator", "ocp-operator", "mirror-operator"):
        c = odist / name
        assert not any((c / f).exists() for f in ("chart", "manifests", "overlay")), name
        assert (c / "preview" / "manifests").is_dir() and (c / "preview" / "chart" / "Chart.yaml").is_file()
        assert index[name]["manifests"] == f"{name}/preview/manifests"
        applied = [f for d in ("argocd", "flux", "operator") for f in (c / d).rglob("*.yaml")]
        assert applied and not [f for f in applied if "preview" in f.read_text()], name
        assert "preview" not in (odist / "fleet" / "argocd" / "applicationset.yaml").read_text()


def test_gpuop_validate_accepts_the_operator_output(odist):
    proc = run_main("validate", "dist", cwd=odist.parent)
    assert proc.returncode == 0, proc.stderr


# ---------------------------------------------------------------------------------------- OLM install

def test_olm_objects_pass_the_olm_crds_and_the_channel_matches_the_operator_version(odist):
    olm = CrdValidator.from_files(sorted(OLM.glob("operators.coreos.com_*.yaml")))
    base = odist / "ocp-operator" / "operator" / "olm"
    objs = {(o["kind"]): o for f in sorted((base / "operator").glob("*.yaml")) if f.name != "kustomization.yaml"
            for o in load_all(f.read_text())}
    assert set(objs) == {"Namespace", "OperatorGroup", "Subscription"}
    for kind in ("OperatorGroup", "Subscription"):
        assert olm.errors(objs[kind]) == [], kind
    sub = objs["Subscription"]["spec"]
    bundle = load((OLM / "gpu-operator-bundle" / "metadata" / "annotations.yaml").read_text())["annotations"]
    assert sub["channel"] == "v26.7" == bundle["operators.operatorframework.io.bundle.channel.default.v1"]
    assert sub["channel"] in bundle["operators.operatorframework.io.bundle.channels.v1"].split(",")
    assert sub["name"] == bundle["operators.operatorframework.io.bundle.package.v1"]
    csv = load((OLM / "gpu-operator-bundle" / "manifests" /
                "gpu-operator-certified.clusterserviceversion.yaml").read_text())
    assert sub["startingCSV"] == csv["metadata"]["name"]
    assert (sub["source"], sub["sourceNamespace"], sub["installPlanApproval"]) == (
        "certified-operators", "openshift-marketplace", "Automatic")
    assert objs["OperatorGroup"]["spec"]["targetNamespaces"] == ["nvidia-gpu-operator"]
    waves = [int(objs[k]["metadata"]["annotations"]["argocd.argoproj.io/sync-wave"])
             for k in ("Namespace", "OperatorGroup", "Subscription")]
    assert waves == sorted(waves)


def test_olm_cluster_policy_passes_the_crd_and_comes_after_the_operator(odist, gpu_crds):
    base = odist / "ocp-operator" / "operator" / "olm"
    cp = load((base / "policy" / "clusterpolicy-gpu-cluster-policy.yaml").read_text())
    assert gpu_crds.errors(cp) == []
    ann = cp["metadata"]["annotations"]
    assert int(ann["argocd.argoproj.io/sync-wave"]) > -1
    assert ann["argocd.argoproj.io/sync-options"] == "SkipDryRunOnMissingResource=true"
    assert cp["spec"]["mig"]["strategy"] == "single"
    assert cp["spec"]["operator"]["use_ocp_driver_toolkit"] is True
    assert cp["spec"]["driver"]["version"] == "580.173.02"
    flux = {f.name: load(f.read_text()) for f in (odist / "ocp-operator" / "flux").glob("*.yaml")}
    crds = CrdValidator.from_files([REFS / "crds"])
    for obj in flux.values():
        assert crds.errors(obj) == []
    policy = flux["kustomization-policy.yaml"]["spec"]
    assert policy["dependsOn"] == [{"name": "gpuop-ocp-operator-operator"}]


def test_olm_cluster_policy_equals_what_nvidias_chart_renders_from_the_same_values(odist):
    """gpuop writes the OLM ClusterPolicy itself: each field it sets is what NVIDIA's chart renders."""
    base = odist / "ocp-operator" / "operator" / "olm"
    ours = load((base / "policy" / "clusterpolicy-gpu-cluster-policy.yaml").read_text())["spec"]
    from gpuop.pipeline.run import plan_all
    plans, _ = plan_all([odist.parent / "profiles" / "ocp-operator.yaml"])
    values = operator_out.chart_values(plans[0])
    theirs = one(render_nvidia(values, "nvidia-gpu-operator"), "ClusterPolicy")["spec"]
    ignored = {p.removeprefix("/spec") for _, _, ptrs in operator_out.drift(values) for p in ptrs}
    diffs = [(p, v, at(theirs, p)) for p, v in leaves(ours) if p not in ignored and at(theirs, p) != v
             # the OperatorHub example's empty names and lists, which the operator reads as none, as the chart's
             # absent ones, and its MPS root, the operator's DefaultMPSRoot (controllers/object_controls.go)
             and not (v in ("", []) and at(theirs, p) in (KeyError, "", []))
             and not (p == "/devicePlugin/mps/root" and v == "/run/nvidia/mps" and at(theirs, p) is KeyError)]
    assert diffs == [], diffs


def test_olm_kustomization_builds(odist):
    import subprocess
    out = subprocess.run(["kubectl", "kustomize", str(odist / "ocp-operator" / "operator" / "olm")],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    kinds = [o["kind"] for o in load_all(out.stdout)]
    assert {"Namespace", "OperatorGroup", "Subscription", "ClusterPolicy", "ConfigMap"} <= set(kinds)


# ---------------------------------------------------------------------------------------- rules

BASE = """
metadata: {name: rules}
spec:
  platform: {type: kubernetes, version: "1.33"}
  os: ubuntu24.04
"""


def issues_of(tmp_path, body: str, base: str = BASE) -> list:
    path = write_profile(tmp_path, "rules", base + textwrap.indent(textwrap.dedent(body), "  "))
    with pytest.raises(UserError) as err:
        validate(load_profile(path))
    return [(i.path, i.message) for i in err.value.issues]


def test_refuses_overlapping_nvidiadriver_selectors(tmp_path):
    got = issues_of(tmp_path, """\
      delivery: {mode: operator}
      driver: {version: "580.173.02"}
      nodePools:
        - {name: a, gpu: L40S, nodeSelector: {tier: big}, driver: {version: "595.91.07"}}
        - {name: c, gpu: L40S, nodeSelector: {tier: small}, driver: {version: "595.91.07"}}
        - {name: b, gpu: L40S, nodeSelector: {tier: other}}
    """)
    # each pair of pools is disjoint (the stack's rule is satisfied), but one NVIDIADriver for a and c can
    # only select what both share: nothing, so it would also take b's nodes
    assert got == [("spec.nodePools[0].nodeSelector",
                    "NVIDIADriver 'driver-595.91.07' (driver 595.91.07, pools a, c) selects {} (every GPU node), "
                    "which can match the nodes of pool 'b' (driver 580.173.02); the operator refuses NVIDIADriver CRs whose "
                    "nodeSelectors overlap (NVIDIA/gpu-operator controllers/nvidiadriver_controller.go); give the "
                    "pools of each driver a label the others do not have")]


def test_refuses_operand_placement_the_cluster_policy_cannot_carry(tmp_path):
    got = issues_of(tmp_path, """\
      delivery: {mode: operator, operator: {nvidiaDriverCRD: true}}
      daemonsets:
        nodeSelector: {gpu: "yes"}
        nodeAffinity: [{key: tier, operator: In, values: [gpu]}]
      nodePools:
        - {name: a, gpu: L40S}
    """)
    assert [p for p, _ in got] == ["spec.daemonsets.nodeSelector", "spec.daemonsets.nodeAffinity"]
    assert got[0][1] == ("spec.daemonsets.nodeSelector cannot be passed to NVIDIA's operator: the ClusterPolicy has "
                         "no nodeSelector or affinity for its operands (nvidia.com_clusterpolicies.yaml "
                         "spec.daemonsets), it runs them on every GPU node; keep the operands off nodes with the "
                         "label nvidia.com/gpu.deploy.operands=false on them, then remove "
                         "spec.daemonsets.nodeSelector, or use spec.delivery.mode: stack")


def test_refuses_what_it_cannot_pass_each_with_its_reason(tmp_path):
    got = issues_of(tmp_path, """\
      delivery: {mode: operator}
      hostPaths: {kubeletRootDir: /var/lib/k0s/kubelet}
      toolkit: {args: [--verbose]}
      nodePools:
        - {name: a, gpu: L40S}
    """)
    assert sorted(p for p, _ in got) == ["spec.hostPaths.kubeletRootDir", "spec.toolkit.args"]
    why = dict(got)
    assert "cannot be honoured by NVIDIA's operator: v26.7 moves only the DCGM exporter's pod-resources" in \
        why["spec.hostPaths.kubeletRootDir"]
    assert "TransformToolkit never applies them" in why["spec.toolkit.args"]


def test_the_cluster_policy_and_driver_crs_carry_host_paths_labels_env_and_driver_config_maps(tmp_path):
    """What the ClusterPolicy and the NVIDIADriver CRD have fields for reaches NVIDIA's chart's objects (and the
    OLM ClusterPolicy gpuop writes), as gpuop's stack renders it."""
    from gpuop.pipeline.run import plan_all
    path = write_profile(tmp_path, "carried", BASE + textwrap.indent(textwrap.dedent("""\
      delivery: {mode: operator, operator: {nvidiaDriverCRD: true}}
      hostPaths: {driverInstallDir: /run/nvidia/driver}
      daemonsets: {labels: {team: gpu}, annotations: {example.com/owner: gpu}}
      proxy: {httpsProxy: "http://proxy.example.com:3128"}
      driver:
        env: [{name: A, value: "1"}]
        repoConfig: {configMapName: repos, files: [local.list]}
        certConfig: {configMapName: certs, files: [ca.crt]}
      devicePlugin: {env: [{name: B, value: "2"}], args: [--x]}
      nodePools:
        - {name: a, gpu: L40S}
    """), "  "))
    (plan,), _ = plan_all([path])
    values = operator_out.chart_values(plan)
    objs = render_nvidia(values)
    spec = one(objs, "ClusterPolicy")["spec"]
    assert spec["daemonsets"]["labels"]["team"] == "gpu"
    assert spec["daemonsets"]["annotations"] == {"example.com/owner": "gpu"}
    assert spec["devicePlugin"]["env"] == [{"name": "B", "value": "2"}] and spec["devicePlugin"]["args"] == ["--x"]
    driver = one(objs, "NVIDIADriver")["spec"]
    assert driver["repoConfig"] == {"name": "repos"} and driver["certConfig"] == {"name": "certs"}
    assert {e["name"] for e in driver["env"]} >= {"A", "HTTPS_PROXY", "https_proxy"}
    olm = operator_out.cluster_policy_spec(plan.operator.values)
    assert olm["daemonsets"]["labels"] == {"team": "gpu"} and olm["devicePlugin"]["args"] == ["--x"]


def test_the_cluster_policy_crd_has_no_operand_placement():
    crd = load(GPU_CRDS[0].read_text())
    ds = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["daemonsets"]
    assert not {"nodeSelector", "affinity", "nodeAffinity"} & set(ds["properties"])


def test_refuses_settings_the_operator_has_no_field_for(tmp_path):
    got = issues_of(tmp_path, """\
      delivery: {mode: operator}
      driver: {upgradePolicy: {gpuPodDeletion: false}}
      nodeStatusExporter: {enabled: true, serviceMonitor: {enabled: false}}
      nodePools:
        - {name: a, gpu: L40S}
    """)
    assert [p for p, _ in got] == ["spec.driver.upgradePolicy.gpuPodDeletion", "spec.nodeStatusExporter.serviceMonitor"]
    assert "ENABLE_GPU_POD_EVICTION=true" in got[0][1] and "0600_service_monitor.yaml" in got[1][1]


@pytest.mark.parametrize("distribution, ok", [("eks", True), ("aks", True), ("generic", True), ("k3s", True),
                                              ("rke2", True), ("microk8s", True), ("k0s", False), ("gke", False)])
def test_operator_mode_on_managed_images_nvidias_chart_serves(tmp_path, distribution, ok):
    body = f"""\
      delivery: {{mode: operator}}
      driver: {{enabled: {str(distribution in ("k3s", "rke2", "microk8s")).lower()}}}
      toolkit: {{enabled: {str(distribution not in ("eks", "aks")).lower()}}}
      nodePools:
        - {{name: a, gpu: L40S}}
    """
    own_driver = distribution in ("k3s", "rke2", "microk8s")
    base = BASE if own_driver else BASE.replace("  os: ubuntu24.04\n", "")      # managed images: no OS needed
    base = base.replace('  platform: {type: kubernetes, version: "1.33"}\n',
                        f'  platform: {{type: kubernetes, version: "1.33", distribution: {distribution}}}\n')
    path = write_profile(tmp_path, "rules", base + textwrap.indent(textwrap.dedent(body), "  "))
    if ok:
        validate(load_profile(path))
        return
    with pytest.raises(UserError) as err:
        validate(load_profile(path))
    assert [i.path for i in err.value.issues] == ["spec.platform.distribution"]


def test_refuses_gds_and_gdrcopy_with_precompiled_drivers(tmp_path):
    got = issues_of(tmp_path, """\
      delivery: {mode: operator, operator: {gds: true, gdrcopy: true}}
      driver: {version: "580", precompiled: true, kernels: ["6.8.0-60-generic"]}
      nodePools:
        - {name: a, gpu: L40S}
    """)
    assert got == [
        ("spec.delivery.operator.gds", "GPUDirect Storage cannot run with precompiled drivers: the operator has no "
         "precompiled gds sidecar (NOTES.md §1 'Precompiled ... Not with GDS, GDRCopy or DTK'); turn off "
         "spec.driver.precompiled or gds"),
        ("spec.delivery.operator.gdrcopy", "GDRCopy cannot run with precompiled drivers: the operator has no "
         "precompiled gdrcopy sidecar (NOTES.md §1 'Precompiled ... Not with GDS, GDRCopy or DTK'); turn off "
         "spec.driver.precompiled or gdrcopy")]


def test_refuses_an_image_digest_with_precompiled_drivers(tmp_path):
    got = issues_of(tmp_path, f"""\
      delivery: {{mode: operator, operator: {{driverDigest: "sha256:{'a' * 64}"}}}}
      driver: {{version: "580", precompiled: true, kernels: ["6.8.0-60-generic"]}}
      nodePools:
        - {{name: a, gpu: L40S}}
    """)
    assert got == [("spec.delivery.operator.driverDigest",
                    "a driver image digest cannot be used with precompiled drivers: the operator computes one tag "
                    "per kernel (<branch>-<kernel>-<os>, object_controls.go resolveDriverTag), which one digest "
                    "cannot name; remove driverDigest or spec.driver.precompiled")]


def test_refuses_cluster_policy_together_with_gpu_cluster(tmp_path):
    got = issues_of(tmp_path, """\
      delivery: {mode: operator, operator: {gpuCluster: true}}
      nodePools:
        - {name: a, gpu: L40S}
    """, base=BASE.replace('"1.33"', '"1.34"'))           # the GPUCluster's Kubernetes floor
    assert got == [("spec.delivery.operator.gpuCluster",
                    "clusterPolicy.deployCR and gpuCluster.deployCR cannot both be true; only one CR can exist "
                    "(NVIDIA's chart templates/validations.yaml); set spec.delivery.operator.clusterPolicy: false "
                    "to deploy the GPUCluster alone")]


def test_refuses_device_plugin_and_dra_on_one_plane(tmp_path):
    got = issues_of(tmp_path, """\
      delivery: {mode: operator}
      dra: {version: "0.5.0"}
      nodePools:
        - {name: a, gpu: L40S, allocation: dra}
        - {name: b, gpu: L40S}
    """, BASE.replace('"1.33"', '"1.34"'))
    assert ("spec.nodePools[0].allocation",
            "pool 'a' uses DRA, but gpuop cannot label its nodes nvidia.com/gpu.deploy.device-plugin=false (pool(s) b "
            "have the same GPU model (L40S) with other labels, and NFD tells nodes apart by hardware (PCI device ids), "
            "not by node labels, so no NodeFeatureRule can set them); the operator labels every GPU node without it "
            "device-plugin=true, so the device plugin and the DRA kubelet plugin would advertise the same GPUs "
            "(NVIDIA's DRA driver for GPUs: never both on one node); give the DRA pool its own GPU model, or set "
            "spec.devicePlugin.enabled: false") in got


def test_dra_pool_beside_the_operator_keeps_the_device_plugin_off_its_plane(tmp_path):
    w = tmp_path / "w"
    (w / "profiles").mkdir(parents=True)
    shutil.copy(REPO / "gpuop.yaml", w / "gpuop.yaml")
    write_profile(w / "profiles", "dra-op", BASE.replace('"1.33"', '"1.34"').replace("rules", "dra-op") + textwrap.indent(
        textwrap.dedent("""\
        delivery: {mode: operator}
        dra: {version: "0.5.0"}
        nodePools:
          - {name: a, gpu: H100-SXM5-80GB, allocation: dra}
          - {name: b, gpu: L40S}
        """), "  "))
    run_gpuop("synth", "profiles", "-o", "dist", cwd=w, check=True)
    values = load((w / "dist" / "dra-op" / "operator" / "values.yaml").read_text())
    nfr = next(o for o in values["extraObjects"] if o["kind"] == "NodeFeatureRule")
    labels = {r["name"]: r["labels"] for r in nfr["spec"]["rules"]}
    assert labels["gpuop.pool.H100-SXM5-80GB"]["nvidia.com/gpu.deploy.device-plugin"] == "false"
    assert labels["gpuop.pool.H100-SXM5-80GB"]["nvidia.com/gpu.deploy.dra-driver"] == "true"
    assert labels["gpuop.pool.L40S"]["nvidia.com/gpu.deploy.device-plugin"] == "true"
    assert (w / "dist" / "dra-op" / "argocd" / "dra-application.yaml").is_file()
    assert (w / "dist" / "dra-op" / "flux" / "dra-helmrelease.yaml").is_file()
    assert values["clusterPolicy"]["deployCR"] is True and values["gpuCluster"]["deployCR"] is False


def not_the_release(version: str) -> str:
    return (f'Unsupported value: "{version}": stack release 26.7 (spec.release) ships the operands of GPU Operator '
            f"v26.7.0, not {version}; pin the release that ships {version} or drop spec.delivery.operator.version")


def test_refuses_settings_the_chosen_operator_version_does_not_have(tmp_path):
    got = issues_of(tmp_path, """\
      delivery: {mode: operator, operator: {version: v26.3.3, nvidiaDriverCRD: true}}
      nodePools:
        - {name: a, gpu: L40S}
    """)
    assert sorted(got) == [("spec.delivery.operator.version", not_the_release("v26.3.3")),
                           ("spec.driver.upgradePolicy",
                            "GPU Operator v26.3.3 does not have the setting nvidiaDriverUpgradePolicy "
                            "(catalog/data/operator.yaml); use a newer spec.delivery.operator.version or drop it")]


def test_refuses_an_unknown_operator_version(tmp_path):
    got = issues_of(tmp_path, """\
      delivery: {mode: operator, operator: {version: v1.0.0}}
      nodePools:
        - {name: a, gpu: L40S}
    """)
    assert got == [("spec.delivery.operator.version",
                    "'v1.0.0' is not a known GPU Operator version; allowed: v26.7.0, v26.3.3, v25.10.1")]


def test_refuses_olm_on_kubernetes(tmp_path):
    got = issues_of(tmp_path, """\
      delivery: {mode: operator, operator: {install: olm}}
      nodePools:
        - {name: a, gpu: L40S}
    """)
    assert got == [("spec.delivery.operator.install",
                    "install: olm subscribes to Red Hat's certified-operators catalog, which only OpenShift "
                    "serves; use install: helm on Kubernetes")]


def test_refuses_olm_for_an_openshift_version_the_bundle_does_not_declare(tmp_path):
    path = write_profile(tmp_path, "rules", """
metadata: {name: rules}
spec:
  platform: {type: openshift, version: "4.21"}
  os: rhcos4.21
  driver: {rhcosVersions: ["421.96.202507091512-0"]}
  delivery: {mode: operator, operator: {version: v25.10.1}}
  nodePools:
    - {name: a, gpu: L40S}
""")
    with pytest.raises(UserError) as err:
        validate(load_profile(path))
    assert sorted((i.path, i.message) for i in err.value.issues) == [
        ("spec.delivery.operator.version", not_the_release("v25.10.1")),
        ("spec.platform.version", "GPU Operator v25.10.1 (OLM channel v25.10) is not published for OpenShift 4.21 "
         "(bundle com.redhat.openshift.versions); allowed: 4.14, 4.15, 4.16, 4.17, 4.18, 4.19, 4.20")]


def test_mig_layout_rules_apply_in_operator_mode(tmp_path):
    got = issues_of(tmp_path, """\
      delivery: {mode: operator}
      nodePools:
        - {name: a, gpu: H100-SXM5-80GB, mig: {strategy: mixed, layout: {"7g.80gb": 2}}}
    """)
    assert [p for p, _ in got] == ["spec.nodePools[0].mig.layout"]


def test_keep_operator_profile_compiles():
    valid = validate(load_profile(REPO / "profiles" / "keep-operator.yaml"))
    assert valid.profile.spec.delivery.mode == "operator"


def _values_of(tmp_path, body: str) -> dict:
    from gpuop.pipeline.run import plan_all
    path = write_profile(tmp_path, "vals", BASE + textwrap.indent(textwrap.dedent(body), "  "))
    plans, _ = plan_all([path])
    return operator_out.chart_values(plans[0])


def test_pools_with_different_mig_strategies_get_the_plans_mixed_strategy_and_their_own_configs(tmp_path):
    values = _values_of(tmp_path, """\
      delivery: {mode: operator}
      dcgmExporter: {podLabels: true, podLabelAllowlist: ["^app$"]}
      nodePools:
        - {name: a, gpu: H100-SXM5-80GB, nodeSelector: {p: a}, mig: {strategy: mixed, layout: {"3g.40gb": 2}}}
        - {name: b, gpu: A100-SXM4-40GB, nodeSelector: {p: b}, mig: {strategy: none}}
    """)
    # an empty strategy renders `mig:` (null), which the CRD refuses; omitted, the chart's default is single
    assert values["mig"] == {"strategy": "mixed"}
    spec = one(render_nvidia(values), "ClusterPolicy")["spec"]
    assert spec["mig"] == {"strategy": "mixed"}
    configs = {k: load(v)["flags"]["migStrategy"] for k, v in values["devicePlugin"]["config"]["data"].items()}
    assert configs["default"] == "none" and "mixed" in configs.values()
    assert spec["dcgmExporter"]["podLabelAllowlistRegex"] == ["^app$"]


def test_every_nvidiadriver_pulls_the_driver_manager_through_the_mirror(tmp_path):
    values = _values_of(tmp_path, """\
      delivery: {mode: operator}
      images: {registry: registry.example.com/nvidia}
      driver: {version: "580.173.02"}
      nodePools:
        - {name: a, gpu: L40S, nodeSelector: {p: a}, driver: {version: "595.91.07"}}
        - {name: b, gpu: L40S, nodeSelector: {p: b}}
    """)
    objs = render_nvidia(values)
    drivers = [o for o in objs if o["kind"] == "NVIDIADriver"]
    assert len(drivers) == 2
    for d in drivers:
        assert d["spec"]["manager"]["repository"] == "registry.example.com/nvidia/cloud-native", d["metadata"]["name"]


def test_a_distributions_containerd_reaches_the_operators_toolkit(tmp_path):
    from gpuop.pipeline.run import plan_all
    path = write_profile(tmp_path, "vals", BASE.replace('version: "1.33"}', 'version: "1.33", distribution: k3s}') +
                         "  delivery: {mode: operator}\n  nodePools: [{name: a, gpu: L40S}]\n")
    (plan,), _ = plan_all([path])
    values = operator_out.chart_values(plan)
    assert values["toolkit"]["env"] == [
        {"name": "CONTAINERD_CONFIG", "value": "/var/lib/rancher/k3s/agent/etc/containerd/config.toml.tmpl"},
        {"name": "CONTAINERD_SOCKET", "value": "/run/k3s/containerd/containerd.sock"},
        {"name": "RUNTIME_CONFIG_SOURCE", "value": "file=/var/lib/rancher/k3s/agent/etc/containerd/config.toml"}]


# ---- the NFD subchart's image under the registry mirror ---------------------------------------------------------

def test_nfd_s_image_follows_the_registry_mirror_as_the_stack_s_does(tmp_path):
    for sub in "abc":
        (tmp_path / sub).mkdir()
    mirrored = _values_of(tmp_path / "a", """\
      images: {registry: mirror.example.com/nvidia}
      delivery: {mode: operator}
      nodePools:
        - {name: a, gpu: L40S}
    """)
    assert mirrored["node-feature-discovery"]["image"] == {
        "repository": "mirror.example.com/nvidia/nfd/node-feature-discovery"}
    # without a mirror the subchart keeps its own image; nfdValues' own repository wins over the mirror's
    plain = _values_of(tmp_path / "b", """\
      delivery: {mode: operator}
      nodePools:
        - {name: a, gpu: L40S}
    """)
    assert "image" not in plain.get("node-feature-discovery", {})
    own = _values_of(tmp_path / "c", """\
      images: {registry: mirror.example.com/nvidia}
      delivery: {mode: operator, operator: {nfdValues: {image: {repository: other.example.com/nfd}}}}
      nodePools:
        - {name: a, gpu: L40S}
    """)
    assert own["node-feature-discovery"]["image"] == {"repository": "other.example.com/nfd"}


@pytest.mark.parametrize("nfd_image, kept", [
    ("mirror.example.com/nvidia/nfd/node-feature-discovery", None),      # the mirror's path: no setting
    (None, "registry.k8s.io/nfd/node-feature-discovery"),                 # NFD from its own registry: said so
    ("other.example.com/nfd/node-feature-discovery", "other.example.com/nfd/node-feature-discovery"),
])
def test_import_keeps_where_nfd_s_image_comes_from_beside_a_mirror(tmp_path, nfd_image, kept):
    from gpuop.ops.importer import run
    repo = "mirror.example.com/nvidia"
    # a real mirrored install (the fleet's EKS one), its NFD image as the case says
    values = yaml.safe_load((REPO / "tests" / "data" / "import-fleet" / "eks-mirror.values.yaml").read_text()
                            .replace("123456789012.dkr.ecr.us-west-2.amazonaws.com/nvidia", repo))
    values.pop("node-feature-discovery", None)
    if nfd_image:
        values["node-feature-discovery"] = {"image": {"repository": nfd_image}}
    src = tmp_path / "live.values.yaml"
    src.write_text(yaml.safe_dump(values, sort_keys=False))
    text, code = run([src], None)
    assert code == 0, text
    op = yaml.safe_load(text)["spec"]["delivery"]["operator"]
    assert (op.get("nfdValues") or {}).get("image", {}).get("repository") == kept
