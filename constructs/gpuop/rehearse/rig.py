"""The rehearsal rig: a real Kubernetes control plane on loopback whose GPU nodes are kwok's fake nodes.

`binaries()` finds (or builds, through tools/rehearsal/build.py) etcd, kube-apiserver,
kube-controller-manager, kube-scheduler, kwok and nfd-master; `ControlPlane` runs them:

    with ControlPlane(tmp / "rig") as cp:          # etcd + apiserver + controller-manager + scheduler + kwok
        problems = cp.apply([Path("dist/x/manifests")])   # server-side apply, the API server's own refusals
        cp.wait_for(lambda: ..., what="the DaemonSet's pod Running")

Everything listens on 127.0.0.1 at ports picked when it starts; the certificates, keys and tokens are made
then (openssl) into the workdir beside etcd's data; leaving the block (an error, Ctrl-C) kills every process
and removes the workdir. Each process gets a parent-death signal, so a gpuop killed outright (kill -9, the
OOM killer) leaves no control plane running either.

Talking to the API server: Python's own HTTPS client (http.client), not kubectl nor the `kubernetes`
package. A server-side apply is one PATCH per object (application/apply-patch+yaml); the refusal the API
server sends back is a Status object whose `message` is the API server's own wording, kept as it is in a
`Problem` for that object. kubectl would print the same refusals as lines of text for a file of many
objects (to be parsed back to objects), and the `kubernetes` package is one more dependency that wraps
the same requests. kubectl is not built with the rig (it needs none; a fresh machine's first build is shorter
without it): a person's own works against it, `kubectl --kubeconfig cp.kubeconfig`.

What a rehearsal proves and cannot: fake nodes have no kubelet, container runtime, driver or NVML; kwok
sets their status and moves pods to Running. Admission, defaulting, CRD schemas, labelling (nfd-master),
placement, scheduling, DRA allocation and rollout order are real; what happens inside a node is not.
"""

from __future__ import annotations

import contextlib
import ctypes
import http.client
import json
import os
import secrets
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

import yaml

# the names binaries() returns; a KUBEBUILDER_ASSETS folder may hold fewer
NAMES = ("kube-apiserver", "kube-controller-manager", "kube-scheduler", "etcd", "kwok", "nfd-master")
KWOK_STAGES_FILE = "kwok-stages.yaml"        # tools/rehearsal/build.py writes these beside the binaries
NFD_CRDS_FILE = "nfd-api-crds.yaml"
BUILD_SCRIPT = Path(__file__).resolve().parents[3] / "tools" / "rehearsal" / "build.py"

KWOK_NODE_ANNOTATION = "kwok.x-k8s.io/node"      # = "fake": the nodes kwok manages
ADMIN_USER = "gpuop-rehearsal-admin"
# resource.k8s.io/v1 is served by default from 1.34; the two betas are still served by 1.35 for charts and
# drivers that write them, but off by default: a rehearsal should accept what a 1.35 cluster can be set to
DEFAULT_RUNTIME_CONFIG = "resource.k8s.io/v1beta1=true,resource.k8s.io/v1beta2=true"
# the client rate limit of the controller-manager and the scheduler (kwok's is off): unlimited, as kwokctl's
# DisableQPSLimits sets them; the only clients of this API server are these and the rehearsal
CLIENT_RATE = ("--kube-api-qps=5000", "--kube-api-burst=10000")
# a guard, not a goal (bench/rehearsal.py measures the start): a process that exits fails the start at once;
# one that stays up but never answers, after this long (a loaded 2-core machine takes tens of seconds)
START_TIMEOUT = 180.0


class RigError(Exception):
    """The rig cannot be built or started: the message says which binary or process, with its log's tail."""


# ---- the binaries ----------------------------------------------------------------------------------------

def _assets() -> Path | None:
    value = os.environ.get("KUBEBUILDER_ASSETS")
    return Path(value).expanduser() if value else None


def _build_script(*args: str, capture: bool = True) -> subprocess.CompletedProcess:
    if not BUILD_SCRIPT.is_file():
        raise RigError("the rehearsal rig's build script (tools/rehearsal/build.py) is not here (an installed gpuop):"
                       " set KUBEBUILDER_ASSETS to a folder with " + ", ".join(NAMES))
    return subprocess.run([sys.executable, str(BUILD_SCRIPT), *args], text=True,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE if capture else None)


def rig_dir(build: bool = True) -> Path:
    """The folder with the binaries: KUBEBUILDER_ASSETS when set (nothing is built), else the rig's cache
    folder (GPUOP_RIG_DIR or ~/.cache/gpuop/rig/<digest>/bin), built first when `build` and not built yet."""
    assets = _assets()
    if assets is not None:
        return assets
    if _build_script("--check").returncode != 0:
        if not build:
            raise RigError("the rehearsal rig is not built: `make rig` builds it (Go >= 1.26 and the Go module proxy)")
        done = _build_script(capture=False)
        if done.returncode != 0:
            raise RigError(f"building the rehearsal rig failed (tools/rehearsal/build.py exit {done.returncode})")
    where = _build_script("--print-dir")
    if where.returncode != 0:
        raise RigError(f"tools/rehearsal/build.py --print-dir: {where.stderr.strip()}")
    return Path(where.stdout.strip())


