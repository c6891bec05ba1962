"""The props every component shares, declared once: the base of all props, GPU DaemonSet placement,
the validated-DaemonSet props (image + validator image) and ServiceMonitor settings.

Props are frozen pydantic models with unknown fields refused (cdk8s-plus style); each field's
description says what happens when it is omitted. Plans are turned into props by stack/derive.py; a
component sees its props and nothing else.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

# Node opt-out, honoured by every GPU DaemonSet through required node affinity (node labels are NFD's;
# see node_labels.py for why the deploy labels themselves cannot carry a user's `false`).
OPERANDS_LABEL = "nvidia.com/gpu.deploy.operands"      # =false: no GPU operand on this node (upstream's key)
OPT_OUT_PREFIX = "gpuop/deploy."                       # gpuop/deploy.<component>=false: not this one


class Props(BaseModel):
    """Base of every component's props: frozen, unknown fields refused."""
    model_config = ConfigDict(extra="forbid", frozen=True)
    namespace: str = Field("gpu-operator", description="Namespace of the namespaced objects. Omitted: gpu-operator.")


class Placement(BaseModel):
    """Where a GPU DaemonSet may run beyond its deploy label (the profile's spec.daemonsets additions), and
    the platform admission it must pass (OpenShift: an SCC of its own, components/openshift.py)."""
    model_config = ConfigDict(extra="forbid", frozen=True)
    node_selector: dict[str, str] = Field(default_factory=dict, description="Extra nodeSelector labels. Omitted: none.")
    node_affinity: tuple[tuple[str, str, tuple[str, ...]], ...] = Field(
        (), description="Extra required node affinity (key, operator, values). Omitted: none.")
    openshift: bool = Field(False, description=(
        "OpenShift: the component's pods run under a SecurityContextConstraints of their own, which only the "
        "component's ServiceAccount may use. Omitted: false (Pod Security Admission only)."))
    pod_labels: dict[str, str] = Field(default_factory=dict, description=(
        "Labels added to the pods (spec.daemonsets.labels; never `app`). Omitted: none."))
    pod_annotations: dict[str, str] = Field(default_factory=dict, description=(
        "Annotations added to the pods (spec.daemonsets.annotations). Omitted: none."))
    root_fs: str = Field("/", description="Host path of every `host-root` volume. Omitted: /.")
    driver_install_dir: str = Field("/run/nvidia/driver", description=(
        "Host path of every `driver-install-dir` volume. Omitted: /run/nvidia/driver."))


class DaemonSetProps(Props):
    """Props of a component that runs a GPU DaemonSet."""
    placement: Placement = Field(default_factory=Placement, description="Omitted: deploy label and opt-outs only.")
    init_resources: bool = Field(True, description=(
        "The init containers the operator adds (the `*-validation` ones, the driver manager) take the validator's "
        "and the driver's resources, as v26.7's transforms give them; false: none, as the older releases' "
        "(catalog/data/releases.yaml initContainerResources). Omitted: true."))
    absent_env: dict[str, tuple[str, ...]] = Field(default_factory=dict, description=(
        "Container name -> env names the release's operator does not set on it (catalog/data/releases.yaml "
        "assets.absentEnv): dropped from the component's DaemonSets. Omitted: none, v26.7's env."))


class ValidatedProps(DaemonSetProps):
    """Props of a GPU DaemonSet whose pods wait for a validation step (an init container on the validator
    image), as most operands upstream."""
    image: str = Field(description="The component's image. Required.")
    validator_image: str = Field(description=(
        "Validator image for the validation init container (toolkit-validation; driver-validation for the "
        "toolkit). Required."))


class ServiceMonitorProps(BaseModel):
    """A Prometheus Operator ServiceMonitor to emit beside a metrics Service."""
    model_config = ConfigDict(extra="forbid", frozen=True)
    interval: str = Field("15s", description="Scrape interval. Omitted: 15s (the Operator's default).")
    honor_labels: bool = Field(False, description="honorLabels on the endpoint. Omitted: false.")
    labels: tuple[tuple[str, str], ...] = Field((), description="Extra labels on the ServiceMonitor. Omitted: none.")
