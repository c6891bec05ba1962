"""Settings (gpuop.yaml) are untrusted: every string lands in Argo CD and Flux objects, the goTemplate
ApplicationSet and the output marker. Each string is validated against the grammar of the place it
lands (URLs, Go durations, git refs, Kubernetes names) or refused with a located exit 2.

- A property test writes random strings through every settings field and checks that either the
  settings are refused or every object written parses back (YAML 1.1 and 1.2) to the same data, and
  no string from the settings holds Go template syntax inside the ApplicationSet.
- The command line cases: exit 2, the located message, dist/ untouched, nothing written outside the
  project, and the attacker's value nowhere in the output."""

from __future__ import annotations

import io
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings as hsettings, strategies as st
from pydantic import ValidationError
from ruamel.yaml import YAML

from test_cli_errors import ENV, REPO, VALID, tree

from gpuop.kube.yamlio import dump
from gpuop.outputs import flux, fleet
from gpuop.profile.settings import Settings

FIELDS = [("repoURL",), ("revision",), ("path",), ("argocd", "namespace"), ("argocd", "project"),
          ("argocd", "server"), ("flux", "namespace"), ("flux", "interval"), ("flux", "oci")]
HOSTILE = "{}$`'\"\\ \n\r\t#:@%/-.?&|;<>!*~^[]()=,+_\u00a0\u0456\u200b\ufeff"
pieces = st.one_of(
    st.text(alphabet=st.sampled_from(list(HOSTILE) + list("abcXYZ019")), max_size=30),
    st.text(max_size=20),
    st.sampled_from(["{{.name}}", "{{ .cluster }}", "${VAR}", "user:pw@", "-oProxyCommand=x", ":99999", ":0",
                     "xn--80ak6aa92e.com", "[::1]", "\u0440", "%zz", "%2F"]))
strings = st.lists(pieces, min_size=1, max_size=4).map("".join)
prefixed = st.tuples(st.sampled_from(["https://", "http://", "ssh://", "git://", "oci://", "git@", ""]),
                     strings).map("".join)


def _yaml12(text: str):
    return YAML(typ="safe", pure=True).load(io.StringIO(text))


def _strings(obj, path=()):
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from _strings(v, path + (k,))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from _strings(v, path + (i,))
    elif isinstance(obj, str):
        yield path, obj


@hsettings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(field=st.sampled_from(FIELDS), value=st.one_of(strings, prefixed))
def test_every_settings_string_is_refused_or_reads_back_as_itself(field, value):
    gitops = {"repoURL": "https://git.example.com/fleet.git", "flux": {"oci": "oci://r.example.com/charts"}}
    node = gitops
    for part in field[:-1]:
        node = node.setdefault(part, {})
    node[field[-1]] = value
    try:
        s = Settings.model_validate({"apiVersion": "gpuop/v1alpha1", "kind": "Settings", "gitops": gitops})
    except ValidationError:
        return                                               # refused: exit 2 at the boundary
    objects = [fleet.application_set(s.gitops), fleet.app_project(s.gitops, []), flux.source(s.gitops)]
    for obj in objects:
        text = dump(obj)
        assert yaml.safe_load(text) == obj                   # YAML 1.1 (kubectl, PyYAML)
        assert _yaml12(text) == obj                          # YAML 1.2
    appset = objects[0]
    for path, text in _strings(appset["spec"]):
        if text == value:          # a settings string inside the goTemplate ApplicationSet: no template syntax
            assert "{{" not in text and "}}" not in text, path
    if field in (("repoURL",), ("argocd", "server"), ("flux", "oci")):
        assert value.isascii() and len(value) <= 2048
        assert not any(c in value for c in "{}$ \n\r\t\"'`\\")
        host = value.split("://", 1)[-1].split("/")[0]
        assert ":" not in host.rpartition("@")[0] if "://" in value else True   # no user:password@
        assert not host.rpartition("@")[2].startswith("-")


@hsettings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(field=st.sampled_from(["publicKeySecret", "passwordEnv", "provider"]), value=st.one_of(strings, prefixed))
def test_every_signing_string_is_refused_or_reads_back_in_spec_verify(field, value):
    """The signing block: the public key Secret's name reaches every OCIRepository's spec.verify, the
    password's variable name reaches only gpuop's own environment lookup; each is a Kubernetes name / an
    environment variable name or refused."""
    signing = {"publicKeySecret": "cosign-pub", field: value}
    try:
        s = Settings.model_validate({"apiVersion": "gpuop/v1alpha1", "kind": "Settings",
                                     "gitops": {"repoURL": "https://git.example.com/fleet.git"}, "signing": signing})
    except ValidationError:
        return
    obj = flux.verify(s.signing)
    assert obj == {"verify": {"provider": "cosign", "secretRef": {"name": s.signing.publicKeySecret}}}
    text = dump(obj)
    assert yaml.safe_load(text) == obj and _yaml12(text) == obj
    assert re.fullmatch(r"[a-z0-9]([-a-z0-9.]*[a-z0-9])?", s.signing.publicKeySecret)
    assert re.fullmatch(r"[A-Z_][A-Z0-9_]*", s.signing.passwordEnv)


def test_no_signing_block_means_no_spec_verify():
    s = Settings.model_validate({"apiVersion": "gpuop/v1alpha1", "kind": "Settings",
                                 "gitops": {"repoURL": "https://git.example.com/fleet.git"}})
    assert s.signing is None and flux.verify(s.signing) == {}


# ---- the command line ------------------------------------------------------------------------------

