"""Air-gapped and pinned sites: images.txt lists exactly the images of the rendered
manifests; `gpuop images` prints them; the digest round trip runs against a real registry (Debian's
docker-registry on loopback, as test_publish): the test builds tiny OCI images itself (a config blob,
one layer, a manifest), pushes them with plain Registry API v2 calls, `gpuop images resolve` fills the
digest lock from the registry, and synth pins every image of the manifests by those digests."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import shutil
import tarfile
import textwrap
import urllib.request
from pathlib import Path

import pytest
import yaml

from conftest import REPO, free_port as _free_port, run_gpuop

pytestmark = pytest.mark.slow       # a registry and two compiles

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
      images: {registry: mirror.example.com/nvidia%s}
      nodePools: [{name: a, gpu: L40S}]
    """
# what that profile runs: <path>:<tag> below the registry (the manifests' images, the chart's `helm test`
# image and NFD's, which the mirror serves too)
USED = ["cloud-native/k8s-driver-manager:v0.12.0", "driver:580.173.02-ubuntu24.04", "gpu-operator:v26.7.0",
        "k8s-device-plugin:v0.20.0", "k8s/container-toolkit:v1.20.0", "k8s/cuda-sample:vectoradd-cuda12.5.0",
        "nfd/node-feature-discovery:v0.19.0"]
AUXILIARY = ("k8s/cuda-sample:", "nfd/node-feature-discovery:")


def assert_lists_the_manifest_images(listed: list[str], manifests) -> None:
    """images.txt names every image the manifests run, and besides them only the auxiliary ones (the CUDA sample
    also runs in the manifests when a health gate is on; NFD's chart is delivered apart)."""
    deployed = set(manifest_images(manifests))
    assert deployed <= set(listed), sorted(deployed - set(listed))
    assert [r for r in listed if r not in deployed and not any(a in r for a in AUXILIARY)] == []




