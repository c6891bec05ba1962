"""The grammars of URLs, image repositories, host paths, node group names, container args and env values
(profile/grammar.py), by property: every string a grammar accepts is kept as it is and reads back equal after
gpuop's writer under YAML 1.1 (PyYAML) and 1.2 (ruamel); every string of a refused class (credentials in a URL, an
invalid repository or URL, a newline in a host path or node group name, NUL in an arg) is refused, located at its
field, whatever else the string holds. And one profile per reported case, through the CLI: exit 2, located.
"""

from __future__ import annotations

import re

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import TypeAdapter, ValidationError
from ruamel.yaml import YAML

from conftest import REPO, run_gpuop
from test_reserved_names import BASE as BASE_TEXT
from gpuop.errors import UserError
from gpuop.kube import yamlio
from gpuop.profile import grammar
from gpuop.profile.load import load_profile
from gpuop.profile.models import ClusterProfile
from gpuop.validate.runner import validate

SETTINGS = settings(max_examples=200, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])

TYPES = {name: TypeAdapter(getattr(grammar, name)) for name in
         ("ProxyUrl", "ChartRepositoryUrl", "ImageRepository", "HostPath", "NodeGroupName", "Arg", "EnvValue")}


def accepts(kind: str, value: str) -> str:
    return TYPES[kind].validate_python(value)


def refuses(kind: str, value: str) -> str:
    """The message gpuop prints (pydantic's own rendering also echoes the input; gpuop's never does)."""
    with pytest.raises(ValidationError) as exc:
        TYPES[kind].validate_python(value)
    return " ".join(e["msg"] for e in exc.value.errors())


def reads_back(value: str) -> None:
    """Written by gpuop's writer as a value, a key and a list item, and read back equal by YAML 1.1 and 1.2."""
    doc = {"v": value, value: "k", "l": [value]}
    text = yamlio.dump(doc)
    assert yaml.load(text, Loader=yaml.CSafeLoader) == doc, text
    assert YAML(typ="safe").load(text) == doc, text


label = st.from_regex(r"\A[a-z0-9]([a-z0-9-]{0,10}[a-z0-9])?\Z")
hosts = st.lists(label, min_size=1, max_size=4).map(".".join).filter(lambda h: not re.fullmatch(r"[0-9.]+", h))
ports = st.one_of(st.just(""), st.integers(1, 65535).map(lambda p: f":{p}"))
paths = st.lists(st.from_regex(r"\A[A-Za-z0-9._~+=,!-]{1,12}\Z"), max_size=4).map(lambda ps: "".join("/" + p for p in ps))
repo_component = st.from_regex(r"\A[a-z0-9]{1,6}([._-][a-z0-9]{1,6}){0,2}\Z")
text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=40).filter(lambda s: grammar.text_problem(s) is None)


@pytest.mark.fast
@SETTINGS
@given(scheme=st.sampled_from(["http", "https"]), host=hosts, port=ports, path=paths)
def test_a_proxy_url_of_the_grammar_is_kept_and_reads_back(scheme, host, port, path):
    value = f"{scheme}://{host}{port}{path}"
    assert accepts("ProxyUrl", value) == value
    reads_back(value)


@pytest.mark.fast
@SETTINGS
@given(scheme=st.sampled_from(["http", "https", "oci"]), user=st.from_regex(r"\A[A-Za-z0-9._-]{1,10}\Z"),
       password=st.text(st.characters(min_codepoint=33, max_codepoint=126, blacklist_characters="@/?#"), min_size=1,
                        max_size=12), host=hosts, path=paths)
def test_a_url_with_credentials_is_always_refused_and_never_echoed(scheme, user, password, host, path):
    kind = "ChartRepositoryUrl" if scheme == "oci" else "ProxyUrl"
    value = f"{scheme}://{user}:{password}@{host}{path}"
    message = refuses(kind, value)
    assert "holds credentials" in message and "Secret" in message, message
    assert f":{password}@" not in message, message             # the URL is echoed with its credentials masked


@pytest.mark.fast
@SETTINGS
@given(scheme=st.sampled_from(["https", "oci"]), host=hosts, port=ports, path=paths,
       bad=st.sampled_from(["?x=1", "#frag", " ", "\n", "{{x}}", "${x}", "\"", "\0"]))
def test_a_chart_repository_url_is_kept_or_refused_by_the_grammar(scheme, host, port, path, bad):
    value = f"{scheme}://{host}{port}{path}"
    assert accepts("ChartRepositoryUrl", value) == value
    reads_back(value)
    assert "is not an allowed URL" in refuses("ChartRepositoryUrl", value + "/" + bad)


