"""`gpuop import` reads the GPU Operator version the install names and that release's defaults: a corpus per
release before the newest (tests/data/import-releases/<version>: Helm values, a chart-rendered ClusterPolicy,
an OLM ClusterPolicy with its Subscription) round-trips with `import --check` exit 0 against that version's
own chart (../shared/refs/gpu-operator-releases/<version>/chart); a version gpuop has no catalog data for, or
two that disagree, is a located exit 2."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from gpuop.ops.importer import run
from gpuop.ops.import_io import read_file
from gpuop.ops import import_version

from conftest import REFS, REPO, release_chart, run_gpuop

CORPUS = REPO / "tests" / "data" / "import-releases"
RELEASES = {"v26.3.3": "26.3", "v25.10.1": "25.10"}
CASES = sorted(CORPUS.glob("v*/*.yaml"))
# NVIDIA's charts and bundles of the older releases are optional reference data (refs.lock "optional": `make refs`
# fetches them; the reference folder provisioned beside a checkout may predate them), or the same files as the
# oracle's build copied them from the tag (conftest release_chart: checked against refs.lock)
MISSING = [v for v in RELEASES if release_chart(v) is None]
pytestmark = pytest.mark.skipif(bool(MISSING), reason=f"no reference chart of {', '.join(MISSING)} in {REFS}: "
                                "`make refs` fetches the optional older releases")


def _chart(version: str) -> Path:
    return release_chart(version)


def _profile(text: str) -> dict:
    return yaml.safe_load(text)


def test_the_corpus_covers_values_and_cluster_policies_of_every_older_release():
    assert {(p.parent.name, p.name) for p in CASES} == {
        (v, f) for v in RELEASES for f in ("helm.values.yaml", "clusterpolicy.cluster.yaml",
                                            "openshift-olm.cluster.yaml")}


@pytest.mark.parametrize("case", CASES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_each_release_input_round_trips_with_its_own_release(case, tmp_path):
    version = case.parent.name
    text, code = run([case], None)
    assert code == 0
    spec = _profile(text)["spec"]
    assert spec["release"] == RELEASES[version]                     # that release's operands, not the newest
    assert spec["delivery"]["operator"]["version"] == version
    out, code = run([case], None, check=True, chart=_chart(version), accept_unexpressed=False)
    assert code == 0, out
    assert "0 difference(s); the profile keeps the cluster as it is" in out


@pytest.mark.skipif(not (REFS / "gpu-operator-releases" / "v26.3.3" / "chart").is_dir(),
                    reason="the CLI finds an older release's chart in the reference folder beside a checkout only "
                    "(verify/nvidia_chart.py default_chart): `make refs` fetches it")
def test_the_cli_check_finds_the_release_chart_by_the_version_read(tmp_path):
    case = CORPUS / "v26.3.3" / "clusterpolicy.cluster.yaml"
    proc = run_gpuop("import", str(case), "--check", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout == "gpuop import --check: 0 difference(s); the profile keeps the cluster as it is\n"
    proc = run_gpuop("import", str(case), cwd=tmp_path)
    assert "version: v26.3.3  # gpuop import: read from the ClusterPolicy's label app.kubernetes.io/version" \
        in proc.stdout


def test_an_older_install_checked_against_the_newest_release_shows_the_operands_that_would_change(tmp_path):
    """The version matters: the v26.3.3 install compared with the same profile on release 26.7 differs in its
    operand images (exit 3), so a silent newest-release import would have changed the cluster."""
    case = CORPUS / "v26.3.3" / "helm.values.yaml"
    text, _ = run([case], None)
    doc = _profile(text)
    doc["spec"]["release"] = "26.7"
    doc["spec"]["delivery"]["operator"]["version"] = "v26.7.0"
    newer = tmp_path / "newer.yaml"
    newer.write_text(yaml.safe_dump(doc, sort_keys=False))
    out, code = run([case], None, check=True, chart=_chart("v26.3.3"), profile=newer)
    assert code == 3
    assert "devicePlugin.version" in out or "k8s-device-plugin" in out or "v0.20.0" in out, out


def test_an_unknown_operator_version_is_a_located_error(tmp_path):
    src = tmp_path / "old.values.yaml"
    src.write_text("driver:\n  enabled: true\noperator:\n  version: v24.9.2\n")
    proc = run_gpuop("import", str(src), cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert proc.stderr == (
        'old.values.yaml:4:3: operator.version: Unsupported value: "v24.9.2": operator.version (the operator image\'s tag) '
        'names GPU Operator v24.9.2, which gpuop has no catalog data for (chart defaults, operand versions); '
        'supported values: "v26.7.0", "v26.3.3", "v25.10.1"\n'
        "gpuop: 1 error; nothing written\n")


def test_an_unknown_csv_in_the_subscription_is_a_located_error(tmp_path):
    src = tmp_path / "olm.yaml"
    src.write_text((CORPUS / "v26.3.3" / "openshift-olm.cluster.yaml").read_text().replace(
        "startingCSV: gpu-operator-certified.v26.3.3", "startingCSV: gpu-operator-certified.v24.3.0"))
    proc = run_gpuop("import", str(src), cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.startswith('olm.yaml:14:3: spec.startingCSV: Unsupported value: "v24.3.0": the Subscription\'s '
                                  "spec.startingCSV names GPU Operator v24.3.0")


def test_versions_that_disagree_are_located_at_each_other(tmp_path):
    src = tmp_path / "mixed.yaml"
    cp = (CORPUS / "v26.3.3" / "clusterpolicy.cluster.yaml").read_text()
    sub = (CORPUS / "v25.10.1" / "openshift-olm.cluster.yaml").read_text().split("---")[0]
    src.write_text(sub + "---\n" + cp)
    proc = run_gpuop("import", str(src), cwd=tmp_path)
    assert proc.returncode == 2
    assert "names GPU Operator v" in proc.stderr and "give the documents of one install" in proc.stderr
    assert proc.stderr.startswith("mixed.yaml:") and "Traceback" not in proc.stderr


@pytest.mark.fast
def test_no_version_named_is_assumed_out_loud_as_the_newest():
    (doc,) = [d for d in _docs("driver:\n  enabled: true\n")]
    decided = import_version.decide([doc])
    assert (decided.version, decided.state) == ("v26.7.0", "assumed")
    assert "names no GPU Operator version" in decided.reason


@pytest.mark.fast
@pytest.mark.parametrize("image, version", [
    ("nvcr.io/nvidia/gpu-operator:v26.3.3", "v26.3.3"),
    ("registry.example.com:5000/nvidia/gpu-operator:v25.10.1", "v25.10.1"),
    ("nvcr.io/nvidia/gpu-operator:v26.3.3@sha256:" + "a" * 64, "v26.3.3"),
])
def test_the_operator_deployment_image_tag_names_the_version(image, version):
    text = ("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: gpu-operator}\nspec:\n  template:\n    spec:\n"
            f"      containers:\n        - name: gpu-operator\n          image: \"{image}\"\n")
    (doc,) = _docs(text)
    assert [e.version for e in import_version.evidence([doc])] == [version]


def _docs(text: str):
    import tempfile
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
        f.write(text)
    return read_file(Path(f.name))
