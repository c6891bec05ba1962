"""Builders for the shapes every operand repeats: metadata, RBAC, host paths, mounts, env, the GPU
DaemonSet, Service, ServiceMonitor and the validation init container.

Each returns a new dict and never changes what it was given. Kept apart from base.py (the construct
base class) so that platform transforms (openshift.py) can use them without an import cycle.

Every GPU DaemonSet is built by `daemonset()`: upstream's `nvidia.com/gpu.deploy.<component>=true`
node selector plus the profile's `spec.daemonsets.nodeSelector`; tolerations, priority class and pull
secrets as Helm value slots; and one difference from upstream, a required node affinity on the opt-out
labels `nvidia.com/gpu.deploy.operands NotIn [false]` and `gpuop/deploy.<component> NotIn [false]`
(plus `spec.daemonsets.nodeAffinity`), because the deploy labels are NFD's and cannot carry an admin's
`false` (node_labels.py explains).
"""

from __future__ import annotations

from gpuop.components.props import OPERANDS_LABEL, OPT_OUT_PREFIX, Placement, ServiceMonitorProps
from gpuop.kube.slots import slot

def meta(name: str, namespace: str | None = None, labels: dict | None = None, annotations: dict | None = None) -> dict:
    m: dict = {"name": name}
    if namespace:
        m["namespace"] = namespace
    if labels:
        m["labels"] = labels
    if annotations:
        m["annotations"] = annotations
    return m


def taint_toleration(key: str, value: str, effect: str) -> dict:
    """The toleration of a (key, value, effect) taint: Equal with a value, Exists without one."""
    return ({"key": key, "operator": "Equal", "value": value, "effect": effect} if value
            else {"key": key, "operator": "Exists", "effect": effect})


SCC_RULE = {"apiGroups": ["security.openshift.io"], "resources": ["securitycontextconstraints"],
            "verbs": ["use"], "resourceNames": ["privileged"]}


def rbac(name: str, namespace: str, role_rules: list[dict], cluster_rules: list[dict] | None = None) -> list[dict]:
    """ServiceAccount, Role, RoleBinding (and ClusterRole, ClusterRoleBinding) all named `name`, as the
    Operator's 0100-0310 assets of each state."""
    subject = [{"kind": "ServiceAccount", "name": name, "namespace": namespace}]
    objs = [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta(name, namespace)},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": meta(name, namespace),
         "rules": role_rules},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": meta(name, namespace),
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name}, "subjects": subject},
    ]
    if cluster_rules:
        objs += [
            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": meta(name),
             "rules": cluster_rules},
            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": meta(name),
             "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
             "subjects": subject},
        ]
    return objs


def host_path(name: str, path: str, type_: str | None = None) -> dict:
    hp: dict = {"path": path}
    if type_:
        hp["type"] = type_
    return {"name": name, "hostPath": hp}


def mount(name: str, path: str, *, propagation: str | None = None, read_only: bool = False,
          sub_path: str | None = None) -> dict:
    m: dict = {"name": name, "mountPath": path}
    if propagation:
        m["mountPropagation"] = propagation
    if read_only:
        m["readOnly"] = True
    if sub_path:
        m["subPath"] = sub_path
    return m


def env(name: str, value: str | None = None, field_path: str | None = None) -> dict:
    if field_path:
        return {"name": name, "valueFrom": {"fieldRef": {"fieldPath": field_path}}}
    return {"name": name, "value": value}


def with_host_paths(volumes: list[dict], placement: Placement) -> list[dict]:
    """The Operator's hostPaths.rootFS / driverInstallDir: every `host-root` / `driver-install-dir`
    hostPath volume points at the profile's directory."""
    paths = {"host-root": placement.root_fs, "driver-install-dir": placement.driver_install_dir}
    return [{**v, "hostPath": {**v["hostPath"], "path": paths[v["name"]]}}
            if v["name"] in paths and "hostPath" in v else v for v in volumes]


DEFAULT_DRIVER_INSTALL_DIR = "/run/nvidia/driver"


