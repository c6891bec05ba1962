"""The Kubernetes syntax kernel (gpuop/kube/validation.py, gpuop/kube/quantity.py): a table per function of
values the API server accepts and refuses, trailing-newline cases included (Python's `$` matches before a
final "\\n", Go's does not), with apimachinery's wording for the refusals. The messages were read off
Kubernetes v1.35.4's validation code (../shared/tools/kubeval); test_kubeval_differential.py holds the
kernel to it on whole objects."""

from __future__ import annotations

import ast
import json
import re
import subprocess
from fractions import Fraction
from pathlib import Path

import pytest
from conftest import REPO, tool

from gpuop.kube import quantity, validation as kv

NL = ["\n", "a\n", "abc\n", "\nabc", "a\nb"]


def _table(fn, good, bad):
    return ([pytest.param(fn, v, True, id=f"{fn.__name__}-ok-{v!r}") for v in good]
            + [pytest.param(fn, v, False, id=f"{fn.__name__}-bad-{v!r}") for v in bad])


CASES = (
    _table(kv.is_dns1123_label, ["a", "0", "abc-123", "a" * 63, "1-2"],
           ["", "A", "-a", "a-", "a.b", "a_b", "a" * 64, *NL])
    + _table(kv.is_dns1123_subdomain, ["a", "example.com", "a-b.c-d", "1.2.3", "a" * 253],
             ["", "A.com", ".a", "a.", "a..b", "a_b", "a" * 254, *NL])
    + _table(kv.is_dns1035_label, ["a", "abc-123", "a" * 63], ["", "1a", "-a", "a-", "a.b", "A", "a" * 64, *NL])
    + _table(kv.is_qualified_name, ["a", "A_b.c-D", "example.com/Name", "nvidia.com/gpu.product", "a" * 63],
             ["", "/a", "a/", "a/b/c", "-a", "a-", "Bad.Com/a", "a" * 64, "a b", *NL, "x/abc\n", "abc\n/x"])
    + _table(kv.is_valid_label_value, ["", "a", "A-b_c.d", "1", "a" * 63], ["-a", "a-", "a b", "a" * 64, *NL])
    + _table(kv.is_valid_port_name, ["http", "a1", "metrics-x", "a" * 15],
             ["", "1", "HTTP", "a--b", "-a", "a-", "a" * 16, "a_b", *NL])
    + _table(kv.is_config_map_key, ["a", "config.yaml", "A_B-c", "x" * 253],
             ["", ".", "..", "..a", "a b", "a/b", "x" * 254, *NL])
    + _table(kv.is_sysctl_name, ["a", "net.core.somaxconn", "net/ipv4/ip_forward", "kernel.shm_rmid_forced"],
             ["", "Net.core", "a..b", ".a", "a.", "a_", "net.core-", "a" * 254, *NL])
    + _table(kv.is_valid_percent, ["0%", "100%", "25%"], ["", "%", "1", "1.5%", "-1%", "1%\n"])
    + _table(kv.is_path_segment_name, ["a", "system:node", "A b", "..a"], [".", "..", "a/b", "a%b"])
)


@pytest.mark.parametrize("port, accepted", [(1, True), (65535, True), (0, False), (65536, False), (-1, False)])
def test_port_numbers(port: int, accepted: bool) -> None:
    assert (kv.is_valid_port_num(port) == []) is accepted


@pytest.mark.parametrize("value, accepted", [("1", True), ("-12", True), ("+3", True), ("1.0", False), ("", False),
                                             ("1\n", False), ("0x1", False)])
def test_integer_strings(value: str, accepted: bool) -> None:
    assert kv.is_integer_string(value) is accepted


@pytest.mark.parametrize("fn, value, accepted", CASES)
def test_kernel_tables(fn, value: str, accepted: bool) -> None:
    errors = fn(value)
    assert (errors == []) is accepted, errors
    assert all(isinstance(e, str) and e for e in errors)


@pytest.mark.parametrize("value, accepted", [
    ("A", True), ("1GPU", True), ("a b:c", True), ("..", True), ("~!@#", True), ("x" * 300, True),
    ("", False), ("A=B", False), ("=", False), ("é", False), ("a\tb", False), ("\x7f", False),
    *[(v, False) for v in NL],
])
def test_env_var_names_from_1_33_are_printable_ascii_but_equals(value: str, accepted: bool) -> None:
    errors = kv.is_env_var_name(value, "1.33")
    assert (errors == []) is accepted
    assert kv.is_env_var_name(value) == errors == kv.is_env_var_name(value, "v1.35.4")
    if value and not accepted:
        assert errors == ["a valid environment variable name must consist only of printable ASCII characters "
                          "other than '='"]


ENV_NAMES = ["A", "1GPU", "a b:c", "..", "../x", "~!@#", "A=B", "=", "é", "a\tb", "\x7f", "a\nb"]


