"""The defaulting pass (plan/defaults.py): each pool's effective settings, resolved once and read alike by
the validate rules (Context.defaults) and the plan. The case the two used to disagree on: a pool that sets
only `driver.version` under `spec.driver.enabled: false` has no driver, so no rule about a deployed driver
(known issues, driver end of life, the GPU's driver floor) fires on it, and the plan has no DaemonSet for it.
"""

from __future__ import annotations


import pytest

from conftest import write_profile
from gpuop import catalog
from gpuop.catalog import known_issues as known_catalog
from gpuop.errors import UserError
from gpuop.plan import defaults as defaulting
from gpuop.plan.build import build_plan
from gpuop.profile.load import load_profile
from gpuop.validate.runner import validate

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
    return load_profile(write_profile(tmp_path, spec))


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


def known_issue_of_branch_535(monkeypatch):
    """The known-issues catalog with one more entry, on driver branch 535."""
    entry = known_catalog.KnownIssue(
        id="test-535", severity="warning", when=known_catalog.When(driverBranches=("535",)),
        field=("spec", "driver", "version"), effect="branch 535 does something", workaround="use 580",
        sources=("https://example.com/535",))
    real = known_catalog.load()
    monkeypatch.setattr(known_catalog, "load", lambda: real + (entry,))


def end_of_life_passed(monkeypatch):
    monkeypatch.setenv("SOURCE_DATE_EPOCH", JULY_2026)


# rule -> (how the case is set up, the GPU, what its message says): each rule about a deployed driver, on the
# pool's driver.version under spec.driver.enabled: false (no driver: silent) and with driver.enabled: true (fires)
DRIVER_RULES = {
    "driver-eol": (end_of_life_passed, "L40S", "spec.nodePools[0].driver.version: driver branch 535 reached its end "
                   "of life in 2026-06: no more security or bug fixes; branches still supported: 610, 595, 580"),
    "known-issues": (known_issue_of_branch_535, "L40S", "known issue test-535: branch 535 does something"),
    "pool-driver-fits-gpu": (lambda monkeypatch: None, "B200-180GB", "spec.nodePools[0].gpu: B200-180GB (blackwell) is "
                             "not supported by driver branch 535"),
}


@pytest.mark.parametrize("rule", DRIVER_RULES)
def test_a_rule_about_the_deployed_driver_ignores_a_pool_version_under_a_disabled_driver(rule, tmp_path, monkeypatch):
    setup, gpu, message = DRIVER_RULES[rule]
    setup(monkeypatch)
    assert not [i for i in issues(tmp_path, PREINSTALLED_WITH_VERSION.replace("L40S", gpu)) if message in i]
    assert [i for i in issues(tmp_path, DEPLOYED.replace("L40S", gpu)) if message in i]
