"""The simulated GPU fleet of one cluster, from its plan alone: kwok Nodes, the NodeFeature objects nfd-worker
would publish for them, and (DRA pools) the ResourceSlices NVIDIA's DRA kubelet plugin would publish.

Per pool, `nodes` (its max when autoscaled; DEFAULT_NODES when the profile does not say, at most MAX_NODES)
fake Nodes named `<pool>-<i>`, annotated `kwok.x-k8s.io/node: fake` so kwok runs them, each carrying what the
cloud or node group gives a node: the pool's nodeSelector, the labels no NodeFeatureRule can set (the plan's
`manual` labels: they come from the node group), the labels spec.daemonsets places GPU operands by
(`scheduling_labels`), `kubernetes.io/{hostname,os,arch}` (the kubelet's), and
POOL_LABEL (the rehearsal's own, to find a pool's nodes). Taints: GPU_TAINT on every node when the plan's
DaemonSets tolerate it (the profile declares its GPU nodes tainted so); none otherwise.

What the node advertises comes from gpuop's capacity computation (plan/capacity.py): the pool's per-node
extended resources after MIG and sharing (`gpusPerNode` unknown: one GPU). They are not put on the Node at
creation: the rehearsal's agents (run.py) advertise them once the device plugin pod runs on the node, as a
real device plugin does.

The NodeFeature of a node (nfd.k8s-sigs.io/v1alpha1, in NFD_NAMESPACE, labelled with the node's name as
nfd-worker does) carries the features gpuop's NodeFeatureRules match on: one `pci.device` instance per GPU
(vendor and class of the GPU catalog's PCI identity, the device id of the pool's GPU model), `kernel.version`
and `system.osrelease` attributes, and the worker's own feature labels (`pci-<class>_<vendor>.present`,
os-release ID / VERSION_ID / major, kernel version). Facts a driver DaemonSet selects on (an RHCOS build, a
precompiled kernel, an OS of a multi-OS cluster) are dealt round-robin over the nodes of the pools the variant
serves, so every variant has nodes to run on.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gpuop.catalog import dra as dra_catalog
from gpuop.catalog import load as load_catalog
from gpuop.plan.model import StackPlan

KWOK_ANNOTATION = ("kwok.x-k8s.io/node", "fake")
POOL_LABEL = "rehearse.gpuop/pool"
NFD_NAMESPACE = "node-feature-discovery"
NFD_NODE_LABEL = "nfd.node.kubernetes.io/node-name"      # how nfd-master ties a NodeFeature to its node
GPU_TAINT = ("nvidia.com/gpu", "present", "NoSchedule")
DEFAULT_NODES = 2            # a pool without `nodes`: two, so "every node" and "one node" differ
MAX_NODES = 16               # a rehearsal proves placement; more fakes of one pool prove nothing more
GPU_CLASS = "0302"           # 3D controller: the class data-center GPUs report (the catalog allows 0300 too)
BASE_RESOURCES = (("cpu", "96"), ("ephemeral-storage", "1Ti"), ("memory", "1Ti"), ("pods", "110"))
# stand-in kernels by os-release ID: nfd-worker reports one; no gpuop rule selects on it unless precompiled
KERNELS = {"ubuntu": "6.8.0-1024-aws", "rhcos": "5.14.0-427.72.1.el9_4.x86_64",
           "rhel": "5.14.0-570.12.1.el9_6.x86_64", "rocky": "5.14.0-570.12.1.el9_6.x86_64",
           "sles": "6.4.0-150600.23.25-default", "amzn": "6.1.134-152.225.amzn2023.x86_64"}
DEFAULT_KERNEL = "6.8.0-60-generic"

Pairs = tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class FakeNode:
    name: str
    pool: str
    gpu: str
    gpus: int
    labels: Pairs                                  # what the node group / kubelet give the Node
    worker_labels: Pairs                           # nfd-worker's feature labels (NodeFeature spec.labels)
    kernel: str
    os_release: Pairs                              # system.osrelease attributes
    device_id: str                                 # NFD pci.device `device` of the pool's GPU
    resources: tuple[tuple[str, int], ...] = ()    # extended resources per node (device plugin pools)
    dra_devices: tuple[tuple[str, int], ...] = ()  # DRA pools: (device, count) per GPU
    product: str = ""                              # the GPU's NVML product name (DRA catalog), "" unknown
    taints: tuple[tuple[str, str, str], ...] = ()

    def node(self) -> dict:
        """The Node object (status: the base resources; GPU resources come when the plugin runs)."""
        return {"apiVersion": "v1", "kind": "Node",
                "metadata": {"name": self.name, "labels": dict(self.labels),
                             "annotations": dict([KWOK_ANNOTATION])},
                "spec": {"taints": [{"key": k, "value": v, "effect": e} for k, v, e in self.taints]},
                "status": node_status(self, advertised=False)}

    def node_feature(self) -> dict:
        major, _, minor = (self.kernel.split("-")[0].split(".") + ["0", "0"])[:3]
        return {"apiVersion": "nfd.k8s-sigs.io/v1alpha1", "kind": "NodeFeature",
                "metadata": {"name": self.name, "namespace": NFD_NAMESPACE,
                             "labels": {NFD_NODE_LABEL: self.name}},
                "spec": {"features": {
                    "attributes": {
                        "kernel.version": {"elements": {"full": self.kernel, "major": major, "minor": minor}},
                        "system.osrelease": {"elements": dict(self.os_release)}},
                    "instances": {"pci.device": {"elements": [
                        {"attributes": {"vendor": _vendor(), "class": GPU_CLASS, "device": self.device_id,
                                        "subsystem_vendor": _vendor()}} for _ in range(self.gpus)]}}},
                    "labels": dict(self.worker_labels)}}

    def resource_slice(self, driver: str) -> dict | None:
        """What NVIDIA's DRA kubelet plugin publishes for the node (None: not a DRA node)."""
        if not self.dra_devices:
            return None
        devices = []
        for g in range(self.gpus):
            uuid = f"GPU-{self.name}-{g}"
            for device, count in self.dra_devices:
                for k in range(count):
                    attrs = {"type": {"string": "gpu" if device == "gpu" else "mig"},
                             "uuid": {"string": uuid if device == "gpu" else f"MIG-{self.name}-{g}-{device}-{k}"}}
                    if self.product:
                        attrs["productName"] = {"string": self.product}
                    if device != "gpu":
                        attrs["profile"] = {"string": device}
                        attrs["parentUUID"] = {"string": uuid}
                    name = f"gpu-{g}" if device == "gpu" else f"gpu-{g}-mig-{_dns(device)}-{k}"
                    devices.append({"name": name, "attributes": attrs})
        return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
                "metadata": {"name": f"{self.name}-{driver.replace('.', '-')}"},
                "spec": {"driver": driver, "nodeName": self.name,
                         "pool": {"name": self.name, "generation": 1, "resourceSliceCount": 1},
                         "devices": devices}}


