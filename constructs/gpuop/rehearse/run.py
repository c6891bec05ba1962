"""`gpuop rehearse`: each cluster's compiled output on a real control plane (rig.py: kube-apiserver, etcd,
kube-controller-manager, kube-scheduler, kwok, nfd-master on loopback) with its simulated GPU fleet
(fleet.py), checked against what the plan expects (expect.py); report.py says what differs.

One fresh control plane per cluster: gpuop's outputs share cluster-scoped names (the NodeFeatureRule
`nvidia-gpu-node-labels`, RuntimeClass `nvidia`, ClusterRoles), so two clusters on one API server would
overwrite each other's objects.

The steps, in the order a real cluster sees them:
1. the CRDs (NFD's; NVIDIA's in operator mode), the fake Nodes and their NodeFeatures, nfd-master;
2. namespaces the output's objects live in but does not create (tenants' claim template namespaces): the
   user's, created as the user would;
3. the output, server-side applied (rig.py: Namespaces first, then the given order): every refusal is a finding
   with the API server's own words;
4. node labels settle (nfd-master applies the NodeFeatureRules), DaemonSets roll out (controller-manager,
   scheduler, kwok);
5. the node agents the fakes lack, simulated where their pods run: the device plugin advertises the pool's
   resources on its nodes, GFD labels MPS nodes `nvidia.com/mps.capable`, and the DRA kubelet plugin (on
   nodes with its deploy label) publishes ResourceSlices; then the DaemonSets settle again;
6. probes: a Pod per advertised resource, a Pod per claim template; the scheduler places them;
7. queues (when the output has Kueue objects): Kueue's own manager admits a probe Workload per flavor (queues.py).
"""

from __future__ import annotations

import contextlib
import tempfile
import time
from pathlib import Path

from gpuop.errors import Issue, UserError
from gpuop.plan.model import StackPlan
from gpuop.rehearse import agents, expect, fleet, objects, queues
from gpuop.rehearse.agents import component
from gpuop.rehearse.report import ClusterResult, Finding

PROBE_NAMESPACE = "gpuop-rehearse"
PROBE_IMAGE = "registry.k8s.io/pause:3.10"      # never pulled: kwok runs no container
FIELD_MANAGER = "gpuop-rehearse"
POLL = 0.1
WORKERS = 8                  # requests in flight at once (creates, applies, probes): round trips overlap
CONFIRM_POLLS = 2            # the rollout as the plan says, this many polls in a row: done
SETTLED_ROLLOUT = 1.5        # seconds: a rollout that differs from the plan and has not changed for this long
SETTLED_STUCK = 12.0         # ... or, with DaemonSets still short of pods, for this long
SETTLED_LABELS = 6.0         # seconds: labels that differ from the plan and have not changed for this long
LABELS_TIMEOUT = 60.0
ROLLOUT_TIMEOUT = 90.0
SCHEDULE_TIMEOUT = 30.0


def select(plans: list[StackPlan], names: list[str]) -> list[StackPlan]:
    """The clusters named on the command line (all when none), unknown names being bad input."""
    if not names:
        return plans
    known = {p.name: p for p in plans}
    missing = [n for n in names if n not in known]
    if missing:
        raise UserError([Issue(n, 0, 0, "", "no such cluster in the profiles; known: " + ", ".join(sorted(known)))
                         for n in missing])
    return [known[n] for n in dict.fromkeys(names)]


