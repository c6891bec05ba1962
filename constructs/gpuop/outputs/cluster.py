"""Stage 6, package: a synthesized stack -> every output file of its cluster, and the whole dist/ tree.

Two steps, so the expensive one can be cached and run in parallel per cluster:
- `build_cluster(stack, settings)`: everything under dist/<cluster>/ with the chart version left as
  a placeholder, plus the cluster's index entry. A pure function of the cluster's inputs.
- `assemble(builds, previous)`: fills in each build's chart version (decided once per cluster before it
  gets here: pipeline/decide.py, from the lock: same content, same version), records it in the lock,
  packages new chart versions, and writes dist/index.json and dist/versions.lock.json. A cluster whose output is unchanged is not rewritten: its folder of the
  previous output is linked into the new tree (pipeline/write.py), but only when the bytes on disk
  hash to the `treeDigest` recorded for it in index.json (a hand edit, even one that keeps the size,
  is rebuilt) and its chart archive is present.
- A subset compile (`keep`): clusters of the previous output not compiled this time keep their folder,
  index entry, lock entry and archives as they are.
Paths in index.json are relative to dist/. The ApplicationSet's parameters of a cluster live in
dist/<cluster>/params/cluster.json, outside the apply folders (argocd/, flux/, manifests/ hold only
Kubernetes objects, so `kubectl apply -f dist/<cluster>/argocd/` works).
"""

from __future__ import annotations

import hashlib
import os
import stat
from dataclasses import dataclass, field

from gpuop import __version__
from gpuop.outputs import addons
from gpuop.outputs import alerts
from gpuop.outputs import node_labels
from gpuop.outputs import dra
from gpuop.outputs import argocd
from gpuop.outputs import charts
from gpuop.outputs import dashboards
from gpuop.outputs import delivery
from gpuop.outputs import fleet
from gpuop.outputs import helm
from gpuop.outputs import images
from gpuop.outputs import kustomize
from gpuop.outputs import manifests
from gpuop.outputs import operator
from gpuop.outputs import sbom
from gpuop.outputs import version

from gpuop.outputs.target import OPERATOR, STACK, Folders, Target
from gpuop.outputs.version import VERSION_PLACEHOLDER


@dataclass(frozen=True)
class ClusterBuild:
    name: str
    files: dict | None      # path relative to dist/ -> text (VERSION_PLACEHOLDER for the chart version);
                            # None: reuse dist/<name>/ of the previous output as it is
    digest: str             # chart content digest (placeholder version)
    minor_key: str          # what makes a content change a minor bump
    entry: dict             # index.json entry without chartVersion
    files_digest: str = ""  # digest of `files` (placeholder version)
    layout: dict = field(default_factory=dict)   # path -> [size, placeholder count]: checks a reused folder
    packaged: tuple | None = None   # (chart version, archive bytes, index entry) made by the worker, or None
    settled: dict | None = None     # streamed into the new tree already (`settle`): chart version, tree digest
    chart_version: str | None = None    # decided once from the previous lock (pipeline/decide.py), None: not yet

    def head(self) -> dict:
        """What the build cache keeps of it: its content, never what the lock or this run made of it."""
        return {k: v for k, v in self.__dict__.items() if k not in ("files", "packaged", "settled", "chart_version")}


def package(build: ClusterBuild, chart_version: str) -> ClusterBuild:
    """The build with its chart archive for `chart_version` made (in the worker that built it, so fleets
    package on every core); assemble uses it when the version it assigns is the same."""
    prefix = f"{build.entry['chart']}/"           # dist/<cluster>/chart, preview/chart in operator mode
    chart = {p[len(prefix):]: t.replace(VERSION_PLACEHOLDER, chart_version) for p, t in build.files.items()
             if p.startswith(prefix)}
    tgz = f"{build.name}-{chart_version}.tgz"
    data = charts.archive(build.name, chart)
    entry = charts.entry_of_chart(tgz, data, chart["Chart.yaml"])
    return ClusterBuild(**{**build.__dict__, "packaged": (chart_version, data, entry)})


def files_digest(files: dict) -> str:
    return version.content_digest(files).removeprefix("sha256:")


def output_digest(build: ClusterBuild, chart_version: str) -> str:
    """Digest of dist/<cluster>/ as written: the build's files with the chart version filled in."""
    return "sha256:" + hashlib.sha256(f"{build.files_digest}|{chart_version}".encode()).hexdigest()


def tree_digest(files: dict) -> str:
    """Digest of a cluster folder's bytes: path (relative to dist/) and content of every file, sorted."""
    h = hashlib.sha256()
    for path in sorted(files):
        data = files[path]
        h.update(path.encode() + b"\0" + (data.encode() if isinstance(data, str) else data) + b"\0")
    return "sha256:" + h.hexdigest()