def node_status(n: FakeNode, advertised: bool) -> dict:
    """capacity / allocatable: the base resources, plus the pool's GPU resources once advertised."""
    res = dict(BASE_RESOURCES)
    if advertised:
        res.update({name: str(count) for name, count in n.resources})
    return {"capacity": dict(res), "allocatable": dict(res)}


def _dns(text: str) -> str:
    return "".join(c if c.isalnum() else "-" for c in text.lower()).strip("-")


def _vendor() -> str:
    return load_catalog().pci.vendor


@dataclass(frozen=True)
class Fleet:
    cluster: str
    nodes: tuple[FakeNode, ...] = field(default_factory=tuple)

    def of_pool(self, pool: str) -> tuple[FakeNode, ...]:
        return tuple(n for n in self.nodes if n.pool == pool)


def node_count(pool_nodes: tuple[int, int] | None) -> int:
    """`nodes` (max of a range), DEFAULT_NODES when unknown, at most MAX_NODES; at least one."""
    if pool_nodes is None:
        return DEFAULT_NODES
    return max(1, min(MAX_NODES, pool_nodes[1]))


def os_labels(plan: StackPlan) -> tuple[Pairs, Pairs, str]:
    """(nfd-worker labels, system.osrelease attributes, kernel) of the cluster's OS (catalog matrix)."""
    release = load_catalog().release(plan.release)
    entry = release.matrix.os.get(plan.os) if plan.os and release is not None else None
    select = dict(entry.select) if entry is not None else {}
    os_id = select.get("osId", "ubuntu")
    version = select.get("osVersionId") or _version_of(plan.os or "", os_id)
    keys = release.nodeLabels if release is not None else None
    attrs = {"ID": os_id, "VERSION_ID": version}
    kernel = KERNELS.get(os_id, DEFAULT_KERNEL)
    labels = {}
    if keys is not None:
        labels = {keys.osId: os_id, keys.osVersionId: version, keys.osVersionMajor: version.split(".")[0],
                  keys.kernel: kernel}
    return tuple(sorted(labels.items())), tuple(sorted(attrs.items())), kernel