def rehearse(plans: list[StackPlan], output: Path, binaries=None, workdir: Path | None = None) -> list[ClusterResult]:
    loaded = [(p, objects.load(output, p.name, p.operator is not None)) for p in plans]   # bad input first
    from gpuop.rehearse import rig       # after: a bad input is reported without a control plane

    if binaries is None:
        try:
            binaries = rig.binaries(build=False)
        except rig.RigError as exc:
            raise UserError(Issue("gpuop rehearse", 0, 0, "", str(exc))) from None
    missing = rig.missing_for_rehearsal(binaries)
    if missing:      # a KUBEBUILDER_ASSETS folder with envtest's two binaries only, say: said before any start
        raise UserError(Issue("gpuop rehearse", 0, 0, "", missing))
    # Kueue's manager, when some cluster has queues and it is built (`make kueue`); else their admission is a note
    kueue = rig.kueue_binary() if any(queues.probes(o.objects, PROBE_NAMESPACE)[0] for _, o in loaded) else None
    results = []
    with tempfile.TemporaryDirectory(prefix="gpuop-rehearse-", dir=workdir) as tmp:
        for plan, out in loaded:
            results.append(rehearse_cluster(rig, plan, out, Path(tmp) / plan.name, binaries, kueue))
    return results


def rehearse_cluster(rig, plan: StackPlan, out: objects.Output, workdir: Path, binaries=None,
                     kueue: Path | None = None) -> ClusterResult:
    start = time.monotonic()
    fl = fleet.build(plan)
    exp = expect.expectations(plan, fl)
    result = ClusterResult(plan.name, out.mode, len(fl.nodes))
    workdir.mkdir(parents=True, exist_ok=True)
    up = time.monotonic()
    with rig.ControlPlane(workdir, binaries=binaries, kwok=True, nfd_master=False, wait=False) as cp:
        result.steps["up"] = round(time.monotonic() - up, 3)
        Rehearsal(plan, out, fl, exp, Api(cp, rig.ApiError), result, kueue).run()
        stop = time.monotonic()
    result.steps["stop"] = round(time.monotonic() - stop, 3)
    result.seconds = time.monotonic() - start
    return result


