"""The GitOps rehearsal: Flux's own controllers reconcile what gpuop wrote, on the rig's control plane.

    with ControlPlane(tmp / "rig") as cp, Loopback(cp, tmp / "srv") as lo, Flux(cp, tmp / "flux") as flux:
        repo = lo.git_repository("gpu-clusters", dist_folder)      # a commit of dist/, served over HTTPS
        flux.apply(dist / cluster / "flux")                        # the objects exactly as gpuop wrote them
        flux.wait_ready("helm.toolkit.fluxcd.io/v2", "HelmRelease", "gpuop-x", "flux-system")

Flux v2.9.5's source-, kustomize- and helm-controller (tools/rehearsal/build.py --flux builds them from the
Go module proxy) run as processes with the rig's admin kubeconfig, leader election off, metrics and health
on free loopback ports; source-controller keeps its artifacts in the workdir and serves them on a loopback
port. Their CRDs come from the same controller modules (config/crd/bases), so they match the binaries.

Sources on loopback, over HTTPS with a certificate of their own (127.0.0.1, signed by a CA made for them; the
controllers trust that CA through SSL_CERT_FILE, as a cluster trusts a private CA; gpuop's settings take
https:// repository URLs): a git repository served
by git's own `git http-backend` (smart HTTP: Flux's git client speaks no dumb HTTP and no file://), and
Helm chart repositories served as files (index.yaml + archives), e.g. NFD's chart packaged from the module
the rig pins.
"""

from __future__ import annotations

import contextlib
import hashlib
import http.server
import io
import os
import shutil
import ssl
import subprocess
import tarfile
import threading
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import yaml

from gpuop.rehearse import rig

FLUX_NAMES = ("source-controller", "kustomize-controller", "helm-controller")
# each controller's CRDs (tools/rehearsal/build.py writes them beside its binary)
FLUX_CRD_FILES = {"source-controller": "flux-source-crds.yaml", "kustomize-controller": "flux-kustomize-crds.yaml",
                  "helm-controller": "flux-helm-crds.yaml"}
HELM_LANE = ("source-controller", "helm-controller")       # what HelmReleases need
FLUX_NAMESPACE = "flux-system"
READY_TIMEOUT = 180.0


class GitOpsError(Exception):
    """A source server or a Flux controller cannot start: the message says which, with its log's tail."""


# ---- the binaries ----------------------------------------------------------------------------------------

def flux_dir(build: bool = False, controllers: tuple[str, ...] = FLUX_NAMES) -> Path:
    """The folder with Flux's controllers and CRDs (GPUOP_FLUX_DIR or ~/.cache/gpuop/flux/<digest>/bin),
    these controllers built first when `build` and not built yet."""
    only = "--only=" + ",".join(controllers)
    if rig._build_script("--flux", only, "--check").returncode != 0:
        if not build:
            raise rig.RigError("Flux's controllers are not built: `python3 tools/rehearsal/build.py --flux` builds "
                               "them (Go >= 1.26 and the Go module proxy)")
        done = rig._build_script("--flux", only, capture=False)
        if done.returncode != 0:
            raise rig.RigError(f"building Flux's controllers failed (tools/rehearsal/build.py --flux exit {done.returncode})")
    where = rig._build_script("--flux", "--print-dir")
    if where.returncode != 0:
        raise rig.RigError(f"tools/rehearsal/build.py --flux --print-dir: {where.stderr.strip()}")
    return Path(where.stdout.strip())


# ---- sources on loopback ---------------------------------------------------------------------------------

def _git(*args: str, cwd: Path) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "gpuop rehearsal", "GIT_AUTHOR_EMAIL": "rehearsal@gpuop.invalid",
           "GIT_COMMITTER_NAME": "gpuop rehearsal", "GIT_COMMITTER_EMAIL": "rehearsal@gpuop.invalid",
           "GIT_CONFIG_NOSYSTEM": "1", "HOME": str(cwd)}
    done = subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise GitOpsError(f"git {' '.join(args[:2])}: {done.stderr.strip()}")
    return done.stdout.strip()


