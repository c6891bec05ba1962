"""Every chart lints clean and renders with Helm 4's own engine (helm-python-sdk); the render with
default values equals the rendered manifests; values.schema.json refuses bad values; overrides work."""

from __future__ import annotations

import copy

import helm_python as helm
import pytest

from gpuop.kube.yamlio import load, load_all

from conftest import by_key, load_dir


def render(chart_dir, values=None, entry=None) -> list[dict]:
    chart = helm.Chart.load(str(chart_dir))
    try:
        out = chart.render(values or {}, name=entry["releaseName"], namespace=entry["namespace"])
    finally:
        chart.close()
    objs = []
    for path in sorted(out):
        if not path.endswith("NOTES.txt"):
            objs += load_all(out[path])
    return objs


def is_hook(obj: dict) -> bool:
    return "helm.sh/hook" in (obj["metadata"].get("annotations") or {})


def test_every_chart_lints_without_errors(dist, index):
    for entry in index["clusters"]:
        chart = dist / entry["chart"]
        result = helm.lint(str(chart), strict=True, kube_version=f"v{entry['kubeVersion']}.0")
        messages = [m for m in result.get("messages", []) if m.get("severity", 0) >= 2]
        assert not messages, (entry["name"], messages)
        assert not result.get("errors"), result


def test_render_as_argocd_and_flux_install_it_equals_manifests(dist, index):
    """Argo CD and Flux install the chart with createNamespace=true (their only value); the render is
    then the rendered manifests, the smoke-test pod aside (the health gate's Jobs are hooks in both)."""
    for entry in index["clusters"]:
        rendered = by_key([o for o in render(dist / entry["chart"], {"createNamespace": True}, entry=entry)
                           if not (is_hook(o) and o["kind"] == "Pod")])
        manifests = by_key(load_dir(dist / entry["manifests"]))
        assert rendered.keys() == manifests.keys(), entry["name"]
        for k in manifests:
            assert rendered[k] == manifests[k], (entry["name"], k)


def test_one_template_per_component_and_a_component_turned_off_renders_nothing(dist, index):
    """The templates are the manifests' files (one per component); a component's toggle
    wraps its whole template, so turning it off leaves an empty file, which Helm skips."""
    entry = next(e for e in index["clusters"] if e["name"] == "prod-east")
    chart_dir = dist / entry["chart"]
    templates = sorted(p.name for p in (chart_dir / "templates").glob("*.yaml"))
    manifests = sorted(p.name for p in (dist / entry["manifests"]).glob("*.yaml") if p.name != "kustomization.yaml")
    assert templates == manifests
    values = load((chart_dir / "values.yaml").read_text())
    toggles = {k: {"enabled": False} for k, v in values.items() if isinstance(v, dict) and "enabled" in v}
    assert {"driver", "toolkit", "devicePlugin", "migManager"} <= set(toggles)
    chart = helm.Chart.load(str(chart_dir))
    try:
        out = chart.render(toggles, name=entry["releaseName"], namespace=entry["namespace"])
    finally:
        chart.close()
    off = ("03-driver", "04-toolkit", "07-device-plugin", "10-dcgm-exporter", "11-gpu-feature-discovery",
           "12-mig-manager")
    for name in off:
        assert out[f"{entry['name']}/templates/{name}.yaml"].strip() == "", name
    validator = load_all(out[f"{entry['name']}/templates/05-operator-validator.yaml"])    # always on
    assert [o["kind"] for o in validator][-1] == "DaemonSet"


def test_render_with_defaults_leaves_the_namespace_to_helm_create_namespace(dist, index):
    """With default values the chart leaves the Namespace to `helm install -n NS --create-namespace` (its
    own would conflict)."""
    for entry in index["clusters"]:
        rendered = by_key([o for o in render(dist / entry["chart"], entry=entry) if not is_hook(o)])
        manifests = by_key([o for o in load_dir(dist / entry["manifests"]) if not is_hook(o)])    # the gate's Jobs
        assert set(manifests) - set(rendered) == {("Namespace", "", entry["namespace"])}, entry["name"]
        assert load((dist / entry["chart"] / "values.yaml").read_text())["createNamespace"] is False


