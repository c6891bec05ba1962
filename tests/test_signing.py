"""Signatures: `gpuop publish --oci --sign-key` signs each chart it pushes with the real cosign (built from the
Go module proxy, tools/rehearsal/cosign) into a real registry on loopback (Debian's docker-registry, as
test_publish), and the real `cosign verify` accepts it with the public key, refuses it with another key and
refuses content re-pushed under the signed tag; the Flux OCIRepository carries `spec.verify` exactly when the
settings configure signing (checked against Flux's CRD); `gpuop images resolve --verify-key` locks only
digests whose signature the key verifies. Key pairs are made in the test (`cosign generate-key-pair`)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import urllib.request
from pathlib import Path

import helm_python as helm
import pytest
import yaml

from conftest import CRDS, REPO, load_dir, run_gpuop, run_main, stack_clusters
from test_airgap import USED, _push_blob, project as airgap_project, push_image

from gpuop.verify.crdschema import CrdValidator

slow = pytest.mark.slow       # a registry, compiles, and cosign runs (all but the in-process refusals)

BUILD = REPO / "tools" / "rehearsal" / "build.py"
PASSWORD_ENV = "GPUOP_TEST_SIGNING_PASSWORD"


@pytest.fixture(scope="session")
def cosign() -> Path:
    """The cosign `make cosign` built (tools/rehearsal/build.py --cosign), or $GPUOP_COSIGN."""
    if os.environ.get("GPUOP_COSIGN"):
        return Path(os.environ["GPUOP_COSIGN"])
    if subprocess.run([sys.executable, str(BUILD), "--cosign", "--check"]).returncode != 0:
        if os.environ.get("CI"):
            pytest.fail("cosign is not built: `make cosign` (make test builds it)")
        pytest.skip("cosign is not built here: `make cosign` builds it from the Go module proxy")
    where = subprocess.run([sys.executable, str(BUILD), "--cosign", "--print-dir"], capture_output=True, text=True,
                           check=True)
    os.environ["GPUOP_COSIGN"] = str(Path(where.stdout.strip()) / "cosign")     # what gpuop runs in these tests
    return Path(os.environ["GPUOP_COSIGN"])


def _key_pair(cosign: Path, folder: Path, password: str) -> tuple[Path, Path]:
    folder.mkdir(parents=True)
    env = {**os.environ, "COSIGN_PASSWORD": password}
    subprocess.run([str(cosign), "generate-key-pair"], cwd=folder, env=env, check=True, capture_output=True)
    return folder / "cosign.key", folder / "cosign.pub"


@pytest.fixture(scope="module")
def keys(cosign, tmp_path_factory) -> dict[str, tuple[Path, Path]]:
    root = tmp_path_factory.mktemp("keys")
    return {"ours": _key_pair(cosign, root / "ours", "correct horse"),
            "other": _key_pair(cosign, root / "other", "battery staple")}


def _cosign_verify(cosign: Path, ref: str, public_key: Path) -> subprocess.CompletedProcess:
    """The real verifier, as Flux runs it for a public key: offline, no transparency log."""
    return subprocess.run([str(cosign), "verify", "--key", str(public_key), "--insecure-ignore-tlog=true",
                           "--allow-http-registry", "--allow-insecure-registry", ref],
                          capture_output=True, text=True, env={**os.environ, "TUF_ROOT": str(public_key.parent / "tuf")})


def _project(dst: Path, remote: str, signing: bool) -> Path:
    shutil.copytree(REPO / "profiles", dst / "profiles")
    settings = yaml.safe_load((REPO / "gpuop.yaml").read_text())
    settings["gitops"]["flux"] = {"source": "oci", "oci": remote}
    if signing:
        settings["signing"] = {"publicKeySecret": "gpuop-cosign-pub", "passwordEnv": PASSWORD_ENV}
    (dst / "gpuop.yaml").write_text(yaml.safe_dump(settings))
    return dst


def _oci_repositories(out: Path) -> list[dict]:
    index = json.loads((out / "index.json").read_text())
    return [o for c in stack_clusters(index) for o in load_dir(out / c["flux"]) if o["kind"] == "OCIRepository"]


@pytest.fixture(scope="module")
def published(tmp_path_factory, registry, keys) -> tuple[Path, str, str]:
    """A signed project compiled and published once: (project, remote, what publish printed)."""
    remote = f"oci://{registry}/signed"
    w = _project(tmp_path_factory.mktemp("signed") / "w", remote, signing=True)
    run_gpuop("synth", "-o", "out", cwd=w, check=True)
    os.environ[PASSWORD_ENV] = "correct horse"
    try:
        proc = run_gpuop("publish", "--oci", remote, "--plain-http", "--sign-key", str(keys["ours"][0]), "out", cwd=w)
    finally:
        del os.environ[PASSWORD_ENV]
    assert proc.returncode == 0, proc.stderr
    return w, remote, proc.stderr


def _charts(w: Path) -> list[tuple[str, str]]:
    return [(c["name"], c["chartVersion"]) for c in json.loads((w / "out" / "index.json").read_text())["clusters"]]


@slow
def test_published_charts_are_signed_and_cosign_verifies_them(published, keys, cosign):
    w, remote, stderr = published
    charts = _charts(w)
    for name, version in charts:
        assert f"gpuop: {name} {version}: pushed, signed" in stderr.splitlines()
        proc = _cosign_verify(cosign, f"{remote.removeprefix('oci://')}/{name}:{version}", keys["ours"][1])
        assert proc.returncode == 0, proc.stderr
        assert "The signatures were verified against the specified public key" in proc.stderr
    assert stderr.splitlines()[-1] == (f"gpuop: {len(charts)} pushed, 0 skipped (already published), 0 refused, "
                                       f"0 not attempted; {len(charts)} signed, 0 signature(s) verified, 0 not signed")


@slow
def test_republishing_verifies_the_existing_signatures_instead_of_signing_again(published, keys, monkeypatch):
    w, remote, _ = published
    monkeypatch.setenv(PASSWORD_ENV, "correct horse")
    proc = run_gpuop("publish", "--oci", remote, "--plain-http", "--sign-key", str(keys["ours"][0]), "out", cwd=w)
    assert proc.returncode == 0, proc.stderr
    for name, version in _charts(w):
        assert f"gpuop: {name} {version}: unchanged, signature verified" in proc.stderr.splitlines()


@slow
def test_another_key_does_not_verify_a_published_chart(published, keys, cosign):
    _, remote, _ = published
    proc = _cosign_verify(cosign, f"{remote.removeprefix('oci://')}/prod-east:0.1.0", keys["other"][1])
    assert proc.returncode != 0
    assert "failed to verify signature" in proc.stderr, proc.stderr


@pytest.fixture(scope="module")
def plain(tmp_path_factory, registry) -> Path:
    """The same project without signing, compiled."""
    w = _project(tmp_path_factory.mktemp("plain") / "w", f"oci://{registry}/plain", signing=False)
    run_gpuop("synth", "-o", "out", cwd=w, check=True)
    return w


@slow
def test_chart_content_re_pushed_under_a_signed_tag_is_refused(published, keys, cosign, registry, monkeypatch):
    w, _, _ = published
    monkeypatch.setenv(PASSWORD_ENV, "correct horse")      # a registry path of its own: the others stay intact
    run_gpuop("publish", "--oci", f"oci://{registry}/tamper", "--plain-http", "--sign-key", str(keys["ours"][0]),
              "out", cwd=w, check=True)
    ref = f"{registry}/tamper/prod-east:0.1.0"
    assert _cosign_verify(cosign, ref, keys["ours"][1]).returncode == 0
    # someone with push rights moves the tag, outside gpuop: another chart's bytes as the chart layer
    _re_push(registry, "tamper/prod-east", "0.1.0", layer=(w / "out" / "charts" / "lab-west-0.1.0.tgz").read_bytes())
    proc = _cosign_verify(cosign, ref, keys["ours"][1])
    assert proc.returncode != 0
    assert "no signatures found" in proc.stderr, proc.stderr


@slow
def test_a_wrong_password_stops_before_anything_is_pushed(published, registry, keys, monkeypatch):
    w, _, _ = published
    remote = f"oci://{registry}/wrong-password"
    monkeypatch.setenv(PASSWORD_ENV, "not the password")
    key = keys["ours"][0]
    proc = run_gpuop("publish", "--oci", remote, "--plain-http", "--sign-key", str(key), "out", cwd=w)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith(f"{key}: cannot read the cosign private key: ")
    assert f"(its password is read from ${PASSWORD_ENV}, the settings' signing.passwordEnv)" in proc.stderr
    assert "not the password" not in proc.stderr and "Traceback" not in proc.stderr
    client = helm.RegistryClient(plain_http=True)
    try:
        with pytest.raises(helm.HelmError):
            client.tags(f"{remote}/prod-east")          # nothing pushed: the repository does not exist
    finally:
        client.close()


def test_signing_settings_and_the_key_go_together(tmp_path):
    """Checked before the output is read or a registry asked: the settings' signing and --sign-key together."""
    signed = _project(tmp_path / "signed", "oci://127.0.0.1:9/gpu", signing=True)
    proc = run_main("publish", "--oci", "oci://127.0.0.1:9/gpu", "--plain-http", "out", cwd=signed)
    assert proc.returncode == 2
    assert proc.stderr == ("gpuop.yaml: signing: signing is configured, so every OCIRepository verifies the charts "
                           "(spec.verify); pass --sign-key FILE (the cosign private key)\n"
                           "gpuop: 1 error; nothing written\n")
    plain = _project(tmp_path / "plain", "oci://127.0.0.1:9/gpu", signing=False)
    proc = run_main("publish", "--oci", "oci://127.0.0.1:9/gpu", "--plain-http", "--sign-key", "k.key", "out", cwd=plain)
    assert proc.returncode == 2
    assert proc.stderr == ("--sign-key: gpuop.yaml configures no signing (add signing.publicKeySecret, the Secret Flux "
                           "verifies with, and recompile); refusing to sign what no OCIRepository verifies\n"
                           "gpuop: 1 error; nothing written\n")
    assert not (signed / "out").exists() and not (plain / "out").exists()


