"""Semantic rules on pod specs (Pods and the pod templates of workloads): k8s.io/kubernetes
pkg/apis/core/validation ValidatePodSpec and what it calls, each rule naming its upstream function."""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Iterable, Mapping
from fractions import Fraction
from typing import Any

from gpuop.kube.quantity import QuantityError, parse_quantity
from gpuop.kube.validation import (
    ENV_RESOURCE_FIELDS, IS_NEGATIVE_ERROR_MSG, PROTOCOLS, duplicate, env_field_path_problems, forbidden,
    inclusive_range_error, invalid, invalid_raw, is_config_map_key, is_dns1123_label, is_dns1123_subdomain,
    is_env_var_name, is_integer_string, is_qualified_name, is_sysctl_name, is_valid_label_value,
    is_valid_port_name, is_valid_port_num, not_found, not_supported, required, sysctl_namespace,
)
from .objects import (
    rule,
    Context, Finding, Obj, PodSpecRef, _Emitter, _dict, _dicts, _list, child, containers, key, pod_specs,
)


@rule("host-pid-with-share-process-namespace",
      source="k8s pkg/apis/core/validation/validation.go validatePodSpecSecurityContext",
      refuses="hostPID together with shareProcessNamespace.")
# k8s pkg/apis/core/validation/validation.go validatePodSpecSecurityContext:
#   "ShareProcessNamespace and HostPID cannot both be enabled"
# (upstream reports it at securityContext.shareProcessNamespace, the internal location)
def check_host_pid_with_share_process_namespace(obj: Obj, ctx: Context) -> Iterable[Finding]:
    emit = _Emitter(obj)
    for ref in pod_specs(obj):
        if ref.spec.get("hostPID") is True and ref.spec.get("shareProcessNamespace") is True:
            emit(
                child(ref.path, "shareProcessNamespace"),
                invalid(True, "ShareProcessNamespace and HostPID cannot both be enabled"),
            )
    return emit.findings


@rule("container-names", source="k8s pkg/apis/core/validation/validation.go validateContainerCommon",
      refuses="Container names that are not DNS-1123 labels or repeat across containers and init containers.")
# k8s pkg/apis/core/validation/validation.go validateContainerCommon (DNS-1123 label),
#   validateContainers / validateInitContainers (names unique across containers+initContainers)
def check_container_names(obj: Obj, ctx: Context) -> Iterable[Finding]:
    emit = _Emitter(obj)
    for ref in pod_specs(obj):
        seen: set[str] = set()
        # upstream reports the duplicate on the init container; walk regular containers first
        ordered = sorted(containers(ref.spec, ref.path), key=lambda item: item[2])
        for path, ctr, _ in ordered:
            name = ctr.get("name")
            if not isinstance(name, str) or not name:
                emit(child(path, "name"), required())
                continue
            for msg in is_dns1123_label(name):
                emit(child(path, "name"), invalid(name, msg))
            if name in seen:
                emit(child(path, "name"), duplicate(name))
            seen.add(name)
    return emit.findings


_VOLUME_SOURCES = (
    "emptyDir", "hostPath", "gitRepo", "gcePersistentDisk", "awsElasticBlockStore", "secret",
    "nfs", "iscsi", "glusterfs", "flocker", "persistentVolumeClaim", "rbd", "cinder", "cephfs",
    "quobyte", "downwardAPI", "fc", "flexVolume", "configMap", "azureFile", "vsphereVolume",
    "photonPersistentDisk", "portworxVolume", "azureDisk", "storageos", "projected", "scaleIO",
    "csi", "ephemeral", "image",
)  # fmt: skip
_HOST_PATH_TYPES = (
    "", "BlockDevice", "CharDevice", "Directory", "DirectoryOrCreate", "File", "FileOrCreate", "Socket",
)  # fmt: skip


_MAX_MODE = 0o777


def _check_mode(emit: _Emitter, mode: Any, path: str) -> None:
    if isinstance(mode, int) and not isinstance(mode, bool) and not 0 <= mode <= _MAX_MODE:
        emit(path, invalid(mode, "must be a number between 0 and 0777 (octal), both inclusive"))


def _check_items(emit: _Emitter, items: Any, base: str) -> None:
    """validateKeyToPath / validateDownwardAPIVolumeFile: item paths are relative and never go up, file
    modes within 0777."""
    for i, item in _dicts(items):
        _check_mode(emit, item.get("mode"), child(base, i, "mode"))
        path = item.get("path")
        ipath = child(base, i, "path")
        if not isinstance(path, str) or not path:
            emit(ipath, required())
            continue
        if path.startswith("/"):
            emit(ipath, invalid(path, "must be a relative path"))
        if _has_dotdot(path):
            emit(ipath, invalid(path, "must not contain '..'"))


@rule("volumes",
      source="k8s pkg/apis/core/validation/validation.go ValidateVolumes",
      refuses="Volume names invalid or repeated, no or several volume sources, bad item paths and modes, bad "
              "hostPath types.")
# k8s pkg/apis/core/validation/validation.go ValidateVolumes (name DNS-1123 label, unique; item paths
#   relative without '..', defaultMode and item modes within 0777; a negative emptyDir.sizeLimit),
#   validateVolumeSource ("may not specify more than 1 volume type" / "must specify a volume type"),
#   validateHostPathVolumeSource (validatePathNoBacksteps, validateHostPathType)
def check_volumes(obj: Obj, ctx: Context) -> Iterable[Finding]:
    emit = _Emitter(obj)
    for ref in pod_specs(obj):
        _checked_volumes(emit, ref)
    return emit.findings