def driver_validation_at(pod_spec: dict, driver_install_dir: str) -> None:
    """(In place on `pod_spec`, a copy the caller owns; its containers are replaced, not changed.) Another driver
    install directory: the `driver-validation` init container finds the driver there, at the
    same path inside the container (DRIVER_INSTALL_DIR, DRIVER_INSTALL_DIR_CTR_PATH, its driver-install-dir
    mount), as the Operator's transformForDriverInstallDir does for a pod with that volume."""
    if driver_install_dir == DEFAULT_DRIVER_INSTALL_DIR or not any(
            v["name"] == "driver-install-dir" for v in pod_spec.get("volumes") or []):
        return
    inits = []
    for c in pod_spec.get("initContainers") or []:
        if c["name"] == "driver-validation":
            c = {**c, "env": merge_env(c.get("env") or [], (("DRIVER_INSTALL_DIR", driver_install_dir),
                                                            ("DRIVER_INSTALL_DIR_CTR_PATH", driver_install_dir))),
                 "volumeMounts": [{**m, "mountPath": driver_install_dir} if m["name"] == "driver-install-dir" else m
                                  for m in c.get("volumeMounts") or []]}
        inits.append(c)
    if inits:
        pod_spec["initContainers"] = inits


def merge_env(base: list[dict], overrides: tuple[tuple[str, str], ...]) -> list[dict]:
    """`base` with the profile's env merged over it by name: a known name is replaced where it stands,
    a new one appended (the Operator's setContainerEnv for `<operand>.env`)."""
    out = list(base)
    index = {e["name"]: i for i, e in enumerate(out)}
    for name, value in overrides:
        if name in index:
            out[index[name]] = env(name, value)
        else:
            index[name] = len(out)
            out.append(env(name, value))
    return out


def resources_slot(values_key: str) -> str:
    return slot(f"{values_key}.resources")


def node_affinity(deploy: str, placement: Placement, alternatives: tuple = ()) -> dict:
    """Required node affinity: the node-wide and per-component opt-out labels, then the profile's additions.
    `alternatives` (label sets, e.g. node pools' nodeSelectors) make one term each, ORed, every term
    carrying the common requirements; () keeps the single term."""
    terms = [{"key": OPERANDS_LABEL, "operator": "NotIn", "values": ["false"]},
             {"key": OPT_OUT_PREFIX + deploy, "operator": "NotIn", "values": ["false"]}]
    for key, op, values in placement.node_affinity:
        terms.append({"key": key, "operator": op, **({"values": list(values)} if values else {})})
    if not alternatives:
        return {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": terms}]}}
    return {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": terms + [{"key": k, "operator": "In", "values": [v]} for k, v in alt]}
        for alt in alternatives]}}


def daemonset(name: str, namespace: str, *, app: str, labels: dict, annotations: dict | None,
              pod_spec: dict, deploy: str, placement: Placement, selector: dict | None = None,
              pod_annotations: dict | None = None, update_strategy: dict | None = None,
              node_selector: dict | None = None, alternatives: tuple = ()) -> dict:
    """A GPU DaemonSet with the fields every operand shares: selector on `app` (or `selector`), node
    selector `nvidia.com/gpu.deploy.<deploy>=true` plus the profile's labels, node affinity for the
    opt-outs plus the profile's requirements (merged into pod_spec's own affinity), tolerations /
    priority class / pull secrets as value slots. `node_selector` adds labels (a driver variant's NFD
    labels), `alternatives` ORed affinity terms (node_affinity)."""
    affinity = {"nodeAffinity": node_affinity(deploy, placement, alternatives), **pod_spec.pop("affinity", {})}
    spec = {
        "nodeSelector": {f"nvidia.com/gpu.deploy.{deploy}": "true", **placement.node_selector, **(node_selector or {})},
        "affinity": affinity,
        "tolerations": slot("tolerations"),
        "priorityClassName": slot("priorityClassName"),
        "imagePullSecrets": slot("imagePullSecrets"),
        **pod_spec,
    }
    template_meta: dict = {"labels": {**placement.pod_labels, **labels}}     # the selector's labels win
    if pod_annotations or placement.pod_annotations:
        template_meta["annotations"] = {**placement.pod_annotations, **(pod_annotations or {})}
    if "volumes" in spec:
        spec["volumes"] = with_host_paths(spec["volumes"], placement)
        driver_validation_at(spec, placement.driver_install_dir)
    body = {
        "apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": meta(name, namespace, labels, annotations),
        "spec": {"selector": {"matchLabels": selector or {"app": app}},
                 "template": {"metadata": template_meta, "spec": spec}},
    }
    if update_strategy:
        body["spec"]["updateStrategy"] = update_strategy
    return body