def _sha(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def _push_blob(host: str, name: str, data: bytes) -> str:
    digest = _sha(data)
    req = urllib.request.Request(f"http://{host}/v2/{name}/blobs/uploads/", method="POST")
    with urllib.request.urlopen(req) as r:
        location = r.headers["Location"]
    if location.startswith("/"):
        location = f"http://{host}{location}"
    sep = "&" if "?" in location else "?"
    put = urllib.request.Request(f"{location}{sep}digest={digest}", data=data, method="PUT",
                                 headers={"Content-Type": "application/octet-stream"})
    with urllib.request.urlopen(put) as r:
        assert r.status == 201
    return digest


def push_image(host: str, name: str, tag: str) -> str:
    """A tiny OCI image (one file naming it) -> the registry; returns the manifest's digest."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        content = f"{name}:{tag}\n".encode()
        info = tarfile.TarInfo("etc/image-name")
        info.size, info.mtime = len(content), 0
        tar.addfile(info, io.BytesIO(content))
    diff_id = _sha(buf.getvalue())
    layer = gzip.compress(buf.getvalue(), mtime=0)
    config = json.dumps({"architecture": "amd64", "os": "linux",
                         "rootfs": {"type": "layers", "diff_ids": [diff_id]}, "config": {}}).encode()
    manifest = json.dumps({
        "schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": _push_blob(host, name, config),
                   "size": len(config)},
        "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip",
                    "digest": _push_blob(host, name, layer), "size": len(layer)}],
    }).encode()
    req = urllib.request.Request(f"http://{host}/v2/{name}/manifests/{tag}", data=manifest, method="PUT",
                                 headers={"Content-Type": "application/vnd.oci.image.manifest.v1+json"})
    with urllib.request.urlopen(req) as r:
        assert r.headers["Docker-Content-Digest"] == _sha(manifest)
    return _sha(manifest)


def project(tmp_path: Path, lock: str = "") -> Path:
    w = tmp_path / "w"
    (w / "profiles").mkdir(parents=True, exist_ok=True)
    shutil.copy(REPO / "gpuop.yaml", w / "gpuop.yaml")
    (w / "profiles" / "dark.yaml").write_text(textwrap.dedent(PROFILE % lock))
    return w


def manifest_images(folder: Path) -> set[str]:
    out = set()
    for f in folder.glob("*.yaml"):
        for doc in yaml.safe_load_all(f.read_text()):
            spec = ((doc or {}).get("spec") or {}).get("template", {}).get("spec") or {}
            for key in ("initContainers", "containers"):
                out |= {c["image"] for c in spec.get(key, [])}
    return out


@pytest.fixture(scope="module")
def mirrored(registry) -> dict[str, str]:
    """Every image the profile uses, pushed under <registry>/mirror/: <path>:<tag> -> digest."""
    return {key: push_image(registry, f"mirror/{key.rpartition(':')[0]}", key.rpartition(":")[2]) for key in USED}


def test_digest_round_trip_push_resolve_pin_render(tmp_path, registry, mirrored):
    w = project(tmp_path, ", digestLock: ../images.lock.json")
    proc = run_gpuop("images", "resolve", "--registry", f"{registry}/mirror", "--plain-http", "--lock",
                     "images.lock.json", "profiles", cwd=w)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == "gpuop: 7 image digests written to images.lock.json\n"
    lock = json.loads((w / "images.lock.json").read_text())
    assert lock == {"apiVersion": "gpuop/v1alpha1", "kind": "ImageDigests", "images": mirrored}
    run_gpuop("synth", "profiles", "-o", "dist", cwd=w, check=True)
    listed = (w / "dist" / "dark" / "images.txt").read_text().splitlines()
    assert_lists_the_manifest_images(listed, w / "dist" / "dark" / "manifests")
    assert listed == sorted(f"mirror.example.com/nvidia/{k}@{d}" for k, d in mirrored.items())


def test_images_txt_lists_the_manifest_images_and_the_auxiliary_ones(tmp_path):
    w = project(tmp_path)
    run_gpuop("synth", "profiles", "-o", "dist", cwd=w, check=True)
    listed = (w / "dist" / "dark" / "images.txt").read_text().splitlines()
    assert_lists_the_manifest_images(listed, w / "dist" / "dark" / "manifests")
    assert listed == [f"mirror.example.com/nvidia/{k}" for k in USED]
    proc = run_gpuop("images", "profiles", cwd=w, check=True)
    assert proc.stdout.splitlines() == [f"dark\t{ref}" for ref in listed]
    assert not (w / "dist" / "dark" / "oc-mirror").exists()     # OpenShift only


def test_refuses_a_lock_without_every_image(tmp_path, registry, mirrored):
    w = project(tmp_path, ", digestLock: ../images.lock.json")
    partial = {k: v for k, v in mirrored.items() if not k.startswith("driver:")}
    (w / "images.lock.json").write_text(json.dumps({"apiVersion": "gpuop/v1alpha1", "kind": "ImageDigests",
                                                    "images": partial}))
    proc = run_gpuop("synth", "profiles", "-o", "dist", cwd=w)
    assert proc.returncode == 2
    assert proc.stderr.splitlines()[0] == (
        "profiles/dark.yaml:10:49: spec.images.digestLock: the digest lock has no digest for "
        "driver:580.173.02-ubuntu24.04; run `gpuop images resolve --registry URL` for this profile")
    assert not (w / "dist").exists()


def test_refuses_a_missing_lock_file(tmp_path):
    w = project(tmp_path, ", digestLock: ../nope.json")
    proc = run_gpuop("synth", "profiles", "-o", "dist", cwd=w)
    assert proc.returncode == 2
    assert proc.stderr.splitlines()[0] == (
        "profiles/dark.yaml:10:49: spec.images.digestLock: profiles/../nope.json does not exist; write it with "
        "`gpuop images resolve --registry URL --lock profiles/../nope.json`")


def test_resolve_names_the_images_the_registry_lacks(tmp_path, registry, mirrored):
    w = project(tmp_path)
    proc = run_gpuop("images", "resolve", "--registry", f"{registry}/elsewhere", "--plain-http", "profiles", cwd=w)
    assert proc.returncode == 2
    assert proc.stderr.splitlines()[0] == (
        f"{registry}/elsewhere: not in the registry: "
        + ", ".join(f"elsewhere/{k}" for k in USED) + "; mirror them first (`gpuop images` lists them)")
    assert not (w / "images.lock.json").exists()


def test_resolve_reports_an_unreachable_registry(tmp_path):
    w = project(tmp_path)
    port = _free_port()
    proc = run_gpuop("images", "resolve", "--registry", f"127.0.0.1:{port}", "--plain-http", "profiles", cwd=w)
    assert proc.returncode == 2
    assert "registry error:" in proc.stderr and "Connection refused" in proc.stderr
    assert "Traceback" not in proc.stderr


# ------------------------------------------------- proxy, package repositories, CA bundle (in-process)

from test_distributions import compile_objects, daemonsets, issues, main_container, write  # noqa: E402

SITE = """\
    platform: {type: kubernetes, version: "1.33"}
    os: %s
    proxy: {httpProxy: "http://proxy.corp:3128", httpsProxy: "http://proxy.corp:3128", noProxy: [.corp, 10.0.0.0/8]}
    driver:
      repoConfig: {configMapName: mirror-repos, files: [local.list]}
      certConfig: {configMapName: corp-ca, files: [corp-ca.crt]}
      env: [{name: NO_PROXY, value: .corp}]
    nodePools: [{name: a, gpu: L40S}]
    """


def test_proxy_env_reaches_driver_and_toolkit_and_component_env_wins(tmp_path):
    ds = daemonsets(compile_objects(write(tmp_path, SITE % "ubuntu24.04")))
    proxy = [("HTTP_PROXY", "http://proxy.corp:3128"), ("http_proxy", "http://proxy.corp:3128"),
             ("HTTPS_PROXY", "http://proxy.corp:3128"), ("https_proxy", "http://proxy.corp:3128"),
             ("NO_PROXY", ".corp,10.0.0.0/8"), ("no_proxy", ".corp,10.0.0.0/8")]
    tk = {e["name"]: e.get("value") for e in main_container(ds["nvidia-container-toolkit-daemonset"],
                                                             "nvidia-container-toolkit-ctr")["env"]}
    assert [(n, tk[n]) for n, _ in proxy] == proxy
    drv = {e["name"]: e.get("value") for e in main_container(ds["nvidia-driver-daemonset"], "nvidia-driver-ctr")["env"]}
    assert drv["HTTP_PROXY"] == "http://proxy.corp:3128" and drv["no_proxy"] == ".corp,10.0.0.0/8"
    assert drv["NO_PROXY"] == ".corp"               # spec.driver.env wins over spec.proxy
    plugin = main_container(ds["nvidia-device-plugin-daemonset"], "nvidia-device-plugin")
    assert not any("PROXY" in e["name"].upper() for e in plugin["env"])


@pytest.mark.parametrize("os_name, repo_dir, cert_dir", [
    ("ubuntu24.04", "/etc/apt/sources.list.d", "/usr/local/share/ca-certificates"),
    ("rhel9.6", "/etc/yum.repos.d", "/etc/pki/ca-trust/extracted/pem"),
])
def test_repo_and_cert_config_mount_where_the_driver_image_reads_them(tmp_path, os_name, repo_dir, cert_dir):
    ds = daemonsets(compile_objects(write(tmp_path, SITE % os_name)))
    pod = next(d for n, d in ds.items() if n.startswith("nvidia-driver"))["spec"]["template"]["spec"]
    mounts = {m["mountPath"]: m for m in main_container({"spec": {"template": {"spec": pod}}}, "nvidia-driver-ctr")["volumeMounts"]}
    assert mounts[f"{repo_dir}/local.list"] == {"name": "mirror-repos", "mountPath": f"{repo_dir}/local.list",
                                                "readOnly": True, "subPath": "local.list"}
    assert mounts[f"{cert_dir}/corp-ca.crt"]["name"] == "corp-ca"
    vols = {v["name"]: v for v in pod["volumes"]}
    assert vols["mirror-repos"] == {"name": "mirror-repos", "configMap": {
        "name": "mirror-repos", "items": [{"key": "local.list", "path": "local.list"}]}}
    assert vols["corp-ca"]["configMap"]["name"] == "corp-ca"


def test_refuses_repo_config_for_an_os_without_a_path(tmp_path):
    assert issues(write(tmp_path, SITE % "sles15.7")) == [("spec.driver.repoConfig", 9, "the driver image for sles15.7 (pool 'a') reads no repoConfig files: the "
            "Operator knows paths for centos, debian, rhcos, rhel, ubuntu")]


def test_refuses_a_proxy_that_is_not_a_url(tmp_path):
    f = write(tmp_path, """\
        platform: {type: kubernetes, version: "1.33"}
        os: ubuntu24.04
        proxy: {httpsProxy: "proxy.corp:3128"}
        nodePools: [{name: a, gpu: L40S}]
        """)
    (path, line, message), = issues(f)
    assert (path, line) == ("spec.proxy.httpsProxy", 7) and "allowed: http://HOST/..., https://HOST/..." in message


def test_openshift_gets_an_oc_mirror_imageset_without_image_stream_tags():
    from gpuop.outputs import images
    objs = compile_objects(REPO / "profiles" / "openshift.yaml")
    refs = images.image_refs(objs)
    files = images.files(objs, "c", openshift=True)
    assert files["c/images.txt"] == "".join(f"{r}\n" for r in refs)
    doc = yaml.safe_load(files["c/oc-mirror/imageset-config.yaml"])
    assert doc["kind"] == "ImageSetConfiguration" and doc["apiVersion"] == "mirror.openshift.io/v2alpha1"
    names = [i["name"] for i in doc["mirror"]["additionalImages"]]
    assert names == [r for r in refs if "/" in r and "." in r.split("/")[0]]
    assert any(r.startswith("driver-toolkit:") for r in refs) and not any(n.startswith("driver-toolkit") for n in names)
