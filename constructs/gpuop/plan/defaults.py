"""The defaulting pass: each node pool's effective settings, resolved once from the typed profile.

A pool inherits what it does not set from spec (`os`, every field of `driver`), and the cluster has
defaults of its own (the container runtime by platform). Kubernetes resolves such defaults in one place
(`SetDefaults_*`, run before `Validate*`) so that every reader agrees on them; gpuop does the same: the
validate rules (through `Context.defaults`) and the plan builders read `Defaults`, and nobody writes
`pool.os or spec.os` again. In particular a pool's driver exists only when its effective `enabled` is
true: a pool that sets only `driver.version` under `spec.driver.enabled: false` gets no driver, for the
rules (compatibility, known issues, end of life) exactly as for the plan (no DaemonSet, no NVIDIADriver).
"""

from __future__ import annotations

from dataclasses import dataclass

from gpuop.plan.model import Sidecars

# OpenShift nodes run CRI-O only (../shared/refs/gpu-operator/NOTES.md §3); elsewhere containerd.
DEFAULT_RUNTIME = {"kubernetes": "containerd", "openshift": "crio"}


@dataclass(frozen=True)
class PoolDefaults:
    """One pool's settings with spec's values filled in where the pool leaves them out."""
    name: str
    os: str | None                          # pool.os, else spec.os (None: no OS named; preinstalled drivers)
    os_own: bool                            # the pool sets `os` itself (errors point at the pool's field)
    driver: bool                            # gpuop deploys a driver on the pool's nodes (effective enabled)
    driver_own: bool                        # the pool sets driver.enabled: true itself
    driver_version: str | None              # the profile's version or branch (pool's, else spec's); None: the release's
    driver_version_own: bool                # the version comes from the pool's own driver.version
    sidecars: Sidecars                      # RDMA / GDS / GDRCopy as set (inherited from spec.driver)
    rdma_own: bool                          # the pool sets driver.rdma.enabled itself


@dataclass(frozen=True)
class Defaults:
    """The cluster's resolved defaults and every pool's (in profile order)."""
    runtime: str                            # spec.containerRuntime, else the platform's
    sidecars: Sidecars                      # spec.driver's RDMA / GDS / GDRCopy (what a pool inherits)
    pools: tuple[PoolDefaults, ...]

    @property
    def any_driver(self) -> bool:
        return any(p.driver for p in self.pools)


def cluster_sidecars(spec) -> Sidecars:
    """spec.driver's sidecars: what a pool without its own settings gets."""
    d = spec.driver
    return Sidecars(d.rdma.enabled, d.rdma.enabled and d.rdma.useHostMofed, d.gds, d.gdrcopy)


def pool_sidecars(pool, cluster: Sidecars) -> Sidecars:
    """A pool's sidecars: each field of its driver settings, or the cluster's where omitted."""
    d = pool.driver
    if d is None:
        return cluster
    r = d.rdma
    rdma = r.enabled if r is not None and r.enabled is not None else cluster.rdma
    mofed = r.useHostMofed if r is not None and r.useHostMofed is not None else cluster.host_mofed
    return Sidecars(rdma, rdma and mofed, cluster.gds if d.gds is None else d.gds,
                    cluster.gdrcopy if d.gdrcopy is None else d.gdrcopy)


def layout_of(pool) -> dict:
    """A pool's MIG layout ({profile: count}); {} without MIG or without a layout."""
    return dict(pool.mig.layout) if pool.mig and pool.mig.layout else {}


def runtime(spec) -> str:
    return spec.containerRuntime or DEFAULT_RUNTIME[spec.platform.type]


def pool_defaults(spec, pool, cluster: Sidecars) -> PoolDefaults:
    d = pool.driver
    own_enabled = d.enabled if d is not None else None
    own_version = d.version if d is not None else None
    return PoolDefaults(
        name=pool.name,
        os=pool.os or spec.os,
        os_own=pool.os is not None,
        driver=spec.driver.enabled if own_enabled is None else own_enabled,
        driver_own=bool(own_enabled),
        driver_version=spec.driver.version if own_version is None else own_version,
        driver_version_own=own_version is not None,
        sidecars=pool_sidecars(pool, cluster),
        rdma_own=d is not None and d.rdma is not None and d.rdma.enabled is not None)


def of(spec) -> Defaults:
    """The defaulting pass over a typed profile's spec."""
    cluster = cluster_sidecars(spec)
    return Defaults(runtime(spec), cluster, tuple(pool_defaults(spec, p, cluster) for p in spec.nodePools))
