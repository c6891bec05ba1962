"""Stage 2, validate: the merged profile document -> a typed `ClusterProfile`, or every problem located.

Two passes over the same document, both always run: the pydantic models (shape, types, unknown fields,
names; wording in profile/messages.py), then the rules of every module of RULE_MODULES, each a tuple of
phases of small named `check_*` functions declared with an id, a source and a default severity (rules.py).
cluster.py is the catalog pass over the plain document: it runs even when the model pass refused a field,
so a profile with a typo in one field still gets its catalog problems reported in the same run; the other
modules need the typed profile. Every problem is an `Issue` with FILE:LINE:COL, the field path, what is
wrong and what is allowed, and the id of its rule (REGISTRY, docs/rules.md). Warnings (severity
"warning") do not stop the compile.
"""

from __future__ import annotations

from dataclasses import replace

from pydantic import ValidationError

from gpuop import catalog as catalog_mod
from gpuop.errors import Issue, Rule, UserError, registry
from gpuop.profile.load import LoadedProfile
from gpuop.profile.messages import model_issues
from gpuop.profile.models import ClusterProfile
from gpuop.profile.valid import ValidProfile
from gpuop.validate import cluster as cluster_rules
from gpuop.validate import compat as compat_rules
from gpuop.validate import distribution as distribution_rules
from gpuop.validate import dra as dra_rules
from gpuop.validate import health_gate as health_gate_rules
from gpuop.validate import known_issues as known_issue_rules
from gpuop.validate import kube_names as kube_name_rules
from gpuop.validate import licensing as licence_rules
from gpuop.validate import mig as mig_rules
from gpuop.validate import operator as operator_rules
from gpuop.validate import platform as platform_rules
from gpuop.validate import pools as pool_rules
from gpuop.validate import queues as queue_rules
from gpuop.validate import reserved as reserved_name_rules
from gpuop.validate import xid_policy as xid_policy_rules
from gpuop.validate.rules import Context, rule, run


# Every rule module: `RULES` (phases of checks) and `applies(ctx)`. The catalog pass (cluster.py, PLAIN) reads
# the plain document; the others run once the profile has its typed shape.
RULE_MODULES = (cluster_rules, compat_rules, mig_rules, pool_rules, platform_rules, operator_rules, kube_name_rules,
                dra_rules, distribution_rules, known_issue_rules, reserved_name_rules, queue_rules,
                licence_rules, xid_policy_rules, health_gate_rules)


def run_rules(loaded: LoadedProfile, profile: ClusterProfile | None, cat) -> tuple[list[Issue], list[Issue]]:
    """Every module's rules that apply (only the plain ones without a typed profile) -> (errors, warnings)."""
    errors: list[Issue] = []
    warnings: list[Issue] = []
    contexts = {True: Context.of(loaded, None, cat),         # one per pass: its derivations are shared
                False: Context.of(loaded, profile, cat) if profile is not None else None}
    for module in RULE_MODULES:
        ctx = contexts[getattr(module, "PLAIN", False)]
        if ctx is not None and module.applies(ctx):
            e, w = run(module.RULES, ctx)
            errors += e
            warnings += w
    return errors, warnings


# ----------------------------------------------------------------------------------- the model pass

@rule("profile-schema", source="the profile models (profile/models.py; schemas/profile.schema.json is generated "
      "from them); Kubernetes' syntax of names, label keys and values, quantities (kube/types.py)")
def check_shape(loaded: LoadedProfile) -> ClusterProfile:
    """Unknown fields, wrong types, missing required fields, values outside a field's allowed set or syntax."""
    try:
        return ClusterProfile.model_validate(loaded.data)
    except ValidationError as exc:
        raise UserError([replace(i, rule=check_shape.rule.id)
                         for i in model_issues(exc, loaded.data, loaded.positions, ClusterProfile)])


def validate(loaded: LoadedProfile, cat: catalog_mod.Catalog | None = None) -> ValidProfile:
    """Both passes; raises UserError with every problem of the profile (rule problems on a field the
    model pass already refused are dropped, so each field is reported once)."""
    cat = cat or catalog_mod.load()
    shape_issues: list[Issue] = []
    profile = None
    try:
        profile = check_shape(loaded)
    except UserError as exc:
        shape_issues = exc.issues
    errors, warnings = run_rules(loaded, profile, cat)
    refused = {i.path for i in shape_issues}
    errors = [e for e in errors if e.path not in refused]
    if shape_issues or errors:
        raise UserError(sorted(set(shape_issues) | set(errors)))
    return ValidProfile(loaded, profile, tuple(warnings))


# Every profile rule by id: the model pass, then each module's checks (docs/rules.md).
REGISTRY: dict[str, Rule] = registry((check_shape, *(check for m in RULE_MODULES for phase in m.RULES
                                                     for check in phase)))