def service(name: str, namespace: str, *, app: str, port_name: str, port: int, annotations: dict | None = None,
            extra: dict | None = None) -> dict:
    """A Service selecting `app=<app>` on one TCP port (as the Operator's 0400/0500_service assets)."""
    return {"apiVersion": "v1", "kind": "Service",
            "metadata": meta(name, namespace, {"app": app}, annotations),
            "spec": {"selector": {"app": app}, **(extra or {}),
                     "ports": [{"name": port_name, "port": port, "targetPort": port, "protocol": "TCP"}]}}


def service_monitor(name: str, namespace: str, *, app: str, port_name: str, job_label: str,
                    monitor: ServiceMonitorProps) -> dict:
    """A Prometheus Operator ServiceMonitor as the Operator's asset, with the profile's interval, honor
    labels and extra labels."""
    endpoint = {"port": port_name, "path": "/metrics", "interval": monitor.interval}
    if monitor.honor_labels:
        endpoint["honorLabels"] = True
    return {"apiVersion": "monitoring.coreos.com/v1", "kind": "ServiceMonitor",
            "metadata": meta(name, namespace, {"app": app, **dict(monitor.labels)}),
            "spec": {"endpoints": [endpoint], "jobLabel": job_label,
                     "namespaceSelector": {"matchNames": [namespace]},
                     "selector": {"matchLabels": {"app": app}}}}


def without_env(objs: list[dict], absent: dict[str, tuple[str, ...]]) -> list[dict]:
    """The DaemonSets of `objs` without the env names `absent` gives per container name (an older release's
    assets do not set them)."""
    for o in objs:
        if absent and o.get("kind") == "DaemonSet":
            pod = o["spec"]["template"]["spec"]
            for c in pod.get("initContainers", []) + pod["containers"]:
                if c["name"] in absent and "env" in c:
                    c["env"] = [e for e in c["env"] if e["name"] not in absent[c["name"]]]
    return objs


VALIDATOR_RESOURCES = resources_slot("validator")   # every `*-validation` init container's resources


def validation_init(component: str, p, mounts: list[dict], *, wait_for: str | None = None,
                    extra_env: list[dict] | None = None) -> dict:
    """A `<component>-validation` init container on the validator image (p.validator_image; runAsUser 0,
    privileged), as the Operator's transformValidationInitContainer renders it: the validator's resources
    (`applyResourceRequirements(..., config.Validator.Resources)`), never the component's; none before v26.7
    (p.init_resources false)."""
    c: dict = {"name": f"{component}-validation", "image": p.validator_image, "imagePullPolicy": slot("imagePullPolicy"),
               "command": ["sh", "-c"], "resources": VALIDATOR_RESOURCES if p.init_resources else {},
               "securityContext": {"privileged": True, "runAsUser": 0}}
    if wait_for:
        c["args"] = [f"until [ -f /run/nvidia/validations/{wait_for}-ready ]; do echo waiting for nvidia "
                     "container stack to be setup; sleep 5; done"]
    else:
        c["args"] = ["nvidia-validator"]
        c["env"] = [env("WITH_WAIT", "true"), env("COMPONENT", component),
                    env("OPERATOR_NAMESPACE", field_path="metadata.namespace")] + (extra_env or [])
        c["securityContext"]["seLinuxOptions"] = {"level": "s0"}
    c["volumeMounts"] = mounts
    return c
