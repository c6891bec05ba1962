"""The rehearsal's report: every check, located (cluster, pool, object kind / namespace / name), as text or
JSON (`--format json`), and the exit code: 0 every expectation met, 3 the rehearsal differs from the plan.

Checks (ids, one per kind of finding):
- `refused`: an object the API server refused on server-side apply, with the API server's own message;
- `labels`: a node's labels differ from the plan's (missing, other value, or an `nvidia.com/` label the plan
  does not give the pool);
- `operand`: a DaemonSet component runs on a different number of the pool's nodes than the plan says;
- `probe`: a Pod requesting one of a pool's advertised resources was not scheduled onto that pool;
- `claim`: a Pod using a ResourceClaimTemplate was not allocated on the template's pool;
- `queue`: Kueue's manager did not admit a probe Workload onto a ResourceFlavor of gpuop's ClusterQueue;
- `daemonset` (a note): a DaemonSet that is no GPU operand (NFD's worker in operator mode), with its counts;
- `not-rehearsed` (a note, never a failure): an object of a kind no installed CRD serves.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field

PROVES = ("admission: every object is accepted by a real kube-apiserver (schemas, CEL rules, defaulting, "
          "references the API server checks)",
          "labelling: nfd-master applies gpuop's NodeFeatureRules to the features of each pool's nodes",
          "placement and rollout counts: the DaemonSet controller and kube-scheduler put each operand on the "
          "pools the plan says, and nowhere else",
          "scheduling: a Pod asking for each advertised resource (GPU, MIG profile, shared replica) lands on "
          "its pool",
          "DRA allocation: the scheduler allocates every claim template on its pool through gpuop's DeviceClasses",
          "queues: Kueue's own manager admits a Workload onto each device-plugin flavor of gpuop's ClusterQueue "
          "(when built: `make kueue`)")
CANNOT = ("nodes are kwok fakes: no kubelet, container runtime, driver, NVML or GPU",
          "no container starts: images, commands, init containers, probes, mounts and host paths are not run",
          "what node agents do is simulated from the plan: the device plugin's resources appear where its pod "
          "is scheduled, GFD's MPS label where GFD runs, DRA ResourceSlices where the DRA kubelet plugin would run",
          "MIG repartitioning, driver builds and upgrades are not performed",
          "kinds without a CRD here (ServiceMonitor, PrometheusRule, OpenShift kinds) are not applied")


@dataclass(frozen=True)
class Finding:
    cluster: str
    check: str                    # refused | labels | operand | probe | claim | queue | not-rehearsed
    ok: bool
    message: str
    pool: str = ""
    kind: str = ""
    namespace: str = ""
    name: str = ""
    expected: object = None
    actual: object = None

    @property
    def where(self) -> str:
        obj = "/".join(x for x in (self.kind, self.namespace, self.name) if x)
        return " ".join(x for x in (self.cluster, f"pool {self.pool}" if self.pool else "", obj) if x)

    def line(self) -> str:
        return f"{self.where}: {self.check}: {self.message}"


@dataclass
class ClusterResult:
    cluster: str
    mode: str = "stack"
    nodes: int = 0
    findings: list[Finding] = field(default_factory=list)
    seconds: float = 0.0
    # step -> wall seconds (run.py's STEPS, in order): where a rehearsal's time goes (bench/rehearsal.py)
    steps: dict[str, float] = field(default_factory=dict)

    @property
    def failures(self) -> list[Finding]:
        return [f for f in self.findings if not f.ok and f.check != "not-rehearsed"]

    @property
    def ok(self) -> bool:
        return not self.failures


def exit_code(results: list[ClusterResult]) -> int:
    return 0 if all(r.ok for r in results) else 3


def text(results: list[ClusterResult]) -> str:
    lines = []
    for r in results:
        checks = [f for f in r.findings if f.check not in ("not-rehearsed", "daemonset")]
        skipped = [f for f in r.findings if f.check == "not-rehearsed"]
        state = "as planned" if r.ok else f"{len(r.failures)} difference(s) from the plan"
        lines.append(f"{r.cluster} ({r.mode}, {r.nodes} fake nodes): {len(checks)} checks, {state}")
        lines += ["  " + f.line() for f in r.failures]
        if skipped:
            kinds = sorted({f.kind for f in skipped})
            lines.append(f"  not rehearsed (no CRD here): {len(skipped)} object(s) of {', '.join(kinds)}")
    lines.append("What this proves: admission, labelling, placement, scheduling, DRA allocation and rollout counts "
                 "on a real control plane. It cannot prove what happens inside a node: the nodes are kwok fakes "
                 "(docs/rehearsal.md).")
    return "\n".join(lines) + "\n"


def as_json(results: list[ClusterResult]) -> str:
    doc = {"apiVersion": "gpuop/v1alpha1", "kind": "Rehearsal", "ok": all(r.ok for r in results),
           "proves": list(PROVES), "cannot": list(CANNOT),
           "clusters": {r.cluster: {"mode": r.mode, "nodes": r.nodes, "ok": r.ok,
                                    "findings": [{k: v for k, v in asdict(f).items() if v not in ("", None)}
                                                 for f in r.findings]} for r in results}}
    return json.dumps(doc, indent=2, sort_keys=True, default=str) + "\n"


def render(results: list[ClusterResult], fmt: str) -> str:
    return as_json(results) if fmt == "json" else text(results)