def _checked_volumes(emit: _Emitter, ref: PodSpecRef) -> set[str]:
    """Check the pod's volumes; the names of the volumes without an error (ValidateVolumes returns only
    those, so a mount of an invalid volume is "Not found" upstream)."""
    valid: set[str] = set()
    seen: set[str] = set()
    for i, vol in _dicts(ref.spec.get("volumes")):
        before = len(emit.findings)
        path = child(ref.path, "volumes", i)
        name = vol.get("name")
        if not isinstance(name, str) or not name:
            emit(child(path, "name"), required())
        else:
            for msg in is_dns1123_label(name):
                emit(child(path, "name"), invalid(name, msg))
            if name in seen:
                emit(child(path, "name"), duplicate(name))
            seen.add(name)
        sources = [s for s in _VOLUME_SOURCES if vol.get(s) is not None]
        if not sources:
            emit(path, required("must specify a volume type"))
        for extra in sources[1:]:
            emit(child(path, extra), forbidden("may not specify more than 1 volume type"))
        for source in ("configMap", "secret", "downwardAPI", "projected"):
            _check_mode(emit, _dict(vol.get(source)).get("defaultMode"), child(path, source, "defaultMode"))
        for source in ("configMap", "secret", "downwardAPI"):
            _check_items(emit, _dict(vol.get(source)).get("items"), child(path, source, "items"))
        for j, proj in _dicts(_dict(vol.get("projected")).get("sources")):
            for source in ("configMap", "secret", "downwardAPI"):
                _check_items(emit, _dict(proj.get(source)).get("items"),
                             child(path, "projected", "sources", j, source, "items"))
        size = _dict(vol.get("emptyDir")).get("sizeLimit")
        if size is not None:
            try:
                bad = parse_quantity(size) < 0
            except QuantityError:
                bad = False      # a decode error, reported by the schema check
            if bad:
                emit(child(path, "emptyDir", "sizeLimit"),
                     forbidden("SizeLimit field must be a valid resource quantity"))
        host_path = vol.get("hostPath")
        if isinstance(host_path, Mapping):
            hp = host_path.get("path")
            if not hp:
                emit(child(path, "hostPath", "path"), required())
            elif ".." in str(hp).split("/"):
                emit(child(path, "hostPath", "path"), invalid(hp, "must not contain '..'"))
            hp_type = host_path.get("type")
            if hp_type is not None and hp_type not in _HOST_PATH_TYPES:
                emit(child(path, "hostPath", "type"), not_supported(hp_type, _HOST_PATH_TYPES))
        if len(emit.findings) == before and isinstance(name, str):
            valid.add(name)
    return valid


@rule("container-ports",
      source="k8s pkg/apis/core/validation/validation.go validateContainerPorts",
      refuses="Port names and numbers out of grammar or range, duplicate names, host ports that differ under "
              "hostNetwork.")
# k8s pkg/apis/core/validation/validation.go validateContainerPorts (IsValidPortName, unique
#   names, IsValidPortNum), validatePodHostNetworkDeps ("must match `containerPort` when
#   `hostNetwork` is true"), AccumulateUniqueHostPorts (duplicate protocol/hostIP/hostPort)
def check_container_ports(obj: Obj, ctx: Context) -> Iterable[Finding]:
    emit = _Emitter(obj)
    for ref in pod_specs(obj):
        host_network = ref.spec.get("hostNetwork") is True
        host_ports: set[str] = set()
        for cpath, ctr, is_init in containers(ref.spec, ref.path):
            names: set[str] = set()
            init_ports: set[str] = set()  # init containers run one by one: per-container set
            for i, port in _dicts(ctr.get("ports")):
                path = child(cpath, "ports", i)
                name = port.get("name")
                if isinstance(name, str) and name:
                    msgs = is_valid_port_name(name)
                    for msg in msgs:
                        emit(child(path, "name"), invalid(name, msg))
                    if not msgs and name in names:
                        emit(child(path, "name"), duplicate(name))
                    names.add(name)
                protocol = port.get("protocol")
                if protocol is not None and protocol not in PROTOCOLS:
                    emit(child(path, "protocol"), not_supported(protocol, PROTOCOLS))
                cport = port.get("containerPort")
                if not cport:
                    emit(child(path, "containerPort"), required())
                elif isinstance(cport, int):
                    for msg in is_valid_port_num(cport):
                        emit(child(path, "containerPort"), invalid(cport, msg))
                hport = port.get("hostPort")
                if isinstance(hport, int) and hport != 0:
                    for msg in is_valid_port_num(hport):
                        emit(child(path, "hostPort"), invalid(hport, msg))
                    acc = init_ports if is_init else host_ports
                    token = f"{port.get('protocol') or 'TCP'}/{port.get('hostIP', '')}/{hport}"
                    if token in acc:
                        emit(child(path, "hostPort"), duplicate(token))
                    acc.add(token)
                if host_network and not is_init and isinstance(hport, int) and hport not in (0, cport):
                    emit(
                        child(path, "hostPort"),
                        invalid(hport, "must match `containerPort` when `hostNetwork` is true"),
                    )
    return emit.findings


def _has_dotdot(value: str) -> bool:
    return ".." in value.replace("\\", "/").split("/")


@rule("volume-mounts",
      source="k8s pkg/apis/core/validation/validation.go ValidateVolumeMounts",
      refuses="Mounts of volumes the pod lacks, repeated mount paths, bad subPaths, Bidirectional propagation "
              "unprivileged.")
# k8s pkg/apis/core/validation/validation.go ValidateVolumeMounts (name must be a pod volume,
#   mountPath required and unique, subPath/subPathExpr via validateLocalDescendingPath),
#   validateMountPropagation ("Bidirectional mount propagation is available only to privileged
#   containers").  A relative mountPath is NOT refused: the kubelet's makeMounts makes it absolute.
def check_volume_mounts(obj: Obj, ctx: Context) -> Iterable[Finding]:
    emit = _Emitter(obj)
    for ref in pod_specs(obj):
        volumes = _checked_volumes(_Emitter(obj), ref)
        for cpath, ctr, _ in containers(ref.spec, ref.path):
            privileged = _dict(ctr.get("securityContext")).get("privileged") is True
            mount_points: set[str] = set()
            for i, mnt in _dicts(ctr.get("volumeMounts")):
                path = child(cpath, "volumeMounts", i)
                name = mnt.get("name") or ""
                if not name:
                    emit(child(path, "name"), required())
                if name not in volumes:
                    emit(child(path, "name"), not_found(name))
                mount_path = mnt.get("mountPath") or ""
                if not mount_path:
                    emit(child(path, "mountPath"), required())
                if mount_path in mount_points:
                    emit(child(path, "mountPath"), invalid(mount_path, "must be unique"))
                mount_points.add(mount_path)
                for sub_field in ("subPath", "subPathExpr"):
                    sub = mnt.get(sub_field)
                    if not isinstance(sub, str) or not sub:
                        continue
                    if sub.startswith("/"):
                        emit(child(path, sub_field), invalid(sub, "must be a relative path"))
                    if _has_dotdot(sub):
                        emit(child(path, sub_field), invalid(sub, "must not contain '..'"))
                if mnt.get("subPath") and mnt.get("subPathExpr"):
                    emit(
                        child(path, "subPathExpr"),
                        invalid(mnt["subPathExpr"], "subPathExpr and subPath are mutually exclusive"),
                    )
                propagation = mnt.get("mountPropagation")
                if propagation is not None:
                    valid = ("Bidirectional", "HostToContainer", "None")
                    if propagation not in valid:
                        emit(child(path, "mountPropagation"), not_supported(propagation, valid))
                    elif propagation == "Bidirectional" and not privileged:
                        emit(
                            child(path, "mountPropagation"),
                            forbidden("Bidirectional mount propagation is available only to privileged containers"),
                        )
    return emit.findings


