"""Platform variants, planned: which driver DaemonSets a cluster needs and which nodes each one selects.

One driver DaemonSet (`nvidia-driver-daemonset`) is enough while every GPU node takes the same driver
image. When that is not so, the Operator splits the driver state at run time from the node labels it
finds; gpuop makes the same split at compile time from the profile:

- OpenShift, Driver Toolkit builds: one DaemonSet per RHCOS build in `spec.driver.rhcosVersions`,
  named `nvidia-driver-daemonset-<build>`, selected by NFD's OSTREE_VERSION label, image tag
  `<version>-rhcos<x.y>` (object_controls.go transformOpenShiftDriverToolkitContainer; the Operator
  finds the builds on the nodes, gpuop reads them from the profile).
- Precompiled drivers: one per kernel in `spec.driver.kernels` (and OS), named
  `nvidia-driver-daemonset-<kernel>-<os>`, selected by NFD's kernel-version.full label, tag
  `<branch>-<kernel>-<os>` (transformPrecompiledDriverDaemonset, resolveDriverTag).
- Mixed OS (a pool's `os`): one per OS image tag, selected by NFD's system-os_release labels
  (ID + VERSION_ID, or VERSION_ID.major where the tag has no minor: rhel9), as the NVIDIADriver
  path's per-OS node pools (internal/state/nodepool.go).
- Per-pool drivers (a pool's `driver`): one per distinct (version, sidecars, OS), the sidecars being the
  pool's RDMA / GDS / GDRCopy settings (`Sidecars`; the Operator's NVIDIADriver CRs carry them per CR,
  so pools with different sidecars are different drivers there too). A name gets `-<version>` when
  versions differ, `-<os tag>` when OSes differ and the sidecar tokens (`-rdma[-hostmofed][-gds][-gdrcopy]`)
  when sidecar settings differ; the DaemonSet without sidecars keeps the plain name, so an inference
  pool's DaemonSet is not renamed when a training pool turns RDMA on. When one OS carries more than
  one driver setting (two versions, other sidecars, or a pool with a preinstalled driver), each of those
  DaemonSets also requires its pools' nodeSelector labels: one required node-affinity term per pool. The
  validate stage (platform_rules.py) refuses pools whose selectors could match the same node, so no
  node can match two driver DaemonSets (tests/test_platform_variants.py proves it on the output).

Every DaemonSet of a split gets `app: <its name>` as selector label (upstream does so for the DTK
split; gpuop does it for every split so no two DaemonSets share a selector). Catalog facts (label
keys, OS selectors, which OS/branches have precompiled images) come from releases.yaml.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from gpuop.plan.defaults import Defaults, pool_sidecars
from gpuop.plan.defaults import of as resolved
from gpuop.plan.model import DriverVariant, Sidecars

DS_BASE = "nvidia-driver-daemonset"
RHCOS_BUILD = re.compile(r"^4(\d{1,2})\.\d+\.\d{12}-\d+$")    # 419.96.202507091512-0 -> OpenShift 4.19
ARCH = re.compile(r"x86_64(?:_64k)?|aarch64(?:_64k)?")


def rhcos_minor(build: str) -> str | None:
    """`419.96.202507091512-0` -> "4.19" (RHCOS builds start with the OpenShift major and minor)."""
    m = RHCOS_BUILD.match(build)
    return f"4.{int(m.group(1))}" if m else None


def sanitized_kernel(kernel: str) -> str:
    """As the Operator's getSanitizedKernelVersion: no arch, '_' -> '.', no trailing '.', lower case."""
    return ARCH.sub("", kernel).replace("_", ".").rstrip(".").lower()


def full_version(version: str | None, default: str, cat) -> str:
    """A profile driver version (full, branch or None) -> a full version: a branch becomes the catalog's
    newest release of it, None the release's default."""
    if version is None:
        return default
    branch = cat.branch(version) if "." not in version else None
    return branch.latest if branch else version


def version_resolver(spec, default: str, cat):
    """A profile driver version (full, branch or None) -> the version an image tag uses: the full
    version (a branch becomes the catalog's newest of it), or the branch for precompiled drivers,
    which NVIDIA publishes per branch."""
    if spec.driver.precompiled:
        return lambda v: (v or default).split(".")[0]

    return lambda v: full_version(v, default, cat)


@dataclass(frozen=True)
class PoolDriverSetting:
    pool: str
    selector: tuple[tuple[str, str], ...]
    os: str
    version: str | None                                 # None: preinstalled driver (no DaemonSet)
    sidecars: Sidecars = Sidecars()                     # always off with a preinstalled driver

    @property
    def driver(self) -> tuple[str | None, Sidecars]:
        """What makes two pools need different driver DaemonSets (or NVIDIADriver CRs) on one OS."""
        return self.version, self.sidecars


