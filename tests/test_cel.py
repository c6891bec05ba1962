"""The CRDs' CEL rules as gpuop evaluates them (verify/cel.py, celpy over catalog/data/crd-cel-rules.yaml):
the data file is what the upstream CRDs give, each rule refuses an object that breaks it (and accepts
one that keeps it) with the CRD's own message, the verdicts match the hand-coded predicates they
replaced, gpuop's own output (operator mode's NVIDIADriver CRs too) keeps every rule, and `gpuop validate DIST` reports what the API server
would reject in a compiled (or hand-edited) output folder."""

from __future__ import annotations

import copy
import shutil
import subprocess
import sys
from collections import Counter

import pytest
import yaml

import crd_cel_rules
from gpuop.verify import cel
from gpuop.verify.crdschema import CrdValidator

from conftest import CRDS, REFS, REPO, load_dir, run_main

# NVIDIA's CRDs of the kinds operator mode writes (ClusterPolicy: no CEL rule; NVIDIADriver: three)
NVIDIA_CRDS = (REFS / "gpu-operator" / "nvidia.com_clusterpolicies.yaml",
               REFS / "gpu-operator" / "nvidia.com_nvidiadrivers.yaml")


def test_data_file_is_what_the_crds_give():
    """Regenerating from the reference CRDs gives the committed file: it cannot drift from upstream."""
    assert crd_cel_rules.render(REFS) == crd_cel_rules.DATA.read_text(), \
        "catalog/data/crd-cel-rules.yaml is stale: run .venv/bin/python tests/crd_cel_rules.py"
    assert crd_cel_rules.DATA == cel._FILE


def _crd_rules() -> set[tuple]:
    """Every CEL rule of the CRD files, found by a walk independent of the generator's."""
    found = set()

    def walk(node, path, group, kind, version):
        if isinstance(node, dict):
            for r in node.get("x-kubernetes-validations", []):
                found.add((group, kind, version, path, r["rule"], r.get("message")))
            for k, v in node.items():
                if k == "properties":
                    for pk, pv in v.items():
                        walk(pv, path + (pk,), group, kind, version)
                elif k in ("items", "additionalProperties"):
                    walk(v, path + (None,), group, kind, version)
                elif k != "x-kubernetes-validations":
                    walk(v, path, group, kind, version)
        elif isinstance(node, list):
            for x in node:
                walk(x, path, group, kind, version)

    for f in sorted(CRDS.glob("*.yaml")) + list(NVIDIA_CRDS):
        crd = yaml.load(f.read_bytes(), Loader=yaml.CSafeLoader)
        for v in crd["spec"]["versions"]:
            if v.get("served"):
                walk(v["schema"]["openAPIV3Schema"], (), crd["spec"]["group"], crd["spec"]["names"]["kind"], v["name"])
    return found


def test_rule_table_matches_the_upstream_crds():
    rules = cel.rules()
    assert {(r.group, r.kind, r.version, r.steps, r.rule, r.message) for r in rules} == _crd_rules()
    assert len(rules) == 12 and len({r.name for r in rules}) == 12
    assert Counter(r.kind for r in rules) == {"HelmRelease": 5, "Kustomization": 2, "GitRepository": 1,
                                              "HelmChart": 1, "NVIDIADriver": 3}
    for r in rules:
        assert (REFS / r.source["crd"]).is_file() and len(r.source["commit"]) == 40, r


HR = {"apiVersion": "helm.toolkit.fluxcd.io/v2", "kind": "HelmRelease", "metadata": {"name": "x"},
      "spec": {"interval": "10m", "chart": {"spec": {"chart": "c", "sourceRef": {"kind": "GitRepository", "name": "g"}}}}}
KS = {"apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization", "metadata": {"name": "x"},
      "spec": {"interval": "10m", "prune": True, "sourceRef": {"kind": "GitRepository", "name": "g"}}}
GR = {"apiVersion": "source.toolkit.fluxcd.io/v1", "kind": "GitRepository", "metadata": {"name": "x"},
      "spec": {"interval": "10m", "url": "https://example.com/r.git"}}
HC = {"apiVersion": "source.toolkit.fluxcd.io/v1", "kind": "HelmChart", "metadata": {"name": "x"},
      "spec": {"interval": "10m", "chart": "c", "sourceRef": {"kind": "GitRepository", "name": "g"}}}
ND = {"apiVersion": "nvidia.com/v1alpha1", "kind": "NVIDIADriver", "metadata": {"name": "default"},
      "spec": {"default": True, "driverType": "gpu", "image": "driver", "repository": "nvcr.io/nvidia",
               "version": "580.95.05"}}
