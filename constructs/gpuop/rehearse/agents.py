"""The node agents the kwok nodes lack, played where their pods run (the rehearsal's step 5, and the GitOps lane
while Flux delivers): the device plugin advertises the pool's resources (gpuop's capacity computation) on the nodes
its pod runs on, GFD labels MPS pools' nodes `nvidia.com/mps.capable=true` where its pod runs, and NVIDIA's DRA
kubelet plugin publishes a ResourceSlice on each node carrying its deploy label.

`play` acts once on what it finds and returns what it did, so a caller that polls (`Agents`, a thread beside Flux,
whose releases install the DaemonSets at their own pace) acts on each node once: a real agent starts with its pod.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from gpuop.rehearse import expect, fleet

POLL = 1.0                   # seconds between two looks of the agents' thread


def component(ds: dict) -> str | None:
    """A DaemonSet's component: the deploy label its pods select (the MPS control daemon: mps.capable)."""
    selector = ds["spec"]["template"]["spec"].get("nodeSelector") or {}
    if selector.get(expect.MPS_CAPABLE) == "true":
        return expect.MPS
    for key in selector:
        if key.startswith(expect.DEPLOY):
            return key[len(expect.DEPLOY):]
    return None


def running(client) -> dict[str, set[str]]:
    """Component -> the nodes its DaemonSets' pods are bound to."""
    comp = {d["metadata"]["uid"]: component(d) or "" for d in client.list("apps/v1", "DaemonSet")
            if d["metadata"]["namespace"] != "kube-system"}
    out: dict[str, set[str]] = {}
    for p in client.list("v1", "Pod"):
        for ref in p["metadata"].get("ownerReferences", []):
            if ref.get("kind") == "DaemonSet" and ref.get("uid") in comp and p["spec"].get("nodeName"):
                out.setdefault(comp[ref["uid"]], set()).add(p["spec"]["nodeName"])
    return out


def play(client, plan, fl: fleet.Fleet, each: Callable[[Callable[[Any], Any], list], Any],
         done: frozenset[tuple[str, str]] = frozenset()) -> set[tuple[str, str]]:
    """What each agent does now on the nodes its pod runs on, skipping what `done` says was done; `each(fn, items)`
    runs fn over the nodes (the rehearsal: several requests in flight). Returns the (agent, node) pairs done."""
    on = running(client)
    mps_pools = {p.name for p in plan.pools if p.sharing.startswith("MPS")}
    labels_of = {n["metadata"]["name"]: n["metadata"].get("labels", {}) for n in client.list("v1", "Node")}
    dra_label = expect.dra_deploy_label()
    acted: set[tuple[str, str]] = set()

    def agent(n: fleet.FakeNode) -> None:
        if n.resources and n.name in on.get("device-plugin", set()) and ("device-plugin", n.name) not in done:
            client.patch("v1", "Node", n.name, {"status": fleet.node_status(n, advertised=True)}, "status")
            acted.add(("device-plugin", n.name))
        if n.pool in mps_pools and n.name in on.get("gpu-feature-discovery", set()) and ("gfd", n.name) not in done:
            client.patch("v1", "Node", n.name, {"metadata": {"labels": {expect.MPS_CAPABLE: "true"}}})
            acted.add(("gfd", n.name))
        if plan.dra is not None and labels_of.get(n.name, {}).get(dra_label) == "true" and ("dra", n.name) not in done:
            rs = n.resource_slice(plan.dra.driver)
            if rs is not None:
                client.create(rs)
                acted.add(("dra", n.name))

    each(agent, list(fl.nodes))
    return acted


class Agents:
    """The agents played in a thread while something else (Flux) installs the operands: every POLL seconds, each
    agent acts on the nodes its pod reached since the last look. A failure of the thread is raised by `check`
    and on exit."""

    def __init__(self, client, plan, fl: fleet.Fleet):
        self.client, self.plan, self.fleet = client, plan, fl
        self.done: set[tuple[str, str]] = set()
        self._stop = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name=f"agents-{plan.name}", daemon=True)

    def __enter__(self) -> Agents:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        if exc[0] is None:
            self.check()

    def check(self) -> None:
        if self._error is not None:
            raise RuntimeError(f"the node agents of {self.plan.name} stopped: {self._error}") from self._error

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                self.done |= play(self.client, self.plan, self.fleet, lambda fn, xs: [fn(x) for x in xs],
                                  frozenset(self.done))
                self._stop.wait(POLL)
        except BaseException as e:          # noqa: BLE001 (reported by check() in the caller's thread)
            self._error = e
