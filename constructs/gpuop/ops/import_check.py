"""`gpuop import --check`: does the imported profile (or `--profile FILE`) keep the cluster as it is?

The profile is compiled in operator mode (placeholders as written), and what NVIDIA's chart and operator would
then be given -- with Helm: NVIDIA's whole chart (verify/nvidia_chart.py, Helm's own engine) rendered with gpuop's
values, as the live side is rendered with the live values; with OLM: the ClusterPolicy, NVIDIADriver CRs,
ConfigMaps and NodeFeatureRule gpuop writes -- is compared with what was imported, after the CRDs' structural
defaults on both sides (the API server applies them on create):
- the ClusterPolicy spec, field by field (every leaf of either side);
- the NVIDIADriver CRs, matched by nodeSelector (gpuop names its CRs `default` and `driver-<version>`), spec
  field by field;
- the ConfigMaps the ClusterPolicy references (device-plugin, mig-parted, DCGM metrics), by content: each
  config file parsed (YAML, or the metrics CSV's rows), since gpuop writes them in its own order and form.

- every other object, keyed by kind, namespace and name, field by field (`whole_objects`: the NFD subchart's
  objects and images, NodeFeatureRules, the operator Deployment and its env, RBAC, other ConfigMaps; lists of
  named entries by name); a live ClusterPolicy export on what it holds (POLICY_KINDS);
- with a renderer of NVIDIA's operator code, the operands it creates from each side (ops/import_operands.py).
A chart template that fails is a located exit 2 with Helm's message (the template's file, line and column).

Each difference is one located line (the input's file:line:col where the imported value sits). A difference at
a value the profile cannot express (the import lists those in `# gpuop import:` comments) is marked so, and
counts unless `--accept-unexpressed`. Exit 0 only when nothing counts, else 3, changes found (as `gpuop diff --exit-code`).
"""

from __future__ import annotations

import copy
import tempfile
from dataclasses import dataclass
from pathlib import Path

import yaml

from gpuop.errors import Issue, UserError, field_path
from gpuop.ops.import_io import one_line

MISSING = object()
# the ClusterPolicy / values paths the chart renames (templates/clusterpolicy.yaml)
POLICY_TO_VALUES = {("driver", "useNvidiaDriverCRD"): ("driver", "nvidiaDriverCRD", "enabled"),
                    ("driver", "upgradePolicy", "podDeletion"): ("driver", "upgradePolicy", "gpuPodDeletion")}


@dataclass(frozen=True)
class Difference:
    where: tuple[str, int, int]
    path: str                     # e.g. ClusterPolicy spec.validator.repository
    imported: object
    ours: object
    unexpressed: bool

    def __str__(self) -> str:
        f, line, col = self.where
        loc = f"{f}:{line}:{col}" if line else f
        tag = " (not expressible: listed in the profile's comments)" if self.unexpressed else ""
        return (f"{loc}: {one_line(self.path)}: imported {_show(self.imported)}, gpuop's operator input gives "
                f"{_show(self.ours)}{tag}")


def _show(value) -> str:
    if value is MISSING:
        return "(absent)"
    text = yaml.safe_dump(value, default_flow_style=True, width=10_000).strip()
    text = text[:-4].strip() if text.endswith("...") else text
    return one_line(text if len(text) <= 120 else text[:117] + "...")


def leaves(node, path: tuple = ()):
    if isinstance(node, dict) and node:
        for k, v in node.items():
            yield from leaves(v, path + (k,))
    else:
        yield path, node


def get(node, path: tuple):
    for part in path:
        if not isinstance(node, dict) or part not in node:
            return MISSING
        node = node[part]
    return node


def _empty(v) -> bool:
    return v is MISSING or v in ({}, [], None)


def drop_nulls(node):
    """As the API server stores an object: a field set to null is not stored."""
    if isinstance(node, dict):
        return {k: drop_nulls(v) for k, v in node.items() if v is not None}
    if isinstance(node, list):
        return [drop_nulls(v) for v in node]
    return node


