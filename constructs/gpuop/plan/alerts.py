"""Alert rules: what Prometheus should page on for one cluster's GPUs and GPU stack (spec.alerts).

Node-level rules are written per pool: a pool's nodes are the nodes whose labels (kube-state-metrics'
`kube_node_labels`, which exports only the keys its `--metric-labels-allowlist` names) match the pool's
nodeSelector, so every alert names its pool, and the count rules compare a node against what the plan says
its pool's nodes advertise (plan/capacity.py: per node, after MIG and sharing). DCGM metrics are joined to
nodes through the exporter's host name label. Metric names, their labels and which fields dcgm-exporter's
built-in list exports are catalog data (catalog/data/gpu-metrics.yaml) with their sources.

A rule whose DCGM fields the exporter does not export is not written (a rule that can never fire would read
as "healthy"); the rule file names it and the fields to add to spec.dcgmExporter.metrics.
"""

from __future__ import annotations

from gpuop.catalog import metrics as metrics_catalog
from gpuop.catalog import xids as xid_catalog
from gpuop.plan import pools as plan_pools
from gpuop.plan.model import AlertRule, AlertsPlan, StackPlan

MIG_STATE_LABEL = "nvidia.com/mig.config.state"     # the mig-manager's outcome label on a node (success | failed | ...)
THROTTLE_SHARE = 0.1        # throttled for more than a tenth of the time: sustained, not a boost-clock dip
EARLY_HORIZON = "604800"    # seconds (7 days): how far the early warnings extrapolate the last 6h's trend

# The stack's DaemonSets a "pods not ready" rule watches: (component, DaemonSet name regex, is it on).
# The names are the components' (components/driver.py, device_plugin.py, dcgm.py, dcgm_exporter.py);
# tests/test_alerts.py checks every regex matches a DaemonSet of the compiled examples.
STACK_DAEMONSETS = (
    ("driver", "nvidia-driver-daemonset.*", lambda p: bool(p.driver_variants)),
    # the cluster's DaemonSet and one per pool XID health policy (nvidia-device-plugin-health-<6 hex>)
    ("device-plugin", "nvidia-device-plugin-(daemonset|health-[0-9a-f]{6})", lambda p: p.device_plugin),
    ("dcgm", "nvidia-dcgm", lambda p: p.dcgm),
    ("dcgm-exporter", "nvidia-dcgm-exporter", lambda p: p.dcgm_exporter is not None),
)


