"""Semantic rules on Services: k8s.io/kubernetes pkg/apis/core/validation ValidateService, and whether a
Service selects a pod of the output."""

from __future__ import annotations

import json
from collections.abc import Iterable

from gpuop.kube.validation import (
    PROTOCOLS, duplicate, forbidden, invalid, is_dns1123_label, is_valid_port_name, is_valid_port_num, not_supported,
    required,
)
from .objects import rule, Context, Finding, Obj, _Emitter, _dict, _dicts, _meta, child, pod_specs


_SERVICE_TYPES = ("ClusterIP", "ExternalName", "LoadBalancer", "NodePort")


@rule("service-ports", source="k8s pkg/apis/core/validation/validation.go ValidateService",
      refuses="Bad Service types, ports, protocols, target ports, node ports; unnamed ports beside others.")
# k8s pkg/apis/core/validation/validation.go ValidateService (type, sessionAffinity, ports required
#   but for ExternalName, protocol) / validateServicePort (port
#   IsValidPortNum, targetPort ValidatePortNumOrName, names DNS-1123 label, required when more
#   than one port, unique; nodePort "may not be used when `type` is 'ClusterIP'") and
#   pkg/registry/core/service/portallocator ErrNotInRange ("provided port is not in the valid
#   range. The range of valid ports is 30000-32767")
def check_service_ports(obj: Obj, ctx: Context) -> Iterable[Finding]:
    emit = _Emitter(obj)
    if obj.get("kind") != "Service":
        return emit.findings
    spec = _dict(obj.get("spec"))
    stype = spec.get("type") or "ClusterIP"
    if stype not in _SERVICE_TYPES:
        emit("spec.type", not_supported(stype, _SERVICE_TYPES))
    affinity = spec.get("sessionAffinity")
    if affinity is not None and affinity not in ("ClientIP", "None"):
        emit("spec.sessionAffinity", not_supported(affinity, ("ClientIP", "None")))
    ports = list(_dicts(spec.get("ports")))
    if not ports and stype != "ExternalName":
        emit("spec.ports", required())
    names: set[str] = set()
    lo, hi = ctx.node_port_range
    for i, port in ports:
        path = child("spec.ports", i)
        name = port.get("name") or ""
        if len(ports) > 1 and not name:
            emit(child(path, "name"), required())
        elif name:
            for msg in is_dns1123_label(name):
                emit(child(path, "name"), invalid(name, msg))
            if name in names:
                emit(child(path, "name"), duplicate(name))
            names.add(name)
        protocol = port.get("protocol")
        if protocol is not None and protocol not in PROTOCOLS:
            emit(child(path, "protocol"), not_supported(protocol, PROTOCOLS))
        number = port.get("port")
        if isinstance(number, int):
            for msg in is_valid_port_num(number):
                emit(child(path, "port"), invalid(number, msg))
        target = port.get("targetPort")
        if isinstance(target, int) and target != 0:  # 0/absent defaults to `port`
            for msg in is_valid_port_num(target):
                emit(child(path, "targetPort"), invalid(target, msg))
        elif isinstance(target, str):
            for msg in is_valid_port_name(target):
                emit(child(path, "targetPort"), invalid(target, msg))
        node_port = port.get("nodePort")
        if isinstance(node_port, int) and node_port != 0:
            if stype == "ClusterIP":
                emit(child(path, "nodePort"), forbidden("may not be used when `type` is 'ClusterIP'"))
            elif not lo <= node_port <= hi:
                emit(
                    child(path, "nodePort"),
                    invalid(
                        node_port,
                        f"provided port is not in the valid range. The range of valid ports is {lo}-{hi}",
                    ),
                )
    return emit.findings


@rule("service-selector-matches-pods",
      source="gpuop (not an API-server check): a Service whose selector matches no pod template in the output has "
             "no endpoints (kube-controller-manager endpointslice controller selects nothing)",
      refuses="A Service whose selector matches no pod template of the output (no endpoints).")
# Not an API-server check: a Service whose selector matches no pod template in the output has
# no endpoints (kube-controller-manager endpointslice controller selects nothing).
def check_service_selector_matches_pods(obj: Obj, ctx: Context) -> Iterable[Finding]:
    emit = _Emitter(obj)
    if obj.get("kind") != "Service":
        return emit.findings
    selector = _dict(_dict(obj.get("spec")).get("selector"))
    if not selector:
        return emit.findings  # selector-less Services are managed by hand
    for other in ctx.objects:
        if (_meta(other).get("namespace") or "") != emit.namespace:
            continue
        for ref in pod_specs(other):
            if all(ref.labels.get(k) == v for k, v in selector.items()):
                return emit.findings
    rendered = json.dumps(dict(selector), sort_keys=True)
    emit("spec.selector", f"selector {rendered} matches no pod template in namespace {json.dumps(emit.namespace)}")
    return emit.findings
