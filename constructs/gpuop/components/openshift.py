"""OpenShift admission, as a transform of a component's objects (applied by Component.objects when the
props' placement says OpenShift): SecurityContextConstraints `<service account>` (security.openshift.io/v1,
cluster scoped) for every ServiceAccount that runs one of the component's DaemonSets, and the RBAC that
lets exactly that ServiceAccount use exactly that SCC.

Upstream (NVIDIA GPU Operator v26.7, ClusterPolicy path):
- SCC assets `*scc*openshift*.yaml` for driver, DCGM, DCGM exporter, GFD, MIG manager, node status
  exporter and operator validator, all shaped alike (privileged, host paths, RunAsAny strategies, every
  capability, sysctl, seccomp profile and volume type), differing in the host namespace flags; the
  Operator fills `users` with `system:serviceaccount:<namespace>:<name>` (object_controls.go
  SecurityContextConstraints) and the assets name the groups system:cluster-admins, system:nodes,
  system:masters;
- every state's Role grants `use` on the built-in SCC `privileged` (the node status exporter's Role on
  every SCC: no resourceNames); toolkit, device plugin and MPS have no SCC of their own.

What gpuop emits instead, and why (no component gets more than it needs):
- one SCC per privileged component, toolkit and device plugin included, named after its ServiceAccount
  (so upstream's SCC names where upstream has one), with the assets' shape;
- host namespace flags (allowHostPID/IPC/Network/Ports) are what the component's pods use, never more
  than upstream's asset allows (upstream's GFD and validator SCCs allow host PID, the exporter's host
  ports, DCGM's host network, none of which those pods use);
- `users` is the component's ServiceAccount only, `groups` is empty (cluster admins may use any SCC
  through RBAC anyway; nodes do not create these pods);
- the Role's SCC rule is `use` on the component's own SCC instead of `privileged` (or every SCC);
- `priority: 0` and empty capability lists where the assets write `null` (the SCC CRD requires the
  keys; null is what cdk8s drops; 0 and [] mean the same);
- the DaemonSet's `openshift.io/scc` annotation names the SCC its pods get, and the pod template asks
  for it (`openshift.io/required-scc`, OpenShift >= 4.14), so admission cannot pick another one.
"""

from __future__ import annotations

import copy
from pathlib import Path

import yaml

from gpuop.kube.slots import slot
from gpuop.components.builders import env, meta, mount, resources_slot

SCC_API = "security.openshift.io"
SCC_SHAPE = {          # what every SCC asset of the Operator has in common (e.g. state-driver/0410_scc.openshift.yaml)
    "allowHostDirVolumePlugin": True,
    "allowPrivilegeEscalation": True,
    "allowPrivilegedContainer": True,
    "allowedCapabilities": ["*"],
    "allowedUnsafeSysctls": ["*"],
    "defaultAddCapabilities": [],
    "fsGroup": {"type": "RunAsAny"},
    "priority": 0,
    "readOnlyRootFilesystem": False,
    "requiredDropCapabilities": [],
    "runAsUser": {"type": "RunAsAny"},
    "seLinuxContext": {"type": "RunAsAny"},
    "seccompProfiles": ["*"],
    "supplementalGroups": {"type": "RunAsAny"},
    "volumes": ["*"],
}
HOST_FLAGS = ("allowHostIPC", "allowHostNetwork", "allowHostPID", "allowHostPorts")
REQUIRED_SCC = "openshift.io/required-scc"


def host_needs(pod: dict) -> dict[str, bool]:
    """The SCC host flags a pod spec needs."""
    ports = any(p.get("hostPort") for c in pod.get("containers", []) + pod.get("initContainers", [])
                for p in c.get("ports", []))
    return {"allowHostIPC": bool(pod.get("hostIPC")), "allowHostNetwork": bool(pod.get("hostNetwork")),
            "allowHostPID": bool(pod.get("hostPID")), "allowHostPorts": ports}