def compare_trees(a: dict, b: dict) -> list[tuple[tuple, object, object]]:
    """(path, a's value, b's value) of every leaf (of either side) where they differ; an absent leaf equals an
    empty mapping, list or null (no operator code tells them apart)."""
    a, b = drop_nulls(a), drop_nulls(b)
    out = []
    paths = dict.fromkeys([p for p, _ in leaves(a)] + [p for p, _ in leaves(b)])
    for p in paths:
        x, y = get(a, p), get(b, p)
        if x == y or (_empty(x) and _empty(y)):
            continue
        # a leaf of one side inside a subtree of the other: compared at the deeper paths already
        if isinstance(x, dict) and x and y is MISSING or isinstance(y, dict) and y and x is MISSING:
            continue
        out.append((p, x, y))
    return out


def _values_path(cp_path: tuple) -> tuple:
    for old, new in POLICY_TO_VALUES.items():
        if cp_path[:len(old)] == old:
            return new + cp_path[len(old):]
    return cp_path


def _is_unexpressed(vpath: tuple, unexpressed: list[str]) -> bool:
    dotted = ".".join(str(p) for p in vpath)
    return any(dotted == u or dotted.startswith(u + ".") or u.startswith(dotted + ".") for u in unexpressed)


def _config_content(name: str, text):
    """A config file's content for comparison: YAML parsed; the DCGM metrics CSV as its rows."""
    if not isinstance(text, str):
        return text
    if name.endswith(".csv"):
        return [[p.strip() for p in line.split(",", 2)] for line in text.splitlines()
                if line.strip() and not line.lstrip().startswith("#")]
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError:
        return text


SHARING_FLAG_DEFAULTS = {"renameByDefault": False, "failRequestsGreaterThanOne": False}


def plugin_config_as_run(config, strategy):
    """A device-plugin config as the plugin runs it (NVIDIA/k8s-device-plugin api/config/v1): the sharing
    flags it leaves out are false, and a MIG strategy the operator passes as MIG_STRATEGY (the ClusterPolicy's
    non-empty mig.strategy) wins over the file's flags.migStrategy (command-line flags and their env override
    the config file, config/v1 flags.go updateFromCLIFlag). Both sides of the comparison are read alike."""
    if not isinstance(config, dict):
        return config
    out = copy.deepcopy(config)
    sharing = out.get("sharing")
    if isinstance(sharing, dict):
        for kind in ("timeSlicing", "mps"):
            body = sharing.get(kind)
            if isinstance(body, dict):
                for flag, default in SHARING_FLAG_DEFAULTS.items():
                    if kind == "mps" and flag == "failRequestsGreaterThanOne":
                        continue
                    body.setdefault(flag, default)
    if isinstance(strategy, str) and strategy:
        flags = out.setdefault("flags", {})
        if isinstance(flags, dict):
            flags["migStrategy"] = strategy
    return out


# what NVIDIA's chart renders from a values path: objects of the NFD subchart and the operator Deployment (with its
# CRD jobs) follow these value keys, the rest the ClusterPolicy's (compared and located field by field above)
OBJECT_VALUES = (("node-feature-discovery", "node-feature-discovery"), ("gpu-operator-upgrade-crd", "operator"),
                 ("gpu-operator-cleanup", "operator"), ("gpu-operator", "operator"))
# what a live export of a ClusterPolicy install holds (kubectl get clusterpolicy,nvidiadriver,configmap), and what
# of gpuop's objects then changes the cluster: the operator itself is OLM's (the CSV, the same on both sides)
POLICY_KINDS = ("ClusterPolicy", "NVIDIADriver", "ConfigMap", "NodeFeatureRule", "Subscription")


@dataclass
class Side:
    """Every object of one side (kind, namespace, name) -> object, CRs CRD-defaulted."""
    objects: dict

    def of_kind(self, kind: str) -> list[dict]:
        return [o for (k, _, _), o in self.objects.items() if k == kind]

    @property
    def cluster_policy(self) -> dict | None:
        found = self.of_kind("ClusterPolicy")
        return found[0] if found else None

    @property
    def configmaps(self) -> dict[str, dict]:
        return {o["metadata"]["name"]: o for o in self.of_kind("ConfigMap")}


