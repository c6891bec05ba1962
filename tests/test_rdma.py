"""RDMA, GDS and GDRCopy: the nvidia-peermem, nvidia-fs and nvidia-gdrcopy sidecars
of the Operator's driver asset (../shared/refs/gpu-operator/assets/state-driver/0500_daemonset.yaml) join
the driver pods only when asked, with the Operator's run-time refusals as compile-time errors."""

from __future__ import annotations

import copy

import pytest
import yaml

from conftest import ASSETS
from test_distributions import compile_objects, daemonsets, issues, write

BASE = """\
    platform: {type: kubernetes, version: "1.33"}
    os: ubuntu24.04
    driver: {version: "580", kernelModuleType: open%s}
    nodePools: [{name: a, gpu: H100-SXM5-80GB}]
    """


def driver_pod(tmp_path, extra: str) -> dict:
    ds = daemonsets(compile_objects(write(tmp_path, BASE % extra)))
    return ds["nvidia-driver-daemonset"]["spec"]["template"]["spec"]


def asset_container(name: str) -> dict:
    docs = yaml.safe_load_all((ASSETS / "state-driver" / "0500_daemonset.yaml").read_text())
    ds = next(d for d in docs if d and d.get("kind") == "DaemonSet")
    return next(c for c in ds["spec"]["template"]["spec"]["containers"] if c["name"] == name)


def comparable(c: dict) -> dict:
    """A container without what the Operator fills in at run time (image, pull policy, env)."""
    c = copy.deepcopy(c)
    for key in ("image", "imagePullPolicy", "env"):
        c.pop(key, None)
    return c


def by_name(items: list[dict]) -> dict[str, dict]:
    return {i["name"]: i for i in items}


def test_no_sidecars_unless_asked(tmp_path):
    assert [c["name"] for c in driver_pod(tmp_path, "")["containers"]] == ["nvidia-driver-ctr"]


def test_rdma_adds_peermem_as_the_asset_with_the_driver_image(tmp_path):
    pod = driver_pod(tmp_path, ", rdma: {enabled: true}")
    ctrs = by_name(pod["containers"])
    assert comparable(ctrs["nvidia-peermem-ctr"]) == comparable(asset_container("nvidia-peermem-ctr"))
    assert ctrs["nvidia-peermem-ctr"]["image"] == ctrs["nvidia-driver-ctr"]["image"]
    assert "env" not in ctrs["nvidia-peermem-ctr"]
    driver_env = {e["name"]: e.get("value") for e in ctrs["nvidia-driver-ctr"]["env"]}
    assert driver_env["GPU_DIRECT_RDMA_ENABLED"] == "true" and "USE_HOST_MOFED" not in driver_env
    manager_env = {e["name"]: e.get("value") for e in pod["initContainers"][0]["env"]}
    assert manager_env["GPU_DIRECT_RDMA_ENABLED"] == "true"


def test_host_mofed_is_told_to_peermem_driver_and_manager(tmp_path):
    pod = driver_pod(tmp_path, ", rdma: {enabled: true, useHostMofed: true}")
    ctrs = by_name(pod["containers"])
    assert ctrs["nvidia-peermem-ctr"]["env"] == [{"name": "USE_HOST_MOFED", "value": "true"}]
    assert {"name": "USE_HOST_MOFED", "value": "true"} in ctrs["nvidia-driver-ctr"]["env"]
    assert {"name": "USE_HOST_MOFED", "value": "true"} in pod["initContainers"][0]["env"]


def test_gds_and_gdrcopy_add_their_sidecars_with_release_images(tmp_path):
    ctrs = by_name(driver_pod(tmp_path, ", gds: true, gdrcopy: true")["containers"])
    for name in ("nvidia-fs-ctr", "nvidia-gdrcopy-ctr"):
        assert comparable(ctrs[name]) == comparable(asset_container(name)), name
    assert ctrs["nvidia-fs-ctr"]["image"].endswith("/cloud-native/nvidia-fs:2.29.4-ubuntu24.04")
    assert ctrs["nvidia-gdrcopy-ctr"]["image"].endswith("/cloud-native/gdrdrv:v2.6-ubuntu24.04")


def test_sidecars_follow_each_os_of_a_mixed_cluster(tmp_path):
    f = write(tmp_path, """\
        platform: {type: kubernetes, version: "1.33"}
        os: ubuntu24.04
        driver: {version: "580", kernelModuleType: open, gdrcopy: true}
        nodePools:
          - {name: a, gpu: H100-SXM5-80GB}
          - {name: b, gpu: L40S, os: rhel9.6}
        """)
    images = sorted(c["image"].rpartition(":")[2] for d in daemonsets(compile_objects(f)).values()
                    for c in d["spec"]["template"]["spec"]["containers"] if c["name"] == "nvidia-gdrcopy-ctr")
    assert images == ["v2.6-rhel9", "v2.6-ubuntu24.04"]


