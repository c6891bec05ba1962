"""Cluster rules, the catalog pass: which release, OS, platform version, GPU models and driver branches
exist and fit together, read from the plain merged document (not the typed profile), so a profile with a
typo in one field still gets its catalog problems reported in the same run. Unknown names get close
suggestions (case, prefix, spelling) and the full list of allowed ones.
"""

from __future__ import annotations

import re

from gpuop import catalog as catalog_mod
from gpuop.catalog.names import did_you_mean
from gpuop.errors import Issue
from gpuop.profile.load import LoadedProfile


def _one_of(value: str, allowed, what: str, plural: str | None = None) -> str:
    """`value` is not one of `allowed`: suggest close names (case, prefix, spelling) and list them all."""
    allowed = list(allowed)
    hint = did_you_mean(value, allowed, limit=4)
    hint = f" ({hint})" if hint else ""
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
    if dver is not None and re.fullmatch(r"\d{3}(\.\d+){0,2}", dver) and cat.drivers and cat.branch(dver) is None:
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
