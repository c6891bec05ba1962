"""`gpuop report`: the delivery mode and the operator version a profile pins, fleet totals that stay numbers
(partial, saying which clusters they count) when a cluster has no node counts, and the page written outside
the output Argo CD and Flux apply; an older gpuop's dist/report/ trips neither validate nor the gate."""

from __future__ import annotations

import re
import shutil
import subprocess
import textwrap

import pytest

from conftest import REPO, run_gpuop

STACK = """
metadata: {name: east}
spec:
  platform: {type: kubernetes, version: "1.33"}
  os: ubuntu24.04
  nodePools:
    - {name: train, gpu: H100-SXM5-80GB, nodes: 2, nodeSelector: {node.kubernetes.io/instance-type: p5.48xlarge}}
"""
PINNED = """
metadata: {name: pinned}
spec:
  platform: {type: kubernetes, version: "1.33"}
  os: ubuntu24.04
  delivery: {mode: operator, operator: {version: v26.7.0, install: helm}}
  nodePools:
    - {name: infer, gpu: L40S, nodes: 3, nodeSelector: {node.kubernetes.io/instance-type: g6e.12xlarge}}
"""
UNSIZED = """
metadata: {name: unsized}
spec:
  platform: {type: kubernetes, version: "1.33"}
  os: ubuntu24.04
  nodePools:
    - {name: any, gpu: L4}
"""


def _compile(tmp_path):
    (tmp_path / "profiles").mkdir()
    for name, body in (("east", STACK), ("pinned", PINNED), ("unsized", UNSIZED)):
        (tmp_path / "profiles" / f"{name}.yaml").write_text(
            "apiVersion: gpuop/v1alpha1\nkind: ClusterProfile\n" + textwrap.dedent(body))
    shutil.copy(REPO / "gpuop.yaml", tmp_path / "gpuop.yaml")
    run_gpuop("synth", "--no-cache", cwd=tmp_path, check=True)
    return tmp_path


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    return _compile(tmp_path_factory.mktemp("report"))


def _text(html: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", html))


def test_report_shows_the_delivery_mode_and_the_pinned_operator_version(fleet):
    proc = run_gpuop("report", cwd=fleet, check=True)
    assert proc.stderr == f"gpuop: wrote {fleet / 'report' / 'index.html'}\n"
    html = (fleet / "report" / "index.html").read_text()
    section = html[html.index('id="c-pinned"'):html.index('id="c-unsized"')]
    assert 'delivery <span class="delivery">operator v26.7.0 (helm)</span>' in section
    east = html[html.index('id="c-east"'):html.index('id="c-pinned"')]
    assert 'delivery <span class="delivery">stack (operands of GPU Operator v26.7.0)</span>' in east
    fleet_table = html[html.index('id="fleet"'):html.index('id="fleet-total"')]
    assert _text(fleet_table).count("operator v26.7.0 (helm)") == 1


def test_fleet_totals_are_partial_and_say_which_clusters_they_count(fleet):
    run_gpuop("report", cwd=fleet, check=True)
    html = (fleet / "report" / "index.html").read_text()
    total = _text(html[html.index('id="fleet-total"'):html.index("</p>", html.index('id="fleet-total"'))])
    # east: 2 nodes x 8 H100; pinned: 3 nodes x 4 L40S; unsized: no node count
    assert "over 2 of 3 cluster(s); not counted, no node counts in their profile: unsized" in total
    assert re.search(r": 28 physical GPU\(s\)", total), total
    assert "nvidia.com/gpu: 28" in total and "?" not in total


def test_wide_tables_scroll_in_their_own_box(fleet):
    run_gpuop("report", cwd=fleet, check=True)
    html = (fleet / "report" / "index.html").read_text()
    assert html.count('<div class="scroll"><table') == 1 + 3          # the fleet table and each cluster's pools
    assert ".scroll{overflow-x:auto" in html and "position:sticky;left:0" in html


def test_the_report_is_never_written_into_the_output(fleet):
    run_gpuop("report", cwd=fleet, check=True)
    assert not (fleet / "dist" / "report").exists()
    proc = run_gpuop("report", "--to", "dist/report/index.html", cwd=fleet)
    assert (proc.returncode, proc.stderr) == (2, "dist/report/index.html: is inside the output folder dist, which "
                                                 "Argo CD and Flux apply and synth replaces; write the report "
                                                 "elsewhere (default: report/index.html)\n"
                                                 "gpuop: 1 error; nothing written\n")
    proc = run_gpuop("report", "--to", "../elsewhere.html", cwd=fleet)
    assert proc.returncode == 2 and "is outside the project" in proc.stderr
    assert not (fleet.parent / "elsewhere.html").exists() and not (fleet / "dist" / "report").exists()
    run_gpuop("report", "--to", "site/fleet.html", cwd=fleet, check=True)
    assert (fleet / "site" / "fleet.html").read_bytes() == (fleet / "report" / "index.html").read_bytes()


def _git(cwd, *args):
    subprocess.run(["git", "-c", "user.email=t@example.com", "-c", "user.name=t", *args], cwd=cwd, check=True,
                   capture_output=True)


@pytest.mark.slow
def test_an_older_gpuops_dist_report_trips_neither_validate_nor_the_gate(tmp_path):
    """Users of an older gpuop have dist/report/index.html committed: validate and the review gate accept the
    output, and the next synth removes the stale page (gpuop wrote it; no folder of dist/ is foreign)."""
    fleet = _compile(tmp_path)
    (fleet / "dist" / "report").mkdir()
    (fleet / "dist" / "report" / "index.html").write_text("<!DOCTYPE html><html>an old report</html>\n")
    _git(fleet, "init", "-q", "-b", "main")
    _git(fleet, "add", "-A")
    _git(fleet, "commit", "-qm", "fleet with an old report")
    assert run_gpuop("validate", "dist", cwd=fleet).returncode == 0
    gate = run_gpuop("check", "--against", "HEAD", cwd=fleet)
    assert gate.returncode == 0, gate.stderr
    run_gpuop("synth", cwd=fleet, check=True)
    assert not (fleet / "dist" / "report").exists()