def test_gitops_objects_install_the_chart_with_its_namespace_and_the_health_gate_as_their_test(dist, index):
    for entry in index["clusters"]:
        if (dist / entry["name"] / "operator").is_dir():     # operator mode: NVIDIA's chart, not this one
            continue
        (app,) = [a for a in load_dir(dist / entry["argocd"]) if a["metadata"]["name"] == f"gpuop-{entry['name']}"]
        assert app["spec"]["source"]["helm"]["valuesObject"] == {"createNamespace": True}
        # Argo CD renders the test hooks: the gate's Jobs carry its PostSync hook (helm template --skip-tests drops them)
        assert app["spec"]["source"]["helm"]["skipTests"] is False
        (hr,) = [o for o in load_dir(dist / entry["flux"]) if o["metadata"]["name"] == f"gpuop-{entry['name']}"]
        gated = any(d["kind"] == "Job" for d in load_dir(dist / entry["name"] / "manifests")
                    if d["metadata"].get("labels", {}).get("app.kubernetes.io/component") == "health-gate")
        assert hr["spec"]["values"] == {"createNamespace": True}
        assert (hr["spec"].get("test", {}).get("enable") is True) is gated
        if gated:      # a failed check holds the release, never uninstalls or rolls the stack back
            assert hr["spec"]["install"]["remediation"]["ignoreTestFailures"] is True
            assert hr["spec"]["upgrade"]["remediation"]["ignoreTestFailures"] is True
    appset = load((dist / "fleet" / "argocd" / "applicationset.yaml").read_text())
    helm_ = appset["spec"]["template"]["spec"]["source"]["helm"]
    assert helm_["valuesObject"] == {"createNamespace": True} and helm_["skipTests"] is False


def test_chart_accepts_global_so_it_can_be_a_subchart(dist, index):
    """The values schema accepts `global` (a parent chart passes it), instead of `additional properties
    'global' not allowed`."""
    entry = index["clusters"][0]
    objs = render(dist / entry["chart"], {"global": {"imageRegistry": "x", "any": {"thing": 1}}}, entry)
    plain = render(dist / entry["chart"], {}, entry)
    assert objs == plain


def test_disabling_the_device_plugin_drops_the_validators_plugin_step(dist, index):
    """`devicePlugin.enabled=false` drops the validator's plugin-validation step, which would otherwise
    wait for a device plugin that never comes."""
    entry = next(e for e in index["clusters"] if e["name"] == "prod-east")

    def steps(values):
        (ds,) = [o for o in render(dist / entry["chart"], values, entry)
                 if o["metadata"]["name"] == "nvidia-operator-validator" and o["kind"] == "DaemonSet"]
        return [c["name"] for c in ds["spec"]["template"]["spec"]["initContainers"]]

    assert steps({}) == ["driver-validation", "toolkit-validation", "cuda-validation", "plugin-validation"]
    assert steps({"devicePlugin": {"enabled": False}}) == ["driver-validation", "toolkit-validation", "cuda-validation"]


def test_helm_test_hook_runs_vectoradd_on_one_gpu(dist, index):
    for entry in index["clusters"]:
        (pod,) = [o for o in render(dist / entry["chart"], {}, entry) if is_hook(o) and o["kind"] == "Pod"]
        assert pod["metadata"]["annotations"]["helm.sh/hook"] == "test"
        (c,) = pod["spec"]["containers"]
        values = load((dist / entry["chart"] / "values.yaml").read_text())
        assert c["image"] == values["imageRegistry"] + "/k8s/cuda-sample:vectoradd-cuda12.5.0"
        assert c["resources"]["requests"]["nvidia.com/gpu"] == 1 == c["resources"]["limits"]["nvidia.com/gpu"]
        assert pod["spec"]["restartPolicy"] == "Never" and pod["spec"]["automountServiceAccountToken"] is False
        assert pod["metadata"]["namespace"] == entry["namespace"]
    (pod,) = [o for o in render(dist / index["clusters"][0]["chart"], {"smokeTestImage": "m.example/v:1"},
                                index["clusters"][0]) if is_hook(o) and o["kind"] == "Pod"]
    assert pod["spec"]["containers"][0]["image"] == "m.example/v:1"


