"""Argo CD's generator lane: the Applications gpuop's ApplicationSets would create, computed from the output
as committed, for the rehearsal API server to accept or refuse (with Argo CD's own CRDs).

Argo CD's application controller could not be built here (docs/gitops-rehearsal.md says why, with the
error), so this computes what its ApplicationSet controller would: for each ApplicationSet, its git `files`
generators matched against the committed tree (one parameter set per file: the file's JSON object, plus
`path` as applicationset/generators/git.go adds it), the template rendered with those parameters the way
`goTemplate: true` renders it (every string field through Go's text/template, `missingkey=error`), then the
`templatePatch` rendered and merged in.

Only the part of Go's template language gpuop's ApplicationSets use is understood: `{{.key}}` (nested
`.a.b` too), `{{if .key}}`, `{{if eq .key "text"}}`, `{{else}}`, `{{end}}` and the `{{-` / `-}}` trim markers.
Anything else is refused (TemplateError names it) rather than guessed, so a new construct in gpuop's
output fails this lane until it is understood here.
"""

from __future__ import annotations

import copy
import fnmatch
import json
import re
from pathlib import Path, PurePosixPath

import yaml


class TemplateError(Exception):
    """A template this subset does not understand, or a key missing under missingkey=error."""


_ACTION = re.compile(r"\{\{(-\s*)?(.*?)(\s*-)?\}\}", re.S)
_STRING = r'"((?:[^"\\]|\\.)*)"'


def _lookup(params: dict, ref: str) -> object:
    """`.a.b` in the parameters; missingkey=error: an absent key is an error, as Argo CD's option makes it."""
    value: object = params
    for part in ref.lstrip(".").split("."):
        if not isinstance(value, dict) or part not in value:
            raise TemplateError(f"map has no entry for key {part!r} (in {ref})")
        value = value[part]
    return value


def _text(value: object) -> str:
    """What text/template prints for a value (strings as-is, booleans and numbers as Go prints them)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "<no value>"
    if isinstance(value, (dict, list)):
        raise TemplateError(f"a map or list printed into a string ({json.dumps(value)[:60]})")
    return str(value)


def _condition(expr: str, params: dict) -> bool:
    if m := re.fullmatch(r"eq\s+(\.[\w.]+)\s+" + _STRING, expr):
        return _text(_lookup(params, m[1])) == json.loads(f'"{m[2]}"')
    if re.fullmatch(r"\.[\w.]+", expr):
        return bool(_lookup(params, expr))
    raise TemplateError(f"condition {expr!r} is outside the template subset this lane understands")


def render(template: str, params: dict) -> str:
    """One string rendered with these parameters (the subset above)."""
    pieces: list[tuple[str, str]] = []       # ("text", s) | ("action", expr)
    pos = 0
    for m in _ACTION.finditer(template):
        text = template[pos:m.start()]
        if m[1]:
            text = text.rstrip()
        pieces.append(("text", text))
        pieces.append(("action", m[2].strip()))
        pos = m.end()
        if m[3]:
            rest = template[pos:]
            pos += len(rest) - len(rest.lstrip())
    pieces.append(("text", template[pos:]))
    out: list[str] = []
    stack: list[list[bool]] = []             # per open if: [this branch taken, some branch taken]
    for kind, s in pieces:
        active = all(frame[0] for frame in stack)
        if kind == "text":
            if active:
                out.append(s)
        elif s.startswith("if "):
            taken = active and _condition(s[3:].strip(), params)
            stack.append([taken, taken])
        elif s == "else":
            if not stack:
                raise TemplateError("{{else}} without {{if}}")
            stack[-1] = [not stack[-1][1], True]
        elif s == "end":
            if not stack:
                raise TemplateError("{{end}} without {{if}}")
            stack.pop()
        elif re.fullmatch(r"\.[\w.]+", s):
            if active:
                out.append(_text(_lookup(params, s)))
        else:
            raise TemplateError(f"action {{{{{s}}}}} is outside the template subset this lane understands")
    if stack:
        raise TemplateError("{{if}} without {{end}}")
    return "".join(out)


def _render_tree(node: object, params: dict) -> object:
    """Every string of the template rendered; map keys too (text/template renders the whole document's
    strings, Argo CD's RenderTemplateParams walks the Application and renders each string field)."""
    if isinstance(node, dict):
        return {render(k, params): _render_tree(v, params) for k, v in node.items()}
    if isinstance(node, list):
        return [_render_tree(v, params) for v in node]
    if isinstance(node, str):
        return render(node, params)
    return node


def _merge(base: dict, patch: dict) -> dict:
    """The templatePatch merged in: maps merged key by key, anything else (lists included: the Application
    type's lists carry no merge keys) replaced."""
    out = dict(base)
    for k, v in patch.items():
        out[k] = _merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def _normalized(name: str) -> str:
    """basenameNormalized / filenameNormalized: a name fit for a Kubernetes name (the generator's rule)."""
    return re.sub(r"[^a-zA-Z0-9-]", "-", name).lower()


def _path_params(rel: str) -> dict:
    """The `path` parameters Argo CD's git files generator adds (goTemplate form)."""
    p = PurePosixPath(rel)
    folder = p.parent
    normalize = _normalized
    return {"path": str(folder), "basename": folder.name, "filename": p.name,
            "basenameNormalized": normalize(folder.name), "filenameNormalized": normalize(p.name),
            "segments": list(folder.parts)}


def generated(appset: dict, tree: Path) -> list[dict]:
    """The Applications this ApplicationSet creates from the repository work tree `tree` (its git files
    generators; any other generator is refused), sorted by name."""
    spec = appset["spec"]
    if not spec.get("goTemplate"):
        raise TemplateError(f"ApplicationSet {appset['metadata']['name']}: only goTemplate: true is rendered here")
    apps = []
    for gen in spec["generators"]:
        if set(gen) != {"git"} or set(gen["git"]) - {"files", "repoURL", "revision"}:
            raise TemplateError(f"generator {sorted(gen)} is outside this lane (git files generators only)")
        files = sorted({f.relative_to(tree).as_posix() for entry in gen["git"]["files"]
                        for f in tree.glob(entry["path"]) if f.is_file()
                        and fnmatch.fnmatchcase(f.relative_to(tree).as_posix(), entry["path"])})
        for rel in files:
            params = {**json.loads((tree / rel).read_text()), "path": _path_params(rel)}
            app = _render_tree(copy.deepcopy(spec["template"]), params)
            if spec.get("templatePatch"):
                app = _merge(app, yaml.safe_load(render(spec["templatePatch"], params)) or {})
            app["metadata"].setdefault("namespace", appset["metadata"]["namespace"])
            apps.append({"apiVersion": "argoproj.io/v1alpha1", "kind": "Application", **app})
    return sorted(apps, key=lambda a: a["metadata"]["name"])
