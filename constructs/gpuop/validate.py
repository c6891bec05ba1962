"""Stage 2, validate: the merged profile document -> a typed `ClusterProfile`, or every problem located.

Two passes: the pydantic models (shape, types, unknown fields, names), then the catalog rules (which
release, OS, platform version, GPU model and driver branch exist and fit together). Every problem is
an `Issue` with FILE:LINE:COL, the field path and what is allowed; all are reported, not only the
first. Warnings (severity "warning") do not stop the compile.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass

from pydantic import BaseModel, ValidationError

from . import catalog as catalog_mod
from . import compat as compat_rules
from .mig import rules as mig_rules
from .errors import Issue, UserError
from .profile.load import LoadedProfile
from .profile.models import ClusterProfile


@dataclass(frozen=True)
class ValidProfile:
    loaded: LoadedProfile
    profile: ClusterProfile
    warnings: tuple[Issue, ...] = ()


def _model_at(model: type[BaseModel], loc: tuple) -> type[BaseModel] | None:
    """The model class that owns the field at `loc` (for listing allowed fields)."""
    import typing

    current: object = model
    for part in loc:
        if isinstance(part, int):
            continue
        if not (isinstance(current, type) and issubclass(current, BaseModel)) or part not in current.model_fields:
            return None
        ann = current.model_fields[part].annotation
        current = _unwrap(ann, typing)
    return current if isinstance(current, type) and issubclass(current, BaseModel) else None


def _unwrap(ann, typing):
    for arg in (typing.get_args(ann) or (ann,)):
        if isinstance(arg, type) and issubclass(arg, BaseModel):
            return arg
        inner = typing.get_args(arg)
        for a in inner:
            if isinstance(a, type) and issubclass(a, BaseModel):
                return a
    return ann


def _message(err: dict, root: type[BaseModel] = ClusterProfile) -> str:
    kind, msg, value = err["type"], err["msg"], err.get("input")
    if kind == "extra_forbidden":
        owner = _model_at(root, tuple(err["loc"][:-1]))
        allowed = ", ".join(owner.model_fields) if owner else "see schemas/profile.schema.json"
        if tuple(err["loc"][:-1]) == () and root is ClusterProfile:
            allowed += ", extends"
        return f"unknown field; allowed: {allowed}"
    if kind == "missing":
        return "required field is missing"
    if msg.startswith("Value error, "):
        return msg[len("Value error, "):]
    shown = repr(value) if not isinstance(value, (dict, list)) else type(value).__name__
    return f"{msg[0].lower()}{msg[1:]} (got {shown})"


def check_shape(loaded: LoadedProfile) -> ClusterProfile:
    try:
        return ClusterProfile.model_validate(loaded.data)
    except ValidationError as exc:
        issues = []
        for err in exc.errors():
            loc = tuple(err["loc"])
            # pydantic appends the failing type name for unions/functions; keep data paths only
            loc = tuple(p for p in loc if isinstance(p, int) or not p.startswith(("function-", "lax-", "str", "int", "bool", "list[", "dict[")))
            issues.append(loaded.positions.issue(loc, _message(err)))
        raise UserError(sorted(set(issues)))


def _one_of(value: str, allowed, what: str) -> str:
    allowed = list(allowed)
    close = difflib.get_close_matches(value, allowed, n=3, cutoff=0.6)
    hint = f"; did you mean {', '.join(close)}?" if close else ""
    listed = ", ".join(allowed) if len(allowed) <= 12 else f"{len(allowed)} {what} (see the catalog)"
    return f"{value!r} is not a known {what}{hint} allowed: {listed}"


def check_rules(loaded: LoadedProfile, p: ClusterProfile, cat: catalog_mod.Catalog) -> tuple[list[Issue], list[Issue]]:
    """Catalog rules. Returns (errors, warnings)."""
    errors: list[Issue] = []
    warnings: list[Issue] = []
    at = loaded.positions.issue
    spec = p.spec
    release = cat.release(spec.release)
    if release is None:
        errors.append(at(("spec", "release"), _one_of(spec.release, [r.name for r in cat.releases], "stack release")))
        return errors, warnings
    m = release.matrix
    if spec.platform.type == "openshift":
        errors.append(at(("spec", "platform", "type"), "openshift is not supported by this gpuop version yet "
                         "(SecurityContextConstraints and Driver Toolkit builds are not emitted); allowed: kubernetes"))
    elif spec.platform.version not in m.kubernetes:
        errors.append(at(("spec", "platform", "version"), f"Kubernetes {spec.platform.version} is outside "
                         f"stack release {release.name}'s support matrix; allowed: {', '.join(m.kubernetes)}"))
    os_entry = m.os.get(spec.os)
    if os_entry is None:
        errors.append(at(("spec", "os"), _one_of(spec.os, m.os, "operating system")))
    elif os_entry.platform != spec.platform.type:
        errors.append(at(("spec", "os"), f"{spec.os} is an OS for {os_entry.platform}, not {spec.platform.type}"))
    elif spec.platform.type == "kubernetes" and spec.platform.version not in os_entry.kubernetes:
        errors.append(at(("spec", "os"), f"{spec.os} is supported with Kubernetes "
                         f"{', '.join(os_entry.kubernetes)} in stack release {release.name}, not {spec.platform.version}"))
    if spec.driver.version and cat.drivers and cat.branch(spec.driver.version) is None:
        errors.append(at(("spec", "driver", "version"), _one_of(spec.driver.version.split(".")[0],
                         [b.branch for b in cat.drivers], "driver branch")))
    seen: dict[str, int] = {}
    for i, pool in enumerate(spec.nodePools):
        if pool.name in seen:
            errors.append(at(("spec", "nodePools", i, "name"), f"duplicate pool name {pool.name!r} "
                             f"(also spec.nodePools[{seen[pool.name]}]); pool names must be unique"))
        seen.setdefault(pool.name, i)
        gpu = cat.gpus.get(pool.gpu)
        if cat.gpus and gpu is None:
            errors.append(at(("spec", "nodePools", i, "gpu"), _one_of(pool.gpu, cat.gpus, "GPU model")))
        elif gpu is not None and pool.mig and pool.mig.layout and not gpu.migCapable:
            errors.append(at(("spec", "nodePools", i, "mig", "layout"), f"{pool.gpu} is not MIG-capable; "
                             "remove the layout (MIG-capable models: `gpuop mig gpus`)"))
    for rules in (compat_rules, mig_rules):
        e, w = rules.check(loaded, p, cat)
        errors += e
        warnings += w
    return errors, warnings


def validate(loaded: LoadedProfile, cat: catalog_mod.Catalog | None = None) -> ValidProfile:
    profile = check_shape(loaded)
    errors, warnings = check_rules(loaded, profile, cat or catalog_mod.load())
    if errors:
        raise UserError(errors)
    return ValidProfile(loaded, profile, tuple(warnings))
