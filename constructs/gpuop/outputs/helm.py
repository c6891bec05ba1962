"""Writer: one Helm chart per cluster (Chart.yaml, values.yaml, values.schema.json, templates/).

Templates are the cluster's objects, one multi-document template per component (the manifests' file
names, kube/order.py), with their value slots turned into template expressions:
- a block slot (a whole mapping value) becomes `{{- with .Values.x }} key: {{ toYaml . | nindent N }}`,
  so an empty value at deploy time drops the field, exactly as the manifests writer does;
- an inline slot (inside a string) becomes `{{ print "lit" .Values.x "lit" | toJson }}`;
- every other `{{` in the objects is escaped, so literal text never reaches the template engine.
Each component's template is wrapped in `{{- if .Values.<component>.enabled }}`, and a validator step
that checks a component (plugin-validation) follows that component's toggle; the cluster's Namespace is
wrapped in `{{- if .Values.createNamespace }}` (default false, so `helm install -n NS
--create-namespace` works; the Argo CD and Flux objects set it true, the rendered manifests include it).
Beside the templates: NOTES.txt, a README.md listing every value (from values.schema.json), an icon URL
in Chart.yaml, and a `helm test` hook pod (templates/tests/) running CUDA vectorAdd on one GPU.
Rendering with the default values (plus createNamespace=true, as Argo CD and Flux install it) therefore
gives the rendered manifests, hooks aside; tests prove it with Helm's own engine (helm-python-sdk).
"""

from __future__ import annotations

import json
import re

from gpuop import __version__
from gpuop.kube.order import by_component, file_name
from gpuop.plan.model import StackPlan
from gpuop.kube.slots import MARKER, OPEN
from gpuop.stack.objects import Synthesized
from gpuop.outputs.values import values_schema
from gpuop.kube.yamlio import by_content, dump, dump_json, dump_plain
from gpuop.outputs.target import Target, Written

TOKEN = "GPUOPSLOT{}X"
ICON = "https://assets.nvidiagrid.net/ngc/logos/GPUoperator.png"     # the GPU Operator chart's own icon
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


# Validator steps that check a component follow that component's deploy-time toggle, as upstream leaves
# plugin-validation out when the device plugin is off (components/validator.py decides it at compile
# time; this keeps the same rule when `devicePlugin.enabled=false` is set at install time).
FOLLOWS = {"plugin-validation": "devicePlugin"}
ITEM_NAME = re.compile(r"^(\s*)name: (\S+)$")


def _only_if(text: str, item: str, values_key: str) -> str:
    """Wrap the list item whose `name` is `item` (a container) in `{{- if .Values.<key>.enabled }}`."""
    lines = text.split("\n")
    for i, line in enumerate(lines):
        m = ITEM_NAME.match(line)
        if not m or m.group(2) != item:
            continue
        d = len(m.group(1)) - 2                       # the item's dash column
        start = next(j for j in range(i, -1, -1) if lines[j].startswith(" " * d + "- "))
        end = next((j for j in range(i + 1, len(lines)) if not lines[j].startswith("{{")
                    and len(lines[j]) - len(lines[j].lstrip(" ")) <= d), len(lines))
        while end > i + 1 and lines[end - 1].startswith("{{- with "):   # a block slot of what follows
            end -= 1
        lines[start:end] = [f"{{{{- if .Values.{values_key}.enabled }}}}", *lines[start:end], "{{- end }}"]
        return "\n".join(lines)
    return text


def write(t: Target) -> Written:
    """Writer (outputs/target.py): the cluster's Helm chart under its chart folder, the chart version a
    placeholder (outputs/version.py: assigned when the tree is assembled), and the content digest it is
    versioned by."""
    from gpuop.outputs.version import VERSION_PLACEHOLDER, content_digest

    chart = chart_files(t.stack, VERSION_PLACEHOLDER)
    return Written({f"{t.folders.chart}/{path}": text for path, text in chart.items()},
                   {"digest": content_digest(chart)})


