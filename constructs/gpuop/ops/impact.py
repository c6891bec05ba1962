"""`gpuop diff --impact`: what a change does on the GPU nodes, per cluster and pool, destructive first.

The diff says which fields change; this says what the cluster will do about it. It reads the rendered
manifests of the last output and of the next one (the same two trees `gpuop diff` compares) and the
pools of index.json (their GPU, nodeSelector and node count, plan/capacity.py), and classifies every
change by one table, EFFECTS, of component x kind of change -> effect, each sourced from the
Operator's behaviour:

- driver DaemonSet pod template changed with the same name and the same DRIVER_CONFIG_DIGEST (only the
  placement or a sidecar moved, e.g. another pool got its own sidecars and this DaemonSet a pool term):
  its pods restart, the driver manager finds the install config unchanged and keeps the loaded driver
  (components/driver.py); GPU pods keep running.
- driver DaemonSet pod template changed otherwise (image, env, mounts...): the driver is reinstalled on every
  node it runs on. k8s-driver-manager evicts the GPU pods first (ENABLE_GPU_POD_EVICTION), drains the
  node if the policy says so (ENABLE_AUTO_DRAIN), unloads the modules; the new pod builds and loads the
  driver, and its startup probe allows initialDelaySeconds + failureThreshold x periodSeconds per node.
  RollingUpdate with maxUnavailable N: N nodes at a time, so ceil(nodes / N) waves; OnDelete: nothing
  happens until a driver pod is deleted (gpu-operator docs "GPU Driver Upgrades"; k8s-driver-manager).
- the pool's `nvidia.com/mig.config` label or the mig-parted config behind it changed: the MIG manager
  stops the GPU clients on the node (device plugin, GFD, DCGM, exporters), evicts GPU pods, repartitions
  every GPU, restarts the clients; the pool's GPUs are unavailable meanwhile (mig-manager
  reconfigure.sh; ../shared/refs/mig/FACTS.md §2).
- the pool's `nvidia.com/device-plugin.config` label or the config content changed: the config manager
  restarts the plugin with the new config; no new GPU allocations meanwhile, running pods keep their
  devices, advertised resources change if sharing changed.
- toolkit DaemonSet changed: the toolkit rewrites the container runtime's config and restarts the runtime
  (containerd / CRI-O); running containers keep running, new pods wait for the restart.
- device plugin / MPS daemon DaemonSet changed: plugin pods restart: no new GPU allocations meanwhile.
- DCGM / DCGM exporter / node status exporter changed: a metrics gap while their pods restart.
- GFD or validator changed: labels refreshed / validation re-runs; nothing for workloads.
- a cluster that leaves the output: its whole GPU stack is deleted (the driver unloaded everywhere).
- only labels / annotations of objects, or objects that do not run on nodes: nothing on the nodes.

Operator mode (index.json `delivery: operator`) is the same model: the operands are the preview
(dist/<cluster>/preview/manifests/), equal to what NVIDIA's operator deploys on every node-visible field
(tests/test_operator_differential.py), with the operator's own pace and identities: its upgrade controller
rolls a driver (operator_upgrade_policy, _operator_driver_roll), a driver DaemonSet is known by its owner
(driver_owners), an operator version change rolls every operand (_operator_bump), and a move between the
modes is told step by step (_delivery_switch; planned with spec.delivery.moveFrom, outputs/rollout.py).
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass
from pathlib import Path

import yaml

from gpuop.kube.folders import ADDONS, PREVIEW
from gpuop.kube.yamlio import load_all

# effect kind -> (rank: lower first, destructive, type). The type is the reviewer's category, shared by
# `gpuop diff`, `--impact`, the report and the gate.
EFFECTS = {
    "stack-removed": (0, True, "removal"),
    "delivery-switch": (0, True, "delivery-switch"),
    "delivery-move": (3, False, "delivery-switch"),
    "gitops-deletion": (0, True, "gitops-deletion"),
    "driver-reinstall": (1, True, "driver-reinstall"),
    "mig-reconfigure": (2, True, "mig-repartition"),
    "mig-config-lost": (2, True, "mig-repartition"),
    "operator-upgrade": (3, False, "operand-restart"),
    "release-move": (3, False, "release-move"),
    "driver-restart": (3, False, "operand-restart"),
    "runtime-reconfigure": (4, False, "operand-restart"),
    "plugin-config-switch": (5, False, "config-relabel"),
    "device-plugin-restart": (6, False, "operand-restart"),
    "metrics-gap": (7, False, "operand-restart"),
    "labels-refresh": (8, False, "operand-restart"),
    "stack-added": (9, False, "install"),
    "companion-update": (9, False, "companion"),
    "nothing": (10, False, "none"),
}
# what makes an effect happen: the merge (Argo CD / Flux apply the change), a change of the node group's
# labels (on a managed node group: its nodes are replaced), a node reboot or restart of the MIG manager
# pod, the deletion of a driver pod (updateStrategy OnDelete)
TRIGGERS = ("merge", "node-group-change", "node-relabel", "node-reboot", "pod-deletion")
DEPLOY = "nvidia.com/gpu.deploy."
MIG_LABEL = "nvidia.com/mig.config"
# what the driver manager compares with the node's state file before unloading anything (components/driver.py)
DIGEST_ENV = "DRIVER_CONFIG_DIGEST"
PLUGIN_LABEL = "nvidia.com/device-plugin.config"
MPS_CAPABLE = "nvidia.com/mps.capable"      # GPU feature discovery's label on nodes whose plugin config shares by MPS
RESTARTS = {"device-plugin": ("device-plugin-restart", "device plugin restarts: no new GPU allocations meanwhile"),
            "dcgm-exporter": ("metrics-gap", "metrics gap while the DCGM exporter restarts"),
            "dcgm": ("metrics-gap", "metrics gap while the DCGM host engine restarts"),
            "node-status-exporter": ("metrics-gap", "metrics gap while the node status exporter restarts"),
            "gpu-feature-discovery": ("labels-refresh", "GPU feature labels refreshed; nothing for workloads"),
            "operator-validator": ("labels-refresh", "validation re-runs; nothing for workloads"),
            # a restarted MIG manager finds the node's selected config applied and returns before it stops any
            # GPU client (NVIDIA/mig-parted pkg/mig/reconfigure/reconfigure.go: "MIG configuration already applied")
            "mig-manager": ("labels-refresh", "MIG manager restarts: the selected MIG config is already applied, so "
                            "it leaves the GPUs as they are and sets nvidia.com/mig.config.state again; nothing for "
                            "workloads")}


@dataclass(frozen=True)
class Effect:
    cluster: str
    scope: str              # "pool <name>" or "all GPU nodes" or "cluster"
    kind: str               # a key of EFFECTS
    text: str
    pool: str | None = None                 # the pool it hits (None: every GPU node, or the cluster)
    nodes: int | None = None                # how many nodes (the pool's `nodes`, max); None: unknown
    waves: int | None = None                # how many rounds the nodes go through it; None: unknown
    per_node_seconds: int | None = None     # the longest one node (one wave) takes; None: no bound known
    bound_seconds: int | None = None        # the longest the whole effect takes (waves x per node)
    trigger: str = "merge"                  # a TRIGGERS value: what makes it happen
    node_group: str | None = None           # trigger node-group-change: the node group to change
    set_labels: tuple[tuple[str, str], ...] = ()   # ...to these labels
    objects: tuple[str, ...] = ()           # the objects (diff keys "Kind ns/name") or files that cause it

    @property
    def destructive(self) -> bool:
        return EFFECTS[self.kind][1]

    @property
    def type(self) -> str:
        return EFFECTS[self.kind][2]

    def as_dict(self) -> dict:
        d = asdict(self)
        d.update(destructive=self.destructive, type=self.type, set_labels=dict(self.set_labels),
                 objects=list(self.objects))
        return d

    def order_key(self) -> tuple:
        """Destructive first, then by cluster, rank and scope: the one order every view prints."""
        return (not self.destructive, self.cluster, EFFECTS[self.kind][0], self.scope, self.text)

    def line(self, scoped: bool = True) -> str:
        """One effect as a line: scope, text, trigger when not the merge, and what is known of its timing
        (`scoped` False: no scope when it is the whole cluster or the fleet)."""
        timing = self.timing()
        trigger = "" if self.trigger == "merge" else f" [trigger: {self.trigger}" + (
            f" of {self.node_group}" if self.node_group else "") + "]"
        # a driver roll's text names its waves and bounds already (the DaemonSet's update strategy)
        shown = timing and self.destructive and self.kind != "driver-reinstall"
        scope = f"{self.scope}: " if scoped or self.scope not in ("cluster", "fleet") else ""
        return f"{scope}{self.text}{trigger}" + (f" ({timing})" if shown else "")

    def timing(self) -> str:
        """'16 node(s), 8 wave(s), each up to 21m, up to 2h48m' (what is known)."""
        parts = []
        if self.nodes is not None:
            parts.append(f"{self.nodes} node(s)")
        if self.waves is not None:
            parts.append(f"{self.waves} wave(s)")
        if self.per_node_seconds is not None:
            parts.append(f"each up to {_duration(self.per_node_seconds)}")
        if self.bound_seconds is not None:
            parts.append(f"up to {_duration(self.bound_seconds)} in all")
        elif self.kind == "mig-reconfigure":
            parts.append("no time bound: mig-parted has no timeout")
        return ", ".join(parts)


def _obj_key(o: dict) -> str:
    """The object's key as `gpuop diff` prints it."""
    m = o.get("metadata") or {}
    return f"{o.get('kind')} {m['namespace'] + '/' if m.get('namespace') else ''}{m.get('name')}"


