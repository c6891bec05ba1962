"""Dynamic Resource Allocation: DRA pools run the DRA kubelet plugin and never the device
plugin; gpuop's DeviceClasses (one per pool x device) and the tenants' ResourceClaimTemplates pass the
Kubernetes 1.34 strict schema; their CEL selectors, evaluated with cel-python on ResourceSlice devices
built from ../shared/refs/dra/FACTS.md §2, select exactly their pool's GPU model and profile; the upstream
DRA driver chart renders with the values gpuop pins (Helm 4's engine); every compile-time check refuses
with its exact, located message.
"""

from __future__ import annotations

import copy
import json
import shutil
import tempfile
from pathlib import Path

import celpy
import helm_python as helm
import pytest
import yaml

from gpuop import catalog
from gpuop.catalog import dra as dra_catalog
from gpuop.errors import UserError
from gpuop.kube.validation import is_dns1123_subdomain
from gpuop.kube.yamlio import load_all
from gpuop.plan import dra as dra_plan
from gpuop.plan.build import build_plan
from gpuop.profile.load import load_profile
from gpuop.validate import dra as dra_rules
from gpuop.validate.runner import validate
from gpuop.verify.kubeschema import KubeValidator

from conftest import REFS, REPO, load_dir, run_gpuop

DRA_REFS = REFS / "dra"
PROFILE = REPO / "profiles" / "dra.yaml"

BASE = {"apiVersion": "gpuop/v1alpha1", "kind": "ClusterProfile", "metadata": {"name": "t"},
        "spec": {"platform": {"type": "kubernetes", "version": "1.34"}, "os": "ubuntu24.04",
                 "driver": {"version": "580.173.02"},
                 "dra": {"version": "0.5.0"},
                 "nodePools": [{"name": "infer", "gpu": "H100-SXM5-80GB", "allocation": "dra", "gpusPerNode": 8,
                                "nodeSelector": {"pool": "infer"}, "nodeGroup": "infer",
                                "mig": {"strategy": "mixed", "layout": {"3g.40gb": 1, "2g.20gb": 1, "1g.10gb": 2}}},
                               {"name": "train", "gpu": "H100-SXM5-80GB", "nodeSelector": {"pool": "train"},
                                "nodeGroup": "train"}]}}


def issues(mutate) -> list:
    """Validate BASE changed by `mutate(spec)`; every issue (errors, or the warnings of a valid profile)."""
    doc = copy.deepcopy(BASE)
    mutate(doc["spec"])
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "t.yaml"
        p.write_text(yaml.safe_dump(doc, sort_keys=False))
        try:
            return list(validate(load_profile(p)).warnings)
        except UserError as exc:
            return list(exc.issues)


def only(found, path: str):
    hits = [i for i in found if i.path == path]
    assert len(hits) == 1, [str(i) for i in found]
    return hits[0]


def dra_plan_of(path: Path = PROFILE):
    return build_plan(validate(load_profile(path)), catalog.load())


# ---- the example compiles: planes, objects, delivery, capacity --------------------------------------

@pytest.fixture(scope="module")
def out(tmp_path_factory) -> Path:
    w = tmp_path_factory.mktemp("dra")
    shutil.copytree(REPO / "profiles", w / "profiles")
    shutil.copy(REPO / "gpuop.yaml", w / "gpuop.yaml")
    run_gpuop("synth", "profiles/dra.yaml", "-o", "dist", cwd=w, check=True)
    return w / "dist"


def test_example_profile_mixes_a_dra_pool_and_a_device_plugin_pool():
    spec = load_profile(PROFILE).data["spec"]
    assert {p.get("allocation", "devicePlugin") for p in spec["nodePools"]} == {"dra", "devicePlugin"}


def test_node_feature_rule_puts_dra_pools_on_the_dra_plane_only(out):
    objs = load_dir(out / "dra" / "manifests")
    rule = next(o for o in objs if o["kind"] == "NodeFeatureRule")
    rules = {r["name"]: r["labels"] for r in rule["spec"]["rules"]}
    assert "nvidia.com/gpu.deploy.device-plugin" not in rules["nvidia.com/gpu.deploy"]   # never for every GPU node
    assert rules["gpuop.pool.H100-SXM5-80GB"]["nvidia.com/gpu.deploy.dra-driver"] == "true"
    assert rules["gpuop.pool.H100-SXM5-80GB"]["nvidia.com/gpu.deploy.client"] == "true"
    assert rules["gpuop.pool.H100-SXM5-80GB"]["nvidia.com/gpu.deploy.device-plugin"] == "false"
    assert rules["gpuop.pool.L40S"]["nvidia.com/gpu.deploy.device-plugin"] == "true"
    assert "nvidia.com/gpu.deploy.dra-driver" not in rules["gpuop.pool.L40S"]
    assert "nvidia.com/gpu.deploy.client" not in rules["gpuop.pool.L40S"]
    # the device plugin's config never targets the DRA pool
    assert "nvidia.com/device-plugin.config" not in rules["gpuop.pool.H100-SXM5-80GB"]
    ds = next(o for o in objs if o["kind"] == "DaemonSet" and o["metadata"]["name"] == "nvidia-device-plugin-daemonset")
    assert ds["spec"]["template"]["spec"]["nodeSelector"]["nvidia.com/gpu.deploy.device-plugin"] == "true"