def test_env_var_name_messages_are_the_api_servers(tmp_path) -> None:
    """kubeval (Kubernetes v1.35.4's ValidateEnv) on a Pod with each name: gpuop's message for a refused
    name is the API server's, word for word, and gpuop refuses exactly what it refuses."""
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default"},
           "spec": {"containers": [{"name": "c", "image": "busybox",
                                    "env": [{"name": n, "value": "x"} for n in ENV_NAMES]}]}}
    f = tmp_path / "pod.yaml"
    f.write_text(json.dumps(pod))                    # JSON is YAML: every name reads back as written
    proc = subprocess.run([str(tool("kubeval")), str(f)], capture_output=True, text=True)
    errors = json.loads(proc.stdout.splitlines()[0])["errors"]
    found = [re.fullmatch(r'spec\.containers\[0\]\.env\[(\d+)\]\.name: Invalid value: "(?:[^"\\]|\\.)*": (.*)', e)
             for e in errors]
    assert all(found), errors
    theirs = {int(m.group(1)): m.group(2) for m in found}
    ours = {i: kv.is_env_var_name(n) for i, n in enumerate(ENV_NAMES) if kv.is_env_var_name(n)}
    assert set(theirs) == set(ours) and len(ours) >= 5, (theirs, ours)
    assert all(ours[i] == [theirs[i]] for i in ours), (theirs, ours)


@pytest.mark.parametrize("value, accepted", [
    ("A", True), ("my.env-name", True), ("_x", True), ("a1", True),
    ("1GPU", False), ("a b", False), ("A=B", False), (".", False), ("..", False), ("..a", False),
    *[(v, False) for v in NL],
])
def test_env_var_names_before_1_33_are_the_old_grammar(value: str, accepted: bool) -> None:
    assert (kv.is_env_var_name(value, "1.32") == []) is accepted


def test_messages_use_apimachinery_wording() -> None:
    assert kv.is_dns1123_subdomain("abc\n") == [
        "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must "
        "start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is "
        "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"]
    assert kv.is_dns1123_label("x\n") == [
        "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and "
        "end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is "
        "'[a-z0-9]([-a-z0-9]*[a-z0-9])?')"]
    assert kv.is_dns1123_label("a.b") == ["must not contain dots"]
    assert kv.is_sysctl_name("Net.core") == [
        "must have at most 253 characters and match regex ^([a-z0-9]([-_a-z0-9]*[a-z0-9])?[\\./])*"
        "[a-z0-9]([-_a-z0-9]*[a-z0-9])?$"]
    assert kv.is_config_map_key("..") == ["must not be '..'"]
    assert kv.is_valid_port_name("abcdefghijklmnop") == ["must be no more than 15 characters"]
    assert kv.invalid("abc\n", "x") == 'Invalid value: "abc\\n": x'


@pytest.mark.parametrize("name, namespace", [
    ("net.core.somaxconn", "net"), ("net/ipv4/ip_forward", "net"), ("kernel.shm_rmid_forced", "ipc"),
    ("kernel.msgmax", "ipc"), ("kernel.sem", "ipc"), ("fs.mqueue.msg_max", "ipc"),
    ("kernel.domainname", None), ("vm.swappiness", None), ("kernel.semx", None),
])
def test_sysctl_namespaces(name: str, namespace: str | None) -> None:
    assert kv.sysctl_namespace(name) == namespace


@pytest.mark.parametrize("path, problems", [
    ("metadata.name", []), ("status.podIPs", []), ("spec.nodeName", []), ("metadata.labels['app']", []),
    ("metadata.annotations['Example.com/Key']", []),
    ("metadata.labels", [("fieldPath", "Unsupported value")]), ("status.phase", [("fieldPath", "Unsupported value")]),
    ("spec.foo", [("fieldPath", "field label not supported")]),
    ("metadata.name\n", [("fieldPath", "field label not supported")]),
    ("metadata.labels['bad key']", [("", "name part must consist")]),
])
def test_env_field_paths(path: str, problems: list[tuple[str, str]]) -> None:
    found = kv.env_field_path_problems(path)
    assert [(sub, any(p in msg for p in [want])) for (sub, msg), (_, want) in zip(found, problems)] == \
        [(sub, True) for sub, _ in problems]
    assert len(found) == len(problems)


@pytest.mark.parametrize("text, value", [
    ("1", Fraction(1)), ("100m", Fraction(1, 10)), ("1Gi", Fraction(2**30)), ("1.5", Fraction(3, 2)),
    ("1e3", Fraction(1000)), ("1E-3", Fraction(1, 1000)), ("-1", Fraction(-1)), (".5", Fraction(1, 2)),
    ("5.", Fraction(5)), ("+2k", Fraction(2000)), (3, Fraction(3)), (0.25, Fraction(1, 4)),
    ("Gi", Fraction(0)), (".", Fraction(0)), ("1e+3", Fraction(1000)),    # upstream reads an empty number as 0
])
def test_quantities_parse(text, value) -> None:
    assert quantity.parse_quantity(text) == value