# ---- reading a tree --------------------------------------------------------------------------------

def _docs(data: bytes | None) -> list:
    """The documents of a YAML file of a tree; [] for one a hand edit broke (`gpuop validate dist` names it)."""
    if not data:
        return []
    try:
        return [d for d in load_all(data.decode()) if isinstance(d, dict)]
    except (ValueError, yaml.YAMLError):
        return []


def _mode(entry: dict | None) -> str:
    """The cluster's delivery (index.json `delivery`): "operator" (NVIDIA's operator renders the operands) or
    "stack" (gpuop's own operands)."""
    return "operator" if (entry or {}).get("delivery") == "operator" else "stack"


def _objects(tree: dict, cluster: str, entry: dict | None = None) -> dict[tuple[str, str], dict]:
    """The operands on the cluster's nodes: the rendered manifests, or in operator mode the operand preview,
    whose DaemonSets equal what NVIDIA's operator deploys on every node-visible field
    (tests/test_operator_differential.py). Its folder is fixed here, never read from index.json."""
    out = {}
    prefix = f"{cluster}/{PREVIEW}/manifests/" if _mode(entry) == "operator" else f"{cluster}/manifests/"
    for path in sorted(tree):
        if path.startswith(prefix) and path.endswith(".yaml") and not path.endswith("kustomization.yaml"):
            for o in _docs(tree[path]):
                if "kind" in o and isinstance(o.get("metadata"), dict) and "name" in o["metadata"]:
                    out[(o["kind"], o["metadata"]["name"])] = o
    return out


def _index(tree: dict) -> dict[str, dict]:
    try:
        return {c["name"]: c for c in json.loads(tree["index.json"])["clusters"]}
    except (KeyError, ValueError, TypeError):
        return {}


def _pools(entry: dict) -> list[dict]:
    return list(((entry or {}).get("capacity") or {}).get("pools") or [])


def _component(ds: dict) -> str | None:
    selector = ds["spec"]["template"]["spec"].get("nodeSelector") or {}
    if selector.get("nvidia.com/mps.capable") == "true":
        return "mps-control-daemon"
    for key in selector:
        if key.startswith(DEPLOY):
            return key[len(DEPLOY):]
    return None


def _pool_labels(tree: dict, cluster: str, objs: dict, pools: list[dict]) -> dict[str, dict[str, str]]:
    """Per pool, the mig.config / device-plugin.config labels its nodes get: from the NodeFeatureRule
    rule of its GPU model, or from node-labels.yaml (labels the node group must carry)."""
    return {name: {k: v for k, v in labels.items() if k in (MIG_LABEL, PLUGIN_LABEL)}
            for name, labels in _node_labels(tree, cluster, objs, pools)[0].items()}


def _rule_devices(rule: dict) -> frozenset[str] | None:
    """The PCI device ids a NodeFeatureRule rule is limited to; every id (frozenset of "*") when it matches any
    NVIDIA GPU; None when it matches on more than the GPU's PCI device (a kernel, an OS): nodes of one pool may
    differ there, so the pool's GPU does not decide it."""
    if rule.get("matchAny") or any(m.get("feature") != "pci.device" for m in rule.get("matchFeatures") or []):
        return None
    out = frozenset({"*"})
    for m in rule.get("matchFeatures") or []:
        device = (m.get("matchExpressions") or {}).get("device")
        if device is not None:
            if device.get("op") != "In":
                return None
            ids = frozenset(str(v).lower() for v in device.get("value") or [])
            out = ids if out == {"*"} else out & ids
    return out


def _pool_devices(pool: dict, rules: list[dict]) -> frozenset[str]:
    """The PCI device ids of the pool's GPU: its `gpuop.pool.<GPU>` rule's, else the catalog's (the same source
    the rule is written from)."""
    from gpuop import catalog
    mine = next((_rule_devices(r) for r in rules if r.get("name") == f"gpuop.pool.{pool.get('gpu')}"), None)
    if mine and mine != {"*"}:
        return mine
    gpu = catalog.load().gpus.get(str(pool.get("gpu")))
    return frozenset(i[2:6].lower() for i in (gpu.pciDeviceIds if gpu is not None else ()))


def _node_labels(tree: dict, cluster: str, objs: dict, pools: list[dict],
                 operator: bool = False) -> tuple[dict[str, dict[str, str]], set[str]]:
    """Per pool, the labels gpuop decides on its nodes, and the keys it decides (a DaemonSet's selector on any
    other key is not judged): the pool's nodeSelector; what nfd-master's NodeFeatureRules give the pool's GPU,
    rule after rule, a later rule's label over an earlier one's (as nfd-master merges them: the dra example's
    pool rule turns the device plugin off on its DRA pool); what the node group must carry (node-labels.yaml); and
    GPU feature discovery's nvidia.com/mps.capable where the device plugin config the pool selects shares by MPS
    (the MPS control daemon selects that label)."""
    rules = [r for (kind, _), o in sorted(objs.items()) if kind == "NodeFeatureRule"
             for r in (o.get("spec") or {}).get("rules") or []]
    manual: dict[str, dict] = {}
    for doc in _docs(tree.get(f"{cluster}/node-labels.yaml")):
        for p in doc.get("pools", []):
            manual[p["name"]] = p.get("labels", {})
    plugin_configs = _config_data(objs, "device-plugin-config")
    known = {k for p in pools for k in (p.get("nodeSelector") or {})} | {MPS_CAPABLE}
    known |= {k for r in rules if _rule_devices(r) is not None for k in r.get("labels") or {}}
    known |= {k for labels in manual.values() for k in labels}
    if not operator:
        # the stack: a deploy label only gpuop's rules or the node group set (absent otherwise); in operator mode
        # NVIDIA's operator labels every GPU node with the deploy labels gpuop's rules leave alone
        known.add(DEPLOY)
    out = {}
    for p in pools:
        devices = _pool_devices(p, rules)
        labels = dict(p.get("nodeSelector") or {})
        for r in rules:
            limit = _rule_devices(r)
            if limit is not None and (limit == {"*"} or limit & devices):
                labels.update(r.get("labels") or {})
        labels.update(manual.get(p["pool"], {}))
        config = _docs(plugin_configs.get(labels.get(PLUGIN_LABEL, "default"), "").encode())
        if config and isinstance(config[0].get("sharing"), dict) and "mps" in config[0]["sharing"]:
            labels[MPS_CAPABLE] = "true"
        out[p["pool"]] = {k: str(v) for k, v in labels.items()}
    return out, known


def _selects(ds: dict, labels: dict[str, str], known: set[str]) -> bool:
    """Whether the DaemonSet's nodeSelector and required node affinity take a node with these labels, judged on
    the keys gpuop decides (`known`; holding the deploy labels' prefix in the stack, where a deploy label no rule
    sets is absent)."""
    spec = ds["spec"]["template"]["spec"]

    def decided(key: str) -> bool:
        return key in known or (key.startswith(DEPLOY) and DEPLOY in known)

    if any(decided(k) and labels.get(k) != v for k, v in (spec.get("nodeSelector") or {}).items()):
        return False
    ops = {"In": lambda v, vs: v in vs, "NotIn": lambda v, vs: v not in vs,
           "Exists": lambda v, vs: v is not None, "DoesNotExist": lambda v, vs: v is None}
    terms = (((spec.get("affinity") or {}).get("nodeAffinity") or {})
             .get("requiredDuringSchedulingIgnoredDuringExecution") or {}).get("nodeSelectorTerms") or []
    return not terms or any(all(ops[e["operator"]](labels.get(e["key"]), e.get("values") or [])
                                for e in t.get("matchExpressions") or [] if decided(e["key"]) and e["operator"] in ops)
                            for t in terms)


