#!/usr/bin/env python3
"""Build the rehearsal rig's binaries from the Go module proxy, once per pinned version.

Each folder beside this script is a small wrapper Go module (go.mod + go.sum, nothing else) whose `tool`
lines name the commands to build: kubernetes/ (kube-apiserver, kube-controller-manager, kube-scheduler),
etcd/, kwok/, nfd/ (nfd-master). kubectl is not built: the rig talks to the API server itself (rehearse/
rig.py), and a fresh machine's first build is shorter without it (bench/rehearsal.json, cold_build). `go build` builds them with the ordinary Go command into

    $GPUOP_RIG_DIR                       when set, else
    ~/.cache/gpuop/rig/<digest>/bin      digest: the wrapper modules, the flags below and `go version`

A stamp per module (its own digest) makes a second run a no-op; a run stopped half-way resumes at the
first module without a stamp. A module whose digest is unchanged is taken from the rig folder of another
digest that has it (a new pin of one module rebuilds that module only). Standard library only: `make rig` runs it before the venv exists.

    python3 tools/rehearsal/build.py              build what is missing, print the folder
    python3 tools/rehearsal/build.py --print-dir  print the folder only (nothing built)
    python3 tools/rehearsal/build.py --check      exit 0 when every binary is built, 1 when not
    python3 tools/rehearsal/build.py --flux ...   the same for Flux's controllers (the GitOps rehearsal)
    python3 tools/rehearsal/build.py --cosign ... the same for cosign (chart signing and its tests)
    python3 tools/rehearsal/build.py --kueue ...  the same for Kueue (the queues' probe Workloads)

Flux's source-, kustomize- and helm-controller (one Flux release, FLUX_RELEASE) are a group of their own:
flux-source/, flux-kustomize/, flux-helm/ build into ~/.cache/gpuop/flux/<digest>/bin ($GPUOP_FLUX_DIR when
set), so the rig's folder and digest do not change with them. Flux builds on k8s.io v0.36, newer than the
rig's Kubernetes 1.35: each controller is a wrapper module of its own.

cosign (COSIGN_VERSION, cosign/) builds into ~/.cache/gpuop/cosign/<digest>/bin ($GPUOP_COSIGN_DIR when set).
Kueue's controller manager (KUEUE_VERSION, kueue/) into ~/.cache/gpuop/kueue/<digest>/bin ($GPUOP_KUEUE_DIR).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent

K8S_VERSION = "v1.35.4"
NFD_VERSION = "v0.19.0"
_KV = "k8s.io/component-base/version"
_CV = "k8s.io/client-go/pkg/version"


@dataclass(frozen=True)
class Module:
    folder: str
    # package -> the binary's name (`go build -o` names a binary after the package's last element)
    commands: tuple[tuple[str, str], ...]
    # -X settings: without them kube-apiserver's /version says v0.0.0-master+$Format:%H$
    version_flags: tuple[str, ...] = ()


MODULES = (
    Module("kubernetes",
           tuple((f"k8s.io/kubernetes/cmd/{c}", c) for c in
                 ("kube-apiserver", "kube-controller-manager", "kube-scheduler")),
           tuple(f"-X {pkg}.{var}={val}" for pkg in (_KV, _CV) for var, val in
                 (("gitVersion", K8S_VERSION), ("gitMajor", K8S_VERSION.split(".")[0][1:]),
                  ("gitMinor", K8S_VERSION.split(".")[1]), ("gitTreeState", "clean"),
                  ("buildDate", "1970-01-01T00:00:00Z")))),
    Module("etcd", (("go.etcd.io/etcd/server/v3", "etcd"),)),
    Module("kwok", (("sigs.k8s.io/kwok/cmd/kwok", "kwok"),)),
    Module("nfd", (("sigs.k8s.io/node-feature-discovery/cmd/nfd-master", "nfd-master"),),
           (f"-X sigs.k8s.io/node-feature-discovery/pkg/version.version={NFD_VERSION}",)),
)
BINARIES = tuple(name for m in MODULES for _, name in m.commands)

# Flux v2.9.5's controllers (the flux2 v2.9.5 module requires exactly these api versions)
FLUX_RELEASE = "v2.9.5"
FLUX_MODULES = (
    Module("flux-source", (("github.com/fluxcd/source-controller", "source-controller"),)),
    Module("flux-kustomize", (("github.com/fluxcd/kustomize-controller", "kustomize-controller"),)),
    Module("flux-helm", (("github.com/fluxcd/helm-controller", "helm-controller"),)),
)
FLUX_BINARIES = tuple(name for m in FLUX_MODULES for _, name in m.commands)

# cosign, sigstore's signer and verifier: `gpuop publish --oci` signs charts with it, `gpuop images resolve`
# verifies upstream signatures with it, and the publish tests verify with it
COSIGN_VERSION = "v3.1.3"
COSIGN_MODULES = (
    Module("cosign", (("github.com/sigstore/cosign/v3/cmd/cosign", "cosign"),),
           # without it `cosign version` says devel
           (f"-X sigs.k8s.io/release-utils/version.gitVersion={COSIGN_VERSION}",
            "-X sigs.k8s.io/release-utils/version.gitTreeState=clean",
            "-X sigs.k8s.io/release-utils/version.buildDate=1970-01-01T00:00:00Z")),
)
COSIGN_BINARIES = tuple(name for m in COSIGN_MODULES for _, name in m.commands)

# Kueue's controller manager, the release whose CRDs gpuop ships (constructs/gpuop/verify/crds/kueue): the
# rehearsal runs it to admit a probe Workload per ResourceFlavor of a cluster's queues
KUEUE_VERSION = "v0.19.2"
KUEUE_MODULES = (
    Module("kueue", (("sigs.k8s.io/kueue/cmd/kueue", "kueue"),),
           # without it the manager logs v0.0.0-main
           (f"-X sigs.k8s.io/kueue/pkg/version.GitVersion={KUEUE_VERSION}",
            "-X sigs.k8s.io/kueue/pkg/version.BuildDate=1970-01-01")),
)
KUEUE_BINARIES = tuple(name for m in KUEUE_MODULES for _, name in m.commands)

# -trimpath: no build folder in the binaries; -s -w: no symbol or DWARF tables (a shorter link);
# CGO_ENABLED=0: static binaries, no C compiler needed (etcd's bbolt and the rest are pure Go).
BUILD_FLAGS = ("-trimpath",)
LDFLAGS = ("-s", "-w")
BUILD_ENV = {"CGO_ENABLED": "0", "GOFLAGS": "-mod=readonly"}


class BuildError(Exception):
    pass


def go_version() -> str:
    go = shutil.which("go")
    if go is None:
        raise BuildError("the go command is not on PATH: the rehearsal rig is built with it (Go >= 1.26)")
    return subprocess.run([go, "version"], check=True, capture_output=True, text=True).stdout.strip()


def module_digest(m: Module, go: str) -> str:
    h = hashlib.sha256()
    for part in (go, repr(m), repr(BUILD_FLAGS), repr(LDFLAGS), repr(sorted(BUILD_ENV.items()))):
        h.update(part.encode() + b"\0")
    for name in ("go.mod", "go.sum"):
        h.update((HERE / m.folder / name).read_bytes() + b"\0")
    return h.hexdigest()


def rig_dir(go: str | None = None, group: str = "rig") -> Path:
    env, modules = GROUPS[group]
    if os.environ.get(env):
        return Path(os.environ[env]).expanduser()
    go = go or go_version()
    h = hashlib.sha256("".join(module_digest(m, go) for m in modules).encode()).hexdigest()[:16]
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "gpuop" / group / h / "bin"


def stamp(out: Path, m: Module, go: str) -> Path:
    return out / f".{m.folder}.{module_digest(m, go)[:16]}.built"


def built(out: Path, m: Module, go: str) -> bool:
    return stamp(out, m, go).is_file() and all((out / name).is_file() for name in files_of(m))


def files_of(m: Module) -> list[str]:
    return [name for _, name in m.commands] + ([EXTRAS[m.folder][2]] if m.folder in EXTRAS else [])


def reuse(out: Path, m: Module, go: str) -> Path | None:
    """Copy a module's files from a sibling folder (`<cache>/<group>/<other digest>/bin`) whose stamp for
    this module has the same digest: the same wrapper module, flags and Go build the same binaries. The
    folder it came from, or None."""
    name = stamp(out, m, go).name
    for other in sorted(out.parent.parent.glob(f"*/{out.name}")):
        if other == out or not built(other, m, go):
            continue
        for f in files_of(m):
            tmp = out / f".tmp-{f}"
            shutil.copy2(other / f, tmp)
            os.replace(tmp, out / f)
        for old in out.glob(f".{m.folder}.*.built"):
            old.unlink()
        shutil.copy2(other / name, out / name)
        return other
    return None


def go_binary_name(pkg: str) -> str:
    """The name `go build -o DIR/` gives a command: its import path's last element, or the one before a
    major-version suffix (go.etcd.io/etcd/server/v3 -> server)."""
    parts = pkg.split("/")
    return parts[-2] if len(parts) > 1 and re.fullmatch(r"v[0-9]+", parts[-1]) else parts[-1]


# Files besides the binaries, read at build time from the module the wrapper pins and joined into one YAML
# stream in the rig folder: module folder -> (module, its files, the rig file).
# kwok run by itself (not through kwokctl) takes its stages from --config: the ones kwokctl gives a cluster
# by default (node-initialize, heartbeat with a Lease, pod ready / complete / delete). nfd-master needs the
# NodeFeature, NodeFeatureRule and NodeFeatureGroup CRDs installed.
KWOK_STAGES_FILE = "kwok-stages.yaml"
NFD_CRDS_FILE = "nfd-api-crds.yaml"
EXTRAS = {
    "kwok": ("sigs.k8s.io/kwok",
             ("kustomize/stage/node/fast/node-initialize.yaml",
              "kustomize/stage/node/heartbeat-with-lease/node-heartbeat-with-lease.yaml",
              "kustomize/stage/pod/fast/pod-ready.yaml",
              "kustomize/stage/pod/fast/pod-complete.yaml",
              "kustomize/stage/pod/fast/pod-delete.yaml"),
             KWOK_STAGES_FILE),
    "nfd": ("sigs.k8s.io/node-feature-discovery", ("deployment/base/nfd-crds/nfd-api-crds.yaml",), NFD_CRDS_FILE),
    # Flux's CRDs from the controller modules themselves (config/crd/bases), so they match the binaries
    "flux-source": ("github.com/fluxcd/source-controller",
                    tuple(f"config/crd/bases/source.toolkit.fluxcd.io_{k}.yaml" for k in
                          ("buckets", "externalartifacts", "gitrepositories", "helmcharts", "helmrepositories",
                           "ocirepositories")),
                    "flux-source-crds.yaml"),
    "flux-kustomize": ("github.com/fluxcd/kustomize-controller",
                       ("config/crd/bases/kustomize.toolkit.fluxcd.io_kustomizations.yaml",), "flux-kustomize-crds.yaml"),
    "flux-helm": ("github.com/fluxcd/helm-controller",
                  ("config/crd/bases/helm.toolkit.fluxcd.io_helmreleases.yaml",), "flux-helm-crds.yaml"),
    # every CRD the manager watches (it waits for the kinds it reconciles), from the module it is built from
    "kueue": ("sigs.k8s.io/kueue",
              tuple(f"config/components/crd/bases/kueue.x-k8s.io_{k}.yaml" for k in
                    ("admissionchecks", "clusterqueues", "cohorts", "localqueues", "multikueueclusters",
                     "multikueueconfigs", "provisioningrequestconfigs", "resourceflavors", "topologies",
                     "workloadpriorityclasses", "workloads")),
              "kueue-crds.yaml"),
}
# group -> (the environment variable naming its folder, its modules)
GROUPS = {"rig": ("GPUOP_RIG_DIR", MODULES), "flux": ("GPUOP_FLUX_DIR", FLUX_MODULES),
          "cosign": ("GPUOP_COSIGN_DIR", COSIGN_MODULES), "kueue": ("GPUOP_KUEUE_DIR", KUEUE_MODULES)}
# group -> its binaries (what --only may name)
GROUP_BINARIES = {"rig": BINARIES, "flux": FLUX_BINARIES, "cosign": COSIGN_BINARIES, "kueue": KUEUE_BINARIES}


def write_extras(out: Path, m: Module, env: dict[str, str]) -> None:
    if m.folder not in EXTRAS:
        return
    module, files, target = EXTRAS[m.folder]
    listed = subprocess.run(["go", "list", "-m", "-f", "{{.Dir}}", module], cwd=HERE / m.folder, env=env,
                            capture_output=True, text=True)
    if listed.returncode != 0 or not listed.stdout.strip():
        raise BuildError(f"cannot find the folder of {module}: {listed.stderr.strip()}")
    src = Path(listed.stdout.strip())
    docs = [(src / rel).read_text().strip().removeprefix("---").strip() + "\n" for rel in files]
    (out / target).write_text("---\n".join(docs))


def build_module(out: Path, m: Module, go: str) -> float:
    env = {**os.environ, **BUILD_ENV}
    ldflags = " ".join(LDFLAGS + m.version_flags)
    started = time.monotonic()
    # one `go build` per module: the packages build in parallel and share the compiled dependencies;
    # each binary goes to a temporary name first, renamed once whole (a stopped build leaves no half file)
    tmp = out / f".tmp-{m.folder}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    cmd = ["go", "build", *BUILD_FLAGS, f"-ldflags={ldflags}", "-o", str(tmp) + os.sep, *(p for p, _ in m.commands)]
    done = subprocess.run(cmd, cwd=HERE / m.folder, env=env)
    if done.returncode != 0:
        raise BuildError(f"go build in tools/rehearsal/{m.folder} failed (exit {done.returncode})")
    for pkg, name in m.commands:
        os.replace(tmp / go_binary_name(pkg), out / name)
    shutil.rmtree(tmp, ignore_errors=True)
    write_extras(out, m, env)
    for old in out.glob(f".{m.folder}.*.built"):
        old.unlink()
    stamp(out, m, go).write_text(f"{go}\n")
    return time.monotonic() - started


def build(out: Path | None = None, *, quiet: bool = False, group: str = "rig",
          modules: tuple[Module, ...] | None = None) -> dict[str, float]:
    """Build every module of the group (or these) without a stamp; return the seconds each build took."""
    go = go_version()
    out = out or rig_dir(go, group)
    out.mkdir(parents=True, exist_ok=True)
    took: dict[str, float] = {}
    for m in modules if modules is not None else GROUPS[group][1]:
        if built(out, m, go):
            continue
        if not os.environ.get(GROUPS[group][0]):         # the cache's own folders only, not a folder one names
            source = reuse(out, m, go)
            if source is not None:
                if not quiet:
                    print(f"rig: {m.folder}: the same build as in {source}, copied", file=sys.stderr, flush=True)
                continue
        if not quiet:
            print(f"rig: building {', '.join(n for _, n in m.commands)} (tools/rehearsal/{m.folder}) into {out}",
                  file=sys.stderr, flush=True)
        took[m.folder] = build_module(out, m, go)
        if not quiet:
            print(f"rig: {m.folder} built in {took[m.folder]:.0f} s", file=sys.stderr, flush=True)
    return took


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--print-dir", action="store_true", help="print the binaries' folder, build nothing")
    ap.add_argument("--check", action="store_true", help="exit 0 when every binary is built, 1 when not")
    which = ap.add_mutually_exclusive_group()
    which.add_argument("--flux", action="store_true", help="Flux's controllers instead of the rig")
    which.add_argument("--cosign", action="store_true", help="cosign instead of the rig")
    which.add_argument("--kueue", action="store_true", help="Kueue's controller manager instead of the rig")
    ap.add_argument("--only", default="", help="with --flux: these controllers only (comma-separated binary names)")
    args = ap.parse_args(argv)
    group = "flux" if args.flux else "cosign" if args.cosign else "kueue" if args.kueue else "rig"
    only = {n for n in args.only.split(",") if n}
    unknown = only - set(GROUP_BINARIES[group])
    if unknown:
        print(f"rig: --only: no such binary: {', '.join(sorted(unknown))}", file=sys.stderr)
        return 2
    try:
        go = go_version()
        out = rig_dir(go, group)
        if args.print_dir:
            print(out)
            return 0
        modules = tuple(m for m in GROUPS[group][1] if not only or only & {n for _, n in m.commands})
        if args.check:
            return 0 if all(built(out, m, go) for m in modules) else 1
        build(out, group=group, modules=modules)
    except BuildError as e:
        print(f"rig: {e}", file=sys.stderr)
        return 2
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