def test_refuses_gds_and_gdrcopy_with_precompiled_drivers(tmp_path):
    f = write(tmp_path, """\
        platform: {type: kubernetes, version: "1.33"}
        os: ubuntu24.04
        driver: {version: "580", kernelModuleType: open, precompiled: true, kernels: [6.8.0-60-generic],
                 gds: true, gdrcopy: true}
        nodePools: [{name: a, gpu: H100-SXM5-80GB}]
        """)
    assert issues(f) == [
        ("spec.driver.gds", 8, "GPUDirect Storage driver (nvidia-fs) is not supported along with precompiled NVIDIA "
         "drivers (it builds its module against the driver's sources)"),
        ("spec.driver.gdrcopy", 8, "GDRCopy is not supported along with precompiled NVIDIA drivers (it builds its "
         "module against the driver's sources)"),
    ]


def test_refuses_gds_without_open_kernel_modules(tmp_path):
    f = write(tmp_path, """\
        platform: {type: kubernetes, version: "1.33"}
        os: ubuntu24.04
        driver: {version: "580", gds: true}
        nodePools: [{name: a, gpu: H100-SXM5-80GB}]
        """)
    assert issues(f) == [("spec.driver.gds", 7, "GPUDirect Storage 2.29.4 needs the open kernel modules (from "
                          "2.17.5 on): set spec.driver.kernelModuleType: open")]


def test_refuses_rdma_without_a_driver_daemonset(tmp_path):
    f = write(tmp_path, """\
        platform: {type: kubernetes, version: "1.33"}
        driver: {enabled: false, rdma: {enabled: true}}
        nodePools: [{name: a, gpu: H100-SXM5-80GB}]
        """)
    assert issues(f) == [("spec.driver.rdma", 6, "rdma runs beside the driver gpuop installs, and no pool gets one "
                          "(driver.enabled is false everywhere)")]


@pytest.mark.parametrize("extra", [", gds: true", ", gdrcopy: true"])
def test_pinned_sidecars_need_their_digests(tmp_path, extra):
    from gpuop import catalog
    from gpuop.plan.build import build_plan
    from gpuop.profile.load import load_profile
    from gpuop.validate.runner import validate
    plan = build_plan(validate(load_profile(write(tmp_path, BASE % extra)), catalog.load()), catalog.load())
    side = "cloud-native/nvidia-fs:2.29.4-ubuntu24.04" if "gds" in extra else "cloud-native/gdrdrv:v2.6-ubuntu24.04"
    assert side in plan.image_keys()


def test_every_driver_and_site_knob_renders_objects_valid_for_kubernetes(tmp_path):
    """The driver sidecars (RDMA, GDS, GDRCopy), repository and certificate configs, the proxy, env / args
    pass-through, pod labels and host paths all at once, filled with the chart's defaults, through
    kubernetes-validate's strict schemas of the cluster's Kubernetes version."""
    from gpuop import catalog
    from gpuop.kube.slots import fill
    from gpuop.plan.build import build_plan
    from gpuop.profile.load import load_profile
    from gpuop.stack.registry import component_props
    from gpuop.validate.runner import validate
    from gpuop.verify.kubeschema import KubeValidator

    f = write(tmp_path, """\
        platform: {type: kubernetes, version: "1.33", distribution: rke2, containerdMajor: 2}
        os: ubuntu24.04
        proxy: {httpsProxy: "http://proxy.corp:3128", noProxy: [.corp]}
        driver:
          version: "580"
          kernelModuleType: open
          rdma: {enabled: true, useHostMofed: true}
          gds: true
          gdrcopy: true
          repoConfig: {configMapName: repos, files: [a.list]}
          certConfig: {configMapName: ca, files: [ca.crt]}
          env: [{name: X, value: "1"}]
          args: [init]
        toolkit: {env: [{name: Y, value: "2"}]}
        devicePlugin: {args: ["/bin/entrypoint.sh"]}
        daemonsets: {labels: {team: ml}, annotations: {example.com/a: b}}
        hostPaths: {rootFS: /host, driverInstallDir: /opt/nvidia, kubeletRootDir: /var/lib/k}
        nodePools: [{name: a, gpu: H100-SXM5-80GB}]
        """)
    cat = catalog.load()
    plan = build_plan(validate(load_profile(f), cat), cat)
    v = KubeValidator(plan.kube_version)
    checked = 0
    for comp, props in component_props(plan):
        for o in comp.render(props):
            o = fill(o, plan.values)
            if v.has_schema(o["apiVersion"], o["kind"]):
                assert v.errors(o) == [], (o["kind"], o["metadata"]["name"], v.errors(o))
                checked += 1
    assert checked > 10
