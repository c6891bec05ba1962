"""Writer: the fleet-level Argo CD objects — ApplicationSets that deliver every cluster from a hub, whatever it
delivers, and AppProjects with least privilege.

One ApplicationSet per kind of Application, each generating for every cluster that has one the same Application
as its per-cluster folder holds, on the destination its profile names (index.json `destination`, else the
Argo CD cluster registered under its gpuop name): `gpuop-fleet` (GPU stacks, below), `gpuop-fleet-nfd` (NFD's
chart, project `gpuop-nfd`), `gpuop-fleet-dra` (the DRA driver), `gpuop-fleet-operator` and
`gpuop-fleet-operator-olm` (NVIDIA's operator by Helm or OLM), `gpuop-fleet-addons` (operator mode's companion
chart of gpuop's own objects; those four in the settings' project, as per cluster). Parameters are scalars in string fields of a fixed template; the project is never a parameter.

ApplicationSet: a git files generator over `dist/*/params/cluster.json` (one small parameter file per
cluster, written here; outside argocd/ so that folder holds only Kubernetes objects), goTemplate with `missingkey=error` so a missing parameter fails the render
instead of producing an empty string. Each generated Application installs the cluster's chart into
the Argo CD cluster registered under the cluster's gpuop name (`destination.name`), with the same
sync options as the per-cluster Application.

Progressive rollout: a cluster whose profile carries the label `gpuop/rollout-wave` (e.g. `canary`, `1`,
`2`) is rolled in that wave. When the fleet has more than one wave, the ApplicationSet gets a `RollingSync`
strategy with one step per wave, in order (`canary` first, then the others in natural order, clusters
without the label last as `default`): Argo CD updates the next wave's Applications only when the previous
wave's are Healthy, so a bad driver or layout stops at the canaries. Progressive syncs must be enabled on
the ApplicationSet controller (`--enable-progressive-syncs`; docs/gitops.md).

AppProject `gpuop`: only this repository as source, only each cluster's own namespace as
destination, the namespaced kinds the stacks contain and their cluster-scoped objects *by name*
(index.json `clusterObjects`, computed from the compiled objects), so write access to the repository
cannot create any other ClusterRole, ClusterRoleBinding, SCC or Namespace. NFD's Applications have their
own per-cluster projects (outputs/argocd.py).
"""

from __future__ import annotations

import hashlib
import json
import re

from gpuop.kube.yamlio import dump, dump_json, dump_long_lists
from gpuop.outputs import addons
from gpuop.outputs import argocd
from gpuop.outputs import dashboards
from gpuop.outputs import gitops as gitops_objects
from gpuop.outputs import health
from gpuop.outputs import operator
from gpuop.outputs import rollout
from gpuop.outputs import sbom

PROJECT = gitops_objects.PROJECT
PARAMS = "params/cluster.json"      # per cluster, relative to dist/<cluster>/: the generator's parameters
WAVE_LABEL = gitops_objects.ROLLOUT_WAVE   # profile metadata label: the cluster's rollout wave
DEFAULT_WAVE = gitops_objects.DEFAULT_WAVE # clusters without the label: the last wave
NFD_PROJECT = "gpuop-nfd"           # the hub's NFD Applications: NFD's charts, namespaces and kinds only


def hub_target(entry: dict) -> dict:
    """A cluster's destination on the hub: the profile's (index.json `destination`), else the Argo CD cluster
    registered under the cluster's gpuop name."""
    return entry.get("destination") or {"name": entry["name"]}


def cluster_params(entry: dict, chart_path: str) -> str:
    """dist/<cluster>/params/cluster.json: the ApplicationSet's parameters for one cluster."""
    target = hub_target(entry)
    return dump_json({"name": entry["name"], "namespace": entry["namespace"], "releaseName": entry["releaseName"],
                      "chartPath": chart_path, "kubeVersion": entry["kubeVersion"], "wave": wave_of(entry),
                      "destinationName": target.get("name", ""), "destinationServer": target.get("server", "")})


def hub_kinds(files: dict, cluster: str) -> list[str]:
    """The fleet ApplicationSets that generate Applications of this cluster: its params/<kind>.json files."""
    head = f"{cluster}/params/"
    return sorted(p[len(head):-len(".json")] for p in files if p.startswith(head) and p.endswith(".json"))