class Api:
    """The few calls the rehearsal makes beside applying, on the rig's own API connection."""

    def __init__(self, cp, error: type[Exception]):
        self.cp, self.error = cp, error

    def create(self, obj: dict) -> dict:
        m = obj["metadata"]
        return self.cp.request("POST", self.cp.path_of(obj["apiVersion"], obj["kind"], m.get("namespace")), obj)

    def refusal(self, obj: dict) -> str:
        """Create it; the API server's message when it refuses, "" when created."""
        try:
            self.create(obj)
            return ""
        except self.error as exc:
            return getattr(exc, "message", str(exc))

    def ensure(self, obj: dict) -> None:
        """Create, or leave as it is when it exists."""
        try:
            self.create(obj)
        except self.error as exc:
            if getattr(exc, "code", 0) != 409:
                raise

    def get(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> dict:
        return self.cp.read(api_version, kind, name, namespace) or {}

    def list(self, api_version: str, kind: str) -> list[dict]:
        return self.cp.list_objects(api_version, kind)

    def patch(self, api_version: str, kind: str, name: str, patch: dict, sub: str = "") -> dict:
        path = self.cp.path_of(api_version, kind, None, name) + (f"/{sub}" if sub else "")
        return self.cp.request("PATCH", path, patch, content_type="application/merge-patch+json")

    def served(self, api_version: str, kind: str) -> bool:
        """Whether the API server serves the kind (discovery as of the last CRDs applied)."""
        return self.cp.resource(api_version, kind, refresh=False) is not None


class Rehearsal:
    def __init__(self, plan, out, fl, exp, api: Api, result: ClusterResult, kueue: Path | None = None):
        self.plan, self.out, self.fleet, self.exp, self.kueue = plan, out, fl, exp, kueue
        self.cp, self.client, self.result = api.cp, api, result
        self.pool_of = {n.name: n.pool for n in fl.nodes}

    def add(self, **kw) -> None:
        self.result.findings.append(Finding(cluster=self.plan.name, **kw))

    # ---- steps ------------------------------------------------------------------------------------------

    @contextlib.contextmanager
    def step(self, name: str):
        started = time.monotonic()
        try:
            yield
        finally:
            self.result.steps[name] = round(self.result.steps.get(name, 0.0) + time.monotonic() - started, 3)

    def run(self) -> None:
        with self.step("crds"):
            self.install_crds()
        with self.step("fleet"):
            # nfd-master starts while the fleet is created: it labels each node as its NodeFeature arrives
            self.cp.start_nfd_master(wait=False)
            self.client.ensure(_namespace(fleet.NFD_NAMESPACE))
            # a Node's status is kept on create (as a kubelet registers one): capacity without the GPUs
            self.cp.map(self.client.create, [n.node() for n in self.fleet.nodes], WORKERS)
            self.cp.map(self.client.create, [n.node_feature() for n in self.fleet.nodes], WORKERS)
        with self.step("controllers"):
            # the controller-manager, scheduler and kwok started with the API server; the CRDs and the fleet
            # went in meanwhile
            self.cp.wait_ready()
            self.cp.wait_nfd_master()
        with self.step("apply"):
            applicable = self.served_objects()
            self.cp.map(lambda ns: self.client.ensure(_namespace(ns)), _foreign_namespaces(applicable), WORKERS)
            self.refusals(self.cp.apply(applicable, server_side=True, field_manager=FIELD_MANAGER,
                                        workers=WORKERS), applicable)
        with self.step("labels"):
            self.wait_labels()
            self.check_labels()
        with self.step("rollout"):
            # before the agents: the MPS control daemon waits for GFD's label, which agents() sets
            self.wait_rollout(exclude=(expect.MPS,))
        with self.step("agents"):
            self.agents()
        with self.step("rollout-agents"):
            self.wait_rollout()
            self.check_operands()
        with self.step("probes"):
            self.client.ensure(_namespace(PROBE_NAMESPACE))
            self.probes()
        with self.step("claims"):
            self.claims()
        workloads, skipped, added = queues.probes(self.out.objects, PROBE_NAMESPACE)
        if workloads or skipped:
            with self.step("queues"):
                self.queues(workloads, skipped, added)

    def install_crds(self) -> None:
        """The CRDs, each until Established, then until discovery serves their kinds."""
        names = []
        for crd, refused in zip(self.out.crds, self.cp.map(self.client.refusal, self.out.crds, WORKERS)):
            if refused:
                self.add(check="refused", ok=False, kind="CustomResourceDefinition", name=crd["metadata"]["name"],
                         message=refused)
            else:
                names.append(crd["metadata"]["name"])
        self.cp.wait_established(names, LABELS_TIMEOUT)
        kinds = {(f"{c['spec']['group']}/{v['name']}", c["spec"]["names"]["kind"])
                 for c in self.out.crds if c["metadata"]["name"] in names
                 for v in c["spec"].get("versions", []) if v.get("served", True)}
        # Established comes a moment before discovery lists the kinds: wait for both
        self.cp.wait_for(lambda: kinds <= set(self.cp.discover()), LABELS_TIMEOUT, "discovery to serve the CRDs",
                         lambda: ", ".join(sorted(k for _, k in kinds - set(self.cp.discover()))))

    def refusals(self, problems, objs: list[dict]) -> None:
        for p in problems or []:
            ref = _problem_ref(p, objs)
            self.add(check="refused", ok=False, kind=ref[0], namespace=ref[1], name=ref[2],
                     message=_problem_message(p))

    def served_objects(self) -> list[dict]:
        out = []
        for o in self.out.objects:
            api = o.get("apiVersion", "")
            if self.client.served(api, o["kind"]):
                out.append(o)
            else:
                m = o["metadata"]
                self.add(check="not-rehearsed", ok=True, kind=o["kind"], namespace=m.get("namespace", ""),
                         name=m.get("name", ""), message=f"{api} {o['kind']} is served by no CRD installed here")
        return out

    def nodes(self) -> dict[str, dict]:
        return {n["metadata"]["name"]: n for n in self.client.list("v1", "Node")}

    def wait_labels(self) -> None:
        """Until every node carries its pool's expected labels, or the labels stop changing."""
        want = {n: dict(e.labels) for e in self.exp for n in e.nodes}
        last, same = None, 0
        deadline = time.monotonic() + LABELS_TIMEOUT
        while time.monotonic() < deadline:
            labels = {name: n["metadata"].get("labels", {}) for name, n in self.nodes().items()}
            if all(all(labels.get(n, {}).get(k) == v for k, v in w.items()) for n, w in want.items()):
                return
            same = same + 1 if labels == last else 0
            if same * POLL >= SETTLED_LABELS:     # nfd-master's first pass can lag: give it longer to move
                return
            last = labels
            time.sleep(POLL)

    def check_labels(self) -> None:
        nodes = self.nodes()
        for e in self.exp:
            want = dict(e.labels)
            for name in e.nodes:
                have = nodes.get(name, {}).get("metadata", {}).get("labels", {})
                missing = {k: v for k, v in want.items() if have.get(k) != v}
                extra = {k: v for k, v in have.items()
                         if k.startswith("nvidia.com/") and k not in want and k != expect.MPS_CAPABLE}
                ok = not missing and not extra
                absent = {k: v for k, v in missing.items() if k not in have}
                other = [f"{k}={v} (has {have[k]})" for k, v in sorted(missing.items()) if k in have]
                msg = "labels as planned" if ok else "; ".join(
                    ([f"missing {_pairs(absent)}"] if absent else []) +
                    ([f"other value: {', '.join(other)}"] if other else []) +
                    ([f"not planned for this pool: {_pairs(extra)}"] if extra else []))
                self.add(check="labels", ok=ok, pool=e.pool, kind="Node", name=name, message=msg,
                         expected=dict(sorted(missing.items())) or None, actual=dict(sorted(extra.items())) or None)

    def daemonsets(self) -> list[dict]:
        return [d for d in self.client.list("apps/v1", "DaemonSet")
                if d["metadata"]["namespace"] not in ("kube-system",)]

    def ds_pods(self) -> dict[str, list[dict]]:
        """DaemonSet uid -> its pods."""
        out: dict[str, list[dict]] = {}
        for p in self.client.list("v1", "Pod"):
            for ref in p["metadata"].get("ownerReferences", []):
                if ref.get("kind") == "DaemonSet":
                    out.setdefault(ref["uid"], []).append(p)
        return out

    def rollout_state(self) -> tuple[bool, dict[tuple[str, str], int]]:
        """(every DaemonSet has observed its spec and bound a pod per desired node, (component, pool) -> the
        pods bound on the pool's nodes)."""
        pods = self.ds_pods()
        done, per = True, {}
        for d in self.daemonsets():
            st = d.get("status", {})
            bound = [p["spec"]["nodeName"] for p in pods.get(d["metadata"]["uid"], []) if p["spec"].get("nodeName")]
            done = done and st.get("observedGeneration", 0) >= d["metadata"]["generation"] \
                and st.get("desiredNumberScheduled", -1) == len(bound)
            comp = component(d)
            for node in bound:
                key = (comp or "", self.pool_of.get(node, ""))
                per[key] = per.get(key, 0) + 1
        return done, per

    def planned(self, exclude: tuple[str, ...]) -> dict[tuple[str, str], int]:
        """(component, pool) -> the pods the plan puts on the pool's nodes (components in `exclude` left out)."""
        return {(c, e.pool): n for e in self.exp for c, n in e.operands if n and c not in exclude}

    def wait_rollout(self, exclude: tuple[str, ...] = ()) -> None:
        """Until every DaemonSet has a bound pod per desired node and the GPU operands run where the plan
        says (a second look confirms it), or, when they differ from the plan, until nothing has changed
        for SETTLED_ROLLOUT seconds (the verdict is then check_operands')."""
        want = self.planned(exclude)
        last, same, matched = None, 0, 0
        deadline = time.monotonic() + ROLLOUT_TIMEOUT
        while time.monotonic() < deadline:
            done, per = self.rollout_state()
            gpu = {k: v for k, v in per.items() if k[0] and k[0] not in exclude}
            matched = matched + 1 if done and gpu == want else 0
            same = same + 1 if (done, per) == last else 0
            if matched >= CONFIRM_POLLS or (same * POLL >= SETTLED_ROLLOUT and (done or same * POLL >= SETTLED_STUCK)):
                return
            last = (done, per)
            time.sleep(POLL)

    def agents(self) -> None:
        agents.play(self.client, self.plan, self.fleet, lambda fn, nodes: self.cp.map(fn, nodes, WORKERS))

    def check_operands(self) -> None:
        pods = self.ds_pods()
        per: dict[tuple[str, str], int] = {}            # (component, node) -> pods
        sets: dict[str, list[str]] = {}                 # component -> "ns/name desired/scheduled"
        for d in self.daemonsets():
            comp = component(d)
            st = d.get("status", {})
            bound = [p for p in pods.get(d["metadata"]["uid"], []) if p["spec"].get("nodeName")]
            if comp is None:        # not a GPU operand (e.g. NFD's worker in operator mode): no plan to compare
                self.add(check="daemonset", ok=True, kind="DaemonSet", namespace=d["metadata"]["namespace"],
                         name=d["metadata"]["name"], message=f"not a GPU operand: desired "
                         f"{st.get('desiredNumberScheduled', 0)}, scheduled {len(bound)}")
                continue
            sets.setdefault(comp, []).append(f"{d['metadata']['namespace']}/{d['metadata']['name']} "
                                             f"desired {st.get('desiredNumberScheduled', 0)}, scheduled {len(bound)}")
            for p in bound:
                per[(comp, p["spec"]["nodeName"])] = per.get((comp, p["spec"]["nodeName"]), 0) + 1
        comps = sorted({c for e in self.exp for c, _ in e.operands} | set(sets))
        for e in self.exp:
            want = dict(e.operands)
            for comp in comps:
                expected = want.get(comp, 0)
                actual = sum(per.get((comp, n), 0) for n in e.nodes)
                if comp not in sets and expected == 0:
                    continue
                ok = actual == expected
                where = "; ".join(sets.get(comp, [])) or "no DaemonSet in the output"
                self.add(check="operand", ok=ok, pool=e.pool, kind="DaemonSet", name=comp,
                         expected=expected, actual=actual,
                         message=(f"{actual} of the pool's {len(e.nodes)} nodes run it, as planned" if ok else
                                  f"runs on {actual} of the pool's {len(e.nodes)} nodes, the plan says {expected} "
                                  f"({where})"))

    def _schedule(self, pods: list[dict]) -> list[dict]:
        """Create the pods at once and wait until the scheduler binds each or says it cannot; per pod, in
        order, the pod as last read ({"refused": message} when the API server refused it)."""
        def create(pod: dict) -> dict | None:
            try:
                self.client.create(pod)
                return None
            except self.client.error as exc:
                return {"refused": getattr(exc, "message", str(exc))}

        got: list[dict | None] = self.cp.map(create, pods, WORKERS)
        waiting = [i for i, g in enumerate(got) if g is None]
        deadline = time.monotonic() + SCHEDULE_TIMEOUT
        while waiting:
            read = self.cp.map(lambda i: self.client.get("v1", "Pod", pods[i]["metadata"]["name"],
                                                         pods[i]["metadata"]["namespace"]), waiting, WORKERS)
            for i, pod in zip(waiting, read):
                got[i] = pod
            waiting = [i for i, pod in zip(waiting, read) if not _placed(pod)]
            if not waiting or time.monotonic() >= deadline:
                break
            time.sleep(POLL)
        return [g or {} for g in got]

    def probes(self) -> None:
        todo = [(e, pr) for e in self.exp for pr in e.probes]
        pods = [probe_pod(pr.name, PROBE_NAMESPACE, dict(pr.pinned), {pr.resource: "1"}, pr.hosts)
                for _, pr in todo]
        for (e, pr), got in zip(todo, self._schedule(pods)):
            pin = " (pinned to the pool's nodeSelector)" if pr.pinned else " (pinned to the pool's nodes)" * bool(pr.hosts)
            self._judge(e, got, "probe", "Pod", PROBE_NAMESPACE, pr.name, f"a pod requesting 1 {pr.resource}" + pin)

    def claims(self) -> None:
        todo = [(e, c) for e in self.exp for c in e.claims]
        pods = []
        for _, c in todo:
            pod = probe_pod(c.name, c.namespace, {}, {})
            pod["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": c.template}]
            pod["spec"]["containers"][0]["resources"] = {"claims": [{"name": "gpu"}]}
            pods.append(pod)
        for (e, c), got in zip(todo, self._schedule(pods)):
            self._judge(e, got, "claim", "ResourceClaimTemplate", c.namespace, c.template,
                        f"a pod using claim template {c.template}", claim=True)

    def queues(self, workloads: list[dict], skipped: list[tuple[str, str]], added: list[dict]) -> None:
        """Kueue's manager admits a probe Workload per flavor (rehearse/queues.py), or the step is a note."""
        for flavor, why in skipped:
            self.add(check="not-rehearsed", ok=True, kind="ResourceFlavor", name=flavor, message=why)
        if not workloads:
            return
        if self.kueue is None:
            self.add(check="not-rehearsed", ok=True, kind="ClusterQueue", message=(
                "Kueue's controller manager is not built (`make kueue`): whether Kueue admits work onto each "
                "flavor is not rehearsed"))
            return
        problems = self.cp.apply(queues.crds(self.kueue.parent) + queues.install_objects(), server_side=True,
                                 field_manager=FIELD_MANAGER, force=True, workers=WORKERS)
        if problems:
            raise RuntimeError(f"Kueue's install on the rehearsal API server: {problems[0]}")
        certdir = self.cp.workdir / "kueue-certs"
        self.cp.start_kueue(self.kueue, queues.config(self.cp.workdir, self.cp.kueue_ports()))
        # the kubelet's part: Kueue writes its certificates into the Secret, its pod sees them as files
        self.cp.wait_for(lambda: queues.mount_certs(self.client.get("v1", "Secret", queues.SECRET, queues.NAMESPACE),
                                                    certdir), 120.0, "Kueue's webhook certificates in its Secret")
        self.cp.wait_kueue()
        self.cp.map(self.client.ensure, added, WORKERS)
        refused = self.cp.map(self.client.refusal, workloads, WORKERS)
        for wl, why in zip(workloads, refused):
            if why:
                self.add(check="queue", ok=False, pool=wl["metadata"]["labels"]["gpuop.dev/probe-flavor"],
                         kind="Workload", namespace=wl["metadata"]["namespace"], name=wl["metadata"]["name"],
                         message=f"the probe Workload is refused by the API server: {why}")
        workloads = [wl for wl, why in zip(workloads, refused) if not why]
        got = queues.wait_admitted(lambda w: self.client.get(queues.API, "Workload", w["metadata"]["name"],
                                                            w["metadata"]["namespace"]), workloads,
                                   self.cp.check_alive)
        for wl, now in zip(workloads, got):
            meta = wl["metadata"]
            flavor = meta["labels"]["gpuop.dev/probe-flavor"]
            resource = next(iter(wl["spec"]["podSets"][0]["template"]["spec"]["containers"][0]["resources"]
                                 ["requests"]))
            ok, said = queues.admitted(now)
            on_flavor = ok and f"{resource} on flavor {flavor}" in said
            what = f"a Workload requesting 1 {resource} on queue {wl['spec']['queueName']}"
            self.add(check="queue", ok=on_flavor, pool=flavor, kind="Workload", namespace=meta["namespace"],
                     name=meta["name"], expected=flavor, actual=said,
                     message=(f"{what} is admitted by Kueue: {said}" if on_flavor else
                              f"{what} is admitted, but not onto flavor {flavor}: {said}" if ok else
                              f"{what} is not admitted by Kueue: {said}"))

    def _judge(self, e, got: dict, check: str, kind: str, ns: str, name: str, what: str, claim: bool = False):
        if "refused" in got:
            self.add(check=check, ok=False, pool=e.pool, kind=kind, namespace=ns, name=name,
                     message=f"{what}: refused by the API server: {got['refused']}")
            return
        node = got.get("spec", {}).get("nodeName")
        if not node:
            why = next((c.get("message", "") for c in got.get("status", {}).get("conditions", [])
                        if c.get("type") == "PodScheduled"), "") or "not scheduled"
            self.add(check=check, ok=False, pool=e.pool, kind=kind, namespace=ns, name=name,
                     message=f"{what} is not scheduled: {why}")
            return
        pool = self.pool_of.get(node, "")
        ok = pool == e.pool
        msg = f"{what} is scheduled on {node} (pool {pool})"
        if ok and claim:
            allocated = self._allocated(got)
            ok = allocated is not None and all(self.pool_of.get(n) == e.pool for n in allocated)
            msg += f", its claim allocated on {', '.join(sorted(allocated))}" if allocated else \
                ", but its claim is not allocated"
        self.add(check=check, ok=ok, pool=e.pool, kind=kind, namespace=ns, name=name,
                 message=msg if ok else msg + f", not on pool {e.pool}" * (pool != e.pool),
                 expected=e.pool, actual=pool)

    def _allocated(self, pod: dict) -> set[str] | None:
        ns = pod["metadata"]["namespace"]
        for st in pod.get("status", {}).get("resourceClaimStatuses", []) or []:
            if not st.get("resourceClaimName"):
                continue
            claim = self.client.get("resource.k8s.io/v1", "ResourceClaim", st["resourceClaimName"], ns)
            alloc = (claim.get("status") or {}).get("allocation")
            if not alloc:
                return None
            return {r["pool"] for r in alloc.get("devices", {}).get("results", [])}
        return None


