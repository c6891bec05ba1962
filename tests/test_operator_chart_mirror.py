"""spec.delivery.operator.chartRepository: a cluster that reaches only its own mirror pulls NVIDIA's
gpu-operator chart from there (Argo CD Application, Flux HelmRepository); a URL gpuop cannot deliver is
refused at its field, exit 2. tests/test_gitops_rehearsal.py has Flux install NVIDIA's chart from such a
mirror on the rehearsal control plane."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from conftest import run_gpuop
from gpuop.cli.main import main

ROOT = Path(__file__).resolve().parents[1]


def _keep_operator(tmp_path: Path, repository: str) -> Path:
    (tmp_path / "profiles").mkdir()
    (tmp_path / "gpuop.yaml").write_text((ROOT / "gpuop.yaml").read_text())
    (tmp_path / "profiles" / "_base.yaml").write_text((ROOT / "profiles" / "_base.yaml").read_text())
    doc = yaml.safe_load((ROOT / "profiles" / "keep-operator.yaml").read_text())
    doc["spec"]["delivery"]["operator"]["chartRepository"] = repository
    (tmp_path / "profiles" / "keep-operator.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    return tmp_path


@pytest.mark.parametrize("repository, kind, argocd_url", [
    ("https://charts.mirror.example.com/nvidia", None, "https://charts.mirror.example.com/nvidia"),
    # Argo CD's Helm OCI form: no scheme (outputs/gitops.py argocd_repo_url)
    ("oci://registry.mirror.example.com/charts", "oci", "registry.mirror.example.com/charts")])
def test_the_operator_chart_comes_from_the_mirror_the_profile_names(tmp_path, repository, kind, argocd_url):
    root = _keep_operator(tmp_path, repository)
    assert main(["synth", str(root / "profiles"), "-o", str(root / "dist"),
                 "--settings", str(root / "gpuop.yaml")]) == 0
    repo = yaml.safe_load((root / "dist" / "keep-operator" / "flux" / "helmrepository.yaml").read_text())
    app = yaml.safe_load((root / "dist" / "keep-operator" / "argocd" / "application.yaml").read_text())
    assert (repo["spec"]["url"], repo["spec"].get("type")) == (repository, kind)
    assert app["spec"]["source"]["repoURL"] == argocd_url


def test_an_operator_chart_repository_over_plain_http_is_refused_located_with_exit_2(tmp_path):
    root = _keep_operator(tmp_path, "http://charts.example.com/nvidia")
    proc = run_gpuop("validate", "profiles", cwd=root)
    assert proc.returncode == 2, proc.stderr
    line = next(n for n, t in enumerate((root / "profiles" / "keep-operator.yaml").read_text().splitlines(), 1)
                if "chartRepository" in t)
    assert proc.stderr.startswith(
        f"profiles/keep-operator.yaml:{line}:")
    assert ("spec.delivery.operator.chartRepository: 'http://charts.example.com/nvidia' is not an allowed URL: it "
            "has scheme 'http'; allowed: https, oci; allowed: https://HOST/..., oci://HOST/...\n") in proc.stderr
