"""The CycloneDX bill of materials (outputs/sbom.py): every example's BOM validates against the CycloneDX 1.6 schema
(cyclonedx-python-lib's own validator) and lists every image its images.txt lists, with the licences of
catalog/data/licences.yaml; digests come from the digest lock; the same profiles give the same bytes and a change
gives a new serial number; the fleet's BOM links each cluster's; `gpuop diff` shows a changed BOM.

The examples are compiled by the CLI's synth into a temporary project (the real pipeline, no cache of the checkout).
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess

import pytest
import yaml
from cyclonedx.schema import SchemaVersion
from cyclonedx.validation.json import JsonStrictValidator

from conftest import REPO, run_main, write_profile
from gpuop.catalog import licences as licence_catalog
from gpuop.outputs.sbom import split_ref

VALIDATOR = JsonStrictValidator(SchemaVersion.V1_6)


def schema_errors(text: str):
    return VALIDATOR.validate_str(text)


@pytest.fixture(scope="module")
def examples(tmp_path_factory):
    """The example profiles compiled into a fresh project: its folder."""
    w = tmp_path_factory.mktemp("examples")
    shutil.copytree(REPO / "profiles", w / "profiles")
    shutil.copy(REPO / "gpuop.yaml", w / "gpuop.yaml")
    proc = run_main("synth", "profiles", "-o", "dist", cwd=w)
    assert proc.returncode == 0, proc.stderr
    return w


def images_of(bom: dict) -> dict[str, dict]:
    return {c["bom-ref"].removeprefix("image:"): c for c in bom["components"] if c["bom-ref"].startswith("image:")}


def test_every_example_bom_validates_and_lists_every_image_of_its_images_txt(examples):
    clusters = sorted(p.parent.name for p in (examples / "dist").glob("*/sbom.cdx.json") if p.parent.name != "fleet")
    assert clusters == sorted(e["name"] for e in json.loads((examples / "dist/index.json").read_text())["clusters"])
    for name in clusters:
        text = (examples / "dist" / name / "sbom.cdx.json").read_text()
        assert schema_errors(text) is None, name
        bom = json.loads(text)
        listing = examples / "dist" / name / "images.txt"
        listed = listing.read_text().split() if listing.exists() else []
        assert set(listed) <= set(images_of(bom)), name
        if listed:                                   # stack mode: exactly images.txt
            assert sorted(images_of(bom)) == listed, name
        assert bom["metadata"]["component"]["name"] == name and "timestamp" not in bom["metadata"]


def test_each_image_carries_its_catalog_licences_and_the_driver_its_flavours(examples):
    bom = json.loads((examples / "dist/prod-east/sbom.cdx.json").read_text())
    images = images_of(bom)
    driver = images["nvcr.io/nvidia/driver:580.173.02-ubuntu24.04"]
    # kernelModuleType auto: either flavour may run, so both flavours' licences are listed, as one SPDX expression
    assert driver["licenses"] == [{"expression": "LicenseRef-NVIDIA-Software-License-Agreement AND "
                                   "LicenseRef-NVIDIA-Product-Specific-Terms-AI AND LicenseRef-NVIDIA-Driver-License AND "
                                   "(MIT OR GPL-2.0-only)"}]
    props = {p["name"]: p["value"] for p in driver["properties"]}
    assert props["gpuop:driver:open:mirror"] == "true" and props["gpuop:registry"] == "public"
    plugin = images["nvcr.io/nvidia/k8s-device-plugin:v0.20.0"]
    assert [lic["license"]["name"] for lic in plugin["licenses"]] == [
        "NVIDIA Software License Agreement", "Product-Specific Terms for NVIDIA AI Products"]
    charts = {c["name"]: c for c in bom["components"] if c["bom-ref"].startswith("chart:")}
    assert charts["prod-east"]["version"] == json.loads((examples / "dist/index.json").read_text())["clusters"][
        [e["name"] for e in json.loads((examples / "dist/index.json").read_text())["clusters"]].index("prod-east")][
        "chartVersion"]
    assert charts["node-feature-discovery"]["licenses"] == [{"license": {"id": "Apache-2.0"}}]
    table = licence_catalog.load()
    for ref, comp in images.items():        # every image of the example is known to the licence catalog
        assert comp["licenses"] and table.image(split_ref(ref)[0], ("nvcr.io/nvidia",)) is not None, ref


def test_the_fleet_bom_validates_and_links_every_cluster_bom_by_its_serial_number(examples):
    text = (examples / "dist/fleet/sbom.cdx.json").read_text()
    assert schema_errors(text) is None
    fleet = json.loads(text)
    index = {e["name"]: e for e in json.loads((examples / "dist/index.json").read_text())["clusters"]}
    links = {c["name"]: c["externalReferences"][0]["url"] for c in fleet["components"]}
    assert sorted(links) == sorted(index)
    for name, url in links.items():
        serial = json.loads((examples / "dist" / name / "sbom.cdx.json").read_text())["serialNumber"]
        assert index[name]["sbom"] == {"path": f"{name}/sbom.cdx.json", "serialNumber": serial}
        assert url == serial.replace("urn:uuid:", "urn:cdx:") + "/1"


LOCKED = """\
platform: {type: kubernetes, version: "1.33"}
os: ubuntu24.04
images: {registry: mirror.example.com/nvidia, digestLock: ../images.lock.json}
driver: {version: "580.173.02", kernelModuleType: open}
nfd: {mode: existing}
nodePools:
  - {name: train, gpu: H100-SXM5-80GB}