def object_key(obj: dict, namespace: str) -> tuple[str, str, str]:
    meta = obj.get("metadata") or {}
    cluster_scoped = obj.get("kind") in ("ClusterPolicy", "NVIDIADriver", "NodeFeatureRule", "ClusterRole",
                                         "ClusterRoleBinding", "Namespace", "RuntimeClass",
                                         "CustomResourceDefinition", "PriorityClass")
    return (str(obj.get("kind")), "" if cluster_scoped else str(meta.get("namespace") or namespace),
            str(meta.get("name")))


def _side(objs, namespace: str) -> Side:
    out: dict = {}
    for o in objs:
        out.setdefault(object_key(o, namespace), o)
    return Side(out)


def _render(values: dict, chart: Path, namespace: str):
    """NVIDIA's chart rendered; a template that fails is the user's chart input: located exit 2 with Helm's words."""
    from gpuop.verify import nvidia_chart

    try:
        return nvidia_chart.render(values, chart, namespace=namespace)
    except nvidia_chart.RenderError as exc:
        raise UserError(Issue(*exc.where(), "", f"NVIDIA's chart does not render: {one_line(str(exc))}")) from None


def imported_objects(got, chart: Path | None, namespace: str = "gpu-operator") -> Side:
    """What the cluster runs: a values file rendered with NVIDIA's chart (every object, as `helm install -f`
    would), or the ClusterPolicy, NVIDIADriver CRs and ConfigMaps of the input, CRD-defaulted; the input's own
    ConfigMaps and NVIDIADriver CRs beside them."""
    from gpuop.verify import nvidia_chart

    cms = [{k: v for k, v in cm.items() if k != "_doc"} for cm in got.configmaps.values()]
    chart = Path(chart or nvidia_chart.default_chart(got.version))
    crds = str(chart / "crds")
    drivers = [nvidia_chart.crd_defaults(d, nvidia_chart._schema(crds, "NVIDIADriver")) for d in got.drivers]
    if got.policy is not None:
        policy = nvidia_chart.crd_defaults(copy.deepcopy(got.policy.data), nvidia_chart._schema(crds, "ClusterPolicy"))
        sub = [copy.deepcopy(got.subscription.data)] if got.subscription is not None else []
        return _side([policy] + drivers + cms + sub, namespace)
    from gpuop.plan import chartmap

    # a key left out means the chart default of the operator version (the table's catalog data, which records
    # the published chart's appVersion where the chart renders it for an unset version)
    rendered = _render(chartmap.effective(got.values, got.version), chart, namespace)
    return _side(rendered.objects + drivers + cms, namespace)


def ours_objects(profile: Path, chart: Path | None, label: str | None = None):
    """The profile compiled in operator mode -> (its plan, every object NVIDIA's chart (Helm) or gpuop's OLM
    policy objects would give the cluster). A profile that does not compile is a located exit 2: in `profile`,
    or, for a text gpuop wrote to a scratch file, at `label`."""
    from gpuop.outputs import operator as operator_out
    from gpuop.pipeline.run import plan_all
    from gpuop.plan import chartmap
    from gpuop.verify import nvidia_chart

    try:
        plans, _ = plan_all([profile])
    except UserError as exc:
        raise UserError([Issue(label or i.file, i.line, i.col, i.path, i.message) if label and i.file == str(profile)
                         else i for i in exc.issues]) from None
    plan = plans[0]
    if plan.operator is None:
        from gpuop.profile.load import display

        raise UserError(Issue(label or display(profile), 1, 1, "spec.delivery.mode", "must be operator: `gpuop import "
                              "--check` compares what NVIDIA's operator is given"))
    version = plan.operator.version or plan.operator_version
    chart = Path(chart or nvidia_chart.default_chart(version))
    if plan.operator.install == "olm":
        crds = str(chart / "crds")
        out = []
        # the Subscription: which operator OLM installs and how it upgrades (the CSV's objects follow from it)
        subs = [o for o in operator_out.olm_operator(plan) if o.get("kind") == "Subscription"]
        for o in operator_out.olm_policy(plan) + subs:
            o = dict(o)
            o["metadata"] = {k: v for k, v in o["metadata"].items() if k != "annotations"}
            if o.get("kind") in ("ClusterPolicy", "NVIDIADriver"):
                o = nvidia_chart.crd_defaults(o, nvidia_chart._schema(crds, o["kind"]))
            out.append(o)
        return plan, _side(out, plan.namespace)
    rendered = _render(chartmap.effective(operator_out.chart_values(plan), version), chart, plan.namespace)
    return plan, _side(rendered.objects, plan.namespace)


