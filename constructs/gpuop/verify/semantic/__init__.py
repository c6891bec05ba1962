"""The semantic check of a compiled stack: what the API server, its admission plugins, the scheduler
and the kubelet refuse (or silently break on) beyond the OpenAPI schema, and the references between
the objects of one cluster's output.

The rules (`check_*`, each a small named function `rule(obj, ctx) -> findings` declared with
`@rule(id, source=..., refuses=...)` (errors.py) and its Kubernetes source in the comment above it) live in one module per family: `pods` (pod specs), `workloads`,
`services`, `references` (between the objects of one output) and `metadata`; `objects` holds what they
share, including the table of names that legitimately exist outside the output (`EXTERNAL`, data with a
reason per entry; `TENANT_KINDS` for the objects gpuop places in its users' namespaces). The syntax of
names, keys and quantities is the one kernel of gpuop/kube/validation.py and gpuop/kube/quantity.py.
This package owns the registry (`RULES`, `CONTEXT_RULES`, `REGISTRY` by rule id), the runner (which
records the rule id on each finding and issue), and the two entry points the
pipeline uses: `stack_issues` (every `gpuop synth`, before anything is written; memoized)
and `manifest_issues` (`gpuop validate DIST`, over dist/<cluster>/manifests/*.yaml).

Conventions and where it differs from upstream on purpose:
* `Finding.path` points at the offending field of the *submitted* (v1) object in the notation of
  k8s.io/apimachinery/pkg/util/validation/field.Path (`a.b[0].c`, map keys as `labels[app]`). Where the
  API server reports a coarser or internal path (e.g. `securityContext.shareProcessNamespace` for the
  hostPID pair) the real field is named instead: the user edits the v1 object, not the internal one.
* `Finding.message` is the API server's `field.Error.ErrorBody()` text where upstream has one
  (`Invalid value: "x": ...`, `Required value: ...`, `Duplicate value: "x"`, `Not found: "x"`,
  `Forbidden: ...`, `Unsupported value: "x": supported values: ...`, `Too long: ...`); otherwise the
  admission plugin's or kubelet's wording (without the `pods "x" is forbidden:` envelope, which names
  a pod that does not exist yet); otherwise our own (the rules marked "Not an API-server check").
  Label keys use the newest wording (content.IsLabelKey: "a valid label key ..."); older API servers
  say "a qualified name ..." for the same refusal.
* v1 defaulting is applied where it changes the outcome (probe thresholds, DaemonSet rolling-update
  defaults, toleration operator, Service type, port protocol).
* The rules are the newest API server's (Kubernetes 1.35's validation code): env var
  names follow the relaxed grammar of 1.33 and later; the profile check refuses, for a cluster before
  1.33, the names its API server would (validate/kube_names.py).
* `gpuop validate DIST` also reads each file as kubectl does (decode.py): a string field that YAML 1.1
  types as a bool or a number is refused, as the API server's clients fail to decode it.
* Image pull secrets are never resolved: they are the user's, created beside the stack (README).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from dataclasses import replace

from gpuop.errors import Issue
from gpuop.errors import Rule as RuleRecord
from gpuop.errors import registry
from gpuop.kube.quantity import QuantityError, parse_quantity
from gpuop.kube.slots import MARKER, fill, lookup
from gpuop.kube.yamlio import load_all

from .data import check_config_data_keys
from .decode import check_kubectl_decode
from .metadata import (
    check_annotations,
    check_duplicate_objects,
    check_labels,
    check_metadata_name,
)
from .pods import (
    check_container_image_and_policies,
    check_container_names,
    check_container_ports,
    check_dns,
    check_env,
    check_host_pid_with_share_process_namespace,
    check_node_affinity,
    check_node_selector,
    check_pod_affinity,
    check_pod_names_and_deadlines,
    check_priority_class_name,
    check_probes,
    check_resources,
    check_security_context,
    check_sysctls,
    check_tolerations,
    check_volume_mounts,
    check_volumes,
)
from .workloads import (
    check_daemonset_update_strategy,
    check_pod_template_restart_policy,
    check_workload_selector,
)
from .services import (
    check_service_ports,
    check_service_selector_matches_pods,
)
from .references import (
    check_config_map_references,
    check_namespace_exists,
    check_rbac_scc_use_resource_names,
    check_role_binding_role_ref,
    check_role_binding_subjects,
    check_runtime_class_exists,
    check_scc_users,
    check_secret_references,
    check_service_account_exists,
)
from .objects import EXTERNAL, TENANT_KINDS, Context, External, Finding, Obj, Rule, external_names

__all__ = ["CONTEXT_RULES", "EXTERNAL", "REGISTRY", "RULES", "TENANT_KINDS", "Context", "External", "Finding", "QuantityError",
           "StackChecker", "check_indexed", "check_objects", "external_names", "manifest_issues", "parse_quantity",
           "stack_issues"]


RULES: tuple[Rule, ...] = (
    check_metadata_name,
    check_labels,
    check_annotations,
    check_duplicate_objects,
    check_namespace_exists,
    check_host_pid_with_share_process_namespace,
    check_container_names,
    check_volumes,
    check_container_ports,
    check_volume_mounts,
    check_probes,
    check_env,
    check_container_image_and_policies,
    check_security_context,
    check_sysctls,
    check_dns,
    check_pod_affinity,
    check_pod_names_and_deadlines,
    check_resources,
    check_tolerations,
    check_priority_class_name,
    check_node_selector,
    check_node_affinity,
    check_workload_selector,
    check_pod_template_restart_policy,
    check_daemonset_update_strategy,
    check_service_ports,
    check_service_selector_matches_pods,
    check_service_account_exists,
    check_config_map_references,
    check_secret_references,
    check_runtime_class_exists,
    check_role_binding_role_ref,
    check_role_binding_subjects,
    check_scc_users,
    check_rbac_scc_use_resource_names,
    check_config_data_keys,
)

# Every semantic rule by id: RULES over the objects, and the kubectl reading of each file's text.
REGISTRY: dict[str, RuleRecord] = registry((*RULES, check_kubectl_decode))


# The rules that look past the object they check (references, duplicates, Service endpoints). The
# others read only their object (and the constant node port range), so their findings are memoized per
# distinct object: clusters share synthesized variants, and a fleet checks each variant once.
CONTEXT_RULES: frozenset[Rule] = frozenset({
    check_duplicate_objects,
    check_namespace_exists,
    check_priority_class_name,
    check_service_selector_matches_pods,
    check_service_account_exists,
    check_config_map_references,
    check_secret_references,
    check_runtime_class_exists,
    check_role_binding_role_ref,
    check_role_binding_subjects,
    check_scc_users,
    check_rbac_scc_use_resource_names,
})


def check_indexed(objs: list[dict[str, Any]], *, external: Mapping[str, set[str]] | None = None,
                  local: list[list[list[Finding]]] | None = None) -> list[tuple[int, Finding]]:
    """(index of the object, finding) for every rule in RULES over every object, in object order then
    rule order. `local[i][r]`, when given, holds the findings of RULES[r] on objs[i] for rules outside
    CONTEXT_RULES (computed earlier); `external` is added to the EXTERNAL table."""
    ctx = Context(objects=list(objs), external=external_names(external))
    out: list[tuple[int, Finding]] = []
    for i, obj in enumerate(ctx.objects):
        for r, rule in enumerate(RULES):
            found = local[i][r] if local is not None and rule not in CONTEXT_RULES else rule(obj, ctx)
            out += [(i, f if f.rule else replace(f, rule=rule.rule.id)) for f in found]
    return out


def check_objects(objs: list[dict[str, Any]], *, external: Mapping[str, set[str]] | None = None) -> list[Finding]:
    """Every finding of every rule over one cluster's objects (the EXTERNAL table plus `external`)."""
    return [f for _, f in check_indexed(objs, external=external)]