def _operand_scope(ds: dict, pools: list[dict], node_labels: tuple[dict[str, dict[str, str]], set[str]]) -> dict:
    """Where an operand DaemonSet's pods run, as an effect's scope, pool and node count: the pools whose nodes its
    selector takes ("all GPU nodes" when every pool's). The MIG manager runs on MIG-capable GPUs only, the MPS
    control daemon on MPS pools only: their restarts roll over those pools' nodes, not every GPU node."""
    labels, known = node_labels
    mine = [p for p in pools if _selects(ds, labels.get(p["pool"], {}), known)]
    nodes = _total_nodes(mine) if mine else 0
    if len(mine) == len(pools):
        return {"scope": "all GPU nodes", "pool": None, "nodes": nodes}
    if len(mine) == 1:
        return {"scope": f"pool {mine[0]['pool']}", "pool": mine[0]["pool"], "nodes": nodes}
    return {"scope": "pools " + ", ".join(p["pool"] for p in mine) if mine else "no GPU node", "pool": None,
            "nodes": nodes}


def _config_data(objs: dict, name: str) -> dict:
    cm = objs.get(("ConfigMap", name))
    return (cm or {}).get("data") or {}


def _matches(ds: dict, pool: dict, pool_keys: set[str]) -> bool:
    """Whether a DaemonSet's pods can land on a pool's nodes, judged on the label keys pools use."""
    spec = ds["spec"]["template"]["spec"]
    selector = {k: v for k, v in (spec.get("nodeSelector") or {}).items() if k in pool_keys}
    mine = pool.get("nodeSelector") or {}
    if any(mine.get(k) != v for k, v in selector.items()):
        return False
    terms = (((spec.get("affinity") or {}).get("nodeAffinity") or {})
             .get("requiredDuringSchedulingIgnoredDuringExecution") or {}).get("nodeSelectorTerms") or []
    alternatives = []
    for term in terms:
        wanted = {e["key"]: e["values"] for e in term.get("matchExpressions", [])
                  if e.get("operator") == "In" and e["key"] in pool_keys}
        if wanted:
            alternatives.append(wanted)
    return not alternatives or any(all(mine.get(k) in v for k, v in alt.items()) for alt in alternatives)


def _config_digest(ds: dict) -> str | None:
    """DRIVER_CONFIG_DIGEST of a driver DaemonSet's driver container (None: not set)."""
    ctrs = ds["spec"]["template"]["spec"].get("containers") or []
    ctr = next((c for c in ctrs if c.get("name") == "nvidia-driver-ctr"), {})
    return next((e.get("value") for e in ctr.get("env") or [] if e.get("name") == DIGEST_ENV), None)


def _duration(seconds: int) -> str:
    h, m = divmod(round(seconds / 60), 60)
    return f"{h}h{m:02d}m" if h else f"{m}m"


def _rolling_waves(strategy: dict, nodes: int | None) -> int | None:
    """The rounds the DaemonSet controller rolls `nodes` nodes' pods in: maxUnavailable nodes at a time (1 when the
    manifest sets no update strategy: the API server's default, RollingUpdate with maxUnavailable 1); a percentage
    is rounded up, at least one node per wave. None: node count unknown, or OnDelete (nothing rolls by itself)."""
    if not nodes or strategy.get("type") == "OnDelete":
        return None
    most = (strategy.get("rollingUpdate") or {}).get("maxUnavailable", 1)
    if isinstance(most, str) and most.endswith("%"):
        per_wave = max(1, math.ceil(nodes * int(most[:-1]) / 100))
    else:
        per_wave = max(int(most), 1)
    return math.ceil(nodes / per_wave)


def _driver_roll(ds: dict, old_ds: dict | None, nodes: int | None) -> dict:
    """What a driver DaemonSet's roll does: the text and its nodes, waves and time bounds."""
    spec = ds["spec"]
    pod = spec["template"]["spec"]
    ctr = next((c for c in pod["containers"] if c["name"] == "nvidia-driver-ctr"), pod["containers"][0])
    image = ctr.get("image", "")
    old_image = ""
    if old_ds is not None:
        old_pod = old_ds["spec"]["template"]["spec"]
        old_ctr = next((c for c in old_pod["containers"] if c["name"] == ctr["name"]), None)
        old_image = (old_ctr or {}).get("image", "")
    manager = next((c for c in pod.get("initContainers", []) if c["name"] == "k8s-driver-manager"), {})
    env = {e["name"]: e.get("value") for e in manager.get("env", [])}
    evict = "GPU pods evicted" if env.get("ENABLE_GPU_POD_EVICTION", "true") == "true" else "GPU pods NOT evicted"
    drain = "node drained" if env.get("ENABLE_AUTO_DRAIN") == "true" else "no drain"
    probe = ctr.get("startupProbe") or {}
    per_node = probe.get("initialDelaySeconds", 0) + probe.get("failureThreshold", 3) * probe.get("periodSeconds", 10)
    tag = lambda ref: ref.split("@")[0].rsplit(":", 1)[-1]      # noqa: E731 (tag of a digest-pinned ref too)
    version = f" ({tag(old_image)} -> {tag(image)})" if old_image and old_image != image else ""
    strategy = spec.get("updateStrategy") or {}
    fields = {"nodes": nodes, "per_node_seconds": per_node, "version": version}
    if strategy.get("type") == "OnDelete":
        return {**fields, "trigger": "pod-deletion", "waves": None, "text": (
            f"driver reinstall{version} on each node when its driver pod is deleted (autoUpgrade off: "
            f"updateStrategy OnDelete); then {evict}, {drain}, up to {_duration(per_node)} per node")}
    most = (strategy.get("rollingUpdate") or {}).get("maxUnavailable", 1)
    parallel = f"{most} of the nodes at a time" if isinstance(most, str) and most.endswith("%") else \
        f"{most} node(s) at a time"
    waves = _rolling_waves(strategy, nodes)
    total = waves * per_node if waves is not None else None
    where = f"{nodes} node(s) -> {waves} wave(s)" if waves is not None else "node count unknown: set nodes on the pool"
    bound = f"; up to {_duration(total)} in all" if total is not None else ""
    return {**fields, "waves": waves, "bound_seconds": total, "text": (
        f"driver reinstall{version}: {evict}, {drain}, {parallel}"
        f"{', ' + where if waves is not None else ' (' + where + ')'}, each up to "
        f"{_duration(per_node)} (startup probe){bound}")}


# ---- operator mode: NVIDIA's upgrade controller rolls the driver ------------------------------------

# NVIDIA's chart defaults of driver.upgradePolicy (../shared/refs/gpu-operator/values.yaml), for a key the
# operator inputs leave out and the catalog has no chart defaults for
UPGRADE_DEFAULTS = {"autoUpgrade": True, "maxParallelUpgrades": 1, "maxUnavailable": "25%",
                    "gpuPodDeletion": {"timeoutSeconds": 300}, "drain": {"enable": False, "timeoutSeconds": 300}}
OLM_POLICY = "operator/olm/policy/clusterpolicy-gpu-cluster-policy.yaml"    # outputs/operator.py olm_files