@slow
def test_oci_repositories_carry_verify_exactly_when_signing_is_configured(published, plain):
    crds = CrdValidator.from_files([CRDS / "source.toolkit.fluxcd.io_ocirepositories.yaml"])
    w, _, _ = published
    signed, unsigned = _oci_repositories(w / "out"), _oci_repositories(plain / "out")
    assert signed and len(signed) == len(unsigned)
    for s, p in zip(signed, unsigned):
        assert s["spec"]["verify"] == {"provider": "cosign", "secretRef": {"name": "gpuop-cosign-pub"}}
        assert "verify" not in p["spec"]
        strip = lambda o: {k: v for k, v in o["spec"].items() if k not in ("verify", "url")}  # noqa: E731
        assert strip(s) == strip(p)
        assert crds.errors(s) == [] and crds.errors(p) == []
    broken = json.loads(json.dumps(signed[0]))
    broken["spec"]["verify"] = {"secretRef": {"name": "x"}, "provider": "gpg"}
    assert crds.errors(broken)            # the check can fail: a provider Flux does not know


# ---- upstream images: `gpuop images resolve --verify-key` ----------------------------------------------

def _sign_mirror(registry: str, prefix: str, keys, cosign: Path) -> dict[str, str]:
    """Every image the air-gap profile uses, pushed under <registry>/<prefix>/ and signed with our key."""
    found = {}
    env = {**os.environ, "COSIGN_PASSWORD": "correct horse", "TUF_ROOT": str(keys["ours"][0].parent / "tuf")}
    for key in USED:
        path, _, tag = key.rpartition(":")
        digest = push_image(registry, f"{prefix}/{path}", tag)
        subprocess.run([str(cosign), "sign", "--key", str(keys["ours"][0]), "--tlog-upload=false",
                        "--use-signing-config=false", "--allow-http-registry", "-y",
                        f"{registry}/{prefix}/{path}@{digest}"], env=env, check=True, capture_output=True)
        found[key] = digest
    return found


