"""Every example cluster of profiles/ gets its health gate, its alerts, its dashboards and, exactly when its profile
enables them, its queues, in the folder and the chart its GitOps objects deliver (manifests/ and chart/ in stack
mode, the companion addons/ in operator mode): a pool the plan says has checks has a Job per check, every planned
pool's flavour is in the queue objects, the sidecar ConfigMap holds the dashboard file, and the PrometheusRule (where
the cluster wants one) carries the plain rule file's groups."""

from __future__ import annotations

import json

import pytest
import yaml

from conftest import REPO
from gpuop import catalog
from gpuop.plan.build import build_plan
from gpuop.profile.load import load_profile
from gpuop.validate.runner import validate

EXAMPLES = sorted(p for p in (REPO / "profiles").glob("*.yaml") if not p.stem.startswith("_"))


def _plan(path):
    cat = catalog.load()
    valid = validate(load_profile(path), cat)
    return valid.profile, build_plan(valid, cat)


def _docs(path) -> list[dict]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d] if path.is_file() else []


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_every_example_cluster_gets_its_gate_alerts_dashboards_and_queues_when_enabled(dist, path):
    profile, plan = _plan(path)
    out = dist / plan.name
    delivered = out / ("addons" if profile.spec.delivery.mode == "operator" else ".")
    manifests, templates = delivered / "manifests", delivered / "chart" / "templates"
    for name in ("16-dashboards.yaml", "18-health-gate.yaml"):
        assert (manifests / name).is_file() and (templates / name).is_file(), (plan.name, name)

    # the gate: a Job per check of every pool the plan gates, and nothing else
    assert plan.health_gate is not None and plan.health_gate.pools, plan.name
    jobs = {(j["metadata"]["labels"]["gpuop/pool"], j["metadata"]["labels"]["gpuop/check"])
            for j in _docs(manifests / "18-health-gate.yaml")}
    assert jobs == {(p.pool, c.slug) for p in plan.health_gate.pools for c in p.checks}
    # every pool is gated but those where no check can run: a DRA pool advertises no device plugin resource for a
    # CUDA sample, and without the standalone host engine there are no diagnostics (plan/health_gate.py)
    ungated = {c.pool for c in plan.capacity.pools} - {p.pool for p in plan.health_gate.pools}
    assert ungated == {c.pool for c in plan.capacity.pools if c.allocation == "dra" and not plan.dcgm}, plan.name

    # alerts: the plain rule file always; the PrometheusRule where the cluster wants one, with the same groups
    rules = yaml.safe_load((out / "alerts" / "gpu-alerts.rules.yaml").read_text())
    alerted = {r["labels"].get("pool") for g in rules["groups"] for r in g["rules"]} - {None}
    assert alerted == {c.pool for c in plan.capacity.pools}
    prometheus_rule = _docs(manifests / "15-gpu-alerts.yaml")
    assert bool(prometheus_rule) == plan.alerts.prometheus_rule
    if prometheus_rule:
        assert prometheus_rule[0]["spec"]["groups"] == rules["groups"]

    # dashboards: the JSON file and the sidecar ConfigMap holding the same text
    board = out / "dashboards" / f"{plan.name}-gpus.json"
    (cm,) = _docs(manifests / "16-dashboards.yaml")
    assert cm["data"][board.name] == board.read_text()
    assert json.loads(board.read_text())["panels"]

    # queues: exactly when enabled, with a flavour per planned one and a LocalQueue per namespace named
    queues = _docs(manifests / "17-queues.yaml")
    assert bool(queues) == bool(profile.spec.queues.enabled) == (plan.queues is not None)
    assert (templates / "17-queues.yaml").is_file() == bool(queues)
    if queues:
        kinds = {}
        for q in queues:
            kinds.setdefault(q["kind"], []).append(q)
        assert {f["metadata"]["name"] for f in kinds["ResourceFlavor"]} == {f.name for f in plan.queues.flavors}
        assert sorted(q["metadata"]["namespace"] for q in kinds["LocalQueue"]) == sorted(plan.queues.namespaces)
        assert [q["metadata"]["name"] for q in kinds["ClusterQueue"]] == [plan.queues.cluster_queue]


def test_the_examples_cover_both_delivery_modes_and_queues_on_and_off():
    plans = [_plan(p) for p in EXAMPLES]
    assert {pr.spec.delivery.mode for pr, _ in plans} == {"stack", "operator"}
    assert {pl.queues is not None for _, pl in plans} == {True, False}
