"""Registries are untrusted: `gpuop images resolve` and `gpuop publish` against loopback servers
(127.0.0.1, tests/hostile_servers.py) that misbehave on purpose. Each case asserts exit 2, the located
message, no lock written (or the old one byte for byte), nothing written outside the project and, where
the attack is to make gpuop send something, that the other server never heard from gpuop."""

from __future__ import annotations

import json
import shutil
import textwrap
import time
from pathlib import Path

import pytest

from conftest import REPO
from hostile_servers import OCI_MANIFEST, digest, manifest_for, serve
from gpuop.cli.main import main

PROFILE = """\
    apiVersion: gpuop/v1alpha1
    kind: ClusterProfile
    metadata: {name: dark}
    spec:
      platform: {type: kubernetes, version: "1.33"}
      os: ubuntu24.04
      driver: {version: "580"}
      gfd: {enabled: false}
      dcgmExporter: {enabled: false}
      images: {registry: mirror.example.com/nvidia}
      nodePools: [{name: a, gpu: L40S}]
    """


@pytest.fixture
def project(tmp_path, monkeypatch) -> Path:
    w = tmp_path / "project"
    (w / "profiles").mkdir(parents=True)
    shutil.copy(REPO / "gpuop.yaml", w / "gpuop.yaml")
    (w / "profiles" / "dark.yaml").write_text(textwrap.dedent(PROFILE))
    monkeypatch.chdir(w)
    return w


def outside(project: Path) -> list[str]:
    """Everything beside the project in its temporary folder: must stay empty."""
    return sorted(p.name for p in project.parent.iterdir() if p != project)


def resolve(capsys, registry: str, *extra: str) -> tuple[int, list[str]]:
    code = main(["images", "resolve", "--registry", registry, "--plain-http", *extra, "profiles"])
    return code, capsys.readouterr().err.splitlines()


def refused(project: Path, code: int, err: list[str], message: str) -> None:
    assert code == 2, err
    assert any(message in line for line in err), err
    assert err[-1].startswith("gpuop: ") and err[-1].endswith("; nothing written"), err
    assert not any("Traceback" in line for line in err)
    assert not (project / "images.lock.json").exists()
    assert outside(project) == []


def test_a_well_behaved_registry_fills_the_lock(project, capsys):
    with serve(lambda h: h.good_manifest()) as (host, seen):
        code, err = resolve(capsys, f"{host}/mirror")
    assert code == 0, err
    lock = json.loads((project / "images.lock.json").read_text())["images"]
    # the stack's images, NFD's and the chart's smoke-test image: every image an output can pull is locked
    assert len(lock) == 7 and all(v == digest(manifest_for(f"/v2/mirror/{k.rpartition(':')[0]}/manifests/"
                                                           f"{k.rpartition(':')[2]}")) for k, v in lock.items())


def _html_login(h):
    h.send(200, b"<html><body>Please log in</body></html>", {"Content-Type": "text/html"})


def _no_digest(h):
    h.send(200, manifest_for(h.path), {"Content-Type": OCI_MANIFEST})


def _wrong_digest(h):
    h.send(200, manifest_for(h.path), {"Content-Type": OCI_MANIFEST, "Docker-Content-Digest": digest(b"other")})


def _bad_length(h):
    body = manifest_for(h.path)
    h.send(200, body, {"Content-Type": OCI_MANIFEST, "Docker-Content-Digest": digest(body)}, length="12, 12")


def _huge_length(h):          # claims 1.5 GiB and sends nothing: refused on the header, not read
    h.send_response(200)
    h.send_header("Content-Type", OCI_MANIFEST)
    h.send_header("Content-Length", str(3 * 2 ** 29))
    h.end_headers()
    h.wfile.flush()
    time.sleep(3)


def _endless_body(h):         # no Content-Length: streams until the client stops reading
    h.send_response(200)
    h.send_header("Content-Type", OCI_MANIFEST)
    h.send_header("Connection", "close")
    h.end_headers()
    chunk = b" " * 65536
    for _ in range(200):      # 13 MB at most, far past the cap
        h.wfile.write(chunk)


def _trickle(h):              # a byte every 5 s: no per-read timeout ever fires
    h.send_response(200)
    h.send_header("Content-Type", OCI_MANIFEST)
    h.send_header("Content-Length", "100")
    h.end_headers()
    for _ in range(6):
        h.wfile.write(b" ")
        h.wfile.flush()
        time.sleep(5)


def _to_ftp(h):
    h.send(302, b"", {"Location": "ftp://127.0.0.1/x"})


