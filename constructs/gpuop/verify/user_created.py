"""The semantic check of a cluster with objects the user creates: the ConfigMaps the profile names as "you
create it" (spec.driver.repoConfig, spec.driver.certConfig) and the PriorityClasses it declares as the
cluster's own (spec.clusterOwned.priorityClasses; plan/model.py USER_CREATED) are external references, like
the built-in objects of verify/semantic.py's EXTERNAL table, but known per cluster.

`gpuop synth` takes them from the plan; `gpuop validate DIST` from the cluster's index.json entry
(`userCreated`, kind -> `namespace/name`), where each must still be a valid name of its kind. A reference
to one is resolved as present, its keys unknown (kubelet reads them from the live object); any other
reference that is neither in the output nor external stays "not found". Clusters without such objects go
through the semantic check's own (memoized) entry points unchanged.
"""

from __future__ import annotations

import json
from pathlib import Path

from gpuop.errors import Issue
from gpuop.kube.slots import fill
from gpuop.kube.types import DNS_SUBDOMAIN_RULE, is_dns_subdomain
from gpuop.verify import semantic

# userCreated kinds that are cluster-scoped (index.json lists them by name alone): the cluster's own PriorityClasses
CLUSTER_SCOPED = frozenset({"PriorityClass"})


def _issue(file: str, f, note: str = "") -> Issue:
    return Issue(file, 0, 0, f"{f.kind}/{semantic.shown_name(f.name)} {f.path}", f.message + note, rule=f.rule)


def stack_issues(stack, file: str) -> list[Issue]:
    """semantic.stack_issues, with the plan's user-created objects as external references."""
    plan = stack.plan
    external = plan.user_created
    if not external:
        return semantic.stack_issues(stack, file)
    values = json.loads(plan.values_json)
    objs = [fill(o.body, values) for o in stack.objects]
    note = f" (the stack compiled for cluster {plan.name})"
    return [_issue(file, f, note) for _, f in semantic.check_indexed(objs, external=external)]


def index_problems(entry: dict, shown: str) -> tuple[dict[str, set[str]], list[Issue]]:
    """The `userCreated` of one index.json cluster entry as external names, and an issue for each entry
    that is not `namespace/name` with a valid name (the API server's wording); those are not external."""
    external: dict[str, set[str]] = {}
    issues = []
    for kind, names in (entry.get("userCreated") or {}).items():
        for i, ref in enumerate(names if isinstance(names, list) else [names]):
            namespace, _, name = str(ref).rpartition("/")
            if kind in ("ConfigMap", "Secret") and namespace and is_dns_subdomain(name):
                external.setdefault(kind, set()).add(f"{namespace}/{name}")
            elif kind in CLUSTER_SCOPED and isinstance(ref, str) and is_dns_subdomain(ref):
                external.setdefault(kind, set()).add(ref)       # cluster-scoped: a name alone
            else:
                issues.append(Issue(shown, 0, 0, f"clusters[{entry.get('name')}].userCreated.{kind}[{i}]",
                                    f"Invalid value: {json.dumps(ref)}: must be <namespace>/<name> of a ConfigMap "
                                    f"or Secret, or the <name> of a PriorityClass, the name {DNS_SUBDOMAIN_RULE}"))
    return external, issues


def manifest_issues(folder: Path, entry: dict, shown_index: str) -> list[Issue]:
    """semantic.manifest_issues of one cluster's rendered manifests, with the entry's user-created objects
    as external references."""
    external, issues = index_problems(entry, shown_index)
    return issues + semantic.manifest_issues(folder, external=external)