def _q(value: str) -> str:
    """A PromQL string literal (double-quoted; label values and names here hold no quote or backslash)."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


class _Promql:
    """The expression pieces every rule shares, spelled from the metrics catalog."""

    def __init__(self):
        cat = metrics_catalog.load()
        self.ksm = cat.kubeStateMetrics
        self.dcgm = cat.dcgm

    def pool_nodes(self, selector: tuple[tuple[str, str], ...]) -> str:
        """One series per node of the pool, value 1, labels {node}."""
        matchers = ['node!=""'] + [f"{self.ksm.labelPrefix}{self.ksm.sanitize(k)}={_q(v)}" for k, v in selector]
        return f"max by (node) ({self.ksm.nodeLabels}{{{', '.join(matchers)}}})"

    def on_node(self, expr: str) -> str:
        """A DCGM expression with its host name label copied to `node` (either spelling)."""
        for label in self.dcgm.nodeLabels:
            expr = f'label_replace({expr}, "node", "$1", {_q(label)}, "(.+)")'
        return expr

    def in_pool(self, expr: str, nodes: str) -> str:
        return f"({expr}) * on (node) group_left () {nodes}"


XID_RUNBOOK = ("Look the XID up in NVIDIA's XID catalog (docs.nvidia.com/deploy/xid-errors). Application XIDs (13, "
               "31, 43, 45) point at the workload; 48, 63, 64, 74, 79, 92, 94, 95 at the GPU: drain the node, reset the "
               "GPU and run DCGM diagnostics (dcgmi diag -r 3) before returning it.")


def _pool_rules(pq: _Promql, cap, pool_selector, mig: bool, exported,
                ignored: frozenset[int] | None) -> tuple[list[AlertRule], list[tuple[str, str]]]:
    rules, skipped = [], []
    nodes = pq.pool_nodes(pool_selector)
    pool = (("pool", cap.pool),)
    gpu = pq.dcgm.gpuLabel

    def dcgm_rule(alert, fields, expr, duration, severity, summary, description, runbook):
        missing = [f for f in fields if f not in exported]
        if missing:
            skipped.append((alert, f"the exporter does not export {', '.join(missing)} "
                                   "(add it to spec.dcgmExporter.metrics)"))
            return
        rules.append(AlertRule(alert, pq.in_pool(pq.on_node(expr), nodes), duration, severity, summary,
                               description, runbook, pool))

    if cap.gpus_per_node is None:
        skipped.append(("GpuopGPUsVisibleBelowPlan", f"pool {cap.pool}: GPUs per node unknown (set gpusPerNode)"))
    else:
        n = cap.gpus_per_node
        visible = f"count by (node) (group by (node, {gpu}) ({pq.on_node('DCGM_FI_DEV_GPU_TEMP')}))"
        if "DCGM_FI_DEV_GPU_TEMP" not in exported:
            skipped.append(("GpuopGPUsVisibleBelowPlan", "the exporter does not export "
                            "DCGM_FI_DEV_GPU_TEMP (add it to spec.dcgmExporter.metrics)"))
        else:
            rules.append(AlertRule(
                "GpuopGPUsVisibleBelowPlan", f"(({visible}) or on (node) (0 * {nodes})) * on (node) {nodes} < {n}",
                "15m", "critical", f"Fewer GPUs than the plan on a node of pool {cap.pool}",
                f"Node {{{{ $labels.node }}}} of pool {cap.pool} shows {{{{ $value }}}} GPUs to DCGM; the plan says {n}.",
                "A GPU fell off the bus (XID 79), failed to initialise, or DCGM / the exporter does not run on the "
                "node. Check `nvidia-smi -L` in the driver pod and the kernel log for NVRM/Xid lines; drain the node "
                "and reset or replace the GPU; if all GPUs are missing, check the driver and exporter pods first.",
                pool + (("expected", str(n)),)))
        for resource, count in cap.per_node or ():
            rname = pq.ksm.sanitize(resource)
            allocatable = f"max by (node) ({pq.ksm.allocatable}{{resource={_q(rname)}}})"
            rules.append(AlertRule(
                "GpuopGPUsAllocatableBelowPlan",
                f"(({allocatable}) or on (node) (0 * {nodes})) * on (node) {nodes} < {count}",
                "15m", "critical", f"{resource} allocatable below the plan on a node of pool {cap.pool}",
                f"Node {{{{ $labels.node }}}} of pool {cap.pool} has {{{{ $value }}}} {resource} allocatable; the plan "
                f"says {count} per node (after MIG and sharing).",
                "The device plugin advertises fewer devices than the plan: a GPU marked unhealthy (an XID), the MIG "
                "layout or sharing config not applied (check the node's nvidia.com/mig.config.state label and the "
                "device plugin's logs), or the device plugin pod not running. Cordon the node while it is short.",
                pool + (("resource", resource), ("expected", str(count)))))
    xid = "DCGM_FI_DEV_XID_ERRORS"
    new_xid = f"changes({xid}[10m]) > 0"
    if ignored is None:       # no device plugin on the pool, or its XID check off: every XID alike
        dcgm_rule("GpuopGPUXidError", [xid], f"{xid} > 0 and {new_xid}", "0m", "warning",
                  f"XID error on a GPU of pool {cap.pool}",
                  "GPU {{ $labels.gpu }} of node {{ $labels.node }} reported XID {{ $value }}.", XID_RUNBOOK)
    else:
        if ignored:
            app = " or ".join(f"{xid} == {x}" for x in sorted(ignored))
            dcgm_rule("GpuopGPUXidError", [xid], f"({app}) and {new_xid}", "0m", "warning",
                      f"XID error on a GPU of pool {cap.pool}",
                      "GPU {{ $labels.gpu }} of node {{ $labels.node }} reported XID {{ $value }}, which the device "
                      "plugin does not count against the GPU (an application error).", XID_RUNBOOK)
        healthy = "".join(f" != {x}" for x in sorted(ignored))
        dcgm_rule("GpuopGPUXidUnhealthy", [xid], f"{xid} > 0{healthy} and {new_xid}", "0m", "critical",
                  f"A GPU of pool {cap.pool} was marked unhealthy (XID)",
                  "GPU {{ $labels.gpu }} of node {{ $labels.node }} reported XID {{ $value }}: the device plugin marks "
                  "it unhealthy and stops advertising it.", XID_RUNBOOK)
    dcgm_rule("GpuopGPUEccUncorrectable", ["DCGM_FI_DEV_ECC_DBE_VOL_TOTAL"],
              "increase(DCGM_FI_DEV_ECC_DBE_VOL_TOTAL[10m]) > 0", "0m", "critical",
              f"Uncorrectable ECC errors on a GPU of pool {cap.pool}",
              "GPU {{ $labels.gpu }} of node {{ $labels.node }} had {{ $value }} uncorrectable (double-bit) ECC "
              "errors in 10 minutes.",
              "Jobs on the GPU may have read corrupt memory. Drain the node, reset the GPU so the page is retired or "
              "the row remapped, then run DCGM diagnostics; repeated errors mean an RMA.")
    dcgm_rule("GpuopGPURowRemapFailed", ["DCGM_FI_DEV_ROW_REMAP_FAILURE"],
              "DCGM_FI_DEV_ROW_REMAP_FAILURE > 0", "0m", "critical",
              f"Row remapping failed on a GPU of pool {cap.pool}",
              "GPU {{ $labels.gpu }} of node {{ $labels.node }} could not remap a memory row.",
              "The GPU has no spare rows left for a failing one: it is no longer reliable. Drain the node and "
              "replace the GPU (RMA).")
    dcgm_rule("GpuopGPURemappedRowsRising", ["DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS"],
              f"predict_linear(DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS[6h], {EARLY_HORIZON}) "
              "- DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS >= 1", "30m", "warning",
              f"Remapped memory rows rising on a GPU of pool {cap.pool}",
              "At the last 6 hours' rate GPU {{ $labels.gpu }} of node {{ $labels.node }} remaps about {{ $value }} "
              "more rows within 7 days.",
              "An early warning: memory rows keep failing. Plan a maintenance window, run DCGM diagnostics (dcgmi "
              "diag -r 3) and open an RMA case before row remapping fails.")
    retired = "(DCGM_FI_DEV_RETIRED_SBE + DCGM_FI_DEV_RETIRED_DBE)"
    dcgm_rule("GpuopGPURetiredPagesRising", ["DCGM_FI_DEV_RETIRED_SBE", "DCGM_FI_DEV_RETIRED_DBE"],
              f"predict_linear({retired}[6h:5m], {EARLY_HORIZON}) - {retired} >= 1", "30m", "warning",
              f"Retired memory pages rising on a GPU of pool {cap.pool}",
              "At the last 6 hours' rate GPU {{ $labels.gpu }} of node {{ $labels.node }} retires about {{ $value }} "
              "more pages within 7 days.",
              "An early warning: memory pages keep failing. Plan a maintenance window, run DCGM diagnostics and "
              "open an RMA case before the GPU runs out of pages to retire.")
    dcgm_rule("GpuopGPUPagesPendingRetirement", ["DCGM_FI_DEV_RETIRED_PENDING"],
              "DCGM_FI_DEV_RETIRED_PENDING > 0", "5m", "warning",
              f"Memory pages pending retirement on a GPU of pool {cap.pool}",
              "GPU {{ $labels.gpu }} of node {{ $labels.node }} has {{ $value }} pages waiting for retirement.",
              "Pages are retired at the next GPU reset: drain the node and reset the GPU (or reboot) so the bad "
              "pages stop being used.")
    for alert, field, what in (("GpuopGPUThermalThrottling", "DCGM_FI_DEV_THERMAL_VIOLATION", "thermal"),
                               ("GpuopGPUPowerThrottling", "DCGM_FI_DEV_POWER_VIOLATION", "power")):
        dcgm_rule(alert, [field], f"rate({field}[5m]) / 1e9 > {THROTTLE_SHARE}", "15m", "warning",
                  f"GPU clocks held down by {what} limits on a node of pool {cap.pool}",
                  f"GPU {{{{ $labels.gpu }}}} of node {{{{ $labels.node }}}} spent {{{{ $value | humanizePercentage }}}} "
                  f"of the last 5 minutes throttled by {what} limits.",
                  "Sustained throttling slows every job on the GPU. Thermal: check the node's cooling, fans and inlet "
                  "temperature (DCGM_FI_DEV_GPU_TEMP). Power: check the power cap (nvidia-smi -q -d POWER) and the "
                  "rack's power budget.")
    if mig:
        state = f"{pq.ksm.labelPrefix}{pq.ksm.sanitize(MIG_STATE_LABEL)}"
        rules.append(AlertRule(
            "GpuopMIGConfigFailed", pq.in_pool(f'max by (node) ({pq.ksm.nodeLabels}{{{state}="failed"}})', nodes),
            "5m", "critical", f"MIG configuration failed on a node of pool {cap.pool}",
            f"The MIG manager could not apply pool {cap.pool}'s layout on node {{{{ $labels.node }}}} "
            f"({MIG_STATE_LABEL}=failed).",
            "Read the nvidia-mig-manager pod's log on the node: GPUs in use by a process, a GPU that needs a reset "
            "to change MIG mode, or a layout the GPU cannot hold. Drain the node and let the MIG manager retry.",
            pool))
    return rules, skipped


def _stack_rules(pq: _Promql, plan: StackPlan) -> list[AlertRule]:
    rules = []
    for component, regex, on in STACK_DAEMONSETS:
        if not on(plan):
            continue
        sel = f"{{namespace={_q(plan.namespace)}, daemonset=~{_q(regex)}}}"
        rules.append(AlertRule(
            "GpuopStackPodsNotReady",
            f"{pq.ksm.daemonsetDesired}{sel} - {pq.ksm.daemonsetReady}{sel} > 0", "15m", "critical",
            f"{component} pods not ready",
            f"{{{{ $value }}}} {component} pods of DaemonSet {{{{ $labels.daemonset }}}} are not ready.",
            f"GPU nodes without a ready {component} pod cannot run GPU work (or are not monitored). `kubectl -n "
            f"{plan.namespace} get pods -o wide` shows the nodes; read the pods' events and logs (image pulls, "
            "driver builds, the validator's init containers).",
            (("component", component),)))
    return rules


def exported_fields(plan: StackPlan) -> frozenset[str]:
    """The DCGM fields the exporter exports: the profile's list, or the built-in list's (catalog)."""
    x = plan.dcgm_exporter
    if x is None:
        return frozenset()
    if x.metrics:
        return frozenset(f for f, _, _ in x.metrics)
    return frozenset(f for f, d in metrics_catalog.load().dcgm.fields.items() if d.builtin)


def _ignored_xids(spec, plan: StackPlan, pool: str) -> frozenset[int] | None:
    """The XIDs the device plugin on a pool's nodes ignores: the env of the DaemonSet serving the pool -- the pool's
    own XID policy (nodePools[].devicePluginHealth), else the cluster's (spec.devicePlugin.health) -- with the
    profile's own spec.devicePlugin.env winning by name, as components/device_plugin.py writes it."""
    p = next(p for p in spec.nodePools if p.name == pool)
    env = dict(xid_catalog.policy_env(plan_pools.pool_health(spec, p)))
    env.update(dict(plan.operand("devicePlugin").env))
    return metrics_catalog.load().devicePluginHealth.ignored_xids(env)


