"""`gpuop diff`: the objects and fields a change would touch, per cluster, with the chart version
change it implies, against an output folder or a git revision."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from conftest import run_gpuop

pytestmark = pytest.mark.slow       # each test compiles a project, 5-15 s (`make test-fast` leaves these out)


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


def section(out: str, name: str) -> list[str]:
    """The lines of one cluster's section: its head (without "cluster NAME: ") and its changes."""
    lines = out.splitlines()
    start = next(i for i, l in enumerate(lines) if l.startswith(f"cluster {name}: "))
    end = next((i for i in range(start + 1, len(lines)) if not lines[i].startswith(" ")), len(lines))
    return [lines[start].removeprefix(f"cluster {name}: ")] + lines[start + 1:end]


def object_fields(lines: list[str]) -> list[str]:
    """The field lines under rendered objects ("  ~ Kind ns/name"), not under files."""
    out, inside = [], False
    for l in lines:
        if l.startswith("  "):
            if not l.startswith("      "):
                inside = l.startswith("  ~ ") and " " in l[4:]
            elif inside:
                out.append(l.strip())
    return out


def test_nothing_changed(project):
    out = run_gpuop("diff", cwd=project, check=True).stdout
    assert "chart" in out and "->" not in out and "~" not in out
    assert out.splitlines()[-1] == "fleet: unchanged"


def test_driver_version_change_names_the_driver_daemonset_and_image_only(project):
    edit(project / "profiles" / "prod-east.yaml", "containerRuntime: containerd",
         'containerRuntime: containerd\n  driver: {version: "595.91.07"}')
    out = run_gpuop("diff", cwd=project, check=True).stdout
    lines = section(out, "prod-east")
    assert lines[0] == "chart 0.1.0 -> 0.2.0"
    # the one object change, marked destructive with the effect it causes, listed first
    assert [l for l in lines if l.startswith(("  ~ ", "  !! ~ ")) and " " in l.split("~ ", 1)[1]] == [
        "  !! ~ DaemonSet gpu-operator/nvidia-driver-daemonset  (driver-reinstall)"]
    assert out.startswith("DESTRUCTIVE: 1 effect(s) interrupt GPU workloads or delete things on clusters\n"
                          "  !! cluster prod-east: driver-reinstall: pool train: driver reinstall "
                          "(580.173.02-ubuntu24.04 -> 595.91.07-ubuntu24.04)")
    assert ("      spec.template.spec.containers[nvidia-driver-ctr].image: "
            "nvcr.io/nvidia/driver:580.173.02-ubuntu24.04 -> nvcr.io/nvidia/driver:595.91.07-ubuntu24.04") in lines
    # every file synth rewrites is listed: the chart's version and the driver's template
    assert lines[lines.index("  ~ chart/Chart.yaml") + 1] == "      version: 0.1.0 -> 0.2.0"
    template = lines.index("  ~ chart/templates/03-driver.yaml")      # one template per component
    assert lines[template + 1:template + 3] == ["      ~ DaemonSet gpu-operator/nvidia-driver-daemonset", "  ~ images.txt"]
    assert "cluster lab-west: unchanged (chart 0.1.0)" in out
    fleet = out.split("\nfleet:\n")[1].splitlines()
    assert "  + charts/prod-east-0.2.0.tgz" in fleet and "  ~ versions.lock.json" in fleet


def test_toleration_change_names_every_daemonset_and_the_field(project):
    edit(project / "profiles" / "lab-west.yaml", "value: gpu, effect: NoSchedule}",
         "value: gpu-new, effect: NoSchedule}")
    out = run_gpuop("diff", cwd=project, check=True).stdout
    section_ = section(out, "lab-west")
    assert section_[0] == "chart 0.1.0 -> 0.1.1"
    changed = [l for l in section_ if l.startswith("  ~ ") and " " in l[4:]]      # objects, not files
    fields = object_fields(section_)
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


def git_in(project):
    return lambda *a: subprocess.run(["git", *a], cwd=project, check=True, capture_output=True)