def chart_files(stack: Synthesized, version: str) -> dict[str, str]:
    """The chart's files; `version` is the chart version (content digests use a placeholder)."""
    plan = stack.plan
    defaults = {**plan.values, "createNamespace": False, "smokeTestImage": ""}
    files = {
        "Chart.yaml": chart_yaml(plan, version),
        "values.yaml": "# Default values of this cluster's GPU stack (from its gpuop profile).\n"
                       "# Override at deploy time; values.schema.json (and README.md) say what is allowed.\n"
                       "# createNamespace: false suits `helm install -n NS --create-namespace`; the Argo CD\n"
                       "# Application and Flux HelmRelease gpuop writes set it to true.\n"
                       + dump_plain(defaults),
        "values.schema.json": dump_json(values_schema()),
        "README.md": readme(plan, defaults),
        "templates/NOTES.txt": NOTES,
    }
    runtime_class = any(o.body["kind"] == "RuntimeClass" and o.body["metadata"]["name"] == "nvidia"
                        for o in stack.objects)
    files["templates/tests/gpu-smoke-test.yaml"] = smoke_test(runtime_class, smoke_image(plan))
    for component, objs in by_component(stack.objects):
        key = objs[0].values_key
        if any(o.values_key != key for o in objs):
            raise AssertionError(f"component {component} has objects under two values keys")
        text = "---\n".join(_document(o, plan) for o in objs)
        if key:                   # the component's toggle, around the whole file: off renders nothing
            text = f"{{{{- if .Values.{key}.enabled }}}}\n{text}{{{{- end }}}}\n"
        files[f"templates/{file_name(component)}"] = (
            f"{{{{- /* gpuop: the {component} component's objects, in install order. Do not edit; change the "
            "profile. */}}\n" + text)
    return files


_TEMPLATES: dict = {}


def _template_of(body: dict) -> str:
    """template(body), once per object of the variant cache (shared, never mutated: see
    outputs/manifests.rendered_text); the entry holds the object, keeping its id unique."""
    hit = _TEMPLATES.get(id(body))
    if hit is None or hit[0] is not body:
        if len(_TEMPLATES) > 100_000:
            _TEMPLATES.clear()
        hit = _TEMPLATES[id(body)] = (body, template(body))
    return hit[1]


def _document(obj, plan: StackPlan) -> str:
    """One object's document in its component's template, with the conditionals of that object alone."""
    text = _template_of(obj.body)
    for item, key in FOLLOWS.items():
        if key in plan.values and obj.body["kind"] == "DaemonSet":
            text = _only_if(text, item, key)
    if obj.body["kind"] == "Namespace" and obj.body["metadata"]["name"] == plan.namespace:
        # `helm install --create-namespace` creates it; two owners of one Namespace fail the install
        text = f"{{{{- if .Values.createNamespace }}}}\n{text}{{{{- end }}}}\n"
    return text


NOTES = """GPU stack {{ .Chart.Name }} {{ .Chart.Version }} (GPU Operator {{ .Chart.AppVersion }} operands) is
installed in namespace {{ .Release.Namespace }} as release {{ .Release.Name }}.

There is no operator: every DaemonSet below is the whole stack. Watch the rollout (a driver may take
~20 minutes per node to build and load):

  kubectl -n {{ .Release.Namespace }} get daemonsets
  kubectl -n {{ .Release.Namespace }} rollout status daemonset/nvidia-operator-validator

Then run the GPU smoke test (a CUDA vectorAdd pod that requests one GPU):

  helm test {{ .Release.Name }} -n {{ .Release.Namespace }}
{{- if not .Values.createNamespace }}

The chart did not create the namespace (createNamespace=false): create it with
`--create-namespace` and label it pod-security.kubernetes.io/enforce=privileged (the driver, toolkit
and validator are privileged).
{{- end }}
"""

# NVIDIA's CUDA vectorAdd sample (catalog releases.yaml smokeTest), the image NVIDIA's GPU Operator docs
# verify installs with; pulled from the chart's registry (a mirror of nvcr.io/nvidia), pinned by the
# digest lock when the profile has one, unless `smokeTestImage` names another.
SMOKE_IMAGE = "k8s/cuda-sample:vectoradd-cuda12.5.0"


def smoke_image(plan: StackPlan) -> str:
    """The smoke test image below the registry: <path>:<tag>[@digest]."""
    i = plan.smoke_test
    return SMOKE_IMAGE if i is None else i.key + (f"@{i.digest}" if i.digest else "")


def smoke_refs(plan: StackPlan) -> list[str]:
    """The smoke test image as the chart's defaults render it (images.txt)."""
    return [f"{plan.values['imageRegistry']}/{smoke_image(plan)}"]


