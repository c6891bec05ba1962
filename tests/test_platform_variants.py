"""Vanilla platform variants: OS families and their
driver tags, mixed OS across pools, container runtimes, preinstalled and precompiled drivers, per-pool
driver versions, and the proof that no node can match two driver DaemonSets.

The variant profiles are written to a temporary folder and compiled once with `gpuop synth` (the real
CLI); their outputs then pass the same checks as the bundled clusters: Helm 4 lint and render equality,
`kubectl kustomize` equality, kubernetes-validate's strict schemas. Upstream facts: TransformToolkit and
transformForRuntime (runtime env and host paths), transformPrecompiledDriverDaemonset and
golden/driver-precompiled.yaml, internal/state/nodepool.go (per-OS node pools), the validator's
host-driver check (cmd/nvidia-validator: `chroot /host nvidia-smi` first, then the driver container).
"""

from __future__ import annotations

import shutil
import subprocess
import textwrap
from itertools import combinations
from pathlib import Path

import helm_python as helm
import pytest
import yaml

from gpuop import catalog
from gpuop.verify.kubeschema import KubeValidator
from gpuop.errors import UserError
from gpuop.profile.load import load_profile
from gpuop.validate.runner import validate
from gpuop.kube.yamlio import load_all

from conftest import REFS, by_key, load_dir, run_gpuop
from test_helm import render

NS = "gpu-operator"
OSID = "feature.node.kubernetes.io/system-os_release.ID"
OSVER = "feature.node.kubernetes.io/system-os_release.VERSION_ID"
OSMAJOR = "feature.node.kubernetes.io/system-os_release.VERSION_ID.major"
KERNEL = "feature.node.kubernetes.io/kernel-version.full"
TYPE = "node.kubernetes.io/instance-type"
HEAD = "apiVersion: gpuop/v1alpha1\nkind: ClusterProfile\nmetadata: {name: %s}\nspec:\n"

PROFILES = {
    "mixed-os": """\
        platform: {type: kubernetes, version: "1.33"}
        os: ubuntu24.04
        driver: {version: "580"}
        nodePools:
          - {name: a, gpu: H100-SXM5-80GB, nodeSelector: {%(t)s: p5}}
          - {name: b, gpu: L40S, os: ubuntu22.04, nodeSelector: {%(t)s: g6e}}
          - {name: c, gpu: A100-SXM4-80GB, os: rhel9.6, nodeSelector: {%(t)s: p4de}}
          - {name: d, gpu: A100-SXM4-80GB, os: rhel9.4, nodeSelector: {%(t)s: p4d}}
          - {name: e, gpu: L40S, os: rocky9.7, nodeSelector: {%(t)s: g6}}
        """,
    "per-pool-driver": """\
        platform: {type: kubernetes, version: "1.33"}
        os: ubuntu24.04
        driver: {version: "580"}
        nodePools:
          - {name: a, gpu: H100-SXM5-80GB, nodeSelector: {%(t)s: p5}}
          - {name: b, gpu: H100-SXM5-80GB, nodeSelector: {%(t)s: p5e}, driver: {version: "595"}}
          - {name: c, gpu: L40S, nodeSelector: {%(t)s: g6e}, driver: {enabled: false}}
          - {name: d, gpu: A100-SXM4-80GB, os: rhel9.6, nodeSelector: {%(t)s: p4de}}
          - {name: e, gpu: A100-SXM4-80GB, nodeSelector: {%(t)s: p4d, pool: e}}
        """,
    "preinstalled": """\
        platform: {type: kubernetes, version: "1.34"}
        os: ubuntu24.04
        driver: {enabled: false}
        nodePools: [{name: a, gpu: H100-SXM5-80GB}]
        """,
    "preinstalled-but-one-pool": """\
        platform: {type: kubernetes, version: "1.34"}
        os: ubuntu24.04
        driver: {enabled: false}
        nodePools:
          - {name: a, gpu: H100-SXM5-80GB, nodeSelector: {%(t)s: p5}}
          - {name: b, gpu: L40S, nodeSelector: {%(t)s: g6e}, driver: {enabled: true, version: "580"}}
        """,
    "precompiled": """\
        platform: {type: kubernetes, version: "1.33"}
        os: ubuntu22.04
        driver: {precompiled: true, version: "580", kernels: [5.15.0-105-generic, 6.8.0-45-generic]}
        nodePools: [{name: a, gpu: H100-SXM5-80GB}]
        """,
    "crio": """\
        platform: {type: kubernetes, version: "1.33"}
        os: rhel9.6
        containerRuntime: crio
        nodePools: [{name: a, gpu: H100-SXM5-80GB}]
        """,
    "docker": """\
        platform: {type: kubernetes, version: "1.33"}
        os: rocky8.10
        containerRuntime: docker
        driver: {version: "580"}
        nodePools: [{name: a, gpu: A100-SXM4-80GB}]
        """,
    "rhel8": """\
        platform: {type: kubernetes, version: "1.33"}
        os: rhel8.10
        driver: {version: "580"}
        nodePools: [{name: a, gpu: A100-SXM4-80GB}]
        """,
}