_PROBE_HANDLERS = ("exec", "httpGet", "tcpSocket", "grpc")
_LIFECYCLE_HANDLERS = ("exec", "httpGet", "tcpSocket", "sleep")


def _check_handler(
    emit: _Emitter, handler: Mapping[str, Any], kinds: tuple[str, ...], path: str, ctr: Mapping[str, Any]
) -> None:
    present = [k for k in kinds if handler.get(k) is not None]
    if not present:
        emit(path, required("must specify a handler type"))
    for extra in present[1:]:
        emit(child(path, extra), forbidden("may not specify more than 1 handler type"))
    if not present:
        return
    action = _dict(handler.get(present[0]))
    apath = child(path, present[0])
    if present[0] == "exec" and not _list(action.get("command")):
        emit(child(apath, "command"), required())
    if present[0] in ("httpGet", "tcpSocket", "grpc"):
        port = action.get("port")
        ppath = child(apath, "port")
        if isinstance(port, bool) or port is None:
            emit(ppath, required())
        elif isinstance(port, int):
            for msg in is_valid_port_num(port):
                emit(ppath, invalid(port, msg))
        elif isinstance(port, str):
            msgs = is_valid_port_name(port)
            for msg in msgs:
                emit(ppath, invalid(port, msg))
            declared = {p.get("name") for _, p in _dicts(ctr.get("ports"))}
            if not msgs and port not in declared:
                # kubelet pkg/kubelet/prober util.ResolveContainerPort: the probe can never succeed
                emit(ppath, not_found(port) + ": no container port with this name (kubelet: couldn't find port)")
    if present[0] == "httpGet":
        scheme = action.get("scheme")
        if scheme is not None and scheme not in ("HTTP", "HTTPS"):
            emit(child(apath, "scheme"), not_supported(scheme, ("HTTP", "HTTPS")))


@rule("probes",
      source="k8s pkg/apis/core/validation/validation.go validateProbe / validateHandler",
      refuses="Probes and lifecycle handlers with no or several handlers, bad thresholds, ports the container does "
              "not declare.")
# k8s pkg/apis/core/validation/validation.go validateProbe / validateHandler ("must specify a
#   handler type", "may not specify more than 1 handler type"), ValidateNonnegativeField on the
#   timing fields, validateLivenessProbe / validateStartupProbe (successThreshold "must be 1"),
#   validateReadinessProbe (terminationGracePeriodSeconds "must not be set for readinessProbes"),
#   validateInitContainers ("may not be set for init containers without restartPolicy=Always").
# v1 defaulting turns 0/absent timeoutSeconds, periodSeconds, successThreshold and
# failureThreshold into 1, 10, 1 and 3, so only negatives (and successThreshold > 1) remain.
def check_probes(obj: Obj, ctx: Context) -> Iterable[Finding]:
    emit = _Emitter(obj)
    for ref in pod_specs(obj):
        for cpath, ctr, is_init in containers(ref.spec, ref.path):
            sidecar = is_init and ctr.get("restartPolicy") == "Always"
            for probe_field in ("livenessProbe", "readinessProbe", "startupProbe"):
                probe = ctr.get(probe_field)
                if not isinstance(probe, Mapping):
                    continue
                path = child(cpath, probe_field)
                if is_init and not sidecar:
                    emit(path, forbidden("may not be set for init containers without restartPolicy=Always"))
                    continue
                _check_handler(emit, probe, _PROBE_HANDLERS, path, ctr)
                for num_field in (
                    "initialDelaySeconds", "timeoutSeconds", "periodSeconds", "successThreshold", "failureThreshold",
                ):  # fmt: skip
                    value = probe.get(num_field)
                    if isinstance(value, int) and value < 0:
                        emit(child(path, num_field), invalid(value, IS_NEGATIVE_ERROR_MSG))
                success = probe.get("successThreshold")
                if probe_field != "readinessProbe" and isinstance(success, int) and success > 1:
                    emit(child(path, "successThreshold"), invalid(success, "must be 1"))
                grace = probe.get("terminationGracePeriodSeconds")
                if grace is not None:
                    if probe_field == "readinessProbe":
                        emit(
                            child(path, "terminationGracePeriodSeconds"),
                            invalid(grace, "must not be set for readinessProbes"),
                        )
                    elif isinstance(grace, int) and grace <= 0:
                        emit(child(path, "terminationGracePeriodSeconds"), invalid(grace, "must be greater than 0"))
            lifecycle = ctr.get("lifecycle")
            if isinstance(lifecycle, Mapping):
                if is_init and not sidecar:
                    emit(
                        child(cpath, "lifecycle"),
                        forbidden("may not be set for init containers without restartPolicy=Always"),
                    )
                    continue
                for hook in ("postStart", "preStop"):
                    if isinstance(lifecycle.get(hook), Mapping):
                        _check_handler(emit, lifecycle[hook], _LIFECYCLE_HANDLERS, child(cpath, "lifecycle", hook), ctr)
    return emit.findings


_VALUE_FROM_SOURCES = ("fieldRef", "resourceFieldRef", "configMapKeyRef", "secretKeyRef")


@rule("env",
      source="k8s pkg/apis/core/validation/validation.go ValidateEnv",
      refuses="Env names outside the grammar, value with valueFrom, valueFrom with no or several sources, bad field "
              "paths.")