"""


def test_digests_come_from_the_lock_and_the_same_profiles_give_the_same_bytes(tmp_path):
    write_profile(tmp_path, LOCKED.replace(", digestLock: ../images.lock.json", ""), "profiles/c1.yaml")
    shutil.copy(REPO / "gpuop.yaml", tmp_path / "gpuop.yaml")
    listed = run_main("images", "profiles", cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    keys = [line.split("\t")[1].removeprefix("mirror.example.com/nvidia/") for line in listed.stdout.splitlines()]
    digests = {k: "sha256:" + hashlib.sha256(k.encode()).hexdigest() for k in keys}
    (tmp_path / "images.lock.json").write_text(json.dumps({"apiVersion": "gpuop/v1alpha1", "kind": "ImageDigests",
                                                            "images": digests}))
    write_profile(tmp_path, LOCKED, "profiles/c1.yaml")
    assert run_main("synth", "profiles", "-o", "dist", cwd=tmp_path).returncode == 0
    text = (tmp_path / "dist/c1/sbom.cdx.json").read_text()
    assert schema_errors(text) is None
    images = images_of(json.loads(text))
    assert sorted(images) == (tmp_path / "dist/c1/images.txt").read_text().split()
    for ref, comp in images.items():
        key = ref.removeprefix("mirror.example.com/nvidia/").split("@")[0]
        assert comp["hashes"] == [{"alg": "SHA-256", "content": digests[key].removeprefix("sha256:")}], ref
        assert comp["purl"].startswith(f"pkg:oci/{key.split(':')[0].rsplit('/', 1)[-1]}@sha256:"), ref
    # the same profiles, compiled again elsewhere: the same bytes; another image version: a new serial number
    again = tmp_path / "again"
    assert run_main("synth", "profiles", "-o", str(again), cwd=tmp_path).returncode == 0
    assert (again / "c1/sbom.cdx.json").read_text() == text
    assert (again / "fleet/sbom.cdx.json").read_text() == (tmp_path / "dist/fleet/sbom.cdx.json").read_text()
    write_profile(tmp_path, LOCKED.replace(", kernelModuleType: open", ", kernelModuleType: proprietary"),
                  "profiles/c1.yaml")
    assert run_main("synth", "profiles", "-o", str(again), cwd=tmp_path).returncode == 0
    changed = json.loads((again / "c1/sbom.cdx.json").read_text())
    assert changed["serialNumber"] != json.loads(text)["serialNumber"]
    assert schema_errors((again / "c1/sbom.cdx.json").read_text()) is None


def test_gpuop_diff_shows_a_changed_bom(tmp_path):
    write_profile(tmp_path, LOCKED.replace(", digestLock: ../images.lock.json", ""), "profiles/c1.yaml")
    shutil.copy(REPO / "gpuop.yaml", tmp_path / "gpuop.yaml")
    assert run_main("synth", "profiles", "-o", "dist", cwd=tmp_path).returncode == 0
    write_profile(tmp_path, LOCKED.replace(", digestLock: ../images.lock.json", "")
                  .replace("os: ubuntu24.04", "os: ubuntu24.04\ndevicePlugin: {version: v0.20.1}"), "profiles/c1.yaml")
    proc = run_main("diff", "--exit-code", cwd=tmp_path)
    assert proc.returncode == 3, proc.stderr
    lines = proc.stdout.splitlines()
    at = lines.index("  ~ sbom.cdx.json")
    assert any("k8s-device-plugin:v0.20.1" in line for line in lines[at:])
    assert "  ~ fleet/sbom.cdx.json" in lines[lines.index("fleet:"):]      # the new serial number it links


def test_an_operator_mode_bom_lists_nvidia_s_chart_and_every_driver_of_its_nvidiadriver_crs(examples):
    bom = json.loads((examples / "dist/keep-operator/sbom.cdx.json").read_text())
    refs = sorted(images_of(bom))
    assert "nvcr.io/nvidia/driver:580.173.02" in refs and "nvcr.io/nvidia/driver:595.91.07" in refs
    charts = [c["bom-ref"] for c in bom["components"] if c["bom-ref"].startswith("chart:")]
    version = json.loads((examples / "dist/index.json").read_text())
    version = next(e["chartVersion"] for e in version["clusters"] if e["name"] == "keep-operator")
    assert charts == ["chart:gpu-operator@v26.7.0", f"chart:keep-operator-gpuop-addons@{version}",
                      "chart:node-feature-discovery@0.19.0"]


def test_an_operator_mode_bom_lists_the_companion_chart_and_every_image_its_objects_pull(examples):
    # the companion chart (alerts, dashboards, queues, the health gate) is gpuop's own delivery beside NVIDIA's
    # chart: it and the images of its objects (the gate's checks) are deployed, so they are in the bill of materials
    out = examples / "dist/keep-operator"
    bom = json.loads((out / "sbom.cdx.json").read_text())
    chart = yaml.safe_load((out / "addons/chart/Chart.yaml").read_text())
    (own,) = [c for c in bom["components"] if c["name"] == chart["name"]]
    assert own["version"] == chart["version"]
    assert {"name": "gpuop:licence", "value": "compiled by gpuop from your profile: yours"} in own["properties"]
    pulled = set()
    for f in (out / "addons/manifests").glob("*.yaml"):
        for d in yaml.safe_load_all(f.read_text()):
            pod = ((d or {}).get("spec") or {}).get("template", {}).get("spec") or {}
            pulled |= {c["image"] for k in ("initContainers", "containers") for c in pod.get(k) or []}
    assert pulled and pulled <= set(images_of(bom))
    assert schema_errors((out / "sbom.cdx.json").read_text()) is None