def compare_objects(a, b, path: str = "") -> list[tuple[str, object, object]]:
    """(field path, a's value, b's value) of every difference between two objects: mappings by key, lists of
    named entries (containers, env, volumes) by name, other lists by position when as long; an absent value
    equals an empty one or null (as the API server stores an object)."""
    a, b = drop_nulls(a) if a is not MISSING else a, drop_nulls(b) if b is not MISSING else b
    if a == b or (_empty(a) and _empty(b)):
        return []
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for k in dict.fromkeys(list(a) + list(b)):
            part = f'["{k}"]' if "." in str(k) else str(k)     # a key holding dots (an annotation) stays one
            sub = f"{path}.{part}" if path else part
            out += compare_objects(a.get(k, MISSING), b.get(k, MISSING), sub)
        return out
    if isinstance(a, list) and isinstance(b, list):
        na, nb = _named(a), _named(b)
        if na is not None and nb is not None:
            out = []
            for k in dict.fromkeys(list(na) + list(nb)):
                out += compare_objects(na.get(k, MISSING), nb.get(k, MISSING), f"{path}[{k}]")
            return out
        if len(a) == len(b):
            out = []
            for i, (x, y) in enumerate(zip(a, b)):
                out += compare_objects(x, y, f"{path}[{i}]")
            return out
    return [(path, a, b)]


def _named(items: list) -> dict | None:
    names = [i.get("name") if isinstance(i, dict) else None for i in items]
    if not items or None in names or len(set(names)) != len(names):
        return None
    return {str(n): i for n, i in zip(names, items)}


def _object_values_key(key: tuple[str, str, str]) -> str:
    kind, _, name = key
    if kind == "NodeFeatureRule":
        return "nfd.nodefeaturerules"
    for prefix, values_key in OBJECT_VALUES:
        if name.startswith(prefix):
            return values_key
    return ""


