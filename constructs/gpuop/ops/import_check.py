"""`gpuop import --check`: does the imported profile keep the cluster as it is?

The imported profile is compiled in operator mode (placeholders as written), and what NVIDIA's operator would
then be given -- with Helm: NVIDIA's chart (verify/nvidia_chart.py, Helm's own engine) rendered with gpuop's
values; with OLM: the ClusterPolicy, NVIDIADriver CRs and ConfigMaps gpuop writes -- is compared with what was
imported, after the CRDs' structural defaults on both sides (the API server applies them on create):
- the ClusterPolicy spec, field by field (every leaf of either side);
- the NVIDIADriver CRs, matched by nodeSelector (gpuop names its CRs `default` and `driver-<version>`), spec
  field by field;
- the ConfigMaps the ClusterPolicy references (device-plugin, mig-parted, DCGM metrics), by content: each
  config file parsed (YAML, or the metrics CSV's rows), since gpuop writes them in its own order and form.

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


def imported_objects(got, chart: Path | None) -> tuple[dict | None, list[dict], dict[str, dict]]:
    """What the cluster runs: the ClusterPolicy, NVIDIADriver CRs and ConfigMaps of the input (a values file is
    rendered with NVIDIA's chart first, as `helm install -f` would), CRD-defaulted."""
    from gpuop.verify import nvidia_chart

    cms = {n: {k: v for k, v in cm.items() if k != "_doc"} for n, cm in got.configmaps.items()}
    drivers = [copy.deepcopy(d) for d in got.drivers]
    chart = chart or nvidia_chart.default_chart()
    if got.policy is not None:
        policy = copy.deepcopy(got.policy.data)
        crds = Path(chart) / "crds" if chart else None
        if crds and (crds / nvidia_chart.KINDS["ClusterPolicy"]).is_file():
            policy = nvidia_chart.crd_defaults(policy, nvidia_chart._schema(str(crds), "ClusterPolicy"))
            drivers = [nvidia_chart.crd_defaults(d, nvidia_chart._schema(str(crds), "NVIDIADriver")) for d in drivers]
        return policy, drivers, cms
    from gpuop.plan import chartmap

    # a key left out means the chart default of the operator version (the table's catalog data, which records
    # the published chart's appVersion where the chart renders it for an unset version)
    rendered = nvidia_chart.render(chartmap.effective(got.values), chart)
    for name, cm in rendered.configmaps.items():
        cms.setdefault(name, cm)
    crds = Path(chart) / "crds"
    drivers = [nvidia_chart.crd_defaults(d, nvidia_chart._schema(str(crds), "NVIDIADriver")) for d in drivers]
    return rendered.cluster_policy, rendered.drivers + drivers, cms


def ours_objects(text: str, chart: Path | None):
    """The imported profile compiled in operator mode -> the ClusterPolicy, NVIDIADriver CRs and ConfigMaps
    NVIDIA's operator would be given."""
    from gpuop.outputs import operator as operator_out
    from gpuop.pipeline.run import plan_all
    from gpuop.verify import nvidia_chart

    with tempfile.TemporaryDirectory(prefix="gpuop-import-check-") as tmp:
        path = Path(tmp) / "imported.yaml"
        path.write_text(text)
        try:
            plans, _ = plan_all([path])
        except UserError as exc:
            raise UserError([Issue("imported profile", i.line, i.col, i.path, f"does not compile: {i.message}")
                             for i in exc.issues]) from None
    plan = plans[0]
    if plan.operator.install == "olm":
        objs = operator_out.olm_policy(plan)
        chart = chart or nvidia_chart.default_chart()
        crds = str(Path(chart) / "crds")
        out = []
        for o in objs:
            o = {k: v for k, v in o.items()}
            o["metadata"] = {k: v for k, v in o["metadata"].items() if k != "annotations"}
            if o.get("kind") in ("ClusterPolicy", "NVIDIADriver"):
                o = nvidia_chart.crd_defaults(o, nvidia_chart._schema(crds, o["kind"]))
            out.append(o)
        rendered = nvidia_chart.Rendered(out)
    else:
        rendered = nvidia_chart.render(operator_out.chart_values(plan), chart, namespace=plan.namespace)
    return rendered.cluster_policy, rendered.drivers, rendered.configmaps


def check(got, text: str, unexpressed: list[str], locate, chart: Path | None = None) -> list[Difference]:
    """Every difference; `locate(inputs, values path) -> (document, field path)` finds where a value was read."""
    policy, drivers, cms = imported_objects(got, chart)
    o_policy, o_drivers, o_cms = ours_objects(text, chart)
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
    return diffs


def _driver_where(got, cr: dict | None) -> tuple[str, int, int]:
    doc = got.driver_docs.get((cr or {}).get("metadata", {}).get("name"))
    return doc.where() if doc is not None else (got.files[0], 0, 0)


def report(diffs: list[Difference], accept_unexpressed: bool) -> tuple[str, int]:
    counted = [d for d in diffs if not (accept_unexpressed and d.unexpressed)]
    lines = [str(d) for d in diffs]
    accepted = len(diffs) - len(counted)
    summary = (f"gpuop import --check: {len(counted)} difference(s)" +
               (f", {accepted} accepted as not expressible" if accepted else "") +
               ("; the profile keeps the cluster as it is" if not counted else ""))
    return "\n".join(lines + [summary]) + "\n", (0 if not counted else 3)