def test_device_classes_and_claim_templates_are_emitted_in_their_namespaces(out):
    objs = load_dir(out / "dra" / "manifests")
    classes = sorted(o["metadata"]["name"] for o in objs if o["kind"] == "DeviceClass")
    assert classes == ["infer.1g.10gb.gpuop", "infer.2g.20gb.gpuop", "infer.3g.40gb.gpuop"]
    assert not set(classes) & dra_rules.CHART_CLASSES
    templates = {o["metadata"]["name"]: o for o in objs if o["kind"] == "ResourceClaimTemplate"}
    assert templates["h100-3g"]["metadata"]["namespace"] == "team-a"
    assert templates["h100-small"]["spec"]["spec"]["devices"]["requests"] == [
        {"exactly": {"allocationMode": "ExactCount", "count": 2, "deviceClassName": "infer.1g.10gb.gpuop"},
         "name": "mig-1g-10gb"},
        {"exactly": {"allocationMode": "ExactCount", "count": 1, "deviceClassName": "infer.2g.20gb.gpuop"},
         "name": "mig-2g-20gb"}]


def test_every_resource_k8s_io_object_passes_the_kubernetes_1_34_strict_schema(out):
    objs = [o for o in load_dir(out / "dra" / "manifests") if o["apiVersion"].startswith("resource.k8s.io/")]
    assert {o["kind"] for o in objs} == {"DeviceClass", "ResourceClaimTemplate"}
    assert {o["apiVersion"] for o in objs} == {"resource.k8s.io/v1"}
    v = KubeValidator("1.34")
    for o in objs:
        assert v.errors(o) == [], o["metadata"]["name"]


def test_strict_schema_refuses_a_broken_device_class(out):
    obj = next(o for o in load_dir(out / "dra" / "manifests") if o["kind"] == "DeviceClass")
    broken = copy.deepcopy(obj)
    broken["spec"]["selectors"][0]["cell"] = broken["spec"]["selectors"][0].pop("cel")
    assert KubeValidator("1.34").errors(broken)


def test_dra_driver_is_delivered_after_the_gpu_stack(out):
    app = yaml.safe_load((out / "dra" / "argocd" / "dra-application.yaml").read_text())
    assert app["metadata"]["annotations"]["argocd.argoproj.io/sync-wave"] == "1"
    assert app["spec"]["source"]["chart"] == "dra-driver-nvidia-gpu"
    assert app["spec"]["source"]["targetRevision"] == "0.5.0"
    assert app["spec"]["source"]["repoURL"] == "registry.k8s.io/dra-driver-nvidia/charts"
    hr = yaml.safe_load((out / "dra" / "flux" / "dra-helmrelease.yaml").read_text())
    assert hr["spec"]["dependsOn"] == [{"name": "gpuop-dra", "namespace": "flux-system"}]
    repo = yaml.safe_load((out / "dra" / "flux" / "dra-helmrepository.yaml").read_text())
    assert repo["spec"] == {"type": "oci", "url": "oci://registry.k8s.io/dra-driver-nvidia/charts",
                            "interval": repo["spec"]["interval"]}
    values = app["spec"]["source"]["helm"]["valuesObject"]
    assert values == hr["spec"]["values"]
    assert values["kubeletPlugin"]["nodeSelector"] == {"nvidia.com/gpu.deploy.client": "true",
                                                       "nvidia.com/gpu.deploy.dra-driver": "true"}
    assert values["nvidiaDriverRoot"] == "/run/nvidia/driver"        # gpuop's driver container
    assert values["featureGates"] == {"DynamicMIG": False, "MPSSupport": True}


def test_index_json_has_capacity_per_device_class(out):
    entry = json.loads((out / "index.json").read_text())["clusters"][0]
    capacity = {c["deviceClass"]: (c["perGpu"], c["perNode"], c["total"]) for c in entry["dra"]["capacity"]}
    # H100 layout 3g.40gb + 2g.20gb + 2x 1g.10gb, 8 GPUs per node, 4 nodes
    assert capacity == {"infer.1g.10gb.gpuop": (2, 16, {"min": 64, "max": 64}),
                        "infer.2g.20gb.gpuop": (1, 8, {"min": 32, "max": 32}),
                        "infer.3g.40gb.gpuop": (1, 8, {"min": 32, "max": 32})}


# ---- the upstream chart with gpuop's values, through Helm 4's engine ---------------------------------

def render_dra_chart(plan) -> list[dict]:
    """The upstream DRA driver chart rendered with the plan's values (Helm 4's engine)."""
    chart = helm.Chart.load(str(DRA_REFS / "chart"))
    try:
        rendered = chart.render(plan.values, name=plan.release_name, namespace=plan.namespace)
    finally:
        chart.close()
    return [o for path in sorted(rendered) for o in load_all(rendered[path]) if o]