def binaries(build: bool = True) -> dict[str, Path]:
    """Name -> path of each rig binary present (the NAMES). With KUBEBUILDER_ASSETS
    set, that folder's (nothing built; kube-apiserver and etcd required, as envtest requires them)."""
    folder = rig_dir(build)
    found = {n: folder / n for n in NAMES if (folder / n).is_file() and os.access(folder / n, os.X_OK)}
    missing = [n for n in ("kube-apiserver", "etcd") if n not in found]
    if missing:
        raise RigError(f"{folder}: no {' or '.join(missing)} (KUBEBUILDER_ASSETS names a folder with both)")
    return found


def missing_for_rehearsal(bins: dict[str, Path]) -> str:
    """What a full rehearsal needs that `bins` lacks, said ("" when nothing): every one of NAMES, and kwok's
    stages file beside kwok (build.py writes it; a KUBEBUILDER_ASSETS folder must hold it too)."""
    absent = [n for n in NAMES if n not in bins]
    if absent:
        folder = next(iter(bins.values())).parent if bins else None
        return (f"{folder}: no {', '.join(absent)} (a rehearsal runs all of {', '.join(NAMES)}; `make rig` builds "
                "them, or KUBEBUILDER_ASSETS names a folder with all of them)")
    stages = Path(bins["kwok"]).parent / KWOK_STAGES_FILE
    if not stages.is_file():
        return (f"{stages}: missing: kwok's default stages (node-initialize, node-heartbeat-with-lease, pod-ready, "
                "pod-complete, pod-delete from kwok's kustomize/stage/), which tools/rehearsal/build.py writes "
                "beside the binaries")
    return ""


def kueue_binary() -> Path | None:
    """Kueue's controller manager when built (tools/rehearsal/build.py --kueue; `make kueue`), else None: the
    rehearsal then notes the queues' admission as not rehearsed. Never built here: it is a build of its own."""
    if not BUILD_SCRIPT.is_file() or _build_script("--kueue", "--check").returncode != 0:
        return None
    where = _build_script("--kueue", "--print-dir")
    path = Path(where.stdout.strip()) / "kueue"
    return path if where.returncode == 0 and os.access(path, os.X_OK) else None


def nfd_crds(folder: Path | None = None) -> Path:
    """NFD's own CRDs (NodeFeature, NodeFeatureRule, NodeFeatureGroup) from the module the rig pins."""
    path = (folder or rig_dir(build=False)) / NFD_CRDS_FILE
    if not path.is_file():
        raise RigError(f"{path}: missing (tools/rehearsal/build.py writes it when it builds nfd-master)")
    return path


# ---- processes -------------------------------------------------------------------------------------------

_LIBC = None


def _die_with_parent() -> None:
    """Run in the child between fork and exec: the kernel kills it when the gpuop process that started it dies
    (PR_SET_PDEATHSIG), however that one ends. Linux only; elsewhere the context manager is the only cleanup."""
    if _LIBC is not None:
        _LIBC.prctl(1, int(signal.SIGKILL), 0, 0, 0)       # PR_SET_PDEATHSIG


def _load_libc() -> None:
    global _LIBC
    if _LIBC is None and sys.platform.startswith("linux"):
        with contextlib.suppress(OSError):
            _LIBC = ctypes.CDLL(None, use_errno=True)       # loaded before fork: nothing to load in the child


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class _Proc:
    name: str
    popen: subprocess.Popen
    log: Path

    def tail(self, lines: int = 25) -> str:
        try:
            text = self.log.read_text(errors="replace").splitlines()
        except OSError:
            return ""
        return "\n".join(text[-lines:])


# ---- certificates and identities -------------------------------------------------------------------------

def _openssl(*args: str, cwd: Path) -> None:
    exe = shutil.which("openssl")
    if exe is None:
        raise RigError("openssl is not on PATH: the rig makes its certificates with it (apt-get install openssl)")
    done = subprocess.run([exe, *args], cwd=cwd, capture_output=True, text=True)
    if done.returncode != 0:
        raise RigError(f"openssl {' '.join(args[:2])}: {done.stderr.strip()}")


def make_pki(pki: Path) -> None:
    """A CA, a serving certificate for 127.0.0.1 signed by it (the API server, controller-manager and
    scheduler serve with it), and the service-account signing key pair. EC P-256: made in milliseconds."""
    pki.mkdir(parents=True, exist_ok=True)
    ec = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes")
    _openssl("req", "-x509", *ec, "-keyout", "ca.key", "-out", "ca.crt", "-days", "2",
             "-subj", "/CN=gpuop-rehearsal-ca", cwd=pki)
    _openssl("req", "-new", *ec, "-keyout", "serving.key", "-out", "serving.csr", "-subj", "/CN=127.0.0.1", cwd=pki)
    (pki / "serving.ext").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n"
                                     "extendedKeyUsage=serverAuth\nkeyUsage=digitalSignature,keyEncipherment\n")
    _openssl("x509", "-req", "-in", "serving.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
             "-out", "serving.crt", "-days", "2", "-extfile", "serving.ext", cwd=pki)
    _openssl("ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", "sa.key", cwd=pki)
    _openssl("ec", "-in", "sa.key", "-pubout", "-out", "sa.pub", cwd=pki)


@dataclass(frozen=True)
class Identity:
    name: str          # the kubeconfig file's stem
    user: str
    groups: tuple[str, ...]
    token: str = field(default_factory=lambda: secrets.token_hex(24), repr=False)


