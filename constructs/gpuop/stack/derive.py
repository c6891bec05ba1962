"""Plan -> props: what each component is given, derived from a cluster's `StackPlan`.

This is the only place that reads the plan on a component's behalf, so components see their props and
nothing else (cdk8s-plus style): a component can be built and tested from its props alone. Each function
returns the component's props, or None when the plan leaves the component off. The registry
(registry.py) pairs each component with its function here.
"""

from __future__ import annotations

import json

from gpuop.components.dashboards import DashboardsProps, PoolPanelProps
from gpuop.components.dcgm import DcgmProps
from gpuop.components.dcgm_exporter import DcgmExporterProps
from gpuop.components.device_plugin import DevicePluginProps, HealthPolicyProps
from gpuop.components.dra import ClaimRequestProps, ClaimTemplateProps, DeviceClassProps, DraProps
from gpuop.components.driver import DriverProps, Variant
from gpuop.components.gfd import GfdProps
from gpuop.components.gpu_alerts import GpuAlertsProps
from gpuop.components.mig_manager import MigManagerProps
from gpuop.components.mps_control_daemon import MpsControlDaemonProps
from gpuop.components.namespace import NamespaceProps
from gpuop.components.node_labels import NodeLabelsProps
from gpuop.components.node_status_exporter import NodeStatusExporterProps
from gpuop.components.plugin_config import PluginConfigProps
from gpuop.components.queues import FlavorProps, QueuesProps
from gpuop.components.health_gate import CheckProps, HealthGateProps, PoolGateProps
from gpuop.components.props import Placement, ServiceMonitorProps
from gpuop.components.runtime_class import RuntimeClassProps
from gpuop.components.toolkit import ASSET_HOOKS_DIR, ToolkitProps
from gpuop.components.validator import ValidatorProps
from gpuop.kube.slots import slot
from gpuop.plan.model import Monitor, StackPlan, sidecar_os_tag
from gpuop.plan.pools import HEALTH_LABEL



def placement(plan: StackPlan) -> Placement:
    return Placement(node_selector=dict(plan.scheduling.node_selector), node_affinity=plan.scheduling.node_affinity,
                     openshift=plan.platform == "openshift", pod_labels=dict(plan.pod_labels),
                     pod_annotations=dict(plan.pod_annotations), root_fs=plan.root_fs,
                     driver_install_dir=plan.driver_root)


def _operand(plan: StackPlan, key: str) -> dict:
    """The pass-through props (env_overrides, args) of a component with spec.<key>.env / args."""
    o = plan.operand(key)
    return {"env_overrides": o.env, "args": o.args}


def mig_strategy(plan: StackPlan) -> str | None:
    """MIG_STRATEGY for the device plugin, GFD and the MPS daemon: None where each pool's plugin config
    carries its own strategy (plan/pools.py), since the env would override the config file."""
    return None if plan.pool_configs.per_pool_strategy else plan.mig_strategy


def _monitor(m: Monitor | None) -> ServiceMonitorProps | None:
    if m is None:
        return None
    return ServiceMonitorProps(interval=m.interval, honor_labels=m.honor_labels, labels=m.labels)


def _daemonset(plan: StackPlan, image: str) -> dict:
    """The props every validated GPU DaemonSet shares (components/props.py ValidatedProps)."""
    return {"namespace": plan.namespace, "image": plan.image(image).ref,
            "validator_image": plan.image("validator").ref, "placement": placement(plan),
            "init_resources": plan.init_resources, "absent_env": dict(plan.assets.absent_env)}


def namespace(plan: StackPlan) -> NamespaceProps:
    o = plan.openshift
    if o is None:
        return NamespaceProps(namespace=plan.namespace)
    return NamespaceProps(namespace=plan.namespace, labels={o.monitoring_label: "true"},
                          prometheus=(o.prometheus_namespace, o.prometheus_sa))


def node_labels(plan: StackPlan, deploy_labels: tuple[str, ...] = (),
                mig_capable_labels: tuple[str, ...] = ()) -> NodeLabelsProps | None:
    """`deploy_labels` / `mig_capable_labels`: of the DaemonSet components the plan turns on (the
    registry gathers them, so a new component brings its label)."""
    if not plan.nfd.rules:
        return None
    pc = plan.pool_configs
    if plan.dra is not None:     # the device-plugin label comes per pool (plan/pools.py): never on DRA nodes
        deploy_labels = tuple(c for c in deploy_labels if c != "device-plugin")
    return NodeLabelsProps(namespace=plan.namespace, pci_vendor=plan.pci_vendor, pci_classes=plan.pci_classes,
                           deploy_labels=deploy_labels, mig_capable_labels=mig_capable_labels,
                           mig_capable_ids=pc.mig_capable_ids,
                           pool_rules=tuple((r.gpu, r.device_ids, r.labels) for r in pc.nfd_rules))


def runtime_classes(plan: StackPlan) -> RuntimeClassProps:
    """Always (upstream gates the pre-requisites state only on the NRI plugin, which gpuop does not
    offer): the operands select runtimeClassName `nvidia` whether or not the toolkit is preinstalled."""
    return RuntimeClassProps(namespace=plan.namespace)


