"""Writer: one Helm chart per cluster (Chart.yaml, values.yaml, values.schema.json, templates/).

Templates are the cluster's objects with their value slots turned into template expressions:
- a block slot (a whole mapping value) becomes `{{- with .Values.x }} key: {{ toYaml . | nindent N }}`,
  so an empty value at deploy time drops the field, exactly as the manifests writer does;
- an inline slot (inside a string) becomes `{{ print "lit" .Values.x "lit" | toJson }}`;
- every other `{{` in the objects is escaped, so literal text never reaches the template engine.
Each component's templates are wrapped in `{{- if .Values.<component>.enabled }}`.
Rendering with the default values therefore gives the rendered manifests; tests prove it with Helm's
own engine (helm-python-sdk).
"""

from __future__ import annotations

import json
import re

from gpuop import __version__
from gpuop.kube.order import file_name
from gpuop.plan.model import StackPlan
from gpuop.kube.slots import MARKER, OPEN
from gpuop.stack.objects import Synthesized
from gpuop.outputs.values import values_schema
from gpuop.kube.yamlio import by_content, dump, dump_json, dump_plain

TOKEN = "GPUOPSLOT{}X"
TOKEN_RE = re.compile(r"GPUOPSLOT(\d+)X")
BLOCK_LINE = re.compile(r"^(\s*)(- )?([A-Za-z0-9_.-]+): GPUOPSLOT(\d+)X$")


def _tokenize(obj, exprs: list):
    if isinstance(obj, dict):
        out = {}
        for k, v in obj.items():
            if isinstance(v, str) and MARKER.fullmatch(v):
                exprs.append(("block", MARKER.fullmatch(v).group(1)))
                out[k] = TOKEN.format(len(exprs) - 1)
            else:
                out[k] = _tokenize(v, exprs)
        return out
    if isinstance(obj, list):
        return [_tokenize(v, exprs) for v in obj]
    if isinstance(obj, str) and OPEN in obj:
        parts, pos = [], 0
        for m in MARKER.finditer(obj):
            if m.start() > pos:
                parts.append(json.dumps(obj[pos:m.start()]))
            parts.append(f".Values.{m.group(1)}")
            pos = m.end()
        if pos < len(obj):
            parts.append(json.dumps(obj[pos:]))
        exprs.append(("inline", "{{ print " + " ".join(parts) + " | toJson }}"))
        return TOKEN.format(len(exprs) - 1)
    return obj


@by_content
def template(body: dict) -> str:
    """The Helm template text of one object."""
    exprs: list = []
    text = dump(_tokenize(body, exprs))
    text = text.replace("{{", '{{ "{{" }}')
    lines = []
    for line in text.split("\n"):
        m = BLOCK_LINE.match(line)
        if m and exprs[int(m.group(4))][0] == "block":
            indent, dash, key, path = m.group(1), m.group(2), m.group(3), exprs[int(m.group(4))][1]
            if dash:
                lines.append(f"{indent}-")
                indent += "  "
            lines += [f"{{{{- with .Values.{path} }}}}", f"{indent}{key}:",
                      f"{{{{- toYaml . | nindent {len(indent) + 2} }}}}", "{{- end }}"]
            continue
        lines.append(TOKEN_RE.sub(lambda t: exprs[int(t.group(1))][1], line))
    out = "\n".join(lines)
    if TOKEN_RE.search(out):
        raise AssertionError(f"unplaced value slot in {body['kind']}/{body['metadata']['name']}")
    return out


def chart_files(stack: Synthesized, version: str) -> dict[str, str]:
    """The chart's files; `version` is the chart version (content digests use a placeholder)."""
    plan = stack.plan
    files = {
        "Chart.yaml": chart_yaml(plan, version),
        "values.yaml": "# Default values of this cluster's GPU stack (from its gpuop profile).\n"
                       "# Override at deploy time; values.schema.json says what is allowed.\n"
                       + dump_plain(plan.values),
        "values.schema.json": dump_json(values_schema()),
    }
    for obj in stack.objects:
        text = template(obj.body)
        if obj.values_key:
            text = f"{{{{- if .Values.{obj.values_key}.enabled }}}}\n{text}{{{{- end }}}}\n"
        files[f"templates/{file_name(obj.body)}"] = text
    return files


def chart_yaml(plan: StackPlan, version: str) -> str:
    return dump_plain({
        "apiVersion": "v2",
        "name": plan.name,
        "description": f"NVIDIA GPU stack for cluster {plan.name} (GPU Operator {plan.operator_version} operands), "
                       f"compiled by gpuop {__version__}",
        "type": "application",
        "version": version,
        "appVersion": plan.operator_version,
        "kubeVersion": f">= {plan.kube_version}.0-0",
        "annotations": {"gpuop/release": plan.release, "gpuop/platform": plan.platform},
    })