def _identities() -> dict[str, Identity]:
    # The controller-manager and the scheduler act as the users the API server's bootstrap RBAC roles name;
    # the controllers themselves use their own service accounts (--use-service-account-credentials), as in
    # a kubeadm cluster. The admin (gpuop, kwok, nfd-master) is in system:masters.
    return {i.name: i for i in (
        Identity("admin", ADMIN_USER, ("system:masters",)),
        Identity("controller-manager", "system:kube-controller-manager", ()),
        Identity("scheduler", "system:kube-scheduler", ()),
    )}


def _kubeconfig(path: Path, server: str, ca: Path, ident: Identity) -> None:
    config = {
        "apiVersion": "v1", "kind": "Config", "current-context": "rehearsal",
        "clusters": [{"name": "rehearsal", "cluster": {"server": server, "certificate-authority": str(ca)}}],
        "users": [{"name": ident.user, "user": {"token": ident.token}}],
        "contexts": [{"name": "rehearsal", "context": {"cluster": "rehearsal", "user": ident.user}}],
    }
    path.write_text(json.dumps(config, indent=2) + "\n")
    path.chmod(0o600)


# ---- what apply reports ----------------------------------------------------------------------------------

@dataclass(frozen=True, order=True)
class Problem:
    """An object the API server refused (or that names a kind it does not serve), with the server's message."""
    api_version: str
    kind: str
    namespace: str
    name: str
    message: str
    reason: str = ""          # the Status reason: Invalid, Forbidden, NotFound, ... ("" for a client refusal)
    code: int = 0             # the HTTP status (0: refused before a request, e.g. an unknown kind)
    source: str = ""          # the file the object came from, when it came from one

    @property
    def ref(self) -> str:
        where = f"{self.namespace}/{self.name}" if self.namespace else self.name
        return f"{self.kind}.{self.api_version} {where}"

    def __str__(self) -> str:
        return f"{self.source + ': ' if self.source else ''}{self.ref}: {self.message}"


class ApiError(Exception):
    def __init__(self, code: int, status: dict[str, Any] | None, text: str):
        self.code, self.status = code, status or {}
        self.message = self.status.get("message") or text.strip() or http.client.responses.get(code, str(code))
        self.reason = self.status.get("reason", "")
        super().__init__(f"{code} {self.reason}: {self.message}")


@dataclass(frozen=True)
class _Resource:
    plural: str
    namespaced: bool


def _documents(item: Any) -> Iterator[tuple[dict, str]]:
    """(object, source file) for a dict, a YAML/JSON file (many documents) or a folder of them (sorted)."""
    if isinstance(item, dict):
        if item.get("kind") == "List" or (isinstance(item.get("kind"), str) and item["kind"].endswith("List")
                                           and isinstance(item.get("items"), list)):
            for sub in item.get("items") or []:
                yield from ((o, s) for o, s in _documents(sub))
        else:
            yield item, ""
        return
    path = Path(item)
    if path.is_dir():
        for f in sorted(p for p in path.rglob("*") if p.suffix in (".yaml", ".yml", ".json") and p.is_file()):
            yield from _documents(f)
        return
    with path.open() as fh:
        for doc in yaml.safe_load_all(fh):
            if isinstance(doc, dict):
                yield from ((o, s or str(path)) for o, s in _documents(doc))


# Applied first, in this order: what the rest lives in or is an instance of (as Helm orders an install)
_FIRST = {("v1", "Namespace"): 0, ("apiextensions.k8s.io/v1", "CustomResourceDefinition"): 1}
_REST = len(_FIRST)


def established(crd: Any) -> bool:
    """Whether a CRD read back from the API server is Established. A CRD just created has no status, or a
    status whose conditions are null, until the API server's controllers set them: not yet, never an error."""
    status = crd.get("status") if isinstance(crd, dict) else None
    conditions = status.get("conditions") if isinstance(status, dict) else None
    return any(isinstance(c, dict) and c.get("type") == "Established" and c.get("status") == "True"
               for c in conditions or [])


def _rank(obj: dict) -> int:
    return _FIRST.get((str(obj.get("apiVersion", "")), str(obj.get("kind", ""))), _REST)


CONTROL_PLANE_NODE = "rehearsal-control-plane"
# every group's resources in one answer (GA in Kubernetes 1.30); JSON of the older kind as the fallback
AGGREGATED_DISCOVERY = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json"
# applied after the rest of their wave: what they create (pods) is admitted against the ServiceAccounts,
# RuntimeClasses, ConfigMaps and RBAC applied before them, as Helm orders an install
_WORKLOADS = frozenset({"Pod", "DaemonSet", "Deployment", "StatefulSet", "ReplicaSet", "ReplicationController",
                        "Job", "CronJob"})


