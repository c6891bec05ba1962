"""Helpers (not tests): build a plan from an in-memory profile, through the real load/validate/plan."""

from __future__ import annotations

import tempfile
from pathlib import Path

import yaml

from gpuop import catalog
from gpuop.plan.build import build_plan
from gpuop.profile.load import load_profile
from gpuop.profile.load import merge
from gpuop.validate.runner import validate

BASE = {"apiVersion": "gpuop/v1alpha1", "kind": "ClusterProfile", "metadata": {"name": "t"},
        "spec": {"platform": {"type": "kubernetes", "version": "1.33"}, "os": "ubuntu24.04",
                 "nodePools": [{"name": "a", "gpu": "H100-SXM5-80GB"}]}}


def plan_for(spec_overrides: dict):
    doc = merge(BASE, {"spec": spec_overrides})
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "t.yaml"
        p.write_text(yaml.safe_dump(doc))
        return build_plan(validate(load_profile(p)), catalog.load())
