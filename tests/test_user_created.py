"""ConfigMaps the profile names as "you create it" (spec.driver.repoConfig, spec.driver.certConfig) are
external references: the profile compiles, `gpuop validate DIST` accepts its output, and only those names
(in the stack's namespace) are taken as present; any other missing ConfigMap is still "not found"."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import REPO, TOOL_PATHS, TOOLS, run_gpuop, run_main
from gpuop.profile.models import ConfigMapFiles

KUBEVAL = TOOLS / TOOL_PATHS["kubeval"]          # GPUOP_TOOLS, else ../shared/tools (conftest)

PROFILE = """\
apiVersion: gpuop/v1alpha1
kind: ClusterProfile
metadata: {name: mirror}
spec:
  platform: {type: kubernetes, version: "1.33"}
  os: ubuntu24.04
  driver:
    version: "580.173.02"
    repoConfig: {configMapName: repo-config, files: [local.list]}
    certConfig: {configMapName: cert-config, files: [mirror-ca.crt]}
  nodePools:
    - {name: a, gpu: L40S, nodes: 1}
"""


@pytest.fixture(scope="module")
def out(tmp_path_factory) -> Path:
    w = tmp_path_factory.mktemp("user-created")
    (w / "profiles").mkdir()
    (w / "profiles" / "mirror.yaml").write_text(PROFILE)
    shutil.copy(REPO / "gpuop.yaml", w / "gpuop.yaml")
    proc = run_gpuop("synth", "profiles", "-o", "dist", cwd=w)
    assert proc.returncode == 0, proc.stderr
    return w / "dist"


def copy_of(out: Path, tmp_path: Path) -> Path:
    shutil.copytree(out, tmp_path / "dist")
    return tmp_path / "dist"


def test_the_profile_field_descriptions_name_what_the_user_creates():
    """The registry (plan/model.py USER_CREATED) follows the models: ConfigMapFiles is the one "you create
    it" reference, used by repoConfig and certConfig."""
    from gpuop.plan.model import USER_CREATED
    from gpuop.profile import models

    described = {name for name, cls in vars(models).items() if isinstance(cls, type)
                 and issubclass(cls, models.Model)
                 and any("you create" in (f.description or "") for f in cls.model_fields.values())}
    assert described == {"ConfigMapFiles", "ClusterOwned"}
    assert "you create" in ConfigMapFiles.model_fields["configMapName"].description
    users = {(cls, f) for cls in vars(models).values() if isinstance(cls, type) and issubclass(cls, models.Model)
             for f, info in cls.model_fields.items() if "ConfigMapFiles" in str(info.annotation)}
    assert {f for _, f in users} == {"repoConfig", "certConfig"}
    assert set(models.ClusterOwned.model_fields) == {"priorityClasses"}
    assert {a for _, a in USER_CREATED} == {"driver_repo_config", "driver_cert_config", "owned_priority_classes"}


def test_a_profile_with_repo_and_cert_config_compiles_and_its_output_validates(out):
    entry = json.loads((out / "index.json").read_text())["clusters"][0]
    ns = entry["namespace"]
    assert entry["userCreated"] == {"ConfigMap": [f"{ns}/cert-config", f"{ns}/repo-config"]}
    driver = (out / "mirror" / "manifests").glob("*driver*.yaml")
    text = "".join(p.read_text() for p in driver)
    assert "name: repo-config" in text and "name: cert-config" in text      # mounted, not written
    assert not re.search(r"kind: ConfigMap\n(?:.*\n){0,3}  name: (repo|cert)-config", text)
    proc = run_main("validate", str(out), cwd=out.parent)
    assert proc.returncode == 0, proc.stderr


@pytest.mark.skipif(not KUBEVAL.is_file(), reason="kubeval (../shared/tools/kubeval) not present")
def test_the_api_server_accepts_the_driver_that_mounts_them(out):
    files = sorted(str(p) for p in (out / "mirror" / "manifests").glob("*.yaml") if p.name != "kustomization.yaml")
    proc = subprocess.run([str(KUBEVAL), *files], capture_output=True, text=True, timeout=120)
    results = [json.loads(line) for line in proc.stdout.split("\n") if line]
    driver = [r for r in results if r["kind"] == "DaemonSet" and r["name"].startswith("nvidia-driver")]
    assert driver and all(r["status"] == "checked" for r in driver)
    assert [(r["kind"], r["name"], r["errors"]) for r in results if r["errors"]] == []
    assert proc.returncode == 0


