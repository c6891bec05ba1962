"""The component registry: one explicit tuple, in the Operator's state order. Never found by name.

Each entry pairs a `Component` (a cdk8s construct; components/) with the function that derives its
props from a plan (derive.py), or gives None when the plan leaves it off. Adding a component means adding
its module, its props function, one line here and its row in kube/components.py (the component table every
list of components derives from; tests/test_layout.py checks this tuple runs the table's rows in their rank).

Order (controllers/state_manager.go): node labels (the Operator's node-labeling controller runs before
any state), pre-requisites (RuntimeClasses), driver, container-toolkit, operator-validation,
device-plugin (after its config, the user's ConfigMap upstream), mps-control-daemon, dcgm, dcgm-exporter,
gpu-feature-discovery, mig-manager, node-status-exporter. The namespace comes first because everything
else lives in it.
"""

from __future__ import annotations

from collections.abc import Callable

from gpuop.components.base import Component
from gpuop.components.dashboards import Dashboards
from gpuop.components.dcgm import Dcgm
from gpuop.components.dcgm_exporter import DcgmExporter
from gpuop.components.device_plugin import DevicePlugin
from gpuop.components.dra import DraObjects
from gpuop.components.driver import Driver
from gpuop.components.gfd import GpuFeatureDiscovery
from gpuop.components.mig_manager import MigManager
from gpuop.components.mps_control_daemon import MpsControlDaemon
from gpuop.components.namespace import Namespace
from gpuop.components.node_labels import NodeLabels
from gpuop.components.gpu_alerts import GpuAlerts
from gpuop.components.health_gate import HealthGate
from gpuop.components.node_status_exporter import NodeStatusExporter
from gpuop.components.plugin_config import PluginConfig
from gpuop.components.queues import KueueQueues
from gpuop.components.props import Props
from gpuop.components.runtime_class import RuntimeClasses
from gpuop.components.toolkit import ContainerToolkit
from gpuop.components.validator import OperatorValidator
from gpuop.plan.model import StackPlan
from gpuop.stack import derive

REGISTRY: tuple[tuple[type[Component], Callable[..., Props | None]], ...] = (
    (Namespace, derive.namespace),
    (NodeLabels, derive.node_labels),
    (RuntimeClasses, derive.runtime_classes),
    (Driver, derive.driver),
    (ContainerToolkit, derive.toolkit),
    (OperatorValidator, derive.validator),
    (PluginConfig, derive.plugin_config),
    (DevicePlugin, derive.device_plugin),
    (MpsControlDaemon, derive.mps_control_daemon),
    (Dcgm, derive.dcgm),
    (DcgmExporter, derive.dcgm_exporter),
    (GpuFeatureDiscovery, derive.gfd),
    (MigManager, derive.mig_manager),
    (NodeStatusExporter, derive.node_status_exporter),
    (DraObjects, derive.dra),                      # gpuop's DeviceClasses and claim templates
    (GpuAlerts, derive.gpu_alerts),                # the PrometheusRule of plan/alerts.py
    (Dashboards, derive.dashboards),               # the Grafana sidecar's ConfigMap
    (KueueQueues, derive.queues),                  # Kueue's ResourceFlavors, ClusterQueue, LocalQueues
    (HealthGate, derive.health_gate),              # the checks each engine runs after the stack rolls
)
COMPONENTS: tuple[type[Component], ...] = tuple(c for c, _ in REGISTRY)


def component_props(plan: StackPlan) -> list[tuple[type[Component], Props]]:
    """Every component the plan turns on, with its props, in registry order. The node labels are
    derived last: they name the deploy label of every DaemonSet component that is on."""
    chosen = {c: derive(plan) for c, derive in REGISTRY if c is not NodeLabels}
    on = [c for c, p in chosen.items() if p is not None and c.deploy_label]
    chosen[NodeLabels] = derive.node_labels(
        plan, deploy_labels=tuple(c.deploy_label for c in on if not c.mig_capable_only),
        mig_capable_labels=tuple(c.deploy_label for c in on if c.mig_capable_only))
    return [(c, chosen[c]) for c in COMPONENTS if chosen[c] is not None]