# k8s pkg/apis/core/validation/validation.go ValidateEnv (IsEnvVarName), validateEnvVarValueFrom
#   (exactly one source; not together with `value`), validateConfigMapKeySelector /
#   validateSecretKeySelector (IsConfigMapKey), ValidateEnvFrom (exactly one of configMapRef /
#   secretRef; prefix IsEnvVarName).  Duplicate env names are only a warning upstream
#   (pkg/api/pod/warnings.go "hides previous definition"), so they are not reported.
#   Env var names follow the newest API server (IsRelaxedEnvVarName since 1.33); the profile check
#   refuses the older grammar's misses for clusters before 1.33 (validate/kube_names.py).
#   validateObjectFieldSelector with validEnvDownwardAPIFieldPathExpressions (fieldRef.fieldPath),
#   validateContainerResourceFieldSelector (resourceFieldRef.resource), and the referenced ConfigMap /
#   Secret names (ValidateConfigMapName / ValidateSecretName: DNS-1123 subdomains).
def check_env(obj: Obj, ctx: Context) -> Iterable[Finding]:
    emit = _Emitter(obj)
    for ref in pod_specs(obj):
        for cpath, ctr, _ in containers(ref.spec, ref.path):
            for i, env in _dicts(ctr.get("env")):
                path = child(cpath, "env", i)
                name = env.get("name")
                if not isinstance(name, str) or not name:
                    emit(child(path, "name"), required())
                else:
                    for msg in is_env_var_name(name):
                        emit(child(path, "name"), invalid(name, msg))
                value_from = env.get("valueFrom")
                if not isinstance(value_from, Mapping):
                    continue
                vpath = child(path, "valueFrom")
                sources = [s for s in _VALUE_FROM_SOURCES if value_from.get(s) is not None]
                if not sources:
                    emit(
                        vpath,
                        invalid(
                            "",
                            "must specify one of: `fieldRef`, `resourceFieldRef`, `configMapKeyRef` or `secretKeyRef`",
                        ),
                    )
                elif env.get("value"):
                    emit(vpath, invalid("", "may not be specified when `value` is not empty"))
                elif len(sources) > 1:
                    emit(vpath, invalid("", "may not have more than one field specified at a time"))
                field_ref = value_from.get("fieldRef")
                if isinstance(field_ref, Mapping):
                    fpath = child(vpath, "fieldRef")
                    fp = field_ref.get("fieldPath")
                    if not isinstance(fp, str) or not fp:
                        emit(child(fpath, "fieldPath"), required())
                    else:
                        for sub, msg in env_field_path_problems(fp, str(field_ref.get("apiVersion") or "v1")):
                            emit(child(fpath, sub) if sub else fpath, msg)
                resource_ref = value_from.get("resourceFieldRef")
                if isinstance(resource_ref, Mapping):
                    resource = resource_ref.get("resource")
                    if not resource:
                        emit(child(vpath, "resourceFieldRef", "resource"), required())
                    elif resource not in ENV_RESOURCE_FIELDS:
                        emit(child(vpath, "resourceFieldRef", "resource"), not_supported(resource, ENV_RESOURCE_FIELDS))
                for selector in ("configMapKeyRef", "secretKeyRef"):
                    sel = value_from.get(selector)
                    if not isinstance(sel, Mapping):
                        continue
                    ref_name = sel.get("name")
                    if isinstance(ref_name, str) and ref_name:
                        for msg in is_dns1123_subdomain(ref_name):
                            emit(child(vpath, selector, "name"), invalid(ref_name, msg))
                    k = sel.get("key")
                    if not k:
                        emit(child(vpath, selector, "key"), required())
                    else:
                        for msg in is_config_map_key(str(k)):
                            emit(child(vpath, selector, "key"), invalid(k, msg))
            for i, env_from in _dicts(ctr.get("envFrom")):
                path = child(cpath, "envFrom", i)
                prefix = env_from.get("prefix")
                if isinstance(prefix, str) and prefix:
                    for msg in is_env_var_name(prefix):
                        emit(child(path, "prefix"), invalid(prefix, msg))
                for source in ("configMapRef", "secretRef"):
                    ref_name = _dict(env_from.get(source)).get("name")
                    if isinstance(ref_name, str) and ref_name:
                        for msg in is_dns1123_subdomain(ref_name):
                            emit(child(path, source, "name"), invalid(ref_name, msg))
                count = sum(env_from.get(s) is not None for s in ("configMapRef", "secretRef"))
                if count == 0:
                    emit(path, invalid("", "must specify one of: `configMapRef` or `secretRef`"))
                elif count > 1:
                    emit(path, invalid("", "may not have more than one field specified at a time"))
    return emit.findings


_STANDARD_CONTAINER_RESOURCES = frozenset({"cpu", "memory", "ephemeral-storage"})
_OTHER_STANDARD_RESOURCES = frozenset(
    {"storage", "pods", "services", "replicationcontrollers", "resourcequotas", "secrets", "configmaps",
     "persistentvolumeclaims", "services.nodeports", "services.loadbalancers"}
)  # fmt: skip


def _is_native_resource(name: str) -> bool:
    return "/" not in name or "kubernetes.io/" in name


def _is_hugepages(name: str) -> bool:
    return name.startswith("hugepages-")


def _is_extended_resource(name: str) -> bool:
    return (
        not _is_native_resource(name) and not name.startswith("requests.") and not is_qualified_name("requests." + name)
    )


def _overcommit_allowed(name: str) -> bool:
    return _is_native_resource(name) and not _is_hugepages(name)


def container_resource_name_errors(name: str) -> list[str]:
    """validateContainerResourceName (validateResourceName + container restrictions)."""
    errs = is_qualified_name(name)
    if errs:
        return errs
    if "/" not in name:
        if name in _STANDARD_CONTAINER_RESOURCES or _is_hugepages(name):
            return []
        if name not in _OTHER_STANDARD_RESOURCES:
            errs.append("must be a standard resource type or fully qualified")
        return errs + ["must be a standard resource for containers"]
    if not _is_native_resource(name) and not _is_extended_resource(name):
        return ["doesn't follow extended resource name standard"]
    return []


@rule("resources",
      source="k8s pkg/apis/core/validation/validation.go validateResourceRequirements",
      refuses="Malformed quantities, requests above limits, GPU requests unlike their limits or fractional, bad "
              "resource names.")
