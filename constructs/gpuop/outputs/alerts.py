"""dist/<cluster>/alerts/gpu-alerts.rules.yaml: the cluster's alerting rules (plan/alerts.py) as a plain
Prometheus rule file, for a Prometheus without the Prometheus Operator (`rule_files:`); the stack carries the
same rules as a PrometheusRule where the plan wants one (components/gpu_alerts.py). Its header says which node
labels kube-state-metrics must export for the per-pool rules, and which rules were left out and why.
"""

from __future__ import annotations

from gpuop.outputs.target import Target, Written
from gpuop.kube.yamlio import dump_plain

FILE = "gpu-alerts.rules.yaml"


def header(plan) -> str:
    a = plan.alerts
    lines = [f"# Prometheus alerting rules for the GPUs of cluster {plan.name}, written by gpuop (plan/alerts.py).",
             "# Load with `rule_files:` (`promtool check rules` accepts it as is)."
             + (" The stack also carries them as PrometheusRule gpuop-gpu-alerts." if a.prometheus_rule else "")]
    if a.node_label_keys:
        lines.append("# The per-pool rules match nodes on their labels: run kube-state-metrics with "
                     f"--metric-labels-allowlist=nodes=[{','.join(a.node_label_keys)}].")
    lines += [f"# Not written: {alert}: {why}." for alert, why in a.skipped]
    return "\n".join(lines) + "\n"


def write(t: Target) -> Written:
    """Writer (outputs/target.py): dist/<cluster>/alerts/gpu-alerts.rules.yaml (when the cluster's alerts are on)."""
    return Written(files(t.plan, f"{t.name}/alerts"))


def files(plan, folder: str) -> dict[str, str]:
    """{<folder>/gpu-alerts.rules.yaml: text}; {} when the cluster's alerts are off."""
    if plan.alerts is None:
        return {}
    return {f"{folder}/{FILE}": header(plan) + dump_plain({"groups": plan.alerts.groups(plan.name)})}