_NO_CONTEXT = Context(objects=[])


def _local_findings(obj: Obj) -> list[list[Finding]]:
    return [[] if rule in CONTEXT_RULES else list(rule(obj, _NO_CONTEXT)) for rule in RULES]


class StackChecker:
    """Checks synthesized stacks (objects with value slots, and the chart's default values), memoized.

    An object is identified by its synthesized body (shared between the clusters that use the same
    component variant; the memo holds a reference, so the identity cannot be reused) and the values
    of the slots it contains; each distinct one is filled and checked by the local rules once. A
    cluster whose objects were all seen together before is answered from the memo outright."""

    def __init__(self) -> None:
        self._slots: dict[int, tuple[dict, tuple[str, ...]]] = {}
        self._objects: dict[tuple, tuple[dict, list[list[Finding]]]] = {}
        self._clusters: dict[tuple, list[tuple[int, Finding]]] = {}

    def _slot_paths(self, body: dict) -> tuple[str, ...]:
        hit = self._slots.get(id(body))
        if hit is None:
            text = json.dumps(body, ensure_ascii=False)      # the markers are not ASCII
            hit = self._slots[id(body)] = (body, tuple(sorted(set(MARKER.findall(text)))))
        return hit[1]

    def check(self, bodies: list[dict], values_json: str) -> list[tuple[int, Finding]]:
        fast = (tuple(id(b) for b in bodies), values_json)    # the same variants with the same values
        if fast in self._clusters:
            return self._clusters[fast]
        if len(self._objects) > 100_000:      # a long-lived process (tests): start over rather than grow
            self.__init__()
        values = json.loads(values_json)
        keys = []
        for body in bodies:
            paths = self._slot_paths(body)
            keys.append((id(body), tuple(json.dumps(lookup(values, p), sort_keys=True) for p in paths)))
        cluster = tuple(keys)
        if cluster not in self._clusters:
            filled, local = [], []
            for body, k in zip(bodies, keys):
                if k not in self._objects:
                    obj = fill(body, values)
                    self._objects[k] = (obj, _local_findings(obj))
                obj, found = self._objects[k]
                filled.append(obj)
                local.append(found)
            self._clusters[cluster] = check_indexed(filled, local=local)
        self._clusters[fast] = self._clusters[cluster]
        return self._clusters[fast]


