"""The house rules of the source tree, checked from the code's own imports (ast, nothing executed).

- The stages are packages under constructs/gpuop/, with at most three loose modules beside them.
- No import cycles between modules, nor between stages (packages). Every import counts: module-level,
  function-level and `if TYPE_CHECKING:` ones, since a type-only import is an arrow a reader follows
  just the same and becomes a run-time cycle the day someone needs the name at run time.
- Components never reach profile, validate or plan: they see their props only.
- Outputs never reach profile, validate or components: they see synthesized objects and the plan model.
- The plan model reaches no profile or validate code and imports no other plan module: it holds the plan's
  data types, the builders import them. The catalog imports no other part; kube only kube.
- Nothing imports the CLI.
- Argo CD Applications and Flux GitRepository / HelmRepository / HelmRelease objects are built in
  outputs/gitops.py only.
"Reach" is transitive: a module reaches everything its imports import, and so on.
"""

from __future__ import annotations

import ast
from functools import lru_cache
from pathlib import Path

import pytest


from conftest import REPO

PKG = REPO / "constructs" / "gpuop"
STAGES = {"cli", "pipeline", "profile", "validate", "plan", "stack", "components", "outputs", "verify", "ops",
          "kube", "catalog", "mig", "rehearse"}
LOOSE_MAX = 3


def module_name(path: Path) -> str:
    parts = ("gpuop",) + path.relative_to(PKG).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path: Path, modules: set[str]) -> set[str]:
    return imports_in(path.read_text(), module_name(path), path.name == "__init__.py", modules)


def imports_in(source: str, me: str, is_pkg: bool, modules: set[str]) -> set[str]:
    """The gpuop modules a module's source imports anywhere (module- or function-level, under
    `if TYPE_CHECKING:` too). Importing a.b.c also runs the packages a and a.b, except the module's own
    enclosing packages: Python runs those before the module itself, whatever it imports."""
    found: set[str] = set()

    def add(mod: str) -> None:
        parts = mod.split(".")
        for i in range(1, len(parts) + 1):
            name = ".".join(parts[:i])
            if name in modules and name != me and not me.startswith(name + "."):
                found.add(name)

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Import):
                for a in child.names:
                    add(a.name)
            elif isinstance(child, ast.ImportFrom):
                if child.level:
                    base = me.split(".") if is_pkg else me.split(".")[:-1]
                    base = base[:len(base) - (child.level - 1)]
                    mod = ".".join(base + ([child.module] if child.module else []))
                else:
                    mod = child.module or ""
                add(mod)
                for a in child.names:                     # `from pkg import submodule`
                    if f"{mod}.{a.name}" in modules:
                        add(f"{mod}.{a.name}")
            visit(child)

    visit(ast.parse(source, me))
    return {m for m in found if m.startswith("gpuop")}