def _re_push(registry: str, name: str, tag: str, layer: bytes | None = None) -> str:
    """Other content under a signed tag: the tag's manifest with an annotation added (and with `layer`, its
    first layer replaced by those bytes), put under the same tag; returns the new digest."""
    req = urllib.request.Request(f"http://{registry}/v2/{name}/manifests/{tag}",
                                 headers={"Accept": "application/vnd.oci.image.manifest.v1+json"})
    with urllib.request.urlopen(req) as r:
        manifest = json.loads(r.read())
    manifest["annotations"] = {**manifest.get("annotations", {}), "org.example.tampered": "true"}
    if layer is not None:
        manifest["layers"][0].update(digest=_push_blob(registry, name, layer), size=len(layer))
    body = json.dumps(manifest).encode()
    put = urllib.request.Request(f"http://{registry}/v2/{name}/manifests/{tag}", data=body, method="PUT",
                                 headers={"Content-Type": "application/vnd.oci.image.manifest.v1+json"})
    with urllib.request.urlopen(put) as r:
        return r.headers["Docker-Content-Digest"]


@pytest.fixture(scope="module")
def signed_mirror(registry, keys, cosign) -> dict[str, str]:
    return _sign_mirror(registry, "signed-mirror", keys, cosign)


@slow
def test_resolve_locks_digests_whose_signatures_the_key_verifies(tmp_path, registry, signed_mirror, keys):
    w = airgap_project(tmp_path)
    proc = run_gpuop("images", "resolve", "--registry", f"{registry}/signed-mirror", "--plain-http", "--lock",
                     "images.lock.json", "--verify-key", str(keys["ours"][1]), "profiles", cwd=w)
    assert proc.returncode == 0, proc.stderr
    assert json.loads((w / "images.lock.json").read_text())["images"] == signed_mirror


