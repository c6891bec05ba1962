"""A catalog change selects exactly the clusters whose compiled output it changes.

Each case edits one catalog data file (one entry of one kind) in a copy of the gpuop package, then
- selects, as the review gate does from a fresh clone, the clusters whose recorded inputs differ from the
  base output's provenance (pipeline/gate.current_records: the catalog facts each cluster's compile read,
  read again from the edited catalog, no compile);
- compiles every profile with the edited catalog into a fresh folder (no cache) and compares each
  cluster's folder bytes and index entry with the base output's.
The selection must never miss a cluster whose output changed (soundness), and must be exactly those
clusters (precision), except where the module's text says a superset is the price (adding an entry to a
collection a compile scans).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SELECT = """
import json, sys
from pathlib import Path
from gpuop.outputs.fleet import reads_table
from gpuop.pipeline import gate
from gpuop.profile.settings import load_settings
doc = json.loads(Path(sys.argv[1]).read_text())
base = {c["name"]: c for c in doc["clusters"]}
current = gate.current_records([Path("profiles")], load_settings(Path("gpuop.yaml")), base, reads=reads_table(doc))
print(json.dumps(sorted(n for n, (_, r) in current.items() if r["inputs"] != base[n]["provenance"]["inputs"])))
"""

H100 = ('  - name: H100-SXM5-80GB\n    architecture: hopper\n    memoryGiB: 80\n    pciDeviceIds: ["0x233010DE"]\n'
        '    migCapable: true\n    migFamily: F8-80GB\n    openKernelModulesRequired: false\n    minDriverVersion: null\n'
        '    source: "FACTS.md §3, §4.1"\n')
K3S = "      socket: /run/k3s/containerd/containerd.sock\n      configSource: /var/lib/rancher/k3s/agent/etc/containerd/config.toml"

# (data file, text replaced, replacement, whether some output changes): each one entry of one kind; the
# replaced text occurs once. The selection is exactly the clusters whose output changes.
EXACT = {
    "gpu model, a field no compile reads (gpus.yaml)": ("gpus.yaml", H100, H100.replace("memoryGiB: 80", "memoryGiB: 81"),
                                                        False),
    "gpu model, its source text (gpus.yaml)": ("gpus.yaml", H100, H100.replace("§3, §4.1", "§3 and §4.1"), False),
    # read by the device plugin health rules only (their warnings), never by a compile's output
    "XID catalog entry (xids.yaml)": ("xids.yaml", 'description: "GPU has fallen off the bus"',
                                      'description: "GPU fell off the bus"', False),
    "stack release component (releases.yaml)": (
        "releases.yaml", "version: 4.6.0-4.8.3-distroless}", "version: 4.6.0-4.8.4-distroless}", True),
    "stack release os entry no cluster runs (releases.yaml)": (
        "releases.yaml", 'ubuntu22.04: {tag: ubuntu22.04, platform: kubernetes, kubernetes: ["1.33"',
        'ubuntu22.04: {tag: ubuntu22.04-lts, platform: kubernetes, kubernetes: ["1.33"', False),
    "distribution (distributions.yaml)": ("distributions.yaml", K3S, K3S.replace("containerd.sock", "containerd-gpu.sock"),
                                          True),
    "DRA driver version (dra.yaml)": ("dra.yaml", "tag: v0.5.0}", "tag: v0.5.0-1}", True),
    "operator chart defaults (operator-chart/v26.7.0.yaml)": (
        "operator-chart/v26.7.0.yaml", "psa:\n  enabled: false", "psa:\n  enabled: true", False),
    "driver sidecars (driver-extras.yaml)": ("driver-extras.yaml", 'version: "2.29.4"', 'version: "2.29.5"', True),
    "instance type (instances.yaml)": ("instances.yaml", "p5.48xlarge: {gpu: H100-SXM5-80GB, gpus: 8}",
                                       "p5.48xlarge: {gpu: H100-SXM5-80GB, gpus: 4}", True),
    "known issue text (known-issues.yaml)": ("known-issues.yaml", "the kernel state is not cleared",
                                             "the kernel module state is not cleared", False),
}
# Facts a check reads (a MIG layout's limits, the driver versions a pinned version must be one of, the
# operator bundle of another install method): a change selects every cluster whose check read it, also when
# the check passes either way, since only running the check tells. The selection is exactly those readers,
# never missing a cluster whose output changed. (data file, old, new, the paths read that the edit changes)
CHECKED = {
    "MIG profile limits (mig.yaml)": (
        "mig.yaml", "{name: 2g.20gb, kind: 2g, smiId: 14, nvml: 2_SLICE, compute: 2, memory: 2, max: 3, starts: [0, 2, 4]}",
        "{name: 2g.20gb, kind: 2g, smiId: 14, nvml: 2_SLICE, compute: 2, memory: 2, max: 2, starts: [0, 2]}",
        [("mig", "families", "F8-80GB", "profiles", "2g.20gb", "max")]),
    "gpu model PCI ids, scanned by every compile (gpus.yaml)": (
        "gpus.yaml", H100, H100.replace("0x233010DE", "0x233110DE"), [("catalog", "gpus", "H100-SXM5-80GB", "pciDeviceIds")]),
    "driver branch versions (drivers.yaml)": (
        "drivers.yaml", 'latest: "580.173.02"\n    versions: ["580.173.02"]',
        'latest: "580.180.01"\n    versions: ["580.180.01", "580.173.02"]',
        [("catalog", "drivers", "580", "versions"), ("catalog", "drivers", "580", "latest")]),
    "stack release os entry (releases.yaml)": (
        "releases.yaml", 'rhcos4.19:   {tag: rhcos4.19, platform: openshift, openshift: ["4.19"], select: {osId: rhcos, '
        'osVersionId: "4.19"}', 'rhcos4.19:   {tag: rhcos4.19, platform: openshift, openshift: ["4.19"], select: {osId: '
        'rhcos, osVersionId: "4.19.0"}',
        [("catalog", "releases", "26.7", "matrix", "os", "rhcos4.19", "select")]),
    "operator version bundle (operator.yaml)": (
        "operator.yaml", "csv: gpu-operator-certified.v26.7.0", "csv: gpu-operator-certified.v26.7.0-1",
        [("operator", "operators", "v26.7.0", "csv")]),
}
# adding an entry changes the shape of a collection every compile scans: a documented superset
SUPERSET = {
    "new gpu model (gpus.yaml)": ("gpus.yaml", "  - name: H100-SXM5-80GB\n",
                                  "  - name: H100-SXM5-80GB-TEST\n    architecture: hopper\n    memoryGiB: 80\n"
                                  "    source: test\n  - name: H100-SXM5-80GB\n"),
}


def _env(src: Path) -> dict:
    env = {**os.environ, "PYTHONPATH": str(src), "CDK8S_CHECK_UPGRADE": "false",
           "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20"}
    env.pop("GPUOP_CACHE", None)
    return env


def _synth(project: Path, src: Path, out: str) -> None:
    proc = subprocess.run([sys.executable, "-m", "gpuop.cli", "synth", "profiles", "-o", out, "--no-cache"],
                          cwd=project, env=_env(src), capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


def _outputs(out: Path) -> dict:
    """cluster -> (its folder's files and bytes, its index entry without the provenance)."""
    index = json.loads((out / "index.json").read_text())
    result = {}
    for c in index["clusters"]:
        folder = out / c["name"]
        files = {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}
        result[c["name"]] = (files, {k: v for k, v in c.items() if k != "provenance"})
    return result


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("catalog-selection")
    src = tmp / "src"
    shutil.copytree(ROOT / "constructs" / "gpuop", src / "gpuop", ignore=shutil.ignore_patterns("__pycache__"))
    project = tmp / "project"
    project.mkdir()
    shutil.copytree(ROOT / "profiles", project / "profiles")
    shutil.copy(ROOT / "gpuop.yaml", project / "gpuop.yaml")
    _synth(project, src, "base")
    return src, project, _outputs(project / "base")


def _run_case(base, name: str, case) -> tuple[set, set]:
    src, project, before = base
    data = src / "gpuop" / "catalog" / "data" / case[0]
    original = data.read_text()
    assert original.count(case[1]) == 1, f"{name}: the text to replace must occur once in {case[0]}"
    data.write_text(original.replace(case[1], case[2]))
    try:
        proc = subprocess.run([sys.executable, "-c", SELECT, str(project / "base" / "index.json")], cwd=project,
                              env=_env(src), capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr
        selected = set(json.loads(proc.stdout))
        out = "after-" + "".join(c if c.isalnum() else "-" for c in name)
        _synth(project, src, out)
        after = _outputs(project / out)
    finally:
        data.write_text(original)
    changed = {n for n in before if after.get(n) != before[n]}
    return selected, changed


@pytest.mark.parametrize("name", sorted(EXACT))
def test_selection_is_exactly_the_changed_clusters(base, name):
    *case, some = EXACT[name]
    selected, changed = _run_case(base, name, case)
    assert bool(changed) == some, f"{name}: the case is not what it says (changed: {sorted(changed)})"
    assert not changed - selected, f"{name}: changed but not selected (unsound): {sorted(changed - selected)}"
    assert selected == changed, f"{name}: selected but unchanged: {sorted(selected - changed)}"


@pytest.mark.parametrize("name", sorted(CHECKED))
def test_a_checked_fact_selects_exactly_its_readers(base, name):
    from gpuop.catalog.reads import read_paths

    *case, paths = CHECKED[name]
    selected, changed = _run_case(base, name, case)
    index = json.loads((base[1] / "base" / "index.json").read_text())
    readers = {c["name"] for c in index["clusters"]
               if set(paths) & set(read_paths(index["catalogReads"][c["provenance"]["catalog"]["reads"]]))}
    assert not changed - selected, f"{name}: changed but not selected (unsound): {sorted(changed - selected)}"
    assert readers, f"{name}: no cluster reads what the case changes"
    assert selected == readers, f"{name}: selected {sorted(selected)}, read by {sorted(readers)}"


def test_the_exact_cases_are_not_vacuous(base):
    """Between them the exact cases select some clusters but not all, and some select none: shown by the
    recorded reads (each cluster's provenance names only what its compile read)."""
    from gpuop.catalog.reads import read_paths

    index = json.loads((base[1] / "base" / "index.json").read_text())
    reads = {c["name"]: set(read_paths(index["catalogReads"][c["provenance"]["catalog"]["reads"]])) for c in index["clusters"]}
    k3s = {n for n, r in reads.items() if ("distributions", "distributions", "k3s", "containerd") in r}
    dra = {n for n, r in reads.items() if ("dra", "versions", "0.5.0", "image") in r}
    assert 0 < len(k3s) < len(reads) and 0 < len(dra) < len(reads)
    assert not any(("catalog", "gpus", "H100-SXM5-80GB", "memoryGiB") in r for r in reads.values())


@pytest.mark.parametrize("name", sorted(SUPERSET))
def test_adding_an_entry_selects_a_superset(base, name):
    selected, changed = _run_case(base, name, SUPERSET[name])
    assert not changed - selected, f"{name}: changed but not selected (unsound): {sorted(changed - selected)}"
    assert selected, f"{name}: an added entry is seen by the clusters that scan the collection"


def test_a_record_does_not_depend_on_what_was_compiled_before(base):
    """A cluster compiled alone records the same catalog facts as when compiled after the rest of the fleet
    in one process: no value cached from an earlier cluster's compile stands in for reads it would note."""
    src, project, before = base
    fleet = {c["name"]: c["provenance"] for c in json.loads((project / "base" / "index.json").read_text())["clusters"]}
    for profile in sorted((project / "profiles").glob("[!_]*.yaml")):
        out = f"alone-{profile.stem}"
        proc = subprocess.run([sys.executable, "-m", "gpuop.cli", "synth", f"profiles/{profile.name}", "-o", out,
                               "--no-cache"], cwd=project, env=_env(src), capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr
        (entry,) = json.loads((project / out / "index.json").read_text())["clusters"]
        assert entry["provenance"] == fleet[entry["name"]], f"{profile.name}: its record depends on the fleet"


def test_the_gate_compiles_only_the_clusters_a_catalog_change_selects(base, tmp_path):
    """End to end, on a project in git: after a change to one distribution's entry, `gpuop check` compiles the
    one cluster on that distribution, proves the other clusters from the base, and finds its committed
    output stale (exit 3: changes found)."""
    src, project, _ = base
    repo = tmp_path / "repo"
    repo.mkdir()
    shutil.copytree(project / "profiles", repo / "profiles")
    shutil.copy(project / "gpuop.yaml", repo / "gpuop.yaml")
    shutil.copytree(project / "base", repo / "dist")
    git_env = {**_env(src), "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com", "GIT_COMMITTER_NAME": "t",
               "GIT_COMMITTER_EMAIL": "t@example.com", "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "clusters"]):
        subprocess.run(["git", *args], cwd=repo, env=git_env, check=True, capture_output=True)
    data = src / "gpuop" / "catalog" / "data" / "distributions.yaml"
    original = data.read_text()
    data.write_text(original.replace(K3S, K3S.replace("containerd.sock", "containerd-gpu.sock")))
    try:
        proc = subprocess.run([sys.executable, "-m", "gpuop.cli", "check", "--against", "main"], cwd=repo,
                              env=git_env, capture_output=True, text=True)
    finally:
        data.write_text(original)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 3, out
    assert "1 cluster(s) to check, 8 proven unchanged" in out, out
    assert "edge-k3s: inputs changed" in out, out


def test_the_recheck_imports_every_catalog_module_that_names_a_root():
    """A root whose module the recheck does not import reads as absent: every cluster would look changed."""
    import ast
    import inspect

    from gpuop.pipeline import keys

    folder = Path(keys.__file__).parents[1] / "catalog"
    naming = {p.stem for p in folder.glob("*.py") if p.stem != "__init__" and "\nroot(" in p.read_text()}
    imported = {a.name for n in ast.walk(ast.parse(inspect.getsource(keys.catalog_now)))
                if isinstance(n, ast.ImportFrom) and n.module == "gpuop.catalog" for a in n.names}
    assert naming <= imported, sorted(naming - imported)