def test_chart_has_notes_readme_listing_every_value_and_an_icon(dist, index):
    import json as _json

    for entry in index["clusters"]:
        chart = dist / entry["chart"]
        meta = load((chart / "Chart.yaml").read_text())
        assert meta["icon"].startswith("https://")
        schema = _json.loads((chart / "values.schema.json").read_text())
        readme = (chart / "README.md").read_text()
        listed = [l.split("`")[1] for l in readme.splitlines() if l.startswith("| `")]
        assert sorted(listed) == sorted(schema["properties"]) and "global" in listed
        c = helm.Chart.load(str(chart))
        try:
            out = c.render({}, name=entry["releaseName"], namespace=entry["namespace"])
        finally:
            c.close()
        notes = out[f"{entry['name']}/templates/NOTES.txt"]
        assert f"helm test {entry['releaseName']} -n {entry['namespace']}" in notes
        assert "did not create the namespace (createNamespace=false)" in notes


def test_chart_metadata(dist, index):
    for entry in index["clusters"]:
        meta = load((dist / entry["chart"] / "Chart.yaml").read_text())
        assert meta["apiVersion"] == "v2"
        assert meta["version"] == entry["chartVersion"] and "+" not in meta["version"]
        assert meta["appVersion"] == "v26.7.0"
        assert meta["kubeVersion"] == f">= {entry['kubeVersion']}.0-0"


@pytest.mark.parametrize("bad, fragment", [
    ({"imagePullPolicy": "Sometimes"}, "imagePullPolicy"),
    ({"tolerations": [{"key": "x", "operator": "Maybe"}]}, "operator"),
    ({"driver": {"enabled": "yes"}}, "enabled"),
    ({"imageRegistry": ""}, "imageRegistry"),
    ({"typo": 1}, "typo"),
])
def test_values_schema_refuses_bad_values(dist, index, bad, fragment):
    entry = index["clusters"][0]
    chart = helm.Chart.load(str(dist / entry["chart"]))
    try:
        values = chart.merge_values(bad) if hasattr(chart, "merge_values") else bad
        with pytest.raises(helm.HelmValuesError) as err:
            chart.render(bad, name=entry["releaseName"], namespace=entry["namespace"])
        assert fragment in str(err.value)
        del values
    finally:
        chart.close()


def test_values_override_at_deploy_time(dist, index):
    entry = next(e for e in index["clusters"] if e["name"] == "prod-east")
    chart_dir = dist / entry["chart"]
    objs = render(chart_dir, {"imageRegistry": "mirror.example.com/nv", "tolerations": [],
                              "devicePlugin": {"enabled": False}}, entry)
    kinds = {(o["kind"], o["metadata"]["name"]) for o in objs}
    assert ("DaemonSet", "nvidia-device-plugin-daemonset") not in kinds
    assert ("ClusterRole", "nvidia-device-plugin") not in kinds
    assert ("ConfigMap", "nvidia-device-plugin-entrypoint") not in kinds
    driver = next(o for o in objs if o["metadata"]["name"] == "nvidia-driver-daemonset")
    pod = driver["spec"]["template"]["spec"]
    assert "tolerations" not in pod
    assert pod["containers"][0]["image"] == "mirror.example.com/nv/driver:580.173.02-ubuntu24.04"
    assert pod["initContainers"][0]["image"] == "mirror.example.com/nv/cloud-native/k8s-driver-manager:v0.12.0"


def test_literal_template_braces_are_escaped(tmp_path):
    """Text such as Prometheus alert templates must reach the cluster verbatim, not be executed by Helm."""
    from gpuop.outputs.helm import template
    from gpuop.kube.slots import slot

    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x", "namespace": "n"},
            "data": {"alert": "GPU {{ $labels.gpu }} is hot", "raw": "}} {{", "image": slot("imageRegistry") + "/a:{{b}}"}}
    (tmp_path / "templates").mkdir()
    (tmp_path / "Chart.yaml").write_text("apiVersion: v2\nname: t\nversion: 0.1.0\n")
    (tmp_path / "templates" / "cm.yaml").write_text(template(copy.deepcopy(body)))
    chart = helm.Chart.load(str(tmp_path))
    try:
        out = chart.render({"imageRegistry": "r.example/{{x}}"}, name="t", namespace="n")
    finally:
        chart.close()
    obj = load(out["t/templates/cm.yaml"])
    assert obj["data"] == {"alert": "GPU {{ $labels.gpu }} is hot", "raw": "}} {{", "image": "r.example/{{x}}/a:{{b}}"}
