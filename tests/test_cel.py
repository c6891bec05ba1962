"""gpuop's hand-coded CEL rules: the list matches the CEL rules in the upstream CRDs, each rule
refuses an object that breaks it (and accepts one that keeps it), and `gpuop validate DIST` reports
what the API server would reject in a compiled (or hand-edited) output folder."""

from __future__ import annotations

import copy
import shutil

import pytest
import yaml

from gpuop.verify import cel

from conftest import CRDS, run_gpuop


def _crd_rules() -> set[tuple]:
    found = set()

    def walk(node, path, group, kind):
        if isinstance(node, dict):
            for r in node.get("x-kubernetes-validations", []):
                found.add((group, kind, path, r["rule"], r["message"]))
            for k, v in node.items():
                if k == "properties":
                    for pk, pv in v.items():
                        walk(pv, path + (pk,), group, kind)
                elif k != "x-kubernetes-validations":
                    walk(v, path, group, kind)
        elif isinstance(node, list):
            for x in node:
                walk(x, path, group, kind)

    for f in sorted(CRDS.glob("*.yaml")):
        crd = yaml.safe_load(f.read_text())
        for v in crd["spec"]["versions"]:
            if v.get("served"):
                walk(v["schema"]["openAPIV3Schema"], (), crd["spec"]["group"], crd["spec"]["names"]["kind"])
    return found


def test_rule_table_matches_the_upstream_crds():
    assert {(r.group, r.kind, r.path, r.rule, r.message) for r in cel.RULES} == _crd_rules()
    assert len(cel.RULES) == 9


HR = {"apiVersion": "helm.toolkit.fluxcd.io/v2", "kind": "HelmRelease", "metadata": {"name": "x"},
      "spec": {"interval": "10m", "chart": {"spec": {"chart": "c", "sourceRef": {"kind": "GitRepository", "name": "g"}}}}}
KS = {"apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization", "metadata": {"name": "x"},
      "spec": {"interval": "10m", "prune": True, "sourceRef": {"kind": "GitRepository", "name": "g"}}}
GR = {"apiVersion": "source.toolkit.fluxcd.io/v1", "kind": "GitRepository", "metadata": {"name": "x"},
      "spec": {"interval": "10m", "url": "https://example.com/r.git"}}
HC = {"apiVersion": "source.toolkit.fluxcd.io/v1", "kind": "HelmChart", "metadata": {"name": "x"},
      "spec": {"interval": "10m", "chart": "c", "sourceRef": {"kind": "GitRepository", "name": "g"}}}


def _with(base, path, value):
    obj = copy.deepcopy(base)
    node = obj
    for p in path[:-1]:
        node = node.setdefault(p, {})
    node[path[-1]] = value
    return obj


BROKEN = [
    (_with(HR, ("spec", "chartRef"), {"kind": "OCIRepository", "name": "o"}), "either chart or chartRef must be set"),
    ({**HR, "spec": {"interval": "10m"}}, "either chart or chartRef must be set"),
    (_with(HR, ("spec", "install", "strategy"), {"name": "RemediateOnFailure", "retryInterval": "1m"}),
     ".retryInterval cannot be set when .name is 'RemediateOnFailure'"),
    (_with(HR, ("spec", "kubeConfig"), {}), "exactly one of spec.kubeConfig.configMapRef or spec.kubeConfig.secretRef"),
    (_with(HR, ("spec", "kubeConfig"), {"secretRef": {"name": "a"}, "configMapRef": {"name": "b"}}),
     "exactly one of spec.kubeConfig.configMapRef or spec.kubeConfig.secretRef"),
    (_with(HR, ("spec", "upgrade", "strategy"), {"name": "RemediateOnFailure", "retryInterval": "1m"}),
     ".retryInterval can only be set when .name is 'RetryOnFailure'"),
    (_with(KS, ("spec", "kubeConfig"), {}), "exactly one of spec.kubeConfig.configMapRef"),
    (_with(KS, ("spec", "kubeConfig"), {"secretRef": {"name": "a"}, "configMapRef": {"name": "b"}}),
     "exactly one of spec.kubeConfig.configMapRef"),
    (_with(GR, ("spec", "serviceAccountName"), "sa"), "serviceAccountName can only be set when provider is 'azure' or 'aws'"),
    (_with(HC, ("spec", "verify"), {"provider": "cosign"}), "spec.verify is only supported when spec.sourceRef.kind"),
]


@pytest.mark.parametrize("obj, message", BROKEN)
def test_each_rule_refuses_an_object_that_breaks_it(obj, message):
    errs = cel.errors(obj)
    assert len(errs) == 1 and message in errs[0], errs


@pytest.mark.parametrize("obj", [HR, KS, GR, HC,
                                 _with(GR, ("spec", "serviceAccountName"), "sa") | {"spec": {**GR["spec"], "serviceAccountName": "sa", "provider": "aws"}},
                                 _with(HR, ("spec", "upgrade", "strategy"), {"name": "RetryOnFailure", "retryInterval": "1m"})])
def test_objects_that_keep_the_rules_pass(obj):
    assert cel.errors(obj) == []


def test_validate_reports_what_the_api_server_would_reject_in_an_output(dist, tmp_path):
    out = tmp_path / "dist"
    shutil.copytree(dist, out)
    ok = run_gpuop("validate", str(out), cwd=tmp_path)
    assert ok.returncode == 0, ok.stderr
    hr = out / "prod-east" / "flux" / "helmrelease.yaml"
    doc = yaml.safe_load(hr.read_text())
    doc["spec"]["chartRef"] = {"kind": "OCIRepository", "name": "gpuop-prod-east"}
    hr.write_text(yaml.safe_dump(doc))
    ds = out / "prod-east" / "manifests" / "03-driver.yaml"
    ds.write_text(ds.read_text().replace("hostPID: true", "hostPid: true"))
    proc = run_gpuop("validate", str(out), cwd=tmp_path)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert lines[-1] == "gpuop: 2 errors; nothing written"
    assert any("helmrelease.yaml: HelmRelease/gpuop-prod-east: spec: either chart or chartRef must be set" in l
               for l in lines), lines
    assert any("DaemonSet/nvidia-driver-daemonset: spec.template.spec.hostPid: Additional properties are not "
               "allowed ('hostPid' was unexpected)" in l for l in lines), lines