def write_profile(folder: Path, name: str, spec: str) -> Path:
    f = folder / f"{name}.yaml"
    f.write_text(HEAD % name + textwrap.indent(textwrap.dedent(spec % {"t": TYPE}), "  "))
    return f


@pytest.fixture(scope="module")
def variants(tmp_path_factory) -> Path:
    """All variant profiles compiled in one `gpuop synth` run; returns the output folder."""
    work = tmp_path_factory.mktemp("variants")
    (work / "profiles").mkdir()
    shutil.copy(Path(__file__).resolve().parents[1] / "gpuop.yaml", work / "gpuop.yaml")
    for name, spec in PROFILES.items():
        write_profile(work / "profiles", name, spec)
    run_gpuop("synth", "profiles", "-o", "dist", cwd=work, check=True)
    return work / "dist"


@pytest.fixture(scope="module")
def vindex(variants) -> dict:
    return {e["name"]: e for e in yaml.safe_load((variants / "index.json").read_text())["clusters"]}


def objects(variants, vindex, name) -> dict:
    return by_key(load_dir(variants / vindex[name]["manifests"]))


def drivers(objs: dict) -> dict:
    return {k[2]: o for k, o in objs.items() if k[0] == "DaemonSet" and k[2].startswith("nvidia-driver-daemonset")}


def pod(ds: dict) -> dict:
    return ds["spec"]["template"]["spec"]


def image_of(ds: dict) -> str:
    return next(c["image"] for c in pod(ds)["containers"] if c["name"] == "nvidia-driver-ctr")


def envs(c: dict) -> dict:
    return {e["name"]: e.get("value") for e in c.get("env", [])}


# ---- no node can match two driver DaemonSets ----------------------------------------------------------

def requirements(ds: dict) -> list[dict[str, set | None]]:
    """The node label values a DaemonSet's pods require, one dict per ORed affinity term: label key ->
    the allowed values (equality: nodeSelector and `In`; other operators only narrow further, so
    ignoring them can only make two DaemonSets look less exclusive than they are)."""
    p = pod(ds)
    base = {k: {v} for k, v in p["nodeSelector"].items()}
    terms = p.get("affinity", {}).get("nodeAffinity", {}).get("requiredDuringSchedulingIgnoredDuringExecution", {}) \
        .get("nodeSelectorTerms", [{"matchExpressions": []}])
    out = []
    for term in terms:
        req = {k: set(v) for k, v in base.items()}
        for e in term.get("matchExpressions", []):
            if e["operator"] == "In":
                req[e["key"]] = req.get(e["key"], set(e["values"])) & set(e["values"])
        out.append(req)
    return out


def matches(ds: dict, labels: dict) -> bool:
    """Whether a node with these labels satisfies one of the DaemonSet's terms (equality requirements)."""
    return any(all(labels.get(k) in v for k, v in r.items()) for r in requirements(ds))