def scc(name: str, namespace: str, flags: dict[str, bool]) -> dict:
    """The SCC ServiceAccount `name` runs under: the assets' shape, these host flags, only that user."""
    used = ", ".join(f[len("allowHost"):] for f in HOST_FLAGS if flags[f]) or "no host namespaces"
    return {"apiVersion": f"{SCC_API}/v1", "kind": "SecurityContextConstraints",
            "metadata": meta(name, labels={"app.kubernetes.io/managed-by": "gpuop"}, annotations={
                "kubernetes.io/description": f"gpuop: the pods of ServiceAccount {namespace}/{name} (privileged "
                                             f"containers, host paths; host: {used}). Granted to that "
                                             "ServiceAccount only."}),
            **SCC_SHAPE, **flags, "groups": [], "users": [f"system:serviceaccount:{namespace}:{name}"]}


def use_rule(name: str) -> dict:
    return {"apiGroups": [SCC_API], "resources": ["securitycontextconstraints"], "verbs": ["use"],
            "resourceNames": [name]}


def _is_scc_rule(rule: dict) -> bool:
    return SCC_API in rule.get("apiGroups", []) and "securitycontextconstraints" in rule.get("resources", [])


def secure(objs: list[dict]) -> list[dict]:
    """The component's objects with an SCC per DaemonSet ServiceAccount and RBAC narrowed to it."""
    objs = copy.deepcopy(objs)            # render outputs share module-level constants (rules, volumes)
    needs: dict[tuple[str, str], dict[str, bool]] = {}
    for ds in (o for o in objs if o["kind"] == "DaemonSet"):
        template = ds["spec"]["template"]
        sa, ns = template["spec"]["serviceAccountName"], ds["metadata"]["namespace"]
        flags = needs.setdefault((ns, sa), dict.fromkeys(HOST_FLAGS, False))
        for k, v in host_needs(template["spec"]).items():
            flags[k] = flags[k] or v
        ds["metadata"].setdefault("annotations", {})["openshift.io/scc"] = sa
        template["metadata"].setdefault("annotations", {})[REQUIRED_SCC] = sa
    if not needs:
        return objs
    granted = {}                          # (kind, namespace, role name) -> the SCC its subjects may use
    for b in (o for o in objs if o["kind"] in ("RoleBinding", "ClusterRoleBinding")):
        for s in b.get("subjects", []):
            if s.get("kind") == "ServiceAccount" and (s.get("namespace"), s["name"]) in needs:
                role_ns = b["metadata"].get("namespace", "") if b["roleRef"]["kind"] == "Role" else ""
                granted[(b["roleRef"]["kind"], role_ns, b["roleRef"]["name"])] = s["name"]
    for role in (o for o in objs if o["kind"] in ("Role", "ClusterRole")):
        name = granted.get((role["kind"], role["metadata"].get("namespace", ""), role["metadata"]["name"]))
        rules = [r for r in role.get("rules", []) if not _is_scc_rule(r)]
        if name is not None and role["kind"] == "Role":
            rules.insert(0, use_rule(name))
        role["rules"] = rules             # no other Role or ClusterRole of the component grants any SCC
    return objs + [scc(sa, ns, flags) for (ns, sa), flags in sorted(needs.items())]


