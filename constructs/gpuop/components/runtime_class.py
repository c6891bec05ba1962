"""RuntimeClasses `nvidia`, `nvidia-cdi` and `nvidia-legacy`; as the Operator's state pre-requisites.

The container toolkit registers these handlers in the container runtime; GPU pods (and gpuop's own
operands) select `nvidia` with runtimeClassName. With CDI on (the v26.7 default) the Operator also
creates `nvidia-cdi` and `nvidia-legacy`.

Emitted whatever the toolkit setting, as upstream (state pre-requisites is off only with the NRI plugin,
which gpuop does not offer): with a preinstalled toolkit (`toolkit.enabled: false`) the operands still
run with runtimeClassName `nvidia`, so the node's own toolkit must register the runtime handlers
`nvidia`, `nvidia-cdi` and `nvidia-legacy` (e.g. `nvidia-ctk runtime configure --runtime=containerd
--cdi.enabled`), or their pods stay ContainerCreating.
"""

from __future__ import annotations

from pydantic import Field

from gpuop.components.base import Component
from gpuop.components.props import Props
from gpuop.components.builders import meta


class RuntimeClassProps(Props):
    cdi: bool = Field(True, description="Also create nvidia-cdi and nvidia-legacy. Omitted: true (v26.7 default).")


class RuntimeClasses(Component):
    name = "runtime-class"
    values_key = None
    props_type = RuntimeClassProps

    @classmethod
    def render(cls, props: RuntimeClassProps) -> list[dict]:
        handlers = ["nvidia"] + (["nvidia-cdi", "nvidia-legacy"] if props.cdi else [])
        return [{"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass",
                 "metadata": meta(h, labels={"app.kubernetes.io/component": "gpu-operator"}), "handler": h}
                for h in handlers]
