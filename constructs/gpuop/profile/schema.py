"""The editor schema (schemas/profile.schema.json): the profile models' JSON Schema, made to accept partials.

pydantic's schema of `ClusterProfile` describes a complete profile. An editor checks each file on
its own, so a profile with `extends: _base.yaml` (its parent supplies spec.platform, spec.os, ...)
and the partial `_base.yaml` itself (no metadata.name) would show red. `editor_schema` keeps the
complete schema and adds a partial variant of it, picked per document:

- a document with `extends`, or without `metadata.name` (a partial: every compiled profile names its
  cluster), is checked as a partial: no field is required along the mappings that `extends` merges
  key by key, since the parent may supply it; inside a list item every required field stays required,
  because a child's list replaces the parent's whole (profile/load.py `merge`);
- any other document is checked as a complete profile.

Both variants keep `additionalProperties: false` and every type, pattern and bound, so an unknown or
misspelled field is red in either. What an editor cannot see (the merged result, catalog facts) is
`gpuop validate`'s job. Pure dict transforms: this module imports nothing of gpuop.
"""

from __future__ import annotations

import copy

DIALECT = "https://json-schema.org/draft/2020-12/schema"
PARTIAL_SUFFIX = "Partial"
# Partial: the document extends a parent, or names no cluster (metadata.name absent).
IS_PARTIAL = {"anyOf": [
    {"required": ["extends"]},
    {"not": {"required": ["metadata"], "properties": {"metadata": {"required": ["name"]}}}},
]}
DESCRIPTION = ("A gpuop cluster profile (gpuop/v1alpha1 ClusterProfile). A document with `extends` or without "
               "metadata.name is a partial: fields its parent may supply are not required. `gpuop validate` "
               "checks the merged profile.")


def editor_schema(complete: dict) -> dict:
    """`complete`: the JSON Schema of a complete profile (root object + `$defs`). Returns the schema
    that checks complete profiles as before and partial ones without the mergeable `required`s."""
    complete = copy.deepcopy(complete)
    defs = complete.pop("$defs", {})
    partial_defs: dict[str, dict] = {}

    def partial_ref(ref: str) -> str:
        name = ref.rsplit("/", 1)[1]
        pname = name + PARTIAL_SUFFIX
        if pname not in partial_defs:
            partial_defs[pname] = {}                     # placeholder: recursive models terminate
            partial_defs[pname] = relax(defs[name])
        return f"#/$defs/{pname}"

    def relax(node):
        """A schema at a position `extends` merges key by key: drop `required`, relax what it nests."""
        if not isinstance(node, dict):
            return node
        out = {}
        for key, value in node.items():
            if key == "required":
                continue
            if key == "$ref":
                out[key] = partial_ref(value)
            elif key == "properties":
                out[key] = {name: relax(sub) for name, sub in value.items()}
            elif key in ("anyOf", "oneOf", "allOf"):
                out[key] = [relax(sub) for sub in value]
            elif key == "additionalProperties" and isinstance(value, dict):
                out[key] = relax(value)                  # map values merge key by key too
            else:
                out[key] = value                         # items: a list replaces the parent's whole
        return out

    partial_root = relax(complete)
    title = complete.get("title", "ClusterProfile")
    return {
        "$schema": DIALECT,
        "title": title,
        "description": DESCRIPTION,
        "type": "object",
        "if": IS_PARTIAL,
        "then": {"$ref": f"#/$defs/{title}{PARTIAL_SUFFIX}"},
        "else": {"$ref": f"#/$defs/{title}"},
        "$defs": dict(sorted({**defs, **partial_defs, title: complete, title + PARTIAL_SUFFIX: partial_root}.items())),
    }