@pytest.mark.parametrize("text, message", [
    ("", quantity.FORMAT_ERROR), ("1Gb", quantity.FORMAT_ERROR), ("1 Gi", quantity.FORMAT_ERROR),
    ("1Mi2", quantity.SUFFIX_ERROR), ("1e", quantity.SUFFIX_ERROR), ("0x10", quantity.FORMAT_ERROR),
    ("1Gi\n", quantity.FORMAT_ERROR), ("\n1", quantity.FORMAT_ERROR), ("1ki", quantity.SUFFIX_ERROR),
    (True, quantity.FORMAT_ERROR),
])
def test_quantities_refused(text, message: str) -> None:
    with pytest.raises(quantity.QuantityError, match="^" + __import__("re").escape(message) + "$"):
        quantity.parse_quantity(text)


def test_quantity_bound_is_int64_milli() -> None:
    assert quantity.in_int64_milli("9223372036854775") and not quantity.in_int64_milli("9223372036854776")
    assert quantity.in_int64_milli("9223372036854775807m") and not quantity.in_int64_milli("9223372036854775808m")


SCANNED = ["verify", "validate", "kube/types.py", "profile/models.py"]


def test_the_stages_hold_no_private_name_regex_and_never_anchor_with_match() -> None:
    """verify/, validate/, kube/types.py and the profile models use the kernel: no `re.match` (whose `$` lets a
    final newline through) and no pattern of their own for DNS names, label keys or values, env names or
    quantities."""
    pkg = REPO / "constructs" / "gpuop"
    kernel_fragments = ("[a-z0-9]([-a-z0-9]*[a-z0-9])?", "[-._a-zA-Z][-._a-zA-Z0-9]*", "[A-Za-z0-9][-A-Za-z0-9_.]*",
                        "[-._a-zA-Z0-9]+", "[eEinumkKMGTP]")
    found = []
    for entry in SCANNED:
        for path in ([pkg / entry] if entry.endswith(".py") else sorted((pkg / entry).rglob("*.py"))):
            tree = ast.parse(path.read_text())
            for node in ast.walk(tree):
                if isinstance(node, ast.Attribute) and node.attr == "match" and getattr(node.value, "id", "") == "re":
                    found.append(f"{path.relative_to(pkg)}:{node.lineno} re.match")
                if isinstance(node, ast.Constant) and isinstance(node.value, str):
                    found += [f"{path.relative_to(pkg)}:{node.lineno} {f}" for f in kernel_fragments if f in node.value]
    assert found == []


def test_kernel_applies_every_pattern_with_fullmatch() -> None:
    source = Path(kv.__file__).read_text() + Path(quantity.__file__).read_text()
    assert ".match(" not in source and "re.search(\"^" not in source


def _profile_issues(tmp_path: Path, platform: dict, env_name: str) -> list:
    from gpuop.errors import UserError
    from gpuop.profile.load import load_profile
    from gpuop.validate.runner import validate

    doc = {"apiVersion": "gpuop/v1alpha1", "kind": "ClusterProfile", "metadata": {"name": "t"},
           "spec": {"platform": platform, "os": "ubuntu24.04" if platform["type"] == "kubernetes" else "rhcos4.19",
                    "driver": {"version": "580", "env": [{"name": env_name, "value": "x"}],
                               **({"rhcosVersions": ["419.96.202507091512-0"]} if platform["type"] == "openshift"
                                  else {})},
                    "nodePools": [{"name": "p", "gpu": "L40S", "gpusPerNode": 4, "nodes": 1}]}}
    path = tmp_path / "t.yaml"
    path.write_text(__import__("json").dumps(doc))
    try:
        validate(load_profile(path))
    except UserError as exc:
        return [i for i in exc.issues if i.path == "spec.driver.env[0].name"]
    return []


@pytest.mark.parametrize("platform, name, refused", [
    ({"type": "kubernetes", "version": "1.33"}, "1GPU weird:name", False),
    ({"type": "kubernetes", "version": "1.32"}, "1GPU", True),           # the older grammar before 1.33
    ({"type": "kubernetes", "version": "1.32"}, "MY_ENV.NAME", False),
    ({"type": "openshift", "version": "4.19"}, "1GPU", True),             # OpenShift 4.19 is Kubernetes 1.32
    ({"type": "kubernetes", "version": "1.35"}, "A=B", True),             # never: '='
    ({"type": "kubernetes", "version": "1.35"}, "A\n", True),
])
def test_profile_env_names_follow_the_clusters_kubernetes_version(tmp_path, platform, name, refused) -> None:
    found = _profile_issues(tmp_path, platform, name)
    assert bool(found) is refused, [str(i) for i in found]
