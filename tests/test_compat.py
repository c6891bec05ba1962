"""Compatibility rules: each rule gets a profile that breaks it and the exact located message.

The rules of compat.py run through the real validate stage (validate.validate), so these tests also
prove they are wired in. The Kubernetes/OS matrix errors come from validate.py itself; they are listed
here too, so every compatibility rule has its exact message in one place.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import profile_text, write_profile

from gpuop import catalog
from gpuop.errors import UserError
from gpuop.plan.build import build_plan
from gpuop.profile.load import load_profile
from gpuop.validate.runner import validate




def run(tmp_path: Path, spec: str, cat=None):
    """(errors, warnings) as (path, message) pairs, and the file's line of each, for a profile whose spec
    is `spec` (YAML lines under `spec:`)."""
    f = write_profile(tmp_path, spec)
    try:
        valid = validate(load_profile(f), cat or catalog.load())
    except UserError as exc:
        return [(i.line, i.path, i.message) for i in exc.issues], []
    return [], [(i.line, i.path, i.message) for i in valid.warnings]


def with_drivers(extra: dict) -> catalog.Catalog:
    """The real catalog plus one more driver branch (for floors no catalogued branch can break)."""
    cat = catalog.load()
    return cat.model_copy(update={"drivers": cat.drivers + (catalog.DriverBranch(**extra),)})


def with_matrix(**changes) -> catalog.Catalog:
    cat = catalog.load()
    release = cat.releases[-1]
    matrix = release.matrix.model_copy(update=changes)
    return cat.model_copy(update={"releases": cat.releases[:-1] + (release.model_copy(update={"matrix": matrix}),)})


def test_a_profile_that_breaks_nothing_has_no_issues(tmp_path):
    assert run(tmp_path, """\
        platform: {type: kubernetes, version: "1.33"}
        os: ubuntu24.04
        nodePools: [{name: a, gpu: B200-180GB}]
        """) == ([], [])


def test_driver_branch_that_does_not_drive_the_pools_gpu(tmp_path):
    errors, _ = run(tmp_path, """\
        platform: {type: kubernetes, version: "1.33"}
        os: ubuntu24.04
        driver: {version: "535"}
        nodePools:
          - {name: a, gpu: H100-SXM5-80GB}
          - {name: b, gpu: B200-180GB}
        """)
    assert errors == [(10, "spec.nodePools[1].gpu", "B200-180GB (blackwell) is not supported by driver branch 535 "
                       "(spec.driver.version, branch 535 -> 535.309.01); set spec.driver.version to a branch for "
                       "blackwell: 610, 595, 580")]


def test_release_default_driver_is_checked_too(tmp_path):
    errors, _ = run(tmp_path, """\
        platform: {type: kubernetes, version: "1.33"}
        os: ubuntu24.04
        nodePools: [{name: old, gpu: V100}]
        """)
    assert errors == [(7, "spec.nodePools[0].gpu", "V100 (volta) is not supported by driver branch 595 (the stack "
                       "release's default driver); set spec.driver.version to a branch for volta: 580, 535")]


@pytest.mark.parametrize("gpu, why", [("B200-180GB", "Blackwell"), ("GH200-96GB", "GH200")])
def test_proprietary_modules_on_a_gpu_that_needs_the_open_ones(tmp_path, gpu, why):
    errors, _ = run(tmp_path, f"""\
        platform: {{type: kubernetes, version: "1.33"}}
        os: ubuntu24.04
        driver: {{version: "580", kernelModuleType: proprietary}}
        nodePools: [{{name: a, gpu: {gpu}}}]
        """)
    assert errors == [(7, "spec.driver.kernelModuleType",
                       f"{gpu} (spec.nodePools[0]) needs the open kernel modules; allowed: auto, open")]


def test_driver_floor_of_hgx_b200(tmp_path):
    """No catalogued branch that drives Blackwell is below 570.133.20, so the rule is shown with a
    catalog that also lists an (older) 570 branch."""
    cat = with_drivers({"branch": "570", "latest": "570.124.06", "versions": ["570.124.06"],
                        "architectures": ["turing", "ampere", "ada", "hopper", "blackwell"]})
    errors, _ = run(tmp_path, """\
        platform: {type: kubernetes, version: "1.33"}
        os: ubuntu24.04
        driver: {version: "570.124.06"}
        nodePools: [{name: a, gpu: B200-180GB}]
        """, cat)
    assert errors == [(8, "spec.nodePools[0].gpu", "B200-180GB needs driver 570.133.20 or newer, but the driver is "
                       "570.124.06 (spec.driver.version); allowed: a driver >= 570.133.20")]


def test_driver_version_the_catalog_does_not_list_is_a_warning(tmp_path):
    errors, warnings = run(tmp_path, """\
        platform: {type: kubernetes, version: "1.33"}
        os: ubuntu24.04
        driver: {version: "580.10.01"}
        nodePools: [{name: a, gpu: H100-SXM5-80GB}]
        """)
    assert errors == []
    assert warnings == [(7, "spec.driver.version", "driver 580.10.01 is not a version the catalog lists for branch "
                         "580 (listed: 580.173.02); the driver image with this tag must exist in the registry")]


def test_kubernetes_outside_the_matrix(tmp_path):
    errors, _ = run(tmp_path, """\
        platform: {type: kubernetes, version: "1.31"}
        os: ubuntu24.04
        nodePools: [{name: a, gpu: L4}]
        """)
    assert errors == [(5, "spec.platform.version", "Kubernetes 1.31 is outside stack release 26.7's support matrix; "
                       "allowed: 1.32, 1.33, 1.34, 1.35, 1.36")]


def test_os_outside_the_matrix_for_that_kubernetes(tmp_path):
    """Ubuntu 24.04 is validated from Kubernetes 1.32, the other OSes from 1.33 (NOTES.md §4)."""
    errors, _ = run(tmp_path, """\
        platform: {type: kubernetes, version: "1.32"}
        os: ubuntu22.04
        nodePools: [{name: a, gpu: L4}]
        """)
    assert errors == [(6, "spec.os", "ubuntu22.04 is supported with Kubernetes 1.33, 1.34, 1.35, 1.36 in stack "
                       "release 26.7, not 1.32; allowed with Kubernetes 1.32: ubuntu24.04")]
    assert run(tmp_path, """\
        platform: {type: kubernetes, version: "1.32"}
        os: ubuntu24.04
        nodePools: [{name: a, gpu: L4}]
        """) == ([], [])


def test_partner_validated_os_is_a_warning(tmp_path):
    errors, warnings = run(tmp_path, """\
        platform: {type: kubernetes, version: "1.34"}
        os: sles15.6
        nodePools: [{name: a, gpu: L40S}]
        """)
    assert errors == []
    assert warnings == [(6, "spec.os", "sles15.6 is partner-validated in stack release 26.7: a partner validates "
                         "it, NVIDIA does not test it; supported by NVIDIA: ubuntu22.04, ubuntu24.04, ubuntu26.04, "
                         "rhel8.8, rhel8.10, rhel9.2, rhel9.4, rhel9.6, rhel9.7, rhel9.8, rhel10.0, rhel10.1, "
                         "rhel10.2, rocky8.10, rocky9.7, rocky10.1")]


def test_runtime_handled_only_in_code_is_a_warning(tmp_path):
    errors, warnings = run(tmp_path, """\
        platform: {type: kubernetes, version: "1.33"}
        os: ubuntu24.04
        containerRuntime: docker
        nodePools: [{name: a, gpu: L4}]
        """)
    assert errors == []
    assert warnings == [(7, "spec.containerRuntime", "container runtime docker is not in stack release 26.7's "
                         "support matrix (The Operator still handles docker in code, but the 26.7 support matrix "
                         "lists only containerd and CRI-O.); supported: containerd 1.8-2.3, crio")]


def test_runtime_outside_the_matrix(tmp_path):
    cat = with_matrix(containerRuntimes=("containerd", "crio"))
    errors, _ = run(tmp_path, """\
        platform: {type: kubernetes, version: "1.33"}
        os: ubuntu24.04
        containerRuntime: docker
        nodePools: [{name: a, gpu: L4}]
        """, cat)
    assert errors == [(7, "spec.containerRuntime", "container runtime docker is outside stack release 26.7's "
                       "support matrix; allowed: containerd, crio")]


def test_a_branch_resolves_to_the_catalogs_newest_driver(tmp_path):
    f = tmp_path / "c1.yaml"
    f.write_text(profile_text("""\
        platform: {type: kubernetes, version: "1.33"}
        os: ubuntu24.04
        driver: {version: "580"}
        nodePools: [{name: a, gpu: B200-180GB}]
        """))
    cat = catalog.load()
    plan = build_plan(validate(load_profile(f), cat), cat)
    assert plan.driver_version == "580.173.02"
    assert plan.image("driver").tag == "580.173.02-ubuntu24.04"