CHART = HR["spec"]["chart"]
REF = {"kind": "OCIRepository", "name": "o"}
URL = GR["spec"]["url"]
REMEDIATE_1M = {"name": "RemediateOnFailure", "retryInterval": "1m"}


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
    (_with(ND, ("spec", "nodeSelector"), {"pool": "a"}), "default NVIDIADriver must not use nodeSelector"),
]


@pytest.mark.parametrize("obj, message", BROKEN)
def test_each_rule_refuses_an_object_that_breaks_it(obj, message):
    errs = cel.errors(obj)
    assert len(errs) == 1 and message in errs[0], errs


def test_every_rule_of_the_data_file_is_broken_by_an_object():
    broken = {r.name for obj, _ in BROKEN for r, _, _ in cel.violations(obj)}
    assert broken == {r.name for r in cel.rules() if not r.transition}


@pytest.mark.parametrize("obj", [HR, KS, GR, HC, ND, _with(ND, ("spec", "nodeSelector"), {}),
                                 _with(_with(ND, ("spec", "default"), False), ("spec", "nodeSelector"), {"pool": "a"}),
                                 _with(GR, ("spec", "serviceAccountName"), "sa") | {"spec": {**GR["spec"], "serviceAccountName": "sa", "provider": "aws"}},
                                 _with(HR, ("spec", "upgrade", "strategy"), {"name": "RetryOnFailure", "retryInterval": "1m"})])
def test_objects_that_keep_the_rules_pass(obj):
    assert cel.errors(obj) == []


