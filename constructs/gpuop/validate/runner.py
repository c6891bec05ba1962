"""Stage 2, validate: the merged profile document -> a typed `ClusterProfile`, or every problem located.

Two passes over the same document, both always run: the pydantic models (shape, types, unknown fields,
names), then the catalog rules (which release, OS, platform version, GPU model and driver branch exist
and fit together). The rules read the plain document defensively, so a profile with a typo in one field
still gets its catalog problems reported in the same run. Every problem is an `Issue` with
FILE:LINE:COL, the field path, what is wrong and what is allowed. Warnings (severity "warning") do not
stop the compile.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass

from pydantic import ValidationError

from gpuop import catalog as catalog_mod
from gpuop.validate import compat as compat_rules
from gpuop.errors import Issue, UserError
from gpuop.profile.load import LoadedProfile
from gpuop.profile.messages import model_issues
from gpuop.validate import mig as mig_rules
from gpuop.validate import platform as platform_rules
from gpuop.validate import pools as pool_rules
from gpuop.profile.models import ClusterProfile


@dataclass(frozen=True)
class ValidProfile:
    loaded: LoadedProfile
    profile: ClusterProfile
    warnings: tuple[Issue, ...] = ()


# ----------------------------------------------------------------------------------- the model pass

def check_shape(loaded: LoadedProfile) -> ClusterProfile:
    try:
        return ClusterProfile.model_validate(loaded.data)
    except ValidationError as exc:
        raise UserError(model_issues(exc, loaded.data, loaded.positions, ClusterProfile))


# ----------------------------------------------------------------------------------- the catalog pass

def _one_of(value: str, allowed, what: str, plural: str | None = None) -> str:
    """`value` is not one of `allowed`: suggest close names (case, prefix, spelling) and list them all."""
    allowed = list(allowed)
    low = value.lower()
    close = [a for a in allowed if a.lower() == low]
    close += [a for a in allowed if low and a.lower().startswith(low) and a not in close]
    close += [a for a in allowed if low and low in a.lower() and a not in close]
    lowered = {a.lower(): a for a in allowed}
    close += [lowered[c] for c in difflib.get_close_matches(low, list(lowered), n=3, cutoff=0.6)
              if lowered[c] not in close]
    hint = f" (did you mean {', '.join(close[:4])}?)" if close else ""
    return f"{value!r} is not a known {what}{hint}; allowed: {', '.join(allowed)}"


def _get(node, *path):
    for part in path:
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node):
            node = node[part]
        else:
            return None
    return node


def _str(node, *path) -> str | None:
    value = _get(node, *path)
    return value if isinstance(value, str) else None


RESERVED_NAMES = frozenset({"charts", "fleet"})   # top-level folders of dist/ besides the clusters


def check_rules(loaded: LoadedProfile, cat: catalog_mod.Catalog) -> tuple[list[Issue], list[Issue]]:
    """Catalog rules over the merged document. Fields of the wrong type are skipped (the model pass
    reports them). Returns (errors, warnings)."""
    errors: list[Issue] = []
    warnings: list[Issue] = []
    at = loaded.positions.issue
    doc = loaded.data
    spec = _get(doc, "spec")
    name = _str(doc, "metadata", "name")
    if name in RESERVED_NAMES:
        errors.append(at(("metadata", "name"), f"{name!r} is reserved: dist/{name}/ holds fleet-wide output; "
                         f"choose another cluster name (reserved: {', '.join(sorted(RESERVED_NAMES))})"))

    release_name = _get(spec, "release")
    release = cat.release(None) if release_name is None else (
        cat.release(release_name) if isinstance(release_name, str) else None)
    if isinstance(release_name, str) and release is None:
        errors.append(at(("spec", "release"), _one_of(release_name, [r.name for r in cat.releases], "stack release")))

    ptype, pver, os_name = _str(spec, "platform", "type"), _str(spec, "platform", "version"), _str(spec, "os")
    if release is not None:
        m = release.matrix
        version_ok = True
        if ptype == "openshift" and pver is not None and pver not in m.openshift:
            version_ok = False
            errors.append(at(("spec", "platform", "version"), f"OpenShift {pver} is outside stack release "
                             f"{release.name}'s support matrix; allowed: {', '.join(m.openshift)}"))
        elif ptype == "kubernetes" and pver is not None and pver not in m.kubernetes:
            version_ok = False
            errors.append(at(("spec", "platform", "version"), f"Kubernetes {pver} is outside stack release "
                             f"{release.name}'s support matrix; allowed: {', '.join(m.kubernetes)}"))
        if os_name is not None:
            entry = m.os.get(os_name)
            if entry is None:
                known = [n for n, e in m.os.items() if ptype not in ("kubernetes", "openshift") or e.platform == ptype]
                errors.append(at(("spec", "os"), _one_of(os_name, known, "operating system"
                                                         + (f" for {ptype}" if ptype else ""))))
            elif ptype in ("kubernetes", "openshift") and entry.platform != ptype:
                fitting = [n for n, e in m.os.items() if e.platform == ptype]
                errors.append(at(("spec", "os"), f"{os_name} is an OS for {entry.platform}, not {ptype}; "
                                 f"allowed: {', '.join(fitting)}"))
            elif ptype == "openshift" and pver is not None and version_ok and pver not in entry.openshift:
                errors.append(at(("spec", "os"), f"{os_name} is the OS of OpenShift {', '.join(entry.openshift)}, "
                                 f"not {pver}; allowed with OpenShift {pver}: "
                                 f"{', '.join(n for n, e in m.os.items() if pver in e.openshift)}"))
            elif ptype == "kubernetes" and pver is not None and version_ok and pver not in entry.kubernetes:
                errors.append(at(("spec", "os"), f"{os_name} is supported with Kubernetes "
                                 f"{', '.join(entry.kubernetes)} in stack release {release.name}, not {pver}; "
                                 f"allowed with Kubernetes {pver}: "
                                 f"{', '.join(n for n, e in m.os.items() if pver in e.kubernetes)}"))

    dver = _str(spec, "driver", "version")
    if dver is not None and re.match(r"^\d{3}(\.\d+){0,2}$", dver) and cat.drivers and cat.branch(dver) is None:
        errors.append(at(("spec", "driver", "version"), _one_of(dver.split(".")[0],
                         [b.branch for b in cat.drivers], "driver branch")))

    pools = _get(spec, "nodePools")
    seen: dict[str, int] = {}
    for i, pool in enumerate(pools if isinstance(pools, list) else []):
        name = _str(pool, "name")
        if name is not None:
            if name in seen:
                errors.append(at(("spec", "nodePools", i, "name"), f"duplicate pool name {name!r} "
                                 f"(also spec.nodePools[{seen[name]}]); pool names must be unique"))
            seen.setdefault(name, i)
        gpu_name = _str(pool, "gpu")
        if gpu_name is None or not cat.gpus:
            continue
        if gpu_name not in cat.gpus:  # MIG layouts of known models: mig.rules
            errors.append(at(("spec", "nodePools", i, "gpu"), _one_of(gpu_name, cat.gpus, "GPU model")))
    return errors, warnings


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
    errors, warnings = check_rules(loaded, cat)
    if profile is not None:  # rules that need the typed profile
        for rules in (compat_rules, mig_rules, pool_rules, platform_rules):
            e, w = rules.check(loaded, profile, cat)
            errors += e
            warnings += w
    refused = {i.path for i in shape_issues}
    errors = [e for e in errors if e.path not in refused]
    if shape_issues or errors:
        raise UserError(sorted(set(shape_issues) | set(errors)))
    return ValidProfile(loaded, profile, tuple(warnings))