def expected_tree(build: ClusterBuild, chart_version: str) -> str:
    """tree_digest of dist/<cluster>/ as this build writes it for `chart_version`."""
    return tree_digest({p: (t.replace(VERSION_PLACEHOLDER, chart_version) if VERSION_PLACEHOLDER in t else t)
                        for p, t in build.files.items()})


def disk_tree_digest(root, name: str) -> str | None:
    """tree_digest of dist/<name>/ as it is on disk; None when it holds anything but regular files and
    folders (a symlink, a FIFO) or cannot be read."""
    files = {}
    base = os.path.join(str(root), name)
    if not os.path.isdir(base) or os.path.islink(base):
        return None
    try:
        for folder, dirs, names in os.walk(base):
            for d in dirs:
                if os.path.islink(os.path.join(folder, d)):
                    return None
            for n in names:
                full = os.path.join(folder, n)
                st = os.lstat(full)
                if not stat.S_ISREG(st.st_mode):
                    return None
                with open(full, "rb") as f:
                    files[os.path.relpath(full, str(root))] = f.read()
    except OSError:
        return None
    return tree_digest(files)


def reusable(build: ClusterBuild, previous, chart_version: str, unchanged: bool = False) -> bool:
    """True when the previous output's dist/<cluster>/ is what this build would write: same output
    digest in the previous index.json, the bytes on disk match the tree digest recorded there (taken as
    matching when `unchanged`: the folder's stats are as gpuop wrote it, pipeline/noop.py), and the
    chart archive of this version is present (and matched its index.yaml digest)."""
    if previous is None:
        return False
    entry = previous.index.get(build.name, {})
    if entry.get("outputDigest") != output_digest(build, chart_version) or not entry.get("treeDigest"):
        return False
    if f"{build.name}-{chart_version}.tgz" not in previous.charts:
        return False
    return unchanged or disk_tree_digest(previous.out, build.name) == entry["treeDigest"]


def build_cluster(stack, settings) -> ClusterBuild:
    """Every file of dist/<cluster>/ (the chart version a placeholder) and its index.json entry. The delivery is
    chosen here, up front (outputs/target.py): gpuop's own stack, or NVIDIA's operator; every writer is called
    here, once, with the same value, and writes its own files where the folders say."""
    plan = stack.plan
    mode = OPERATOR if plan.operator is not None else STACK
    t = Target(stack, settings.gitops, Folders(plan.name, mode), settings.signing)
    files: dict = {}
    entry: dict = {**t.identity(), **t.folders.entry()}
    if plan.user_created:            # the ConfigMaps the stack mounts that the user creates (`gpuop validate DIST`)
        entry["userCreated"] = plan.user_created
    entry.update(argocd.index_entry(plan))            # NFD, destination and credential references, for the fleet
    entry["capacity"] = plan.capacity.as_dict()       # what each pool advertises (plan/capacity.py)
    for written in (
        helm.write(t),                # chart/ (preview/chart/ in operator mode)
        manifests.write(t),           # manifests/ (preview/manifests/)
        kustomize.write(t),           # overlay/ (preview/overlay/)
        DELIVERY[mode](t),            # argocd/, flux/, flux-overlay/, params/; operator mode: operator/ too
        addons.write(t),              # operator mode: gpuop's own objects beside NVIDIA's chart (addons/)
        node_labels.write(t),         # node-labels.yaml
        dra.write(t),                 # the DRA driver's delivery, after the stack
        images.write(t),              # the images of manifests/, for mirroring (stack mode)
        alerts.write(t),              # alerts/: the plain Prometheus rule file, in both delivery modes
        dashboards.write(t),          # dashboards/: the Grafana dashboards' JSON, in both delivery modes
        sbom.write(t),                # sbom.cdx.json: every image (images.txt) and chart the cluster deploys
    ):
        files.update(written.files)
        entry.update(written.entry)
    entry["hub"] = fleet.hub_kinds(files, plan.name)  # the fleet ApplicationSets that generate this cluster's Applications
    layout = {p: [len(text.encode()), text.count(VERSION_PLACEHOLDER)] for p, text in files.items()}
    return ClusterBuild(plan.name, files, entry["digest"], version.minor_key(plan), entry, files_digest(files), layout)


DELIVERY = {STACK: delivery.write, OPERATOR: operator.write}      # spec.delivery.mode -> its writer


def settle(build: ClusterBuild, carried, sink) -> ClusterBuild:
    """Write a built cluster's files, with the chart version decided for it (`chart_version`: the one the lock
    gives it, as `assemble` would: a cluster's version depends only on its own lock entry), and its new chart
    archive into `sink` (a pipeline/write.Staging) now, and keep only what the fleet-level files need: a
    streaming compile holds the index of the fleet, never its outputs."""
    chart_version = build.chart_version
    mine = {p: (t.replace(VERSION_PLACEHOLDER, chart_version) if VERSION_PLACEHOLDER in t else t)
            for p, t in build.files.items()}
    for path, text in mine.items():
        sink.write(path, text)
    tgz_name = f"{build.name}-{chart_version}.tgz"
    made = None
    if tgz_name not in carried:
        if not (build.packaged and build.packaged[0] == chart_version):
            build = package(build, chart_version)
        sink.write(f"charts/{tgz_name}", build.packaged[1])
        made = build.packaged[2]
    return ClusterBuild(**{**build.__dict__, "files": {}, "packaged": None,
                           "settled": {"version": chart_version, "tree": tree_digest(mine), "made": made}})