def toolkit_install_dir(plan: StackPlan) -> str | None:
    """Where the operator-installed toolkit puts the CDI hook (CRD default toolkit.installDir); None with
    a preinstalled toolkit (no NVIDIA_CDI_HOOK_PATH)."""
    return plan.toolkit_install_dir if plan.toolkit else None


def driver(plan: StackPlan) -> DriverProps | None:
    if not plan.driver_variants:
        return None
    u, o = plan.upgrade, plan.openshift
    digests = dict(plan.driver_digests)
    variants = tuple(Variant(name=v.name, tag=v.tag, node_selector=dict(v.node_selector), alternatives=v.pool_terms,
                             labels=dict(v.labels), pod_labels=dict(v.pod_labels), rhcos=v.rhcos, split=v.split,
                             os_id=v.os_id, precompiled=v.kernel is not None, os_tag=sidecar_os_tag(v),
                             digest=digests.get(f"{plan.image('driver').path}:{v.tag}"),
                             rdma=v.sidecars.rdma, use_host_mofed=v.sidecars.host_mofed, gds=v.sidecars.gds,
                             gdrcopy=v.sidecars.gdrcopy)
                     for v in plan.driver_variants)
    sidecars = {name: (i.path, i.tag) for name, i in (("gds", plan.gds), ("gdrcopy", plan.gdrcopy)) if i}
    dtk = {"dtk_image_stream": o.dtk_image_stream, "dtk_namespace": o.dtk_namespace} if o else {}
    return DriverProps(namespace=plan.namespace, repository=f"{slot('imageRegistry')}/{plan.image('driver').path}",
                       variants=variants,
                       openshift_version=plan.platform_version if o else None, **dtk,
                       manager_image=plan.image("driverManager").ref, runtime=plan.runtime,
                       image_registry=plan.values["imageRegistry"],
                       kernel_module_type=plan.kernel_module_type, placement=placement(plan),
                       init_resources=plan.init_resources,
                       gpu_pod_eviction=u.gpu_pod_deletion, auto_drain=u.drain,
                       drain_timeout=f"{u.timeout_seconds}s", drain_force=u.force,
                       drain_delete_emptydir=u.delete_empty_dir, drain_pod_selector=u.pod_selector,
                       auto_upgrade=u.auto, max_parallel_upgrades=u.max_parallel, **_operand(plan, "driver"),
                       repo_config=plan.driver_repo_config, cert_config=plan.driver_cert_config,
                       gds_image=sidecars.get("gds"), gdrcopy_image=sidecars.get("gdrcopy"), digests=digests,
                       sysfs_mount=plan.driver_sysfs, config_digest=plan.assets.config_digest,
                       inline_startup_probe=plan.assets.inline_startup_probe,
                       sidecar_env=plan.assets.driver_sidecar_env)


def toolkit(plan: StackPlan) -> ToolkitProps | None:
    if not plan.toolkit:
        return None
    return ToolkitProps(**_daemonset(plan, "toolkit"), runtime=plan.runtime, runtime_files=plan.runtime_files,
                        hooks_dir=plan.runtime_files.hooks.get(plan.platform, ASSET_HOOKS_DIR),
                        config_source=plan.runtime_config_source, install_dir=plan.toolkit_install_dir,
                        **_operand(plan, "toolkit"))


def validator(plan: StackPlan) -> ValidatorProps:
    return ValidatorProps(namespace=plan.namespace, image=plan.image("validator").ref,
                          device_plugin=plan.device_plugin, mig_strategy=mig_strategy(plan),
                          pull_secrets=plan.pull_secrets, placement=placement(plan),
                          init_resources=plan.init_resources,
                          sidecar_checks=tuple(c for k, c in (("gds", "nvidia-fs"), ("gdrcopy", "gdrcopy"))
                                               if k in plan.device_sidecars and plan.assets.validator_sidecar_checks))


def plugin_config(plan: StackPlan) -> PluginConfigProps | None:
    configs = plan.pool_configs.plugin_configs
    return PluginConfigProps(namespace=plan.namespace, configs=configs) if configs else None


def device_plugin(plan: StackPlan) -> DevicePluginProps | None:
    if not plan.device_plugin:
        return None
    return DevicePluginProps(**_daemonset(plan, "devicePlugin"), mig_strategy=mig_strategy(plan),
                             plugin_config=bool(plan.pool_configs.plugin_configs),
                             toolkit_install_dir=toolkit_install_dir(plan), kubelet_root_dir=plan.kubelet_root_dir,
                             gds="gds" in plan.device_sidecars, gdrcopy="gdrcopy" in plan.device_sidecars,
                             health_env=plan.pool_configs.health_env,
                             health_policies=tuple(HealthPolicyProps(name=n, env=e)
                                                   for n, e in plan.pool_configs.health_policies),
                             health_label=HEALTH_LABEL, **_operand(plan, "devicePlugin"))


def mps_control_daemon(plan: StackPlan) -> MpsControlDaemonProps | None:
    if not (plan.device_plugin and plan.pool_configs.mps):
        return None
    return MpsControlDaemonProps(**_daemonset(plan, "devicePlugin"), mig_strategy=mig_strategy(plan))


