"""The semantic check held to Kubernetes' own validation code (../shared/tools/kubeval: v1.35.4's
pkg/apis/core/validation, v1 defaulting and conversion, strict decoding, YAML read as kubectl reads it).

1. A corpus of profiles (tests/data/semantic-corpus: every optional field, strings YAML 1.1 types
   otherwise, relaxed env var names) plus generated ones is compiled; kubeval checks every object of
   every cluster's manifests, in one call per batch of files, and refuses none (no error, no restated
   error, no YAML 1.1 drift).
2. A mutation table of hand edits of compiled output, across the rule families: for each edit
   `gpuop validate DIST` (verify.output.validate_output, what the CLI runs) refuses exactly what kubeval
   refuses, at the same field paths. Edits kubeval accepts are in the table too (precision). The
   recall and precision are printed (`-s`) and must be 100%.

Documented differences of path (each with its reason), applied by `_same_paths`:
- MAP KEYS: for label, annotation and nodeSelector maps the API server reports the map
  (`metadata.labels`), gpuop the entry (`metadata.labels[app]`): the user edits the entry.
- MOUNTS: a volume mount's subPath, subPathExpr and mountPropagation errors are reported upstream at
  `volumeMounts.subPath` (validateVolumeMounts passes the list's path, without the index); gpuop
  names the mount (`volumeMounts[0].subPath`).
- HOSTPID: "ShareProcessNamespace and HostPID cannot both be enabled" is reported upstream at
  `securityContext.shareProcessNamespace` (the internal field), gpuop at the v1 field
  `shareProcessNamespace`, the one the user wrote.
- DECODE: kubeval's decode errors carry no path; the path is the one of its `yaml11Drift` entry when
  the refusal is a YAML 1.1 retyping, otherwise (a malformed quantity) only the refusal is compared.
Kinds kubeval does not check (RBAC, RuntimeClass, custom resources) are left to the CRD schemas.
"""

from __future__ import annotations

import copy
import json
import random
import re
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO, TOOL_PATHS, TOOLS, run_gpuop

from gpuop.kube.yamlio import dump, load_all
from gpuop.verify.output import validate_output
from gpuop.verify.semantic import shown_name

pytestmark = pytest.mark.slow

KUBEVAL = TOOLS / TOOL_PATHS["kubeval"]          # GPUOP_TOOLS, else ../shared/tools (conftest)
CORPUS = REPO / "tests" / "data" / "semantic-corpus"
BASE_CLUSTER = "corpus-everything"        # the cluster the mutations edit
BATCH = 200                                # files per kubeval call

if not KUBEVAL.is_file():
    pytest.skip("kubeval is not available", allow_module_level=True)


def kubeval(files: list[Path]) -> list[dict]:
    out: list[dict] = []
    for i in range(0, len(files), BATCH):
        proc = subprocess.run([str(KUBEVAL), *map(str, files[i:i + BATCH])], capture_output=True, text=True,
                              timeout=120)
        assert proc.returncode in (0, 1), proc.stderr
        out += [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]
    return out


# ------------------------------------------------------------------------------------------- corpus

# Strings that are legal where they go but that a YAML 1.1 or 1.2 reader may type otherwise.
ODD_LABEL_VALUES = ["y", "n", "Y", "N", "on", "off", "yes", "no", "true", "null", "0o17", "1e3", "08", "0x1F",
                    "1_000", "12", "1.5", "2001-12-14", "a.b_c-d"]
ODD_TEXT = ODD_LABEL_VALUES + ["", "~", "-", "a: b", "#x", "x #y", "'q'", '"dq"', "[1]", "{a: 1}", "&a", "*a",
                               "!t", "%", "@", "`", "|", ">", "<<", "=", "1:30", ".inf", "-.5", "é ü"]