# k8s pkg/apis/core/validation/validation.go validateResourceRequirements (request <= limit:
#   "must be less than or equal to %s limit of %s"; non-overcommitable resources such as
#   nvidia.com/gpu: "must be equal to %s limit of %s" and "Limit must be set for non
#   overcommitable resources"), ValidateResourceQuantityValue (non-negative; "must be an
#   integer" for extended resources), validateContainerResourceName; quantity syntax from
#   k8s.io/apimachinery/pkg/api/resource ParseQuantity (a decode error in the API server).
# Quantities are echoed as written, not in Quantity.String() canonical form.
def check_resources(obj: Obj, ctx: Context) -> Iterable[Finding]:
    emit = _Emitter(obj)
    for ref in pod_specs(obj):
        for cpath, ctr, _ in containers(ref.spec, ref.path):
            rpath = child(cpath, "resources")
            resources = _dict(ctr.get("resources"))
            limits_raw = dict(_dict(resources.get("limits")))
            # pkg/apis/core/v1 defaults.go SetDefaults_ResourceRequirements: a limit without a request
            # is also the request, so its quantity errors are reported under requests too
            requests_raw = {**limits_raw, **_dict(resources.get("requests"))}
            parsed: dict[str, dict[str, Fraction]] = {"limits": {}, "requests": {}}
            for section, raws in (("limits", limits_raw), ("requests", requests_raw)):
                for rname, raw in raws.items():
                    qpath = key(child(rpath, section), rname)
                    for msg in container_resource_name_errors(rname):
                        emit(qpath, invalid(rname, msg))
                    try:
                        quantity = parse_quantity(raw)
                    except QuantityError as err:
                        emit(qpath, invalid(raw, str(err)))
                        continue
                    parsed[section][rname] = quantity
                    shown = str(raw)
                    if quantity < 0:
                        emit(qpath, invalid(shown, IS_NEGATIVE_ERROR_MSG))
                    if _is_extended_resource(rname) and quantity.denominator != 1:
                        emit(qpath, f"Invalid value: {shown}: must be an integer")
            # the comparisons are reported on the whole requests / limits map, as upstream does
            for rname, req in parsed["requests"].items():
                req_shown = str(requests_raw[rname])
                if rname in parsed["limits"]:
                    lim = parsed["limits"][rname]
                    lim_shown = str(limits_raw[rname])
                    if req != lim and not _overcommit_allowed(rname):
                        emit(child(rpath, "requests"),
                             invalid(req_shown, f"must be equal to {rname} limit of {lim_shown}"))
                    elif req > lim:
                        emit(child(rpath, "requests"),
                             invalid(req_shown, f"must be less than or equal to {rname} limit of {lim_shown}"))
                elif rname not in limits_raw and not _overcommit_allowed(rname):
                    emit(child(rpath, "limits"), required("Limit must be set for non overcommitable resources"))
    return emit.findings


_TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")


@rule("pod-tolerations", source="k8s pkg/apis/core/validation/validation.go ValidateTolerations",
      refuses="Tolerations with a bad key, operator, effect, value for Exists, or tolerationSeconds without NoExecute.")
# k8s pkg/apis/core/validation/validation.go ValidateTolerations (+ validateTaintEffect)
def check_tolerations(obj: Obj, ctx: Context) -> Iterable[Finding]:
    emit = _Emitter(obj)
    for ref in pod_specs(obj):
        for i, tol in _dicts(ref.spec.get("tolerations")):
            path = child(ref.path, "tolerations", i)
            tkey = tol.get("key") or ""
            operator = tol.get("operator") or ""
            value = tol.get("value") or ""
            effect = tol.get("effect") or ""
            if tkey:
                for msg in is_qualified_name(tkey):
                    emit(child(path, "key"), invalid(tkey, msg))
            if not tkey and operator != "Exists":
                emit(
                    child(path, "operator"),
                    invalid(
                        operator,
                        'operator must be Exists when `key` is empty, which means "match all values and all keys"',
                    ),
                )
            if tol.get("tolerationSeconds") is not None and effect != "NoExecute":
                emit(
                    child(path, "effect"), invalid(effect, "effect must be 'NoExecute' when `tolerationSeconds` is set")
                )
            if operator in ("Equal", ""):
                errs = is_valid_label_value(value)
                if errs:
                    emit(child(path, "value"), invalid(value, ";".join(errs)))
            elif operator == "Exists":
                if value:
                    emit(child(path, "operator"), invalid(value, "value must be empty when `operator` is 'Exists'"))
            else:
                emit(child(path, "operator"), not_supported(operator, ("Equal", "Exists")))
            if effect and effect not in _TAINT_EFFECTS:
                emit(child(path, "effect"), not_supported(effect, _TAINT_EFFECTS))
    return emit.findings


@rule("pod-priority-class-name", source="k8s pkg/apis/core/validation/validation.go ValidatePodSpec",
      refuses="A priorityClassName that is not a DNS subdomain or names a class neither built in nor in the output.")
# k8s pkg/apis/core/validation/validation.go ValidatePodSpec (ValidatePriorityClassName =
#   NameIsDNSSubdomain) and plugin/pkg/admission/priority admission.go:
#   "no PriorityClass with name %v was found"
def check_priority_class_name(obj: Obj, ctx: Context) -> Iterable[Finding]:
    emit = _Emitter(obj)
    for ref in pod_specs(obj):
        name = ref.spec.get("priorityClassName")
        if not isinstance(name, str) or not name:
            continue
        path = child(ref.path, "priorityClassName")
        errs = is_dns1123_subdomain(name)
        for msg in errs:
            emit(path, invalid(name, msg))
        if not errs and not ctx.exists("PriorityClass", name):
            emit(path, f"no PriorityClass with name {name} was found")
    return emit.findings


def _term_path(base: str, req: str) -> str:
    return child(base, "affinity", "nodeAffinity", req)


@rule("node-selector", source="k8s pkg/apis/core/validation/validation.go ValidatePodSpec",
      refuses="nodeSelector keys and values that are not label keys and values.")
# k8s pkg/apis/core/validation/validation.go ValidatePodSpec (unversionedvalidation.ValidateLabels
#   on nodeSelector)
def check_node_selector(obj: Obj, ctx: Context) -> Iterable[Finding]:
    emit = _Emitter(obj)
    for ref in pod_specs(obj):
        base = child(ref.path, "nodeSelector")
        for k, v in _dict(ref.spec.get("nodeSelector")).items():
            for msg in is_qualified_name(str(k)):
                emit(key(base, str(k)), invalid(k, msg))
            for msg in is_valid_label_value(str(v)):
                emit(key(base, str(k)), invalid(v, msg))
    return emit.findings