def test_nfd_mode_existing_is_listed_first_as_nfd_uninstalled(project):
    """`nfd: {mode: existing}` is not "unchanged": the next synth deletes the NFD Application and
    HelmRelease, which uninstalls NFD, so the diff lists that first."""
    edit(project / "profiles" / "full-stack.yaml", "nfd: {mode: deploy}", "nfd: {mode: existing}")
    proc = run_gpuop("diff", "--exit-code", cwd=project)
    assert proc.returncode == 3 and "internal error" not in proc.stderr, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[:5] == [
        "DESTRUCTIVE: 4 effect(s) interrupt GPU workloads or delete things on clusters",
        "  !! cluster full-stack: gitops-deletion: NFD uninstalled: Application gpuop-full-stack-nfd is deleted "
        "(argocd/nfd-application.yaml) (10 node(s))",
        "  !! cluster full-stack: gitops-deletion: NFD uninstalled: HelmRelease gpuop-full-stack-nfd is deleted "
        "(flux-overlay/nfd/helmrelease.yaml) (10 node(s))",
        "  !! cluster full-stack: gitops-deletion: NFD uninstalled: HelmRelease gpuop-full-stack-nfd is deleted "
        "(flux/nfd-helmrelease.yaml) (10 node(s))",
        "  !! cluster full-stack: gitops-deletion: NFD uninstalled: Kustomization gpuop-full-stack-nfd is deleted "
        "(flux-overlay/nfd-kustomization.yaml) (10 node(s))",
    ]
    cluster = section(proc.stdout, "full-stack")
    assert "  !! - flux/nfd-helmrelease.yaml" in cluster and "  - flux/nfd-helmrepository.yaml" in cluster
    assert cluster[0] == "chart 0.1.0 (version unchanged)"


def test_label_change_shows_in_the_gitops_objects(project):
    """A label change is a change, though labels live only on the Argo CD / Flux objects."""
    edit(project / "profiles" / "prod-east.yaml", "environment: production", "environment: staging")
    out = run_gpuop("diff", cwd=project, check=True).stdout
    lines = section(out, "prod-east")
    assert lines[0] == "chart 0.1.0 (version unchanged)"
    for f in ("argocd/application.yaml", "flux/helmrelease.yaml", "flux-overlay/stack-kustomization.yaml"):
        i = lines.index(f"  ~ {f}")
        assert "      metadata.labels.environment: production -> staging" in lines[i + 1:i + 4], f
    assert "DESTRUCTIVE" not in out


def test_exit_code_is_0_without_changes_and_3_with_changes(project):
    assert run_gpuop("diff", "--exit-code", cwd=project).returncode == 0
    edit(project / "profiles" / "prod-east.yaml", "environment: production", "environment: staging")
    proc = run_gpuop("diff", "--exit-code", cwd=project)
    assert proc.returncode == 3 and "internal error" not in proc.stderr, proc.stderr
    assert run_gpuop("diff", cwd=project).returncode == 0          # without the flag: 0 either way


def test_removed_profile_is_destructive_and_leaves_the_applicationset(project):
    (project / "profiles" / "lab-west.yaml").unlink()
    proc = run_gpuop("diff", "--exit-code", cwd=project)
    assert proc.returncode == 3 and "internal error" not in proc.stderr, proc.stderr
    assert proc.stdout.splitlines()[:2] == [
        "DESTRUCTIVE: 1 effect(s) interrupt GPU workloads or delete things on clusters",
        "  !! cluster lab-west: removal: cluster leaves the output: Argo CD / Flux delete its GPU stack; the driver "
        "is unloaded and GPU pods fail on every node (12 node(s), 1 wave(s))"]
    assert "cluster lab-west: removed (chart 0.1.0 and every object deleted)" in proc.stdout


def test_cluster_no_longer_matched_by_the_applicationset_generator_is_destructive():
    """A cluster that stays in the output but that the ApplicationSet's git files generator no longer
    yields (e.g. its parameter file moved) is deleted by Argo CD all the same."""
    from gpuop.ops.diff import diff_trees, render
    from gpuop.kube.yamlio import dump

    def tree(gen_path):
        appset = {"apiVersion": "argoproj.io/v1alpha1", "kind": "ApplicationSet",
                  "metadata": {"name": "gpuop-fleet", "namespace": "argocd"},
                  "spec": {"generators": [{"git": {"repoURL": "r", "revision": "main", "files": [{"path": gen_path}]}}]}}
        return {"index.json": b'{"clusters": [{"name": "a", "chartVersion": "0.1.0"}]}',
                "fleet/argocd/applicationset.yaml": dump(appset).encode(),
                "a/argocd/cluster.json": b'{"name": "a"}'}

    out = render(diff_trees(tree("dist/*/argocd/cluster.json"), tree("dist/*/fleet/cluster.json")))
    assert out.splitlines()[:2] == [
        "DESTRUCTIVE: 1 change(s) delete things on clusters",
        "  !! cluster a: cluster a leaves the ApplicationSet: Argo CD deletes its Application and GPU stack"]