def _loop(h):
    h.send(302, b"", {"Location": h.path + "x"})


@pytest.mark.parametrize("answer, extra, message", [
    (_html_login, (), "answered 'text/html', not a manifest"),
    (_no_digest, (), "the answer names no digest (Docker-Content-Digest missing or malformed)"),
    (_wrong_digest, (), "served digest sha256:"),
    (_bad_length, (), "registry error: malformed Content-Length '12, 12'"),
    (_huge_length, (), "the response is 1610612736 bytes; at most 4194304 are accepted (limit 4194304)"),
    (_endless_body, (), "the response is more than 4194304 bytes (limit 4194304)"),
    (_trickle, ("--timeout", "2"), "no complete answer within 2 s"),
    (_to_ftp, (), "registry error: ftp scheme; allowed: http, https"),
    (_loop, (), "registry error: more than 5 redirects"),
], ids=["html-200", "no-digest", "wrong-digest", "bad-content-length", "1.5GiB", "endless", "trickle", "ftp",
        "redirect-loop"])
def test_a_hostile_manifest_answer_is_exit_2(project, capsys, answer, extra, message):
    with serve(answer) as (host, _seen):
        code, err = resolve(capsys, f"{host}/mirror", *extra)
    refused(project, code, err, message)


def test_an_old_lock_is_kept_byte_for_byte_when_the_registry_lies(project, capsys):
    old = b'{"apiVersion": "gpuop/v1alpha1", "kind": "ImageDigests", "images": {}}\n'
    (project / "images.lock.json").write_bytes(old)
    with serve(_html_login) as (host, _):
        code, err = resolve(capsys, f"{host}/mirror")
    assert code == 2 and (project / "images.lock.json").read_bytes() == old, err


def test_a_redirect_to_another_host_is_refused_and_never_followed(project, capsys):
    with serve(lambda h: h.good_manifest()) as (other, other_seen):
        port = other.rpartition(":")[2]
        with serve(lambda h: h.send(307, b"", {"Location": f"http://localhost:{port}{h.path}"})) as (host, _):
            code, err = resolve(capsys, f"{host}/mirror")
    refused(project, code, err, "redirect to another host (localhost) refused; only redirects on 127.0.0.1:")
    assert other_seen == []


def _challenge(realm: str):
    def answer(h):
        if h.headers.get("Authorization"):
            h.good_manifest()
        else:
            h.send(401, b"{}", {"WWW-Authenticate": f'Bearer realm="{realm}",service="r",scope="repository:x:pull"'})
    return answer


def test_a_file_realm_is_never_read(project, capsys, tmp_path):
    secret = project / "secret.json"
    secret.write_text('{"token": "from-a-local-file"}')
    with serve(_challenge(f"file://{secret}")) as (host, seen):
        code, err = resolve(capsys, f"{host}/mirror")
    refused(project, code, err, "token realm with scheme 'file' refused; allowed: https, or the registry's own host")
    assert not any("Authorization" in headers for _, headers in seen)


def test_a_plain_http_realm_on_another_host_gets_no_request(project, capsys):
    with serve(lambda h: h.send(200, b'{"token": "t"}', {"Content-Type": "application/json"})) as (realm, realm_seen):
        port = realm.rpartition(":")[2]
        with serve(_challenge(f"http://localhost:{port}/token")) as (host, _):
            code, err = resolve(capsys, f"{host}/mirror")
    refused(project, code, err, "token realm over plain http on another host refused")
    assert realm_seen == []


def test_a_realm_on_the_registry_itself_works(project, capsys):
    def answer(h):
        if h.path.startswith("/token"):
            h.send(200, b'{"token": "t0k"}', {"Content-Type": "application/json"})
        else:
            if h.headers.get("Authorization") == "Bearer t0k":
                h.good_manifest()
            else:
                port = h.server.server_address[1]
                h.send(401, b"{}", {"WWW-Authenticate": f'Bearer realm="http://127.0.0.1:{port}/token",service="r"'})
    with serve(answer) as (host, _):
        code, err = resolve(capsys, f"{host}/mirror")
    assert code == 0, err