def _check_node_selector_requirement(emit: _Emitter, req: Mapping[str, Any], path: str, check_values: bool) -> None:
    operator = req.get("operator")
    values = [str(v) for v in _list(req.get("values"))]
    vpath = child(path, "values")
    if operator in ("In", "NotIn"):
        if not values:
            emit(vpath, required("must be specified when `operator` is 'In' or 'NotIn'"))
    elif operator in ("Exists", "DoesNotExist"):
        if values:
            emit(vpath, forbidden("may not be specified when `operator` is 'Exists' or 'DoesNotExist'"))
    elif operator in ("Gt", "Lt"):
        if len(values) != 1:
            emit(vpath, required("must be specified single value when `operator` is 'Lt' or 'Gt'"))
        elif not is_integer_string(values[0]):
            # k8s.io/apimachinery/pkg/labels NewRequirement, used by the scheduler's node matching
            emit(child(vpath, 0), invalid(values[0], "for 'Gt', 'Lt' operators, the value must be an integer"))
    else:
        emit(child(path, "operator"), invalid(operator or "", "not a valid selector operator"))
    rkey = str(req.get("key", ""))
    for msg in is_qualified_name(rkey):
        emit(child(path, "key"), invalid(rkey, msg))
    if check_values:
        for j, value in enumerate(values):
            for msg in is_valid_label_value(value):
                emit(child(vpath, j), invalid(value, msg))


@rule("node-affinity", source="k8s pkg/apis/core/validation/validation.go validateNodeAffinity / ValidateNodeSelector",
      refuses="Node affinity without terms, bad operators, keys or values, Gt/Lt values that are not one integer.")
# k8s pkg/apis/core/validation/validation.go validateNodeAffinity / ValidateNodeSelector ("must
#   have at least one node selector term") / ValidateNodeSelectorRequirement /
#   ValidatePreferredSchedulingTerms ("must be in the range 1-100")
def check_node_affinity(obj: Obj, ctx: Context) -> Iterable[Finding]:
    emit = _Emitter(obj)
    for ref in pod_specs(obj):
        affinity = _dict(_dict(ref.spec.get("affinity")).get("nodeAffinity"))
        req_name = "requiredDuringSchedulingIgnoredDuringExecution"
        pref_name = "preferredDuringSchedulingIgnoredDuringExecution"
        required_sel = affinity.get(req_name)
        if isinstance(required_sel, Mapping):
            tpath = child(_term_path(ref.path, req_name), "nodeSelectorTerms")
            terms = list(_dicts(required_sel.get("nodeSelectorTerms")))
            if not terms:
                emit(tpath, required("must have at least one node selector term"))
            for i, term in terms:
                for j, expr in _dicts(term.get("matchExpressions")):
                    _check_node_selector_requirement(emit, expr, child(tpath, i, "matchExpressions", j), True)
        for i, pref in _dicts(affinity.get(pref_name)):
            ppath = child(_term_path(ref.path, pref_name), i)
            weight = pref.get("weight")
            if not isinstance(weight, int) or not 1 <= weight <= 100:
                emit(child(ppath, "weight"), invalid(weight, "must be in the range 1-100"))
            for j, expr in _dicts(_dict(pref.get("preference")).get("matchExpressions")):
                _check_node_selector_requirement(emit, expr, child(ppath, "preference", "matchExpressions", j), False)
    return emit.findings


_PULL_POLICIES = ("Always", "IfNotPresent", "Never")
_TERMINATION_MESSAGE_POLICIES = ("File", "FallbackToLogsOnError")


@rule("container-image-and-policies", source="k8s pkg/apis/core/validation/validation.go validateContainerCommon",
      refuses="A container without an image, bad pull policies, termination message policies or restart policies.")
# k8s pkg/apis/core/validation/validation.go validateContainerCommon: image "Required value" (for
#   every container of a create), validatePullPolicy, terminationMessagePolicy (after v1 defaulting
#   of the absent ones to IfNotPresent/Always and File).
def check_container_image_and_policies(obj: Obj, ctx: Context) -> Iterable[Finding]:
    emit = _Emitter(obj)
    for ref in pod_specs(obj):
        for cpath, ctr, _ in containers(ref.spec, ref.path):
            if not ctr.get("image"):
                emit(child(cpath, "image"), required())
            policy = ctr.get("imagePullPolicy")
            if policy is not None and policy not in _PULL_POLICIES:
                emit(child(cpath, "imagePullPolicy"), not_supported(policy, _PULL_POLICIES))
            tmp = ctr.get("terminationMessagePolicy")
            if tmp is not None and tmp not in _TERMINATION_MESSAGE_POLICIES:
                emit(child(cpath, "terminationMessagePolicy"), not_supported(tmp, _TERMINATION_MESSAGE_POLICIES))
    return emit.findings


_INT32_MAX = 2**31 - 1
# The internal core.SecurityContext as encoding/json prints it in the privileged/allowPrivilegeEscalation
# error (field order of pkg/apis/core/types.go; pointers absent -> null).
_SC_FIELDS = (("Capabilities", "capabilities"), ("Privileged", "privileged"), ("SELinuxOptions", "seLinuxOptions"),
              ("WindowsOptions", "windowsOptions"), ("RunAsUser", "runAsUser"), ("RunAsGroup", "runAsGroup"),
              ("RunAsNonRoot", "runAsNonRoot"), ("ReadOnlyRootFilesystem", "readOnlyRootFilesystem"),
              ("AllowPrivilegeEscalation", "allowPrivilegeEscalation"), ("ProcMount", "procMount"),
              ("SeccompProfile", "seccompProfile"), ("AppArmorProfile", "appArmorProfile"))
_SC_SUBFIELDS = {
    "capabilities": (("Add", "add", None), ("Drop", "drop", None)),
    "seLinuxOptions": (("User", "user", ""), ("Role", "role", ""), ("Type", "type", ""), ("Level", "level", "")),
    "windowsOptions": (("GMSACredentialSpecName", "gmsaCredentialSpecName", None),
                       ("GMSACredentialSpec", "gmsaCredentialSpec", None), ("RunAsUserName", "runAsUserName", None),
                       ("HostProcess", "hostProcess", None)),
    "seccompProfile": (("Type", "type", ""), ("LocalhostProfile", "localhostProfile", None)),
    "appArmorProfile": (("Type", "type", ""), ("LocalhostProfile", "localhostProfile", None)),
}


