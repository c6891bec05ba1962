"""The GPUs the clouds sell are in the catalog with their own PCI device id (AWS's A10G is not the A10), and the
instance types of those clouds give each node's GPU count, every fact with its source."""

from __future__ import annotations

import json
import shutil

import pytest
import yaml

from gpuop.catalog import instances
from gpuop.catalog import load as load_catalog
from gpuop.catalog.names import close_matches

from conftest import REPO, run_gpuop

# (instance type, catalog GPU, GPUs per node) the clouds' pages name (catalog/data/instances.yaml sources)
CLOUD_TYPES = [
    ("g5.xlarge", "A10G", 1), ("g5.12xlarge", "A10G", 4), ("g5.48xlarge", "A10G", 8),
    ("p3.2xlarge", "V100", 1), ("p3.16xlarge", "V100", 8), ("gr6.8xlarge", "L4", 1),
    ("a3-ultragpu-8g", "H200-SXM5-141GB", 8), ("a4-highgpu-8g", "B200-180GB", 8),
    ("Standard_ND96isr_H200_v5", "H200-SXM5-141GB", 8), ("Standard_NC40ads_H100_v5", "H100-NVL-94GB", 1),
    ("Standard_NC80adis_H100_v5", "H100-NVL-94GB", 2), ("Standard_NV72ads_A10_v5", "A10", 2),
]


@pytest.mark.fast
def test_a10g_is_its_own_gpu_with_its_own_pci_id():
    gpus = load_catalog().gpus
    assert gpus["A10G"].pciDeviceIds == ("0x223710DE",) and gpus["A10"].pciDeviceIds == ("0x223610DE",)
    assert gpus["A10G"].architecture == "ampere" and gpus["A10G"].memoryGiB == 24
    assert "2237 GA102GL [A10G]" in gpus["A10G"].source
    # a near miss of A10G points at A10G, never at the A10 (another PCI id: another NodeFeatureRule match)
    for typo in ("a10g", "A10G-24GB", "A10G-PCIE"):
        assert close_matches(typo, gpus)[0] == "A10G", typo


@pytest.mark.fast
def test_every_pci_id_names_one_gpu_and_every_gpu_has_a_source():
    owner: dict[str, str] = {}
    for g in load_catalog().gpus.values():
        assert g.source, g.name
        for pci in g.pciDeviceIds:
            assert pci not in owner, (pci, owner.get(pci), g.name)
            owner[pci] = g.name


@pytest.mark.fast
@pytest.mark.parametrize("itype,gpu,count", CLOUD_TYPES)
def test_cloud_instance_types_give_the_gpu_and_count(itype, gpu, count):
    cat = instances.load()
    assert cat.types[itype].gpu == gpu and cat.types[itype].gpus == count
    assert gpu in load_catalog().gpus


@pytest.mark.fast
def test_every_instance_type_names_a_catalog_gpu_and_its_family_a_source():
    cat = instances.load()
    gpus = load_catalog().gpus
    sources = " ".join(cat.sources)
    for itype, t in cat.types.items():
        assert t.gpu in gpus and t.gpus >= 1, itype
    for family in ("G5", "P3", "Gr6", "a3-ultragpu-8g", "A4", "ND_H200_v5", "NCads_H100_v5", "NVadsA10_v5"):
        assert family in sources, family


def test_an_a10g_pool_on_g5_compiles_with_its_gpu_count(tmp_path):
    w = tmp_path
    (w / "profiles").mkdir()
    (w / "profiles" / "g5.yaml").write_text(yaml.safe_dump({
        "apiVersion": "gpuop/v1alpha1", "kind": "ClusterProfile", "metadata": {"name": "g5"},
        "spec": {"platform": {"type": "kubernetes", "version": "1.33"}, "os": "ubuntu24.04",
                 "nodePools": [{"name": "infer", "gpu": "A10G", "nodes": 2,
                                "nodeSelector": {"node.kubernetes.io/instance-type": "g5.12xlarge"}}]}}))
    shutil.copy(REPO / "gpuop.yaml", w / "gpuop.yaml")
    run_gpuop("synth", "profiles", "-o", "dist", cwd=w, check=True)
    entry = json.loads((w / "dist" / "index.json").read_text())["clusters"][0]
    assert json.dumps(entry["capacity"]).count('"gpusPerNode": 4') >= 1, entry["capacity"]