class GitRepo:
    """A work tree whose commits are pushed to a bare repository the loopback server serves."""

    def __init__(self, root: Path, name: str, url: str, branch: str = "main"):
        self.work, self.bare, self.url, self.branch = root / "work" / name, root / "git" / f"{name}.git", url, branch
        self.bare.parent.mkdir(parents=True, exist_ok=True)
        _git("init", "-q", "--bare", "-b", branch, str(self.bare), cwd=root)
        _git("config", "http.receivepack", "false", cwd=self.bare)
        self.work.mkdir(parents=True)
        _git("init", "-q", "-b", branch, cwd=self.work)
        _git("remote", "add", "origin", str(self.bare), cwd=self.work)

    def commit(self, tree: dict[str, Path], message: str) -> str:
        """Replace the given top-level folders of the work tree with copies of these, commit, push; the sha."""
        for rel, src in tree.items():
            target = self.work / rel
            shutil.rmtree(target, ignore_errors=True)
            shutil.copytree(src, target)
        _git("add", "-A", cwd=self.work)
        _git("commit", "-q", "--allow-empty", "-m", message, cwd=self.work)
        _git("push", "-q", "origin", f"HEAD:{self.branch}", cwd=self.work)
        return _git("rev-parse", "HEAD", cwd=self.work)


class _Handler(http.server.BaseHTTPRequestHandler):
    server_version = "gpuop-rehearsal"
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt: str, *args: Any) -> None:
        with contextlib.suppress(OSError), self.server.log.open("a") as fh:       # type: ignore[attr-defined]
            fh.write("%s %s\n" % (self.address_string(), fmt % args))

    def _send(self, code: int, body: bytes, headers: Iterable[tuple[str, str]] = ()) -> None:
        self.send_response(code)
        for k, v in headers:
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def do_GET(self) -> None:
        self._route()

    def do_HEAD(self) -> None:
        self._route()

    def do_POST(self) -> None:
        self._route()

    def _route(self) -> None:
        path = unquote(urlsplit(self.path).path)
        if path.startswith("/git/"):
            self._git(path.removeprefix("/git"))
        elif path.startswith("/files/") and self.command in ("GET", "HEAD"):
            self._file(path.removeprefix("/files/"))
        else:
            self._send(404, b"not found\n")

    def _file(self, rel: str) -> None:
        root: Path = self.server.files.resolve()                                  # type: ignore[attr-defined]
        target = (root / rel).resolve()
        if not target.is_relative_to(root) or not target.is_file():
            self._send(404, b"not found\n")
            return
        kind = "text/yaml" if target.suffix == ".yaml" else "application/octet-stream"
        self._send(200, target.read_bytes(), [("Content-Type", kind)])

    def _git(self, path_info: str) -> None:
        """One request through git's own http-backend (CGI)."""
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "GIT_PROJECT_ROOT": str(self.server.git_root),  # type: ignore[attr-defined]
               "GIT_HTTP_EXPORT_ALL": "1", "REQUEST_METHOD": self.command, "PATH_INFO": path_info,
               "QUERY_STRING": urlsplit(self.path).query, "CONTENT_TYPE": self.headers.get("Content-Type", ""),
               "CONTENT_LENGTH": str(len(body)), "REMOTE_ADDR": self.client_address[0],
               "GIT_PROTOCOL": self.headers.get("Git-Protocol", ""), "HTTP_GIT_PROTOCOL": self.headers.get("Git-Protocol", "")}
        if self.headers.get("Content-Encoding"):
            env["HTTP_CONTENT_ENCODING"] = self.headers["Content-Encoding"]
        done = subprocess.run(["git", "http-backend"], input=body, env=env, capture_output=True)
        head, _, out = done.stdout.partition(b"\r\n\r\n")
        if not _:
            head, _, out = done.stdout.partition(b"\n\n")
        code, headers = 200, []
        for line in head.decode("latin-1").splitlines():
            k, _, v = line.partition(":")
            if k.lower() == "status":
                code = int(v.strip().split()[0])
            elif k:
                headers.append((k, v.strip()))
        self._send(code, out, headers)


