"""Helm itself agrees with gpuop's chart repository: every archive of dist/charts loads in Helm 4's engine
(helm-python-sdk), and `helm repo index` over the same archives lists the same charts, versions (newest
first), digests and fields as gpuop's charts/index.yaml, both the committed one and the one gpuop's code
writes for these archives now (outputs/charts.py, read from the archives). No compile: the committed
dist/ is the input."""

from __future__ import annotations

import shutil

import pytest
import yaml

from conftest import REPO


CHARTS = REPO / "dist" / "charts"
FIELDS = ("apiVersion", "name", "version", "appVersion", "kubeVersion", "description", "type", "urls")


@pytest.fixture(scope="module")
def helm():
    return pytest.importorskip("helm_python")


def test_every_archive_loads_in_helm(helm):
    archives = sorted(CHARTS.glob("*.tgz"))
    assert archives
    for archive in archives:
        helm.Chart.load(str(archive))


@pytest.mark.parametrize("source", ["committed", "written now"])
def test_helm_repo_index_agrees_with_ours(helm, tmp_path, source):
    from gpuop.outputs.charts import entries_from, index_yaml

    archives = {a.name: a for a in sorted(CHARTS.glob("*.tgz"))}
    for archive in archives.values():
        shutil.copy(archive, tmp_path / archive.name)
    theirs = helm.repo_index_generate(str(tmp_path))["entries"]
    text = (CHARTS / "index.yaml").read_text() if source == "committed" else index_yaml(entries_from(archives))
    ours = yaml.safe_load(text)["entries"]
    assert sorted(ours) == sorted(theirs)
    for name in ours:
        assert [{k: e.get(k) for k in FIELDS} for e in ours[name]] == \
               [{k: e.get(k) for k in FIELDS} for e in theirs[name]], name
        assert [e["digest"] for e in ours[name]] == [e["digest"].removeprefix("sha256:") for e in theirs[name]], name