def _placed(pod: dict) -> bool:
    """Bound to a node, or found unschedulable: every resource is advertised before the probes, so the
    scheduler's verdict is final."""
    return bool(pod.get("spec", {}).get("nodeName")) or any(
        c.get("type") == "PodScheduled" and c.get("reason") == "Unschedulable"
        for c in pod.get("status", {}).get("conditions", []) or [])


def probe_pod(name: str, namespace: str, selector: dict, limits: dict, hosts: tuple[str, ...] = ()) -> dict:
    spec = {"containers": [{"name": "probe", "image": PROBE_IMAGE,
                            **({"resources": {"limits": limits}} if limits else {})}],
            "tolerations": [{"operator": "Exists"}], "terminationGracePeriodSeconds": 0}
    if selector:
        spec["nodeSelector"] = selector
    if hosts:
        spec["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": list(hosts)}]}]}}}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace}, "spec": spec}


def _namespace(name: str) -> dict:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}


def _foreign_namespaces(objs: list[dict]) -> list[str]:
    """Namespaces objects live in that the output does not create (the user's: tenants' namespaces)."""
    made = {o["metadata"]["name"] for o in objs if o.get("kind") == "Namespace"}
    used = {o["metadata"].get("namespace") for o in objs} - {None, "", "default", "kube-system"}
    return sorted(used - made)


def _pairs(d: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(d.items()))


def _problem_ref(p, objs: list[dict]) -> tuple[str, str, str]:
    return p.kind, p.namespace, p.name


def _problem_message(p) -> str:
    return p.message
