"""Licence rules (validate/licensing.py, catalog/data/licences.yaml): each rule fires with its located message in
the API server's words and stays quiet when the profile satisfies it; a vGPU profile compiles only with its
licensing reference and a driver image from a private registry, and NVIDIA's chart values carry the reference.

The rules run through the real validate stage on profiles written to a temporary folder; the compile goes through
the CLI's synth on a real project folder.
"""

from __future__ import annotations

import json
import shutil

import pytest
import yaml

from conftest import REPO, run_main, spec_issues, write_profile
from gpuop import catalog
from gpuop.catalog import licences as licence_catalog
from gpuop.validate.runner import REGISTRY

VGPU = """\
platform: {type: kubernetes, version: "1.33"}
os: ubuntu24.04
delivery: {mode: operator}
images: {registry: registry.example.com/nvidia}
driver: {driverType: vgpu, version: "580.173.02", licensingConfig: {secretName: nls-client}}
nodePools:
  - {name: vms, gpu: L40S}
"""

STACK = """\
platform: {type: kubernetes, version: "1.33"}
os: ubuntu24.04
driver: {version: "580.173.02", kernelModuleType: open}
licensing: {allowedDrivers: [open]}
nodePools:
  - {name: train, gpu: H100-SXM5-80GB}
"""

PUBLIC = ("Invalid value: \"nvcr.io/nvidia\": {which}nvcr.io/nvidia is a public registry and does not carry the vGPU "
          "guest driver (licensed to NVIDIA AI Enterprise customers only: it may be pulled only from an entitled "
          "registry such as nvcr.io/nvaie or your private registry); set spec.images.registry or "
          "spec.delivery.operator.repositories.driver to the private registry holding it")
LICENSING = ("Required value: the vGPU guest driver checks out its licence from the NVIDIA License System: name the "
             "Secret holding gridd.conf and client_configuration_token.tok (spec.driver.licensingConfig.secretName)")


@pytest.fixture
def licence(tmp_path, monkeypatch):
    """spec (YAML under `spec:`) -> the located licence-rule errors, as the CLI prints them."""
    monkeypatch.chdir(tmp_path)

    def check(spec: str) -> list[str]:
        return [str(i) for i in spec_issues(tmp_path, spec) if i.severity == "error" and i.rule.startswith("licence-")]
    return check


def test_a_vgpu_profile_with_its_licensing_secret_and_a_private_registry_is_valid(licence):
    assert licence(VGPU) == []
    assert licence(VGPU.replace("secretName: nls-client", "configMapName: licensing-config")) == []


def test_a_vgpu_driver_without_licensing_reference_is_refused_at_the_field(licence):
    spec = VGPU.replace(", licensingConfig: {secretName: nls-client}", "")
    assert licence(spec) == [f"c1.yaml:9:3: spec.driver.licensingConfig: {LICENSING}"]


def test_a_licensing_reference_on_the_data_center_driver_is_forbidden(licence):
    spec = STACK.replace('kernelModuleType: open}', 'kernelModuleType: open, licensingConfig: {secretName: x}}')
    assert licence(spec) == ["c1.yaml:7:59: spec.driver.licensingConfig: Forbidden: only the vGPU guest driver "
                             "(spec.driver.driverType: vgpu) reads a licensing configuration"]


def test_a_vgpu_driver_from_the_public_registry_is_refused_where_the_registry_is_chosen(licence):
    no_mirror = VGPU.replace("images: {registry: registry.example.com/nvidia}\n", "")
    assert licence(no_mirror) == [f"c1.yaml:8:12: spec.driver.driverType: "
                                  f"{PUBLIC.format(which='the release' + chr(39) + 's registry ')}"]
    public = VGPU.replace("registry.example.com/nvidia", "nvcr.io/nvidia")
    assert licence(public) == [f"c1.yaml:8:12: spec.images.registry: {PUBLIC.format(which='')}"]
    # the driver's own repository decides for the driver, whatever the common mirror
    own = VGPU.replace("delivery: {mode: operator}",
                       "delivery: {mode: operator, operator: {repositories: {driver: nvcr.io/nvidia}}}")
    assert licence(own).__len__() == 1 and "spec.delivery.operator.repositories.driver: Invalid value" in licence(own)[0]


def test_a_vgpu_driver_in_stack_mode_or_precompiled_is_refused(licence):
    stack = VGPU.replace("delivery: {mode: operator}\n", "")
    assert licence(stack) == ["c1.yaml:8:12: spec.driver.driverType: Unsupported value: \"vgpu\": the vGPU guest "
                              "driver is delivered by NVIDIA's operator, which mounts its licensing configuration: set "
                              "spec.delivery.mode: operator"]
    pre = VGPU.replace('version: "580.173.02"', 'version: "580", precompiled: true')
    assert "spec.driver.precompiled: Invalid value: true: precompiled driver containers do not support NVIDIA vGPU; " \
        "build the vGPU guest driver image into your registry" in "\n".join(licence(pre))