def pool_settings(spec, resolve, cluster: Sidecars | None = None, defaults: Defaults | None = None
                  ) -> list[PoolDriverSetting]:
    """Each pool's OS and driver (`resolve` turns a profile version/branch/None into the version used;
    `cluster`: the sidecars of pools that set none, omitted: spec.driver's; `defaults`: the defaulting
    pass's result, computed here when omitted)."""
    pools = (defaults or resolved(spec)).pools
    out = []
    for pool, d in zip(spec.nodePools, pools):
        sidecars = d.sidecars if cluster is None else pool_sidecars(pool, cluster)
        out.append(PoolDriverSetting(pool.name, tuple(sorted(pool.nodeSelector.items())), d.os,
                                     resolve(d.driver_version) if d.driver else None,
                                     sidecars if d.driver else Sidecars()))
    return out


def os_selector(release, os_name: str) -> tuple[tuple[str, str], ...]:
    keys = release.nodeLabels.model_dump()
    return tuple(sorted((keys[k], v) for k, v in release.matrix.os[os_name].select.items()))


def _groups(settings: list[PoolDriverSetting], release) -> dict[tuple, list[PoolDriverSetting]]:
    """Pools by what tells their nodes apart without pool labels: (OS image tag, OS node labels)."""
    groups: dict[tuple, list[PoolDriverSetting]] = {}
    for s in settings:
        if s.os is None:        # no OS named: the pool's driver is preinstalled (validate/distribution.py)
            groups.setdefault(("", ()), []).append(s)
            continue
        entry = release.matrix.os[s.os]
        groups.setdefault((entry.tag, os_selector(release, s.os)), []).append(s)
    return groups


def driver_variants(spec, release, resolve, defaults: Defaults | None = None) -> tuple[DriverVariant, ...]:
    """The driver DaemonSets of a valid profile, in a stable order (empty: no driver DaemonSet)."""
    settings = pool_settings(spec, resolve, defaults=defaults)
    groups = _groups(settings, release)
    labels_of = release.nodeLabels
    openshift = spec.platform.type == "openshift"
    precompiled = spec.driver.precompiled
    multi_os = len(groups) > 1
    plain: list[tuple] = []     # (version, sidecars, os tag, node selector, pool terms, os ID)
    for (tag, selector), members in sorted(groups.items()):
        if not tag:             # the preinstalled-driver pools without an OS: no DaemonSet
            continue
        os_id = release.matrix.os[members[0].os].select.get("osId", "")   # one group = one OS ID (its selector)
        drivers = sorted({s.driver for s in members if s.version is not None})
        needs_terms = len({s.driver for s in members}) > 1
        for version, sidecars in drivers:
            terms = (tuple(sorted({s.selector for s in members if s.driver == (version, sidecars)}))
                     if needs_terms else ())
            plain.append((version, sidecars, tag, selector if multi_os else (), terms, os_id))
    multi_version = len({p[0] for p in plain}) > 1
    multi_sidecars = len({p[1] for p in plain}) > 1
    out: list[DriverVariant] = []
    for version, sidecars, tag, selector, terms, os_id in plain:
        version_part = [version] if multi_version else []
        side_part = list(sidecars.tokens) if multi_sidecars else []
        if openshift:
            for build in spec.driver.rhcosVersions:
                out.append(DriverVariant(
                    name="-".join([DS_BASE] + version_part + [build] + side_part), version=version,
                    tag=f"{version}-rhcos{rhcos_minor(build)}", node_selector=((labels_of.rhcosBuild, build),),
                    pool_terms=terms, rhcos=build, split=True, os_id=os_id, sidecars=sidecars,
                    labels=((release.openshift.dtkLabel, "true"), (release.openshift.dtkVersionLabel, build)),
                    pod_labels=((release.openshift.dtkLabel, "true"),)))
        elif precompiled:
            for kernel in spec.driver.kernels:
                k = sanitized_kernel(kernel)
                pre = (("nvidia.com/precompiled", "true"), ("nvidia.com/precompiled.kernel-version", k))
                out.append(DriverVariant(
                    name="-".join([DS_BASE] + version_part + [k, tag] + side_part), version=version,
                    tag=f"{version}-{kernel}-{tag}", node_selector=tuple(sorted(selector + ((labels_of.kernel, kernel),))),
                    pool_terms=terms, kernel=kernel, split=True, labels=pre, pod_labels=pre, os_id=os_id,
                    sidecars=sidecars))
        else:
            parts = version_part + ([tag] if multi_os else []) + side_part
            out.append(DriverVariant(name="-".join([DS_BASE] + parts), version=version, tag=f"{version}-{tag}",
                                     node_selector=selector, pool_terms=terms, split=bool(parts), os_id=os_id,
                                     sidecars=sidecars))
    return tuple(out)


def pools_overlap(a: tuple[tuple[str, str], ...], b: tuple[tuple[str, str], ...]) -> bool:
    """Whether one node could carry both label sets: no key that both require with different values."""
    da, db = dict(a), dict(b)
    return not any(k in db and db[k] != v for k, v in da.items())