def test_only_the_named_configmaps_are_external(out, tmp_path):
    dist = copy_of(out, tmp_path)
    for f in (dist / "mirror" / "manifests").glob("*driver*.yaml"):
        f.write_text(f.read_text().replace("name: repo-config", "name: other-config"))
    proc = run_main("validate", str(dist), cwd=tmp_path)
    assert proc.returncode == 2
    assert 'configmaps "other-config" not found' in proc.stderr
    assert "repo-config" not in proc.stderr and "cert-config" not in proc.stderr


def test_an_index_entry_that_is_not_a_name_is_refused_and_not_external(out, tmp_path):
    dist = copy_of(out, tmp_path)
    index = json.loads((dist / "index.json").read_text())
    ns = index["clusters"][0]["namespace"]
    index["clusters"][0]["userCreated"] = {"ConfigMap": [f"{ns}/Repo_Config", f"{ns}/cert-config"]}
    (dist / "index.json").write_text(json.dumps(index))
    proc = run_main("validate", str(dist), cwd=tmp_path)
    assert proc.returncode == 2
    assert 'userCreated.ConfigMap[0]: Invalid value: "gpu-operator/Repo_Config"' in proc.stderr.replace(ns, "gpu-operator")
    assert 'configmaps "repo-config" not found' in proc.stderr
    assert 'configmaps "cert-config" not found' not in proc.stderr


# ---- the cluster's own PriorityClass: declared, it is external; undeclared, validate and synth refuse it alike --

PRIORITY = """\
apiVersion: gpuop/v1alpha1
kind: ClusterProfile
metadata: {name: owned}
spec:
  platform: {type: kubernetes, version: "1.33"}
  os: ubuntu24.04
  daemonsets:
    priorityClassName: gpu-critical
  nodePools:
    - {name: a, gpu: L40S, nodes: 1}
"""
PRIORITY_REFUSED = (
    "profiles/owned.yaml:8:5: spec.daemonsets.priorityClassName: Invalid value: \"gpu-critical\": no PriorityClass "
    "with name gpu-critical was found; gpuop cannot see the cluster: name a built-in one (system-node-critical, "
    "system-cluster-critical) or declare the cluster's own in spec.clusterOwned.priorityClasses\n"
    "gpuop: 1 error; nothing written\n")


def _priority_project(tmp_path: Path, body: str) -> Path:
    (tmp_path / "profiles").mkdir()
    (tmp_path / "profiles" / "owned.yaml").write_text(body)
    shutil.copy(REPO / "gpuop.yaml", tmp_path / "gpuop.yaml")
    return tmp_path


@pytest.mark.parametrize("command", [("validate", "profiles"), ("synth", "profiles", "-o", "dist")])
def test_an_undeclared_priority_class_is_refused_alike_by_validate_and_synth_at_its_line(tmp_path, command):
    w = _priority_project(tmp_path, PRIORITY)
    proc = run_gpuop(*command, cwd=w)
    assert (proc.returncode, proc.stderr) == (2, PRIORITY_REFUSED)
    assert not (w / "dist").exists()


def test_a_declared_cluster_priority_class_compiles_and_its_output_validates(tmp_path):
    w = _priority_project(tmp_path, PRIORITY + "  clusterOwned: {priorityClasses: [gpu-critical]}\n")
    for command in (("validate", "profiles"), ("synth", "profiles", "-o", "dist"), ("validate", "dist")):
        proc = run_gpuop(*command, cwd=w)
        assert proc.returncode == 0, (command, proc.stderr)
    entry = json.loads((w / "dist" / "index.json").read_text())["clusters"][0]
    assert entry["userCreated"] == {"PriorityClass": ["gpu-critical"]}
    manifests = "".join(p.read_text() for p in (w / "dist" / "owned" / "manifests").glob("*.yaml"))
    assert "priorityClassName: gpu-critical" in manifests and "kind: PriorityClass" not in manifests
    # only the declared name is external: another one in the output is still not found
    alone = tmp_path / "alone"
    shutil.copytree(w / "dist", alone / "dist")         # the output on its own (no profiles to compare with)
    for f in (alone / "dist" / "owned" / "manifests").glob("*driver*.yaml"):
        f.write_text(f.read_text().replace("priorityClassName: gpu-critical", "priorityClassName: other-critical"))
    proc = run_gpuop("validate", "dist", cwd=alone)
    assert proc.returncode == 2 and "no PriorityClass with name other-critical was found" in proc.stderr
    assert "gpu-critical" not in proc.stderr
