"""The defaulting pass (plan/defaults.py): each pool's effective settings, resolved once and read alike by
the validate rules (Context.defaults) and the plan. The case the two used to disagree on: a pool that sets
only `driver.version` under `spec.driver.enabled: false` has no driver, so no rule about a deployed driver
(known issues, driver end of life, the GPU's driver floor) fires on it, and the plan has no DaemonSet for it.
"""

from __future__ import annotations

import textwrap

import pytest

from gpuop import catalog
from gpuop.catalog import known_issues as known_catalog
from gpuop.errors import UserError
from gpuop.plan import defaults as defaulting
from gpuop.plan.build import build_plan
from gpuop.profile.load import load_profile
from gpuop.validate.runner import validate

HEAD = """\
apiVersion: gpuop/v1alpha1
kind: ClusterProfile
metadata: {name: c1}
spec:
"""

PREINSTALLED_WITH_VERSION = """\
platform: {type: kubernetes, version: "1.33"}
os: ubuntu24.04
driver: {enabled: false}
nodePools:
  - name: infer
    gpu: L40S
    driver: {version: "535"}
"""
DEPLOYED = PREINSTALLED_WITH_VERSION.replace('driver: {version: "535"}', 'driver: {enabled: true, version: "535"}')
JULY_2026 = "1782864000"        # 2026-07-01: branch 535's end of life (2026-06) is past


def profile(tmp_path, spec: str):
    (tmp_path / "c1.yaml").write_text(HEAD + textwrap.indent(spec, "  "))
    return load_profile(tmp_path / "c1.yaml")


def issues(tmp_path, spec: str, cat=None) -> list[str]:
    try:
        found = validate(profile(tmp_path, spec), cat or catalog.load()).warnings
    except UserError as exc:
        found = exc.issues
    return [f"{i.path}: {i.message}" for i in found]


def test_a_pool_inherits_what_it_leaves_out_and_keeps_what_it_sets(tmp_path):
    spec = profile(tmp_path, """\
platform: {type: kubernetes, version: "1.33"}
os: ubuntu24.04
driver: {version: "580", rdma: {enabled: true}}
nodePools:
  - {name: a, gpu: L40S}
  - {name: b, gpu: L40S, os: ubuntu22.04, nodeSelector: {x: b}, driver: {version: "595", rdma: {enabled: false}}}
""")
    d = defaulting.of(validate(spec, catalog.load()).profile.spec)
    a, b = d.pools
    assert d.runtime == "containerd"
    assert (a.os, a.os_own, a.driver, a.driver_version, a.driver_version_own, a.sidecars.rdma, a.rdma_own) == (
        "ubuntu24.04", False, True, "580", False, True, False)
    assert (b.os, b.os_own, b.driver, b.driver_version, b.driver_version_own, b.sidecars.rdma, b.rdma_own) == (
        "ubuntu22.04", True, True, "595", True, False, True)


def test_a_pool_with_only_a_driver_version_under_a_disabled_driver_has_no_driver(tmp_path):
    cat = catalog.load()
    pool, = defaulting.of(validate(profile(tmp_path, PREINSTALLED_WITH_VERSION), cat).profile.spec).pools
    assert (pool.driver, pool.driver_own, pool.driver_version) == (False, False, "535")
    pool, = defaulting.of(validate(profile(tmp_path, DEPLOYED), cat).profile.spec).pools
    assert (pool.driver, pool.driver_own) == (True, True)


def test_the_plan_deploys_no_driver_for_a_version_under_a_disabled_driver(tmp_path):
    cat = catalog.load()
    assert build_plan(validate(profile(tmp_path, PREINSTALLED_WITH_VERSION), cat), cat).driver_variants == ()
    deployed = build_plan(validate(profile(tmp_path, DEPLOYED), cat), cat).driver_variants
    assert [v.version.split(".")[0] for v in deployed] == ["535"]


def test_driver_end_of_life_is_not_warned_for_a_driver_that_is_not_deployed(tmp_path, monkeypatch):
    monkeypatch.setenv("SOURCE_DATE_EPOCH", JULY_2026)
    eol = ("spec.nodePools[0].driver.version: driver branch 535 reached its end of life in 2026-06: no more "
           "security or bug fixes; branches still supported: 610, 595, 580")
    assert not [i for i in issues(tmp_path, PREINSTALLED_WITH_VERSION) if "end of life" in i]
    assert [i for i in issues(tmp_path, DEPLOYED) if "end of life" in i][0].startswith(eol)


def test_a_known_issue_of_a_driver_branch_does_not_fire_on_a_driver_that_is_not_deployed(tmp_path, monkeypatch):
    entry = known_catalog.KnownIssue(
        id="test-535", severity="warning", when=known_catalog.When(driverBranches=("535",)),
        field=("spec", "driver", "version"), effect="branch 535 does something", workaround="use 580",
        sources=("https://example.com/535",))
    real = known_catalog.load()
    monkeypatch.setattr(known_catalog, "load", lambda: real + (entry,))
    assert not [i for i in issues(tmp_path, PREINSTALLED_WITH_VERSION) if "known issue test-535" in i]
    assert [i for i in issues(tmp_path, DEPLOYED) if "known issue test-535" in i]


def test_the_gpu_driver_floor_is_not_checked_against_a_driver_that_is_not_deployed(tmp_path):
    b200 = PREINSTALLED_WITH_VERSION.replace("gpu: L40S", "gpu: B200-180GB")
    assert not [i for i in issues(tmp_path, b200) if "not supported by driver branch" in i]
    assert [i for i in issues(tmp_path, b200.replace('driver: {version: "535"}',
                                                     'driver: {enabled: true, version: "535"}'))
            if "not supported by driver branch" in i]
