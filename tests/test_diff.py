"""`gpuop diff`: the objects and fields a change would touch, per cluster, with the chart version
change it implies, against an output folder or a git revision."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from conftest import run_gpuop


@pytest.fixture()
def project(workdir, tmp_path):
    w = tmp_path / "w"
    shutil.copytree(workdir / "profiles", w / "profiles")
    shutil.copy(workdir / "gpuop.yaml", w / "gpuop.yaml")
    run_gpuop("synth", "-o", "dist", cwd=w, check=True)
    return w


def edit(path, old, new):
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new))


def test_nothing_changed(project):
    out = run_gpuop("diff", cwd=project, check=True).stdout
    assert "chart" in out and "->" not in out and "~" not in out


def test_driver_version_change_names_the_driver_daemonset_and_image_only(project):
    edit(project / "profiles" / "prod-east.yaml", "containerRuntime: containerd",
         'containerRuntime: containerd\n  driver: {version: "595.91.07"}')
    out = run_gpuop("diff", cwd=project, check=True).stdout
    section = out.split("cluster prod-east: ")[1].split("\ncluster ")[0]
    assert section.splitlines() == [
        "chart 0.1.0 -> 0.2.0",
        "  ~ DaemonSet gpu-operator/nvidia-driver-daemonset",
        "      spec.template.spec.containers[nvidia-driver-ctr].image: "
        "nvcr.io/nvidia/driver:580.173.02-ubuntu24.04 -> nvcr.io/nvidia/driver:595.91.07-ubuntu24.04",
    ]
    assert "cluster lab-west: unchanged (chart 0.1.0)" in out


def test_toleration_change_names_every_daemonset_and_the_field(project):
    edit(project / "profiles" / "lab-west.yaml", "value: gpu, effect: NoSchedule}",
         "value: gpu-new, effect: NoSchedule}")
    out = run_gpuop("diff", cwd=project, check=True).stdout
    section = out.split("cluster lab-west: ")[1].split("\ncluster ")[0].splitlines()
    assert section[0] == "chart 0.1.0 -> 0.1.1"
    changed = [l for l in section if l.startswith("  ~ ")]
    fields = [l.strip() for l in section if l.startswith("      ")]
    daemonsets = [l for l in changed if l.startswith("  ~ DaemonSet ")]
    assert changed == daemonsets and len(daemonsets) >= 3
    assert set(fields) == {"spec.template.spec.tolerations[1].value: gpu -> gpu-new"}
    assert "cluster prod-east: unchanged (chart 0.1.0)" in out


def test_diff_against_a_git_revision(project):
    git = lambda *a: subprocess.run(["git", *a], cwd=project, check=True, capture_output=True)  # noqa: E731
    git("init", "-q")
    git("add", "-A")
    git("-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "compiled")
    edit(project / "profiles" / "prod-east.yaml", "containerRuntime: containerd",
         'containerRuntime: containerd\n  driver: {version: "595.91.07"}')
    run_gpuop("synth", "-o", "dist", cwd=project, check=True)      # dist/ now holds the new output
    out = run_gpuop("diff", "--against", "HEAD", cwd=project, check=True).stdout
    assert "cluster prod-east: chart 0.1.0 -> 0.2.0" in out
    assert "spec.template.spec.containers[nvidia-driver-ctr].image" in out
    bad = run_gpuop("diff", "--against", "no-such-ref", cwd=project)
    assert bad.returncode == 2 and "cannot read dist/ at git revision 'no-such-ref'" in bad.stderr