def check(got, profile: Path, unexpressed: list[str], locate, chart: Path | None = None,
          label: str | None = None, renderer: Path | None = None) -> list[Difference]:
    """Every difference between what the cluster runs (`got`) and what the profile at `profile` gives NVIDIA's
    chart and operator; `locate(inputs, values path) -> (document, field path)` finds where a value was read.
    With `renderer` (NVIDIA's operator code, ops/import_operands.py), the operands it creates from each side too."""
    plan, ours = ours_objects(profile, chart, label)
    live = imported_objects(got, chart, (ours.cluster_policy or {}).get("metadata", {}).get("namespace")
                            or _namespace_of(ours))
    policy, o_policy = live.cluster_policy, ours.cluster_policy
    drivers, o_drivers = live.of_kind("NVIDIADriver"), ours.of_kind("NVIDIADriver")
    cms, o_cms = live.configmaps, ours.configmaps
    diffs: list[Difference] = []

    def where_values(vpath: tuple) -> tuple[str, int, int]:
        doc, loc = locate(got, vpath)
        return doc.where(loc) if doc is not None else (got.files[0], 0, 0)
    a = (policy or {}).get("spec") or {}
    b = (o_policy or {}).get("spec") or {}
    if (policy is None) != (o_policy is None):
        diffs.append(Difference((got.files[0], 0, 0), "ClusterPolicy", "present" if policy else MISSING,
                                "present" if o_policy else MISSING, False))
    for p, x, y in compare_trees(a, b):
        vp = _values_path(p)
        diffs.append(Difference(where_values(vp), "ClusterPolicy " + field_path(("spec",) + p), x, y,
                                _is_unexpressed(vp, unexpressed)))
    # NVIDIADriver CRs, by nodeSelector
    def key(d):
        return yaml.safe_dump((d.get("spec") or {}).get("nodeSelector") or {}, sort_keys=True)
    mine = {key(d): d for d in drivers}
    theirs = {key(d): d for d in o_drivers}
    for k in sorted(set(mine) | set(theirs)):
        x, y = mine.get(k), theirs.get(k)
        label = f"NVIDIADriver {(x or y)['metadata']['name']} (nodeSelector {one_line(k.strip()) or '{}'})"
        where = _driver_where(got, x)
        if x is None or y is None:
            diffs.append(Difference(where, label, "present" if x else MISSING, "present" if y else MISSING,
                                    x is not None and f"nvidiadriver.{x['metadata']['name']}" in unexpressed))
            continue
        name = x["metadata"]["name"]
        for p, u, v in compare_trees(x.get("spec") or {}, y.get("spec") or {}):
            diffs.append(Difference(where, f"{label} {field_path(('spec',) + p)}", u, v,
                                    _is_unexpressed(("nvidiadriver", name, p[0]), unexpressed)
                                    or _is_unexpressed(("driver",) + p, unexpressed)))
    # ConfigMaps the ClusterPolicy references, by content
    for comp in ("devicePlugin", "migManager", "dcgmExporter"):
        n1, n2 = get(a, (comp, "config", "name")), get(b, (comp, "config", "name"))
        c1 = cms.get(n1) if isinstance(n1, str) else None
        c2 = o_cms.get(n2) if isinstance(n2, str) else None
        if c1 is None and c2 is None:
            continue
        d1 = {k: _config_content(k, v) for k, v in ((c1 or {}).get("data") or {}).items()}
        d2 = {k: _config_content(k, v) for k, v in ((c2 or {}).get("data") or {}).items()}
        if comp == "devicePlugin":
            d1 = {k: plugin_config_as_run(v, get(a, ("mig", "strategy"))) for k, v in d1.items()}
            d2 = {k: plugin_config_as_run(v, get(b, ("mig", "strategy"))) for k, v in d2.items()}
        where = (got.configmaps[n1]["_doc"].where(("data",)) if c1 and "_doc" in got.configmaps.get(n1, {}) else
                 where_values((comp, "config")))
        if comp in ("devicePlugin", "migManager"):
            for p, u, v in compare_trees(d1, d2):
                diffs.append(Difference(where, f"ConfigMap {n1 if c1 else n2} data{field_path(p) and '.' + field_path(p)}",
                                        u, v, _is_unexpressed((comp, "config"), unexpressed)))
        elif d1 != d2:
            diffs.append(Difference(where, f"ConfigMap {n1 if c1 else n2} data", d1 or MISSING, d2 or MISSING,
                                    _is_unexpressed((comp, "config"), unexpressed)))
    diffs += whole_objects(got, live, ours, unexpressed, where_values, compared={
        ("ConfigMap", n) for n in (get(a, (c, "config", "name")) for c in ("devicePlugin", "migManager",
                                                                             "dcgmExporter")) if isinstance(n, str)}
        | {("ConfigMap", get(b, (c, "config", "name"))) for c in ("devicePlugin", "migManager", "dcgmExporter")})
    if renderer is not None:
        diffs += operand_differences(got, live, ours, plan, renderer)
    return diffs


def operand_differences(got, live: Side, ours: Side, plan, renderer: Path) -> list[Difference]:
    """What NVIDIA's operator creates from each side's ClusterPolicy and NVIDIADriver CRs, on the same nodes."""
    from gpuop import catalog as catalog_mod
    from gpuop.catalog import operator as operator_catalog
    from gpuop.ops import import_operands

    facts = import_operands.node_facts(plan, catalog_mod.load())
    olm_env = operator_catalog.olm_operator_env(plan.operator.version)
    sides = [import_operands.operands(renderer, side.cluster_policy, side.of_kind("NVIDIADriver"), facts,
                                      import_operands.operator_env(side, olm_env)) for side in (live, ours)]
    where = got.policy.where() if got.policy is not None else (got.files[0], 0, 0)
    out = []
    for key in sorted(set(sides[0]) | set(sides[1])):
        kind, ns, name = key
        x, y = sides[0].get(key, MISSING), sides[1].get(key, MISSING)
        label = f"operand {kind} {ns + '/' if ns else ''}{name}"
        if x is MISSING or y is MISSING:
            out.append(Difference(where, label, "present" if x is not MISSING else MISSING,
                                  "present" if y is not MISSING else MISSING, False))
            continue
        for p, u, v in compare_objects(x, y):
            out.append(Difference(where, f"{label} {one_line(p)}", u, v, False))
    return out