class Loopback:
    """An HTTPS server on 127.0.0.1 (its own CA, `ca`): /git/<name>.git (git smart HTTP) and /files/<path>
    (static files: Helm chart repositories). A context manager, stopped on leaving."""

    def __init__(self, root: Path):
        self.root = Path(root)
        self.pki = self.root / "pki"
        self.git_root, self.files = self.root / "git", self.root / "files"
        self._server: http.server.ThreadingHTTPServer | None = None

    def __enter__(self) -> Loopback:
        for d in (self.git_root, self.files):
            d.mkdir(parents=True, exist_ok=True)
        srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        srv.daemon_threads = True
        ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        rig.make_pki(self.pki)
        ctx.load_cert_chain(self.pki / "serving.crt", self.pki / "serving.key")
        srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
        srv.git_root, srv.files, srv.log = self.git_root, self.files, self.root / "access.log"  # type: ignore[attr-defined]
        threading.Thread(target=srv.serve_forever, name="gpuop-loopback", daemon=True).start()
        self._server = srv
        return self

    def __exit__(self, *exc) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    @property
    def ca(self) -> Path:
        return self.pki / "ca.crt"

    @property
    def base(self) -> str:
        assert self._server is not None
        return f"https://127.0.0.1:{self._server.server_address[1]}"

    def git_url(self, name: str) -> str:
        return f"{self.base}/git/{name}.git"

    def git_repository(self, name: str, branch: str = "main") -> GitRepo:
        return GitRepo(self.root, name, self.git_url(name), branch)

    def chart_repository(self, name: str, charts: Iterable[tuple[Path, str]]) -> str:
        """A Helm chart repository of these chart folders, each packaged at the given version; its URL."""
        folder = self.files / name
        folder.mkdir(parents=True, exist_ok=True)
        entries: dict[str, list[dict]] = {}
        for src, version in charts:
            meta, data = package_chart(src, version)
            archive = f"{meta['name']}-{version}.tgz"
            (folder / archive).write_bytes(data)
            entries.setdefault(meta["name"], []).append(
                {**meta, "urls": [f"{self.base}/files/{name}/{archive}"], "created": "2026-01-01T00:00:00Z",
                 "digest": hashlib.sha256(data).hexdigest()})
        index = {"apiVersion": "v1", "entries": entries, "generated": "2026-01-01T00:00:00Z"}
        (folder / "index.yaml").write_text(yaml.safe_dump(index, sort_keys=True))
        return f"{self.base}/files/{name}"


def package_chart(src: Path, version: str) -> tuple[dict, bytes]:
    """A chart folder as `helm package --version` makes it: <name>/... in a gzipped tar, Chart.yaml's
    version set (a chart's source often carries a placeholder version its release process replaces)."""
    meta = yaml.safe_load((src / "Chart.yaml").read_text())
    meta["version"] = version
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for f in sorted(p for p in src.rglob("*") if p.is_file()):
            rel = f.relative_to(src).as_posix()
            data = yaml.safe_dump(meta, sort_keys=False).encode() if rel == "Chart.yaml" else f.read_bytes()
            info = tarfile.TarInfo(f"{meta['name']}/{rel}")
            info.size, info.mode, info.mtime = len(data), 0o644, 0
            tar.addfile(info, io.BytesIO(data))
    return meta, buf.getvalue()


REGISTRY_NAMES = ("docker-registry", "registry")      # Debian's distribution registry, upstream's name
HELM_CONFIG = "application/vnd.cncf.helm.config.v1+json"
HELM_LAYER = "application/vnd.cncf.helm.chart.content.v1.tar+gzip"
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"


