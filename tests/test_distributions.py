"""Distributions and managed node images: the container toolkit's env and host mounts follow
the distribution's documented containerd paths (catalog/data/distributions.yaml names NVIDIA's page for
each), `spec.os` is optional exactly where no driver DaemonSet needs it, and managed node images refuse a
second copy of what they install. Profiles are compiled in-process through the real stages (load,
validate, plan, derive, render)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from gpuop import catalog
from gpuop.errors import UserError
from gpuop.plan.build import build_plan
from gpuop.profile.load import load_profile
from gpuop.stack.registry import component_props
from gpuop.validate.runner import validate

REPO = Path(__file__).resolve().parents[1]
HEAD = "apiVersion: gpuop/v1alpha1\nkind: ClusterProfile\nmetadata: {name: c}\nspec:\n"


def write(tmp_path: Path, body: str) -> Path:
    f = tmp_path / "c.yaml"
    f.write_text(HEAD + textwrap.indent(textwrap.dedent(body), "  "))
    return f


def compile_objects(path: Path) -> list[dict]:
    cat = catalog.load()
    plan = build_plan(validate(load_profile(path), cat), cat)
    return [o for comp, props in component_props(plan) for o in comp.render(props)]


def issues(path: Path) -> list[tuple[str, int, str]]:
    with pytest.raises(UserError) as exc:
        validate(load_profile(path), catalog.load())
    return [(i.path, i.line, i.message) for i in exc.value.issues]


def toolkit(objs: list[dict]) -> tuple[dict, dict]:
    """(env name -> value, volume name -> host path) of the toolkit DaemonSet."""
    ds = next(o for o in objs if o["kind"] == "DaemonSet" and o["metadata"]["name"] == "nvidia-container-toolkit-daemonset")
    pod = ds["spec"]["template"]["spec"]
    env = {e["name"]: e.get("value") for e in pod["containers"][0]["env"]}
    vols = {v["name"]: v["hostPath"]["path"] for v in pod["volumes"] if "hostPath" in v}
    return env, vols


def distro(tmp_path, name: str, extra: str = "") -> Path:
    return write(tmp_path, f"""\
        platform: {{type: kubernetes, version: "1.33", distribution: {name}{extra}}}
        os: ubuntu24.04
        nodePools: [{{name: a, gpu: L40S}}]
        """)


@pytest.mark.parametrize("name, major, config_dir, config, socket_dir, source", [
    ("k3s", "", "/var/lib/rancher/k3s/agent/etc/containerd", "config.toml.tmpl", "/run/k3s/containerd",
     "file=/runtime/config-dir/config.toml"),
    ("rke2", "", "/var/lib/rancher/rke2/agent/etc/containerd", "config.toml.tmpl", "/run/k3s/containerd",
     "file=/runtime/config-dir/config.toml"),
    ("rke2", ", containerdMajor: 2", "/var/lib/rancher/rke2/agent/etc/containerd", "config-v3.toml.tmpl",
     "/run/k3s/containerd", "file=/runtime/config-dir/config.toml"),
    ("k3s", ", containerdMajor: 2", "/var/lib/rancher/k3s/agent/etc/containerd", "config-v3.toml.tmpl",
     "/run/k3s/containerd", "file=/runtime/config-dir/config.toml"),
    ("k0s", "", "/etc/k0s/containerd.d", "nvidia.toml", "/run/k0s", "file=/host/etc/k0s/containerd.toml"),
    ("microk8s", "", "/var/snap/microk8s/current/args", "containerd-template.toml",
     "/var/snap/microk8s/common/run", None),
])
def test_toolkit_env_and_mounts_follow_the_distribution(tmp_path, name, major, config_dir, config, socket_dir,
                                                        source):
    env, vols = toolkit(compile_objects(distro(tmp_path, name, major)))
    assert vols["containerd-config"] == config_dir
    assert env["CONTAINERD_CONFIG"] == env["RUNTIME_CONFIG"] == f"/runtime/config-dir/{config}"
    assert vols["containerd-socket"] == socket_dir
    sock = "containerd.sock"
    assert env["CONTAINERD_SOCKET"] == env["RUNTIME_SOCKET"] == f"/runtime/sock-dir/{sock}"
    assert env.get("RUNTIME_CONFIG_SOURCE") == source
    assert env["CONTAINERD_RUNTIME_CLASS"] == "nvidia"


def test_k0s_drop_in_lands_in_the_directory_k0s_merges(tmp_path):
    env, vols = toolkit(compile_objects(distro(tmp_path, "k0s")))
    assert vols["containerd-drop-in-config"] == "/etc/k0s/containerd.d"
    assert env["RUNTIME_DROP_IN_CONFIG_HOST_PATH"] == "/etc/k0s/containerd.d/99-nvidia.toml"


def test_generic_keeps_the_release_paths_and_containerd_2_changes_nothing(tmp_path):
    plain = toolkit(compile_objects(distro(tmp_path, "generic")))
    assert plain[1]["containerd-config"] == "/etc/containerd" and plain[1]["containerd-socket"] == "/run/containerd"
    assert "RUNTIME_CONFIG_SOURCE" not in plain[0]
    assert toolkit(compile_objects(distro(tmp_path, "generic", ", containerdMajor: 2"))) == plain


def test_refuses_a_distribution_with_another_runtime(tmp_path):
    f = write(tmp_path, """\
        platform: {type: kubernetes, version: "1.33", distribution: rke2}
        os: ubuntu24.04
        containerRuntime: crio
        nodePools: [{name: a, gpu: L40S}]
        """)
    assert issues(f) == [("spec.containerRuntime", 7, "rke2 runs its own containerd, not crio; allowed: containerd "
                          "(or omit the field)")]


def test_refuses_containerd_major_on_crio(tmp_path):
    f = write(tmp_path, """\
        platform: {type: kubernetes, version: "1.33", containerdMajor: 2}
        os: ubuntu24.04
        containerRuntime: crio
        nodePools: [{name: a, gpu: L40S}]
        """)
    assert issues(f) == [("spec.platform.containerdMajor", 5, "containerdMajor is for containerd nodes; this "
                          "cluster runs crio; remove the field")]


def test_os_is_optional_without_a_driver_daemonset(tmp_path):
    f = write(tmp_path, """\
        platform: {type: kubernetes, version: "1.33"}
        driver: {enabled: false}
        nodePools: [{name: a, gpu: L40S}]
        """)
    kinds = {(o["kind"], o["metadata"]["name"]) for o in compile_objects(f)}
    assert ("DaemonSet", "nvidia-container-toolkit-daemonset") in kinds
    assert not any(k == "DaemonSet" and n.startswith("nvidia-driver") for k, n in kinds)


def test_os_is_required_where_the_driver_runs(tmp_path):
    f = write(tmp_path, """\
        platform: {type: kubernetes, version: "1.33"}
        nodePools: [{name: a, gpu: L40S}]
        """)
    assert issues(f) == [("spec.os", 4, "spec.os is required: spec.driver.enabled is true, and the driver "
                          "DaemonSet's image tag names the node OS (<version>-<os tag>); set spec.os (e.g. "
                          "ubuntu24.04), or spec.driver.enabled: false where the nodes have a preinstalled driver")]


def test_os_is_required_for_a_pool_that_turns_its_driver_on(tmp_path):
    f = write(tmp_path, """\
        platform: {type: kubernetes, version: "1.33"}
        driver: {enabled: false}
        nodePools:
          - {name: a, gpu: L40S, nodeSelector: {x: a}}
          - {name: b, gpu: L40S, nodeSelector: {x: b}, driver: {enabled: true}}
        """)
    assert issues(f) == [("spec.os", 4, "spec.os is required: pool 'b' gets its driver from gpuop "
                          "(spec.nodePools[].driver.enabled), and the driver DaemonSet's image tag names the node "
                          "OS (<version>-<os tag>); set spec.os (e.g. ubuntu24.04), or spec.driver.enabled: false "
                          "where the nodes have a preinstalled driver")]


def test_a_pool_os_is_enough_for_its_driver(tmp_path):
    f = write(tmp_path, """\
        platform: {type: kubernetes, version: "1.33"}
        driver: {enabled: false}
        nodePools:
          - {name: a, gpu: L40S, nodeSelector: {x: a}}
          - {name: b, gpu: L40S, nodeSelector: {x: b}, os: ubuntu22.04, driver: {enabled: true, version: "580"}}
        """)
    drivers = [o for o in compile_objects(f) if o["kind"] == "DaemonSet" and o["metadata"]["name"].startswith("nvidia-driver")]
    assert len(drivers) == 1
    assert drivers[0]["spec"]["template"]["spec"]["nodeSelector"]["feature.node.kubernetes.io/system-os_release.VERSION_ID"] == "22.04"


def test_refuses_a_second_driver_and_toolkit_on_eks(tmp_path):
    f = write(tmp_path, """\
        platform: {type: kubernetes, version: "1.33", distribution: eks}
        driver: {enabled: true}
        nodePools: [{name: a, gpu: L40S}]
        """)
    eks = "eks's GPU node image (EKS-optimized accelerated AMIs (AL2023 NVIDIA, Bottlerocket NVIDIA)) already installs"
    assert issues(f) == [     # the omitted toolkit.enabled is shown on the distribution's line
        ("spec.toolkit.enabled", 5, f"{eks} the NVIDIA container toolkit; gpuop would install a second copy: set "
         "spec.toolkit.enabled: false"),
        ("spec.driver.enabled", 6, f"{eks} the NVIDIA driver; gpuop would install a second copy: set "
         "spec.driver.enabled: false"),
    ]


def test_refuses_a_pool_driver_on_gke(tmp_path):
    f = write(tmp_path, """\
        platform: {type: kubernetes, version: "1.33", distribution: gke}
        os: ubuntu24.04
        driver: {enabled: false}
        nodePools: [{name: a, gpu: L40S, driver: {enabled: true}}]
        """)
    assert issues(f) == [("spec.nodePools[0].driver.enabled", 8, "gke's GPU node image (GKE Container-Optimized OS "
                          "with Google's driver installer) already installs the NVIDIA driver; gpuop would install a "
                          "second copy on pool 'a': remove the field or set it to false")]


def test_gke_passes_the_driver_root_and_toolkit_dir_to_the_operands(tmp_path):
    f = write(tmp_path, """\
        platform: {type: kubernetes, version: "1.33", distribution: gke}
        driver: {enabled: false}
        nodePools: [{name: a, gpu: A100-SXM4-80GB, mig: {strategy: single, layout: {1g.10gb: 7}}}]
        """)
    objs = compile_objects(f)
    env, vols = toolkit(objs)
    assert vols["driver-install-dir"] == vols["toolkit-install-dir"] == "/home/kubernetes/bin/nvidia"
    ds = {o["metadata"]["name"]: o for o in objs if o["kind"] == "DaemonSet"}
    for name, d in ds.items():       # every operand that mounts the driver root gets Google's
        for v in d["spec"]["template"]["spec"].get("volumes", []):
            if v["name"] == "driver-install-dir":
                assert v["hostPath"]["path"] == "/home/kubernetes/bin/nvidia", name
    hook = "/home/kubernetes/bin/nvidia/toolkit/nvidia-cdi-hook"
    for name, ctr in (("nvidia-device-plugin-daemonset", "nvidia-device-plugin"),
                      ("nvidia-mig-manager", "nvidia-mig-manager")):
        c = next(c for c in ds[name]["spec"]["template"]["spec"]["containers"] if c["name"] == ctr)
        assert {"name": "NVIDIA_CDI_HOOK_PATH", "value": hook} in c["env"], name


def test_refuses_a_distribution_on_openshift(tmp_path):
    f = write(tmp_path, """\
        platform: {type: openshift, version: "4.19", distribution: k3s}
        os: rhcos4.19
        driver: {enabled: false}
        nodePools: [{name: a, gpu: L40S}]
        """)
    assert ("spec.platform.distribution", 5, "k3s is a Kubernetes distribution; OpenShift is spec.platform.type: "
            "openshift; remove the field") in issues(f)


@pytest.mark.parametrize("profile", ["k3s.yaml", "eks-al2023.yaml"])
def test_example_profiles_compile(profile):
    objs = compile_objects(REPO / "profiles" / profile)
    assert any(o["kind"] == "DaemonSet" and o["metadata"]["name"] == "nvidia-device-plugin-daemonset" for o in objs)


def test_eks_example_names_no_os():
    import yaml
    assert "os" not in yaml.safe_load((REPO / "profiles" / "eks-al2023.yaml").read_text())["spec"]


# ------------------------------------------------------------------------------------ pass-through knobs

def warnings_of(path: Path) -> list[tuple[str, str]]:
    return [(w.path, w.message) for w in validate(load_profile(path), catalog.load()).warnings]


def daemonsets(objs: list[dict]) -> dict[str, dict]:
    return {o["metadata"]["name"]: o for o in objs if o["kind"] == "DaemonSet"}


def main_container(ds: dict, name: str) -> dict:
    return next(c for c in ds["spec"]["template"]["spec"]["containers"] if c["name"] == name)


KNOBS = """\
    platform: {type: kubernetes, version: "1.33"}
    os: ubuntu24.04
    toolkit:
      env: [{name: CONTAINERD_RUNTIME_CLASS, value: nvidia-x}, {name: LOG_LEVEL, value: debug}]
    devicePlugin:
      args: ["--fail-on-init-error=false"]
      env: [{name: EXTRA, value: "1"}]
    driver:
      env: [{name: NVIDIA_DRIVER_EXTRA, value: "yes"}]
      args: ["init", "--debug"]
    daemonsets:
      labels: {team: ml, cost-center: gpu}
      annotations: {example.com/owner: ml-platform}
    hostPaths: {rootFS: /host-root, driverInstallDir: /opt/nvidia/driver, kubeletRootDir: /data/kubelet}
    nodePools: [{name: a, gpu: L40S}]
    """


def test_env_is_merged_by_name_over_gpuops(tmp_path):
    ds = daemonsets(compile_objects(write(tmp_path, KNOBS)))
    env = main_container(ds["nvidia-container-toolkit-daemonset"], "nvidia-container-toolkit-ctr")["env"]
    names = [e["name"] for e in env]
    assert names.count("CONTAINERD_RUNTIME_CLASS") == 1
    assert {"name": "CONTAINERD_RUNTIME_CLASS", "value": "nvidia-x"} in env
    assert env[-1] == {"name": "LOG_LEVEL", "value": "debug"}
    plugin = main_container(ds["nvidia-device-plugin-daemonset"], "nvidia-device-plugin")
    assert plugin["env"][-1] == {"name": "EXTRA", "value": "1"}
    assert plugin["args"] == ["--fail-on-init-error=false"] and plugin["command"] == ["/bin/sh", "-c"]
    driver = main_container(ds["nvidia-driver-daemonset"], "nvidia-driver-ctr")
    assert {"name": "NVIDIA_DRIVER_EXTRA", "value": "yes"} in driver["env"]
    assert driver["args"] == ["init", "--debug"]
    assert driver["env"][-1]["name"] == "DRIVER_CONFIG_DIGEST"     # still last, over the merged env


def test_overriding_a_name_gpuop_sets_warns(tmp_path):
    assert warnings_of(write(tmp_path, KNOBS)) == [
        ("spec.toolkit.env[0].name", "CONTAINERD_RUNTIME_CLASS is set by gpuop on the toolkit container; your value "
         "replaces gpuop's (make sure the component still works with it)")]


def test_refuses_the_driver_config_digest_and_duplicate_env(tmp_path):
    f = write(tmp_path, """\
        platform: {type: kubernetes, version: "1.33"}
        os: ubuntu24.04
        driver:
          env: [{name: DRIVER_CONFIG_DIGEST, value: x}]
        toolkit:
          env: [{name: A, value: "1"}, {name: A, value: "2"}]
        nodePools: [{name: a, gpu: L40S}]
        """)
    assert issues(f) == [
        ("spec.driver.env[0].name", 8, "DRIVER_CONFIG_DIGEST is computed by gpuop from the driver's install config "
         "(it decides whether a node rebuilds its modules); remove it"),
        ("spec.toolkit.env[1].name", 10, "A is also spec.toolkit.env[0]; each name once"),
    ]


def test_refuses_a_bad_env_name(tmp_path):
    f = write(tmp_path, """\
        platform: {type: kubernetes, version: "1.33"}
        os: ubuntu24.04
        toolkit: {env: [{name: "1BAD=", value: x}]}
        nodePools: [{name: a, gpu: L40S}]
        """)
    (path, line, message), = issues(f)
    assert (path, line) == ("spec.toolkit.env[0].name", 7)
    # Kubernetes' own words (apimachinery IsRelaxedEnvVarName, 1.33 and later), not the schema's pattern
    assert message == ("'1BAD=': a valid environment variable name must consist only of printable ASCII "
                       "characters other than '='")


def test_daemonset_labels_and_annotations_reach_every_gpu_pod(tmp_path):
    for name, ds in daemonsets(compile_objects(write(tmp_path, KNOBS))).items():
        meta = ds["spec"]["template"]["metadata"]
        assert meta["labels"]["team"] == "ml" and meta["labels"]["cost-center"] == "gpu", name
        assert meta["annotations"]["example.com/owner"] == "ml-platform", name
        assert ds["spec"]["selector"]["matchLabels"].items() <= meta["labels"].items(), name


def test_refuses_a_reserved_pod_label(tmp_path):
    f = write(tmp_path, """\
        platform: {type: kubernetes, version: "1.33"}
        os: ubuntu24.04
        daemonsets: {labels: {app: mine}}
        nodePools: [{name: a, gpu: L40S}]
        """)
    assert issues(f) == [("spec.daemonsets.labels.app", 7, "app is a label the GPU DaemonSets select their pods by "
                          "or gpuop sets itself; reserved: app, app.kubernetes.io/component, app.kubernetes.io/part-of")]


def test_refuses_a_bad_label_key(tmp_path):
    f = write(tmp_path, """\
        platform: {type: kubernetes, version: "1.33"}
        os: ubuntu24.04
        daemonsets: {annotations: {"bad key!": x}}
        nodePools: [{name: a, gpu: L40S}]
        """)
    (path, line, message), = issues(f)
    assert (path, line) == ("spec.daemonsets.annotations", 7)
    assert "'bad key!' is not a valid label key" in message


def test_host_paths_reach_every_volume(tmp_path):
    ds = daemonsets(compile_objects(write(tmp_path, KNOBS)))
    seen = {"host-root": 0, "driver-install-dir": 0}
    for name, d in ds.items():
        for v in d["spec"]["template"]["spec"].get("volumes", []):
            if v["name"] == "host-root":
                assert v["hostPath"]["path"] == "/host-root", name
                seen["host-root"] += 1
            if v["name"] == "driver-install-dir":
                assert v["hostPath"]["path"] == "/opt/nvidia/driver", name
                seen["driver-install-dir"] += 1
    assert seen["host-root"] >= 3 and seen["driver-install-dir"] >= 2
    plugin_vols = {v["name"]: v for v in ds["nvidia-device-plugin-daemonset"]["spec"]["template"]["spec"]["volumes"]}
    assert plugin_vols["device-plugin"]["hostPath"]["path"] == "/data/kubelet/device-plugins"


def test_root_fs_changes_the_driver_config_digest(tmp_path):
    def digest(body: str) -> str:
        (tmp_path / "d").mkdir(exist_ok=True)
        f = write(tmp_path / "d", body)
        drv = main_container(daemonsets(compile_objects(f))["nvidia-driver-daemonset"], "nvidia-driver-ctr")
        return drv["env"][-1]["value"]
    base = 'platform: {type: kubernetes, version: "1.33"}\nos: ubuntu24.04\nnodePools: [{name: a, gpu: L40S}]\n'
    assert digest(base) != digest(base + "hostPaths: {rootFS: /host-root}\n")


@pytest.mark.parametrize("value", ["relative/dir", "/a/../b"])
def test_refuses_a_host_path_that_is_not_absolute(tmp_path, value):
    f = write(tmp_path, f"""\
        platform: {{type: kubernetes, version: "1.33"}}
        os: ubuntu24.04
        hostPaths: {{rootFS: "{value}"}}
        nodePools: [{{name: a, gpu: L40S}}]
        """)
    (path, line, message), = issues(f)
    assert (path, line) == ("spec.hostPaths.rootFS", 7)
    assert f"{value!r} is not an absolute host path (it must start with / and have no .. parts)" in message


@pytest.mark.parametrize("runtime", ["containerd", "crio", "docker"])
def test_gpuop_env_names_cover_what_the_components_render(tmp_path, runtime):
    from gpuop.components import device_plugin, driver, toolkit as tk
    f = write(tmp_path, f"""\
        platform: {{type: kubernetes, version: "1.33", distribution: generic}}
        os: ubuntu24.04
        containerRuntime: {runtime}
        driver: {{kernelModuleType: open}}
        nodePools: [{{name: a, gpu: A100-SXM4-80GB, mig: {{strategy: single, layout: {{1g.10gb: 7}}}}}}]
        """)
    ds = daemonsets(compile_objects(f))
    names = lambda d, c: {e["name"] for e in main_container(d, c)["env"]}   # noqa: E731
    assert names(ds["nvidia-container-toolkit-daemonset"], "nvidia-container-toolkit-ctr") <= tk.GPUOP_ENV
    assert names(ds["nvidia-device-plugin-daemonset"], "nvidia-device-plugin") <= device_plugin.GPUOP_ENV
    assert names(ds["nvidia-driver-daemonset"], "nvidia-driver-ctr") <= driver.GPUOP_ENV | {driver.DIGEST_ENV}


def test_operator_mode_carries_the_toolkit_env_beside_the_distribution_s_and_refuses_toolkit_args(tmp_path):
    f = write(tmp_path, """\
        platform: {type: kubernetes, version: "1.33", distribution: k3s}
        os: ubuntu24.04
        toolkit: {env: [{name: A, value: "1"}]}
        delivery: {mode: operator}
        nodePools: [{name: a, gpu: L40S}]
        """)
    cat = catalog.load()
    values = build_plan(validate(load_profile(f), cat), cat).operator.values
    names = [e["name"] for e in values["toolkit"]["env"]]
    assert names[-1] == "A" and "CONTAINERD_CONFIG" in names          # k3s: its paths, then the profile's
    (tmp_path / "args").mkdir()
    f = write(tmp_path / "args", """\
        platform: {type: kubernetes, version: "1.33"}
        os: ubuntu24.04
        toolkit: {args: [--verbose]}
        delivery: {mode: operator}
        nodePools: [{name: a, gpu: L40S}]
        """)
    assert issues(f) == [("spec.toolkit.args", 7, "spec.toolkit.args cannot be passed to NVIDIA's operator: the "
                          "ClusterPolicy has toolkit.args, but v26.7's TransformToolkit never applies them "
                          "(controllers/object_controls.go: env only), so the toolkit would run its entrypoint's; "
                          "remove it, or use spec.delivery.mode: stack")]


def test_refuses_a_second_toolkit_on_aks_and_accepts_the_preinstalled_profile(tmp_path):
    f = write(tmp_path, """\
        platform: {type: kubernetes, version: "1.33", distribution: aks}
        driver: {enabled: false}
        nodePools: [{name: a, gpu: L40S}]
        """)
    assert issues(f) == [("spec.toolkit.enabled", 5, "aks's GPU node image (AKS GPU node image (driver install not "
                          "skipped with --gpu-driver none)) already installs the NVIDIA container toolkit; gpuop would "
                          "install a second copy: set spec.toolkit.enabled: false")]
    (tmp_path / "ok").mkdir()
    ok = write(tmp_path / "ok", """\
        platform: {type: kubernetes, version: "1.33", distribution: aks}
        driver: {enabled: false}
        toolkit: {enabled: false}
        nodePools: [{name: a, gpu: L40S}]
        """)
    kinds = {o["metadata"]["name"] for o in compile_objects(ok) if o["kind"] == "DaemonSet"}
    assert "nvidia-device-plugin-daemonset" in kinds and "nvidia-container-toolkit-daemonset" not in kinds