def _merged(base: dict, over: dict) -> dict:
    out = dict(base)
    for k, v in over.items():
        out[k] = _merged(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def operator_upgrade_policy(tree: dict, cluster: str, entry: dict | None) -> dict:
    """The driver upgrade policy NVIDIA's upgrade controller runs with: the chart values gpuop writes
    (`operator/values.yaml`, over the chart defaults of the operator version) or, with OLM, the ClusterPolicy
    gpuop writes (its `podDeletion` is the chart's `gpuPodDeletion`). gpuop writes the same policy into every
    NVIDIADriver CR (plan/operator.py driver_spec), so one policy holds for the cluster."""
    from gpuop.catalog import operator as operator_catalog

    op = (entry or {}).get("operator") or {}
    defaults = ((operator_catalog.chart_defaults(str(op.get("version") or "")) or {}).get("driver") or {}).get(
        "upgradePolicy") or {}
    policy = _merged(UPGRADE_DEFAULTS, defaults)
    if op.get("install") == "olm":
        doc = next(iter(_docs(tree.get(f"{cluster}/{OLM_POLICY}"))), {})
        written = dict((((doc.get("spec") or {}).get("driver") or {}).get("upgradePolicy")) or {})
        if "podDeletion" in written:
            written["gpuPodDeletion"] = written.pop("podDeletion")
    else:
        doc = next(iter(_docs(tree.get(f"{cluster}/operator/values.yaml"))), {})
        written = ((doc.get("driver") or {}).get("upgradePolicy")) or {}
    return _merged(policy, written if isinstance(written, dict) else {})


def driver_owners(tree: dict, cluster: str, entry: dict | None, pools: list[dict]) -> dict[str, str]:
    """Operator mode: per pool, what owns the driver DaemonSet that runs there, as the operator names it (its
    DaemonSet is named after its owner, not after the driver version as gpuop's preview is): the ClusterPolicy,
    or with the NVIDIADriver CRD the CR whose nodeSelector the pool's nodes match (else the `default` CR, the
    fallback for nodes no other CR selects). A pool whose owner changes gets a new DaemonSet."""
    op = (entry or {}).get("operator") or {}
    crs: list[dict] = []
    if op.get("install") == "olm":
        policy = next(iter(_docs(tree.get(f"{cluster}/{OLM_POLICY}"))), {})
        crd = bool(((policy.get("spec") or {}).get("driver") or {}).get("useNvidiaDriverCRD"))
        folder = f"{cluster}/operator/olm/policy/nvidiadriver-"
        crs = [d for p in sorted(tree) if p.startswith(folder) for d in _docs(tree[p])]
    else:
        values = next(iter(_docs(tree.get(f"{cluster}/operator/values.yaml"))), {})
        driver = values.get("driver") or {}
        crd = bool((driver.get("nvidiaDriverCRD") or {}).get("enabled"))
        crs = [o for o in values.get("extraObjects") or [] if isinstance(o, dict) and o.get("kind") == "NVIDIADriver"]
    out = {}
    for p in pools:
        mine = p.get("nodeSelector") or {}
        if not crd:
            out[p["pool"]] = "ClusterPolicy cluster-policy"
            continue
        owner = next((f"NVIDIADriver {cr['metadata']['name']}" for cr in crs
                      if not (cr.get("spec") or {}).get("default") and (cr["spec"].get("nodeSelector") or {})
                      and all(mine.get(k) == v for k, v in cr["spec"]["nodeSelector"].items())), None)
        out[p["pool"]] = owner or "NVIDIADriver default"
    return out


def _seconds(value) -> int | None:
    """A timeout of the policy; 0 (or none) waits forever: None."""
    return value if isinstance(value, int) and value > 0 else None


def _operator_driver_roll(policy: dict, ds: dict, old_ds: dict | None, nodes: int | None,
                          managed: int | None) -> dict:
    """What NVIDIA's upgrade controller does with a changed driver DaemonSet (OnDelete in every operator
    version: assets/state-driver/0500_daemonset.yaml): node by node it moves the nodes through
    upgrade-required -> cordon -> wait-for-jobs -> pod-deletion (GPU pods, gpuPodDeletion.timeoutSeconds)
    -> drain (drain.enable, drain.timeoutSeconds) -> pod-restart (the new driver pod, bounded by its startup
    probe) -> validation -> uncordon (NOTES.md, "Driver upgrades"). It starts at most maxParallelUpgrades nodes
    at a time (0: all), and no more than maxUnavailable of the nodes it manages (a percentage rounded up,
    as k8s-operator-libs' upgrade manager scales it). With autoUpgrade false nothing rolls until a driver pod
    is deleted."""
    base = _driver_roll(ds, old_ds, nodes)
    probe = base["per_node_seconds"]
    version = base["version"]
    deletion = _seconds((policy.get("gpuPodDeletion") or {}).get("timeoutSeconds"))
    drain_on = bool((policy.get("drain") or {}).get("enable"))
    drain = _seconds((policy.get("drain") or {}).get("timeoutSeconds")) if drain_on else 0
    steps = [f"GPU pods deleted (up to {_duration(deletion)})" if deletion else "GPU pods deleted (no timeout)",
             (f"node drained (up to {_duration(drain)})" if drain else "node drained (no timeout)") if drain_on
             else "no drain"]
    per_node = probe + deletion + drain if deletion is not None and drain is not None else None
    fields = {"nodes": nodes, "per_node_seconds": per_node}
    if not policy.get("autoUpgrade", True):
        return {**fields, "trigger": "pod-deletion", "waves": None, "text": (
            f"driver reinstall{version} on each node when its driver pod is deleted (the operator's "
            "upgradePolicy.autoUpgrade false: its driver DaemonSet is OnDelete and no upgrade controller runs); "
            f"the driver manager evicts the GPU pods, up to {_duration(probe)} per node (startup probe)")}
    parallel = policy.get("maxParallelUpgrades", 1)
    most = policy.get("maxUnavailable", "25%")
    per_wave = None
    if managed:
        cap = (math.ceil(managed * int(most[:-1]) / 100) if isinstance(most, str) and most.endswith("%")
               else int(most))
        per_wave = max(1, min(parallel or managed, cap))
    waves = math.ceil(nodes / per_wave) if nodes and per_wave else None
    total = waves * per_node if waves is not None and per_node is not None else None
    limit = (f"{parallel} node(s) at a time (maxParallelUpgrades)" if parallel else "all nodes at once "
             "(maxParallelUpgrades 0)") + f", at most {most} of its {managed if managed else '?'} node(s) unavailable"
    where = (f"{nodes} node(s) -> {waves} wave(s) of {per_wave}" if waves is not None
             else "node count unknown: set nodes on the pool")
    each = f"each up to {_duration(per_node)} (pod deletion, drain, startup probe)" if per_node is not None else \
        "no time bound: a pod deletion or drain timeout is 0 (waits forever)"
    bound = f"; up to {_duration(total)} in all" if total is not None else ""
    return {**fields, "waves": waves, "bound_seconds": total, "text": (
        f"driver upgrade{version} by the operator's upgrade controller: node cordoned, {', '.join(steps)}, "
        f"{limit}, {where}, {each}{bound}")}


def _source(entry: dict | None, pool: str, label: str) -> str:
    """Where the pool's label comes from (index.json labelSources): 'nfd rule', 'node group <name>', 'user'."""
    return (((entry or {}).get("labelSources") or {}).get(pool) or {}).get(label, "nfd rule")


def _relabel(source: str, label: str, value: str | None) -> dict:
    """The trigger of a change of a label the node group or the user sets: nothing happens on merge."""
    setting = f"{label}={value}" if value else f"{label} removed"
    if source.startswith("node group "):
        group = source[len("node group "):]
        return {"trigger": "node-group-change", "node_group": group, "set_labels": ((label, value or ""),),
                "head": f"nothing happens on merge; change the node group {group} to {setting}, then "}
    if source == "user":
        return {"trigger": "node-relabel", "set_labels": ((label, value or ""),),
                "head": f"nothing happens on merge; relabel the pool's nodes {setting}, then "}
    return {"head": ""}


# ---- the classification ---------------------------------------------------------------------------

def cluster_effects(cluster: str, old: dict, new: dict, old_entry: dict | None, new_entry: dict | None) -> list[Effect]:
    if new_entry is None:
        return [Effect(cluster, "cluster", "stack-removed", "cluster leaves the output: Argo CD / Flux delete its "
                       "GPU stack; the driver is unloaded and GPU pods fail on every node",
                       nodes=_total_nodes(_pools(old_entry)), waves=1, objects=(f"{cluster}/",))]
    if old_entry is None:
        return [Effect(cluster, "cluster", "stack-added", "new cluster: the whole GPU stack is installed",
                       nodes=_total_nodes(_pools(new_entry)))]
    before, after = _objects(old, cluster, old_entry), _objects(new, cluster, new_entry)
    operator = _mode(new_entry) == "operator"
    pools = _pools(new_entry) or _pools(old_entry)
    pool_keys = {k for p in pools for k in (p.get("nodeSelector") or {})}
    nodes = {p["pool"]: (p.get("nodes") or {}).get("max") for p in pools}
    all_nodes = _total_nodes(pools)
    effects: list[Effect] = []
    changed_objects = {k for k in set(before) | set(after) if before.get(k) != after.get(k)}
    template_changed = set()
    planned = _planned_move(new, cluster)
    switch = _delivery_switch(cluster, old_entry, new_entry, all_nodes, planned)
    bump = _operator_bump(cluster, old_entry, new_entry) if switch is None else None
    effects += [e for e in (switch, bump) if e is not None]
    effects += _release_move(cluster, old_entry, new_entry) if switch is None else []
    effects += _nfd_move(cluster, old, new)
    # an operator version change rolls every operand: the chart's helm.sh/chart label is on each pod template
    rolled = {k for k, o in after.items() if k[0] == "DaemonSet"} if bump is not None else set()
    node_labels = (_node_labels(old, cluster, before, pools, _mode(old_entry) == "operator"),
                   _node_labels(new, cluster, after, pools, operator))
    for key in sorted(changed_objects | rolled):
        kind, name = key
        if kind != "DaemonSet":
            continue
        b, a = before.get(key), after.get(key)
        if key not in rolled and b is not None and a is not None and b["spec"]["template"] == a["spec"]["template"]:
            continue                               # no pod restarts: labels, annotations or the update strategy
        ds = a or b
        component = _component(ds)
        template_changed.add(component)
        if component == "driver":
            continue                               # per pool below: a pool may move between DaemonSets
        # the pods roll node by node as the DaemonSet's update strategy allows (RollingUpdate, 1 at a time by
        # default), over the nodes its selector takes
        where = _operand_scope(ds, pools, node_labels[0] if a is None else node_labels[1])
        common = {**where, "waves": _rolling_waves(ds["spec"].get("updateStrategy") or {}, where["nodes"]),
                  "objects": (_obj_key(ds), *_deploy_rule(before, after, component))}
        if component == "container-toolkit":
            effects.append(Effect(cluster, kind="runtime-reconfigure", text="container runtime reconfiguration: "
                                  "the toolkit rewrites the runtime config and restarts the runtime; running "
                                  "containers keep running, new pods wait for the restart", **common))
        elif component in ("device-plugin", "mps-control-daemon"):
            effects.append(Effect(cluster, kind="device-plugin-restart",
                                  text="device plugin restarts: no new GPU allocations meanwhile", **common))
        elif component in RESTARTS:
            kind_, text = RESTARTS[component]
            effects.append(Effect(cluster, kind=kind_, text=text, **common))
    if "driver" in template_changed and bump is not None:
        effects += _bumped_drivers(cluster, before, after, pools, pool_keys, nodes, bump,
                                   driver_owners(new, cluster, new_entry, pools))
    if switch is not None and planned:
        # the new delivery's driver pods replace the old's (another install config) at the new delivery's pace
        effects += _driver_effects(cluster, {}, after, pools, pool_keys, nodes,
                                   operator_upgrade_policy(new, cluster, new_entry) if operator else None)
    elif "driver" in template_changed:
        owners = None
        if operator and _mode(old_entry) == "operator":
            owners = (driver_owners(old, cluster, old_entry, pools), driver_owners(new, cluster, new_entry, pools))
        effects += _driver_effects(cluster, before, after, pools, pool_keys, nodes,
                                   operator_upgrade_policy(new, cluster, new_entry) if operator else None, owners)
    # per pool: MIG layout and device plugin config (labels and the configs behind them)
    old_labels = _pool_labels(old, cluster, before, pools)
    new_labels = _pool_labels(new, cluster, after, pools)
    mig_cm, plugin_cm = _cm_key(after or before, "custom-mig-parted-config"), _cm_key(after or before, "device-plugin-config")
    nfr = next((_obj_key(o) for (k, _), o in sorted((after or before).items()) if k == "NodeFeatureRule"), "")
    old_mig = _config_data(before, "custom-mig-parted-config").get("config.yaml", "")
    new_mig = _config_data(after, "custom-mig-parted-config").get("config.yaml", "")
    old_plugin, new_plugin = _config_data(before, "device-plugin-config"), _config_data(after, "device-plugin-config")
    for p in pools:
        name = p["pool"]
        scope, n_nodes = f"pool {name}", nodes.get(name)
        o, n = old_labels.get(name, {}), new_labels.get(name, {})
        om, nm = o.get(MIG_LABEL), n.get(MIG_LABEL)
        if om != nm or (nm and old_mig != new_mig and _mig_entry(old_mig, nm) != _mig_entry(new_mig, nm)):
            what = f"{om} -> {nm}" if om != nm else f"{nm} changed"
            src = _source(new_entry, name, MIG_LABEL)
            how = _relabel(src, MIG_LABEL, nm) if om != nm else {"head": ""}
            head = how.pop("head")
            effects.append(Effect(cluster, scope, "mig-reconfigure", f"MIG reconfiguration ({what}): {head}the MIG "
                                  f"manager evicts the GPU pods on the pool's nodes and repartitions every GPU; the "
                                  "pool's GPUs are unavailable until it is done", pool=name, nodes=n_nodes, waves=1 if how.get("trigger") is None else None,
                                  objects=tuple(k for k in (mig_cm, nfr) if k), **how))
            if om and om != nm and src != "nfd rule" and om != "all-disabled" and _mig_entry(old_mig, om) is not None \
                    and _mig_entry(new_mig, om) is None:
                effects.append(Effect(cluster, scope, "mig-config-lost", f"config {om} leaves the MIG manager's "
                                      f"ConfigMap while the pool's nodes still carry {MIG_LABEL}={om} (from the "
                                      f"{src}): a node whose MIG manager restarts (a reboot) cannot apply it and "
                                      f"reports {MIG_LABEL}.state=failed; keep it with keepMigConfigs: [{om}] on the "
                                      "pool until the node group is relabelled", pool=name, nodes=n_nodes,
                                      trigger="node-reboot", objects=(mig_cm,) if mig_cm else ()))
        op, np_ = o.get(PLUGIN_LABEL), n.get(PLUGIN_LABEL)
        if op != np_ or (np_ and old_plugin.get(np_) != new_plugin.get(np_)):
            what = f"{op or 'default'} -> {np_ or 'default'}" if op != np_ else f"{np_} changed"
            how = _relabel(_source(new_entry, name, PLUGIN_LABEL), PLUGIN_LABEL, np_) if op != np_ else {"head": ""}
            head = how.pop("head")
            effects.append(Effect(cluster, scope, "plugin-config-switch", f"device plugin config switch "
                                  f"({what}): {head}the plugin restarts with it; no new GPU allocations meanwhile, "
                                  "running pods keep their devices", pool=name, nodes=n_nodes,
                                  objects=tuple(k for k in (plugin_cm, nfr) if k), **how))
    effects += _companion_effects(cluster, old, new, old_entry, new_entry)
    if not effects and changed_objects | _other_changes(old, new, cluster):
        effects.append(Effect(cluster, "cluster", "nothing", "labels, annotations or delivery objects only: nothing "
                              "on the nodes"))
    return sorted(set(effects), key=lambda e: (EFFECTS[e.kind][0], e.scope, e.text))


def _companion_effects(cluster: str, old: dict, new: dict, old_entry: dict | None,
                       new_entry: dict | None) -> list[Effect]:
    """Operator mode: a change of gpuop's own objects beside NVIDIA's operator (alerts, dashboards, queues: the
    companion release, outputs/addons.py), an upgrade of that release that touches no node."""
    if _mode(new_entry) != "operator" or _mode(old_entry) != "operator":
        return []                   # a delivery switch is its own effect
    prefix = f"{cluster}/{ADDONS}/manifests/"
    changed = {p for p in set(old) | set(new) if p.startswith(prefix) and old.get(p) != new.get(p)}
    if not changed:
        return []
    name = ((new_entry or {}).get("addons") or (old_entry or {}).get("addons") or {}).get("name", f"{cluster}-gpuop-addons")
    parts = sorted(p[len(prefix):].removesuffix(".yaml").split("-", 1)[-1] for p in changed
                   if not p.endswith("/kustomization.yaml")) or ["its objects"]
    return [Effect(cluster, "cluster", "companion-update", f"gpuop's own objects beside NVIDIA's operator change "
                   f"({', '.join(parts)}): the companion release {name} upgrades; nothing on the nodes",
                   objects=tuple(sorted(changed)))]


def _operator_version(entry: dict | None) -> str:
    return str(((entry or {}).get("operator") or {}).get("version") or "")


def _operator_bump(cluster: str, old_entry: dict | None, new_entry: dict | None) -> Effect | None:
    """An operator version change (both outputs in operator mode): the operator Deployment is replaced, the
    chart's pre-upgrade hook upgrades its CRDs (operator.upgradeCRD, kept true), and every operand DaemonSet of
    the ClusterPolicy rolls: the chart writes helm.sh/chart: gpu-operator-<version> into the ClusterPolicy's
    daemonsets.labels (templates/_helpers.tpl operand-labels), which the operator puts on each one's pod
    template (seen in NVIDIA's controller code through ../shared/tools/nvidia-operator; the DaemonSets of
    NVIDIADriver CRs do not get it)."""
    if _mode(old_entry) != "operator" or _mode(new_entry) != "operator":
        return None
    old, new = _operator_version(old_entry), _operator_version(new_entry)
    if old == new:
        return None
    return Effect(cluster, "cluster", "operator-upgrade", f"GPU Operator {old} -> {new}: the operator is replaced, "
                  "its CRDs upgraded by the chart's pre-upgrade hook, and every operand DaemonSet of the ClusterPolicy "
                  "rolls (the chart's helm.sh/chart label is on each one's pod template; NVIDIADriver CRs' driver "
                  "DaemonSets do not carry it)", objects=(f"{cluster}/operator/",))


def _bumped_drivers(cluster, before, after, pools, pool_keys, nodes, bump: Effect, owners: dict) -> list[Effect]:
    """Under an operator version change, a ClusterPolicy driver DaemonSet whose pod template is otherwise the
    same: its pods restart with the same install config (DRIVER_CONFIG_DIGEST), so the driver manager keeps
    the loaded driver. The DaemonSets of NVIDIADriver CRs carry no daemonsets.labels (NVIDIA's controller
    code, tests/operator_differential.py's renderer): they do not restart. Changed ones are _driver_effects'."""
    out = []
    for p in pools or [{"pool": "", "nodeSelector": {}}]:
        if not owners.get(p["pool"], "").startswith("ClusterPolicy"):
            continue
        a = next((d for (k, _), d in sorted(after.items()) if k == "DaemonSet" and _component(d) == "driver"
                  and _matches(d, p, pool_keys)), None)
        if a is None or before.get(("DaemonSet", a["metadata"]["name"])) != a:
            continue
        scope = f"pool {p['pool']}" if p["pool"] else "all GPU nodes"
        if _before_in_place_restart(bump):
            out.append(Effect(cluster, scope, "driver-reinstall", f"driver pods of {a['metadata']['name']} are replaced "
                              f"({bump.text.split(':')[0]}): {IN_PLACE_RESTART[1]} the upgrade controller evicts the GPU "
                              "pods and drains each node first, though the install config is the same",
                              pool=p["pool"] or None, nodes=nodes.get(p["pool"]), objects=(_obj_key(a),)))
            continue
        out.append(Effect(cluster, scope, "driver-restart",
                          f"driver pods of {a['metadata']['name']} restart ({bump.text.split(':')[0]}) with the same "
                          f"install config ({DIGEST_ENV}): the driver manager keeps the loaded driver; GPU pods keep "
                          "running", pool=p["pool"] or None, nodes=nodes.get(p["pool"]), objects=(_obj_key(a),)))
    return out


# the first operator version whose upgrade controller restarts a driver pod in place when its install config is
# unchanged, and what older ones do (NVIDIA/cloud-native-docs gpu-operator/release-notes.rst 26.7.0, PR #2527:
# "Previously, a chart upgrade that changed only cosmetic pod-template metadata, such as the helm.sh/chart label,
# evicted running GPU workloads and drained the node.")
IN_PLACE_RESTART = ("v26.7.0", "before GPU Operator v26.7.0 (release notes 26.7.0, PR #2527)")


def _before_in_place_restart(bump: Effect) -> bool:
    from gpuop.catalog import versions
    new = bump.text.split(":")[0].rpartition(" -> ")[2]
    try:
        return versions.older(new, IN_PLACE_RESTART[0])
    except ValueError:
        return False


def _release(entry: dict | None) -> str:
    return str((entry or {}).get("stackRelease") or "")


def _release_move(cluster: str, old_entry: dict | None, new_entry: dict | None) -> list[Effect]:
    """A move between stack releases (spec.release; in operator mode with delivery.operator.version): which
    components change image, the CRDs the new release's chart adds, changes or drops (catalog releases.yaml
    `crds`), and in operator mode the chart settings it drops and the defaults it changes (catalog
    operator-chart/<version>.yaml, NVIDIA's values.yaml of each tag). The DaemonSets that roll, with their waves,
    are the per-component effects beside it."""
    from gpuop import catalog as catalog_mod
    from gpuop.catalog import operator as operator_catalog

    old, new = _release(old_entry), _release(new_entry)
    if not old or not new or old == new:
        return []
    cat = catalog_mod.load()
    a, b = cat.release(old), cat.release(new)
    if a is None or b is None:
        return []
    parts = [f"stack release {old} -> {new} (GPU Operator {a.operatorVersion} -> {b.operatorVersion})"]
    images = [f"{k} {a.components[k].version} -> {b.components[k].version}" for k in sorted(b.components)
              if k in a.components and a.components[k] != b.components[k]]
    if images:
        parts.append("release images: " + ", ".join(images))
    if _mode(new_entry) == "operator":
        # stack mode installs none of NVIDIA's CRDs: only the operator's chart carries them
        crds = [f"{n} added" for n in sorted(set(b.crds) - set(a.crds))]
        crds += [f"{n} schema changed" for n in sorted(set(a.crds) & set(b.crds)) if a.crds[n] != b.crds[n]]
        crds += [f"{n} no longer shipped (left in place)" for n in sorted(set(a.crds) - set(b.crds))]
        if crds:
            parts.append("CRDs (upgraded by the chart's pre-upgrade hook, operator.upgradeCRD): " + ", ".join(crds))
        removed, changed = _chart_changes(operator_catalog.chart_defaults(a.operatorVersion) or {},
                                          operator_catalog.chart_defaults(b.operatorVersion) or {})
        if removed:
            parts.append("chart settings removed: " + ", ".join(removed))
        if changed:
            parts.append("chart defaults changed: " + ", ".join(changed))
    return [Effect(cluster, "cluster", "release-move", "; ".join(parts), objects=(f"{cluster}/",))]


# NFD as gpuop deploys it (spec.nfd.mode deploy): its HelmRelease or Application, at fixed places of the output
NFD_RELEASES = ("flux/nfd-helmrelease.yaml", "flux-overlay/nfd/helmrelease.yaml", "argocd/nfd-application.yaml")
NFD_CHART = "node-feature-discovery"
# values of NFD's chart that only its master, garbage collector or topology updater read: the worker keeps its pods
NFD_NOT_WORKER = ("master", "gc", "topologyUpdater")


def _nfd_release(tree: dict, cluster: str) -> dict | None:
    """NFD's chart version, values, release and namespace as the cluster's output deploys it; None without NFD."""
    for rel in NFD_RELEASES:
        for d in _docs(tree.get(f"{cluster}/{rel}")):
            spec = d.get("spec") or {}
            if d.get("kind") == "HelmRelease":
                chart = (spec.get("chart") or {}).get("spec") or {}
                return {"version": str(chart.get("version") or ""), "values": spec.get("values") or {},
                        "release": spec.get("releaseName") or d["metadata"].get("name", ""),
                        "namespace": spec.get("targetNamespace") or ""}
            if d.get("kind") == "Application" and (spec.get("source") or {}).get("chart") == NFD_CHART:
                source = spec["source"]
                helm = source.get("helm") or {}
                return {"version": str(source.get("targetRevision") or ""), "values": helm.get("valuesObject") or {},
                        "release": helm.get("releaseName") or d["metadata"].get("name", ""),
                        "namespace": (spec.get("destination") or {}).get("namespace") or ""}
    return None


def _nfd_worker(nfd: dict) -> str:
    """The worker DaemonSet NFD's chart names: <fullname>-worker, the fullname being the release when it contains
    the chart's name (deployment/helm/node-feature-discovery/templates/_helpers.tpl)."""
    release = nfd["release"]
    full = nfd["values"].get("fullnameOverride") or (release if NFD_CHART in release else f"{release}-{NFD_CHART}")
    return f"DaemonSet {nfd['namespace']}/{full}-worker"


def _nfd_move(cluster: str, old: dict, new: dict) -> list[Effect]:
    """NFD's chart moved (a release move brings the release's NFD) or the values its worker reads changed: the
    worker's pods restart on every node, before the GPU stack's release (its dependsOn); nfd-master keeps the
    node labels it set."""
    a, b = _nfd_release(old, cluster), _nfd_release(new, cluster)
    if a is None or b is None:
        return []
    worker = {k: v for k, v in a["values"].items() if k not in NFD_NOT_WORKER}
    if a["version"] == b["version"] and worker == {k: v for k, v in b["values"].items() if k not in NFD_NOT_WORKER}:
        return []
    what = f"NFD chart {a['version']} -> {b['version']}" if a["version"] != b["version"] else "NFD worker settings"
    return [Effect(cluster, "cluster", "labels-refresh", f"{what}: the NFD worker restarts on every node, before the "
                   "GPU stack's release (dependsOn), and reports the node's features again; nfd-master keeps the "
                   "labels; nothing for workloads", objects=(_nfd_worker(b),))]


def _chart_changes(old: dict, new: dict) -> tuple[list[str], list[str]]:
    """(settings of the old chart the new one no longer has, 'path: old -> new' of each default that changed);
    image versions are the release's images, not listed here."""
    from gpuop.plan.chartmap import leaves
    a, b = dict(leaves(old)), dict(leaves(new))
    removed = sorted(k for k in a if k not in b and not any(x.startswith(k + ".") for x in b))
    changed = sorted(f"{k}: {json.dumps(a[k])} -> {json.dumps(b[k])}" for k in a
                     if k in b and a[k] != b[k] and not k.endswith((".version", ".repository", ".image"))
                     and not isinstance(a[k], (list, dict)))
    return removed, changed


def refused_moves(old: dict, new: dict) -> list[tuple[str, str]]:
    """(cluster, why) of every move between releases NVIDIA does not support (catalog Catalog.unsupported_move)."""
    from gpuop import catalog as catalog_mod
    cat = catalog_mod.load()
    before, after = _index(old), _index(new)
    out = []
    for cluster in sorted(set(before) & set(after)):
        why = cat.unsupported_move(_release(before[cluster]), _release(after[cluster]))
        if why:
            out.append((cluster, why))
    return out


# what happens when a cluster's delivery changes mode, step by step (NVIDIA's chart and operator, Argo CD and
# Flux as gpuop writes their objects: the same Application / HelmRelease gpuop-<cluster> in both modes)
SWITCH_STEPS = {
    ("operator", "stack"): (
        "the Application / HelmRelease gpuop-{c} switches from NVIDIA's chart to gpuop's: Argo CD prunes, Flux "
        "uninstalls, the old release's objects",
        "the ClusterPolicy goes with them (NVIDIA's chart marks it helm.sh/resource-policy: keep only with "
        "operator.cleanupCRD) and the garbage collector deletes every operand it owns (ownerReferences) on every "
        "GPU node at once: driver, toolkit, device plugin, GFD, DCGM exporter, MIG manager, validator; gpuop's "
        "DaemonSets of the same names, applied over them, keep the ClusterPolicy's ownerReference and go too",
        "gpuop's stack then starts on every node at once; its driver manager finds another install config "
        "(DRIVER_CONFIG_DIGEST) and reinstalls the driver: GPU pods evicted on every node",
        "the CRDs stay (operator.cleanupCRD false, Helm never deletes crds/)",
    ),
    ("stack", "operator"): (
        "the Application / HelmRelease gpuop-{c} switches from gpuop's chart to NVIDIA's: Argo CD prunes, Flux "
        "uninstalls, gpuop's operands on every GPU node at once",
        "NVIDIA's operator starts and, once its ClusterPolicy is reconciled, creates its operands (no "
        "DaemonSet before a node has nvidia.com/gpu.present=true)",
        "its driver pods find another install config (DRIVER_CONFIG_DIGEST) and reinstall the driver: GPU pods "
        "evicted on every node; no device plugin advertises GPUs in between",
    ),
}


# Planned (spec.delivery.moveFrom): PruneLast and PrunePropagationPolicy=orphan (Flux: uninstall
# deletionPropagation orphan) on the Application / HelmRelease (outputs/rollout.py MOVE_SYNC_OPTIONS)
MOVE_STEPS = {
    ("operator", "stack"): (
        "gpuop's stack is applied first: its DaemonSets of the operator's names (nvidia-driver-daemonset, ...) "
        "are updated in place and roll by gpuop's update strategy (the driver below)",
        "then, the stack synced and healthy, the old release's objects are pruned with their dependents "
        "orphaned: the ClusterPolicy, the NVIDIADriver CRs and the operator Deployment go, no operand is deleted",
        "left to you: the orphaned operator ReplicaSet (delete it) and the DaemonSets of NVIDIADriver CRs "
        "(nvidia-gpu-driver-*), whose pods keep the pool's driver until you delete them node by node (gpuop's "
        "driver pods wait for them: anti-affinity on app.kubernetes.io/component=nvidia-driver)",
        "the CRDs stay (operator.cleanupCRD false); then drop spec.delivery.moveFrom",
    ),
    ("stack", "operator"): (
        "NVIDIA's operator is installed first and its ClusterPolicy reconciled: the operator takes gpuop's "
        "DaemonSets of its names over in place, its upgrade controller rolls the driver (below)",
        "then, the ClusterPolicy healthy, gpuop's remaining objects are pruned with their dependents orphaned: "
        "no operand is deleted",
        "left to you: the orphaned pods of gpuop's per-variant driver DaemonSets, deleted node by node (the "
        "operator's driver pods wait for them: anti-affinity on app.kubernetes.io/component=nvidia-driver); then "
        "drop spec.delivery.moveFrom",
    ),
}


def _planned_move(tree: dict, cluster: str) -> bool:
    """Whether the new output carries a planned move (the Application's sync options, outputs/rollout.py)."""
    app = next(iter(_docs(tree.get(f"{cluster}/argocd/application.yaml"))), {})
    options = (((app.get("spec") or {}).get("syncPolicy") or {}).get("syncOptions")) or []
    return "PrunePropagationPolicy=orphan" in options


def _delivery_switch(cluster: str, old_entry: dict | None, new_entry: dict | None, nodes: int | None,
                     planned: bool = False) -> Effect | None:
    """A cluster moved between delivery modes: what happens, in order. What does not happen follows from the
    comparison of the operands (the preview of the operator's with gpuop's): a MIG layout or device-plugin
    config left as it was is no reconfiguration. Unplanned, the switch is destructive on every node at once;
    planned (spec.delivery.moveFrom), the old objects go last and orphan their operands."""
    old, new = _mode(old_entry), _mode(new_entry)
    if old == new:
        return None
    steps = (MOVE_STEPS if planned else SWITCH_STEPS)[(old, new)]
    told = "; ".join(f"({i}) {step.format(c=cluster)}" for i, step in enumerate(steps, 1))
    objects = (f"{cluster}/argocd/application.yaml", f"{cluster}/flux/helmrelease.yaml")
    if planned:
        return Effect(cluster, "cluster", "delivery-move", f"planned move {old} -> {new}: {told}", nodes=nodes,
                      objects=objects)
    return Effect(cluster, "cluster", "delivery-switch", f"delivery {old} -> {new}: {told}; set "
                  f"spec.delivery.moveFrom: {old} to move without deleting the operands", nodes=nodes, waves=1,
                  objects=objects)


def _total_nodes(pools: list[dict]) -> int | None:
    counts = [(p.get("nodes") or {}).get("max") for p in pools]
    return sum(counts) if counts and None not in counts else None


def _cm_key(objs: dict, name: str) -> str:
    cm = objs.get(("ConfigMap", name))
    return _obj_key(cm) if cm else ""


def _driver_effects(cluster, before, after, pools, pool_keys, nodes, policy: dict | None = None,
                   owners: tuple[dict, dict] | None = None) -> list[Effect]:
    """Per pool, the driver DaemonSet that runs there before and after: same name and pod template is
    nothing; otherwise the driver is reinstalled (a renamed DaemonSet too: its pods start fresh), or
    unloaded when no driver DaemonSet runs there any more. `policy`: operator mode, the upgrade policy
    NVIDIA's upgrade controller rolls the driver with (operator_upgrade_policy); None: the stack's
    DaemonSet update strategy. `owners`: operator mode, per pool before and after, what owns its driver
    DaemonSet (driver_owners): the operator's DaemonSet identity, in place of the preview's names."""
    def drivers(objs):
        return [o for (k, _), o in sorted(objs.items()) if k == "DaemonSet" and _component(o) == "driver"]
    old_ds, new_ds = drivers(before), drivers(after)
    pools = pools or [{"pool": "", "nodeSelector": {}}]
    runs_on = {p["pool"]: next((d for d in new_ds if _matches(d, p, pool_keys)), None) for p in pools}

    def managed(ds) -> int | None:
        """The nodes one driver DaemonSet (one NVIDIADriver CR / the ClusterPolicy's driver) runs on."""
        counts = [nodes.get(name) for name, d in runs_on.items() if d is ds]
        return sum(counts) if counts and None not in counts else None

    out = []
    for p in pools:
        scope = f"pool {p['pool']}" if p["pool"] else "all GPU nodes"
        pool = p["pool"] or None
        b = next((d for d in old_ds if _matches(d, p, pool_keys)), None)
        a = runs_on[p["pool"]]
        if a is None and b is None:
            continue
        if a is None:
            out.append(Effect(cluster, scope, "driver-reinstall", f"driver DaemonSet {b['metadata']['name']} deleted: "
                              "the driver pods stop and unload the driver; GPU pods fail unless the driver is "
                              "preinstalled on the nodes", pool=pool, nodes=nodes.get(p["pool"]), waves=1,
                              objects=(_obj_key(b),)))
            continue
        if owners is None:
            same = b is not None and b["metadata"]["name"] == a["metadata"]["name"]
        else:                                      # the operator names its DaemonSets after their owner
            same = b is not None and owners[0].get(p["pool"]) == owners[1].get(p["pool"])
        if same and _pod(b) == _pod(a):
            continue
        keys = tuple(sorted({_obj_key(a)} | ({_obj_key(b)} if b is not None else set())))
        if same and _config_digest(b) and _config_digest(b) == _config_digest(a):
            out.append(Effect(cluster, scope, "driver-restart", f"driver pods of {a['metadata']['name']} restart "
                              f"with the same install config ({DIGEST_ENV}): the driver manager keeps the loaded "
                              "driver; GPU pods keep running", pool=pool, nodes=nodes.get(p["pool"]), objects=keys))
            continue
        if b is not None and not same:
            if owners is not None:
                keys = (owners[0][p["pool"]], owners[1][p["pool"]]) + keys
            out.append(_replaced(cluster, scope, pool, a, b, nodes.get(p["pool"]), keys, owners))
            continue
        if policy is None:
            roll = _driver_roll(a, b, nodes.get(p["pool"]))
        else:
            roll = _operator_driver_roll(policy, a, b, nodes.get(p["pool"]), managed(a))
        roll.pop("version", None)
        text = roll.pop("text")
        out.append(Effect(cluster, scope, "driver-reinstall", text, pool=pool, objects=keys, **roll))
    return out


def _deploy_rule(before: dict, after: dict, component: str | None) -> tuple[str, ...]:
    """The NodeFeatureRule whose rules gained or lost the component's deploy label (a component turned on or
    off): it relabels the nodes the component's DaemonSet selects, so it is a cause of the pods coming or
    going beside the DaemonSet itself."""
    if component is None:
        return ()
    label = f"{DEPLOY}{component}"

    def labelled(objs: dict) -> dict[str, bool]:
        return {_obj_key(o): any(label in (r.get("labels") or {}) for r in o["spec"].get("rules", []))
                for (kind, _), o in objs.items() if kind == "NodeFeatureRule"}

    old, new = labelled(before), labelled(after)
    return tuple(sorted(k for k in set(old) | set(new) if old.get(k, False) != new.get(k, False)))


def _pod(ds: dict) -> dict:
    """A driver DaemonSet's pod template without its name (the preview names it after the driver version;
    in operator mode the owner names the DaemonSet)."""
    return json.loads(json.dumps(ds["spec"]["template"]).replace(f'"{ds["metadata"]["name"]}"', '"-"'))


def _replaced(cluster, scope, pool, a: dict, b: dict, nodes: int | None, keys: tuple,
              owners: tuple[dict, dict] | None) -> Effect:
    """A pool's driver moves to another DaemonSet: no update strategy and no upgrade controller paces that.
    The old DaemonSet goes at once (pruned by Argo CD / Flux; in operator mode deleted with the NVIDIADriver
    CR or ClusterPolicy that owns it), so the pool's driver pods all stop together, and the new DaemonSet
    starts a pod on every node as soon as the old one is gone (the driver pods' anti-affinity on
    app.kubernetes.io/component=nvidia-driver), each reinstalling the driver: one wave of every node."""
    roll = _driver_roll(a, b, nodes)
    per_node = roll["per_node_seconds"]
    if owners is not None:
        old, new = owners[0].get(pool or ""), owners[1].get(pool or "")
        head = (f"driver moves from the DaemonSet of {old} to that of {new} (the operator deletes the old one with "
                "its owner)")
    else:
        head = f"driver DaemonSet {b['metadata']['name']} replaced by {a['metadata']['name']} (pruned)"
    return Effect(cluster, scope, "driver-reinstall", (
        f"{head}: driver reinstall"
        f"{roll['version']} on every node of the pool at once, no update strategy or upgrade policy paces a new "
        f"DaemonSet; GPU pods evicted by the driver manager, {nodes if nodes is not None else '?'} node(s) in 1 "
        f"wave, up to {_duration(per_node)} (startup probe)"), pool=pool, nodes=nodes, waves=1,
        per_node_seconds=per_node, bound_seconds=per_node, objects=keys)


def _mig_entry(config: str, name: str):
    docs = _docs(config.encode()) if config else []
    return ((docs[0] if docs else {}).get("mig-configs") or {}).get(name)


def _other_changes(old: dict, new: dict, cluster: str) -> set:
    prefix = f"{cluster}/"
    return {p for p in set(old) | set(new)
            if p.startswith(prefix) and "/manifests/" not in p and old.get(p) != new.get(p)}


def impact(old: dict, new: dict, root: str = "dist", diffs: list | None = None) -> list[Effect]:
    """Every cluster's effects, clusters in name order, destructive effects first within each, and the
    deletions of the delivery (`gpuop diff`'s destructive changes: an ApplicationSet element, an Argo CD
    Application or Flux object, a renamed release, a CRD or Namespace), each typed as one effect.
    `root`: the output folder's path in the repository (the ApplicationSet's git files generator)."""
    from gpuop.ops.diff import FLEET, diff_trees

    before, after = _index(old), _index(new)
    out: list[Effect] = []
    for cluster in sorted(set(before) | set(after)):
        out += cluster_effects(cluster, old, new, before.get(cluster), after.get(cluster))
    gone = {e.cluster for e in out if e.kind == "stack-removed"}
    moved = {e.cluster for e in out if e.kind == "delivery-move"}
    if diffs is None:
        try:
            diffs = diff_trees(old, new, root)
        except (ValueError, yaml.YAMLError):       # a hand-broken file of the last output: `gpuop validate dist`
            diffs = []
    for section in diffs:
        for c in section.destructive:
            if section.name in gone and c.what == f"{section.name}/":
                continue                           # the cluster's removal is its stack-removed effect
            if section.name in moved and c.destructive.startswith("release replaced"):
                continue                           # a planned move: the old release goes last, orphaning (delivery-move)
            cluster = "fleet" if section.name == FLEET else section.name
            entry = before.get(cluster)
            out.append(Effect(cluster, "cluster" if cluster != "fleet" else "fleet", "gitops-deletion",
                              c.destructive, nodes=_total_nodes(_pools(entry)) if entry else None,
                              objects=(c.what,)))
    return out


def ordered(effects: list[Effect]) -> list[Effect]:
    """Destructive first, then by cluster, rank and scope: the one order every view prints."""
    return sorted(effects, key=Effect.order_key)


def line(e: Effect, scoped: bool = True) -> str:
    return e.line(scoped)


def render(effects: list[Effect]) -> str:
    if not effects:
        return "gpuop: no change reaches a node\n"
    lines: list[str] = []
    destructive = [e for e in effects if e.destructive]
    if destructive:
        lines.append(f"!! {len(destructive)} destructive effect(s): GPU workloads are interrupted")
    current = None
    for e in ordered(effects):
        if e.cluster != current:
            current = e.cluster
            lines.append(f"cluster {e.cluster}:" if e.cluster != "fleet" else "fleet:")
        lines.append(f"  {'!!' if e.destructive else '  '} {line(e)}")
    return "\n".join(lines) + "\n"


def as_json(effects: list[Effect]) -> str:
    return json.dumps({"apiVersion": "gpuop/v1alpha1", "kind": "Impact",
                       "destructive": sum(e.destructive for e in effects),
                       "triggers": list(TRIGGERS),
                       "effects": [e.as_dict() for e in ordered(effects)]},
                      indent=2, sort_keys=True) + "\n"


def run(paths: list[Path], against: str | None, output: Path, settings_path: Path, fmt: str) -> tuple[str, bool]:
    """The impact report of compiling `paths` against the last output, and whether anything reaches a node."""
    from gpuop.ops.diff import compile_trees

    old, new, settings = compile_trees(paths, against, output, settings_path)
    effects = impact(old, new, settings.gitops.path.rstrip("/"))
    text = as_json(effects) if fmt == "json" else render(effects)
    return text, any(e.kind != "nothing" for e in effects)