class OciRegistry:
    """The distribution registry (Debian's docker-registry) on a free loopback port, over HTTPS with the
    Loopback server's certificate: what a mirror-only cluster's `oci://` chart sources point at. Charts are
    pushed as `helm push` does (an OCI manifest: Chart.yaml as the config, the archive as the one layer)."""

    def __init__(self, root: Path, pki: Path):
        self.root, self.pki = Path(root), Path(pki)
        self.port = 0
        self._proc: subprocess.Popen | None = None

    def __enter__(self) -> OciRegistry:
        exe = next((shutil.which(n) for n in REGISTRY_NAMES if shutil.which(n)), None)
        if exe is None:
            raise GitOpsError("no docker-registry (Debian's package of the distribution registry) on PATH")
        self.root.mkdir(parents=True, exist_ok=True)
        self.port = rig.free_port()
        config = {"version": 0.1, "storage": {"filesystem": {"rootdirectory": str(self.root / "data")}},
                  "http": {"addr": f"127.0.0.1:{self.port}",
                           "tls": {"certificate": str(self.pki / "serving.crt"), "key": str(self.pki / "serving.key")}}}
        (self.root / "config.yml").write_text(yaml.safe_dump(config))
        log = (self.root / "registry.log").open("wb")
        self._proc = subprocess.Popen([exe, "serve", str(self.root / "config.yml")], stdout=log,
                                      stderr=subprocess.STDOUT, preexec_fn=rig._die_with_parent)
        deadline = time.monotonic() + 20
        while True:
            try:
                self._call("GET", "/v2/")
                return self
            except OSError as e:
                if self._proc.poll() is not None or time.monotonic() > deadline:
                    self.__exit__()
                    tail = (self.root / "registry.log").read_text(errors="replace")[-2000:]
                    raise GitOpsError(f"docker-registry did not start ({e}):\n{tail}") from None
                time.sleep(0.2)

    def __exit__(self, *exc) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._proc.kill()
            self._proc.wait(timeout=10)
        self._proc = None

    @property
    def host(self) -> str:
        return f"127.0.0.1:{self.port}"

    def _call(self, method: str, path: str, body: bytes = b"", kind: str = "application/octet-stream"):
        import urllib.request
        ctx = ssl.create_default_context(cafile=str(self.pki / "ca.crt"))
        req = urllib.request.Request(f"https://{self.host}{path}", data=body if method != "GET" else None,
                                     method=method, headers={"Content-Type": kind})
        with urllib.request.urlopen(req, context=ctx, timeout=30) as resp:
            return resp.headers, resp.read()

    def _blob(self, repo: str, data: bytes) -> dict:
        digest = "sha256:" + hashlib.sha256(data).hexdigest()
        headers, _ = self._call("POST", f"/v2/{repo}/blobs/uploads/")
        where = urlsplit(headers["Location"])               # a path or a URL, with the upload's state in its query
        query = f"{where.query}&digest={digest}" if where.query else f"digest={digest}"
        self._call("PUT", f"{where.path}?{query}", data)
        return {"digest": digest, "size": len(data)}

    def push_chart(self, path: str, src: Path, version: str) -> str:
        """The chart folder packaged at `version`, pushed to oci://<host>/<path>/<name>:<version>; the ref."""
        import json
        meta, data = package_chart(src, version)
        repo = f"{path}/{meta['name']}".strip("/")
        config = json.dumps(meta, sort_keys=True).encode()
        manifest = {"schemaVersion": 2, "mediaType": OCI_MANIFEST,
                    "config": {"mediaType": HELM_CONFIG, **self._blob(repo, config)},
                    "layers": [{"mediaType": HELM_LAYER, **self._blob(repo, data)}]}
        self._call("PUT", f"/v2/{repo}/manifests/{version}", json.dumps(manifest).encode(), OCI_MANIFEST)
        return f"oci://{self.host}/{repo}:{version}"


# ---- Flux ------------------------------------------------------------------------------------------------