def wave_of(entry: dict) -> str:
    return (entry.get("labels") or {}).get(WAVE_LABEL) or DEFAULT_WAVE


def _wave_key(wave: str) -> tuple:
    """canary first, then numbers in numeric order, then other names, the default wave last."""
    if wave == "canary":
        return (0, 0, "")
    if wave == DEFAULT_WAVE:
        return (3, 0, "")
    return (1, int(wave), "") if wave.isdigit() else (2, 0, wave)


def rolling_sync(entries) -> dict | None:
    """The ApplicationSet's RollingSync strategy: one step per wave; None with a single wave."""
    waves = sorted({wave_of(e) for e in entries}, key=_wave_key)
    if len(waves) < 2:
        return None
    return {"type": "RollingSync", "rollingSync": {"steps": [
        {"matchExpressions": [{"key": WAVE_LABEL, "operator": "In", "values": [w]}]} for w in waves]}}


def go_literal(value: str) -> str:
    """`value` as literal text inside an ApplicationSet with goTemplate: every brace written as a template
    action printing it (`{{"{"}}`; single braces too, so none can join a neighbour into a delimiter), so
    a settings string can never become a template action (the settings grammar already refuses braces;
    this keeps the template safe whatever reaches it)."""
    return re.sub(r"[{}]", lambda m: '{{"' + m.group(0) + '"}}', value)


def _application_set(gitops, name: str, params: str, app_name: str, spec: dict, entries, patch: str | None = None) -> dict:
    """A fleet ApplicationSet: a git files generator over dist/*/<params>, goTemplate with missingkey=error (a
    missing parameter fails the render instead of producing an empty string), `spec` as each Application's, rolled
    in the waves of `entries`."""
    appset = {
        "apiVersion": gitops_objects.APPLICATION_API, "kind": "ApplicationSet",
        "metadata": {"name": name, "namespace": gitops.argocd.namespace, "labels": dict(gitops_objects.MANAGED_BY)},
        "spec": {
            "goTemplate": True,
            "goTemplateOptions": ["missingkey=error"],
            "generators": [{"git": {"repoURL": gitops.repoURL, "revision": gitops.revision,
                                    "files": [{"path": f"{gitops.path.rstrip('/')}/*/{params}"}]}}],
            "template": {
                "metadata": gitops_objects.application_metadata(app_name, {
                    **gitops_objects.MANAGED_BY, "gpuop/cluster": "{{.name}}", WAVE_LABEL: "{{.wave}}"}),
                "spec": spec,
            },
        },
    }
    if patch is not None:
        appset["spec"]["templatePatch"] = patch
    strategy = rolling_sync(entries)
    if strategy is not None:
        appset["spec"]["strategy"] = strategy
    return appset


def application_set(gitops, entries=()) -> dict:
    """The GPU stacks' ApplicationSet `gpuop-fleet` over dist/*/params/cluster.json."""
    repo, revision = go_literal(gitops.repoURL), go_literal(gitops.revision)    # the template is rendered, the generator not
    return _application_set(gitops, "gpuop-fleet", PARAMS, "gpuop-{{.name}}", gitops_objects.stack_spec(
        HUB_DESTINATION, repo, revision, "{{.chartPath}}", "{{.releaseName}}", "{{.kubeVersion}}",
        rollout.argocd_retry()), entries)


# The destination of every Application a fleet ApplicationSet generates: the profile's Argo CD cluster name or
# API server (one of them empty: Argo CD reads an empty field as unset), into the Application's namespace.
HUB_DESTINATION = {"name": "{{.destinationName}}", "server": "{{.destinationServer}}", "namespace": "{{.namespace}}"}


def _hub_chart_source(skip_crds: bool = False) -> dict:
    """An upstream chart's source from a hub's parameters (gitops.hub_params): the values as one JSON text."""
    helm = {"releaseName": "{{.releaseName}}", "kubeVersion": "{{.kubeVersion}}",
            **({"skipCrds": False} if skip_crds else {}), "values": "{{.values}}"}
    return {"repoURL": "{{.repoURL}}", "chart": "{{.chart}}", "targetRevision": "{{.revision}}", "helm": helm}


