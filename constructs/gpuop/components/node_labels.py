"""Node labels, in git: NodeFeatureRule `nvidia-gpu-node-labels` (nfd.k8s-sigs.io/v1alpha1, cluster
scoped), read by Node Feature Discovery's master. It stands in for the Operator's node-labeling
controller (controllers/state_manager.go, nodelabeling), which gpuop does not have.

What the Operator writes at run time, and what this rule writes instead:
- `nvidia.com/gpu.present=true` on nodes NFD sees an NVIDIA display controller on: PCI vendor `10de`,
  class `0300` (VGA) or `0302` (3D) -- the same PCI facts behind the NFD labels
  `feature.node.kubernetes.io/pci-0300_10de.present` / `pci-0302_10de.present` the Operator reads.
- `nvidia.com/gpu.deploy.<component>=true` on those nodes, for every component the profile enables
  (gathered from the components' `deploy_label`, so a new component brings its label). Each GPU
  DaemonSet selects its own label, as upstream; the driver manager pauses these labels during a driver
  upgrade to move the other operands off the node, as upstream.

Differences from upstream, and why -- the opt-out:
- The Operator sets a deploy label only where it is missing, so an admin's `...deploy.<c>=false` opts
  a node out. NFD owns the labels it publishes and rewrites them on every update, and a NodeFeatureRule
  matches node features (PCI, kernel, files), never existing node labels, so it cannot skip nodes that
  say `false`. gpuop therefore moves the opt-out into the DaemonSets: each one requires, by node
  affinity, `nvidia.com/gpu.deploy.operands NotIn [false]` (upstream's own "no operands here" key, not
  published by NFD) and `gpuop/deploy.<component> NotIn [false]`. Label a node
  `nvidia.com/gpu.deploy.operands=false` to keep every GPU operand off it, or
  `gpuop/deploy.<component>=false` (e.g. `gpuop/deploy.dcgm-exporter=false`) for one component; the
  DaemonSet controller removes the pod from a node as soon as it is labelled.
- `nvidia.com/gpu.deploy.mig-manager=true` (when the MIG manager runs) only on nodes whose GPU is
  MIG-capable, told by PCI device id (every MIG-capable id of the GPU catalog), as the Operator labels
  only MIG-capable nodes.
- Per pool, `nvidia.com/mig.config=<the pool's mig-parted config>` and
  `nvidia.com/device-plugin.config=<the pool's plugin config>` (pools.py), one rule per GPU model on its
  PCI device ids (vendor 10de + device). NFD sees hardware, not the pool's node labels: where pools of
  the same GPU model need different values, no rule is emitted for that label; the validate stage warns
  at the pools and names the labels their node group template must carry. The Operator sets
  `mig.config=all-disabled` on unlabelled MIG-capable nodes; gpuop labels declared pools explicitly
  (`all-disabled` for MIG-capable pools without a layout), so taking a layout off a pool turns MIG off.
- The sandbox/vGPU workload labels are not emitted (gpuop runs container workloads only).
- NFD must allow the `nvidia.com` label namespace (master `extraLabelNs`); gpuop's NFD chart values do
  that in `spec.nfd.mode: deploy` (catalog releases.yaml), an existing NFD must be configured so.
"""

from __future__ import annotations

from pydantic import Field

from gpuop.components.base import Component
from gpuop.components.props import Props
from gpuop.components.builders import meta

NAME = "nvidia-gpu-node-labels"
def pci_match(p, device_ids=()) -> list[dict]:
    """NVIDIA display controllers (vendor and classes from the GPU catalog), optionally only those with
    one of these PCI device ids (NFD pci.device attribute `device`)."""
    expr = {"vendor": {"op": "In", "value": [p.pci_vendor]}}
    if device_ids:
        expr["device"] = {"op": "In", "value": list(device_ids)}
    expr["class"] = {"op": "In", "value": list(p.pci_classes)}
    return [{"feature": "pci.device", "matchExpressions": expr}]


class NodeLabelsProps(Props):
    pci_vendor: str = Field(description="PCI vendor id of NVIDIA GPUs (GPU catalog). Required.")
    pci_classes: tuple[str, ...] = Field(description="PCI classes of GPU display controllers (GPU catalog). Required.")
    deploy_labels: tuple[str, ...] = Field((), description=(
        "Components whose nvidia.com/gpu.deploy.<name>=true label GPU nodes get. Omitted: none."))
    mig_capable_labels: tuple[str, ...] = Field((), description=(
        "Components whose deploy label only MIG-capable GPU nodes get. Omitted: none."))
    mig_capable_ids: tuple[str, ...] = Field((), description=(
        "NFD PCI device ids (4 lowercase hex) of the MIG-capable GPUs. Omitted: none."))
    pool_rules: tuple[tuple[str, tuple[str, ...], tuple[tuple[str, str], ...]], ...] = Field((), description=(
        "(GPU model, PCI device ids, labels) per GPU model whose pools agree on their labels. Omitted: none."))


class NodeLabels(Component):
    name = "node-labels"
    values_key = None
    props_type = NodeLabelsProps

    @classmethod
    def render(cls, p: NodeLabelsProps) -> list[dict]:
        rules = [{"name": "nvidia.com/gpu.present", "labels": {"nvidia.com/gpu.present": "true"},
                  "matchFeatures": pci_match(p)}]
        if p.deploy_labels:
            rules.append({"name": "nvidia.com/gpu.deploy",
                          "labels": {f"nvidia.com/gpu.deploy.{c}": "true" for c in p.deploy_labels},
                          "matchFeatures": pci_match(p)})
        if p.mig_capable_labels and p.mig_capable_ids:
            rules.append({"name": "nvidia.com/gpu.deploy.mig-capable",
                          "labels": {f"nvidia.com/gpu.deploy.{c}": "true" for c in p.mig_capable_labels},
                          "matchFeatures": pci_match(p, p.mig_capable_ids)})
        for gpu, ids, labels in p.pool_rules:
            rules.append({"name": f"gpuop.pool.{gpu}", "labels": dict(labels), "matchFeatures": pci_match(p, ids)})
        return [{"apiVersion": "nfd.k8s-sigs.io/v1alpha1", "kind": "NodeFeatureRule",
                 "metadata": meta(NAME, labels={"app.kubernetes.io/managed-by": "gpuop"}), "spec": {"rules": rules}}]
