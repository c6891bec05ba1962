"""Validate a compiled output folder the way the API servers would: every core object against the
strict Kubernetes schemas of its cluster's version, every custom resource against the CEL rules of its
CRD (Flux's; in operator mode NVIDIA's NVIDIADriver, in the chart values' extraObjects or the OLM
folder), and each cluster's rendered manifests together against the semantic rules (verify/semantic/:
what the API server and kubelet refuse beyond the schema, and references between the objects).
Used by `gpuop validate DIST` (and so after hand edits of dist/).

CRD kinds without a schema here (NodeFeatureRule, ServiceMonitor, Argo CD, Flux and NVIDIA kinds) are
checked by their CEL rules only; the tests check them against the upstream CRD schemas as well.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from gpuop.errors import Issue, Rule, field_path, registry, rule
from gpuop.kube.folders import ENTRY_FOLDERS
from gpuop.kube.yamlio import load_all
from gpuop.verify import cel
from gpuop.verify.kubeschema import KubeValidator, SchemaNotFound
from gpuop.verify import semantic
from gpuop.verify.user_created import manifest_issues


@rule("kube-schema", stage="verify", source="kubernetes-validate: the strict OpenAPI schemas of the cluster's "
      "Kubernetes version (verify/kubeschema.py)")
def check_kube_schema(obj: dict, kube: KubeValidator) -> list[str]:
    """A built-in kind's object that its Kubernetes version's schema refuses (unknown fields, types, required)."""
    try:
        return kube.errors(obj)
    except SchemaNotFound:
        return []                        # CRD kinds: their CEL rules (and, in the tests, their CRD schemas)


@rule("crd-cel", stage="verify", source="the x-kubernetes-validations (CEL) rules of the upstream CRDs "
      "(verify/cel.py)")
def check_crd_cel(obj: dict) -> list[str]:
    """A custom object that a CEL rule of its CRD refuses."""
    return cel.errors(obj)


KUEUE_CRDS = Path(__file__).parent / "crds" / "kueue"     # package data (crds/kueue/SOURCES.md)
_KUEUE: list = []


def _kueue():
    if not _KUEUE:
        from gpuop.verify.crdschema import CrdValidator
        _KUEUE.append(CrdValidator.from_files(sorted(KUEUE_CRDS.glob("*.yaml"))))
    return _KUEUE[0]


@rule("kueue-schema", stage="verify", source="Kueue's CRDs (kubernetes-sigs/kueue v0.19.2 config/components/crd/"
      "bases; verify/crds/kueue/SOURCES.md), openAPIV3Schema made strict (verify/crdschema.py)")
def check_kueue_schema(obj: dict) -> list[str]:
    """A ResourceFlavor, ClusterQueue or LocalQueue that Kueue's CRD schema refuses."""
    if not str(obj.get("apiVersion", "")).startswith("kueue.x-k8s.io/"):
        return []
    try:
        return list(_kueue().errors(obj))
    except SchemaNotFound:
        return [f"{obj.get('apiVersion')} {obj.get('kind')} is not served by Kueue's CRDs (v0.19.2)"]


@rule("operator-cr-schema", stage="verify", source="NVIDIA's gpu-operator chart (templates/clusterpolicy.yaml, "
      "nvidiadriver.yaml; its crds/ openAPIV3Schema) rendered with Helm's engine, defaulted and validated as the "
      "API server does (k8s.io/apiextensions-apiserver structural defaulting: a null is defaulted only where the "
      "field has a default, refused where it is not nullable)")
def check_operator_crs(values: dict, chart: Path) -> list[tuple[dict, tuple, str]]:
    """A ClusterPolicy or NVIDIADriver that NVIDIA's chart renders from the operator values and that the API server
    refuses: a null in a field that is not nullable (a value the templates copy as it is, an empty value a
    template still writes the key for), or anything else the CRD's schema refuses."""
    from gpuop.verify import nvidia_chart

    rendered = nvidia_chart.render(values, chart)
    crds = _chart_crds(str(chart))
    return [(o, path, message) for o in rendered.objects if o.get("kind") in nvidia_chart.KINDS
            for path, message in nvidia_chart.cr_problems(o, chart, crds)]


def _chart_crds(chart: str):
    from gpuop.verify.crdschema import CrdValidator

    if chart not in _CRDS:
        _CRDS[chart] = CrdValidator.from_files([Path(chart) / "crds"])
    return _CRDS[chart]


_CRDS: dict = {}


