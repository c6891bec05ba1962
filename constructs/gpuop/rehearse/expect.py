"""What a rehearsal must observe, per pool, from the plan alone (never from the compiled output, so a wrong
output cannot move the expectation with it):

- labels: every node of the pool carries the labels the plan gives it: `nvidia.com/gpu.present=true`, the
  deploy label of every DaemonSet component the plan turns on (the MIG manager's on MIG-capable GPUs only;
  the device plugin's per pool in a cluster with DRA pools), the pool's NodeFeatureRule labels (MIG and
  plugin configs, DRA / device-plugin switches: plan/pools.py), its nodeSelector and node-group labels.
- operands: per DaemonSet component, how many of the pool's nodes run its pod: all of them where the pool's
  labels deploy it (the driver only where one of the plan's driver variants serves the pool, the MPS control
  daemon only on MPS pools), none elsewhere.
- probes: one Pod per extended resource the pool advertises (full GPU, each MIG profile, shared replicas;
  plan/capacity.py), requesting one; it must land on the pool. It is pinned by the pool's nodeSelector (by its
  nodes' names when it has none) only when another pool advertises the same resource; a resource only this
  pool advertises is requested unpinned, so landing anywhere else (or nowhere) is a finding.
- claims (DRA): every ResourceClaimTemplate of the pool, used by one Pod that must be allocated on the pool.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from gpuop.catalog import dra as dra_catalog
from gpuop.catalog import load as load_catalog
from gpuop.plan.model import StackPlan
from gpuop.rehearse.fleet import Fleet, Pairs, covers

DEPLOY = "nvidia.com/gpu.deploy."
MPS_CAPABLE = "nvidia.com/mps.capable"        # GFD's label on MPS nodes; the MPS control daemon selects it
MPS = "mps-control-daemon"
DRIVER = "driver"


@dataclass(frozen=True)
class Probe:
    pool: str
    resource: str
    pinned: Pairs = ()                 # the nodeSelector the probe carries (() : unpinned)
    # the pool's nodes by name, for a resource another pool advertises too where the pool has no nodeSelector
    # (pools told apart by their GPU alone): nothing else keeps the probe off the other pool's nodes
    hosts: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        return "probe-" + "".join(c if c.isalnum() else "-" for c in f"{self.pool}-{self.resource}".lower())


@dataclass(frozen=True)
class ClaimProbe:
    pool: str
    template: str
    namespace: str

    @property
    def name(self) -> str:
        return f"claim-probe-{self.template}"


@dataclass(frozen=True)
class PoolExpect:
    pool: str
    nodes: tuple[str, ...]
    labels: Pairs
    operands: tuple[tuple[str, int], ...]      # (component, pods on the pool's nodes)
    probes: tuple[Probe, ...] = ()
    claims: tuple[ClaimProbe, ...] = ()


# The DaemonSet components, by deploy label (components/*.py `deploy_label`), whether their label goes on
# MIG-capable GPUs only, and when the plan turns them on (as stack/derive.py does). A rehearsal sees the plan
# model, not the components; tests/test_rehearse_units.py checks this table against the component registry.
OPERANDS: tuple[tuple[str, bool, Callable[[StackPlan], bool]], ...] = (
    (DRIVER, False, lambda p: bool(p.driver_variants)),
    ("container-toolkit", False, lambda p: p.toolkit),
    ("operator-validator", False, lambda p: True),
    ("device-plugin", False, lambda p: p.device_plugin),
    ("dcgm", False, lambda p: p.dcgm),
    ("dcgm-exporter", False, lambda p: p.dcgm_exporter is not None),
    ("gpu-feature-discovery", False, lambda p: p.gfd),
    ("mig-manager", True, lambda p: p.pool_configs.mig_manager),
    ("node-status-exporter", False, lambda p: p.node_status_exporter is not None),
)


def components(plan: StackPlan) -> tuple[tuple[str, bool], ...]:
    """(deploy label name, MIG-capable only) of every DaemonSet component the plan turns on."""
    return tuple((name, mig_only) for name, mig_only, on in OPERANDS if on(plan))


def pool_labels(plan: StackPlan, pool: str, gpu: str) -> Pairs:
    cat = load_catalog()
    mig_capable = bool(getattr(cat.gpus.get(gpu), "migCapable", False))
    pl = next((p for p in plan.pool_configs.pools if p.name == pool), None)
    out: dict[str, str] = {}
    if plan.nfd.rules:
        out["nvidia.com/gpu.present"] = "true"
        for name, mig_only in components(plan):
            if name == "device-plugin" and plan.dra is not None:
                continue                                     # per pool (plan/pools.py)
            if mig_only and not mig_capable:
                continue
            out[DEPLOY + name] = "true"
    if pl is not None:
        out.update(dict(pl.nfd))
        out.update(dict(pl.manual))
        out.update(dict(pl.node_selector))
    return tuple(sorted(out.items()))


def _serves_driver(plan: StackPlan, selector: dict) -> bool:
    return any(covers(v.pool_terms, selector) for v in plan.driver_variants)


def operands(plan: StackPlan, pool, labels: dict, nodes: int) -> tuple[tuple[str, int], ...]:
    out = []
    for name, _ in components(plan):
        on = labels.get(DEPLOY + name) == "true"
        if name == DRIVER:
            on = on and _serves_driver(plan, dict(pool.node_selector))
        out.append((name, nodes if on else 0))
    if any(name == "device-plugin" for name, _ in components(plan)):
        mps = any(p.name == pool.pool and p.sharing.startswith("MPS") for p in plan.pools)
        on = mps and labels.get(DEPLOY + "device-plugin") == "true"
        out.append((MPS, nodes if on else 0))
    return tuple(sorted(out))


def probes(plan: StackPlan, fleet: Fleet | None = None) -> dict[str, tuple[Probe, ...]]:
    owners: dict[str, set[str]] = {}
    for cap in plan.capacity.pools:
        for name, _ in cap.per_gpu:
            owners.setdefault(name, set()).add(cap.pool)
    out = {}
    for cap in plan.capacity.pools:
        hosts = () if fleet is None or cap.node_selector else tuple(n.name for n in fleet.of_pool(cap.pool))
        out[cap.pool] = tuple(Probe(cap.pool, name, cap.node_selector, hosts) if len(owners[name]) > 1
                              else Probe(cap.pool, name) for name, _ in cap.per_gpu)
    return out


def claims(plan: StackPlan) -> dict[str, tuple[ClaimProbe, ...]]:
    out: dict[str, list[ClaimProbe]] = {}
    if plan.dra is not None:
        for t in plan.dra.claim_templates:
            out.setdefault(t.pool, []).append(ClaimProbe(t.pool, t.name, t.namespace))
    return {k: tuple(v) for k, v in out.items()}


def expectations(plan: StackPlan, fleet: Fleet) -> tuple[PoolExpect, ...]:
    """Per pool of the plan, what the rehearsal must see (pure: plan and catalogs)."""
    pr, cl = probes(plan, fleet), claims(plan)
    out = []
    for cap in plan.capacity.pools:
        nodes = tuple(n.name for n in fleet.of_pool(cap.pool))
        labels = pool_labels(plan, cap.pool, cap.gpu)
        out.append(PoolExpect(cap.pool, nodes, labels, operands(plan, cap, dict(labels), len(nodes)),
                              pr.get(cap.pool, ()), cl.get(cap.pool, ())))
    return tuple(out)


def dra_driver() -> str:
    return dra_catalog.load().driver


def dra_deploy_label() -> str:
    return dra_catalog.load().deployLabel
