"""Writer: the rendered manifests, one multi-document file per component (`<NN>-<component>.yaml`,
kube/order.py says why the prefix), and their kustomization.yaml listing the files in install order.

Each file starts with one comment line naming its component, then the component's objects in install
order (kube/order.py sort_key), `---` between them.
Value slots are filled with the chart's default values, so these files are exactly what the Helm chart
renders with its defaults and what the Kustomize overlay builds.
"""

from __future__ import annotations

from gpuop.kube.order import by_component, file_name
from gpuop.kube.slots import fill, lookup, slot_paths
from gpuop.stack.objects import Synthesized
from gpuop.kube.yamlio import dump_memo, dump_plain
from gpuop.outputs.target import Target, Written


def rendered(stack: Synthesized) -> list[dict]:
    values = stack.plan.values
    return [fill(o.body, values) for o in stack.objects]


def header(component: str) -> str:
    return f"# Rendered by gpuop: the {component} component's objects, in install order. Do not edit; change the profile.\n"


# Rendered text per (object, the values its slots name). The objects of a synthesized stack are the
# variant cache's own (stack/synth.py: shared by every cluster of the variant, never mutated), so a
# fleet renders each object once per distinct set of slot values, not once per cluster. Entries hold
# the object, which keeps its id unique while the entry lives.
_TEXT: dict = {}
_PATHS: dict = {}


def rendered_text(body: dict, values: dict) -> str:
    paths = _PATHS.get(id(body))
    if paths is None or paths[0] is not body:
        if len(_PATHS) > 100_000:
            _PATHS.clear()
        paths = _PATHS[id(body)] = (body, slot_paths(body))
    key = (id(body), repr([lookup(values, p) for p in paths[1]]))
    hit = _TEXT.get(key)
    if hit is None or hit[0] is not body:
        if len(_TEXT) > 100_000:
            _TEXT.clear()
        hit = _TEXT[key] = (body, dump_memo(fill(body, values)))
    return hit[1]


def kinds(stack: Synthesized) -> list[tuple[str, str, bool]]:
    """(API group, kind, namespaced) of every object kind of the stack, sorted."""
    return sorted({(o.body["apiVersion"].rpartition("/")[0], o.body["kind"], "namespace" in o.body["metadata"])
                   for o in stack.objects})


def write(t: Target) -> Written:
    """Writer (outputs/target.py): the rendered manifests, and what index.json says of the stack's objects."""
    stack = t.stack
    return Written(files(stack, t.folders.manifests), {
        "objects": len(stack.objects), "kinds": kinds(stack),
        # cluster-scoped objects by name: the AppProject allows exactly these (outputs/fleet.py)
        "clusterObjects": sorted([o.body["apiVersion"].rpartition("/")[0], o.body["kind"], o.body["metadata"]["name"]]
                                 for o in stack.objects if "namespace" not in o.body["metadata"])})


def files(stack: Synthesized, base: str) -> dict[str, str]:
    files: dict[str, str] = {}
    names = []
    values = stack.plan.values
    for component, objs in by_component(stack.objects):
        name = file_name(component)
        files[f"{base}/{name}"] = header(component) + "---\n".join(rendered_text(o.body, values) for o in objs)
        names.append(name)
    files[f"{base}/kustomization.yaml"] = (
        "# Rendered by gpuop: the cluster's objects, one file per component, in install order. Do not edit; "
        "change the profile.\n"
        + dump_plain({"apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization", "resources": names}))
    return files