ODD_ENV_NAMES = ["1GPU", "weird name", "a:b", "x.y-z", "..", ".", "~!@#$%^&*()", "Ab_9"]
ODD_NAMESPACES = ["y", "n", "on", "off", "null", "true", "no", "0x1f", "1e3", "08", "123"]


def generated_profiles(n: int, seed: int = 24) -> list[dict]:
    """`n` valid profiles with random odd strings in every field that reaches an object (written as JSON,
    so the profile itself reads the same everywhere)."""
    rnd = random.Random(seed)
    out = []
    for i in range(n):
        env = [{"name": rnd.choice(ODD_ENV_NAMES) + str(j), "value": rnd.choice(ODD_TEXT)} for j in range(4)]
        labels = {f"example.com/l{j}": rnd.choice(ODD_LABEL_VALUES) for j in range(3)}
        out.append({
            "apiVersion": "gpuop/v1alpha1", "kind": "ClusterProfile",
            "metadata": {"name": f"generated-{i}", "labels": {"gen": rnd.choice(ODD_LABEL_VALUES)}},
            "spec": {
                "platform": {"type": "kubernetes", "version": rnd.choice(["1.33", "1.34", "1.35"])},
                "namespace": ODD_NAMESPACES[i % len(ODD_NAMESPACES)],
                "os": "ubuntu24.04",
                "driver": {"version": "580", "env": env, "args": [rnd.choice(ODD_TEXT) for _ in range(3)]},
                "toolkit": {"env": [{"name": "T" + str(k), "value": rnd.choice(ODD_TEXT)} for k in range(2)]},
                "images": {"pullSecrets": [rnd.choice(ODD_NAMESPACES)]},
                "proxy": {"httpProxy": "http://proxy:3128", "noProxy": [rnd.choice(ODD_LABEL_VALUES)]},
                "daemonsets": {
                    "labels": labels,
                    "annotations": {"example.com/a": rnd.choice(ODD_TEXT)},
                    "nodeSelector": {"example.com/s": rnd.choice(ODD_LABEL_VALUES)},
                    "tolerations": [{"key": "example.com/t", "operator": "Equal",
                                     "value": rnd.choice(ODD_LABEL_VALUES), "effect": "NoSchedule"}],
                    "nodeAffinity": [{"key": "example.com/z", "operator": "In",
                                      "values": rnd.sample(ODD_LABEL_VALUES, 2)}],
                },
                "nodePools": [{"name": rnd.choice(["y", "n", "on", "pool"]), "nodes": 2, "gpu": "L40S",
                               "gpusPerNode": 4}],
            },
        })
    return out


@pytest.fixture(scope="module")
def corpus_dist(tmp_path_factory) -> Path:
    work = tmp_path_factory.mktemp("corpus")
    shutil.copytree(CORPUS, work / "profiles")
    for profile in generated_profiles(6):
        (work / "profiles" / f"{profile['metadata']['name']}.yaml").write_text(json.dumps(profile, indent=1))
    shutil.copy(REPO / "gpuop.yaml", work / "gpuop.yaml")
    run_gpuop("synth", "profiles", "-o", "dist", cwd=work, check=True)
    return work / "dist"


def manifest_files(dist: Path) -> list[Path]:
    return sorted(p for p in dist.glob("*/manifests/*.yaml") if p.name != "kustomization.yaml")


def test_kubeval_accepts_every_object_of_the_corpus(corpus_dist: Path) -> None:
    results = kubeval(manifest_files(corpus_dist))
    clusters = {p.name for p in corpus_dist.iterdir() if (p / "manifests").is_dir()}
    assert len(clusters) >= 8 and BASE_CLUSTER in clusters
    checked = [r for r in results if r["status"] != "not checked"]
    assert len(checked) > 120
    refused = [(r["file"].split("/dist/")[-1], r["kind"], r["name"], r["errors"], r["restatedErrors"],
                r.get("yaml11Drift")) for r in checked if r["errors"] or r["restatedErrors"] or r.get("yaml11Drift")]
    assert refused == []


