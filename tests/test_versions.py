"""One version order (gpuop/catalog/versions.py, on packaging.version) and one "did you mean"
(gpuop/catalog/names.py), as every rule that compares versions or suggests names uses them."""

from __future__ import annotations

import pytest

from gpuop.catalog import names, versions



@pytest.mark.parametrize("a, b, order", [
    ("1.33", "1.33.0", 0),           # trailing zeros do not count (a tuple compare said 1.33 < 1.33.0)
    ("v1.34", "1.34", 0),
    ("1.33", "1.34", -1),
    ("1.9", "1.10", -1),             # numbers, not strings
    ("0.5.0-rc.1", "0.5.0", -1),     # a prerelease ranks below its release (digit extraction ranked it above)
    ("0.5.0-dev", "0.5.0-rc.1", -1),
    ("0.5.0-dev", "0.5.0", -1),
    ("0.4.1", "0.5.0-rc.1", -1),
    ("565", "570.158.01", -1),       # a driver branch against a full version
    ("570.86.16", "570.158.01", -1),
    ("580.95.05", "580.95.5", 0),
    ("4.19", "4.18", 1),             # OpenShift minors
    ("26.7", "26.3", 1),             # stack releases
    ("1.0.0-foo", "1.0.0", 0),       # not PEP 440: compared by its release numbers
])
def test_order(a, b, order):
    pa, pb = versions.parse(a), versions.parse(b)
    assert ((pa > pb) - (pa < pb)) == order
    assert versions.older(a, b) == (order < 0)
    assert versions.at_least(a, b) == (order >= 0)


def test_newest_and_sort():
    assert versions.newest("1.34", "1.33.9") == "1.34"
    assert versions.newest("1.34", "1.34.0") == "1.34"           # the first of equal ones
    assert sorted(["0.5.0", "0.5.0-rc.1", "0.10.0", "0.4.1", "0.5.0-dev"], key=versions.key) == [
        "0.4.1", "0.5.0-dev", "0.5.0-rc.1", "0.5.0", "0.10.0"]


def test_no_version_at_all_is_an_error():
    with pytest.raises(ValueError, match="'latest' is not a version number"):
        versions.parse("latest")


def test_chart_index_lists_the_newest_first_and_a_prerelease_below_its_release():
    from gpuop.outputs.charts import index_yaml
    from gpuop.kube.yamlio import load_all

    entry = lambda v: {"name": "c", "version": v, "appVersion": "1", "kubeVersion": ">=1.31.0-0", "description": "d",  # noqa: E731
                       "digest": v, "file": f"c-{v}.tgz"}
    doc = load_all(index_yaml({"c": [entry("1.2.0"), entry("1.10.0"), entry("1.10.0-rc.1"), entry("1.9.3")]}))[0]
    assert [e["version"] for e in doc["entries"]["c"]] == ["1.10.0", "1.10.0-rc.1", "1.9.3", "1.2.0"]


def test_catalog_releases_in_version_order():
    from gpuop import catalog

    rel = [r.name for r in catalog.load().releases]
    assert rel == sorted(rel, key=versions.key)


@pytest.mark.parametrize("value, allowed, kw, expected", [
    ("h100-sxm5-80gb", ["H200-SXM5-141GB", "H100-SXM5-80GB"], {}, ["H100-SXM5-80GB", "H200-SXM5-141GB"]),  # case first
    ("H100", ["A100-SXM4-80GB", "H100-SXM5-80GB", "H100-PCIE-80GB"], {}, ["H100-SXM5-80GB", "H100-PCIE-80GB"]),
    ("SXM5", ["H100-SXM5-80GB", "L4"], {}, ["H100-SXM5-80GB"]),                            # contains
    ("nodePool", ["nodePools", "namespace"], {"limit": 1}, ["nodePools"]),
    ("nodpools", ["nodePools", "namespace"], {"limit": 1}, ["nodePools"]),                 # spelling
    ("nodes", ["nodeStatusExporter", "nodePools"], {"limit": 1}, ["nodeStatusExporter"]),  # loose: a prefix
    ("nodes", ["nodeStatusExporter", "nodePools"], {"limit": 1, "loose": False}, ["nodePools"]),  # field names
    ("NODEPOOLS", ["nodeStatusExporter", "nodePools"], {"loose": False}, ["nodePools"]),
    ("zzz", ["nodePools", "namespace"], {}, []),
    ("", ["a", "b"], {}, []),
])
def test_close_matches(value, allowed, kw, expected):
    assert names.close_matches(value, allowed, **kw) == expected


def test_did_you_mean_text():
    assert names.did_you_mean("ubuntu2204", ["ubuntu22.04", "ubuntu24.04"], limit=1) == "did you mean ubuntu22.04?"
    assert names.did_you_mean("qqq", ["ubuntu22.04"]) == ""