def exclusive(a: dict, b: dict) -> bool:
    """True when no node can satisfy both DaemonSets: every pair of their terms needs, for some label
    key, values that do not intersect (a node has one value per key)."""
    return all(any(k in rb and not (ra[k] & rb[k]) for k in ra)
               for ra in requirements(a) for rb in requirements(b))


def test_the_exclusivity_check_is_not_vacuous():
    def ds(selector, terms=()):
        return {"spec": {"template": {"spec": {"nodeSelector": selector, "affinity": {"nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                {"matchExpressions": [{"key": k, "operator": "In", "values": [v]} for k, v in t]} for t in terms]
                or [{"matchExpressions": []}]}}}}}}}
    assert not exclusive(ds({"d": "true"}), ds({"d": "true"}))
    assert exclusive(ds({OSID: "ubuntu"}), ds({OSID: "rhel"}))
    assert not exclusive(ds({}, [((TYPE, "p5"),)]), ds({}, [(("zone", "a"),)]))     # a p5 node in zone a
    assert exclusive(ds({}, [((TYPE, "p5"),)]), ds({}, [((TYPE, "p4d"),), ((TYPE, "g6"),)]))


@pytest.mark.parametrize("name", sorted(PROFILES))
def test_no_node_can_match_two_driver_daemonsets(variants, vindex, name):
    ds = drivers(objects(variants, vindex, name))
    for (na, a), (nb, b) in combinations(sorted(ds.items()), 2):
        assert exclusive(a, b), (name, na, nb)


def test_the_bundled_clusters_driver_daemonsets_are_exclusive_too(dist, index):
    for e in index["clusters"]:
        ds = drivers(by_key(load_dir(dist / e["manifests"])))
        for (na, a), (nb, b) in combinations(sorted(ds.items()), 2):
            assert exclusive(a, b), (e["name"], na, nb)


# ---- OS families, mixed OS -----------------------------------------------------------------------------

def test_mixed_os_gets_one_driver_daemonset_per_os_image(variants, vindex):
    ds = drivers(objects(variants, vindex, "mixed-os"))
    assert {n: image_of(d).rsplit(":", 1)[1] for n, d in ds.items()} == {
        "nvidia-driver-daemonset-ubuntu24.04": "580.173.02-ubuntu24.04",
        "nvidia-driver-daemonset-ubuntu22.04": "580.173.02-ubuntu22.04",
        "nvidia-driver-daemonset-rhel9": "580.173.02-rhel9",          # rhel9.6 and rhel9.4 share the rhel9 image
        "nvidia-driver-daemonset-rocky9": "580.173.02-rocky9",
    }
    sel = {n: pod(d)["nodeSelector"] for n, d in ds.items()}
    assert sel["nvidia-driver-daemonset-ubuntu22.04"] == {"nvidia.com/gpu.deploy.driver": "true", OSID: "ubuntu", OSVER: "22.04"}
    assert sel["nvidia-driver-daemonset-rhel9"] == {"nvidia.com/gpu.deploy.driver": "true", OSID: "rhel", OSMAJOR: "9"}
    assert sel["nvidia-driver-daemonset-rocky9"] == {"nvidia.com/gpu.deploy.driver": "true", OSID: "rocky", OSMAJOR: "9"}
    for n, d in ds.items():     # one driver per OS: no pool terms, every node of that OS is covered
        assert d["spec"]["selector"]["matchLabels"] == {"app": n} and d["metadata"]["labels"]["app"] == n
        assert len(requirements(d)) == 1


@pytest.mark.parametrize("name, tag", [("rhel8", "580.173.02-rhel8"), ("crio", "595.91.07-rhel9"),
                                       ("docker", "580.173.02-rocky8")])
def test_single_os_clusters_keep_one_driver_daemonset_with_the_os_tag(variants, vindex, name, tag):
    ds = drivers(objects(variants, vindex, name))
    assert list(ds) == ["nvidia-driver-daemonset"]
    d = ds["nvidia-driver-daemonset"]
    assert image_of(d) == f"nvcr.io/nvidia/driver:{tag}"
    assert pod(d)["nodeSelector"] == {"nvidia.com/gpu.deploy.driver": "true"}
    assert d["spec"]["selector"]["matchLabels"] == {"app": "nvidia-driver-daemonset"}