def control_plane_node() -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": CONTROL_PLANE_NODE, "annotations": {KWOK_NODE_ANNOTATION: "fake"},
                         "labels": {"kubernetes.io/hostname": CONTROL_PLANE_NODE, "kubernetes.io/os": "linux",
                                    "node-role.kubernetes.io/control-plane": ""}},
            "spec": {"taints": [{"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}]}}


# ---- the control plane -----------------------------------------------------------------------------------

class ControlPlane:
    """etcd, kube-apiserver and (by default) kube-controller-manager, kube-scheduler and kwok on 127.0.0.1;
    nfd-master on request. A context manager: entering starts and waits for them (with `wait=False`, for
    the API server only), leaving kills them all and removes the workdir."""

    kubeconfig: Path
    server: str

    def __init__(self, workdir: Path, *, binaries: dict[str, Path] | None = None, kwok: bool = True,
                 nfd_master: bool = False, controller_manager: bool = True, scheduler: bool = True,
                 runtime_config: str = DEFAULT_RUNTIME_CONFIG, feature_gates: str = "",
                 start_timeout: float = START_TIMEOUT, wait: bool = True):
        self.workdir = Path(workdir)
        self._bins = dict(binaries) if binaries is not None else None
        self.want = {"kube-controller-manager": controller_manager, "kube-scheduler": scheduler, "kwok": kwok,
                     "nfd-master": nfd_master}
        self.runtime_config, self.feature_gates, self.start_timeout = runtime_config, feature_gates, start_timeout
        # False: entering returns once the API server is ready, the other components still starting; work that
        # needs only the API server (CRDs, Nodes) overlaps their start, and wait_ready() waits for them
        self.wait = wait
        self._procs: dict[str, _Proc] = {}
        self._ports: dict[str, int] = {}
        self._created_workdir = False
        # one HTTPS connection per thread (http.client connections are not shared between threads): `apply` and
        # `map` send requests from a few threads at once
        self._local = threading.local()
        self._conns: list[http.client.HTTPSConnection] = []
        self._conns_lock = threading.Lock()
        self._resources: dict[tuple[str, str], _Resource] | None = None
        self.identities = _identities()

    # -- lifecycle --

    def __enter__(self) -> ControlPlane:
        try:
            self.start()
        except BaseException:            # a refusal, a timeout or Ctrl-C half-way: nothing stays running
            self.stop()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def start(self) -> None:
        bins = self._bins if self._bins is not None else binaries()
        needed = ["etcd", "kube-apiserver"] + [n for n, on in self.want.items() if on]
        missing = [n for n in needed if n not in bins]
        if missing:
            raise RigError(f"no {', '.join(missing)} among the rig binaries ({', '.join(sorted(bins))})")
        self._bins = bins
        if not self.workdir.exists():
            self._created_workdir = True
        self.workdir.mkdir(parents=True, exist_ok=True)
        for sub in ("pki", "etcd", "logs"):
            (self.workdir / sub).mkdir(exist_ok=True)
        _load_libc()
        make_pki(self.pki)
        self._ports = {n: free_port() for n in ("etcd", "etcd-peer", "kube-apiserver", "kube-controller-manager",
                                                 "kube-scheduler", "kwok", "nfd-master")}
        self.server = f"https://127.0.0.1:{self._ports['kube-apiserver']}"
        (self.pki / "tokens.csv").write_text("".join(
            f'{i.token},{i.user},{i.user},"{",".join(i.groups)}"\n' for i in self.identities.values()))
        for ident in self.identities.values():
            _kubeconfig(self.workdir / f"{ident.name}.kubeconfig", self.server, self.pki / "ca.crt", ident)
        self.kubeconfig = self.workdir / "admin.kubeconfig"

        deadline = time.monotonic() + self.start_timeout
        self._start_etcd()
        self._start_apiserver()
        # the others read the API server's authentication ConfigMap as they start and exit when it is not
        # there yet: they start once it answers /readyz
        self._wait_apiserver(max(0.1, deadline - time.monotonic()))
        if self.want["kube-controller-manager"]:
            self._start_controller_manager()
        if self.want["kube-scheduler"]:
            self._start_scheduler()
        if self.want["kwok"]:
            self._start_kwok()
        if self.wait:
            self.wait_ready(max(0.1, deadline - time.monotonic()))
        if self.want["nfd-master"]:         # started with the rest: NFD's own CRDs, from the pinned module
            problems = self.apply([nfd_crds(Path(self._bins["nfd-master"]).parent)])
            if problems:
                raise RigError(f"NFD's CRDs: {problems[0]}")
            self.start_nfd_master()

    def stop(self) -> None:
        """Kill every process (SIGKILL: nothing in the workdir is kept) and remove the workdir."""
        with self._conns_lock:
            for conn in self._conns:
                conn.close()
            self._conns.clear()
        self._local = threading.local()
        for proc in reversed(list(self._procs.values())):
            if proc.popen.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    proc.popen.kill()
        for proc in self._procs.values():
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.popen.wait(timeout=10)
        self._procs.clear()
        if self.workdir.exists():
            if self._created_workdir:
                shutil.rmtree(self.workdir, ignore_errors=True)
            else:                       # a folder the caller gave: only what the rig put there
                for sub in ("pki", "etcd", "logs", "kwok.yaml", "nfd-master.conf", "kueue.conf", "kueue-certs",
                            *(f"{n}.kubeconfig" for n in self.identities)):
                    target = self.workdir / sub
                    if target.is_dir():
                        shutil.rmtree(target, ignore_errors=True)
                    else:
                        target.unlink(missing_ok=True)

    @property
    def pki(self) -> Path:
        return self.workdir / "pki"

    def port(self, component: str) -> int:
        return self._ports[component]

    def log(self, component: str) -> Path:
        return self.workdir / "logs" / f"{component}.log"

    def _spawn(self, name: str, args: list[str], env: dict[str, str] | None = None) -> None:
        log = self.log(name)
        with log.open("wb") as out:
            popen = subprocess.Popen([str(self._bins[name]), *args], stdin=subprocess.DEVNULL, stdout=out,
                                     stderr=subprocess.STDOUT, cwd=self.workdir, preexec_fn=_die_with_parent,
                                     env={**os.environ, **(env or {})})
        self._procs[name] = _Proc(name, popen, log)

    def _start_etcd(self) -> None:
        client, peer = (f"http://127.0.0.1:{self._ports[p]}" for p in ("etcd", "etcd-peer"))
        self._spawn("etcd", [
            "--name=rehearsal", f"--data-dir={self.workdir / 'etcd'}",
            f"--listen-client-urls={client}", f"--advertise-client-urls={client}",
            f"--listen-peer-urls={peer}", f"--initial-advertise-peer-urls={peer}",
            f"--initial-cluster=rehearsal={peer}", "--initial-cluster-state=new",
            "--unsafe-no-fsync",          # a throwaway store: a crash loses nothing anyone keeps
            "--log-level=warn",
        ])

    def _start_apiserver(self) -> None:
        pki = self.pki
        args = [
            f"--etcd-servers=http://127.0.0.1:{self._ports['etcd']}",
            "--bind-address=127.0.0.1", "--advertise-address=127.0.0.1",
            f"--secure-port={self._ports['kube-apiserver']}",
            f"--cert-dir={pki}", f"--tls-cert-file={pki / 'serving.crt'}",
            f"--tls-private-key-file={pki / 'serving.key'}", f"--client-ca-file={pki / 'ca.crt'}",
            f"--token-auth-file={pki / 'tokens.csv'}", "--authorization-mode=RBAC",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            f"--service-account-key-file={pki / 'sa.pub'}", f"--service-account-signing-key-file={pki / 'sa.key'}",
            "--service-cluster-ip-range=10.96.0.0/16",
            "--allow-privileged=true",    # the GPU Operator's and NFD's DaemonSets run privileged pods
            # the `kubernetes` Service's endpoints would be 127.0.0.1, which Endpoints validation refuses
            "--endpoint-reconciler-type=none",
            "--profiling=false",
            # one client, on loopback: no fair queuing of requests (kwokctl's setting for fake clusters too);
            # its bootstrap objects are not made either, a shorter start
            "--enable-priority-and-fairness=false",
        ]
        if self.runtime_config:
            args.append(f"--runtime-config={self.runtime_config}")
        if self.feature_gates:
            args.append(f"--feature-gates={self.feature_gates}")
        self._spawn("kube-apiserver", args)

    def _serving(self, name: str) -> list[str]:
        kc = self.workdir / f"{name.removeprefix('kube-')}.kubeconfig"
        return [f"--kubeconfig={kc}", f"--authentication-kubeconfig={kc}", f"--authorization-kubeconfig={kc}",
                "--bind-address=127.0.0.1", f"--secure-port={self._ports[name]}",
                f"--tls-cert-file={self.pki / 'serving.crt'}", f"--tls-private-key-file={self.pki / 'serving.key'}",
                "--leader-elect=false", "--profiling=false"]

    def _start_controller_manager(self) -> None:
        args = self._serving("kube-controller-manager") + [
            f"--service-account-private-key-file={self.pki / 'sa.key'}", f"--root-ca-file={self.pki / 'ca.crt'}",
            "--use-service-account-credentials=true",
            # no cloud: the cloud-node-lifecycle, route and service-lb controllers are off without one
            "--controllers=*",
            # the default 20 requests a second (burst 30) paces the DaemonSet controller's pod creates: a
            # rollout of a hundred fake pods would take seconds of waiting on the client's own limiter
            *CLIENT_RATE,
        ]
        if self.feature_gates:
            args.append(f"--feature-gates={self.feature_gates}")
        self._spawn("kube-controller-manager", args)

    def _start_scheduler(self) -> None:
        args = self._serving("kube-scheduler") + list(CLIENT_RATE)     # its binds: as the controller-manager
        if self.feature_gates:
            args.append(f"--feature-gates={self.feature_gates}")
        self._spawn("kube-scheduler", args)

    def _start_kwok(self) -> None:
        stages = Path(self._bins["kwok"]).parent / KWOK_STAGES_FILE
        if not stages.is_file():
            raise RigError(f"{stages}: missing (tools/rehearsal/build.py writes kwok's default stages there)")
        self._spawn("kwok", [
            f"--kubeconfig={self.kubeconfig}", f"--config={stages}",
            "--manage-all-nodes=false", f"--manage-nodes-with-annotation-selector={KWOK_NODE_ANNOTATION}=fake",
            f"--server-address=127.0.0.1:{self._ports['kwok']}", "--node-lease-duration-seconds=40",
            "--node-ip=10.244.0.1", "--cidr=10.244.0.0/16",    # addresses written into fake status only
        ])

    def start_nfd_master(self, wait: bool = True) -> None:
        """nfd-master, out of cluster: it reads NodeFeature and NodeFeatureRule objects and labels the nodes.
        Its CRDs must be installed first (`nfd_crds()`, or a chart's). Adds the fake node it runs on,
        CONTROL_PLANE_NODE (labelled and tainted as a kubeadm control-plane node). `wait=False`: returns once
        it is started; wait_nfd_master() waits for its health check (work can go on while it starts)."""
        if "nfd-master" in self._procs:
            return
        if "nfd-master" not in self._bins:
            raise RigError("no nfd-master among the rig binaries")
        # nfd-master annotates the node it runs on (NODE_NAME) as it starts and exits when there is none: the
        # control-plane node a real cluster runs it on, kwok-managed (Ready) and tainted as kubeadm taints one
        problems = self.apply([control_plane_node()])
        if problems:
            raise RigError(f"the control-plane node for nfd-master: {problems[0]}")
        conf = self.workdir / "nfd-master.conf"
        conf.write_text("{}\n")
        self._spawn("nfd-master", [f"-kubeconfig={self.kubeconfig}", f"-config={conf}",
                                   f"-port={self._ports['nfd-master']}", "-enable-leader-election=false"],
                    env={"KUBERNETES_NAMESPACE": "default", "NODE_NAME": CONTROL_PLANE_NODE})
        if wait:
            self.wait_nfd_master()

    def start_kueue(self, binary: Path, config: str) -> None:
        """Kueue's controller manager, out of cluster, with this Configuration (rehearse/queues.py writes it on
        the ports `kueue_ports()` gives). It starts its certificate bootstrap and waits for the certificate
        files (the caller mounts them); `wait_kueue()` waits for its health check."""
        self._bins["kueue"] = Path(binary)
        conf = self.workdir / "kueue.conf"
        conf.write_text(config)
        self._spawn("kueue", [f"--config={conf}", "--zap-log-level=info"], env={"KUBECONFIG": str(self.kubeconfig)})

    def kueue_ports(self) -> dict[str, int]:
        for name in ("kueue-health", "kueue-metrics", "kueue-webhook"):
            self._ports.setdefault(name, free_port())
        return {"health": self._ports["kueue-health"], "metrics": self._ports["kueue-metrics"],
                "webhook": self._ports["kueue-webhook"]}

    def wait_kueue(self, timeout: float = 120.0) -> None:
        self._wait(lambda: self._http_ok(f"http://127.0.0.1:{self._ports['kueue-health']}/readyz"), timeout,
                   "kueue readyz", "kueue")

    def wait_nfd_master(self) -> None:
        """nfd-master answering its health check (started by start_nfd_master(wait=False))."""
        self._wait(lambda: self._http_ok(f"http://127.0.0.1:{self._ports['nfd-master']}/healthz"),
                   self.start_timeout, "nfd-master healthz")

    # -- readiness --

    def check_alive(self) -> None:
        """RigError, with the log's tail, when a process the rig started (Kueue's manager too) has exited."""
        self._check_alive()

    def _check_alive(self) -> None:
        for proc in self._procs.values():
            if proc.popen.poll() is not None:
                raise RigError(f"{proc.name} exited with {proc.popen.returncode}; the end of {proc.log}:\n"
                               f"{proc.tail()}")

    def _http_ok(self, url: str) -> bool:
        import urllib.request
        ctx = ssl.create_default_context(cafile=str(self.pki / "ca.crt"))
        try:
            with urllib.request.urlopen(url, timeout=2, context=ctx if url.startswith("https") else None) as r:
                return r.status == 200
        except OSError:
            return False

    def _wait(self, ok: Callable[[], bool], timeout: float, what: str, component: str = "") -> None:
        deadline = time.monotonic() + timeout
        while True:
            self._check_alive()
            if ok():
                return
            if time.monotonic() > deadline:
                proc = self._procs.get(component or what.split()[0])
                tail = f"; the end of {proc.log}:\n{proc.tail()}" if proc else ""
                raise RigError(f"timed out after {timeout:.0f} s waiting for {what}{tail}")
            time.sleep(0.1)

    def _wait_apiserver(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        self._wait(lambda: self._http_ok(f"http://127.0.0.1:{self._ports['etcd']}/health"), timeout, "etcd")
        self._wait(lambda: self._status("GET", "/readyz") == 200, max(0.1, deadline - time.monotonic()),
                   "kube-apiserver /readyz")

    def wait_ready(self, timeout: float = START_TIMEOUT) -> None:
        """Every started component healthy, and the `default` ServiceAccount made (pods can be created)."""
        deadline = time.monotonic() + timeout
        left = lambda: max(0.1, deadline - time.monotonic())                      # noqa: E731
        self._wait_apiserver(left())
        for name in ("kube-controller-manager", "kube-scheduler"):
            if name in self._procs:
                self._wait(lambda: self._http_ok(f"https://127.0.0.1:{self._ports[name]}/healthz"), left(),
                           f"{name} /healthz")
        if "kwok" in self._procs:
            self._wait(lambda: self._http_ok(f"http://127.0.0.1:{self._ports['kwok']}/healthz"), left(), "kwok")
        if "kube-controller-manager" in self._procs:
            self._wait(lambda: self._status("GET", "/api/v1/namespaces/default/serviceaccounts/default") == 200,
                       left(), "the default ServiceAccount", "kube-controller-manager")

    def wait_for(self, ok: Callable[[], Any], timeout: float = 60.0, what: str = "a condition",
                 left: Callable[[], str] | None = None, interval: float = 0.1) -> Any:
        """Poll `ok` until it returns a true value (returned), while every rig process stays up. `left`, when
        given, says what is still awaited in the timeout's message."""
        deadline = time.monotonic() + timeout
        while True:
            self._check_alive()
            value = ok()
            if value:
                return value
            if time.monotonic() > deadline:
                raise RigError(f"timed out after {timeout:.0f} s waiting for {what}" + (f": {left()}" if left else ""))
            time.sleep(interval)

    # -- the API --

    def _connection(self) -> http.client.HTTPSConnection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            ctx = ssl.create_default_context(cafile=str(self.pki / "ca.crt"))
            conn = http.client.HTTPSConnection("127.0.0.1", self._ports["kube-apiserver"], context=ctx, timeout=60)
            self._local.conn = conn
            with self._conns_lock:
                self._conns.append(conn)
        return conn

    def _raw(self, method: str, path: str, body: bytes | None = None,
             content_type: str = "application/json", accept: str = "application/json") -> tuple[int, bytes]:
        headers = {"Authorization": f"Bearer {self.identities['admin'].token}", "Accept": accept,
                   "User-Agent": "gpuop-rehearse"}
        if body is not None:
            headers["Content-Type"] = content_type
        for attempt in (1, 2):
            conn = self._connection()
            try:
                conn.request(method, path, body=body, headers=headers)
                resp = conn.getresponse()
                return resp.status, resp.read()
            except (OSError, http.client.HTTPException):
                conn.close()
                self._local.conn = None
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")

    def map(self, fn: Callable[[Any], Any], items: Iterable[Any], workers: int = 8) -> list[Any]:
        """fn over items from a few threads (each with its own connection), the results in the items' order.
        The API server answers requests concurrently: a rehearsal's many small creates and applies wait on
        round trips, not on this process."""
        items = list(items)
        if workers <= 1 or len(items) <= 1:
            return [fn(i) for i in items]
        with ThreadPoolExecutor(max_workers=min(workers, len(items)), thread_name_prefix="rig") as pool:
            return list(pool.map(fn, items))

    def _status(self, method: str, path: str) -> int:
        try:
            return self._raw(method, path)[0]
        except (OSError, http.client.HTTPException):
            return 0

    def request(self, method: str, path: str, body: Any = None, *,
                content_type: str = "application/json", accept: str = "application/json") -> dict[str, Any]:
        """One API call; the decoded JSON answer, or ApiError with the API server's Status."""
        data = None if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
        code, raw = self._raw(method, path, data, content_type, accept)
        try:
            decoded = json.loads(raw) if raw else {}
        except ValueError:
            decoded = None
        if code >= 300:
            raise ApiError(code, decoded if isinstance(decoded, dict) else None, raw.decode(errors="replace"))
        return decoded if isinstance(decoded, dict) else {"raw": raw.decode(errors="replace")}

    def get(self, path: str) -> dict[str, Any]:
        return self.request("GET", path)

    def version(self) -> dict[str, Any]:
        return self.get("/version")

    def discover(self) -> dict[tuple[str, str], _Resource]:
        """(apiVersion, kind) -> resource, from the API server's discovery (refreshed after CRDs are applied):
        the aggregated discovery documents (/api and /apis, two requests), or per group version when the
        API server does not send them."""
        found = self._discover_aggregated()
        if found is None:
            found = self._discover_per_version()
        self._resources = found
        return found

    def _discover_aggregated(self) -> dict[tuple[str, str], _Resource] | None:
        found: dict[tuple[str, str], _Resource] = {}
        for root in ("/api", "/apis"):
            doc = self.request("GET", root, accept=AGGREGATED_DISCOVERY)
            if doc.get("kind") != "APIGroupDiscoveryList":
                return None
            for group in doc.get("items") or []:
                name = (group.get("metadata") or {}).get("name") or ""
                for v in group.get("versions") or []:
                    gv = f"{name}/{v['version']}" if name else v["version"]
                    for r in v.get("resources") or []:
                        kind = (r.get("responseKind") or {}).get("kind")
                        if kind:
                            found[(gv, kind)] = _Resource(r["resource"], r.get("scope") == "Namespaced")
        return found

    def _discover_per_version(self) -> dict[tuple[str, str], _Resource]:
        found: dict[tuple[str, str], _Resource] = {}
        versions = ["v1"] + [v["groupVersion"] for g in self.get("/apis").get("groups", [])
                             for v in g.get("versions", [])]
        for gv in versions:
            try:
                listing = self.get("/api/v1" if gv == "v1" else f"/apis/{gv}")
            except ApiError:            # an aggregated API not available yet: its kinds stay unknown
                continue
            for r in listing.get("resources", []):
                if "/" not in r["name"]:
                    found[(gv, r["kind"])] = _Resource(r["name"], bool(r.get("namespaced")))
        return found

    def resource(self, api_version: str, kind: str, *, refresh: bool = True) -> _Resource | None:
        if self._resources is None:
            self.discover()
        res = self._resources.get((api_version, kind))
        if res is None and refresh:
            res = self.discover().get((api_version, kind))
        return res

    def path_of(self, api_version: str, kind: str, namespace: str | None = None, name: str | None = None) -> str:
        res = self.resource(api_version, kind)
        if res is None:
            raise RigError(f'no matches for kind "{kind}" in version "{api_version}"')
        base = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
        if res.namespaced and namespace:
            base += f"/namespaces/{quote(namespace, safe='')}"
        path = f"{base}/{res.plural}"
        return f"{path}/{quote(name, safe='')}" if name else path

    def list_objects(self, api_version: str, kind: str, namespace: str | None = None,
             selector: str | None = None) -> list[dict[str, Any]]:
        path = self.path_of(api_version, kind, namespace)
        return self.get(path + (f"?{urlencode({'labelSelector': selector})}" if selector else "")).get("items", [])

    def read(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> dict[str, Any] | None:
        try:
            return self.get(self.path_of(api_version, kind, namespace, name))
        except ApiError as e:
            if e.code == 404:
                return None
            raise

    def apply(self, objects_or_paths: Iterable[Any] | Any, *, server_side: bool = True,
              field_manager: str = "gpuop-rehearse", force: bool = True, dry_run: bool = False,
              subresource: str = "", wait_crds: float = 30.0, workers: int = 1) -> list[Problem]:
        """Apply objects (dicts) and YAML/JSON files or folders of them: Namespaces first, then CRDs (waited
        for until Established, so the objects of their kinds that follow apply), then the rest in the order
        given. Server-side apply (`force`: this field manager takes over conflicting fields, as
        `kubectl apply --server-side --force-conflicts`); `server_side=False` creates or replaces instead.
        `subresource="status"` applies to the objects' status (a fake node's capacity, say), server-side only.
        `workers` > 1: each of those groups is applied from that many threads at once, the workloads (pods
        and their controllers) after the rest of their group, so what their pods need is there when the
        pods are admitted.
        Returns one Problem per object refused, with the API server's message; an empty list when all applied."""
        items = [objects_or_paths] if isinstance(objects_or_paths, (dict, str, Path)) else list(objects_or_paths)
        docs = [d for item in items for d in _documents(item)]
        docs.sort(key=lambda d: _rank(d[0]))      # stable: the rest keep the order given
        waves: list[list[tuple[dict, str]]] = []
        last: Any = None
        for doc in docs:
            key = (_rank(doc[0]), doc[0].get("kind") in _WORKLOADS) if workers > 1 else object()
            if not waves or key != last:
                waves.append([])
            waves[-1].append(doc)
            last = key

        def one(doc: tuple[dict, str]) -> Problem | None:
            return self._apply_one(doc[0], doc[1], server_side=server_side, field_manager=field_manager,
                                   force=force, dry_run=dry_run, subresource=subresource)

        problems: list[Problem] = []
        crds: list[str] = []
        for wave in waves:
            if crds and _rank(wave[0][0]) == _REST and not dry_run:   # after the CRDs: wait, learn their kinds
                self.wait_established(crds, wait_crds)
                self.discover()
                crds = []
            for (obj, _), problem in zip(wave, self.map(one, wave, workers)):
                if problem is not None:
                    problems.append(problem)
                elif obj.get("kind") == "CustomResourceDefinition":
                    crds.append(obj["metadata"]["name"])
        if crds and not dry_run:
            self.wait_established(crds, wait_crds)
            self.discover()
        return problems

    def _apply_one(self, obj: dict, source: str, *, server_side: bool, field_manager: str, force: bool,
                   dry_run: bool, subresource: str) -> Problem | None:
        api_version, kind = str(obj.get("apiVersion", "")), str(obj.get("kind", ""))
        meta = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
        name, namespace = str(meta.get("name", "")), str(meta.get("namespace") or "")

        def problem(message: str, reason: str = "", code: int = 0, ns: str = namespace) -> Problem:
            return Problem(api_version, kind, ns, name, message, reason, code, source)

        if not api_version or not kind:
            return problem("Object 'Kind' is missing" if not kind else "Object 'apiVersion' is missing")
        res = self.resource(api_version, kind)
        if res is None:
            return problem(f'no matches for kind "{kind}" in version "{api_version}"')
        if res.namespaced:
            namespace = namespace or "default"
        else:
            namespace = ""
        if not name:
            return problem("resource name may not be empty", "Invalid", 422, namespace)
        query = {"fieldManager": field_manager}
        if dry_run:
            query["dryRun"] = "All"
        body = dict(obj)
        if res.namespaced:
            body["metadata"] = {**meta, "namespace": namespace}
        try:
            if server_side or subresource:
                if force:
                    query["force"] = "true"
                path = self.path_of(api_version, kind, namespace, name) + (f"/{subresource}" if subresource else "")
                self.request("PATCH", path + "?" + urlencode(query),
                             json.dumps(body).encode(), content_type="application/apply-patch+yaml")
            else:
                self._create_or_replace(api_version, kind, namespace, name, body, query)
        except ApiError as e:
            return problem(e.message, e.reason, e.code, namespace)
        return None

    def _create_or_replace(self, api_version: str, kind: str, namespace: str, name: str, body: dict,
                           query: dict[str, str]) -> None:
        try:
            self.request("POST", self.path_of(api_version, kind, namespace) + "?" + urlencode(query), body)
        except ApiError as e:
            if e.code != 409:
                raise
            current = self.get(self.path_of(api_version, kind, namespace, name))
            body = {**body, "metadata": {**body.get("metadata", {}),
                                         "resourceVersion": current["metadata"]["resourceVersion"]}}
            self.request("PUT", self.path_of(api_version, kind, namespace, name) + "?" + urlencode(query), body)

    def wait_established(self, names: Iterable[str], timeout: float = 30.0) -> None:
        """Each CRD's Established condition True (its kind is served)."""
        todo = set(names)

        def done() -> bool:
            for name in sorted(todo):
                if established(self.read("apiextensions.k8s.io/v1", "CustomResourceDefinition", name)):
                    todo.discard(name)
            return not todo

        self.wait_for(done, timeout, "CRDs Established", lambda: ", ".join(sorted(todo)))
