"""gpuop.api, the construct API for cdk8s apps of one's own: GpuStack from a profile file or document, each
component alone with its props and values, an unfilled slot refused at synth, and the example app
(examples/cdk8s-app) through the real `cdk8s synth`."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from conftest import REPO, by_key, load_dir, run_gpuop
from gpuop import api
from gpuop.kube.slots import OPEN

cdk8s = api.cdk8s
EXAMPLE = REPO / "examples" / "cdk8s-app"
CDK8S = REPO / "node_modules" / ".bin" / "cdk8s"
PROFILE = EXAMPLE / "profiles" / "inference.yaml"
PLUGIN = dict(namespace="gpu-ops", image="registry.test/nvidia/k8s-device-plugin:v1",
              validator_image="registry.test/nvidia/gpu-operator:v1")


def synth(app: cdk8s.App) -> list[dict]:
    app.synth()
    return [o for f in sorted(Path(app.outdir).glob("*.yaml")) for o in yaml.safe_load_all(f.read_text()) if o]


def test_a_lone_component_without_values_fails_at_synth_naming_its_slots(tmp_path):
    app = cdk8s.App(outdir=str(tmp_path))
    api.DevicePlugin(cdk8s.Chart(app, "c"), "device-plugin", api.DevicePluginProps(**PLUGIN))
    with pytest.raises(RuntimeError) as err:
        app.synth()
    msg = str(err.value)
    assert ("DaemonSet nvidia-device-plugin-daemonset would be written with unfilled value slots "
            "⟦devicePlugin.resources⟧, ⟦imagePullPolicy⟧, ⟦imagePullSecrets⟧, ⟦priorityClassName⟧, "
            "⟦tolerations⟧, ⟦validator.resources⟧: pass values= to DevicePlugin (gpuop.api.default_values())") in msg
    assert not list(tmp_path.glob("*.yaml"))


def test_a_lone_component_fills_its_own_slots_from_values(tmp_path):
    app = cdk8s.App(outdir=str(tmp_path))
    values = api.default_values(tolerations=[{"operator": "Exists"}], priorityClassName="gpu-critical")
    api.DevicePlugin(cdk8s.Chart(app, "c"), "device-plugin", api.DevicePluginProps(**PLUGIN), values=values)
    objs = synth(app)
    assert OPEN not in json.dumps(objs, ensure_ascii=False)
    ds = next(o for o in objs if o["kind"] == "DaemonSet")
    pod = ds["spec"]["template"]["spec"]
    assert pod["tolerations"] == [{"operator": "Exists"}] and pod["priorityClassName"] == "gpu-critical"
    assert "imagePullSecrets" not in pod                      # an empty block slot drops its key, as Helm does
    assert {c["imagePullPolicy"] for c in pod["containers"]} == {"IfNotPresent"}


def test_values_missing_a_slot_are_refused_when_the_component_is_built():
    chart = cdk8s.Chart(cdk8s.App(), "c")
    values = api.default_values()
    del values["devicePlugin"]
    with pytest.raises(ValueError, match=r"c/device-plugin: values has no devicePlugin.resources for the slots of "
                                         r"DaemonSet nvidia-device-plugin-daemonset"):
        api.DevicePlugin(chart, "device-plugin", api.DevicePluginProps(**PLUGIN), values=values)


def test_gpustack_from_a_document_is_the_stack_from_its_file():
    from_file = api.GpuStack(cdk8s.App(), "a", profile=PROFILE)
    from_doc = api.GpuStack(cdk8s.App(), "a", profile=yaml.safe_load(PROFILE.read_text()))
    assert from_file.plan == from_doc.plan
    assert from_file.to_json() == from_doc.to_json()
    assert OPEN not in json.dumps(from_file.to_json(), ensure_ascii=False)
    assert "device-plugin" in from_file.components
    with pytest.raises(KeyError, match="'mig-manager' is not a component of this stack; it has namespace, "):
        from_file.component("mig-manager")


def test_gpustack_refuses_a_bad_profile_with_every_problem_located():
    doc = yaml.safe_load(PROFILE.read_text())
    doc["spec"]["nodePools"][0]["gpu"] = "L40"
    doc["spec"]["colour"] = "blue"
    with pytest.raises(api.UserError) as err:
        api.GpuStack(cdk8s.App(), "a", profile=doc)
    text = str(err.value)
    assert "<profile inference>:" in text and "spec.colour: unknown field" in text, text
    with pytest.raises(api.UserError, match="<profile inference>: extends: a profile document given as a dict "
                                            "cannot extend a parent file"):
        api.GpuStack(cdk8s.App(), "a", profile={**yaml.safe_load(PROFILE.read_text()), "extends": "_base.yaml"})
    with pytest.raises(api.UserError, match="no such profile file"):
        api.GpuStack(cdk8s.App(), "a", profile=EXAMPLE / "missing.yaml")


@pytest.mark.slow
@pytest.mark.skipif(not CDK8S.exists(), reason="cdk8s-cli not installed (make setup installs it)")
def test_the_example_app_synthesizes_through_cdk8s_synth(tmp_path):
    """examples/cdk8s-app through the cdk8s CLI: gpuop's objects exactly as `gpuop synth` writes the same
    profile's manifests, the app's own objects beside them, the device plugin patched."""
    app_dir = tmp_path / "app"
    shutil.copytree(EXAMPLE, app_dir, ignore=shutil.ignore_patterns("cdk8s.out"))
    env = {**os.environ, "CDK8S_CHECK_UPGRADE": "false",
           "PATH": os.pathsep.join([str(Path(sys.executable).parent), str(CDK8S.parent), os.environ["PATH"]])}
    proc = subprocess.run([str(CDK8S), "synth"], cwd=app_dir, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "http error" not in proc.stdout + proc.stderr
    ours = by_key([o for o in yaml.safe_load_all((app_dir / "cdk8s.out" / "inference.k8s.yaml").read_text()) if o])

    shutil.copy(REPO / "gpuop.yaml", tmp_path / "gpuop.yaml")
    run_gpuop("synth", "--no-cache", "--no-progress", str(app_dir / "profiles"), "-o", "out", cwd=tmp_path, check=True)
    index = json.loads((tmp_path / "out" / "index.json").read_text())
    theirs = by_key(load_dir(tmp_path / "out" / index["clusters"][0]["manifests"]))

    assert set(ours) - set(theirs) == {("ResourceQuota", "tenants", "gpu-quota"), ("Job", "gpu-operator", "gpu-smoke-test")}
    plugin_key = ("DaemonSet", "gpu-operator", "nvidia-device-plugin-daemonset")
    plugin = ours.pop(plugin_key)
    pod = plugin["spec"]["template"]
    assert pod["metadata"]["labels"].pop("cost-centre") == "ml-platform"
    assert pod["spec"]["priorityClassName"] == "gpu-node-critical"
    pod["spec"]["priorityClassName"] = theirs[plugin_key]["spec"]["template"]["spec"]["priorityClassName"]
    assert plugin == theirs.pop(plugin_key)
    assert {k: v for k, v in ours.items() if k in theirs} == theirs
