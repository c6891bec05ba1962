"""The editor schema (schemas/profile.schema.json, what `# yaml-language-server: $schema=` points at).

It accepts every example profile and partial as an editor sees them, file by file (profiles with
`extends`, the partial `_base.yaml`), still refuses unknown fields and wrong values, and still
requires every field of a complete profile and of each list item. It is generated (`gpuop schema`).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import jsonschema
import pytest
from ruamel.yaml import YAML

from conftest import REPO

SCHEMA = REPO / "schemas" / "profile.schema.json"
PROFILES = sorted((REPO / "profiles").glob("*.yaml"))


@pytest.fixture(scope="module")
def validator() -> jsonschema.Draft202012Validator:
    schema = json.loads(SCHEMA.read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def load(path: Path) -> dict:
    return YAML(typ="safe").load(path.read_text())    # YAML 1.2, as editors read it


def errors(validator, doc: dict) -> list[tuple[str, str]]:
    return sorted((".".join(map(str, e.absolute_path)), e.message) for e in validator.iter_errors(doc))


def test_profiles_folder_has_partials_and_children():
    docs = {p.name: load(p) for p in PROFILES}
    assert "_base.yaml" in docs and "name" not in docs["_base.yaml"].get("metadata", {})
    assert [n for n, d in docs.items() if "extends" in d]          # the case the old schema refused


@pytest.mark.parametrize("path", PROFILES, ids=lambda p: p.name)
def test_every_example_profile_and_partial_validates(validator, path):
    assert errors(validator, load(path)) == []


def test_every_profile_points_editors_at_the_schema():
    for path in PROFILES:
        assert path.read_text().splitlines()[0] == "# yaml-language-server: $schema=../schemas/profile.schema.json"


def test_refuses_unknown_field_in_a_complete_profile(validator):
    doc = load(REPO / "profiles" / "full-stack.yaml")
    doc["spec"]["driverr"] = {"version": "580"}
    assert errors(validator, doc) == [("spec", "Additional properties are not allowed ('driverr' was unexpected)")]


def test_refuses_unknown_field_in_a_profile_with_extends(validator):
    doc = load(REPO / "profiles" / "prod-east.yaml")
    doc["spec"]["driver"] = {"versoin": "580"}
    doc["spec"]["nodePools"][0]["gpuModel"] = "H100"
    assert errors(validator, doc) == [
        ("spec.driver", "Additional properties are not allowed ('versoin' was unexpected)"),
        ("spec.nodePools.0", "Additional properties are not allowed ('gpuModel' was unexpected)"),
    ]


def test_refuses_unknown_top_level_field_in_a_partial(validator):
    doc = load(REPO / "profiles" / "_base.yaml")
    doc["extend"] = "other.yaml"
    assert errors(validator, doc) == [("", "Additional properties are not allowed ('extend' was unexpected)")]


def test_refuses_wrong_value_in_a_partial(validator):
    doc = load(REPO / "profiles" / "_base.yaml")
    doc["spec"]["platform"]["version"] = "v1.33"
    assert errors(validator, doc) == [("spec.platform.version", "'v1.33' does not match '^\\\\d+\\\\.\\\\d+$'")]


def test_complete_profile_still_requires_its_fields(validator):
    doc = load(REPO / "profiles" / "full-stack.yaml")
    del doc["spec"]["nodePools"]
    del doc["spec"]["platform"]["version"]
    assert errors(validator, doc) == [("spec", "'nodePools' is a required property"),
                                      ("spec.platform", "'version' is a required property")]


def test_child_list_items_stay_complete_because_lists_replace(validator):
    """`extends` replaces a list whole, so a child's node pool cannot leave its GPU to the parent."""
    doc = load(REPO / "profiles" / "prod-east.yaml")
    del doc["spec"]["nodePools"][0]["gpu"]
    assert errors(validator, doc) == [("spec.nodePools.0", "'gpu' is a required property")]


def test_partial_may_leave_out_what_a_child_supplies(validator):
    doc = load(REPO / "profiles" / "prod-east.yaml")
    partial = {"apiVersion": doc["apiVersion"], "kind": doc["kind"], "extends": "_base.yaml",
               "spec": {"driver": {"upgradePolicy": {"drain": True}}}}
    assert errors(validator, partial) == []
    named = copy.deepcopy(partial)
    del named["extends"]
    named["metadata"] = {"name": "alone"}            # a named profile without a parent is complete
    assert ("", "'spec' is a required property") not in errors(validator, named)
    assert ("spec", "'nodePools' is a required property") in errors(validator, named)


def test_committed_profile_schema_is_generated_from_the_models():
    from gpuop.kube.yamlio import dump_json
    from gpuop.profile.models import profile_json_schema

    assert SCHEMA.read_text() == dump_json(profile_json_schema()), "schemas/ is stale: run `make schema`"


# the profile fields of the health gate, the alerts, the dashboards, the queues, the XID policy and the licence
# policy, and the signing settings: (model, the definitions, the parent fields naming them)
DOCUMENTED = (
    ("profile", ("Alerts", "Dashboards", "DevicePluginHealth", "HealthGate", "Licensing", "LicensingConfig", "Queues",
                 "Taint"),
     (("ClusterSpec", ("alerts", "dashboards", "queues", "healthGate", "licensing")),
      ("NodePool", ("healthGate", "devicePluginHealth", "taints")),
      ("DevicePluginSettings", ("health",)), ("Driver", ("licensingConfig", "driverType")))),
    ("settings", ("Signing",), (("Settings", ("signing",)),)),
)


@pytest.mark.parametrize("which, defs, parents", DOCUMENTED, ids=[d[0] for d in DOCUMENTED])
def test_every_monitoring_queue_and_licence_field_says_what_omitting_it_does(which, defs, parents):
    from gpuop.profile.settings import Settings

    if which == "profile":
        schema = json.loads((REPO / "schemas" / "profile.schema.json").read_text())
    else:
        schema = Settings.model_json_schema()
    found = []
    for name in defs:
        d = schema["$defs"][name]
        found += [f"{name}.{f}" for f, p in d["properties"].items()
                  if f not in d.get("required", ()) and "Omitted" not in p.get("description", "")]
    for parent, fields in parents:
        props = (schema["$defs"].get(parent) or schema)["properties"]
        found += [f"{parent}.{f}" for f in fields if "Omitted" not in props[f].get("description", "")]
    assert found == []
