"""Semantic rules on the data of ConfigMaps and Secrets: k8s.io/kubernetes pkg/apis/core/validation
ValidateConfigMap and ValidateSecret."""

from __future__ import annotations

from collections.abc import Iterable

from gpuop.kube.validation import invalid, is_config_map_key

from .objects import rule, Context, Finding, Obj, _dict, _Emitter, key


@rule("config-data-keys", source="k8s pkg/apis/core/validation/validation.go ValidateConfigMap",
      refuses="ConfigMap and Secret data keys that are not valid keys, or a key in both data and binaryData.")
# k8s pkg/apis/core/validation/validation.go ValidateConfigMap (data and binaryData keys IsConfigMapKey;
#   a key in both: "duplicate of key present in binaryData") and ValidateSecret (data keys
#   IsConfigMapKey; stringData is merged into data by the v1 conversion, so its keys count as data's).
def check_config_data_keys(obj: Obj, ctx: Context) -> Iterable[Finding]:
    emit = _Emitter(obj)
    kind = obj.get("kind")
    if kind == "ConfigMap":
        sections = ("data", "binaryData")
    elif kind == "Secret":
        sections = ("data", "stringData")
    else:
        return emit.findings
    for section in sections:
        for k in _dict(obj.get(section)):
            shown = "data" if kind == "Secret" else section
            for msg in is_config_map_key(str(k)):
                emit(key(shown, str(k)), invalid(str(k), msg))
    if kind == "ConfigMap":
        for k in sorted(set(_dict(obj.get("data"))) & set(_dict(obj.get("binaryData")))):
            emit(key("data", str(k)), invalid(str(k), "duplicate of key present in binaryData"))
    return emit.findings