def test_gpuop_validate_accepts_the_corpus(corpus_dist: Path) -> None:
    assert validate_output(corpus_dist) == []


# ------------------------------------------------------------------------------------------- mutations

Obj = dict[str, Any]
# A value written PLAIN + "y" is dumped plain and then written `y`, as a hand edit would leave it.
PLAIN = "zzplainzz-"


@dataclass(frozen=True)
class Mutation:
    id: str
    file: str                 # manifests/<file> of the base cluster
    kind: str
    name: str
    edit: Callable[[Obj], None]
    refused: bool             # what kubeval is expected to say (the comparison itself reads kubeval)


def _pod(o: Obj) -> Obj:
    return o["spec"]["template"]["spec"]


def _ctr(o: Obj) -> Obj:
    return _pod(o)["containers"][0]


def _set(path: Callable[[Obj], Obj], **fields):
    def edit(o: Obj) -> None:
        path(o).update(fields)
    return edit


def _env(entry: dict):
    return lambda o: _ctr(o).setdefault("env", []).append(entry)


def _sysctls(*names: str, **spec):
    def edit(o: Obj) -> None:
        _pod(o).update(spec)
        _pod(o).setdefault("securityContext", {})["sysctls"] = [{"name": n, "value": "1"} for n in names]
    return edit


def _chain(*edits):
    def edit(o: Obj) -> None:
        for e in edits:
            e(o)
    return edit


DS = ("10-dcgm-exporter.yaml", "DaemonSet", "nvidia-dcgm-exporter")
SVC = ("10-dcgm-exporter.yaml", "Service", "nvidia-dcgm-exporter")
CM = ("10-dcgm-exporter.yaml", "ConfigMap", "nvidia-dcgm-exporter-metrics")
SA = ("10-dcgm-exporter.yaml", "ServiceAccount", "nvidia-dcgm-exporter")
NS = ("00-namespace.yaml", "Namespace", "n")


def _configmap_volume(o: Obj) -> Obj:
    return next(v["configMap"] for v in _pod(o)["volumes"] if "configMap" in v)


def _m(id_: str, target: tuple[str, str, str], edit, refused: bool = True) -> Mutation:
    return Mutation(id_, *target, edit, refused)


def _del(path: Callable[[Obj], Obj], key: str):
    return lambda o: path(o).pop(key)


