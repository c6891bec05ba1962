"""The component registry: one explicit tuple, in the Operator's state order. Never found by name.

Each entry is a `Component` subclass (a cdk8s construct) with `from_plan(plan) -> props | None` and a
pure `render(props)`. Adding a component means adding its module and one line here.
"""

from .device_plugin import DevicePlugin
from .driver import Driver
from .namespace import Namespace
from .runtime_class import RuntimeClasses
from .toolkit import ContainerToolkit

COMPONENTS = (
    Namespace,
    RuntimeClasses,
    Driver,
    ContainerToolkit,
    DevicePlugin,
)