def _hub_sets(gitops) -> dict:
    """Per kind of Application besides the GPU stack: (params file kind, Application name suffix, AppProject,
    spec template without project and destination, templatePatch or None). The project is the ApplicationSet's,
    never a parameter's: write access to the repository must not choose a project."""
    chart_sync = gitops_objects.sync_policy(["ServerSideApply=true", "CreateNamespace=true"], gitops_objects.CHART_RETRY)
    crd_ignores = operator.ignore_differences(True)
    return {
        "nfd": ("-nfd", NFD_PROJECT, {"source": _hub_chart_source(), "syncPolicy": chart_sync}, None),
        "dra": ("-dra", gitops.argocd.project, {"source": _hub_chart_source(), "syncPolicy": chart_sync}, None),
        # NVIDIADriver CRD mode ignores one field more; a fixed patch chosen by a fixed comparison, so no
        # parameter's text ever becomes template syntax
        "operator": ("", gitops.argocd.project,
                     {"source": _hub_chart_source(skip_crds=True), "syncPolicy": operator.helm_sync(),
                      "ignoreDifferences": operator.ignore_differences(False)},
                     '{{- if eq .driverCRD "true" }}\n' + dump({"spec": {"ignoreDifferences": crd_ignores}})
                     + "{{- else }}\nspec: {}\n{{- end }}\n"),
        "operator-olm": ("", gitops.argocd.project,
                         {"source": {"repoURL": "{{.repoURL}}", "targetRevision": "{{.revision}}", "path": "{{.sourcePath}}"},
                          "syncPolicy": operator.olm_sync()}, None),
        # operator mode's companion chart of gpuop's own objects (outputs/addons.py), from this repository
        "addons": (addons.APP_SUFFIX, gitops.argocd.project,
                   {"source": {"repoURL": "{{.repoURL}}", "targetRevision": "{{.revision}}", "path": "{{.sourcePath}}",
                               "helm": {"releaseName": "{{.releaseName}}", "kubeVersion": "{{.kubeVersion}}",
                                        "skipTests": True}},
                    "syncPolicy": gitops_objects.sync_policy(list(addons.SYNC_OPTIONS), gitops_objects.CHART_RETRY)},
                   None),
    }


def hub_application_set(gitops, kind: str, entries) -> dict:
    """The fleet ApplicationSet `gpuop-fleet-<kind>` over dist/*/params/<kind>.json, each generated Application the
    per-cluster one (outputs/argocd.py, dra.py, operator.py) in the set's project, on the cluster's hub
    destination, rolled in the fleet's waves."""
    suffix, project, spec, patch = _hub_sets(gitops)[kind]
    return _application_set(gitops, f"gpuop-fleet-{kind}", f"params/{kind}.json", "gpuop-{{.name}}" + suffix,
                            {"project": project, "destination": dict(HUB_DESTINATION), **spec}, entries, patch)


def nfd_project(gitops, entries: list[dict]) -> dict:
    """The AppProject `gpuop-nfd` of the hub's NFD Applications: NFD's chart repositories, each cluster's NFD
    namespace on its hub destination, NFD's kinds and its cluster-scoped objects by name (outputs/argocd.py)."""
    nfd = [e for e in entries if e.get("nfd")]
    spec = argocd.nfd_project_spec(
        "Node Feature Discovery of the GPU clusters a hub delivers: its charts, namespaces and kinds only.",
        [e["nfd"]["repoURL"] for e in nfd],
        sorted(({**hub_target(e), "namespace": e["nfd"]["namespace"]} for e in nfd),
               key=lambda d: (d.get("name", ""), d.get("server", ""), d["namespace"])),
        [e["nfd"]["namespace"] for e in nfd], [e["nfd"]["releaseName"] for e in nfd])
    return {"apiVersion": "argoproj.io/v1alpha1", "kind": "AppProject",
            "metadata": {"name": NFD_PROJECT, "namespace": gitops.argocd.namespace,
                         "labels": dict(gitops_objects.MANAGED_BY)}, "spec": spec}