MUTATIONS: list[Mutation] = [
    # env (ValidateEnv and the relaxed names since 1.33, the downward API, YAML 1.1 decoding)
    _m("env-name-with-equals", DS, _env({"name": "A=B", "value": "x"})),
    _m("env-name-with-newline", DS, _env({"name": "A\n", "value": "x"})),
    _m("env-name-relaxed", DS, _env({"name": "1GPU weird:name", "value": "x"}), refused=False),
    _m("env-name-dotdot", DS, _env({"name": "..", "value": "x"}), refused=False),
    _m("env-value-unquoted-y", DS, _env({"name": "FLAG", "value": PLAIN + "y"})),
    _m("env-value-unquoted-number", DS, _env({"name": "FLAG", "value": PLAIN + "0o17"})),
    _m("env-fieldref-unknown", DS, _env({"name": "F", "valueFrom": {"fieldRef": {"fieldPath": "spec.foo"}}})),
    _m("env-fieldref-not-for-env", DS, _env({"name": "F", "valueFrom": {"fieldRef": {"fieldPath": "status.phase"}}})),
    _m("env-fieldref-label", DS, _env({"name": "F", "valueFrom": {"fieldRef": {
        "fieldPath": "metadata.labels['app']"}}}),
       refused=False),
    _m("env-fieldref-bad-label-key", DS, _env({"name": "F", "valueFrom": {"fieldRef": {
        "fieldPath": "metadata.labels['bad key']"}}})),
    _m("env-resourcefieldref-unknown", DS, _env({"name": "F", "valueFrom": {"resourceFieldRef": {
        "resource": "limits.foo"}}})),
    _m("env-value-and-valuefrom", DS, _env({"name": "F", "value": "v", "valueFrom": {"fieldRef": {
        "fieldPath": "metadata.name"}}})),
    _m("env-configmapkeyref-bad-key", DS, _env({"name": "F", "valueFrom": {"configMapKeyRef": {
        "name": "nvidia-dcgm-exporter-metrics", "key": "a b", "optional": True}}})),
    # security context
    _m("privileged-without-escalation", DS, _set(lambda o: _ctr(o).setdefault("securityContext", {}),
                                                 privileged=True, allowPrivilegeEscalation=False)),
    _m("run-as-user-negative", DS, _set(lambda o: _ctr(o).setdefault("securityContext", {}), runAsUser=-1)),
    _m("proc-mount-unknown", DS, _set(lambda o: _ctr(o).setdefault("securityContext", {}), procMount="Weird")),
    _m("seccomp-localhost-without-profile", DS, _set(lambda o: _pod(o).setdefault("securityContext", {}),
                                                     seccompProfile={"type": "Localhost"})),
    _m("host-pid-and-share-process-namespace", DS, _set(_pod, hostPID=True, shareProcessNamespace=True)),
    # sysctls
    _m("sysctl-net-with-host-network", DS, _sysctls("net.core.somaxconn", hostNetwork=True)),
    _m("sysctl-ipc-with-host-ipc", DS, _sysctls("kernel.shm_rmid_forced", hostIPC=True)),
    _m("sysctl-uts-with-host-network", DS, _sysctls("kernel.domainname", hostNetwork=True), refused=False),
    _m("sysctl-invalid-name", DS, _sysctls("Net.core")),
    _m("sysctl-name-trailing-newline", DS, _sysctls("net.core.somaxconn\n")),
    _m("sysctl-duplicate", DS, _sysctls("net.core.somaxconn", "net.core.somaxconn")),
    # DNS
    _m("dns-none-without-config", DS, _set(_pod, dnsPolicy="None")),
    _m("dns-policy-unknown", DS, _set(_pod, dnsPolicy="Sometimes")),
    _m("dns-too-many-nameservers", DS, _set(_pod, dnsConfig={"nameservers": ["1.1.1.1", "2.2.2.2", "3.3.3.3",
                                                                            "4.4.4.4"]})),
    _m("dns-nameserver-not-ip", DS, _set(_pod, dnsConfig={"nameservers": ["dns.example.com"]})),
    # containers
    _m("container-name-invalid", DS, _set(_ctr, name="Bad_Name")),
    _m("container-name-duplicate", DS, lambda o: _pod(o)["containers"].append(
        {**copy.deepcopy(_ctr(o)), "ports": []})),
    _m("image-missing", DS, _del(_ctr, "image")),
    _m("image-pull-policy-unknown", DS, _set(_ctr, imagePullPolicy="Sometimes")),
    _m("termination-message-policy-unknown", DS, _set(_ctr, terminationMessagePolicy="X")),
    _m("port-name-too-long", DS, lambda o: _ctr(o)["ports"][0].update(name="abcdefghijklmnop")),
    _m("port-number-out-of-range", DS, lambda o: _ctr(o)["ports"][0].update(containerPort=70000)),
    _m("probe-success-threshold", DS, lambda o: _ctr(o)["livenessProbe"].update(successThreshold=2)),
    _m("probe-negative-delay", DS, lambda o: _ctr(o)["livenessProbe"].update(initialDelaySeconds=-1)),
    _m("volume-name-invalid", DS, lambda o: _pod(o)["volumes"].append({"name": "Bad_Vol", "emptyDir": {}})),
    _m("volume-two-sources", DS, lambda o: _pod(o)["volumes"].append({"name": "two", "emptyDir": {},
                                                                       "hostPath": {"path": "/x"}})),
    _m("volume-mount-unknown", DS, lambda o: _ctr(o)["volumeMounts"].append({"name": "nope", "mountPath": "/nope"})),
    _m("host-path-dotdot", DS, lambda o: _pod(o)["volumes"].append({"name": "up", "hostPath": {"path": "/a/../b"}})),
    _m("container-port-protocol-unknown", DS, lambda o: _ctr(o)["ports"][0].update(protocol="XYZ")),
    _m("volume-item-path-dotdot", DS, lambda o: _configmap_volume(o)["items"][0].update(path="../x")),
    _m("volume-item-path-absolute", DS, lambda o: _configmap_volume(o)["items"][0].update(path="/x")),
    _m("volume-default-mode-too-large", DS, lambda o: _configmap_volume(o).update(defaultMode=512)),
    _m("volume-item-mode-negative", DS, lambda o: _configmap_volume(o)["items"][0].update(mode=-1)),
    _m("empty-dir-size-limit-negative", DS, lambda o: _pod(o)["volumes"].append(
        {"name": "scratch", "emptyDir": {"sizeLimit": "-1"}})),
    _m("volume-mount-subpath-absolute", DS, lambda o: _ctr(o)["volumeMounts"][0].update(subPath="/abs")),
    _m("service-account-name-syntax", DS, _set(_pod, serviceAccountName="Bad_Name")),
    _m("node-name-invalid", DS, _set(_pod, nodeName="Bad_Name")),
    # resources
    _m("request-above-limit", DS, lambda o: _ctr(o)["resources"]["requests"].update(memory="1Gi")),
    _m("gpu-request-without-limit", DS, lambda o: _ctr(o)["resources"]["requests"].update({"nvidia.com/gpu": "1"})),
    _m("quantity-trailing-newline", DS, lambda o: _ctr(o)["resources"]["limits"].update(memory="1Gi\n")),
    _m("quantity-zero-without-number", DS, lambda o: _ctr(o)["resources"]["requests"].update(cpu="m"),
       refused=False),
    # scheduling
    _m("toleration-exists-with-value", DS, lambda o: _pod(o)["tolerations"].append(
        {"key": "k", "operator": "Exists", "value": "v"})),
    _m("toleration-key-invalid", DS, lambda o: _pod(o)["tolerations"].append({"key": "bad key", "operator": "Exists"})),
    _m("node-selector-value-invalid", DS, lambda o: _pod(o)["nodeSelector"].update({"example.com/x": "a b"})),
    _m("node-selector-value-unquoted-n", DS, lambda o: _pod(o)["nodeSelector"].update({"example.com/x": PLAIN + "n"})),
    _m("node-affinity-operator-unknown", DS, lambda o: _pod(o)["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0]["matchExpressions"].append(
        {"key": "k", "operator": "Foo", "values": ["x"]})),
    _m("pod-anti-affinity-without-topology", DS, _set(lambda o: _pod(o).setdefault("affinity", {}), podAntiAffinity={
        "requiredDuringSchedulingIgnoredDuringExecution": [{"labelSelector": {"matchLabels": {"app": "x"}},
                                                            "topologyKey": ""}]})),
    _m("priority-class-name-invalid", DS, _set(_pod, priorityClassName="Bad_Name")),
    _m("hostname-invalid", DS, _set(_pod, hostname="A_B")),
    # workloads (kubeval restates apps/validation)
    _m("daemonset-restart-policy", DS, _set(_pod, restartPolicy="Never")),
    _m("daemonset-active-deadline", DS, _set(_pod, activeDeadlineSeconds=30)),
    _m("daemonset-selector-mismatch", DS, lambda o: o["spec"]["selector"]["matchLabels"].update(app="other")),
    _m("daemonset-rolling-update-zero", DS, _set(lambda o: o["spec"], updateStrategy={
        "type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 0, "maxSurge": 0}})),
    # Services
    _m("service-port-name-invalid", SVC, lambda o: o["spec"]["ports"][0].update(name="Bad_Port")),
    _m("service-target-port-out-of-range", SVC, lambda o: o["spec"]["ports"][0].update(targetPort=70000)),
    _m("service-node-port-with-cluster-ip", SVC, lambda o: o["spec"]["ports"][0].update(nodePort=30080)),
    _m("service-type-unknown", SVC, lambda o: o["spec"].update(type="Weird")),
    _m("service-protocol-unknown", SVC, lambda o: o["spec"]["ports"][0].update(protocol="XYZ")),
    _m("service-session-affinity-unknown", SVC, lambda o: o["spec"].update(sessionAffinity="X")),
    _m("service-without-ports", SVC, lambda o: o["spec"].update(ports=[])),
    # metadata
    _m("namespace-with-a-namespace", NS, lambda o: o["metadata"].update(namespace="x")),
    _m("configmap-name-trailing-newline", CM, lambda o: o["metadata"].update(name="abc\n")),
    _m("label-value-invalid", SA, lambda o: o["metadata"].setdefault("labels", {}).update(team="a b")),
    _m("label-value-unquoted-y", SA, lambda o: o["metadata"].setdefault("labels", {}).update(team=PLAIN + "y")),
    _m("label-key-odd-but-legal", SA, lambda o: o["metadata"].setdefault("labels", {}).update(
        {"example.com/A_b.c": "Y-1"}), refused=False),
    _m("annotation-key-invalid", SA, lambda o: o["metadata"].setdefault("annotations", {}).update({"bad key": "v"})),
    _m("service-account-name-invalid", SA, lambda o: o["metadata"].update(name="Bad_Name")),
    # ConfigMap data
    _m("configmap-key-invalid", CM, lambda o: o["data"].update({"bad key": "v"})),
    _m("configmap-key-dotdot", CM, lambda o: o["data"].update({"..x": "v"})),
    _m("configmap-key-odd-but-legal", CM, lambda o: o["data"].update({".a-b_C.9": "v"}), refused=False),
    _m("configmap-value-unquoted-y", CM, lambda o: o["data"].update({"flag": PLAIN + "y"})),
    _m("configmap-key-in-binary-data-too", CM, lambda o: o.setdefault("binaryData", {}).update(
        {next(iter(o["data"])): "eA=="})),
]

# Odd but legal edits: precision (the check refuses nothing the API server accepts).
MUTATIONS += [
    _m("env-value-y-quoted", DS, _env({"name": "FLAG", "value": "y"}), refused=False),
    _m("label-value-0o17-quoted", SA, lambda o: o["metadata"].setdefault("labels", {}).update(team="0o17"),
       refused=False),
    _m("sysctl-ipc-without-host-ipc", DS, _sysctls("kernel.shm_rmid_forced"), refused=False),
    _m("dns-none-with-config", DS, _set(_pod, dnsPolicy="None", dnsConfig={"nameservers": ["10.0.0.10"],
                                                                          "searches": ["svc.cluster.local"]}),
       refused=False),
    _m("privileged-with-escalation", DS, _set(lambda o: _ctr(o).setdefault("securityContext", {}),
                                              privileged=True, allowPrivilegeEscalation=True), refused=False),
    _m("toleration-exists-without-key", DS, lambda o: _pod(o)["tolerations"].append({"operator": "Exists"}),
       refused=False),
    _m("host-network-with-container-ports", DS, _set(_pod, hostNetwork=True), refused=False),
    _m("request-below-limit-fraction", DS, lambda o: _ctr(o)["resources"].update(
        requests={"cpu": "0.5", "memory": "128Mi"}, limits={"cpu": "1", "memory": "512Mi"}), refused=False),
]

_KEY = re.compile(r"\[([^\]]*)\]")


def _norm(path: str) -> str:
    """field.Path -> dotted form (map keys and list indexes as segments) for comparing with kubeval's drift paths."""
    return _KEY.sub(lambda m: "." + m.group(1), path).lstrip(".")


MAP_FIELDS = ("labels", "annotations", "nodeSelector")


def _same_paths(gpuop: set[str], kube: set[str]) -> bool:
    """Equal, up to the documented differences (module docstring)."""
    if any(p.startswith("drift:") for p in kube):
        return {"drift:" + _norm(p) for p in gpuop} == kube

    def coarse(p: str) -> str:
        p = re.sub(rf"\.({'|'.join(MAP_FIELDS)})\[[^\]]*\]$", r".\1", p)            # MAP KEYS
        p = re.sub(rf"^({'|'.join(MAP_FIELDS)})\[[^\]]*\]$", r"\1", p)
        p = re.sub(r"\.volumeMounts\[\d+\]\.(subPath|subPathExpr|mountPropagation)$", r".volumeMounts.\1", p)  # MOUNTS
        return p.replace("securityContext.shareProcessNamespace", "shareProcessNamespace")   # HOSTPID
    return {coarse(p) for p in gpuop} == {coarse(p) for p in kube}


def _kubeval_paths(result: dict) -> tuple[bool, set[str] | None]:
    """(refused, paths); paths None when a decode error without drift hides them (DECODE)."""
    errors = result["errors"] + result["restatedErrors"]
    if not errors:
        return False, set()
    if any(e.startswith("decode:") for e in errors):
        drift = result.get("yaml11Drift") or []
        if not drift:
            return True, None
        return True, {"drift:" + _norm(d.split(": YAML 1.2 reads")[0]) for d in drift}
    return True, {e.split(": ", 1)[0] for e in errors}


def _gpuop_paths(issues, kind: str, name: str) -> set[str]:
    paths = set()
    for issue in issues:
        if issue.path.startswith(f"{kind}/{shown_name(name)} "):
            paths.add(issue.path.split(" ", 1)[1])
        elif not issue.path and issue.message.startswith(f"{kind}/{name}: "):
            paths.add(issue.message.split(": ", 2)[1] if issue.message.count(": ") > 1 else "")
    return paths


# The base cluster's files the mutated objects need: their namespace, the RuntimeClass they name, and
# the file they are in (ServiceAccount, ConfigMap, Service and DaemonSet of the DCGM exporter).
MINI_FILES = ("00-namespace.yaml", "02-runtime-class.yaml", "10-dcgm-exporter.yaml")


def mini_dist(corpus_dist: Path, out: Path) -> Path:
    """A one-cluster output holding MINI_FILES of the base cluster (each `validate` reads only these)."""
    index = json.loads((corpus_dist / "index.json").read_text())
    index["clusters"] = [c for c in index["clusters"] if c["name"] == BASE_CLUSTER]
    [cluster] = index["clusters"]
    for key in ("manifests", "argocd", "flux"):
        (out / cluster[key]).mkdir(parents=True)
    for name in MINI_FILES:
        shutil.copy(corpus_dist / cluster["manifests"] / name, out / cluster["manifests"] / name)
    (out / "index.json").write_text(json.dumps(index))
    return out


@pytest.fixture(scope="module")
def mutation_results(corpus_dist: Path, tmp_path_factory) -> list[tuple[Mutation, tuple, set[str]]]:
    """Each mutation applied alone to the base cluster; kubeval on all edited files in one call, gpuop's
    validate_output on the edited one-cluster output."""
    work = tmp_path_factory.mktemp("mutations")
    base = mini_dist(corpus_dist, work / "base")
    edited_files, gpuop_found = [], []
    for i, m in enumerate(MUTATIONS):
        target = base / BASE_CLUSTER / "manifests" / m.file
        original = target.read_text()
        docs = load_all(original)
        hits = [d for d in docs if d.get("kind") == m.kind and d["metadata"]["name"] == m.name]
        assert len(hits) == 1, m.id
        m.edit(hits[0])
        # gpuop's own writer for the file, then the PLAIN marks removed: a hand edit writing y, not 'y'
        text = "".join("---\n" + dump(d) for d in docs).replace(PLAIN, "")
        target.write_text(text)
        single = work / f"{i:02d}-{m.id}.yaml"
        single.write_text(dump(hits[0]).replace(PLAIN, ""))
        edited_files.append(single)
        gpuop_found.append(_gpuop_paths(validate_output(base), m.kind, hits[0]["metadata"]["name"]))
        target.write_text(original)
    results = kubeval(edited_files)
    by_doc = {Path(r["file"]).name: r for r in results}
    return [(m, _kubeval_paths(by_doc[f.name]), g) for m, f, g in zip(MUTATIONS, edited_files, gpuop_found)]


def test_the_mutation_table_spans_the_rule_families() -> None:
    assert len({m.id for m in MUTATIONS}) == len(MUTATIONS)
    assert sum(m.refused for m in MUTATIONS) >= 40
    assert sum(not m.refused for m in MUTATIONS) >= 10


def test_gpuop_validate_refuses_exactly_what_kubeval_refuses(mutation_results) -> None:
    tp = fp = fn = tn = 0
    wrong = []
    for m, (kube_refused, kube_paths), gpuop_paths in mutation_results:
        assert kube_refused is m.refused, f"{m.id}: kubeval {'refuses' if kube_refused else 'accepts'} it"
        if kube_refused and gpuop_paths and (kube_paths is None or _same_paths(gpuop_paths, kube_paths)):
            tp += 1
        elif kube_refused:
            fn += 1
            wrong.append((m.id, "kubeval", sorted(kube_paths or []), "gpuop", sorted(gpuop_paths)))
        elif gpuop_paths:
            fp += 1
            wrong.append((m.id, "kubeval accepts", "gpuop", sorted(gpuop_paths)))
        else:
            tn += 1
    recall, precision = tp / (tp + fn), tp / (tp + fp) if tp + fp else 1.0
    print(f"\nmutation table: {len(mutation_results)} edits, {tp + fn} refused by kubeval, {tn + fp} accepted; "
          f"recall {tp}/{tp + fn} = {recall:.0%}, precision {tp}/{tp + fp} = {precision:.0%}")
    assert wrong == []


# ------------------------------------------------------------------------------------------- the CLI


def test_gpuop_validate_refuses_a_trailing_newline_configmap_with_the_api_servers_message(corpus_dist, tmp_path):
    out = tmp_path / "dist"
    shutil.copytree(corpus_dist, out)       # the CLI checks the charts and the lock as well: the whole output
    target = out / BASE_CLUSTER / "manifests" / "10-dcgm-exporter.yaml"
    docs = load_all(target.read_text())
    docs.append({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "abc\n", "namespace": "x\n"},
                 "data": {"k": "v"}})
    target.write_text("".join("---\n" + dump(d) for d in docs))
    proc = run_gpuop("validate", str(out), cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    assert ('ConfigMap/"abc\\n" metadata.name: Invalid value: "abc\\n": a lowercase RFC 1123 subdomain must consist of '
            "lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character "
            "(e.g. 'example.com', regex used for validation is "
            "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')") in proc.stderr
    assert ('metadata.namespace: Invalid value: "x\\n": a lowercase RFC 1123 label must consist of lower case '
            "alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  "
            "or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')") in proc.stderr
    # and the API server's code says the same
    single = tmp_path / "cm.yaml"
    single.write_text(dump(docs[-1]))
    [result] = kubeval([single])
    assert any(e.startswith('metadata.name: Invalid value: "abc\\n": a lowercase RFC 1123 subdomain')
               for e in result["errors"])
    assert any(e.startswith('metadata.namespace: Invalid value: "x\\n": a lowercase RFC 1123 label')
               for e in result["errors"])