OBJECT_CHECKS = (check_kube_schema, check_crd_cel, check_kueue_schema)
# Every rule `gpuop validate DIST` runs: the schema and CEL checks here, the operator CRs and the semantic rules.
REGISTRY: dict[str, Rule] = {**registry((*OBJECT_CHECKS, check_operator_crs)), **semantic.REGISTRY}


def is_output(path: Path) -> bool:
    return path.is_dir() and (path / "index.json").is_file()


# top-level entries of an output that are not a cluster's: the fleet files, the Helm repository, gpuop's
# ownership marker (pipeline/write.MARKER) and `gpuop report`'s page
FLEET_ENTRIES = frozenset({"index.json", "versions.lock.json", "charts", "fleet", ".gpuop-output", "report"})
UNLISTED = ("is not listed in index.json: gpuop did not write it (Argo CD's ApplicationSet deploys every folder of "
            "the output that holds params/cluster.json); remove it, or run gpuop synth and commit the output")



def links_in(path: Path) -> Path | None:
    """The first part of `path` (as given, from the working folder) that is a symlink, None when none is. Every
    part: `dist` committed as a link, or a link to a folder above it, points git's view and the bytes read
    outside the repository, where Argo CD and Flux never look."""
    parts = Path(path).parts
    start = 1 if Path(path).is_absolute() else 0       # an absolute path: its parts below the root
    for i in range(max(start, 1), len(parts) + 1):
        here = Path(*parts[:i])
        if os.path.islink(here):
            return here
    return None


def link_issue(link: Path | str) -> Issue:
    """A symlink where gpuop reads inputs or proves output, located at the link."""
    try:
        target = f" (to {os.readlink(link)!r})"
    except OSError:
        target = ""
    return Issue(str(link), 0, 0, "", f"is a symlink{target}; gpuop reads and proves regular files and folders only "
                 "(a link may leave the repository, and Argo CD and Flux would follow it): commit the file or folder "
                 "itself")


def walk(output: Path, rel: str) -> list[tuple[str, bool]]:
    """(path relative to the output, is a symlink) of every file and link under `rel` ('' : the whole output),
    without following a link; one folder read each, no call per entry (the kind comes with the listing: d_type)."""
    out, stack = [], [rel]
    while stack:
        here = stack.pop()
        with os.scandir(output / here if here else output) as it:
            for e in it:
                name = f"{here}/{e.name}" if here else e.name
                if e.is_symlink():
                    out.append((name, True))
                elif e.is_dir(follow_symlinks=False):
                    stack.append(name)
                else:
                    out.append((name, False))
    return sorted(out)


def cluster_tops(c: dict) -> set[str]:
    """The top-level folders index.json names for one cluster (its folder; operator mode's too)."""
    paths = [c.get(k) for k in ENTRY_FOLDERS]
    paths.append((c.get("operator") or {}).get("path"))
    return {p.split("/", 1)[0] for p in paths if isinstance(p, str) and p}


def tree_issues(dist: Path, index: dict) -> list[Issue]:
    """The output tree itself: not reached through a symlink, every top-level entry one index.json lists (a
    cluster folder it does not list would still be deployed: the ApplicationSet's files generator reads every
    `<out>/*/params/cluster.json`), no symlink anywhere, nothing in charts/ but the repository index and the
    archives index.json names (each cluster folder's files: digest_issues, or the compile). The whole tree is
    listed: `validate DIST` reads every file anyway. The review gate proves the same from the paths git saw change,
    at the cost of the change (pipeline/gate._unwritten)."""
    link = links_in(dist)
    if link is not None:
        return [link_issue(link)]
    clusters = [c for c in index.get("clusters") or () if isinstance(c, dict)]
    packages = {c["package"] for c in clusters if isinstance(c.get("package"), str)}
    issues = []
    with os.scandir(dist) as it:
        tops = sorted((e.name, e.is_symlink(), e.is_dir(follow_symlinks=False)) for e in it)
    # a cluster's folders are named after it (operator mode's too): their paths are read only when a name is not
    listed = FLEET_ENTRIES | {c.get("name") for c in clusters}
    if any(n not in listed for n, _, _ in tops):
        listed |= {t for c in clusters for t in cluster_tops(c)}
    for name, is_link, _ in tops:
        if is_link:
            issues.append(link_issue(dist / name))
        elif name not in listed:
            issues.append(Issue(str(dist / name), 0, 0, "", UNLISTED))
    if (dist / "charts").is_dir() and not (dist / "charts").is_symlink():
        packages |= _served(dist)
        with os.scandir(dist / "charts") as it:
            for e in sorted(it, key=lambda e: e.name):
                rel = f"charts/{e.name}"
                if not e.is_symlink() and e.name != "index.yaml" and rel not in packages:    # links: below
                    issues.append(Issue(str(dist / rel), 0, 0, "", "not written by gpuop: no chart archive "
                                        "index.json or charts/index.yaml names"))
    for top in [n for n, _, is_dir in tops if is_dir]:
        issues += [link_issue(dist / rel) for rel, is_link in walk(dist, top) if is_link]
    return issues