def _namespace_of(side: Side) -> str:
    return next((ns for (_, ns, _) in side.objects if ns), "gpu-operator")


def whole_objects(got, live: Side, ours: Side, unexpressed: list[str], where_values,
                  compared: set) -> list[Difference]:
    """Every object but the ClusterPolicy, the NVIDIADriver CRs and the config ConfigMaps (compared above), field
    by field: the NFD subchart, NodeFeatureRules, the operator Deployment and its env, RBAC, other ConfigMaps. A
    live export of a ClusterPolicy install is compared on what it holds (POLICY_KINDS)."""
    skip = {"ClusterPolicy", "NVIDIADriver"}
    out = []
    for key in sorted(set(live.objects) | set(ours.objects)):
        kind, ns, name = key
        if kind in skip or (kind, name) in compared:
            continue
        if got.policy is not None and kind not in POLICY_KINDS:
            continue
        x, y = live.objects.get(key, MISSING), ours.objects.get(key, MISSING)
        if got.policy is not None and kind in ("ConfigMap", "Subscription") and x is MISSING:
            continue            # an export holds the ConfigMaps (and Subscription) it was given, no more
        if kind == "ConfigMap" and y is MISSING and name in got.configmaps:
            continue            # one the user created beside the install and gpuop does not write: left as it is
        label = f"{kind} {ns + '/' if ns else ''}{name}"
        vkey = _object_values_key(key)
        lost = bool(vkey) and _is_unexpressed(tuple(vkey.split(".")), unexpressed)
        # located at the values key the object follows, where the input sets it
        where = where_values(tuple(vkey.split("."))) if vkey and got.policy is None else (got.files[0], 0, 0)
        if x is MISSING or y is MISSING:
            out.append(Difference(where, label, "present" if x is not MISSING else MISSING,
                                  "present" if y is not MISSING else MISSING, lost))
            continue
        if kind == "ConfigMap":
            x = {"data": {k: _config_content(k, v) for k, v in (x.get("data") or {}).items()}}
            y = {"data": {k: _config_content(k, v) for k, v in (y.get("data") or {}).items()}}
        elif got.policy is not None:       # a live export: its metadata is the API server's (uid, versions)
            x, y = {"spec": x.get("spec")}, {"spec": y.get("spec")}
        for p, u, v in compare_objects(x, y):
            at = where
            if kind == "Subscription" and got.subscription is not None:     # the live field itself
                at = got.subscription.where(tuple(p.split(".")[:2]))
            out.append(Difference(at, f"{label} {one_line(p)}", u, v, lost))
    return out




def check_text(got, text: str, unexpressed: list[str], locate, chart: Path | None = None,
               renderer: Path | None = None) -> list[Difference]:
    """`check` of a profile text (an import not written anywhere): its errors located at `<stdout>`."""
    with tempfile.TemporaryDirectory(prefix="gpuop-import-check-") as tmp:
        path = Path(tmp) / "imported.yaml"
        path.write_text(text, encoding="utf-8")
        return check(got, path, unexpressed, locate, chart, label="<stdout>", renderer=renderer)


def _driver_where(got, cr: dict | None) -> tuple[str, int, int]:
    doc = got.driver_docs.get((cr or {}).get("metadata", {}).get("name"))
    return doc.where() if doc is not None else (got.files[0], 0, 0)


def report(diffs: list[Difference], accept_unexpressed: bool, operands: bool = False) -> tuple[str, int]:
    counted = [d for d in diffs if not (accept_unexpressed and d.unexpressed)]
    lines = [str(d) for d in diffs]
    accepted = len(diffs) - len(counted)
    summary = (f"gpuop import --check: {len(counted)} difference(s)" +
               (" in the chart's objects and NVIDIA's operands" if operands else "") +
               (f", {accepted} accepted as not expressible" if accepted else "") +
               ("; the profile keeps the cluster as it is" if not counted else ""))
    return "\n".join(lines + [summary]) + "\n", (0 if not counted else 3)