@pytest.mark.fast
@SETTINGS
@given(host=hosts, port=ports, components=st.lists(repo_component, max_size=4))
def test_an_image_repository_of_the_reference_grammar_is_kept_and_reads_back(host, port, components):
    value = host + port + "".join("/" + c for c in components)
    assert accepts("ImageRepository", value) == value
    reads_back(value)


@pytest.mark.fast
@SETTINGS
@given(host=hosts, components=st.lists(repo_component, min_size=1, max_size=3),
       bad=st.sampled_from(["..", "-x", "x-", "X", "a//b", "a b", "a\nb", "_x", "x.", "a@b", "a:b"]))
def test_an_invalid_image_repository_is_always_refused(host, components, bad):
    value = host + "".join("/" + c for c in components) + "/" + bad
    assert "REGISTRY[:PORT][/PATH]" in refuses("ImageRepository", value) or "uppercase" in refuses("ImageRepository", value)


@pytest.mark.fast
@SETTINGS
@given(parts=st.lists(st.text(st.characters(blacklist_categories=("Cs", "Cc", "Zl", "Zp"), blacklist_characters="/\ufeff\ufffe\uffff"),
                              min_size=1, max_size=10).filter(lambda p: p not in ("..",)), min_size=1, max_size=5))
def test_a_host_path_of_the_grammar_is_kept_and_reads_back(parts):
    value = "/" + "/".join(parts)
    assert accepts("HostPath", value) == value
    reads_back(value)


@pytest.mark.fast
@SETTINGS
@given(parts=st.lists(st.from_regex(r"\A[a-z0-9._-]{1,8}\Z").filter(lambda p: p != ".."), min_size=1, max_size=4),
       control=st.sampled_from(["\n", "\r", "\0", "\x1b", "\x85", "\u2028", "\t"]), at=st.integers(0, 100))
def test_a_host_path_with_a_newline_or_control_character_is_always_refused(parts, control, at):
    value = "/" + "/".join(parts)
    at = 1 + at % len(value)
    assert "control character" in refuses("HostPath", value[:at] + control + value[at:])


@pytest.mark.fast
@SETTINGS
@given(value=st.from_regex(r"\A[A-Za-z0-9]([A-Za-z0-9._:/-]{0,40}[A-Za-z0-9])?\Z"),
       bad=st.sampled_from(["\n", "\r", " ", "\0", "\t", "#", "\"", "{", "\u2028"]), at=st.integers(0, 50))
def test_a_node_group_name_is_kept_or_refused_by_the_grammar(value, bad, at):
    assert accepts("NodeGroupName", value) == value
    reads_back(value)
    at = at % (len(value) + 1)
    assert "is not a node group name" in refuses("NodeGroupName", value[:at] + bad + value[at:])


@pytest.mark.fast
@SETTINGS
@given(value=text, control=st.sampled_from(["\0", "\x01", "\x1b", "\x7f", "\x85", "\u2028", "\u2029", "\ufeff"]),
       at=st.integers(0, 50), kind=st.sampled_from(["Arg", "EnvValue"]))
def test_args_and_env_values_keep_any_text_and_refuse_nul_and_yaml_line_breaks(value, control, at, kind):
    assert accepts(kind, value) == value
    reads_back(value)
    at = at % (len(value) + 1)
    assert "control character" in refuses(kind, value[:at] + control + value[at:])


# ---- located, through the profile: one field of each kind ------------------------------------------------------

PROFILE = {"apiVersion": "gpuop/v1alpha1", "kind": "ClusterProfile", "metadata": {"name": "t"},
           "spec": {"platform": {"type": "kubernetes", "version": "1.33"}, "os": "ubuntu24.04",
                    "driver": {"version": "580"},
                    "nodePools": [{"name": "a", "gpu": "L40S", "nodeSelector": {"pool": "a"}}]}}

FIELDS = {  # field path -> (where in PROFILE, kind)
    "spec.proxy.httpProxy": (("spec", "proxy", "httpProxy"), "ProxyUrl"),
    "spec.images.registry": (("spec", "images", "registry"), "ImageRepository"),
    "spec.hostPaths.kubeletRootDir": (("spec", "hostPaths", "kubeletRootDir"), "HostPath"),
    "spec.nodePools[0].nodeGroup": (("spec", "nodePools", 0, "nodeGroup"), "NodeGroupName"),
    "spec.devicePlugin.args[0]": (("spec", "devicePlugin", "args", 0), "Arg"),
    "spec.toolkit.env[0].value": (("spec", "toolkit", "env", 0, "value"), "EnvValue"),
}
BAD = {"ProxyUrl": "http://u:p@proxy.example.com:3128", "ImageRepository": "registry.example.com/../x",
       "HostPath": "/var/lib/kube\nlet", "NodeGroupName": "p5\nevil", "Arg": "--a\0b", "EnvValue": "x\0y"}