@pytest.mark.parametrize("url, message", [
    ("http://u:p@127.0.0.1:{port}/mirror", "credentials in the URL are refused"),
    ("http://127.0.0.1:99999/mirror", "has a port outside 1..65535"),
    ("http://гegistry.example.com/mirror", "not an allowed URL (longer than 2048 characters, non-ASCII"),
    ("http://-oProxyCommand=x/mirror", "has a host that starts with '-'"),
    ("ftp://127.0.0.1:{port}/mirror", "ftp scheme; allowed: http, https"),
    ("http://127.0.0.1:{port}/" + "m" * 3000, "longer than 2048 characters"),
])
def test_a_registry_url_outside_the_grammar_is_exit_2_and_nothing_is_sent(project, capsys, url, message):
    with serve(lambda h: h.good_manifest()) as (host, seen):
        code, err = resolve(capsys, url.format(port=host.rpartition(":")[2]))
    refused(project, code, err, message)
    assert seen == []
    assert not any(":p@" in line for line in err)


# ---- publish: never push a version gpuop could not prove absent ------------------------------------

def _dist(project: Path) -> Path:
    dist = project / "dist"
    (dist / "charts").mkdir(parents=True)
    (dist / "charts" / "c1-0.1.0.tgz").write_bytes(b"not pushed")
    entry = {k: "x" for k in ("chart", "manifests", "overlay", "argocd", "flux", "namespace", "kubeVersion")}
    (dist / "index.json").write_text(json.dumps({"kind": "Index", "clusters": [
        {**entry, "name": "c1", "chartVersion": "0.1.0", "package": "charts/c1-0.1.0.tgz"}]}))
    return dist


@pytest.mark.parametrize("status", [401, 403])
def test_publish_refuses_when_the_tag_list_is_unreadable(project, capsys, status):
    _dist(project)

    def answer(h):
        h.send(status, b'{"errors":[{"code":"UNAUTHORIZED","message":"no"}]}', {"Content-Type": "application/json"})
    with serve(answer) as (host, seen):
        code = main(["publish", "--oci", f"oci://{host}/gpu", "--plain-http", "dist"])
    err = capsys.readouterr().err
    assert code == 2, err
    assert f"cannot read the tags of oci://{host}/gpu/c1" in err and "refusing to push a version gpuop could not " \
        "prove absent" in err
    assert "c1 0.1.0: not attempted" in err and "0 pushed" in err
    assert [p for p, _ in seen] == ["/v2/gpu/c1/tags/list"]          # nothing but the question: no upload
    assert outside(project) == []


@pytest.mark.slow          # Helm's client retries a 5xx for a few seconds
def test_publish_refuses_when_the_tag_list_answers_500(project, capsys):
    _dist(project)
    with serve(lambda h: h.send(500, b"oops", {"Content-Type": "text/plain"})) as (host, seen):
        code = main(["publish", "--oci", f"oci://{host}/gpu", "--plain-http", "dist"])
    err = capsys.readouterr().err
    assert code == 2 and "refusing to push a version gpuop could not prove absent" in err, err
    assert {p for p, _ in seen} == {"/v2/gpu/c1/tags/list"}


def test_publish_refuses_credentials_in_the_reference(project, capsys):
    _dist(project)
    with serve(lambda h: h.send(404, b"")) as (host, seen):
        code = main(["publish", "--oci", f"oci://u:p@{host}/gpu", "--plain-http", "dist"])
    err = capsys.readouterr().err
    assert code == 2 and "--oci: registry error: credentials in the URL are refused" in err, err
    assert seen == [] and ":p@" not in err


def test_publish_pushes_when_the_registry_says_the_repository_does_not_exist(project, capsys):
    _dist(project)

    def answer(h):
        h.send(404, b'{"errors":[{"code":"NAME_UNKNOWN","message":"repository name not known to registry"}]}',
               {"Content-Type": "application/json"})
    with serve(answer) as (host, seen):
        code = main(["publish", "--oci", f"oci://{host}/gpu", "--plain-http", "dist"])
    err = capsys.readouterr().err
    assert code == 2 and "cannot read the tags" not in err, err
    # a 404 proves absence: gpuop went on to push (Helm's client refuses this fake archive before uploading)
    assert "registry error: file 'dist/charts/c1-0.1.0.tgz'" in err, err
    assert [p for p, _ in seen] == ["/v2/gpu/c1/tags/list"]


def test_a_lock_that_links_outside_is_neither_read_nor_written(project, capsys):
    outside = project.parent / "outside.json"
    outside.write_text('{"kind": "ImageDigests", "images": {}}')
    (project / "images.lock.json").symlink_to(outside)
    with serve(lambda h: h.good_manifest()) as (host, _):
        code, err = resolve(capsys, f"{host}/mirror")
    assert code == 2 and "images.lock.json: is a symlink, not a digest lock; links are not followed" in err, err
    assert outside.read_text() == '{"kind": "ImageDigests", "images": {}}'