# Written from the hand-coded predicates this module replaced (each rule was once a Python lambda
# beside its CEL source): (base object, where the node goes, the node, what those predicates
# reported). Every object passes the CRD schema (checked below), so the verdicts are comparable.
OLD_VERDICTS = [
    (HR, ('spec',), {'interval': '10m', 'chart': CHART},
     []),
    (HR, ('spec',), {'interval': '10m', 'chartRef': REF},
     []),
    (HR, ('spec',), {'interval': '10m', 'chart': CHART, 'chartRef': REF},
     ['spec: either chart or chartRef must be set']),
    (HR, ('spec',), {'interval': '10m'},
     ['spec: either chart or chartRef must be set']),
    (HR, ('spec', 'install'), {'strategy': {'name': 'RemediateOnFailure'}},
     []),
    (HR, ('spec', 'install'), {'strategy': REMEDIATE_1M},
     ["spec.install.strategy: .retryInterval cannot be set when .name is 'RemediateOnFailure'"]),
    (HR, ('spec', 'install'), {'strategy': {'name': 'RetryOnFailure'}},
     []),
    (HR, ('spec', 'install'), {'strategy': {'name': 'RetryOnFailure', 'retryInterval': '1m'}},
     []),
    (HR, ('spec', 'upgrade'), {'strategy': {'name': 'RemediateOnFailure'}},
     []),
    (HR, ('spec', 'upgrade'), {'strategy': REMEDIATE_1M},
     ["spec.upgrade.strategy: .retryInterval can only be set when .name is 'RetryOnFailure'"]),
    (HR, ('spec', 'upgrade'), {'strategy': {'name': 'RetryOnFailure'}},
     []),
    (HR, ('spec', 'upgrade'), {'strategy': {'name': 'RetryOnFailure', 'retryInterval': '1m'}},
     []),
    (HR, ('spec', 'kubeConfig'), {},
     ['spec.kubeConfig: exactly one of spec.kubeConfig.configMapRef or spec.kubeConfig.secretRef must be specified']),
    (HR, ('spec', 'kubeConfig'), {'secretRef': {'name': 's'}},
     []),
    (HR, ('spec', 'kubeConfig'), {'configMapRef': {'name': 'c'}},
     []),
    (HR, ('spec', 'kubeConfig'), {'secretRef': {'name': 's'}, 'configMapRef': {'name': 'c'}},
     ['spec.kubeConfig: exactly one of spec.kubeConfig.configMapRef or spec.kubeConfig.secretRef must be specified']),
    (KS, ('spec', 'kubeConfig'), {},
     ['spec.kubeConfig: exactly one of spec.kubeConfig.configMapRef or spec.kubeConfig.secretRef must be specified']),
    (KS, ('spec', 'kubeConfig'), {'secretRef': {'name': 's'}},
     []),
    (KS, ('spec', 'kubeConfig'), {'configMapRef': {'name': 'c'}},
     []),
    (KS, ('spec', 'kubeConfig'), {'secretRef': {'name': 's'}, 'configMapRef': {'name': 'c'}},
     ['spec.kubeConfig: exactly one of spec.kubeConfig.configMapRef or spec.kubeConfig.secretRef must be specified']),
    (GR, ('spec',), {'interval': '10m', 'url': URL},
     []),
    (GR, ('spec',), {'interval': '10m', 'url': URL, 'provider': 'generic'},
     []),
    (GR, ('spec',), {'interval': '10m', 'url': URL, 'provider': 'azure'},
     []),
    (GR, ('spec',), {'interval': '10m', 'url': URL, 'provider': 'aws'},
     []),
    (GR, ('spec',), {'interval': '10m', 'url': URL, 'provider': 'github'},
     []),
    (GR, ('spec',), {'interval': '10m', 'url': URL, 'serviceAccountName': 'sa'},
     ["spec: serviceAccountName can only be set when provider is 'azure' or 'aws'"]),
    (GR, ('spec',), {'interval': '10m', 'url': URL, 'serviceAccountName': 'sa', 'provider': 'generic'},
     ["spec: serviceAccountName can only be set when provider is 'azure' or 'aws'"]),
    (GR, ('spec',), {'interval': '10m', 'url': URL, 'serviceAccountName': 'sa', 'provider': 'azure'},
     []),
    (GR, ('spec',), {'interval': '10m', 'url': URL, 'serviceAccountName': 'sa', 'provider': 'aws'},
     []),
    (GR, ('spec',), {'interval': '10m', 'url': URL, 'serviceAccountName': 'sa', 'provider': 'github'},
     ["spec: serviceAccountName can only be set when provider is 'azure' or 'aws'"]),
    (HC, ('spec',), {'interval': '10m', 'chart': 'c', 'sourceRef': {'kind': 'GitRepository', 'name': 's'}},
     []),
    (HC, ('spec',), {'interval': '10m', 'chart': 'c', 'sourceRef': {'kind': 'GitRepository', 'name': 's'}, 'verify': {'provider': 'cosign'}},
     ["spec: spec.verify is only supported when spec.sourceRef.kind is 'HelmRepository'"]),
    (HC, ('spec',), {'interval': '10m', 'chart': 'c', 'sourceRef': {'kind': 'HelmRepository', 'name': 's'}},
     []),
    (HC, ('spec',), {'interval': '10m', 'chart': 'c', 'sourceRef': {'kind': 'HelmRepository', 'name': 's'}, 'verify': {'provider': 'cosign'}},
     []),
    (HC, ('spec',), {'interval': '10m', 'chart': 'c', 'sourceRef': {'kind': 'Bucket', 'name': 's'}},
     []),
    (HC, ('spec',), {'interval': '10m', 'chart': 'c', 'sourceRef': {'kind': 'Bucket', 'name': 's'}, 'verify': {'provider': 'cosign'}},
     ["spec: spec.verify is only supported when spec.sourceRef.kind is 'HelmRepository'"]),
    (HR, ('spec',), {'interval': '10m', 'install': {'strategy': REMEDIATE_1M}, 'upgrade': {'strategy': REMEDIATE_1M}, 'kubeConfig': {'secretRef': {'name': 's'}, 'configMapRef': {'name': 'c'}}},
     ["spec.install.strategy: .retryInterval cannot be set when .name is 'RemediateOnFailure'", 'spec.kubeConfig: exactly one of spec.kubeConfig.configMapRef or spec.kubeConfig.secretRef must be specified', "spec.upgrade.strategy: .retryInterval can only be set when .name is 'RetryOnFailure'", 'spec: either chart or chartRef must be set']),
]


@pytest.fixture(scope="module")
def schemas() -> CrdValidator:
    return CrdValidator.from_files(sorted(CRDS.glob("*.yaml")))


@pytest.mark.parametrize("base, path, node, expected", OLD_VERDICTS)
def test_verdicts_match_the_hand_coded_predicates(base, path, node, expected, schemas):
    obj = _with(base, path, node)
    assert schemas.errors(obj) == []
    assert Counter(cel.errors(obj)) == Counter(expected)


def test_gpuop_output_keeps_every_rule(dist, index):
    """Every Flux object and operator-mode NVIDIADriver gpuop writes keeps the rules, and the rules did run
    on them (not vacuous)."""
    reached = set()
    for c in index["clusters"]:
        objects = load_dir(dist / c["flux"]) if c.get("flux") else []
        if c.get("operator", {}).get("install") == "helm":
            objects += yaml.safe_load((dist / c["operator"]["path"] / "values.yaml").read_text()).get("extraObjects", [])
        for o in objects:
            assert cel.errors(o) == [], (c["name"], o["kind"], cel.errors(o))
            reached |= {r.name for r in cel.rules() if (r.api_version, r.kind) == (o["apiVersion"], o["kind"])
                        and any(True for _ in cel._nodes(o, r.steps))}
    assert {"HelmRelease/v2#0", "GitRepository/v1#0", "NVIDIADriver/v1alpha1#0"} <= reached, reached


