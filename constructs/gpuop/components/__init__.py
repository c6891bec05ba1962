"""The component registry: one explicit tuple, in the Operator's state order. Never found by name.

Each entry is a `Component` subclass (a cdk8s construct) with `from_plan(plan) -> props | None` and a
pure `render(props)`. Adding a component means adding its module and one line here.

Order (controllers/state_manager.go): node labels (the Operator's node-labeling controller runs before
any state), pre-requisites (RuntimeClasses), driver, container-toolkit, operator-validation,
device-plugin (after its config, the user's ConfigMap upstream), mps-control-daemon, dcgm, dcgm-exporter,
gpu-feature-discovery, mig-manager, node-status-exporter. The namespace comes first because everything
else lives in it.
"""

from .dcgm import Dcgm
from .dcgm_exporter import DcgmExporter
from .device_plugin import DevicePlugin
from .driver import Driver
from .mig_manager import MigManager
from .mps_control_daemon import MpsControlDaemon
from .gfd import GpuFeatureDiscovery
from .namespace import Namespace
from .node_labels import NodeLabels
from .node_status_exporter import NodeStatusExporter
from .plugin_config import PluginConfig
from .runtime_class import RuntimeClasses
from .toolkit import ContainerToolkit
from .validator import OperatorValidator

COMPONENTS = (
    Namespace,
    NodeLabels,
    RuntimeClasses,
    Driver,
    ContainerToolkit,
    OperatorValidator,
    PluginConfig,
    DevicePlugin,
    MpsControlDaemon,
    Dcgm,
    DcgmExporter,
    GpuFeatureDiscovery,
    MigManager,
    NodeStatusExporter,
)