def _version_of(os_name: str, os_id: str) -> str:
    rest = os_name[len(os_id):] if os_name.startswith(os_id) else ""
    return rest or "0"


def covers(terms, selector: dict) -> bool:
    """Whether a driver variant's pool terms (ORed; none: every pool) take in a pool of this nodeSelector."""
    return not terms or any(all(selector.get(k) == v for k, v in term) for term in terms)


def variant_facts(plan: StackPlan, selector: dict) -> list[Pairs]:
    """The node facts (worker labels) of the driver variants serving a pool, one entry per variant that
    selects on more than the deploy label; [] when none does (every node gets the cluster's OS facts)."""
    return [v.node_selector for v in plan.driver_variants
            if v.node_selector and covers(v.pool_terms, selector)]


def tainted(plan: StackPlan) -> bool:
    """Whether the profile's DaemonSets tolerate GPU_TAINT: then its GPU nodes are tainted so."""
    key, value, effect = GPU_TAINT
    for t in plan.values.get("tolerations") or []:
        if t.get("key") == key and t.get("effect", effect) == effect and (
                t.get("operator") == "Exists" or t.get("value") == value):
            return True
    return False


def scheduling_labels(plan: StackPlan) -> dict[str, str]:
    """Labels the profile says its GPU nodes carry (spec.daemonsets nodeSelector and nodeAffinity, where every
    GPU DaemonSet is placed): a value that satisfies each term (In: its first value, Exists: "true", Gt / Lt: one
    past the bound); NotIn and DoesNotExist ask for nothing."""
    out = dict(plan.scheduling.node_selector)
    for key, op, values in plan.scheduling.node_affinity:
        if op == "In" and values:
            out[key] = values[0]
        elif op == "Exists":
            out[key] = "true"
        elif op in ("Gt", "Lt") and values:
            out[key] = str(int(values[0]) + (1 if op == "Gt" else -1))
    return out


def build(plan: StackPlan) -> Fleet:
    """The fake fleet of a plan: deterministic, a pure function of the plan and the catalogs."""
    cat = load_catalog()
    dra = dra_catalog.load()
    worker, os_release, kernel = os_labels(plan)
    labels_of = {p.name: p for p in plan.pool_configs.pools}
    classes: dict[str, list[tuple[str, int]]] = {}
    if plan.dra is not None:
        for c in plan.dra.device_classes:
            classes.setdefault(c.pool, []).append((c.device, c.per_gpu))
    taints = (GPU_TAINT,) if tainted(plan) else ()
    nodes = []
    for cap in plan.capacity.pools:
        selector = dict(cap.node_selector)
        gpu = cat.gpus.get(cap.gpu)
        ids = gpu.pciDeviceIds if gpu is not None else ()
        device_id = ids[0][2:6].lower() if ids else "ffff"
        gpus = cap.gpus_per_node or 1
        per_node = tuple((name, n * gpus) for name, n in cap.per_gpu)
        pl = labels_of.get(cap.pool)
        manual = dict(pl.manual) if pl is not None else {}
        facts = variant_facts(plan, selector)
        product = dra.products.get(cap.gpu)
        for i in range(node_count(cap.nodes)):
            name = f"{cap.pool}-{i}"
            node_labels = {**scheduling_labels(plan), **selector, **manual, "kubernetes.io/hostname": name,
                           "kubernetes.io/os": "linux",
                           "kubernetes.io/arch": "amd64", POOL_LABEL: cap.pool}
            wl = dict(worker)
            wl[f"feature.node.kubernetes.io/pci-{GPU_CLASS}_{cat.pci.vendor}.present"] = "true"
            node_kernel = kernel
            if facts:
                wl.update(dict(facts[i % len(facts)]))
                node_kernel = dict(facts[i % len(facts)]).get(
                    (load_catalog().release(plan.release).nodeLabels.kernel), kernel)
            nodes.append(FakeNode(
                name=name, pool=cap.pool, gpu=cap.gpu, gpus=gpus, labels=tuple(sorted(node_labels.items())),
                worker_labels=tuple(sorted(wl.items())), kernel=node_kernel, os_release=os_release,
                device_id=device_id, resources=per_node if cap.allocation != "dra" else (),
                dra_devices=tuple(classes.get(cap.pool, ())) if cap.allocation == "dra" else (),
                product=product.productName if product is not None else "", taints=taints))
    return Fleet(plan.name, tuple(nodes))
