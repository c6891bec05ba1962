"""verify/nvidia_chart.py: NVIDIA's chart rendered through Helm 4's engine, CRs defaulted as the API server does."""

from __future__ import annotations

from gpuop.verify import nvidia_chart

from conftest import REFS

CHART = REFS / "gpu-operator" / "chart"


def test_render_defaults_the_cluster_policy_as_the_api_server():
    r = nvidia_chart.render({"mig": {"strategy": ""}, "driver": {"nvidiaDriverCRD": {"enabled": True}}}, CHART)
    spec = r.cluster_policy["spec"]
    assert spec["cdi"]["default"] is False                     # CRD default, never rendered by the chart
    assert spec["hostPaths"]["kubeletRootDir"] == "/var/lib/kubelet"
    assert spec["mig"] is None                                 # empty value: left out, and the CRD has no default
    assert [d["metadata"]["name"] for d in r.drivers] == ["default"]
    assert r.drivers[0]["spec"]["upgradePolicy"]["maxUnavailable"] == "25%"


def test_crd_defaults_reach_array_items_and_leave_the_input_alone():
    schema = {"type": "object", "properties": {"list": {"type": "array", "items": {
        "type": "object", "properties": {"a": {"type": "string", "default": "x"}}}},
        "obj": {"type": "object", "default": {}, "properties": {"b": {"type": "integer", "default": 3}}}}}
    obj = {"list": [{}, {"a": "y"}]}
    assert nvidia_chart.crd_defaults(obj, schema) == {"list": [{"a": "x"}, {"a": "y"}], "obj": {"b": 3}}
    assert obj == {"list": [{}, {"a": "y"}]}