def import_graph() -> dict[str, set[str]]:
    files = sorted(PKG.rglob("*.py"))
    modules = {module_name(f) for f in files}
    return {module_name(f): imports_of(f, modules) for f in files}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (or a self-import), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def strong(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1 or v in graph.get(v, ()):
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            strong(v)
    return out


def stage_of(module: str) -> str:
    """gpuop.plan.model -> gpuop.plan; a loose module (gpuop.errors) is its own stage."""
    return ".".join(module.split(".")[:2])


def stage_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """Stage -> the other stages its modules import."""
    out: dict[str, set[str]] = {}
    for mod, deps in graph.items():
        out.setdefault(stage_of(mod), set()).update(stage_of(d) for d in deps if stage_of(d) != stage_of(mod))
    return out


def reach(graph: dict[str, set[str]], start: str) -> set[str]:
    seen: set[str] = set()
    todo = [start]
    while todo:
        for w in graph.get(todo.pop(), ()):
            if w not in seen:
                seen.add(w)
                todo.append(w)
    return seen


def in_stage(module: str, stage: str) -> bool:
    return module == f"gpuop.{stage}" or module.startswith(f"gpuop.{stage}.")


def violations(graph: dict[str, set[str]], sources: str, forbidden: tuple[str, ...]) -> list[str]:
    out = []
    for mod in sorted(graph):
        if in_stage(mod, sources):
            bad = sorted(m for m in reach(graph, mod) if any(in_stage(m, f) for f in forbidden))
            if bad:
                out.append(f"{mod} reaches {', '.join(bad)}")
    return out


GRAPH = import_graph()


def test_stages_are_packages_with_few_loose_modules():
    packages = {p.name for p in PKG.iterdir() if (p / "__init__.py").is_file()}
    assert STAGES <= packages
    loose = sorted(p.name for p in PKG.glob("*.py"))
    assert len(loose) <= LOOSE_MAX, loose
    assert not (REPO / "constructs" / "__init__.py").exists()   # would shadow the `constructs` library


def test_no_import_cycles():
    assert cycles(GRAPH) == []


def test_no_cycles_between_stages():
    assert cycles(stage_graph(GRAPH)) == []


@pytest.mark.parametrize("stage, forbidden", [
    ("components", ("profile", "validate", "plan", "stack", "outputs", "pipeline", "cli")),
    ("outputs", ("profile", "validate", "components", "cli")),
    ("catalog", tuple(s for s in STAGES if s != "catalog") + ("errors",)),
    ("kube", tuple(s for s in STAGES if s != "kube")),
    ("plan.model", ("profile", "validate")),
    ("verify", ("profile", "validate", "components", "plan", "stack")),
    # a rehearsal applies compiled output (the plan model, outputs, kube, catalog facts), never a profile
    ("rehearse", ("profile", "validate", "components", "cli")),
    # the rig runs a control plane and knows nothing of gpuop (errors at most)
    ("rehearse.rig", tuple(s for s in STAGES if s != "rehearse")),
])
def test_stage_never_reaches(stage, forbidden):
    assert violations(GRAPH, stage, forbidden) == []


def test_the_plan_model_imports_no_builder():
    assert sorted(m for m in GRAPH["gpuop.plan.model"] if in_stage(m, "plan") and m != "gpuop.plan") == []
    builders = {m for m in GRAPH if in_stage(m, "plan") and m not in ("gpuop.plan", "gpuop.plan.model", "gpuop.plan.chartmap")}
    assert all("gpuop.plan.model" in reach(GRAPH, b) for b in builders), builders


def test_nothing_imports_the_cli():
    assert [m for m, deps in sorted(GRAPH.items()) if not in_stage(m, "cli") and any(in_stage(d, "cli") for d in deps)] == []


def test_synth_module_does_not_load_cdk8s_until_used():
    """Writers and the cache import stack.synth / stack.objects; cdk8s (which starts Node) must not come with it."""
    src = (PKG / "stack" / "synth.py").read_text()
    top = [n for n in ast.parse(src).body if isinstance(n, (ast.Import, ast.ImportFrom))]
    reached = set()
    for n in top:
        mod = n.module if isinstance(n, ast.ImportFrom) else n.names[0].name
        reached |= {mod} | reach(GRAPH, mod)
    assert not any(in_stage(m, "components") or m == "gpuop.stack.chart" for m in reached), sorted(reached)


GITOPS_BUILDER = PKG / "outputs" / "gitops.py"
GITOPS_KINDS = {"Application", "GitRepository", "HelmRepository", "HelmRelease"}


def hand_built_kinds(source: str) -> list[str]:
    """The GitOps kinds a module's source writes as a dict literal `{"kind": "<kind>", ...}`."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Dict):
            for k, v in zip(node.keys, node.values):
                if (isinstance(k, ast.Constant) and k.value == "kind" and isinstance(v, ast.Constant)
                        and v.value in GITOPS_KINDS and any(isinstance(x, ast.Constant) and x.value in
                                                            ("apiVersion", "metadata") for x in node.keys)):
                    found.append(v.value)
    return found


# not gpuop's output: the Applications Argo CD's ApplicationSet controller would create from gpuop's
# ApplicationSets (the rehearsal's generator lane), typed the way that controller types them
NOT_OUTPUT = {PKG / "rehearse" / "argocd.py"}


def test_gitops_objects_have_one_builder():
    hand = {str(f.relative_to(PKG)): kinds for f in sorted(PKG.rglob("*.py"))
            if f != GITOPS_BUILDER and f not in NOT_OUTPUT and (kinds := hand_built_kinds(f.read_text()))}
    assert hand == {}
    assert set(hand_built_kinds(GITOPS_BUILDER.read_text())) == GITOPS_KINDS


# ---- the checker itself finds what it must --------------------------------------------------------

def test_cycle_finder_finds_a_cycle_hidden_in_a_function_import():
    modules = {"gpuop", "gpuop.a", "gpuop.b", "gpuop.c"}
    graph = {"gpuop.a": imports_in("from gpuop.b import x\n", "gpuop.a", False, modules),
             "gpuop.b": imports_in("def f():\n    from . import a\n", "gpuop.b", False, modules),
             "gpuop.c": imports_in("import json\n", "gpuop.c", False, modules)}
    assert cycles(graph) == [["gpuop.a", "gpuop.b"]]


TYPE_ONLY = """from __future__ import annotations
from typing import TYPE_CHECKING
if TYPE_CHECKING:
    from {target} import Thing
"""


@pytest.mark.parametrize("guard", ["TYPE_CHECKING", "typing.TYPE_CHECKING"])
def test_cycle_finder_finds_a_type_only_cycle(guard):
    modules = {"gpuop", "gpuop.p", "gpuop.p.model", "gpuop.p.operator"}
    graph = {"gpuop.p.model": imports_in("from gpuop.p.operator import OperatorPlan\n", "gpuop.p.model", False,
                                         modules),
             "gpuop.p.operator": imports_in(TYPE_ONLY.format(target="gpuop.p.model").replace("TYPE_CHECKING:", guard + ":"),
                                            "gpuop.p.operator", False, modules)}
    assert graph["gpuop.p.operator"] == {"gpuop.p.model"}
    assert cycles(graph) == [["gpuop.p.model", "gpuop.p.operator"]]


def test_stage_cycle_through_a_type_only_import_is_found():
    """plan.build importing a validate type while validate.rules uses plan derivations: no module cycle,
    but the two stages point at each other."""
    modules = {"gpuop", "gpuop.plan", "gpuop.plan.build", "gpuop.plan.pools", "gpuop.validate",
               "gpuop.validate.runner", "gpuop.validate.rules"}
    graph = {"gpuop.plan.build": imports_in(TYPE_ONLY.format(target="gpuop.validate.runner"), "gpuop.plan.build",
                                            False, modules),
             "gpuop.plan.pools": set(),
             "gpuop.validate.runner": set(),
             "gpuop.validate.rules": imports_in("from gpuop.plan import pools\n", "gpuop.validate.rules", False,
                                                modules)}
    assert cycles(graph) == []
    assert cycles(stage_graph(graph)) == [["gpuop.plan", "gpuop.validate"]]


def test_the_plan_never_imports_validate_not_even_for_types():
    f = PKG / "plan" / "build.py"
    deps = imports_of(f, set(GRAPH))
    assert not any(in_stage(d, "validate") for d in deps)
    assert "gpuop.plan.model" in deps


def test_a_transitive_reach_is_a_violation():
    graph = {"gpuop.outputs.helm": {"gpuop.kube.slots"}, "gpuop.kube.slots": {"gpuop.profile.models"},
             "gpuop.profile.models": set()}
    assert violations(graph, "outputs", ("profile",)) == ["gpuop.outputs.helm reaches gpuop.profile.models"]


def test_a_hand_built_gitops_object_is_found():
    src = """def f(plan):
    ref = {"kind": "HelmRepository", "name": "nvidia"}                    # a sourceRef: no object
    return {"apiVersion": "helm.toolkit.fluxcd.io/v2", "kind": "HelmRelease", "spec": {"chart": ref}}
"""
    assert hand_built_kinds(src) == ["HelmRelease"]


# ---- the component table (kube/components.py): every list of components derives from it ----------

from gpuop.kube import components as component_table   # noqa: E402  (pure data: no cdk8s, no Node)

COMPONENT_VOCABULARY = (set(component_table.KEYS) | set(component_table.NAMES) | set(component_table.RELEASE_IMAGES)
                        | {r.module for r in component_table.TABLE})
# Literal collections of component keys that stay outside the table, each with why. Every one is a mapping from
# a component to something only its module knows (or a list of other things that happens to hold components);
# test_allowed_component_literals_name_only_known_components keeps them from naming a component the table lacks.
COMPONENT_LITERALS_ALLOWED = {
    # the catalog imports nothing of gpuop; test_known_issue_components_are_the_switchable_ones ties it
    ("catalog/known_issues.py", "Component"): "the catalog's Literal of switchable sections",
    ("catalog/known_issues.py", "Versioned"): "the components (and the operator) a known-issue entry names versions of",
    ("validate/known_issues.py", "wanted"): "the sections whose env an entry's `unless` reads (spec.<section>.env)",
    ("ops/impact.py", "RESTARTS"): "what a restart of each DaemonSet means for workloads (impact's prose)",
    ("ops/import_check.py", None): "the ClusterPolicy sections that reference a ConfigMap, compared by content",
    ("ops/importer.py", "SECTIONS"): "every profile section in the order gpuop import writes them (not only components)",
    ("outputs/operator.py", None): "NVIDIA chart sections that take exactly enabled + image from the plan",
    ("plan/model.py", "used"): "what each image's use depends on in the plan (expressions, not attributes)",
    ("validate/distribution.py", "OPERAND_ENV"): "each operand's reserved env names (components/env_names.py)",
}


def component_literals(source: str) -> list[tuple[int, str | None, list[str]]]:
    """(line, assigned name or None, keys) of each tuple / list / set / dict-keys literal in a source that
    holds three or more distinct component keys or names: a hand-written list of components."""
    tree = ast.parse(source)
    names: dict[int, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            target = node.targets[0] if isinstance(node, ast.Assign) else node.target
            if isinstance(target, ast.Name):
                for sub in ast.walk(node.value if node.value is not None else node):
                    names.setdefault(id(sub), target.id)
    out = []
    for node in ast.walk(tree):
        elts = (node.elts if isinstance(node, (ast.Tuple, ast.List, ast.Set))
                else [k for k in node.keys if k is not None] if isinstance(node, ast.Dict) else None)
        if not elts:
            continue
        keys = [e.value for e in elts if isinstance(e, ast.Constant) and e.value in COMPONENT_VOCABULARY]
        if len(set(keys)) >= 3:
            out.append((node.lineno, names.get(id(node)), keys))
    return out


@lru_cache(maxsize=1)
def hand_component_lists() -> dict[tuple[str, str | None], list[str]]:
    table = PKG / "kube" / "components.py"
    found = {}
    for f in sorted(PKG.rglob("*.py")):
        if f != table:
            for line, name, keys in component_literals(f.read_text()):
                found[(str(f.relative_to(PKG)), name)] = keys
    return found


def test_no_hand_written_list_of_components_outside_the_table():
    found = hand_component_lists()
    assert sorted(k for k in found if k not in COMPONENT_LITERALS_ALLOWED) == []
    assert sorted(k for k in COMPONENT_LITERALS_ALLOWED if k not in found) == []      # no stale exemption


def test_allowed_component_literals_name_only_known_components():
    for where, keys in hand_component_lists().items():
        assert set(keys) <= COMPONENT_VOCABULARY, where


def test_known_issue_components_are_the_switchable_ones():
    from typing import get_args
    from gpuop.catalog import known_issues
    assert get_args(known_issues.Component) == component_table.SWITCHED


def component_classes() -> dict[str, str]:
    """components/ module -> the `name` of the Component class it defines (ast: importing them starts Node)."""
    out = {}
    for f in sorted((PKG / "components").glob("*.py")):
        for node in ast.parse(f.read_text()).body:
            if isinstance(node, ast.ClassDef) and any(isinstance(b, ast.Name) and b.id == "Component" for b in node.bases):
                for stmt in node.body:
                    if (isinstance(stmt, ast.Assign) and isinstance(stmt.targets[0], ast.Name)
                            and stmt.targets[0].id == "name" and isinstance(stmt.value, ast.Constant)):
                        out[f.stem] = stmt.value.value
    return out


def registry_modules() -> list[str]:
    """stack/registry.py's REGISTRY, as the components/ modules of its classes, in order."""
    tree = ast.parse((PKG / "stack" / "registry.py").read_text())
    module_of = {a.asname or a.name: n.module.rsplit(".", 1)[1] for n in tree.body if isinstance(n, ast.ImportFrom)
                 and (n.module or "").startswith("gpuop.components.") for a in n.names}
    reg = next(n for n in tree.body if isinstance(n, ast.AnnAssign) and getattr(n.target, "id", "") == "REGISTRY")
    return [module_of[e.elts[0].id] for e in reg.value.elts]


def test_every_component_module_is_a_row_of_the_table_with_its_name():
    assert component_classes() == {r.module: r.name for r in component_table.TABLE}


def test_the_registry_runs_the_table_in_state_order():
    assert registry_modules() == [r.module for r in component_table.BY_RANK]
    assert [r.rank for r in component_table.BY_RANK] == list(range(len(component_table.TABLE)))


def test_every_component_with_a_profile_section_has_chart_values():
    from gpuop.outputs.values import ChartValues
    assert [k for k in ChartValues.model_fields if k in component_table.KEYS] == sorted(
        component_table.KEYS, key=list(ChartValues.model_fields).index)
    assert set(component_table.KEYS) <= set(ChartValues.model_fields)


def test_a_hand_written_component_list_is_found():
    src = 'A = ("dcgm", "gfd")\nB = {"toolkit": 1, "devicePlugin": 2, "migManager": 3}\n'
    assert component_literals(src) == [(2, "B", ["toolkit", "devicePlugin", "migManager"])]


# ---- the architecture table: stage -> what it holds and what it may import; generated into the README ----

import os  # noqa: E402

README = REPO / "README.md"
BEGIN = "<!-- architecture: generated from tests/test_layout.py ARCHITECTURE (GPUOP_UPDATE_GOLDEN=1 rewrites it) -->"
END = "<!-- end of the generated architecture -->"

# stage -> (what it holds, the stages its modules may import). test_stage_imports_match_the_architecture
# holds the code to it both ways: an import the table does not allow fails, and so does an allowance no
# module uses any more (the table says what the code does, not what it once did).
ARCHITECTURE: dict[str, tuple[str, set[str]]] = {
    "cli": ("argparse and the one error boundary (`main.py`), `gpuop mig` (`mig.py`), the `cdk8s synth` app "
            "(`cdk8s_app.py`); nothing imports it",
            {"catalog", "components", "errors", "kube", "mig", "ops", "outputs", "pipeline", "profile", "rehearse",
             "stack", "verify"}),
    "pipeline": ("the synth command (`synth.py`), sequencing (`run.py`), one named decision per cluster "
                 "(`decide.py`), shards (`shards.py`), the build cache and its keys (`cache.py`, `keys.py`), "
                 "the no-op path (`noop.py`), the review gate (`gate.py`), the previous output (`previous.py`), what "
                 "may be replaced (`ownership.py`), the output transaction (`write.py`, `journal.py`), a compiled "
                 "output's integrity (`integrity.py`)",
                 {"catalog", "errors", "kube", "outputs", "plan", "profile", "stack", "validate", "verify"}),
    "profile": ("the one bounded reader of input files (`bounded.py`), load + `extends` (`load.py`, `fastyaml.py`), "
                "the contract (`models.py`), settings, "
                "the JSON schema, pydantic wording (`messages.py`)", {"catalog", "errors", "kube"}),
    "validate": ("the one runner (`runner.py`) and the rule modules; each rule a small `check_*` function declared "
                 "with `@rule(id, source, severity)`, listed in [docs/rules.md](docs/rules.md); rules read each "
                 "pool's effective settings from `Context.defaults` (plan/defaults.py)",
                 {"catalog", "components", "errors", "kube", "mig", "plan", "profile"}),
    "plan": ("the frozen plan (`model.py`, imports no profile or validate), the defaulting pass (`defaults.py`: each "
             "pool's effective settings, read by the rules too), its build (`build.py`), driver DaemonSets "
             "(`drivers.py`), per-pool configs (`pools.py`), DRA, capacity, operator mode and the NVIDIA chart "
             "mapping (`chartmap.py`)", {"catalog", "errors", "kube", "mig", "profile"}),
    "stack": ("the component registry (`registry.py`), plan → props (`derive.py`), the cdk8s chart, synthesis, "
              "synthesized objects", {"components", "kube", "plan"}),
    "components": ("one module per component (the rows of `kube/components.py`); shared props (`props.py`), object "
                   "builders (`builders.py`), the construct base, OpenShift transforms, the Node runtime; never "
                   "profile, validate, plan", {"catalog", "errors", "kube"}),
    "outputs": ("one cluster's files and the tree (`cluster.py`), what every writer takes and gives and the "
                "cluster's folders (`target.py`), manifests, chart + values contract, kustomize, the stack's delivery "
                "(`delivery.py`: Argo CD, Flux), fleet, chart archives, versions, node-group labels, operator mode; "
                "never profile, validate, components", {"catalog", "kube", "plan", "stack"}),
    "verify": ("checks of compiled output (`gpuop validate DIST`): strict schemas, CRDs, CEL, the semantic rules "
               "(one registry, same `@rule` shape)", {"errors", "kube"}),
    "ops": ("operations on compiled output: `diff`, `check`, `publish`, `report`, `capacity`, `images`, `import`, "
            "impact, `signing` (cosign: charts signed on publish, upstream images verified before they are locked); `init` "
            "(the starter project, its files in `ops/scaffold/`)",
            {"catalog", "errors", "kube", "mig", "outputs", "pipeline", "plan", "profile", "stack", "validate",
             "verify"}),
    "rehearse": ("the rehearsal: the control plane built from the Go module proxy (`rig.py`, reaching no other stage), "
                 "the simulated GPU fleet (`fleet.py`), the plan's expectations (`expect.py`), what is applied "
                 "(`objects.py`), the steps (`run.py`), Kueue's probe Workloads (`queues.py`) and the report "
                 "(`report.py`); never profile, validate, components", {"catalog", "errors", "kube", "plan", "verify"}),
    "kube": ("Kubernetes-shaped values and conventions: value slots, kind order and waves, YAML io, label/quantity "
             "types, the component table (`components.py`), a cluster's output folder names (`folders.py`: the ones an "
             "index entry names, `preview/`, `addons/`, `flux-overlay/`)", set()),
    "catalog": ("all catalogs as data with their sources (`data/`: releases, GPUs, drivers, MIG, known issues); the "
                "one version order (`versions.py`) and \"did you mean\" (`names.py`)", set()),
    "mig": ("the MIG placement search and pictures", {"catalog"}),
    "errors": ("the located `Issue`, `UserError` and the `@rule` declaration (a module)", set()),
    "api": ("the public construct API (docs/constructs.md; a module); nothing of gpuop imports it",
            {"catalog", "components", "errors", "kube", "pipeline", "plan", "profile", "stack"}),
}

# Where each kind of change goes: the files it touches (checked by a dry run of each; paths below constructs/gpuop/
# unless they start with a top-level folder).
CHANGES = (
    ("Adding a component", "its module `components/<name>.py`, its row in `kube/components.py`, its props function in "
     "`stack/derive.py`, its line in `stack/registry.py`, its example props in `tests/test_component_units.py`, "
     "and, regenerated, the golden files (`tests/golden/`) and `dist/` of the profiles that deploy it; with a profile section "
     "also `profile/models.py`, `plan/model.py` + `plan/build.py` (what the plan says of it), `outputs/values.py` "
     "(its chart values) and its image in `catalog/data/releases.yaml`; objects of a kind gpuop did not write before "
     "also need their place in `kube/order.py` (install order) and, when they live in the users' namespaces, "
     "`verify/semantic/objects.py` `TENANT_KINDS`"),
    ("Adding an output target", "its writer `outputs/<target>.py` (`write(t: Target) -> Written`: its files under "
     "`t.folders` and its keys of the index entry, outputs/target.py), its import and one line in "
     "`outputs/cluster.py` `build_cluster`, the list of what `gpuop synth` writes in this README (its module list above is regenerated) "
     "and, regenerated, `dist/`"),
    ("Adding a pool-level field", "the field in `profile/models.py` (`NodePool`, its description saying what "
     "omitted means), its effective value in `plan/defaults.py` (`PoolDefaults`), the rules and plan builders that "
     "read it (`validate/*.py`, `plan/*.py`) and the regenerated `schemas/profile.schema.json`"),
)


def stage_modules(stage: str) -> list[str]:
    """What a stage holds, as the README lists it: its modules and sub-packages (a loose module: itself)."""
    folder = PKG / stage
    if not folder.is_dir():
        return [f"{stage}.py"]
    rows = {r.module for r in component_table.TABLE} if stage == "components" else set()
    out = sorted(p.name + ("/" if p.is_dir() else "") for p in folder.iterdir()
                 if (p.suffix == ".py" and p.stem not in rows | {"__init__"})
                 or (p.is_dir() and (p / "__init__.py").is_file()))
    return out + (["+ one module per component"] if rows else [])


def architecture_markdown() -> str:
    lines = [BEGIN, "", "| stage | what it holds | modules | may import |", "|---|---|---|---|"]
    for stage, (holds, may) in ARCHITECTURE.items():
        where = f"`{stage}/`" if (PKG / stage).is_dir() else f"`{stage}.py`"
        mods = ", ".join(f"`{m}`" if not m.startswith("+") else m for m in stage_modules(stage))
        lines.append(f"| {where} | {holds} | {mods} | {', '.join(sorted(may)) or 'nothing of gpuop'} |")
    lines += ["", "Where each kind of change goes (paths below `constructs/gpuop/`):", ""]
    lines += [f"- **{what}** touches: {files}." for what, files in CHANGES]
    return "\n".join(lines + ["", END])


def test_stage_imports_match_the_architecture():
    actual = {stage_of(m).split(".", 1)[1]: {stage_of(d).split(".", 1)[1] for d in deps}
              for m, deps in stage_graph(GRAPH).items() if m != "gpuop"}
    table = {stage: may for stage, (_, may) in ARCHITECTURE.items()}
    assert {s: sorted(d - table.get(s, set())) for s, d in actual.items() if d - table.get(s, set())} == {}, \
        "imports the architecture table does not allow"
    assert {s: sorted(m - actual.get(s, set())) for s, m in table.items() if m - actual.get(s, set())} == {}, \
        "allowances no module uses: narrow the table"
    assert sorted(actual) == sorted(table)


def test_readme_architecture_section_is_generated_from_the_table():
    text = README.read_text()
    assert BEGIN in text and END in text, f"README.md lacks the markers {BEGIN!r} ... {END!r}"
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    want = head + architecture_markdown() + tail
    if os.environ.get("GPUOP_UPDATE_GOLDEN"):
        README.write_text(want)
    assert text == want, "README.md's architecture section differs from tests/test_layout.py; GPUOP_UPDATE_GOLDEN=1"


def test_every_file_a_change_touches_exists():
    for what, files in CHANGES:
        for path in re_paths(files):
            p = REPO / path if path.split("/")[0] in ("tests", "schemas", "docs", "dist") else PKG / path
            if "<" not in path and not path.endswith("/*.py"):
                assert p.exists(), (what, path)


def re_paths(text: str) -> list[str]:
    import re
    return [m for m in re.findall(r"`([^`]+)`", text) if "/" in m or m.endswith(".py")]