def smoke_test(runtime_class: bool, image: str = SMOKE_IMAGE) -> str:
    """A `helm test` hook: one pod that requests one GPU and runs vectorAdd. Never part of a sync:
    the Argo CD Applications set skipTests and Flux runs tests only when asked (spec.test.enable)."""
    rc = "  runtimeClassName: nvidia\n" if runtime_class else ""
    return (
        "apiVersion: v1\n"
        "kind: Pod\n"
        "metadata:\n"
        # template values as JSON strings: a release namespace `n` or `on` is a bool to Helm's YAML 1.1 reader
        "  name: {{ print .Release.Name \"-gpu-smoke-test\" | toJson }}\n"
        "  namespace: {{ .Release.Namespace | toJson }}\n"
        "  labels:\n"
        "    app.kubernetes.io/managed-by: gpuop\n"
        "    app.kubernetes.io/component: gpu-smoke-test\n"
        "  annotations:\n"
        "    helm.sh/hook: test\n"
        "    helm.sh/hook-delete-policy: before-hook-creation,hook-succeeded\n"
        "spec:\n"
        "  restartPolicy: Never\n"
        "  automountServiceAccountToken: false\n"     # vectorAdd never calls the API
        + rc +
        "  nodeSelector:\n"
        "    nvidia.com/gpu.present: 'true'\n"
        "{{- with .Values.tolerations }}\n"
        "  tolerations:\n"
        "{{- toYaml . | nindent 2 }}\n"
        "{{- end }}\n"
        "{{- with .Values.imagePullSecrets }}\n"
        "  imagePullSecrets:\n"
        "{{- toYaml . | nindent 2 }}\n"
        "{{- end }}\n"
        "  securityContext:\n"
        "    runAsNonRoot: true\n"
        "    runAsUser: 10001\n"         # checkov CKV_K8S_40: a UID no host account has

        "    seccompProfile:\n"
        "      type: RuntimeDefault\n"
        "  containers:\n"
        "  - name: vectoradd\n"
        f"    image: {{{{ .Values.smokeTestImage | default (print .Values.imageRegistry \"/{image}\") | toJson }}}}\n"
        "    imagePullPolicy: {{ .Values.imagePullPolicy | toJson }}\n"
        "    securityContext:\n"
        "      allowPrivilegeEscalation: false\n"
        "      readOnlyRootFilesystem: true\n"
        "      capabilities:\n"
        "        drop: [ALL]\n"
        "    resources:\n"
        "      requests: {cpu: 100m, memory: 128Mi, nvidia.com/gpu: 1}\n"
        "      limits: {cpu: '1', memory: 512Mi, nvidia.com/gpu: 1}\n"
    )


def _type(prop: dict, defs: dict) -> str:
    if "$ref" in prop:
        return defs.get(prop["$ref"].rsplit("/", 1)[-1], {}).get("type", "object")
    if "anyOf" in prop:
        return " or ".join(sorted({_type(p, defs) for p in prop["anyOf"]}))
    if "enum" in prop:
        return " / ".join(json.dumps(v) for v in prop["enum"])
    return prop.get("type", "any")


def readme(plan: StackPlan, defaults: dict) -> str:
    """The chart's README.md: what it installs and every value, from values.schema.json."""
    schema = values_schema()
    defs = schema.get("$defs", {})
    rows = []
    for key, prop in schema["properties"].items():
        desc = prop.get("description") or defs.get(prop.get("$ref", "").rsplit("/", 1)[-1], {}).get("description", "")
        if "anyOf" in prop and not desc:
            refs = [p["$ref"].rsplit("/", 1)[-1] for p in prop["anyOf"] if "$ref" in p]
            desc = "; ".join(f"`{k}`: {v.get('description', '')}" for r in refs
                             for k, v in defs.get(r, {}).get("properties", {}).items())
        default = json.dumps(defaults[key], sort_keys=True) if key in defaults else "(not set)"
        rows.append(f"| `{key}` | {_type(prop, defs)} | `{default}` | {' '.join(desc.split()).replace('|', '/')} |")
    return "\n".join([
        f"# {plan.name}",
        "",
        f"The NVIDIA GPU stack of cluster `{plan.name}` (GPU Operator {plan.operator_version} operands, stack "
        f"release {plan.release}), compiled by gpuop from the cluster's profile. Generated: do not edit; change",
        "the profile and run `gpuop synth`.",
        "",
        "```sh",
        f"helm install {plan.name} . -n {plan.namespace} --create-namespace      # createNamespace=false (default)",
        f"helm test {plan.name} -n {plan.namespace}                               # GPU smoke test (vectorAdd, 1 GPU)",
        "```",
        "",
        "Argo CD and Flux install it with `createNamespace: true` (the objects gpuop writes beside the chart).",
        "The chart can also be a subchart: `global` is accepted and ignored.",
        "",
        "## Values",
        "",
        "From values.schema.json; defaults from values.yaml. Component keys (`enabled`, `resources`) exist",
        "only for the components the profile enables.",
        "",
        "| Key | Type | Default | Description |",
        "|---|---|---|---|",
        *rows,
        "",
    ])


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
        # an URL, not a file: Helm never fetches it (offline-safe), catalogs and Argo CD's UI show it
        "icon": ICON,
        "home": "https://docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest/index.html",
        "sources": ["https://github.com/NVIDIA/gpu-operator"],
        "keywords": ["gpu", "nvidia", "cuda", "gpuop"],
        "annotations": {"gpuop/release": plan.release, "gpuop/platform": plan.platform},
    })