def put(doc: dict, where: tuple, value: str) -> dict:
    import copy

    doc = copy.deepcopy(doc)
    node = doc
    for i, key in enumerate(where[:-1]):
        nxt = where[i + 1]
        if isinstance(node, list):
            node = node[key]
            continue
        node = node.setdefault(key, [] if isinstance(nxt, int) else {})
        if isinstance(node, list) and not node:
            node.append({"name": "X"} if where[-1] == "value" else "")
    node[where[-1]] = value
    return doc


@pytest.mark.fast
@pytest.mark.parametrize("path", sorted(FIELDS))
def test_each_refused_class_is_located_at_its_field(path, tmp_path):
    where, kind = FIELDS[path]
    f = tmp_path / "p.yaml"
    f.write_text(yaml.safe_dump(put(PROFILE, where, BAD[kind]), sort_keys=False, width=1000))
    with pytest.raises(UserError) as exc:
        validate(load_profile(f))
    found = [i for i in exc.value.issues if i.path == path]
    assert found and found[0].line > 0, [str(i) for i in exc.value.issues]


@pytest.mark.fast
@pytest.mark.parametrize("path", sorted(FIELDS))
def test_a_field_of_each_kind_takes_its_grammar_by_type(path):
    """The profile model's field refuses what its grammar refuses (the type carries the grammar)."""
    where, kind = FIELDS[path]
    with pytest.raises(ValidationError):
        ClusterProfile.model_validate(put(PROFILE, where, BAD[kind]))


@pytest.mark.slow
@pytest.mark.parametrize("case, patch, line", [
    ("credentialed proxy", "  proxy: {httpProxy: 'http://admin:hunter2@proxy.example.com:3128'}\n",
     "profiles/p.yaml:12:11: spec.proxy.httpProxy: 'http://***@proxy.example.com:3128' is not an allowed URL: it "
     "holds credentials (USER:PASSWORD@), which would be committed to git in plain text and written into every "
     "object; keep credentials in a Secret in the cluster and reference it by name; allowed: http://HOST/..., "
     "https://HOST/...\n"),
    ("invalid repository", "  images: {registry: 'Registry.example.com/-x'}\n",
     "profiles/p.yaml:12:12: spec.images.registry: 'Registry.example.com/-x' is not REGISTRY[:PORT][/PATH]"),
    ("invalid URL", "  nfd: {mode: deploy, chartRepository: 'https://charts.example.com/{{.Values.x}}'}\n",
     "profiles/p.yaml:12:23: spec.nfd.chartRepository: 'https://charts.example.com/{{.Values.x}}' is not an allowed URL"),
    ("newline in host path", "  hostPaths: {rootFS: \"/host\\nx\"}\n",
     "profiles/p.yaml:12:15: spec.hostPaths.rootFS: '/host\\nx' holds the control character U+000A"),
    ("newline in node group name", "      nodeGroup: \"p5\\nevil: true\"\n",
     "profiles/p.yaml:12:7: spec.nodePools[0].nodeGroup: 'p5\\nevil: true' is not a node group name"),
    ("NUL in args", "  devicePlugin: {args: [\"--x\\0y\"]}\n",
     "profiles/p.yaml:12:25: spec.devicePlugin.args[0]: holds the control character NUL at offset 3"),
])
def test_each_reported_hostile_value_is_refused_located_with_exit_2(tmp_path, case, patch, line):
    (tmp_path / "profiles").mkdir()
    (tmp_path / "gpuop.yaml").write_text((REPO / "gpuop.yaml").read_text())
    (tmp_path / "profiles" / "p.yaml").write_text(BASE_TEXT + patch)
    proc = run_gpuop("validate", cwd=tmp_path)
    assert proc.returncode == 2, (case, proc.stderr)
    assert proc.stderr.startswith(line), (case, proc.stderr)


def test_a_credentialed_nfd_chart_repository_is_refused_naming_the_reference_fields(tmp_path):
    """The NFD chart URL with USER:PASSWORD@ never reaches dist/: refused, the password not echoed, the message
    naming where credentials go instead (spec.delivery.credentials)."""
    from gpuop.profile.grammar import DeliveryChartUrl
    from pydantic import TypeAdapter, ValidationError

    with pytest.raises(ValidationError) as err:
        TypeAdapter(DeliveryChartUrl).validate_python("https://user:Hunter2Secret@charts.example.com/nfd")
    text = str(err.value)
    assert "Hunter2Secret" not in text
    assert "spec.delivery.credentials.<nfd|operator|dra>" in text