@slow
def test_resolve_refuses_to_lock_with_another_key(tmp_path, registry, signed_mirror, keys):
    w = airgap_project(tmp_path)
    other = keys["other"][1]
    proc = run_gpuop("images", "resolve", "--registry", f"{registry}/signed-mirror", "--plain-http", "--lock",
                     "images.lock.json", "--verify-key", str(other), "profiles", cwd=w)
    assert proc.returncode == 2, proc.stderr
    *lines, last = proc.stderr.splitlines()
    assert len(lines) == len(USED) and last == f"gpuop: {len(USED)} errors; nothing written"
    for line, key in zip(lines, sorted(USED)):
        path, _, tag = key.rpartition(":")
        assert line.startswith(f"{registry}/signed-mirror/{path}:{tag}: signature not verified by {other} at "
                               f"{signed_mirror[key]}: "), line
        assert line.endswith("; refusing to lock it")
    assert not (w / "images.lock.json").exists()


@slow
def test_resolve_refuses_an_image_re_pushed_under_a_signed_tag(tmp_path, registry, keys, cosign):
    _sign_mirror(registry, "tampered-mirror", keys, cosign)
    moved = _re_push(registry, "tampered-mirror/gpu-operator", "v26.7.0")
    w = airgap_project(tmp_path)
    lock = '{"apiVersion": "gpuop/v1alpha1", "kind": "ImageDigests", "images": {}}\n'
    (w / "images.lock.json").write_text(lock)
    proc = run_gpuop("images", "resolve", "--registry", f"{registry}/tampered-mirror", "--plain-http", "--lock",
                     "images.lock.json", "--verify-key", str(keys["ours"][1]), "profiles", cwd=w)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith(f"{registry}/tampered-mirror/gpu-operator:v26.7.0: signature not verified by "
                                  f"{keys['ours'][1]} at {moved}: "), proc.stderr
    assert proc.stderr.splitlines()[1:] == ["gpuop: 1 error; nothing written"]
    assert (w / "images.lock.json").read_text() == lock          # nothing locked