@dataclass(frozen=True)
class Output:
    files: dict              # relative path -> text or bytes, to write
    reuse: tuple = ()        # relative paths to move unchanged from the previous output


def assemble(builds: list[ClusterBuild], previous, settings=None, keep: tuple = (), reads: dict | None = None) -> Output:
    """Versions, the packaged charts and the Helm repository index, index.json and the lock.
    `previous` (write.Previous or None) is the last output: its lock, index and charts carry forward.
    `keep`: names of previous clusters not compiled this time (a subset compile), kept as they are.
    `reads`: the catalog read sets the entries' provenance names by digest (pipeline/keys.READS); omitted:
    the previous output's."""

    files: dict = {}
    reuse: list[str] = []
    lock = {name: dict(entry) for name, entry in (previous.lock if previous else {}).get("clusters", {}).items()}
    index = []
    carried = dict(previous.charts) if previous else {}          # archive name -> Path of the old file
    new_archives: dict[str, bytes] = {}
    made: dict[str, dict] = {}                                   # index entries of the archives made now
    kept = [previous.index[n] for n in keep] if previous else []
    for e in kept:
        reuse.append(e["name"])
    for b in sorted(builds, key=lambda b: b.name):
        chart_version = b.chart_version
        if not chart_version:   # decided once, by pipeline/decide.py: a second computation here could disagree
            raise ValueError(f"{b.name}: no chart version decided for this build (pipeline/decide.py)")
        lock[b.name] = {"version": chart_version, "digest": b.digest, "minorKey": b.minor_key}
        tgz_name = f"{b.name}-{chart_version}.tgz"
        if b.settled is not None:                   # streamed into the new tree by settle()
            assert b.settled["version"] == chart_version
            tree = b.settled["tree"]
            if b.settled["made"]:
                new_archives[tgz_name] = b""            # written already; listed in the index from its entry
                made[tgz_name] = b.settled["made"]
        elif b.files is None:
            reuse.append(b.name)
            tree = previous.index[b.name]["treeDigest"]     # reusable() checked the bytes against it
        else:
            mine = {}
            for path, text in b.files.items():      # the chart version, wherever the build left its placeholder
                mine[path] = text.replace(VERSION_PLACEHOLDER, chart_version) if VERSION_PLACEHOLDER in text else text
            files.update(mine)
            tree = tree_digest(mine)
            if tgz_name not in carried:
                if not (b.packaged and b.packaged[0] == chart_version):
                    b = package(b, chart_version)
                files[f"charts/{tgz_name}"] = new_archives[tgz_name] = b.packaged[1]
                made[tgz_name] = b.packaged[2]
        index.append({**b.entry, "chartVersion": chart_version, "package": f"charts/{tgz_name}",
                      "outputDigest": output_digest(b, chart_version), "treeDigest": tree})
    index = sorted(index + kept, key=lambda e: e["name"])
    reuse += [f"charts/{name}" for name in carried]
    if new_archives or previous is None or not previous.charts_index_ok():
        archives = {**carried, **new_archives}
        blocks = getattr(previous, "charts_blocks", None)     # unchanged charts' blocks copied from its text
        text = charts.splice_index(archives, blocks, made, trusted=previous.charts_trusted) if blocks else None
        files["charts/index.yaml"] = text if text is not None else charts.index_yaml(charts.entries_from(
            archives, previous.charts_index() if previous else None, made,
            trusted=bool(previous and previous.charts_trusted)))
    else:                                           # no new version: the repository index is unchanged
        reuse.append("charts/index.yaml")
    if settings is not None:
        files.update(fleet.write(settings.gitops, index))
    # printed item by item, unchanged items copied from the previous texts (a fleet's index is tens of MB)
    table = reads if reads is not None else getattr(previous, "catalog_reads", None) or {}
    files["index.json"] = fleet.listing_json({"apiVersion": "gpuop/v1alpha1", "kind": "Index", "gpuop": __version__,
                                              fleet.READS: fleet.used_reads(index, table), "clusters": index}, "clusters",
                                             getattr(previous, "index_known", None))
    files[version.LOCK_FILE] = fleet.listing_json({"apiVersion": "gpuop/v1alpha1", "kind": "VersionLock",
                                                   "clusters": dict(sorted(lock.items()))}, "clusters",
                                                  getattr(previous, "lock_known", None))
    return Output(files, tuple(reuse))