ATTACKS = [
    ("repoURL", "https://git.example.com/{{.cluster}}/x.git", "{{.cluster}}",
     "gitops.repoURL: 'https://git.example.com/{{.cluster}}/x.git' is not an allowed URL: it has a path with "
     "characters other than"),
    ("repoURL", "https://user:password@git.example.com/x.git", "password",
     "gitops.repoURL: 'https://***@git.example.com/x.git' is not an allowed URL: it holds credentials"),
    ("repoURL", "ssh://-oProxyCommand=touch${IFS}pwned/x", "ProxyCommand",
     "gitops.repoURL: 'ssh://-oProxyCommand=touch${IFS}pwned/x' is not an allowed URL: it has a host that starts "
     "with '-'"),
    ("repoURL", "https://git.example.com:99999/x.git", "git.example.com:99999",
     "gitops.repoURL: 'https://git.example.com:99999/x.git' is not an allowed URL: it has a port outside 1..65535"),
    ("repoURL", "https://gіthub.com/x.git", "gіthub",
     "gitops.repoURL: 'https://gіthub.com/x.git' is not an allowed URL: it holds a space, a control character or a "
     "non-ASCII character"),
    ("repoURL", "https://git.example.com/" + "a" * 200_000, "a" * 5000,
     "gitops.repoURL: 'https://git.example.com/aaaa"),
    ("argocd.server", "https://k8s.example.com/{{.name}}", "k8s.example.com",
     "gitops.argocd.server: 'https://k8s.example.com/{{.name}}' is not an allowed URL"),
    ("flux.interval", "99999999999999h", "99999999999999h",
     "gitops.flux.interval: '99999999999999h' is not a Go duration within Go's range"),
    ("flux.interval", "0s", "interval: 0s", "gitops.flux.interval: '0s' is outside 1s..8760h"),
]


@pytest.fixture(scope="module")
def good(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("good") / "project"
    (root / "profiles").mkdir(parents=True)
    shutil.copy(REPO / "gpuop.yaml", root / "gpuop.yaml")
    (root / "profiles" / "c1.yaml").write_text(VALID.replace("\n    ", "\n").lstrip())
    proc = subprocess.run([sys.executable, "-m", "gpuop.cli", "synth", "--no-cache", "-o", "dist"], cwd=root,
                          env=ENV, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    return root


def test_hostile_settings_are_exit_2_located_and_never_reach_the_output(good, tmp_path):
    """All attacks in one gpuop.yaml per field place, one synth: every one located, dist/ untouched."""
    root = tmp_path / "project"
    shutil.copytree(good, root, symlinks=True)
    before = tree(root / "dist")
    for field, value, needle, message in ATTACKS:
        gitops = {"repoURL": "https://git.example.com/x.git"}
        *parents, leaf = field.split(".")
        node = gitops
        for p in parents:
            node = node.setdefault(p, {})
        node[leaf] = value
        (root / "gpuop.yaml").write_text(yaml.safe_dump({"apiVersion": "gpuop/v1alpha1", "kind": "Settings",
                                                         "gitops": gitops}, width=10 ** 7, allow_unicode=True))
        proc = subprocess.run([sys.executable, "-m", "gpuop.cli", "synth", "-o", "dist"], cwd=root, env=ENV,
                              capture_output=True, text=True, timeout=120)
        assert proc.returncode == 2, (field, value[:80], proc.stderr)
        first = proc.stderr.splitlines()[0]
        assert first.startswith("gpuop.yaml:") and message in first, (field, first[:300])
        assert len(first) < 1000                                # a 200 KB URL is not echoed whole
        assert proc.stderr.splitlines()[-1].endswith("; nothing written")
        assert "Traceback" not in proc.stderr and "password" not in proc.stderr
        assert tree(root / "dist") == before
        assert not any(needle.encode() in f.read_bytes() for f in (root / "dist").rglob("*") if f.is_file())
        assert sorted(p.name for p in tmp_path.iterdir()) == ["project"]


# ---- the goTemplate ApplicationSet: a literal stays literal under Go's text/template ---------------

@hsettings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(value=st.lists(st.sampled_from(["{{", "}}", "{{.name}}", "{{ .cluster }}", "{", "}", "a", '"', "x/y", "-"]),
                      min_size=1, max_size=8).map("".join))
def test_go_literal_renders_to_the_same_text_under_go_templates(value, tmp_path_factory):
    """Helm's engine is Go's text/template (as Argo CD's ApplicationSet controller): the escaped string
    renders back to exactly the string, so no settings value can become a template action."""
    import base64

    import helm_python as helm

    from gpuop.outputs import charts
    from gpuop.outputs.fleet import go_literal

    encoded = base64.b64encode(value.encode()).decode()
    chart = {"Chart.yaml": "apiVersion: v2\nname: t\nversion: 0.1.0\n"}
    # the value as template text, rendered; its output base64'd by the template so YAML quoting cannot blur it
    chart["templates/cm.yaml"] = ("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: t}\ndata:\n"
                                  "  v: {{ include \"lit\" . | b64enc }}\n")
    chart["templates/_lit.tpl"] = '{{- define "lit" -}}' + go_literal(value) + "{{- end -}}"
    folder = tmp_path_factory.mktemp("golit")
    (folder / "t.tgz").write_bytes(charts.archive("t", chart))
    c = helm.Chart.load(str(folder / "t.tgz"))
    try:
        out = c.render({}, name="t", namespace="n")
    finally:
        c.close()
    rendered = yaml.safe_load(next(v for k, v in out.items() if k.endswith("cm.yaml")))["data"]["v"]
    assert rendered == encoded