def app_project(gitops, entries: list[dict]) -> dict:
    cluster_objects, ns_kinds, destinations = set(), set(), set()
    for e in [e for e in entries if e.get("delivery") != "operator"]:   # operator mode: NVIDIA's chart/OLM, not this project
        for group, kind, namespaced in e["kinds"]:
            if namespaced:
                ns_kinds.add((group, kind))
            elif "clusterObjects" not in e:      # an index entry of an older gpuop: by kind only
                cluster_objects.add((group, kind, ""))
        # cluster-scoped objects by name: repo write access must not mean "any ClusterRole(Binding),
        # SCC or Namespace" (that is cluster-admin), only the ones the compiled stacks contain
        cluster_objects |= {tuple(o) for o in e.get("clusterObjects", ())}
        target = hub_target(e)          # the hub's destination; per-cluster Applications: the same, or the settings' server
        destinations.add(("name", target["name"], e["namespace"]) if "name" in target else
                         ("server", target["server"], e["namespace"]))
        if "destination" not in e:
            destinations.add(("server", gitops.argocd.server, e["namespace"]))
    a = gitops.argocd
    return {
        "apiVersion": "argoproj.io/v1alpha1", "kind": "AppProject",
        "metadata": {"name": PROJECT, "namespace": a.namespace, "labels": {"app.kubernetes.io/managed-by": "gpuop"}},
        "spec": {
            "description": "GPU stacks compiled by gpuop: only their repository, namespaces and kinds.",
            "sourceRepos": [gitops.repoURL],
            "destinations": [{k: v, "namespace": ns} for k, v, ns in sorted(destinations)],
            "clusterResourceWhitelist": [{"group": g, "kind": k, **({"name": n} if n else {})}
                                         for g, k, n in sorted(cluster_objects)],
            "namespaceResourceWhitelist": [{"group": g, "kind": k} for g, k in sorted(ns_kinds)],
        },
    }


def write(gitops, entries: list[dict]) -> dict[str, str]:
    stacks = [e for e in entries if e.get("delivery") != "operator"]
    files = {"fleet/argocd/applicationset.yaml": dump(application_set(gitops, stacks)),
             "fleet/argocd/appproject.yaml": dump_long_lists(app_project(gitops, entries)),
             "fleet/argocd/argocd-cm-health.yaml": dump(health.argocd_cm(gitops, entries))}
    for kind in _hub_sets(gitops):      # one ApplicationSet per kind of Application some cluster has
        mine = [e for e in entries if kind in e.get("hub", ())]
        if mine:
            files[f"fleet/argocd/applicationset-{kind}.yaml"] = dump(hub_application_set(gitops, kind, mine))
    if any(e.get("nfd") for e in entries):
        files["fleet/argocd/nfd-appproject.yaml"] = dump_long_lists(nfd_project(gitops, entries))
    files.update(dashboards.fleet(entries))
    files[sbom.FLEET] = sbom.fleet_bom(entries)     # every cluster, linked to its own bill of materials
    return files


# ---- index.json's table of catalog read sets ----------------------------------------------------------
# Each cluster's provenance names the catalog paths its compile read (gpuop.catalog.reads) by their digest;
# index.json holds each distinct set once (a fleet's clusters share a few dozen sets of a few KB: printed per
# cluster they were a third of a 10,000-cluster index.json).

READS = "catalogReads"
_refs: dict = {}


def reads_ref(paths: str) -> str:
    ref = _refs.get(paths)
    if ref is None:
        if len(_refs) > 4096:
            _refs.clear()
        ref = _refs[paths] = "sha256:" + hashlib.sha256(paths.encode()).hexdigest()
    return ref


def reads_table(doc) -> dict:
    """index.json's `catalogReads`: digest -> the catalog paths read. Only entries whose key is the digest of
    their value count (the table vouches for itself): a record naming anything else reads as unknown, so its
    cluster is compiled again."""
    table = doc.get(READS) if isinstance(doc, dict) else None
    if not isinstance(table, dict):
        return {}
    return {ref: paths for ref, paths in table.items() if isinstance(paths, str) and reads_ref(paths) == ref}


def used_reads(entries, table: dict) -> dict:
    """The part of `table` the index entries' provenance names, sorted: what index.json prints."""
    used = set()
    for e in entries:
        prov = e.get("provenance")
        section = prov.get("catalog") if isinstance(prov, dict) else None
        ref = section.get("reads") if isinstance(section, dict) else None
        if isinstance(ref, str) and ref in table:
            used.add(ref)
    return {ref: table[ref] for ref in sorted(used)}


