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
from pathlib import Path

import pytest

pytestmark = pytest.mark.fast      # reads the sources only: `make test-fast`

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


def test_gitops_objects_have_one_builder():
    hand = {str(f.relative_to(PKG)): kinds for f in sorted(PKG.rglob("*.py"))
            if f != GITOPS_BUILDER and (kinds := hand_built_kinds(f.read_text()))}
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