def _go_security_context(sc: Mapping[str, Any]) -> str:
    out: dict[str, Any] = {}
    for go, v1 in _SC_FIELDS:
        value = sc.get(v1)
        if isinstance(value, Mapping) and v1 in _SC_SUBFIELDS:
            value = {g: value.get(k, default) for g, k, default in _SC_SUBFIELDS[v1]}
        out[go] = value
    return json.dumps(out, separators=(",", ":"), ensure_ascii=False)


def _check_id_range(emit: _Emitter, sc: Mapping[str, Any], base: str, fields: tuple[str, ...]) -> None:
    for fname in fields:
        value = sc.get(fname)
        if isinstance(value, int) and not isinstance(value, bool) and not 0 <= value <= _INT32_MAX:
            emit(child(base, fname), invalid(value, inclusive_range_error(0, _INT32_MAX)))


def _check_seccomp(emit: _Emitter, sc: Mapping[str, Any], base: str) -> None:
    profile = sc.get("seccompProfile")
    if not isinstance(profile, Mapping):
        return
    ptype = profile.get("type")
    types = ("Localhost", "RuntimeDefault", "Unconfined")
    if ptype not in types:
        emit(child(base, "seccompProfile", "type"), not_supported(ptype or "", types))
    elif ptype == "Localhost" and not profile.get("localhostProfile"):
        emit(child(base, "seccompProfile", "localhostProfile"), required("must be set when seccomp type is Localhost"))
    elif ptype != "Localhost" and profile.get("localhostProfile") is not None:
        emit(child(base, "seccompProfile", "localhostProfile"),
             invalid(profile.get("localhostProfile"), "can only be set when seccomp type is Localhost"))


@rule("security-context",
      source="k8s pkg/apis/core/validation/validation.go ValidateSecurityContext",
      refuses="runAsUser / runAsGroup out of range, privileged with allowPrivilegeEscalation false, bad "
              "capabilities or profiles.")
# k8s pkg/apis/core/validation/validation.go ValidateSecurityContext (runAsUser / runAsGroup
#   ValidateNonnegativeField-style range "must be between 0 and 2147483647, inclusive", procMount
#   "Default" or "Unmasked", "cannot set `allowPrivilegeEscalation` to false and `privileged` to
#   true" reported on the whole securityContext), validateSeccompProfileField, and
#   validatePodSpecSecurityContext (runAsUser, runAsGroup, fsGroup ranges).
def check_security_context(obj: Obj, ctx: Context) -> Iterable[Finding]:
    emit = _Emitter(obj)
    for ref in pod_specs(obj):
        psc = _dict(ref.spec.get("securityContext"))
        pbase = child(ref.path, "securityContext")
        _check_id_range(emit, psc, pbase, ("runAsUser", "runAsGroup", "fsGroup"))
        _check_seccomp(emit, psc, pbase)
        for cpath, ctr, _ in containers(ref.spec, ref.path):
            sc = ctr.get("securityContext")
            if not isinstance(sc, Mapping):
                continue
            base = child(cpath, "securityContext")
            _check_id_range(emit, sc, base, ("runAsUser", "runAsGroup"))
            proc = sc.get("procMount")
            if proc is not None and proc not in ("Default", "Unmasked"):
                emit(child(base, "procMount"), not_supported(proc, ("Default", "Unmasked")))
            _check_seccomp(emit, sc, base)
            if sc.get("privileged") is True and sc.get("allowPrivilegeEscalation") is False:
                emit(base, invalid_raw(_go_security_context(sc),
                                       "cannot set `allowPrivilegeEscalation` to false and `privileged` to true"))
    return emit.findings


@rule("sysctls", source="k8s pkg/apis/core/validation/validation.go validateSysctls",
      refuses="Sysctl names outside the grammar, duplicates, namespaced sysctls with host namespaces.")
# k8s pkg/apis/core/validation/validation.go validateSysctls (IsValidSysctlName, "Duplicate value",
#   namespaced sysctls "may not be specified when 'hostNetwork' is true" / "... 'hostIPC' is true"
#   with component-helpers node/util/sysctl GetNamespace).
def check_sysctls(obj: Obj, ctx: Context) -> Iterable[Finding]:
    emit = _Emitter(obj)
    for ref in pod_specs(obj):
        host = {"net": ref.spec.get("hostNetwork") is True, "ipc": ref.spec.get("hostIPC") is True}
        seen: set[str] = set()
        base = child(ref.path, "securityContext", "sysctls")
        for i, sysctl in _dicts(_dict(ref.spec.get("securityContext")).get("sysctls")):
            path = child(base, i, "name")
            name = sysctl.get("name")
            if not isinstance(name, str) or not name:
                emit(path, required())
                continue
            errs = is_sysctl_name(name)
            for msg in errs:
                emit(path, invalid(name, msg))
            if errs:
                continue
            if name in seen:
                emit(path, duplicate(name))
            seen.add(name)
            namespace = sysctl_namespace(name)
            if namespace and host[namespace]:
                flag = "hostNetwork" if namespace == "net" else "hostIPC"
                emit(path, invalid(name, f"may not be specified when '{flag}' is true"))
    return emit.findings


_DNS_POLICIES = ("ClusterFirstWithHostNet", "ClusterFirst", "Default", "None")
MAX_DNS_NAMESERVERS = 3
MAX_DNS_SEARCH_PATHS = 32


@rule("dns", source="k8s pkg/apis/core/validation/validation.go validateDNSPolicy",
      refuses="An unsupported dnsPolicy, a dnsConfig missing for None or over its limits.")