def test_an_entitled_registry_needs_a_pull_secret(licence):
    spec = VGPU.replace("registry.example.com/nvidia}", "nvcr.io/nvaie}")
    assert licence(spec) == ["c1.yaml:8:12: spec.images.registry: Required value: nvcr.io/nvaie is an entitled "
                             "registry (NVIDIA AI Enterprise): its images are pulled with an entitled account's key; "
                             "name the docker-registry Secret holding it in spec.images.pullSecrets"]
    assert licence(spec.replace("nvcr.io/nvaie}", "nvcr.io/nvaie, pullSecrets: [ngc-secret]}")) == []


def test_the_licence_policy_refuses_a_flavour_it_leaves_out_at_the_field_that_chooses_it(licence):
    assert licence(STACK) == []
    said = "the licence policy (spec.licensing.allowedDrivers) allows open"
    assert licence(STACK.replace("kernelModuleType: open", "kernelModuleType: proprietary")) == [
        f"c1.yaml:7:35: spec.driver.kernelModuleType: Unsupported value: \"proprietary\": {said}, not proprietary"]
    assert licence(STACK.replace(", kernelModuleType: open", "")) == [
        f"c1.yaml:7:3: spec.driver.kernelModuleType: Unsupported value: \"auto\": auto lets the driver choose open or "
        f"proprietary kernel modules on the node; {said}: set kernelModuleType: open"]
    assert licence(STACK.replace('version: "580.173.02", kernelModuleType: open', 'version: "580", precompiled: true, '
                                 'kernels: [6.8.0-40-generic], kernelModuleType: open')) == [
        f"c1.yaml:7:28: spec.driver.precompiled: Unsupported value: true: {said}, not precompiled"]
    assert licence(VGPU + "licensing: {allowedDrivers: [open, proprietary]}\n") == [
        "c1.yaml:9:12: spec.driver.driverType: Unsupported value: \"vgpu\": the licence policy "
        "(spec.licensing.allowedDrivers) allows open, proprietary, not vgpu-guest"]
    # no driver from gpuop: nothing to license
    assert licence(STACK.replace('driver: {version: "580.173.02", kernelModuleType: open}',
                                 "driver: {enabled: false}")) == []


def test_every_licence_rule_is_registered_with_its_source():
    ids = [r for r in REGISTRY if r.startswith("licence-")]
    assert sorted(ids) == ["licence-allowed-drivers", "licence-entitled-pull-secret", "licence-vgpu-delivery",
                           "licence-vgpu-licensing", "licence-vgpu-private-registry"]
    assert all("licences.yaml" in REGISTRY[i].source for i in ids)


def test_the_licence_catalog_names_every_flavour_and_every_image_of_the_examples_with_sources():
    table = licence_catalog.load()
    assert set(table.drivers) == set(licence_catalog.FLAVOURS)
    assert table.drivers["vgpu-guest"].privateOnly and table.drivers["vgpu-guest"].licensingServer
    assert table.drivers["open"].kernelModules == "MIT OR GPL-2.0-only"
    assert all(a.source for a in (*table.images.values(), *table.charts.values()))
    for lid in {i for a in (*table.images.values(), *table.drivers.values()) for i in a.licences}:
        assert lid in table.licences or " OR " in lid
    release = catalog.load().release(None)
    for listing in sorted((REPO / "dist").glob("*/images.txt")):
        for ref in listing.read_text().split():
            repo = ref.split("@")[0].rsplit(":", 1)[0] if "/" in ref else ref.split(":")[0]
            assert table.image(repo, (release.registry, "registry.lab.example.com/nvidia")) is not None, ref


def test_a_vgpu_profile_compiles_to_nvidia_chart_values_with_its_licensing_reference(tmp_path):
    (tmp_path / "profiles").mkdir()
    write_profile(tmp_path, VGPU, "profiles/c1.yaml")
    shutil.copy(REPO / "gpuop.yaml", tmp_path / "gpuop.yaml")
    proc = run_main("synth", "profiles", "-o", "dist", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    values = yaml.safe_load((tmp_path / "dist/c1/operator/values.yaml").read_text())
    assert values["driver"]["licensingConfig"] == {"secretName": "nls-client", "nlsEnabled": True}
    assert values["driver"]["repository"] == "registry.example.com/nvidia"
    # without the reference, or from the public registry, nothing is written
    write_profile(tmp_path, VGPU.replace(", licensingConfig: {secretName: nls-client}", ""), "profiles/c1.yaml")
    before = json.loads((tmp_path / "dist/index.json").read_text())
    proc = run_main("synth", "profiles", "-o", "dist", cwd=tmp_path)
    assert proc.returncode == 2 and proc.stderr.splitlines() == [
        f"profiles/c1.yaml:9:3: spec.driver.licensingConfig: {LICENSING}", "gpuop: 1 error; nothing written"]
    assert json.loads((tmp_path / "dist/index.json").read_text()) == before
    write_profile(tmp_path, VGPU.replace("registry.example.com/nvidia", "nvcr.io/nvidia"), "profiles/c1.yaml")
    proc = run_main("synth", "profiles", "-o", "dist", cwd=tmp_path)
    assert proc.returncode == 2 and proc.stderr.splitlines() == [
        f"profiles/c1.yaml:8:12: spec.images.registry: {PUBLIC.format(which='')}", "gpuop: 1 error; nothing written"]
    assert json.loads((tmp_path / "dist/index.json").read_text()) == before