def test_upstream_chart_renders_with_the_values_gpuop_pins():
    plan = dra_plan_of().dra
    objs = render_dra_chart(plan)
    v = KubeValidator("1.34")
    for o in objs:
        if v.has_schema(o["apiVersion"], o["kind"]):
            assert v.errors(o) == [], (o["kind"], o["metadata"]["name"])
    ds = next(o for o in objs if o["kind"] == "DaemonSet")
    pod = ds["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {"nvidia.com/gpu.deploy.client": "true", "nvidia.com/gpu.deploy.dra-driver": "true"}
    assert pod["priorityClassName"] == "system-node-critical"
    env = {e["name"]: e.get("value") for c in pod["containers"] for e in c.get("env", [])}
    assert env["FEATURE_GATES"] == "DynamicMIG=false,MPSSupport=true,"
    classes = {o["metadata"]["name"]: o for o in objs if o["kind"] == "DeviceClass"}
    assert {c["apiVersion"] for c in classes.values()} == {"resource.k8s.io/v1"}
    assert not {c.name for c in plan.device_classes} & set(classes)        # gpuop's never collide with the chart's


def test_upstream_chart_refuses_to_render_without_the_override_gpuop_pins():
    values = dict(dra_plan_of().dra.values)
    del values["gpuResourcesEnabledOverride"]
    chart = helm.Chart.load(str(DRA_REFS / "chart"))
    try:
        with pytest.raises(helm.HelmRenderError, match="cannot be deployed alongside the standard GPU device plugin"):
            chart.render(values, name="dra-driver-nvidia-gpu", namespace="dra-driver-nvidia-gpu")
    finally:
        chart.close()


# ---- CEL: selectors evaluate on ResourceSlice devices built from FACTS.md §2 -------------------------

def device(driver="gpu.nvidia.com", **attributes) -> dict:
    """A ResourceSlice device as DRA's CEL environment sees it (FACTS.md §2: bare attribute keys under the
    driver's domain; versions are semver values, carried as strings here since no selector reads them)."""
    return {"driver": driver, "attributes": {driver: attributes}, "capacity": {driver: {}}}


H100 = dict(productName="NVIDIA H100 80GB HBM3", brand="Nvidia", architecture="Hopper",
            cudaComputeCapability="9.0.0", driverVersion="580.173.2", cudaDriverVersion="13.0.0")
DEVICES = {
    "h100-gpu": device(type="gpu", uuid="GPU-1", **H100),
    "h100-3g.40gb": device(type="mig", uuid="MIG-1", parentUUID="GPU-1", profile="3g.40gb", **H100),
    "h100-2g.20gb": device(type="mig", uuid="MIG-2", parentUUID="GPU-1", profile="2g.20gb", **H100),
    "h100-1g.10gb": device(type="mig", uuid="MIG-3", parentUUID="GPU-1", profile="1g.10gb", **H100),
    "a100-3g.20gb": device(type="mig", uuid="MIG-4", parentUUID="GPU-2", profile="3g.20gb",
                           productName="NVIDIA A100-PCIE-40GB", brand="Nvidia", architecture="Ampere"),
    "a100-1g.10gb-other-gpu": device(type="mig", uuid="MIG-5", parentUUID="GPU-3", profile="1g.10gb",
                                     productName="NVIDIA A100-SXM4-80GB", brand="Nvidia", architecture="Ampere"),
    "l40s-gpu": device(type="gpu", uuid="GPU-4", productName="NVIDIA L40S", brand="Nvidia", architecture="Ada Lovelace"),
    "channel": {"driver": "compute-domain.nvidia.com",
                "attributes": {"compute-domain.nvidia.com": {"type": "channel", "id": 0}}, "capacity": {}},
}


def evaluate(expression: str, dev: dict) -> bool:
    env = celpy.Environment()
    result = env.program(env.compile(expression)).evaluate({"device": celpy.json_to_cel(dev)})
    assert isinstance(result, celpy.celtypes.BoolType), (expression, dev, result)
    return bool(result)


def test_each_device_class_selects_its_pools_gpu_and_profile_and_nothing_else():
    plan = dra_plan_of().dra
    wanted = {"infer.3g.40gb.gpuop": {"h100-3g.40gb"}, "infer.2g.20gb.gpuop": {"h100-2g.20gb"},
              "infer.1g.10gb.gpuop": {"h100-1g.10gb"}}
    for c in plan.device_classes:
        assert {name for name, dev in DEVICES.items() if evaluate(c.expression, dev)} == wanted[c.name], c.name


def test_whole_gpu_class_selects_whole_gpus_of_its_model_only():
    expr = dra_plan.selector("gpu.nvidia.com", "gpu", None, "NVIDIA L40S")
    assert {name for name, dev in DEVICES.items() if evaluate(expr, dev)} == {"l40s-gpu"}


def test_selectors_type_check_against_the_resourceslice_schema():
    cat = dra_catalog.load()
    for c in dra_plan_of().dra.device_classes:
        assert dra_rules.typecheck(c.expression, "mig", cat) == []


@pytest.mark.parametrize("expression, device_type, problem", [
    ("device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].index == 0", "gpu",
     "attributes 'index' is not published on gpu devices by gpu.nvidia.com (allowed: type, uuid, productName, "
     "brand, architecture, cudaComputeCapability, driverVersion, cudaDriverVersion, addressingMode)"),
    ("device.attributes['gpu.nvidia.com'].profile == '1g.10gb'", "gpu",
     "attributes 'profile' is not published on gpu devices by gpu.nvidia.com (allowed: type, uuid, productName, "
     "brand, architecture, cudaComputeCapability, driverVersion, cudaDriverVersion, addressingMode)"),
    ("device.attributes['gpu.nvidia.com'].driverVersion == '580.0.0'", "gpu",
     "compares version with a string literal '580.0.0' (versions compare with semver(), e.g. "
     "device.attributes['gpu.nvidia.com'].driverVersion.compareTo(semver('580.0.0')) >= 0)"),
    ("device.attributes['gpu.nvidia.com'].type == 1", "gpu", "compares string with a int literal 1"),
    ("device.driver == ", "gpu", "does not parse as CEL: device.driver == "),
    ("gpu.type == 'gpu'", "gpu", "unknown variable 'gpu' (a DeviceClass selector sees `device` only)"),
])
def test_typecheck_refuses_selectors_the_driver_never_matches(expression, device_type, problem):
    assert dra_rules.typecheck(expression, device_type, dra_catalog.load()) == [problem]


# ---- compile-time checks: exact messages, located ----------------------------------------------------

def test_refuses_kubernetes_older_than_1_34():
    i = only(issues(lambda s: s["platform"].update(version="1.33")), "spec.platform.version")
    assert i.message == ("DRA needs Kubernetes >= 1.34, this cluster is Kubernetes 1.33: gpuop emits "
                         "resource.k8s.io/v1 objects (GA, served from 1.34) and DRA driver 0.5.0 requires "
                         "Kubernetes >= 1.34 (docs/prerequisites.md; catalog/data/dra.yaml)")
    assert (i.line, i.col) == (8, 5)      # the version: line of spec.platform


def test_refuses_dra_pool_without_spec_dra():
    i = only(issues(lambda s: s.pop("dra")), "spec.nodePools[0].allocation")
    assert i.message == ("allocation: dra needs spec.dra (the NVIDIA DRA driver that publishes this pool's GPUs as "
                         "ResourceSlices); add spec.dra: {version: \"0.5.0\"} or use allocation: devicePlugin")


def test_refuses_unknown_dra_version():
    i = only(issues(lambda s: s["dra"].update(version="0.9.0")), "spec.dra.version")
    assert i.message == "'0.9.0' is not a DRA driver version of the DRA catalog; allowed: 0.5.0 (catalog/data/dra.yaml)"


def test_refuses_gpu_driver_below_the_dra_floor():
    i = only(issues(lambda s: s["driver"].update(version="535")), "spec.driver.version")
    assert i.message == ("pool 'infer' (allocation: dra) gets GPU driver 535.309.01, but DRA driver 0.5.0 needs "
                         ">= 565 for GPU allocation (docs/prerequisites.md; catalog/data/dra.yaml)")


def test_refuses_compute_domains_below_570_158_01():
    found = issues(lambda s: (s["dra"].update(computeDomains={"enabled": True}),
                              s["driver"].update(version="570.148.08")))
    assert ("pool 'infer' gets GPU driver 570.148.08, but ComputeDomains need >= 570.158.01 "
            "(IMEXDaemonsWithDNSNames; docs/prerequisites.md; catalog/data/dra.yaml)") in [
        i.message for i in found if i.path == "spec.driver.version"]


def test_refuses_a_runtime_without_cdi():
    i = only(issues(lambda s: s.update(containerRuntime="docker")), "spec.containerRuntime")
    assert i.message == ("the DRA driver injects devices through CDI, which docker does not enable; use containerd "
                         "or crio (containerd 2.0+ / CRI-O 1.27+ have CDI on by default; docs/prerequisites.md; "
                         "catalog/data/dra.yaml)")


def test_refuses_unknown_feature_gate():
    i = only(issues(lambda s: s["dra"].update(featureGates={"Foo": True})), "spec.dra.featureGates.Foo")
    assert i.message.startswith("'Foo' is not a feature gate of the DRA driver; allowed: TimeSlicingSettings, ")
    assert i.message.endswith("(catalog/data/dra.yaml, pkg/featuregates/featuregates.go)")


def test_refuses_mutually_exclusive_gates():
    i = only(issues(lambda s: (s["nodePools"][0].pop("mig"),
                               s["dra"].update(featureGates={"PassthroughSupport": True, "NVMLDeviceHealthCheck": True}))),
             "spec.dra.featureGates.NVMLDeviceHealthCheck")
    assert i.message == ("feature gates PassthroughSupport and NVMLDeviceHealthCheck are mutually exclusive: the "
                         "driver's binaries refuse to start (featuregates.go ValidateFeatureGates; "
                         "docs/reference/feature-gates.md)")


def test_warns_on_the_docs_only_exclusion():
    i = only(issues(lambda s: s["dra"].update(featureGates={"MPSSupport": True, "NVMLDeviceHealthCheck": True})),
             "spec.dra.featureGates.NVMLDeviceHealthCheck")
    assert i.severity == "warning"
    assert i.message == ("feature gates MPSSupport and NVMLDeviceHealthCheck are mutually exclusive: the docs say so, "
                         "though the driver does not check it yet (docs/reference/feature-gates.md, docs/guides/mps.md "
                         "(not checked by ValidateFeatureGates at 95932046))")


def test_refuses_a_gate_without_its_dependency():
    i = only(issues(lambda s: s["dra"].update(featureGates={"ComputeDomainCliques": True,
                                                            "IMEXDaemonsWithDNSNames": False})),
             "spec.dra.featureGates.IMEXDaemonsWithDNSNames")
    assert i.message == ("feature gate ComputeDomainCliques needs IMEXDaemonsWithDNSNames on "
                         "(featuregates.go; docs/reference/feature-gates.md)")


def test_refuses_dynamic_mig_on_a_pool_whose_layout_the_mig_manager_owns():
    i = only(issues(lambda s: s["dra"].update(featureGates={"DynamicMIG": True})), "spec.nodePools[0].mig.layout")
    assert i.message == ("DynamicMIG is on, so the DRA driver creates and destroys MIG devices on pool 'infer' itself "
                         "and destroys partitions it did not create at startup, but this layout would be applied by "
                         "the MIG manager; drop the layout (the claims pick profiles) or turn DynamicMIG off "
                         "(FACTS §5, docs/concepts/gpu-allocation.md)")


def test_refuses_sharing_without_its_gate():
    i = only(issues(lambda s: s["nodePools"][0].update(sharing={"mps": {"replicas": 2}})),
             "spec.nodePools[0].sharing.mps")
    assert i.message == ("mps on a DRA pool becomes the driver's opaque config, which it rejects without feature gate "
                         "MPSSupport; set spec.dra.featureGates.MPSSupport: true "
                         "(api/nvidia.com/resource/v1beta1/validate.go; catalog/data/dra.yaml)")


def test_refuses_extended_resources_before_kubernetes_1_35():
    i = only(issues(lambda s: s["dra"].update(extendedResources=True)), "spec.dra.extendedResources")
    assert i.message == ("extendedResourceName (KEP 5004) needs Kubernetes >= 1.35 with the DRAExtendedResource gate "
                         "on kube-apiserver, kube-scheduler, kube-controller-manager and kubelet; this cluster is "
                         "Kubernetes 1.34 (chart/templates/validation.yaml; catalog/data/dra.yaml)")


def test_refuses_a_node_matching_a_dra_pool_and_a_device_plugin_pool():
    i = only(issues(lambda s: s["nodePools"][1].update(nodeSelector={})), "spec.nodePools[0].nodeSelector")
    assert i.message == ("pool 'infer' (allocation: dra) and pool 'train' (device plugin) can select the same nodes: "
                         "both have GPU H100-SXM5-80GB and their nodeSelectors do not exclude each other (no label key "
                         "with different values), so such a node would run the device plugin and the DRA kubelet "
                         "plugin and hand out its GPUs twice; give the pools nodeSelectors that differ in one "
                         "label's value")


def test_same_gpu_model_on_both_planes_takes_labels_from_the_node_group():
    i = only(issues(lambda s: None), "spec.nodePools[0]")
    assert i.severity == "warning"
    assert i.message.startswith("label this pool's nodes nvidia.com/gpu.deploy.client=true, "
                                "nvidia.com/gpu.deploy.device-plugin=false, nvidia.com/gpu.deploy.dra-driver=true, ")


def claim(**kw) -> dict:
    return {"name": "x", "namespace": "team-a", "pool": "infer", **kw}


def test_refuses_a_claim_profile_the_gpu_does_not_have():
    i = only(issues(lambda s: s.update(claimTemplates=[claim(devices=[{"profile": "9g.80gb"}])])),
             "spec.claimTemplates[0].devices[0].profile")
    assert i.message == ("'9g.80gb' is not a MIG profile of H100-SXM5-80GB; allowed: gpu, 1g.10gb, 1g.10gb+me, "
                         "1g.20gb, 2g.20gb, 3g.40gb, 4g.40gb, 7g.80gb (catalog/data/mig.yaml)")


def test_refuses_a_claim_profile_outside_the_static_layout():
    i = only(issues(lambda s: s.update(claimTemplates=[claim(devices=[{"profile": "7g.80gb"}])])),
             "spec.claimTemplates[0].devices[0].profile")
    assert i.message == ("'7g.80gb' is not in the static MIG layout of pool 'infer' (3g.40gb x1 + 2g.20gb x1 + "
                         "1g.10gb x2): the DRA driver only offers the MIG devices that exist when its kubelet plugin "
                         "starts (FACTS §5); add it to the layout or turn on DynamicMIG")


def test_refuses_a_whole_gpu_claim_on_a_static_mig_pool():
    i = only(issues(lambda s: s.update(claimTemplates=[claim(devices=[{"profile": "gpu"}])])),
             "spec.claimTemplates[0].devices[0].profile")
    assert i.message == ("pool 'infer' partitions its GPUs with static MIG (3g.40gb x1 + 2g.20gb x1 + 1g.10gb x2), "
                         "and a GPU in MIG mode is offered as its MIG devices, never whole (FACTS §5); ask for a "
                         "profile of the layout")


def test_refuses_a_claim_combination_without_a_placement_under_dynamic_mig():
    def mutate(s):
        s["dra"]["featureGates"] = {"DynamicMIG": True}
        s["nodePools"][0].pop("mig")
        s["claimTemplates"] = [claim(devices=[{"profile": "7g.80gb"}, {"profile": "1g.10gb"}])]
    i = only(issues(mutate), "spec.claimTemplates[0].devices")
    assert i.message.startswith("under DynamicMIG a claim's MIG devices are created on one GPU, and 7g.80gb x1 + "
                                "1g.10gb x1 has no placement on one H100-SXM5-80GB: ")


def test_dynamic_mig_claims_on_one_gpu_share_the_parent_uuid():
    from test_plan_helpers import plan_for
    plan = plan_for({"platform": {"type": "kubernetes", "version": "1.34"}, "dra": {"featureGates": {"DynamicMIG": True}},
                     "nodePools": [{"name": "a", "gpu": "H100-SXM5-80GB", "allocation": "dra"}],
                     "claimTemplates": [claim(pool="a", devices=[{"profile": "3g.40gb"}, {"profile": "1g.10gb", "count": 2}])]})
    (t,) = plan.dra.claim_templates
    assert t.same_gpu
    assert {c.device for c in plan.dra.device_classes} >= {"gpu", "3g.40gb", "1g.10gb", "7g.80gb"}


def test_refuses_a_claim_count_above_what_one_node_offers():
    i = only(issues(lambda s: s.update(claimTemplates=[claim(devices=[{"profile": "3g.40gb", "count": 9}])])),
             "spec.claimTemplates[0].devices[0].count")
    assert i.message == ("the claim asks for 9 x 3g.40gb, but one node of pool 'infer' offers 8 (1 per GPU x 8 GPUs); "
                         "a claim's devices all come from one node")


def test_refuses_a_claim_on_a_device_plugin_pool():
    i = only(issues(lambda s: s.update(claimTemplates=[claim(pool="train", devices=[{"profile": "gpu"}])])),
             "spec.claimTemplates[0].pool")
    assert i.message == "'train' is not a pool with allocation: dra; allowed: infer"


def test_refuses_a_duplicate_claim_template():
    one = claim(devices=[{"profile": "3g.40gb"}])
    i = only(issues(lambda s: s.update(claimTemplates=[one, one])), "spec.claimTemplates[1].name")
    assert i.message == ("claim template team-a/x is declared twice (also spec.claimTemplates[0]); names are unique "
                         "per namespace")


def test_device_class_names_keep_profile_attributes_as_valid_subdomains():
    assert dra_plan.device_class_name("infer", "1g.10gb+me") == "infer.1g.10gb-me.gpuop"
    assert is_dns1123_subdomain("infer.1g.10gb-me.gpuop") == []


def test_refuses_device_class_names_that_are_invalid_or_the_charts(monkeypatch):
    # pool names are DNS labels and catalog profiles never collide once '+' is written '-', so the naming
    # function is swapped to reach the check (it guards future naming changes)
    monkeypatch.setattr(dra_plan, "device_class_name", lambda pool, device: "gpu.nvidia.com")
    found = [i for i in issues(lambda s: None) if i.path == "spec.nodePools[0].name"]
    assert [i.message for i in found] == [
        "DeviceClass 'gpu.nvidia.com' is one the DRA driver's chart creates",
        "DeviceClass 'gpu.nvidia.com' would be emitted twice (pools 'infer' and 'infer')"]
    monkeypatch.setattr(dra_plan, "device_class_name", lambda pool, device: f"{pool}_{device}")
    found = [i.message for i in issues(lambda s: None) if i.path == "spec.nodePools[0].name"]
    assert found[0] == ("DeviceClass name 'infer_1g.10gb' is not a valid DNS-1123 subdomain (lowercase alphanumerics, "
                        "'-' and '.', at most 253 characters)")


def test_refuses_one_extended_resource_on_two_pools():
    def mutate(s):
        s["platform"]["version"] = "1.35"
        s["dra"]["extendedResources"] = True
        s["nodePools"][1].update(allocation="dra", mig=copy.deepcopy(s["nodePools"][0]["mig"]))
    found = [i.message for i in issues(mutate) if i.path == "spec.nodePools[1].name"]
    assert found[0] == ("extendedResourceName nvidia.com/mig-1g.10gb would be served by the DeviceClasses of pools "
                        "'infer' and 'train'; Kubernetes maps one extended resource to one DeviceClass, so set "
                        "spec.dra.extendedResources only with one DRA pool per device")


# ---- gpuop diff shows DeviceClass and claim template changes -----------------------------------------

def test_diff_names_changed_device_classes_and_claim_templates(tmp_path):
    w = tmp_path / "w"
    shutil.copytree(REPO / "profiles", w / "profiles")
    shutil.copy(REPO / "gpuop.yaml", w / "gpuop.yaml")
    run_gpuop("synth", "profiles/dra.yaml", "-o", "dist", cwd=w, check=True)
    p = w / "profiles" / "dra.yaml"
    text = p.read_text()
    for old, new in (('devices: [{profile: "3g.40gb", count: 1}]', 'devices: [{profile: "3g.40gb", count: 2}]'),
                     ("      allocation: dra\n", "      allocation: dra\n      sharing: {mps: {replicas: 2}}\n")):
        assert old in text
        text = text.replace(old, new)
    p.write_text(text)
    lines = run_gpuop("diff", "profiles/dra.yaml", cwd=w, check=True).stdout.splitlines()
    assert lines[0] == "cluster dra: chart 0.1.0 -> 0.1.1"
    assert "  ~ ResourceClaimTemplate team-a/h100-3g" in lines
    assert "      spec.spec.devices.requests[mig-3g-40gb].exactly.count: 1 -> 2" in lines
    for name in ("infer.1g.10gb.gpuop", "infer.2g.20gb.gpuop", "infer.3g.40gb.gpuop"):
        at = lines.index(f"  ~ DeviceClass {name}")
        # a structure too long for one line is shown whole, as YAML
        assert lines[at + 1] == "      spec.config: added (multi-line value):"
        added = lines[at + 2:lines.index("", at) if "" in lines[at:] else None]
        assert "        +- opaque:" in added and "        +    driver: gpu.nvidia.com" in added


# ---- the construct from its props alone ----------------------------------------------------------------

def test_dra_objects_render_from_props_alone():
    from gpuop.components.dra import (ClaimRequestProps, ClaimTemplateProps, DeviceClassProps, DraObjects,
                                      DraProps)
    props = DraProps(device_classes=(DeviceClassProps(
        name="a.gpu.gpuop", pool="a", expression="device.driver == 'gpu.nvidia.com'",
        config={"apiVersion": "resource.nvidia.com/v1beta1", "kind": "GpuConfig", "sharing": {"strategy": "MPS"}},
        extended_resource="nvidia.com/gpu"),), claim_templates=(ClaimTemplateProps(
            name="t", namespace="team-a", pool="a", same_gpu=("mig-1g-10gb", "mig-2g-20gb"), requests=(
                ClaimRequestProps(name="mig-1g-10gb", device_class="a.1g.10gb.gpuop", count=2),
                ClaimRequestProps(name="mig-2g-20gb", device_class="a.2g.20gb.gpuop"))),))
    dc, rct = DraObjects.render(props)
    assert dc["spec"] == {"selectors": [{"cel": {"expression": "device.driver == 'gpu.nvidia.com'"}}],
                          "config": [{"opaque": {"driver": "gpu.nvidia.com", "parameters": {
                              "apiVersion": "resource.nvidia.com/v1beta1", "kind": "GpuConfig",
                              "sharing": {"strategy": "MPS"}}}}],
                          "extendedResourceName": "nvidia.com/gpu"}
    assert rct["metadata"]["namespace"] == "team-a"
    assert rct["metadata"]["annotations"] == {"gpuop/tenant-namespace": "true"}
    assert rct["spec"]["spec"]["devices"]["constraints"] == [
        {"requests": ["mig-1g-10gb", "mig-2g-20gb"], "matchAttribute": "gpu.nvidia.com/parentUUID"}]
    v = KubeValidator("1.35")                # extendedResourceName: served from 1.35 (KEP 5004)
    assert v.errors(dc) == [] and v.errors(rct) == []


# ---- more located messages ------------------------------------------------------------------------------

def test_warns_when_the_gpu_has_no_known_product_name():
    def mutate(s):
        s["nodePools"] = [{"name": "old", "gpu": "V100", "allocation": "dra"}]
    i = only(issues(mutate), "spec.nodePools[0].gpu")
    assert i.severity == "warning"
    assert i.message == ("the DRA catalog has no NVML product name for V100, so the pool's DeviceClasses select on "
                         "driver, device type and MIG profile only: they also match other GPU models' devices "
                         "(catalog/data/dra.yaml products)")


def test_warns_when_two_dra_pools_share_a_gpu_model():
    i = only(issues(lambda s: s["nodePools"][1].update(allocation="dra")), "spec.nodePools[1].gpu")
    assert i.message == ("DRA pools infer, train have the same GPU model (H100-SXM5-80GB); a DeviceClass selects "
                         "devices, not nodes, so each of their classes matches the other pools' devices too")


def test_refuses_claim_templates_without_dra_pools():
    def mutate(s):
        s.pop("dra")
        s["nodePools"] = [s["nodePools"][1]]
        s["claimTemplates"] = [claim(devices=[{"profile": "gpu"}])]
    i = only(issues(mutate), "spec.claimTemplates")
    assert i.message == ("claim templates need a pool with allocation: dra (no pool uses DRA, so no DeviceClass "
                         "would serve them)")


def test_refuses_dra_pools_that_disagree_on_the_driver_root():
    def mutate(s):
        s["nodePools"][1].update(allocation="dra", driver={"enabled": False})
    i = only(issues(mutate), "spec.nodePools[1].driver.enabled")
    assert i.message == ("DRA pools disagree on where the GPU driver is (gpuop's driver container at "
                         "/run/nvidia/driver vs the host's /), but the DRA driver's chart has one nvidiaDriverRoot; "
                         "give every allocation: dra pool the same driver setting")


def test_autoscaled_pool_capacity_has_both_ends():
    from test_plan_helpers import plan_for
    plan = plan_for({"platform": {"type": "kubernetes", "version": "1.34"}, "dra": {},
                     "nodePools": [{"name": "a", "gpu": "L40S", "allocation": "dra", "gpusPerNode": 4,
                                    "nodes": {"min": 2, "max": 5}}]})
    assert plan.dra.capacity() == [{"deviceClass": "a.gpu.gpuop", "pool": "a", "device": "gpu", "perGpu": 1,
                                    "perNode": 4, "total": {"min": 8, "max": 20}}]
    assert plan.dra.values["nvidiaDriverRoot"] == "/run/nvidia/driver"


def test_warns_when_spec_dra_serves_no_pool():
    i = only(issues(lambda s: s["nodePools"][0].update(allocation="devicePlugin", nodeSelector={"pool": "x"})),
             "spec.dra")
    assert i.severity == "warning"
    assert i.message == ("no pool uses allocation: dra, so the DRA driver is not delivered and no DeviceClass is "
                         "written")


def test_cli_reports_a_dra_error_located_with_exit_2_and_writes_nothing(tmp_path):
    w = tmp_path / "w"
    shutil.copytree(REPO / "profiles", w / "profiles")
    shutil.copy(REPO / "gpuop.yaml", w / "gpuop.yaml")
    p = w / "profiles" / "dra.yaml"
    p.write_text(p.read_text().replace('version: "1.34"}', 'version: "1.33"}'))
    proc = run_gpuop("synth", "profiles/dra.yaml", "-o", "dist", cwd=w)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.splitlines()[0].startswith(
        "profiles/dra.yaml:12:32: spec.platform.version: DRA needs Kubernetes >= 1.34, this cluster is Kubernetes 1.33")
    assert not (w / "dist").exists()


# ---- NVIDIA's GPU client contract: the kubelet plugin is stopped for a MIG change or a driver reload -------

CLIENT = "nvidia.com/gpu.deploy.client"


def test_the_dra_kubelet_plugin_is_stopped_for_a_mig_change_or_a_driver_reload_and_restarted_after(out):
    # the MIG manager (v0.15.0+) and the driver manager (v0.12.0+) set the client label to paused-for-... where
    # it is "true", wait until no DaemonSet pod whose nodeSelector has the key is left on the node, then set it
    # back to "true" (mig-parted pkg/mig/reconfigure, k8s-driver-manager cmd/driver-manager; dra.yaml clientLabel)
    rule = next(o for o in load_dir(out / "dra" / "manifests") if o["kind"] == "NodeFeatureRule")
    rules = {r["name"]: r["labels"] for r in rule["spec"]["rules"]}
    node = {**rules["nvidia.com/gpu.present"], **rules["nvidia.com/gpu.deploy"],
            **rules["gpuop.pool.H100-SXM5-80GB"]}
    ds = next(o for o in render_dra_chart(dra_plan_of().dra) if o["kind"] == "DaemonSet")
    selector = ds["spec"]["template"]["spec"]["nodeSelector"]

    def runs_on(labels: dict) -> bool:
        return all(labels.get(k) == v for k, v in selector.items())

    assert node[CLIENT] == "true" and runs_on(node)
    assert CLIENT in selector                         # the key the managers wait on before the GPU reset
    for paused in ("paused-for-mig-change", "paused-for-driver-upgrade"):
        assert not runs_on({**node, CLIENT: paused})  # the DaemonSet controller removes the pod
    # the stack's own MIG manager and driver manager are versions that honour the label
    release = catalog.load().release("26.7")
    assert not dra_rules.versions.older(release.components["migManager"].version,
                                        dra_catalog.load().clientMigManagerSince)
    assert not dra_rules.versions.older(release.components["driverManager"].version, "v0.12.0")


def test_a_pinned_mig_manager_that_ignores_the_client_label_is_warned_on_a_dra_mig_pool():
    found = [i for i in issues(lambda s: s.update(migManager={"version": "v0.14.5"}))
             if i.rule == "dra-gpu-client-contract"]
    i = only(found, "spec.migManager.version")
    assert i.severity == "warning"
    assert i.message.startswith("MIG manager v0.14.5 does not stop the DRA kubelet plugin for a MIG change: only MIG "
                                "managers from v0.15.0 pause nvidia.com/gpu.deploy.client")
    assert not [i for i in issues(lambda s: s.update(migManager={"version": "v0.15.0"}))
                if i.rule == "dra-gpu-client-contract"]
    # without a layout on the DRA pool the MIG manager never touches its GPUs
    assert not [i for i in issues(lambda s: (s.update(migManager={"version": "v0.14.5"}),
                                             s["nodePools"][0].pop("mig")))
                if i.rule == "dra-gpu-client-contract"]


@pytest.mark.parametrize("release, mig_manager, driver_manager", [("26.3", "v0.14.2", "v0.11.0"),
                                                                   ("25.10", "v0.13.1", "v0.9.1")])
def test_an_older_release_whose_managers_ignore_the_client_label_is_warned_at_the_release(release, mig_manager,
                                                                                          driver_manager):
    """The client contract is new in GPU Operator v26.7.0: an older release's MIG manager and driver manager pause
    no nvidia.com/gpu.deploy.client, so gpuop's DRA kubelet plugin is not restarted around a MIG change or a driver
    reload there (in both modes: operator mode deploys the release's managers)."""
    def on(mode):
        def mutate(spec):
            spec.update(release=release, delivery={"mode": mode})
            if mode == "operator":     # one GPU model per label set: the operator labels by model (NFD)
                spec["nodePools"].pop()
                if release == "25.10":     # v25.10.1's chart has no extraObjects for gpuop's NodeFeatureRule: no
                    spec["nfd"] = {"rules": False}             # per-pool labels, so DRA alone on the GPU nodes
                    spec["devicePlugin"] = {"enabled": False}
        return mutate

    for mode in ("stack", "operator"):
        found = [i for i in issues(on(mode)) if i.rule == "dra-gpu-client-contract"]
        assert [(i.path, i.severity) for i in found] == [("spec.release", "warning")] * 2, [str(i) for i in found]
        assert found[0].message == (
            f"MIG manager {mig_manager} (stack release {release}) does not stop the DRA kubelet plugin for a MIG "
            f"change: only MIG managers from v0.15.0 pause {CLIENT}, the label the plugin's nodeSelector carries, so "
            "the plugin keeps its GPU handles and the GPU reset of a MIG mode change can fail; use a stack release "
            "whose MIG manager is v0.15.0 or later (spec.release)")
        assert found[1].message == (
            f"driver manager {driver_manager} (stack release {release}) does not stop the DRA kubelet plugin for a "
            f"driver reload: only driver managers from v0.12.0 pause {CLIENT}, so the plugin keeps its GPU handles "
            "while the driver is unloaded and the reload can fail; use a stack release whose driver manager is "
            "v0.12.0 or later (spec.release)")
    # the host's driver is not reloaded by a driver manager; the MIG manager pinned to v0.15.0 pauses the label
    quiet = issues(lambda s: s.update(release=release, driver={"enabled": False}, migManager={"version": "v0.15.0"}))
    assert not [str(i) for i in quiet if i.rule == "dra-gpu-client-contract"]
    assert not [i for i in issues(lambda s: s.update(release="26.7")) if i.rule == "dra-gpu-client-contract"]