# ---- index.json and the version lock at the cost of the change -------------------------------------------
# Both are one pretty-printed JSON document listing every cluster (tens of MB at 10,000 clusters), and
# json's indenting encoder runs in Python: printing them whole costs seconds when one cluster changed. So
# each cluster's item is printed alone (the same bytes json.dumps gives it inside the document, shifted two
# levels) and an item equal to the previous output's is copied from that file's text, which the caller
# vouches for (as the last run wrote it, or the base revision's in git): the bytes stay those of a cold
# compile.

_SPLICE = "\0gpuop-splice\0"
_SPLICED = '    "\\u0000gpuop-splice\\u0000"'


def _item_text(item) -> str:
    return json.dumps(item, indent=2, sort_keys=True, ensure_ascii=False).replace("\n", "\n    ")


def listing_json(doc: dict, key: str, known: dict | None = None) -> bytes:
    """`json.dumps(doc, indent=2, sort_keys=True, ensure_ascii=False) + "\\n"` in UTF-8, byte for byte, where
    doc[key] is a list of items with a `name` or a dict by name; `known` (listing_texts): name -> (item, bytes) of
    the previous document, used for every item equal to it."""
    items = doc[key]
    if not items:
        return dump_json(doc).encode()
    known = known or {}
    parts = []
    if isinstance(items, list):
        head, marker = dump_json({**doc, key: [_SPLICE]}), _SPLICED
        for item in items:
            k = known.get(item.get("name")) if isinstance(item, dict) else None
            # `is` first: an item carried from the previous output is the very object its text was read with
            parts.append(k[1] if k is not None and (k[0] is item or k[0] == item) else
                         ("    " + _item_text(item)).encode())
    else:
        head, marker = dump_json({**doc, key: {_SPLICE: 0}}), _SPLICED + ": 0"
        for name in sorted(items):
            k = known.get(name)
            parts.append(k[1] if k is not None and (k[0] is items[name] or k[0] == items[name]) else
                         f"    {json.dumps(name, ensure_ascii=False)}: {_item_text(items[name])}".encode())
    before, found, after = head.partition(marker)
    assert found, "the splice marker is printed as it is"
    # bytes throughout, one join: tens of MB at 10,000 clusters, where each copy more (a text, its slices, its
    # encoding) was thousands of fresh pages
    joined = [before.encode()]
    for part in parts:
        joined += (part, b",\n")
    joined[-1] = after.encode()
    return b"".join(joined)


def listing_texts(text: bytes | str | None, items, key: str) -> dict:
    """name -> (item, its bytes) of a document listing_json wrote (its UTF-8 bytes, or its text), `items` being its
    parsed doc[key]; {} when the text is not laid out as listing_json writes it (then every item is printed again).
    The bytes are views of `text`'s bytes, not copies."""
    if not text or not items or not isinstance(items, (list, dict)):
        return {}
    raw = text.encode() if isinstance(text, str) else bytes(text)
    is_list = isinstance(items, list)
    opening = f'\n  "{key}": '.encode() + (b"[\n" if is_list else b"{\n")
    close = b"\n  ]" if is_list else b"\n  }"
    # the list closes at the last line indented by two that closes a list (or object): only the fleet-wide scalars
    # follow it; were a later one there, the true close would lie in the last piece (checked below). Line breaks
    # and the separators are ASCII, and no byte of a multi-byte UTF-8 character is: byte offsets are sound
    start, end = raw.find(opening), raw.rfind(close)
    if start < 0 or end < start:
        return {}
    # each item is a view of the document (tens of MB at 10,000 clusters: no copy, no split pieces joined again)
    sep, bounds, pos = b"\n    },\n", [], start + len(opening)
    while (at := raw.find(sep, pos, end)) >= 0:
        bounds.append((pos, at + 6))            # up to and with the item's own "\n    }"
        pos = at + len(sep)
    bounds.append((pos, end))
    if len(bounds) != len(items) or end <= pos or raw.find(close, pos, end) >= 0 or raw[end - 1:end] != b"}":
        return {}
    names = [i.get("name") if isinstance(i, dict) else None for i in items] if is_list else list(items)
    values = items if is_list else items.values()
    view = memoryview(raw)
    out = {}
    for (a, b), name, item in zip(bounds, names, values):
        lead = b"    {" if is_list else f"    {json.dumps(name, ensure_ascii=False)}: {{".encode()
        if not isinstance(name, str) or not raw.startswith(lead, a, b):
            return {}
        out[name] = (item, view[a:b])
    return out
