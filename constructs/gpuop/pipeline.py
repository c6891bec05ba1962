"""The one-way pipeline, end to end: load -> validate -> plan -> synthesize -> package -> write.

Each stage is its own module and hands immutable values forward; this module only sequences them
and gathers every user error of every profile before stopping, so one run reports all problems.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from . import catalog as catalog_mod
from .errors import Issue, UserError
from .plan import StackPlan, build_plan
from .profile.load import discover, display, load_profile
from .validate import validate


@dataclass(frozen=True)
class CompileResult:
    plans: tuple[StackPlan, ...]
    warnings: tuple[Issue, ...]
    files: tuple[tuple[str, bytes], ...]   # relative path -> content, the whole output tree


def plan_all(paths: list[Path]) -> tuple[list[StackPlan], list[Issue]]:
    cat = catalog_mod.load()
    files = discover(paths)
    issues: list[Issue] = []
    warnings: list[Issue] = []
    plans: list[StackPlan] = []
    if not files:
        raise UserError(Issue(", ".join(str(p) for p in paths) or ".", 0, 0, "", "no profile files found"))
    owners: dict[str, str] = {}
    for f in files:
        try:
            valid = validate(load_profile(f), cat)
        except UserError as exc:
            issues.extend(exc.issues)
            continue
        warnings.extend(valid.warnings)
        plan = build_plan(valid, cat)
        if plan.name in owners:
            issues.append(valid.loaded.positions.issue(("metadata", "name"), f"cluster name {plan.name!r} is "
                          f"already used by {owners[plan.name]}; names must be unique across profiles"))
            continue
        owners[plan.name] = display(f)
        plans.append(plan)
    if issues:
        raise UserError(issues)
    plans.sort(key=lambda p: p.name)
    return plans, warnings


def compile_profiles(paths: list[Path], settings, previous_lock: dict | None) -> CompileResult:
    from .outputs import package
    from .synth import Synthesizer

    plans, warnings = plan_all(paths)
    synth = Synthesizer()
    stacks = [synth.synthesize(p) for p in plans]
    files = package(stacks, settings, previous_lock or {})
    return CompileResult(tuple(plans), tuple(warnings), tuple(sorted(files.items())))