# ---- per-pool drivers ----------------------------------------------------------------------------------

def test_per_pool_drivers_get_one_daemonset_per_version_and_os(variants, vindex):
    ds = drivers(objects(variants, vindex, "per-pool-driver"))
    assert {n: image_of(d).rsplit(":", 1)[1] for n, d in ds.items()} == {
        "nvidia-driver-daemonset-580.173.02-ubuntu24.04": "580.173.02-ubuntu24.04",
        "nvidia-driver-daemonset-595.91.07-ubuntu24.04": "595.91.07-ubuntu24.04",
        "nvidia-driver-daemonset-580.173.02-rhel9": "580.173.02-rhel9",
    }
    terms = {n: [{k: v for k, v in r.items() if k == TYPE or k == "pool"} for r in requirements(d)] for n, d in ds.items()}
    assert terms["nvidia-driver-daemonset-580.173.02-ubuntu24.04"] == [{TYPE: {"p4d"}, "pool": {"e"}}, {TYPE: {"p5"}}]
    assert terms["nvidia-driver-daemonset-595.91.07-ubuntu24.04"] == [{TYPE: {"p5e"}}]
    assert terms["nvidia-driver-daemonset-580.173.02-rhel9"] == [{}]         # the only driver on rhel9: no pool terms
    node = {"nvidia.com/gpu.deploy.driver": "true", OSID: "ubuntu", OSVER: "24.04"}
    assert [n for n, d in ds.items() if matches(d, {**node, TYPE: "p5"})] == ["nvidia-driver-daemonset-580.173.02-ubuntu24.04"]
    assert [n for n, d in ds.items() if matches(d, {**node, TYPE: "p5e"})] == ["nvidia-driver-daemonset-595.91.07-ubuntu24.04"]
    assert [n for n, d in ds.items() if matches(d, {**node, TYPE: "g6e"})] == []   # pool c: preinstalled driver
    assert [n for n, d in ds.items() if matches(d, {**node, OSID: "rhel", OSMAJOR: "9", OSVER: "9.6", TYPE: "p4de"})] \
        == ["nvidia-driver-daemonset-580.173.02-rhel9"]
    for d in ds.values():       # every term keeps the opt-outs
        for term in pod(d)["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]:
            keys = [e["key"] for e in term["matchExpressions"]]
            assert keys[:2] == ["nvidia.com/gpu.deploy.operands", "gpuop/deploy.driver"]


# ---- container runtimes --------------------------------------------------------------------------------

@pytest.mark.parametrize("name, expected, volumes", [
    ("crio", {"RUNTIME": "crio", "CRIO_CONFIG": "/runtime/config-dir/config.toml", "CRIO_CONFIG_MODE": "config",
              "RUNTIME_DROP_IN_CONFIG": "/runtime/config-dir.d/99-nvidia.conf",
              "RUNTIME_DROP_IN_CONFIG_HOST_PATH": "/etc/crio/crio.conf.d/99-nvidia.conf"},
     {"crio-config": "/etc/crio", "crio-drop-in-config": "/etc/crio/crio.conf.d",
      "crio-hooks": "/usr/share/containers/oci/hooks.d"}),          # TransformToolkit: CRI-O off OpenShift
    ("docker", {"RUNTIME": "docker", "DOCKER_CONFIG": "/runtime/config-dir/daemon.json",
                "RUNTIME_CONFIG": "/runtime/config-dir/daemon.json", "DOCKER_SOCKET": "/runtime/sock-dir/docker.sock",
                "RUNTIME_SOCKET": "/runtime/sock-dir/docker.sock"},
     {"docker-config": "/etc/docker", "docker-socket": "/var/run", "crio-hooks": "/run/containers/oci/hooks.d"}),
    ("rhel8", {"RUNTIME": "containerd", "CONTAINERD_RUNTIME_CLASS": "nvidia",
               "CONTAINERD_CONFIG": "/runtime/config-dir/config.toml", "CONTAINERD_SOCKET": "/runtime/sock-dir/containerd.sock",
               "RUNTIME_DROP_IN_CONFIG_HOST_PATH": "/etc/containerd/conf.d/99-nvidia.toml"},
     {"containerd-config": "/etc/containerd", "containerd-drop-in-config": "/etc/containerd/conf.d",
      "containerd-socket": "/run/containerd", "crio-hooks": "/run/containers/oci/hooks.d"}),
])
def test_toolkit_env_and_host_paths_per_runtime(variants, vindex, name, expected, volumes):
    p = pod(objects(variants, vindex, name)[("DaemonSet", NS, "nvidia-container-toolkit-daemonset")])
    e = envs(p["containers"][0])
    assert {k: e.get(k) for k in expected} == expected
    other = {"crio": ("CONTAINERD_", "DOCKER_", "RUNTIME_SOCKET"), "docker": ("CONTAINERD_", "CRIO_CONFIG=", "RUNTIME_DROP_IN"),
             "rhel8": ("DOCKER_", "CRIO_CONFIG=")}[name]
    assert not [k for k in e if any(f"{k}=".startswith(o) or k.startswith(o) for o in other)]
    vols = {v["name"]: v.get("hostPath", {}).get("path") for v in p["volumes"]}
    assert {k: vols.get(k) for k in volumes} == volumes


# ---- preinstalled and precompiled drivers --------------------------------------------------------------

def test_preinstalled_driver_drops_the_driver_and_the_stack_uses_the_host_driver(variants, vindex):
    objs = objects(variants, vindex, "preinstalled")
    assert not [k for k in objs if "nvidia-driver" in k[2]]
    rule = objs[("NodeFeatureRule", "", "nvidia-gpu-node-labels")]
    assert "nvidia.com/gpu.deploy.driver" not in rule["spec"]["rules"][1]["labels"]
    # The validator's driver check tries the host first (`chroot /host nvidia-smi`) and writes
    # NVIDIA_DRIVER_ROOT=/ and DRIVER_ROOT_CTR_PATH=/host into driver-ready, which the toolkit sources:
    # both need the host root at /host.
    for name in ("nvidia-operator-validator", "nvidia-container-toolkit-daemonset"):
        p = pod(objs[("DaemonSet", NS, name)])
        check = next(c for c in p["initContainers"] if c["name"] == "driver-validation")
        assert {"name": "host-root", "mountPath": "/host", "mountPropagation": "HostToContainer", "readOnly": True} \
            in check["volumeMounts"]
        assert {"name": "host-root", "hostPath": {"path": "/"}} in p["volumes"]
    toolkit = pod(objs[("DaemonSet", NS, "nvidia-container-toolkit-daemonset")])["containers"][0]
    assert {"name": "host-root", "mountPath": "/host", "mountPropagation": "HostToContainer", "readOnly": True} \
        in toolkit["volumeMounts"]


def test_a_pool_can_take_a_driver_where_the_cluster_has_preinstalled_ones(variants, vindex):
    ds = drivers(objects(variants, vindex, "preinstalled-but-one-pool"))
    assert list(ds) == ["nvidia-driver-daemonset"]
    d = ds["nvidia-driver-daemonset"]
    assert image_of(d) == "nvcr.io/nvidia/driver:580.173.02-ubuntu24.04"
    node = {"nvidia.com/gpu.deploy.driver": "true"}
    assert matches(d, {**node, TYPE: "g6e"}) and not matches(d, {**node, TYPE: "p5"})
    assert yaml.safe_load((variants / vindex["preinstalled-but-one-pool"]["chart"] / "values.yaml").read_text())[
        "driver"] == {"enabled": True, "resources": {}}


def test_precompiled_drivers_one_daemonset_per_kernel_as_the_golden(variants, vindex):
    ds = drivers(objects(variants, vindex, "precompiled"))
    golden = next(o for o in load_all((REFS / "gpu-operator" / "golden" / "driver-precompiled.yaml").read_text())
                  if o["kind"] == "DaemonSet")
    assert sorted(ds) == ["nvidia-driver-daemonset-5.15.0-105-generic-ubuntu22.04",
                          "nvidia-driver-daemonset-6.8.0-45-generic-ubuntu22.04"]
    for kernel in ("5.15.0-105-generic", "6.8.0-45-generic"):
        d = ds[f"nvidia-driver-daemonset-{kernel}-ubuntu22.04"]
        assert image_of(d) == f"nvcr.io/nvidia/driver:580-{kernel}-ubuntu22.04"     # <branch>-<kernel>-<os>
        assert pod(d)["nodeSelector"] == {"nvidia.com/gpu.deploy.driver": "true", KERNEL: kernel}
        for where in (d["metadata"]["labels"], d["spec"]["template"]["metadata"]["labels"]):
            assert where["nvidia.com/precompiled"] == golden["metadata"]["labels"]["nvidia.com/precompiled"] == "true"
            assert where["nvidia.com/precompiled.kernel-version"] == kernel
        g = golden["spec"]["template"]["spec"]
        assert KERNEL in g["nodeSelector"] and g["containers"][0]["image"].endswith(
            f"{g['nodeSelector'][KERNEL]}-ubuntu22.04")
        assert pod(d)["containers"][0]["command"] == g["containers"][0]["command"]


# ---- the variant clusters pass the checks every bundled cluster passes ---------------------------------

def test_variant_outputs_pass_helm_kustomize_and_kube_schemas(variants, vindex):
    for name, e in sorted(vindex.items()):
        manifests = by_key(load_dir(variants / e["manifests"]))
        result = helm.lint(str(variants / e["chart"]), strict=True, kube_version=f"v{e['kubeVersion']}.0")
        assert not [m for m in result.get("messages", []) if m.get("severity", 0) >= 2], name
        rendered = [o for o in render(variants / e["chart"], {"createNamespace": True}, entry=e)
                    if not ("helm.sh/hook" in (o["metadata"].get("annotations") or {}) and o["kind"] == "Pod")]
        # the smoke-test pod aside; the health gate's Jobs are hooks in the chart and the manifests alike
        assert by_key(rendered) == manifests, name
        v = KubeValidator(e["kubeVersion"])
        for o in manifests.values():
            if v.has_schema(o["apiVersion"], o["kind"]):
                assert v.errors(o) == [], (name, o["kind"], o["metadata"]["name"], v.errors(o))
        if shutil.which("kubectl"):
            out = subprocess.run(["kubectl", "kustomize", str(variants / e["overlay"])], capture_output=True,
                                 text=True, timeout=120)
            assert out.returncode == 0 and by_key(load_all(out.stdout)) == manifests, name


# ---- rules: each broken one has its exact, located message --------------------------------------------

def errors(tmp_path: Path, spec: str) -> list[tuple[str, str]]:
    f = write_profile(tmp_path, "c1", spec)
    try:
        validate(load_profile(f), catalog.load())
    except UserError as exc:
        return [(i.path, i.message) for i in exc.issues]
    return []


BASE = """\
platform: {type: kubernetes, version: "1.33"}
os: ubuntu22.04
"""


@pytest.mark.parametrize("spec, expected", [
    (BASE + "driver: {precompiled: true}\nnodePools: [{name: a, gpu: H100-SXM5-80GB}]\n",
     [("spec.driver.precompiled", "precompiled drivers run one DaemonSet per kernel: list the GPU nodes' kernels "
                                  "(`uname -r`) in spec.driver.kernels")]),
    (BASE + "driver: {precompiled: true, version: \"580.173.02\", kernels: [6.8.0-45-generic]}\n"
            "nodePools: [{name: a, gpu: H100-SXM5-80GB}]\n",
     [("spec.driver.version", "precompiled drivers are published per branch, not per version; allowed: a branch "
                              "such as \"580\"")]),
    (BASE.replace("ubuntu22.04", "rhel9.6") + "driver: {precompiled: true, kernels: [5.14.0-427.13.1.el9_4.x86_64]}\n"
                                              "nodePools: [{name: a, gpu: H100-SXM5-80GB}]\n",
     [("spec.os", "stack release 26.7 publishes no precompiled driver images for rhel9.6; allowed with "
                  "spec.driver.precompiled: ubuntu22.04, ubuntu24.04, ubuntu26.04")]),
    (BASE + "driver: {precompiled: true, version: \"610\", kernels: [6.8.0-45-generic]}\n"
            "nodePools: [{name: a, gpu: H100-SXM5-80GB}]\n",
     [("spec.os", "precompiled driver images for ubuntu22.04 exist for branches 580, 595, not 610 "
                  "(spec.nodePools[0] 'a')")]),
    (BASE + "driver: {kernels: [6.8.0-45-generic]}\nnodePools: [{name: a, gpu: H100-SXM5-80GB}]\n",
     [("spec.driver.kernels", "kernels are for precompiled drivers only; set spec.driver.precompiled: true or "
                              "remove the field")]),
    (BASE + "nodePools: [{name: a, gpu: H100-SXM5-80GB, os: ubuntu20.04}]\n",
     [("spec.nodePools[0].os", "'ubuntu20.04' is not an OS stack release 26.7 supports with Kubernetes 1.33; "
                               "allowed: ubuntu22.04, ubuntu24.04, ubuntu26.04, rhel8.8, rhel8.10, rhel9.2, rhel9.4, "
                               "rhel9.6, rhel9.7, rhel9.8, rhel10.0, rhel10.1, rhel10.2, rocky8.10, rocky9.7, "
                               "rocky10.1, sles15.6, sles15.7")]),
    (BASE + "nodePools: [{name: a, gpu: H100-SXM5-80GB, driver: {version: \"999\"}}]\n",
     [("spec.nodePools[0].driver.version", "'999' is not a known driver branch; allowed: 610, 595, 580, 535")]),
    (BASE + f"nodePools:\n  - {{name: a, gpu: H100-SXM5-80GB, nodeSelector: {{{TYPE}: p5}}}}\n"
            f"  - {{name: b, gpu: H100-SXM5-80GB, nodeSelector: {{zone: a}}, driver: {{version: \"580\"}}}}\n",
     [("spec.nodePools[1].nodeSelector", "pool 'b' (driver 580.173.02) and pool 'a' (driver 595.91.07) run "
                                         "different drivers on ubuntu22.04, but their nodeSelectors could match the "
                                         "same node, which would then get two driver DaemonSets; give both pools a "
                                         "label key with different values (e.g. node.kubernetes.io/instance-type)")]),
    (BASE + f"nodePools:\n  - {{name: a, gpu: H100-SXM5-80GB, nodeSelector: {{{TYPE}: p5}}}}\n"
            f"  - {{name: b, gpu: L40S, driver: {{enabled: false}}}}\n",
     [("spec.nodePools[1].nodeSelector", "pool 'b' (a preinstalled driver) and pool 'a' (driver 595.91.07) run "
                                         "different drivers on ubuntu22.04, but their nodeSelectors could match the "
                                         "same node, which would then get two driver DaemonSets; give both pools a "
                                         "label key with different values (e.g. node.kubernetes.io/instance-type)")]),
    (BASE + "nodePools: [{name: a, gpu: B200-180GB, driver: {version: \"535\"}}]\n",
     [("spec.nodePools[0].gpu", "B200-180GB (blackwell) is not supported by driver branch 535 "
                                "(spec.nodePools[0].driver.version, branch 535 -> 535.309.01); set "
                                "spec.nodePools[0].driver.version to a branch for blackwell: 610, 595, 580")]),
])
def test_variant_rules(tmp_path, spec, expected):
    assert errors(tmp_path, spec) == expected


def test_docker_is_handled_but_outside_the_matrix(tmp_path):
    f = write_profile(tmp_path, "c1", PROFILES["docker"])
    warnings = [(i.path, i.severity) for i in validate(load_profile(f), catalog.load()).warnings]
    assert warnings == [("spec.containerRuntime", "warning")]
