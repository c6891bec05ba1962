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
        objs += load_all(out[path])
    return objs


def test_every_chart_lints_without_errors(dist, index):
    for entry in index["clusters"]:
        chart = dist / entry["chart"]
        result = helm.lint(str(chart), strict=True, kube_version=f"v{entry['kubeVersion']}.0")
        messages = [m for m in result.get("messages", []) if m.get("severity", 0) >= 2]
        assert not messages, (entry["name"], messages)
        assert not result.get("errors"), result


def test_render_with_defaults_equals_manifests(dist, index):
    for entry in index["clusters"]:
        rendered = by_key(render(dist / entry["chart"], entry=entry))
        manifests = by_key(load_dir(dist / entry["manifests"]))
        assert rendered.keys() == manifests.keys(), entry["name"]
        for k in manifests:
            assert rendered[k] == manifests[k], (entry["name"], k)


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