# k8s pkg/apis/core/validation/validation.go validateDNSPolicy ("Unsupported value") and
#   validatePodDNSConfig ("must provide `dnsConfig` when `dnsPolicy` is None", at most 3 nameservers
#   that are IP addresses and at least one with policy None, at most 32 search paths, option names).
def check_dns(obj: Obj, ctx: Context) -> Iterable[Finding]:
    emit = _Emitter(obj)
    for ref in pod_specs(obj):
        policy = ref.spec.get("dnsPolicy")
        if policy is not None and policy not in _DNS_POLICIES:
            emit(child(ref.path, "dnsPolicy"), not_supported(policy, _DNS_POLICIES))
        config = ref.spec.get("dnsConfig")
        cpath = child(ref.path, "dnsConfig")
        if policy == "None" and not isinstance(config, Mapping):
            emit(cpath, required("must provide `dnsConfig` when `dnsPolicy` is None"))
            continue
        if not isinstance(config, Mapping):
            continue
        servers = _list(config.get("nameservers"))
        if len(servers) > MAX_DNS_NAMESERVERS:
            emit(child(cpath, "nameservers"), invalid_raw(json.dumps(servers, separators=(",", ":")),
                                                          f"must not have more than {MAX_DNS_NAMESERVERS} nameservers"))
        if policy == "None" and not servers:
            emit(child(cpath, "nameservers"),
                 required("must provide at least one DNS nameserver when `dnsPolicy` is None"))
        for i, server in enumerate(servers):
            if not _is_ip(server):
                emit(child(cpath, "nameservers", i),
                     invalid(server, "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)"))
        searches = _list(config.get("searches"))
        if len(searches) > MAX_DNS_SEARCH_PATHS:
            emit(child(cpath, "searches"), invalid_raw(json.dumps(searches, separators=(",", ":")),
                                                       f"must not have more than {MAX_DNS_SEARCH_PATHS} search paths"))
        for i, option in _dicts(config.get("options")):
            if not option.get("name"):
                emit(child(cpath, "options", i), required("must not be empty"))
    return emit.findings


def _is_ip(value: Any) -> bool:
    try:
        ipaddress.ip_address(str(value))
    except ValueError:
        return False
    return isinstance(value, str)


def _check_label_selector(emit: _Emitter, selector: Mapping[str, Any], path: str) -> None:
    """metav1validation.ValidateLabelSelector (matchLabels as labels, matchExpressions requirements)."""
    for k, v in _dict(selector.get("matchLabels")).items():
        lpath = key(child(path, "matchLabels"), str(k))
        for msg in is_qualified_name(str(k)):
            emit(lpath, invalid(k, msg))
        for msg in is_valid_label_value(str(v)):
            emit(lpath, invalid(v, msg))
    for j, expr in _dicts(selector.get("matchExpressions")):
        epath = child(path, "matchExpressions", j)
        operator = expr.get("operator")
        values = _list(expr.get("values"))
        if operator in ("In", "NotIn"):
            if not values:
                emit(child(epath, "values"), required("must be specified when `operator` is 'In' or 'NotIn'"))
        elif operator in ("Exists", "DoesNotExist"):
            if values:
                emit(child(epath, "values"),
                     forbidden("may not be specified when `operator` is 'Exists' or 'DoesNotExist'"))
        else:
            emit(child(epath, "operator"), invalid(operator or "", "not a valid selector operator"))
        rkey = str(expr.get("key", ""))
        for msg in is_qualified_name(rkey):
            emit(child(epath, "key"), invalid(rkey, msg))


def _check_pod_affinity_term(emit: _Emitter, term: Mapping[str, Any], path: str) -> None:
    selector = term.get("labelSelector")
    if isinstance(selector, Mapping):
        _check_label_selector(emit, selector, child(path, "labelSelector"))
    topology = term.get("topologyKey")
    tpath = child(path, "topologyKey")
    if not topology:
        emit(tpath, required("can not be empty"))
    for msg in is_qualified_name(str(topology or "")):
        emit(tpath, invalid(str(topology or ""), msg))


@rule("pod-affinity",
      source="k8s pkg/apis/core/validation/validation.go validatePodAffinity / validatePodAntiAffinity / "
             "validatePodAffinityTerm",
      refuses="Pod (anti-)affinity terms without a topology key, bad weights or selectors.")
# k8s pkg/apis/core/validation/validation.go validatePodAffinity / validatePodAntiAffinity /
#   validatePodAffinityTerm (topologyKey "can not be empty" and a qualified name, the label selector),
#   validateWeightedPodAffinityTerms ("must be in the range 1-100").
def check_pod_affinity(obj: Obj, ctx: Context) -> Iterable[Finding]:
    emit = _Emitter(obj)
    for ref in pod_specs(obj):
        affinity = _dict(ref.spec.get("affinity"))
        for kind in ("podAffinity", "podAntiAffinity"):
            section = _dict(affinity.get(kind))
            base = child(ref.path, "affinity", kind)
            for i, term in _dicts(section.get("requiredDuringSchedulingIgnoredDuringExecution")):
                _check_pod_affinity_term(emit, term, child(base, "requiredDuringSchedulingIgnoredDuringExecution", i))
            for i, weighted in _dicts(section.get("preferredDuringSchedulingIgnoredDuringExecution")):
                wpath = child(base, "preferredDuringSchedulingIgnoredDuringExecution", i)
                weight = weighted.get("weight")
                if not isinstance(weight, int) or not 1 <= weight <= 100:
                    emit(child(wpath, "weight"), invalid(weight, "must be in the range 1-100"))
                _check_pod_affinity_term(emit, _dict(weighted.get("podAffinityTerm")), child(wpath, "podAffinityTerm"))
    return emit.findings


@rule("pod-names-and-deadlines", source="k8s pkg/apis/core/validation/validation.go ValidatePodSpec",
      refuses="Bad hostname, subdomain, serviceAccountName, nodeName, grace periods or deadlines of a pod spec.")
# k8s pkg/apis/core/validation/validation.go ValidatePodSpec: hostname and subdomain (DNS-1123
#   labels), serviceAccountName and nodeName (DNS-1123 subdomains), activeDeadlineSeconds ("must be
#   between 1 and 2147483647, inclusive").
def check_pod_names_and_deadlines(obj: Obj, ctx: Context) -> Iterable[Finding]:
    emit = _Emitter(obj)
    for ref in pod_specs(obj):
        for fname in ("hostname", "subdomain"):
            value = ref.spec.get(fname)
            if isinstance(value, str) and value:
                for msg in is_dns1123_label(value):
                    emit(child(ref.path, fname), invalid(value, msg))
        for fname in ("serviceAccountName", "nodeName"):
            value = ref.spec.get(fname)
            if isinstance(value, str) and value:
                for msg in is_dns1123_subdomain(value):
                    emit(child(ref.path, fname), invalid(value, msg))
        deadline = ref.spec.get("activeDeadlineSeconds")
        if isinstance(deadline, int) and not isinstance(deadline, bool) and not 1 <= deadline <= _INT32_MAX:
            emit(child(ref.path, "activeDeadlineSeconds"), invalid(deadline, inclusive_range_error(1, _INT32_MAX)))
    return emit.findings