class Flux:
    """Flux's three controllers against the rig's API server, with their CRDs installed first."""

    def __init__(self, cp: rig.ControlPlane, workdir: Path, folder: Path | None = None, ca: Path | None = None,
                 controllers: tuple[str, ...] = FLUX_NAMES):
        self.cp, self.workdir = cp, Path(workdir)
        self.folder, self.ca, self.controllers = folder, ca, controllers
        self._procs: dict[str, subprocess.Popen] = {}
        self.storage_port = 0

    def __enter__(self) -> Flux:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def log(self, name: str) -> Path:
        return self.workdir / "logs" / f"{name}.log"

    def start(self) -> None:
        folder = self.folder or flux_dir()
        files = [*self.controllers, *(FLUX_CRD_FILES[n] for n in self.controllers)]
        missing = [n for n in files if not (folder / n).is_file()]
        if missing:
            raise rig.RigError(f"{folder}: no {', '.join(missing)} (tools/rehearsal/build.py --flux builds them)")
        (self.workdir / "logs").mkdir(parents=True, exist_ok=True)
        (self.workdir / "storage").mkdir(exist_ok=True)
        crds = [folder / FLUX_CRD_FILES[n] for n in self.controllers]
        problems = self.cp.apply(crds, server_side=True, field_manager="gpuop-rehearsal-flux", force=True)
        if problems:
            raise GitOpsError("Flux's CRDs were refused: " + "; ".join(map(str, problems)))
        names = [d["metadata"]["name"] for f in crds for d in yaml.safe_load_all(f.read_text()) if d]
        self.cp.wait_established(names)
        self.cp.discover()
        with contextlib.suppress(rig.ApiError):
            self.cp.request("POST", "/api/v1/namespaces",
                            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": FLUX_NAMESPACE}})
        self.storage_port = rig.free_port()
        rig._load_libc()
        env = {**os.environ, "KUBECONFIG": str(self.cp.kubeconfig), "RUNTIME_NAMESPACE": FLUX_NAMESPACE,
               "HOME": str(self.workdir), **({"SSL_CERT_FILE": str(self.ca)} if self.ca else {})}
        # the API server from KUBECONFIG (controller-runtime's loader; Flux's controllers take no --kubeconfig)
        common = ["--enable-leader-election=false", "--log-encoding=console", "--events-addr="]
        for name in self.controllers:
            args = [str(folder / name), *common, f"--metrics-addr=127.0.0.1:{rig.free_port()}",
                    f"--health-addr=127.0.0.1:{rig.free_port()}"]
            if name == "source-controller":
                args += [f"--storage-path={self.workdir / 'storage'}",
                         f"--storage-addr=127.0.0.1:{self.storage_port}",
                         f"--storage-adv-addr=127.0.0.1:{self.storage_port}"]
            with self.log(name).open("wb") as out:
                self._procs[name] = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, env=env,
                                                     cwd=self.workdir, preexec_fn=rig._die_with_parent)
        time.sleep(1.0)
        self.check_alive()

    def check_alive(self) -> None:
        for name, p in self._procs.items():
            if p.poll() is not None:
                tail = "\n".join(self.log(name).read_text(errors="replace").splitlines()[-20:])
                raise GitOpsError(f"{name} exited ({p.returncode}):\n{tail}")

    def stop(self) -> None:
        for p in self._procs.values():
            if p.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    p.kill()
        for p in self._procs.values():
            with contextlib.suppress(subprocess.TimeoutExpired):
                p.wait(timeout=10)
        self._procs.clear()

    def apply(self, paths: Iterable[Any]) -> list[rig.Problem]:
        return self.cp.apply(list(paths), server_side=True, field_manager="gpuop-rehearsal-user")

    def reconcile_now(self, api_version: str, kind: str, name: str, namespace: str = FLUX_NAMESPACE) -> None:
        """What `flux reconcile` does: the requestedAt annotation."""
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime()) + f".{time.monotonic_ns() % 10**9}Z"
        self.cp.request("PATCH", self.cp.path_of(api_version, kind, namespace, name),
                        {"metadata": {"annotations": {"reconcile.fluxcd.io/requestedAt": stamp}}},
                        content_type="application/merge-patch+json")

    def condition(self, api_version: str, kind: str, name: str, namespace: str = FLUX_NAMESPACE,
                  type_: str = "Ready") -> dict:
        obj = self.cp.read(api_version, kind, name, namespace) or {}
        for c in obj.get("status", {}).get("conditions", []):
            if c.get("type") == type_:
                return {**c, "observedGeneration": obj.get("status", {}).get("observedGeneration"),
                        "generation": obj.get("metadata", {}).get("generation")}
        return {}

    def wait_ready(self, api_version: str, kind: str, name: str, namespace: str = FLUX_NAMESPACE,
                   timeout: float = READY_TIMEOUT, stalled_ok: bool = False) -> dict:
        """Until Ready=True at the object's generation; the condition. Ready=False with a terminal reason
        (Stalled) ends the wait early; the caller sees the condition and its message."""
        deadline = time.monotonic() + timeout
        last: dict = {}
        while time.monotonic() < deadline:
            self.check_alive()
            last = self.condition(api_version, kind, name, namespace)
            if last.get("status") == "True" and last.get("observedGeneration") == last.get("generation"):
                return last
            if not stalled_ok and self.condition(api_version, kind, name, namespace, "Stalled").get("status") == "True":
                return last
            time.sleep(0.5)
        return last