def test_crd_and_namespace_deletions_are_destructive():
    from gpuop.ops.diff import diff_trees, render
    from gpuop.kube.yamlio import dump

    crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": {"name": "x.y.z"}}
    ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "gpu"}}
    index = b'{"clusters": [{"name": "a", "chartVersion": "0.1.0"}]}'
    old = {"index.json": index, "a/manifests/crd.yaml": dump(crd).encode(), "a/manifests/ns.yaml": dump(ns).encode()}
    out = render(diff_trees(old, {"index.json": index}))
    assert out.splitlines()[:3] == [
        "DESTRUCTIVE: 2 change(s) delete things on clusters",
        "  !! cluster a: CRD deleted: every custom resource of this kind is deleted with it",
        "  !! cluster a: Namespace deleted: everything in it is deleted"]
    assert "  !! - CustomResourceDefinition x.y.z" in out and "  !! - Namespace gpu" in out


def test_new_project_without_output_says_everything_is_new(workdir, tmp_path):
    w = tmp_path / "fresh"
    shutil.copytree(workdir / "profiles", w / "profiles")
    shutil.copy(workdir / "gpuop.yaml", w / "gpuop.yaml")
    proc = run_gpuop("diff", "--exit-code", cwd=w)
    assert proc.returncode == 3 and "internal error" not in proc.stderr, proc.stderr
    assert "gpuop: dist does not exist yet: everything is new" in proc.stderr
    assert "cluster prod-east: new, chart 0.1.0" in proc.stdout
    assert not (w / "dist").exists()