def digest_issues(dist: Path, index: dict, folder_digest) -> list[Issue]:
    """Each cluster folder holding exactly the files whose digest index.json records (`treeDigest`, computed by
    `folder_digest(dist, name)`: outputs/cluster.disk_tree_digest, handed in since this stage sees no builder): for
    an output validated without the profiles that would compile it (the compile compares file by file)."""
    issues = []
    for c in index.get("clusters") or ():
        name = c.get("name") if isinstance(c, dict) else None
        if isinstance(name, str) and (dist / name).is_dir() and "treeDigest" in c \
                and folder_digest(dist, name) != c["treeDigest"]:
            issues.append(Issue(str(dist / name), 0, 0, "", "does not hold the files index.json records for it "
                                "(treeDigest: a file added, removed or edited by hand); run gpuop synth and commit "
                                "the output"))
    return issues


def _served(dist: Path) -> set[str]:
    """Old versions of the charts: the archives charts/index.yaml lists (a Helm repository keeps every version;
    an unreadable index is output_issues' to report)."""
    import yaml

    try:
        doc = yaml.load((dist / "charts" / "index.yaml").read_bytes(), Loader=yaml.CSafeLoader)
    except (OSError, yaml.YAMLError):
        return set()
    entries = doc.get("entries") if isinstance(doc, dict) else None
    return {f"charts/{u}" for versions in (entries.values() if isinstance(entries, dict) else ())
            for e in versions or () if isinstance(e, dict)
            for u in (e.get("urls") or ())[:1] if isinstance(u, str) and "/" not in u}
def _object_issues(obj, shown: str, kube: KubeValidator) -> list[Issue]:
    if not isinstance(obj, dict) or "kind" not in obj:
        return [Issue(shown, 0, 0, "", "not a Kubernetes object")]
    return [Issue(shown, 0, 0, "", f"{obj['kind']}/{obj.get('metadata', {}).get('name')}: {m}", rule=check.rule.id)
            for check, msgs in ((check_kube_schema, check_kube_schema(obj, kube)), (check_crd_cel, check_crd_cel(obj)),
                                (check_kueue_schema, check_kueue_schema(obj)))
            for m in msgs]


def _addons_files(dist: Path, c: dict) -> list[tuple[Path, str]]:
    """Operator mode's companion objects (index.json `addons`, outputs/addons.py): its rendered manifests, checked
    as the stack's are (what the chart beside NVIDIA's renders with its defaults)."""
    addons = c.get("addons")
    folder = addons.get("manifests") if isinstance(addons, dict) else None
    if not isinstance(folder, str) or not (dist / folder).is_dir():
        return []
    return [(f, "objects") for f in sorted((dist / folder).glob("*.yaml")) if f.name != "kustomization.yaml"]


def _operator_files(dist: Path, c: dict) -> list[tuple[Path, str]]:
    """Operator mode's objects: (file, "objects") for the OLM folder's files, (values.yaml, "extraObjects")
    for the objects the Helm values hand NVIDIA's chart."""
    op = c.get("operator")
    if not op:
        return []
    base = dist / op["path"]
    if op.get("install") == "olm":
        return [(f, "olm") for f in sorted((base / "olm").rglob("*.yaml")) if f.name != "kustomization.yaml"]
    return [(base / "values.yaml", "extraObjects")] if (base / "values.yaml").is_file() else []