def test_rules_apply_at_every_node_their_path_reaches(monkeypatch):
    """Mechanics the Flux rules do not exercise: [*] (each element, each map value), fieldPath,
    messageExpression, an evaluation error, the default message, and a transition rule skipped."""
    kind = {"group": "example.com", "kind": "Thing", "version": "v1"}
    rules = (cel.Rule(name="Thing/v1#0", path="$.spec.items[*]", rule="self.size > 0",
                      messageExpression="'size ' + string(self.size) + ' is not positive'", **kind),
             cel.Rule(name="Thing/v1#1", path="$.spec.byName[*]", rule="has(self.port)", message="needs a port",
                      fieldPath=".port", **kind),
             cel.Rule(name="Thing/v1#2", path="$.spec", rule="self.mode == 'a'", message="mode must be a", **kind),
             cel.Rule(name="Thing/v1#3", path="$.spec", rule="self.items.size() < 3", **kind),
             cel.Rule(name="Thing/v1#4", path="$.spec", rule="self.mode == oldSelf.mode", message="immutable", **kind))
    monkeypatch.setattr(cel, "rules", lambda: rules)
    monkeypatch.setattr(cel, "_by_type", cel._by_type.__wrapped__)
    obj = {"apiVersion": "example.com/v1", "kind": "Thing",
           "spec": {"items": [{"size": 1}, {"size": 0}, {"size": -2}], "byName": {"a": {"port": 1}, "b": {}}}}
    assert cel.errors(obj) == [
        "spec.items[1]: size 0 is not positive",
        "spec.items[2]: size -2 is not positive",
        "spec.byName[b].port: needs a port",
        "spec: no such key: mode evaluating rule: mode must be a",
        "spec: failed rule: self.items.size() < 3",
    ]
    assert cel.errors({**obj, "spec": None}) == []


def test_celpy_is_loaded_only_for_an_object_with_rules():
    code = ("import sys; from gpuop.verify import cel; "
            "cel.errors({'apiVersion': 'v1', 'kind': 'ConfigMap', 'metadata': {'name': 'x'}}); "
            "assert 'celpy' not in sys.modules and 'lark' not in sys.modules; "
            "cel.errors({'apiVersion': 'helm.toolkit.fluxcd.io/v2', 'kind': 'HelmRelease', 'spec': {}}); "
            "assert 'celpy' in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=REPO)


def test_validate_reports_what_the_api_server_would_reject_in_an_output(dist, tmp_path):
    out = tmp_path / "dist"
    shutil.copytree(dist, out)
    ok = run_main("validate", str(out), cwd=tmp_path)
    assert ok.returncode == 0, ok.stderr
    hr = out / "prod-east" / "flux" / "helmrelease.yaml"
    doc = yaml.safe_load(hr.read_text())
    doc["spec"]["chartRef"] = {"kind": "OCIRepository", "name": "gpuop-prod-east"}
    hr.write_text(yaml.safe_dump(doc))
    ds = out / "prod-east" / "manifests" / "03-driver.yaml"
    ds.write_text(ds.read_text().replace("hostPID: true", "hostPid: true"))
    values = out / "keep-operator" / "operator" / "values.yaml"      # operator mode: the chart's extraObjects
    doc = yaml.safe_load(values.read_text())
    doc["extraObjects"][0]["spec"]["default"] = True        # a pool's driver, with its nodeSelector
    driver = doc["extraObjects"][0]["metadata"]["name"]
    values.write_text(yaml.safe_dump(doc))
    proc = run_main("validate", str(out), cwd=tmp_path)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert lines[-1] == "gpuop: 5 errors; nothing written"   # 3 objects, and 2 folders edited by hand (treeDigest)
    assert sum("does not hold the files index.json records for it (treeDigest" in l for l in lines) == 2, lines
    assert any(f"values.yaml: NVIDIADriver/{driver}: spec: default NVIDIADriver must not use nodeSelector"
               in l for l in lines), lines
    assert any("helmrelease.yaml: HelmRelease/gpuop-prod-east: spec: either chart or chartRef must be set" in l
               for l in lines), lines
    assert any("DaemonSet/nvidia-driver-daemonset: spec.template.spec.hostPid: Additional properties are not "
               "allowed ('hostPid' was unexpected)" in l for l in lines), lines