def dcgm(plan: StackPlan) -> DcgmProps | None:
    return DcgmProps(**_daemonset(plan, "dcgm"), probes=plan.assets.host_engine_probes) if plan.dcgm else None


def dcgm_exporter(plan: StackPlan) -> DcgmExporterProps | None:
    x = plan.dcgm_exporter
    if x is None:
        return None
    return DcgmExporterProps(**_daemonset(plan, "dcgmExporter"), remote_hostengine=plan.dcgm,
                             metrics=x.metrics, pod_labels=x.pod_labels, pod_uid=x.pod_uid,
                             pod_label_allowlist=x.pod_label_allowlist, service_monitor=_monitor(x.service_monitor),
                             prometheus_rule=plan.openshift is not None, kubelet_root_dir=plan.kubelet_root_dir,
                             probes=plan.assets.host_engine_probes,
                             pod_resources_init=plan.assets.pod_resources_init.ref
                             if plan.openshift and plan.assets.pod_resources_init else None)


def gfd(plan: StackPlan) -> GfdProps | None:
    if not plan.gfd:
        return None
    return GfdProps(**_daemonset(plan, "gfd"), mig_strategy=mig_strategy(plan),
                    plugin_config=bool(plan.pool_configs.plugin_configs),
                    config_manager_image=plan.image("devicePlugin").ref)


def mig_manager(plan: StackPlan) -> MigManagerProps | None:
    pc = plan.pool_configs
    if not pc.mig_manager:
        return None
    return MigManagerProps(**_daemonset(plan, "migManager"), mig_parted_config=pc.mig_parted,
                           toolkit_install_dir=toolkit_install_dir(plan))


def node_status_exporter(plan: StackPlan) -> NodeStatusExporterProps | None:
    x = plan.node_status_exporter
    if x is None:
        return None
    return NodeStatusExporterProps(namespace=plan.namespace, image=plan.image("nodeStatusExporter").ref,
                                   service_monitor=_monitor(x.service_monitor), placement=placement(plan),
                                   prometheus_rule=plan.openshift is not None)


def dra(plan: StackPlan) -> DraProps | None:
    d = plan.dra
    if d is None:
        return None
    return DraProps(namespace=plan.namespace, device_classes=tuple(
        DeviceClassProps(name=c.name, pool=c.pool, expression=c.expression, driver=d.driver, config=c.config,
                         extended_resource=c.extended_resource) for c in d.device_classes),
        claim_templates=tuple(ClaimTemplateProps(
            name=t.name, namespace=t.namespace, pool=t.pool,
            requests=tuple(ClaimRequestProps(name=r.name, device_class=r.device_class, count=r.count)
                           for r in t.requests),
            same_gpu=tuple(r.name for r in t.requests if r.mig) if t.same_gpu else ()) for t in d.claim_templates))


def gpu_alerts(plan: StackPlan) -> GpuAlertsProps | None:
    """The PrometheusRule, where the plan has alerts and wants the Prometheus Operator's kind for them."""
    a = plan.alerts
    if a is None or not a.prometheus_rule:
        return None
    return GpuAlertsProps(namespace=plan.namespace, labels=dict(a.rule_labels),
                          groups_json=json.dumps(a.groups(plan.name), sort_keys=True, separators=(",", ":")))


def dashboards(plan: StackPlan) -> DashboardsProps | None:
    if plan.dashboards is None:
        return None
    migrated = {p.name for p in plan.pools if p.mig_layout and p.mig_strategy != "none"}
    return DashboardsProps(namespace=plan.namespace, cluster=plan.name, folder=plan.dashboards.folder, pools=tuple(
        PoolPanelProps(name=c.pool, gpu=c.gpu, node_labels=c.node_selector, per_node=c.per_node, nodes=c.nodes,
                       mig=c.pool in migrated,
                       dra=c.allocation == "dra")
        for c in plan.capacity.pools))


def queues(plan: StackPlan) -> QueuesProps | None:
    q = plan.queues
    if q is None or not q.flavors:
        return None
    return QueuesProps(namespace=plan.namespace, cluster_queue=q.cluster_queue, cohort=q.cohort,
                       local_queue=q.local_queue, namespaces=q.namespaces, groups=tuple(
                           (covered, tuple(FlavorProps(name=f.name, node_labels=dict(f.node_labels),
                                                       tolerations=f.tolerations, quota=dict(f.quota)) for f in fl))
                           for covered, fl in q.resource_groups()))



def health_gate(plan: StackPlan) -> HealthGateProps | None:
    gate = plan.health_gate
    if gate is None:
        return None
    return HealthGateProps(namespace=plan.namespace, openshift=plan.platform == "openshift", pools=tuple(
        PoolGateProps(pool=g.pool, node_selector=dict(g.node_selector), tolerations=g.tolerations, nodes=g.nodes,
                      checks=tuple(CheckProps(kind=c.kind, slug=c.slug, image=c.image.ref, command=c.command,
                                              resources=dict(c.resources), deadline=c.deadline) for c in g.checks))
        for g in gate.pools))