# ---- Driver Toolkit (DTK) builds: the sidecar and the image stream that resolves its image ----------
#
# Upstream (transformOpenShiftDriverToolkitContainer; golden/driver-openshift-drivertoolkit.yaml): the
# driver DaemonSet of each RHCOS build keeps the asset's `openshift-driver-toolkit-ctr` sidecar, with
# RHCOS_VERSION=<build> and the image the Operator reads from the `driver-toolkit` ImageStream of the
# `openshift` namespace (tag <build>); the driver container starts from `ocp_dtk_entrypoint
# nv-ctr-run-with-dtk` and both share the emptyDir /mnt/shared-nvidia-driver-toolkit. The sidecar's
# mounts and the driver resources it shares are the golden render's (the ClusterPolicy asset lists
# four of its six mounts).
#
# gpuop cannot read the cluster's ImageStream, so it lets OpenShift resolve the image: an ImageStream
# `driver-toolkit` in the stack's namespace tags each build from `openshift/driver-toolkit:<build>`
# (referencePolicy Source: the resolved reference is the release image itself, pulled with the
# cluster's global pull secret, no integrated registry needed) with `lookupPolicy.local: true`, and the
# sidecar names the image `driver-toolkit:<build>`. OpenShift's image policy admission rewrites that
# short name in the DaemonSet to the build's image digest whenever the DaemonSet is created or updated.
# Differences: no RHCOS_IMAGE_MISSING fallback (a build the cluster has no DTK tag for leaves the
# sidecar unpullable, where the Operator falls back to the driver image), no cluster-wide proxy env or
# trusted-CA ConfigMap (gpuop cannot read the cluster's Proxy object).

DTK_CONTAINER = "openshift-driver-toolkit-ctr"
DTK_SHARED = "shared-nvidia-driver-toolkit"
DTK_SHARED_PATH = "/mnt/shared-nvidia-driver-toolkit"
DTK_ARGS = ("until [ -f /mnt/shared-nvidia-driver-toolkit/dir_prepared ]; do echo  Waiting for nvidia-driver-ctr "
            "container to prepare the shared directory ...; sleep 10; done; exec "
            "/mnt/shared-nvidia-driver-toolkit/ocp_dtk_entrypoint dtk-build-driver")


def dtk_container(image: str, build: str, extra_env: list[dict] | None = None) -> dict:
    """`extra_env`: the variant's GDS_ENABLED / GDRCOPY_ENABLED (driver.py sidecar_env), after the asset's."""
    return {
        "name": DTK_CONTAINER, "image": image, "imagePullPolicy": slot("imagePullPolicy"),
        "command": ["bash", "-xc"], "args": [DTK_ARGS],
        "env": [env("RHCOS_VERSION", build), env("NVIDIA_VISIBLE_DEVICES", "void"), *(extra_env or [])],
        "resources": resources_slot("driver"),
        "securityContext": {"privileged": True, "seLinuxOptions": {"level": "s0"}},
        "volumeMounts": [
            mount(DTK_SHARED, DTK_SHARED_PATH),
            mount("var-log", "/var/log"),
            mount("mlnx-ofed-usr-src", "/run/mellanox/drivers/usr/src", propagation="HostToContainer"),
            mount("host-os-release", "/host-etc/os-release", read_only=True),
            mount("firmware-search-path", "/sys/module/firmware_class/parameters/path"),
            mount("nv-firmware", "/lib/firmware"),
        ],
    }


def dtk_image_stream(name: str, namespace: str, source_namespace: str, builds: list[str], labels: dict) -> dict:
    """ImageStream `name` tracking `<source_namespace>/<name>:<build>` for each build, with local lookup."""
    return {"apiVersion": "image.openshift.io/v1", "kind": "ImageStream", "metadata": meta(name, namespace, labels),
            "spec": {"lookupPolicy": {"local": True},
                     "tags": [{"name": b, "from": {"kind": "ImageStreamTag", "namespace": source_namespace,
                                                   "name": f"{name}:{b}"},
                               "referencePolicy": {"type": "Source"}} for b in builds]}}


def prometheus_rule(name: str, namespace: str, app: str, rules_file: str) -> dict:
    """A PrometheusRule the Operator applies on OpenShift only, its spec from scripts/<rules_file>."""
    spec = yaml.safe_load((Path(__file__).parent / "scripts" / rules_file).read_text())["spec"]
    return {"apiVersion": "monitoring.coreos.com/v1", "kind": "PrometheusRule",
            "metadata": meta(name, namespace, {"app": app}), "spec": spec}
