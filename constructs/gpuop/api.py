"""gpuop as cdk8s constructs, for a cdk8s app of your own (docs/constructs.md).

    import cdk8s
    from gpuop.api import GpuStack

    app = cdk8s.App()
    stack = GpuStack(app, "prod-east", profile="profiles/prod-east.yaml")      # or profile={...}
    stack.api_object("DaemonSet", "nvidia-device-plugin-daemonset").add_json_patch(
        cdk8s.JsonPatch.add("/spec/template/metadata/labels/team", "ml"))
    app.synth()

`GpuStack(scope, id, profile=...)` is a cdk8s Chart holding one cluster's whole stack: the profile (a
file, or the same document as a dict) goes through gpuop's load, validate and plan stages, so bad input
raises gpuop.errors.UserError with every problem located, exactly as `gpuop synth` reports it; the
components are the ones `gpuop synth` writes, with the value slots (tolerations, priorityClassName,
resources, ...) filled with the profile's values. `stack.components` maps each component's name to its
construct, `stack.api_object(kind, name)` finds one object to patch, `stack.plan` is the cluster's plan.

Each component is a construct of its own, built from its props alone (the classes exported below, each
with its `*Props` model; field descriptions say what an omitted field does):

    from gpuop.api import DevicePlugin, DevicePluginProps, default_values
    DevicePlugin(chart, "device-plugin", DevicePluginProps(image="nvcr.io/nvidia/k8s-device-plugin:v0.18.2",
                 ...), values=default_values(tolerations=[]))

`values=` fills the component's value slots (default_values(): the chart defaults of a profile that sets
nothing); a component given no values outside a GpuStack would write the slot markers (⟦tolerations⟧)
into the YAML, so the app's synth fails instead, naming each unfilled slot.

This module is the public surface: the names in `__all__` keep their meaning across minor releases.
Nothing of gpuop imports it.
"""

from __future__ import annotations

import copy
import tempfile
from pathlib import Path
from typing import Any

from gpuop.components.runtime import start_cdk8s

cdk8s = start_cdk8s()  # the Node jsii runs on (node_modules/.bin/node from `npm ci` first)
from constructs import Construct  # noqa: E402

from gpuop.components.base import Component  # noqa: E402
from gpuop.components.dcgm import Dcgm, DcgmProps  # noqa: E402
from gpuop.components.dcgm_exporter import DcgmExporter, DcgmExporterProps  # noqa: E402
from gpuop.components.device_plugin import DevicePlugin, DevicePluginProps  # noqa: E402
from gpuop.components.dra import DraObjects, DraProps  # noqa: E402
from gpuop.components.driver import Driver, DriverProps  # noqa: E402
from gpuop.components.gfd import GfdProps, GpuFeatureDiscovery  # noqa: E402
from gpuop.components.mig_manager import MigManager, MigManagerProps  # noqa: E402
from gpuop.components.mps_control_daemon import MpsControlDaemon, MpsControlDaemonProps  # noqa: E402
from gpuop.components.namespace import Namespace, NamespaceProps  # noqa: E402
from gpuop.components.node_labels import NodeLabels, NodeLabelsProps  # noqa: E402
from gpuop.components.node_status_exporter import NodeStatusExporter, NodeStatusExporterProps  # noqa: E402
from gpuop.components.plugin_config import PluginConfig, PluginConfigProps  # noqa: E402
from gpuop.components.runtime_class import RuntimeClasses, RuntimeClassProps  # noqa: E402
from gpuop.components.toolkit import ContainerToolkit, ToolkitProps  # noqa: E402
from gpuop.components.validator import OperatorValidator, ValidatorProps  # noqa: E402
from gpuop.errors import Issue, UserError  # noqa: E402
from gpuop.plan.model import StackPlan  # noqa: E402
from gpuop.stack import chart as _chart  # noqa: E402
from gpuop.stack.registry import COMPONENTS  # noqa: E402

