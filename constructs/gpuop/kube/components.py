"""The component table: one row per GPU stack component, every list of components computed from it.

A component is one module of components/ (a cdk8s construct), one file of the rendered manifests and of
the chart's templates, and, for the GPU Operator's operands, one profile section (`spec.<key>`) and one
section of NVIDIA's chart values (`<key>.*`). The lists the stages need (the versioned images, the
switchable components, the profile sections with env / args, the chart's image keys, the manifest file
order) are derived below; nothing else spells a list of component keys (tests/test_layout.py checks it).
This module lives in kube/ because every stage may import kube; the catalog, which imports nothing of
gpuop, keeps its own Literal of the switchable keys (tests/test_layout.py ties it to SWITCHED).

Adding a component: its module in components/, its props function in stack/derive.py, its class in
stack/registry.py's REGISTRY and one row here (tests/test_layout.py checks the four agree).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Row:
    name: str                       # the component's id (Component.name): its file `<NN>-<name>.yaml`
    module: str                     # its module in components/
    rank: int                       # the Operator's state order (controllers/state_manager.go): the NN of its file
    key: str | None = None          # its profile section spec.<key> and NVIDIA's chart values key; None: neither
    switch: bool = False            # spec.<key>.enabled exists (known issues may name it)
    versioned: bool = False         # spec.<key>.version overrides the release's image version
    operand: bool = False           # spec.<key>.env / args pass through to the operand (profile OperandSettings)
    values_switch: bool = False     # gpuop's chart values always carry <key>.enabled and <key>.resources
    operator_switch: bool | None = None   # NVIDIA's chart `<key>.enabled` maps to spec.<key>.enabled; its default
    proxied: bool = False           # fetches from outside the cluster: spec.proxy reaches its env
    sub_images: tuple[tuple[str, str], ...] = ()   # further (NVIDIA chart values key, release component) images
    companion: bool = False         # gpuop's own objects, which NVIDIA's operator does not make: in operator mode
                                    # delivered beside NVIDIA's chart as the cluster's companion chart (outputs/addons.py)


# Rows in the order of the profile's sections and NVIDIA's chart values (which the schema's enums and the
# import mapping follow); `rank` gives the Operator's state order, which the files and the registry follow.
TABLE: tuple[Row, ...] = (
    Row("namespace", "namespace", 0),
    Row("node-labels", "node_labels", 1),
    Row("runtime-class", "runtime_class", 2),
    Row("driver", "driver", 3, "driver", switch=True, operand=True, values_switch=True, proxied=True,
        sub_images=(("driver.manager", "driverManager"),)),
    Row("toolkit", "toolkit", 4, "toolkit", switch=True, versioned=True, operand=True, values_switch=True,
        operator_switch=True, proxied=True),
    Row("device-plugin-config", "plugin_config", 6),
    Row("device-plugin", "device_plugin", 7, "devicePlugin", switch=True, versioned=True, operand=True,
        values_switch=True, operator_switch=True),
    Row("mps-control-daemon", "mps_control_daemon", 8),
    Row("dcgm", "dcgm", 9, "dcgm", switch=True, versioned=True, values_switch=True, operator_switch=False),
    Row("dcgm-exporter", "dcgm_exporter", 10, "dcgmExporter", switch=True, versioned=True, values_switch=True,
        operator_switch=True),
    Row("gpu-feature-discovery", "gfd", 11, "gfd", switch=True, versioned=True, values_switch=True,
        operator_switch=True),
    # values carry migManager only where a pool has a MIG layout (plan/build.py), so no values_switch
    Row("mig-manager", "mig_manager", 12, "migManager", switch=True, versioned=True, operator_switch=True),
    Row("node-status-exporter", "node_status_exporter", 13, "nodeStatusExporter", switch=True, versioned=True,
        values_switch=True, operator_switch=False),
    Row("dra", "dra", 14),
    Row("gpu-alerts", "gpu_alerts", 15, companion=True),
    Row("dashboards", "dashboards", 16, companion=True),   # gpuop's own: no Operator state, after every operand
    Row("queues", "queues", 17, companion=True),           # gpuop's own: Kueue's flavors and queues over the GPU pools
    Row("health-gate", "health_gate", 18, companion=True),   # gpuop's own: the checks the engines run after the stack rolls
    # the profile and NVIDIA's chart name the validator last; its state comes right after the toolkit's
    Row("operator-validator", "validator", 5, "validator", versioned=True),
)

BY_RANK: tuple[Row, ...] = tuple(sorted(TABLE, key=lambda r: r.rank))
NAMES: tuple[str, ...] = tuple(r.name for r in BY_RANK)                 # manifest files, registry order
KEYS: tuple[str, ...] = tuple(r.key for r in TABLE if r.key)            # profile sections / chart values keys
SWITCHED: tuple[str, ...] = tuple(r.key for r in TABLE if r.key and r.switch)
VERSIONED: tuple[str, ...] = tuple(r.key for r in TABLE if r.key and r.versioned)
OPERANDS: tuple[str, ...] = tuple(r.key for r in TABLE if r.key and r.operand)
ENV_ONLY: tuple[str, ...] = tuple(r.key for r in TABLE if r.key and not r.operand)   # env only through the chart
VALUES_SWITCHABLE: tuple[str, ...] = tuple(r.key for r in TABLE if r.key and r.values_switch)
OPERATOR_SWITCHABLE: tuple[str, ...] = tuple(r.key for r in TABLE if r.key and r.operator_switch is not None)
OPERATOR_DEFAULT_ON: dict[str, bool] = {r.key: r.operator_switch for r in TABLE
                                        if r.key and r.operator_switch is not None}
COMPANION: tuple[str, ...] = tuple(r.name for r in BY_RANK if r.companion)   # outputs/addons.py, registry order
# the companion's Argo CD Application / Flux HelmRelease: gpuop-<cluster>-addons (validate/operator.py bounds <cluster>)
COMPANION_OBJECT = ("gpuop-", "-addons")
PROXIED: tuple[str, ...] = tuple(r.key for r in TABLE if r.key and r.proxied)
# NVIDIA chart values key -> (profile section or None, release component): every operand image the chart names
CHART_IMAGES: dict[str, tuple[str | None, str]] = {
    k: v for r in TABLE if r.key for k, v in ((r.key, (r.key, r.key)),) + tuple((s, (None, c)) for s, c in r.sub_images)}
RELEASE_IMAGES: tuple[str, ...] = tuple(c for _, c in CHART_IMAGES.values())   # their release components