def build(spec, plan: StackPlan) -> AlertsPlan | None:
    """The alerts of a built plan from spec.alerts (profile.models.Alerts); None when off."""
    a = spec.alerts
    if not a.enabled:
        return None
    pq = _Promql()
    exported = exported_fields(plan)
    rules, skipped = [], []
    mig_pools = {p.name for p in plan.pools if p.mig_layout and p.mig_strategy != "none"}
    for cap in plan.capacity.pools:
        plugin = plan.device_plugin and cap.allocation == "devicePlugin"
        r, s = _pool_rules(pq, cap, cap.node_selector, cap.pool in mig_pools, exported,
                           _ignored_xids(spec, plan, cap.pool) if plugin else None)
        rules += r
        skipped += s
    rules += _stack_rules(pq, plan)
    monitors = bool((plan.dcgm_exporter and plan.dcgm_exporter.service_monitor)
                    or (plan.node_status_exporter and plan.node_status_exporter.service_monitor))
    wanted = a.prometheusRule if a.prometheusRule is not None else (plan.platform == "openshift" or monitors)
    keys = sorted({k for cap in plan.capacity.pools for k, _ in cap.node_selector}
                  | ({MIG_STATE_LABEL} if mig_pools else set()))
    return AlertsPlan(tuple(rules), wanted, tuple(sorted(a.additionalLabels.items())),
                      tuple(dict.fromkeys(skipped)), tuple(keys))    # a field missing leaves the rule out of every pool