__all__ = [
    "GpuStack", "plan", "default_values", "Component", "UserError",
    "Namespace", "NamespaceProps", "NodeLabels", "NodeLabelsProps", "RuntimeClasses", "RuntimeClassProps",
    "Driver", "DriverProps", "ContainerToolkit", "ToolkitProps", "OperatorValidator", "ValidatorProps",
    "PluginConfig", "PluginConfigProps", "DevicePlugin", "DevicePluginProps", "MpsControlDaemon",
    "MpsControlDaemonProps", "Dcgm", "DcgmProps", "DcgmExporter", "DcgmExporterProps", "GpuFeatureDiscovery",
    "GfdProps", "MigManager", "MigManagerProps", "NodeStatusExporter", "NodeStatusExporterProps",
    "DraObjects", "DraProps",
]

ProfileSource = str | Path | dict[str, Any]


def plan(profile: ProfileSource) -> StackPlan:
    """One cluster's plan from a profile file or a profile document (a dict, as the YAML would read);
    UserError with every problem when the profile is refused. A document cannot use `extends:` (its
    parents are files next to a profile file): pass the file instead."""
    from gpuop.pipeline.run import plan_all

    if isinstance(profile, dict):
        from gpuop.kube.yamlio import dump_plain

        meta = profile.get("metadata")
        name = str(meta.get("name", "profile")) if isinstance(meta, dict) else "profile"
        if "extends" in profile:
            raise UserError(Issue(f"<profile {name}>", 0, 0, "extends", "a profile document given as a dict "
                                  "cannot extend a parent file; pass the profile file (GpuStack(profile=PATH))"))
        with tempfile.TemporaryDirectory(prefix="gpuop-profile-") as tmp:
            f = Path(tmp) / f"{name}.yaml"
            f.write_text(dump_plain(profile))
            try:
                plans, _ = plan_all([f])
            except UserError as exc:       # the problems of the document, not of a temporary file
                raise UserError([Issue(f"<profile {name}>", i.line, i.col, i.path, i.message, i.severity)
                                 if i.file.endswith(f.name) else i for i in exc.issues]) from None
    else:
        path = Path(profile)
        if not path.is_file():
            raise UserError(Issue(str(path), 0, 0, "", "no such profile file (GpuStack(profile=...) takes a "
                                  "profile file or a profile document as a dict)"))
        plans, _ = plan_all([path])
    return plans[0]


def default_values(**overrides: Any) -> dict[str, Any]:
    """The values a lone component's slots are filled from: the chart defaults of a profile that sets
    nothing (the stack release's registry, IfNotPresent, system-node-critical, the Operator's GPU
    toleration, no pull secrets, no resources), with `overrides` on top (top-level keys, e.g.
    tolerations=[], imageRegistry="registry.example.com/nvidia", devicePlugin={"resources": {...}})."""
    from gpuop import catalog
    from gpuop.plan.build import UPSTREAM_TOLERATIONS
    from gpuop.profile.models import DaemonSets, Images

    values: dict[str, Any] = {
        "imageRegistry": catalog.load().releases[-1].registry,
        "imagePullPolicy": Images.model_fields["pullPolicy"].default,
        "imagePullSecrets": [],
        "priorityClassName": DaemonSets.model_fields["priorityClassName"].default,
        "tolerations": copy.deepcopy(list(UPSTREAM_TOLERATIONS)),
    }
    for component in COMPONENTS:
        if component.values_key:
            values[component.values_key] = {"resources": {}}
    values["validator"] = {"resources": {}}
    values.update(copy.deepcopy(overrides))
    return values


class GpuStack(_chart.GpuStack):
    """One cluster's GPU stack as a cdk8s Chart, from a profile file or document (see the module docstring)."""

    def __init__(self, scope: Construct, id: str, *, profile: ProfileSource | StackPlan):
        the_plan = profile if isinstance(profile, StackPlan) else plan(profile)
        super().__init__(scope, id, the_plan, fill=True)

    def component(self, name: str) -> Component:
        """The component construct by its name (device-plugin, driver, ...); KeyError lists the names."""
        try:
            return self.components[name]
        except KeyError:
            raise KeyError(f"{name!r} is not a component of this stack; it has {', '.join(self.components)}") from None

    def api_object(self, kind: str, name: str) -> cdk8s.ApiObject:
        """The one object of the stack with this kind and metadata.name, to patch (add_json_patch)."""
        found = [o for c in self.components.values() for o in c.node.children
                 if isinstance(o, cdk8s.ApiObject) and o.kind == kind and o.name == name]
        if len(found) != 1:
            raise KeyError(f"the stack has {len(found)} {kind} named {name!r}")
        return found[0]