def test_output_not_in_git_yet_compares_against_the_folder(project):
    git = git_in(project)
    git("init", "-q")                                      # a repository without a commit
    proc = run_gpuop("diff", "--against", "HEAD", "--exit-code", cwd=project)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.strip() == "gpuop: dist/ is not in git at HEAD yet: comparing against the folder dist"
    git("add", "profiles", "gpuop.yaml")                   # committed, but dist/ not yet
    git("-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "profiles only")
    proc = run_gpuop("diff", "--against", "HEAD", "--exit-code", cwd=project)
    assert proc.returncode == 0, proc.stderr
    assert "not in git at HEAD yet: comparing against the folder dist" in proc.stderr


def test_against_refuses_an_option_and_git_never_sees_it(project):
    """`gpuop diff --against=--output=victim.txt` is refused: git never sees it as an option (it would
    truncate victim.txt)."""
    git = git_in(project)
    git("init", "-q")
    git("add", "-A")
    git("-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "compiled")
    victim = project / "victim.txt"
    victim.write_text("keep me\n")
    proc = run_gpuop("diff", "--against=--output=victim.txt", cwd=project)
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == [
        "--against: '--output=victim.txt' is neither a folder nor a git revision: a revision cannot start with '-'",
        "gpuop: 1 error; nothing written"]
    assert victim.read_text() == "keep me\n"
    proc = run_gpuop("diff", "--against", "HEAD..main", cwd=project)
    assert proc.returncode == 2 and "'HEAD..main' is neither a folder nor a git revision" in proc.stderr


def test_revision_with_options_after_it_stays_a_revision(project, monkeypatch):
    """Every git call separates options from the revision and the path (`--end-of-options`, `--`)."""
    from gpuop.ops import diff

    calls = []
    real = diff._git
    monkeypatch.setattr(diff, "_git", lambda *a: calls.append(a) or real(*a))
    monkeypatch.chdir(project)
    git = git_in(project)
    git("init", "-q")
    git("add", "-A")
    git("-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "compiled")
    tree = diff.tree_from_git("HEAD", "dist")
    assert "index.json" in tree
    for call in calls[1:]:
        assert "--end-of-options" in call or "--" in call, call


def test_a_component_template_names_the_objects_changed_added_and_deleted_inside():
    """A chart template holds a whole component; the diff names the documents that changed."""
    from gpuop.ops.diff import diff_trees, render

    def doc(kind, name, extra=""):
        return f"apiVersion: v1\nkind: {kind}\nmetadata:\n  labels:\n    name: x\n  name: {name}\n  namespace: ns\n{extra}"

    def tree(*docs):
        return {"index.json": b'{"clusters": [{"name": "c", "chartVersion": "0.1.0"}]}',
                "c/chart/templates/03-driver.yaml": ("{{- if .Values.driver.enabled }}\n" + "---\n".join(docs)
                                                     + "{{- end }}\n").encode()}

    old = tree(doc("ServiceAccount", "a"), doc("ConfigMap", "b", "data: {k: '1'}\n"), doc("Role", "gone"))
    new = tree(doc("ServiceAccount", "a"), doc("ConfigMap", "b", "data: {k: '2'}\n"), doc("DaemonSet", "d"))
    lines = render(diff_trees(old, new)).splitlines()
    i = lines.index("  ~ chart/templates/03-driver.yaml")
    assert lines[i + 1:i + 4] == ["      ~ ConfigMap ns/b", "      + DaemonSet ns/d", "      - Role ns/gone"]


def test_diff_against_a_folder_outside_the_project(project, tmp_path):
    """A CI job compares with the output of another job (an artifact downloaded beside the checkout): a folder
    anywhere is read, by an absolute or a relative path."""
    artifact = tmp_path / "artifact" / "dist"
    shutil.copytree(project / "dist", artifact)
    edit(project / "profiles" / "lab-west.yaml", "value: gpu, effect: NoSchedule}", "value: gpu-new, effect: NoSchedule}")
    run_gpuop("synth", "-o", "dist", cwd=project, check=True)      # dist/ now holds the change; the artifact not
    for against in (str(artifact), "../artifact/dist"):
        proc = run_gpuop("diff", "--against", against, "--exit-code", cwd=project)
        assert proc.returncode == 3, proc.stderr
        assert section(proc.stdout, "lab-west")[0] == "chart 0.1.0 -> 0.1.1"
        assert "cluster prod-east: unchanged (chart 0.1.0)" in proc.stdout


def test_against_refuses_a_folder_that_is_not_gpuop_output_wherever_it_is(project, tmp_path):
    other = tmp_path / "site"                       # another tool's folder, with an index.json of its own
    other.mkdir()
    (other / "index.json").write_text('{"kind": "SearchIndex", "pages": []}\n')
    empty = tmp_path / "empty"
    empty.mkdir()
    for folder, why in ((other, "expected kind: Index"), (empty, "cannot read: No such file or directory")):
        proc = run_gpuop("diff", "--against", str(folder), cwd=project)
        assert proc.returncode == 2, proc.stderr
        assert proc.stderr.splitlines() == [
            f"{folder}: not a gpuop output folder (its index.json: {why}); --against takes a folder gpuop synth "
            "wrote, or a git revision", "gpuop: 1 error; nothing written"]


def test_against_never_follows_a_link_in_the_folder(project, tmp_path):
    """An artifact is untrusted: a link in it to a file elsewhere is refused, and the file is never read."""
    secret = tmp_path / "secret.txt"
    secret.write_text("token: do-not-print\n")
    artifact = tmp_path / "artifact"
    shutil.copytree(project / "dist", artifact)
    images = next(artifact.glob("*/images.txt"))
    images.unlink()
    images.symlink_to(secret)
    proc = run_gpuop("diff", "--against", str(artifact), cwd=project)
    assert proc.returncode == 2, proc.stderr
    rel = images.relative_to(artifact)
    assert proc.stderr.splitlines()[0] == (f"{artifact}/{rel}: is a symlink, not a file of a gpuop output folder; "
                                           "links are not followed")
    assert "do-not-print" not in proc.stdout + proc.stderr


def test_queue_quota_and_dashboard_changes_are_shown(project):
    # one more batch node: the ClusterQueue's quota of the batch flavor, the dashboard's planned series
    edit(project / "profiles" / "mig-sharing.yaml", "    - name: batch\n      nodes: 4\n",
         "    - name: batch\n      nodes: 5\n")
    out = run_gpuop("diff", cwd=project, check=True).stdout
    lines = section(out, "mig-sharing")
    assert "      ~ ClusterQueue gpus" in lines
    assert "  ~ dashboards/mig-sharing-gpus.json" in lines
    assert "      spec.resourceGroups[0].flavors[batch].resources[nvidia.com/gpu].nominalQuota: 64 -> 80" in lines, lines
    fleet = out.split("\nfleet:\n")[1].splitlines()
    assert "  ~ fleet/dashboards/fleet-gpus.json" in fleet