_checker = StackChecker()   # one per process: spawned workers each keep their own


def shown_name(name: str) -> str:
    """An object's name as the issue shows it: quoted (Go's %q) when it holds a space, a control character
    or anything outside printable ASCII, so "abc\n" stays on its line."""
    return name if name and all("!" <= c <= "~" for c in name) else json.dumps(name, ensure_ascii=False)


def _issue(file: str, f: Finding, note: str = "") -> Issue:
    return Issue(file, 0, 0, f"{f.kind}/{shown_name(f.name)} {f.path}", f.message + note, rule=f.rule)


def stack_issues(stack, file: str) -> list[Issue]:
    """A synthesized cluster (stack.Synthesized) checked as its manifests will be (value slots filled with
    the chart's defaults); each violation located at the profile `file`, naming the object and field."""
    plan = stack.plan
    found = _checker.check([o.body for o in stack.objects], plan.values_json)
    return [_issue(file, f, f" (the stack compiled for cluster {plan.name})") for _, f in found]


def manifest_issues(folder: Path, *, external: Mapping[str, set[str]] | None = None) -> list[Issue]:
    """One cluster's rendered manifests (dist/<cluster>/manifests/*.yaml, kustomization.yaml excepted),
    checked together; each violation located at the file holding the object. Files that do not parse
    are left to the schema check, which reports them. Besides the rules, each file's text is read as
    kubectl reads it (decode.py): a string field that YAML 1.1 types as a bool or a number is refused.
    `external` is added to the EXTERNAL table (objects the user creates for this cluster)."""
    objs: list[dict] = []
    files: list[str] = []
    decoded: list[Issue] = []
    for path in sorted(folder.glob("*.yaml")):
        if path.name == "kustomization.yaml":
            continue
        text = path.read_text()
        try:
            docs = load_all(text)
        except Exception:  # noqa: BLE001, S112 - verify.output reports it as "not valid YAML"
            continue
        decoded += [_issue(str(path), f) for f in check_kubectl_decode(text)]
        for obj in docs:
            if isinstance(obj, dict) and "kind" in obj:
                objs.append(obj)
                files.append(str(path))
    return decoded + [_issue(files[i], f) for i, f in check_indexed(objs, external=external)]