def _operator_cr_issues(values_file: Path, values: dict) -> list[Issue]:
    """check_operator_crs on a cluster's operator values, each problem at the value that renders to it: the
    NVIDIADriver of extraObjects[i] at that entry, the ClusterPolicy's spec.x at the value x (the chart's values
    and the ClusterPolicy spec share their paths), the file itself when no value is found."""
    from gpuop.verify import nvidia_chart

    chart = nvidia_chart.default_chart()
    if chart is None or not (Path(chart) / "crds").is_dir():
        return []                 # the chart is not here ($GPUOP_NVIDIA_CHART): nothing to render it with
    shown = str(values_file)
    try:
        found = check_operator_crs(values, Path(chart))
    except nvidia_chart.RenderError as exc:
        return [Issue(shown, 0, 0, "", f"NVIDIA's chart does not render with these values: {exc}",
                      rule=check_operator_crs.rule.id)]
    extra = values.get("extraObjects") if isinstance(values.get("extraObjects"), list) else []
    out = []
    for obj, path, message in found:
        name = (obj.get("metadata") or {}).get("name")
        index = next((i for i, e in enumerate(extra) if isinstance(e, dict) and e.get("kind") == obj["kind"]
                      and (e.get("metadata") or {}).get("name") == name), None)
        at = ("extraObjects", index, *path) if index is not None else tuple(path[1:]) if path[:1] == ("spec",) else ()
        line, col = _position(values_file.read_text(), at)
        out.append(Issue(shown, line, col, field_path(at), f"{obj['kind']}/{name} as NVIDIA's chart renders it: "
                         f"{message}", rule=check_operator_crs.rule.id))
    return out


def _olm_cr_issues(file: Path, docs: list) -> list[Issue]:
    """The ClusterPolicy / NVIDIADriver gpuop writes for OLM, defaulted and checked as check_operator_crs does
    the chart's, each problem at its field in the file."""
    from gpuop.verify import nvidia_chart

    chart = nvidia_chart.default_chart()
    if chart is None or not (Path(chart) / "crds").is_dir():
        return []
    out = []
    for i, obj in enumerate(docs):
        schema = nvidia_chart.schema_of(Path(chart), obj.get("kind")) if isinstance(obj, dict) else None
        if schema is None:
            continue
        for path, message in nvidia_chart.cr_problems(nvidia_chart.crd_defaults(obj, schema), Path(chart),
                                                      _chart_crds(str(chart))):
            line, col = _position(file.read_text(), tuple(path), i)
            out.append(Issue(str(file), line, col, "", f"{obj['kind']}/{(obj.get('metadata') or {}).get('name')}: "
                             f"{message}", rule=check_operator_crs.rule.id))
    return out


def _position(text: str, path: tuple, doc: int = 0) -> tuple[int, int]:
    """1-based line and column of the deepest node of `path` the `doc`th YAML document holds; (0, 0): none."""
    import yaml

    try:
        nodes = [n for n in yaml.compose_all(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
                 if n is not None]
    except yaml.YAMLError:
        return 0, 0
    node = nodes[doc] if doc < len(nodes) else None
    where = (0, 0)
    for part in path:
        if isinstance(node, yaml.MappingNode):
            node = next((v for k, v in node.value if getattr(k, "value", None) == str(part)), None)
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and part < len(node.value):
            node = node.value[part]
        else:
            node = None
        if node is None:
            break
        where = (node.start_mark.line + 1, node.start_mark.column + 1)
    return where


def validate_output(dist: Path, only: frozenset | None = None) -> list[Issue]:
    """`only`: the names of the clusters to check (the review gate's selection); None: every cluster."""
    issues: list[Issue] = []
    index = json.loads((dist / "index.json").read_text())
    validators: dict[str, KubeValidator] = {}
    for c in index["clusters"]:
        if only is not None and c["name"] not in only:
            continue
        kube = validators.setdefault(c["kubeVersion"], KubeValidator(c["kubeVersion"]))
        files = [(f, "objects") for key in ("manifests", "argocd", "flux")
                 for f in sorted((dist / c[key]).glob("*.yaml")) if f.name != "kustomization.yaml"]
        files += _addons_files(dist, c)
        for f, what in files + _operator_files(dist, c):
            shown = str(f)
            try:
                docs = load_all(f.read_text())
            except Exception as exc:  # noqa: BLE001 - any parse failure is the user's edit
                issues.append(Issue(shown, 0, 0, "", f"not valid YAML: {' '.join(str(exc).split())}"))
                continue
            if what == "extraObjects":
                values = docs[0] if docs and isinstance(docs[0], dict) else {}
                issues += _operator_cr_issues(f, values)
                docs = values.get("extraObjects") or []
            elif what == "olm":
                issues += _olm_cr_issues(f, docs)
            for obj in docs:
                issues += _object_issues(obj, shown, kube)
        issues += manifest_issues(dist / c["manifests"], c, str(dist / "index.json"))
    return issues
