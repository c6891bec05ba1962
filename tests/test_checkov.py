"""checkov (the security scanner, from PyPI) over the compiled examples: every finding is either fixed
or listed in tests/checkov-accepted.yaml with the reason it stays.

checkov runs from its own virtualenv: checkov 3.3.30 requires packaging<24 and pytest 9.2 requires
packaging>=24, so the two cannot share .venv. `make checkov-venv` (or the commands in the README) creates
.venv-checkov; GPUOP_CHECKOV names another checkov executable."""

from __future__ import annotations

import fnmatch
import json
import os
import shutil
import subprocess
from pathlib import Path

import helm_python as helm
import pytest

from gpuop.kube.yamlio import load

from conftest import REPO

pytestmark = pytest.mark.slow

ACCEPTED = Path(__file__).with_name("checkov-accepted.yaml")


def checkov_exe() -> str | None:
    for candidate in (os.environ.get("GPUOP_CHECKOV"), str(REPO / ".venv-checkov" / "bin" / "checkov"),
                      shutil.which("checkov")):
        if candidate and Path(candidate).is_file():
            return candidate
    return None


@pytest.fixture(scope="module")
def findings(dist, index, tmp_path_factory) -> set[tuple[str, str]]:
    exe = checkov_exe()
    if exe is None:
        pytest.skip("checkov not installed: python -m venv .venv-checkov && .venv-checkov/bin/pip install "
                    "checkov==3.3.30 (it cannot share .venv with pytest 9.2: packaging<24 vs >=24)")
    root = tmp_path_factory.mktemp("checkov")
    for entry in index["clusters"]:
        out = root / entry["name"]
        out.mkdir()
        for f in sorted((dist / entry["manifests"]).glob("*.yaml")):
            if f.name != "kustomization.yaml":
                shutil.copy(f, out / f.name)
        chart = helm.Chart.load(str(dist / entry["chart"]))     # the `helm test` pod, rendered
        try:
            rendered = chart.render({}, name=entry["releaseName"], namespace=entry["namespace"])
        finally:
            chart.close()
        (out / "helm-test-pod.yaml").write_text(rendered[f"{entry['name']}/templates/tests/gpu-smoke-test.yaml"])
    proc = subprocess.run([exe, "-d", str(root), "--framework", "kubernetes", "--quiet", "--compact",
                           "--skip-download", "-o", "json"], capture_output=True, text=True, timeout=900)
    assert proc.returncode in (0, 1), proc.stderr[-2000:]
    reports = json.loads(proc.stdout)
    reports = reports if isinstance(reports, list) else [reports]
    assert reports[0]["summary"]["resource_count"] > 100 and reports[0]["summary"]["parsing_errors"] == 0
    return {(f["check_id"], f["resource"]) for r in reports for f in r["results"]["failed_checks"]}


def accepted() -> list[dict]:
    return load(ACCEPTED.read_text())["accepted"]


def test_every_checkov_finding_is_fixed_or_accepted_with_a_reason(findings):
    entries = accepted()
    unexplained = sorted(f for f in findings if not any(
        e["check"] == f[0] and any(fnmatch.fnmatchcase(f[1], p) for p in e["resources"]) for e in entries))
    assert unexplained == []
    for e in entries:
        assert e["status"] in {"stays", "component", "chart"} and len(e["reason"]) > 20, e["check"]


def test_no_accepted_entry_is_stale(findings):
    for e in accepted():
        assert any(c == e["check"] and any(fnmatch.fnmatchcase(r, p) for p in e["resources"])
                   for c, r in findings), f"{e['check']} no longer reported: remove it from {ACCEPTED.name}"


def test_the_helm_test_pod_passes_the_security_checks(findings):
    """The pod gpuop writes itself (outputs/helm.py) is fixed, not accepted: non-root, no escalation,
    no capabilities, read-only root, seccomp, no service-account token."""
    security = {"CKV_K8S_16", "CKV_K8S_20", "CKV_K8S_22", "CKV_K8S_23", "CKV_K8S_28", "CKV_K8S_29",
                "CKV_K8S_30", "CKV_K8S_31", "CKV_K8S_37", "CKV_K8S_38", "CKV_K8S_40", "CKV_K8S_10",
                "CKV_K8S_11", "CKV_K8S_12", "CKV_K8S_13"}
    assert sorted((c, r) for c, r in findings if "gpu-smoke-test" in r and c in security) == []
