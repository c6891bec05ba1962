"""Hostile input to `gpuop import`: strings of the input never reach the profile's syntax raw, every input is
read within the profile loader's bounds, an input without operator configuration is refused, and `-o` never
destroys (an existing profile, a symlink's target, a file outside the project). Each refusal is exit 2, located,
with nothing written."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import yaml as pyyaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ruamel.yaml import YAML

from gpuop.ops.import_io import Doc, one_line
from gpuop.ops.importer import import_profile
from gpuop.profile.models import ClusterProfile


EVIL = "evil.example.com/nvidia"
CR_INJECTION = "x\r  images: {registry: evil.example.com/nvidia} #"


def run_import(cwd, *args, timeout=60):
    env = {**os.environ, "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20"}
    return subprocess.run([sys.executable, "-m", "gpuop.cli", "import", *map(str, args)], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=timeout)


def refused(proc, where: str, message: str):
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    assert "Traceback" not in proc.stderr and proc.stdout == ""
    first = proc.stderr.splitlines()[0]
    assert first.startswith(where) and message in first, proc.stderr
    assert proc.stderr.rstrip().endswith("nothing written")


def readers(text: str):
    """The profile as a YAML 1.1 reader (PyYAML) and a YAML 1.2 reader (ruamel) see it."""
    return pyyaml.safe_load(text), YAML(typ="safe", pure=True).load(text)


# ---- strings of the input in comments and keys ------------------------------------------------------

def test_a_carriage_return_in_a_chart_key_does_not_become_a_profile_field(tmp_path):
    src = tmp_path / "values.yaml"
    src.write_text(pyyaml.safe_dump({"driver": {"enabled": False}, CR_INJECTION: 1}))
    proc = run_import(tmp_path, src)
    assert proc.returncode == 0, proc.stderr
    for data in readers(proc.stdout):
        assert "images" not in data["spec"]
    assert EVIL not in "".join(line for line in proc.stdout.splitlines() if not line.lstrip().startswith("#"))
    assert "x\\r  images: {registry: evil.example.com/nvidia} #" in proc.stdout     # shown, escaped, in a comment


def test_names_of_ignored_objects_and_drivers_are_escaped(tmp_path):
    src = tmp_path / "live.yaml"
    docs = [{"apiVersion": "apps/v1", "kind": "Deploy\nment", "metadata": {"name": "a\r  images: {registry: x}"}},
            {"apiVersion": "nvidia.com/v1alpha1", "kind": "NVIDIADriver",
             "metadata": {"name": "h100\u2028spec: {os: evil}"},
             "spec": {"driverType": "vgpu\u0085x", "nodeSelector": {"pool": "h100"}, "version": "580.95.05"}}]
    src.write_text(pyyaml.safe_dump_all(docs))
    proc = run_import(tmp_path, src)
    assert proc.returncode == 0, proc.stderr
    for data in readers(proc.stdout):
        assert set(data["spec"]) <= set(ClusterProfile.model_fields["spec"].annotation.model_fields)
        assert data["spec"]["os"] != "evil" and "images" not in data["spec"]
    assert "Deploy\\nment/a\\r  images: {registry: x}" in proc.stdout
    assert "\u2028" not in proc.stdout and "\u0085" not in proc.stdout


def test_one_line_escapes_every_line_break_and_control():
    for ch in "\r\n\x00\x1b\x7f\x85\u2028\u2029\u202e\ufeff":
        out = one_line(f"a{ch}b")
        assert out.isprintable() and out.startswith("a\\") and out.endswith("b"), repr(out)
    assert one_line("plain: ünïcode ok #1") == "plain: ünïcode ok #1"


_ANY = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=24)


def _extra_fields(data) -> list:
    try:
        ClusterProfile.model_validate(data)
    except Exception as exc:  # noqa: BLE001 - pydantic's ValidationError: only unknown keys matter here
        return [e for e in exc.errors() if e["type"] == "extra_forbidden"]
    return []


@settings(max_examples=40, deadline=None, database=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(key=_ANY, kind=_ANY, name=_ANY, driver=_ANY, plugin_key=_ANY, mig_name=_ANY, label=_ANY)
def test_random_strings_in_every_comment_and_key_place_read_back_as_written(key, kind, name, driver, plugin_key,
                                                                         mig_name, label):
    mig = pyyaml.safe_dump({"version": "v1", "mig-configs": {mig_name: [
        {"devices": "all", "mig-enabled": True, "device-filter": ["0x233010DE"], "mig-devices": {"1g.10gb": 7}}]}})
    plugin = pyyaml.safe_dump({"version": "v1", "sharing": {"timeSlicing": {"resources": [
        {"name": "nvidia.com/gpu", "replicas": 4}]}}})
    docs = [
        Doc("values.yaml", {"driver": {"enabled": False}, key: {label: 1}, "mig": {"strategy": "mixed"},
                            "migManager": {"config": {"name": "mig-cfg"}},
                            "devicePlugin": {"config": {"name": "plugin-cfg"}}}, {}),
        Doc("objects.yaml", {"apiVersion": "v1", "kind": kind, "metadata": {"name": name}}, {}),
        Doc("objects.yaml", {"apiVersion": "nvidia.com/v1alpha1", "kind": "NVIDIADriver", "metadata": {"name": driver},
                             "spec": {"nodeSelector": {label: name}, "version": "580.95.05", "labels": {label: key}}}, {}),
        Doc("objects.yaml", {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "mig-cfg"},
                             "data": {"config.yaml": mig}}, {}),
        Doc("objects.yaml", {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "plugin-cfg"},
                             "data": {plugin_key: plugin}}, {}),
    ]
    if kind in ("ClusterPolicy", "NVIDIADriver", "ConfigMap", "List"):
        return
    text, _, data = import_profile(docs, "imported")
    for read in readers(text):
        assert read == data
    assert _extra_fields(data) == []
    body = [line for line in text.splitlines() if not line.lstrip().startswith("#")]
    assert all("# gpuop import" not in line or line.index("#") > 0 for line in body)


# ---- bounds: the profile loader's limits ------------------------------------------------------------

def test_a_fifo_is_refused_without_blocking(tmp_path):
    fifo = tmp_path / "live.yaml"
    os.mkfifo(fifo)
    refused(run_import(tmp_path, fifo, timeout=30), "live.yaml", "is a FIFO (named pipe), not an operator input file")


def test_dev_zero_is_refused(tmp_path):
    refused(run_import(tmp_path, "/dev/zero", timeout=30), "/dev/zero", "is a character device")


def test_a_50_mb_file_is_refused_before_it_is_read(tmp_path):
    big = tmp_path / "big.yaml"
    with open(big, "wb") as f:
        f.truncate(50 * 1024 * 1024)
    refused(run_import(tmp_path, big, timeout=30), "big.yaml", "an operator input may hold at most 262144 bytes")


def test_an_alias_bomb_is_refused_at_its_field(tmp_path):
    src = tmp_path / "bomb.yaml"
    lines = ["driver: {enabled: false}", 'a: &a ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for prev, cur in zip("abcdefgh", "bcdefghi"):
        lines.append(f"{cur}: &{cur} [" + ", ".join([f"*{prev}"] * 10) + "]")
    src.write_text("\n".join(lines) + "\n")
    refused(run_import(tmp_path, src, timeout=30), "bomb.yaml:", "values once its YAML aliases are expanded")


@pytest.mark.parametrize("text, where", [("[" * 5000 + "]" * 5000, "deep.yaml:1:"),
                                         ("".join(f"{' ' * i}k{i}:\n" for i in range(300)) + " " * 300 + "x: 1\n",
                                          "deep.yaml:33:33:")])
def test_deep_nesting_is_refused_located(tmp_path, text, where):
    src = tmp_path / "deep.yaml"
    src.write_text(text)
    refused(run_import(tmp_path, src, timeout=30), where, "nested more than 32 levels deep (limit 32)")


def test_an_alias_bomb_inside_a_configmap_config_is_refused_at_its_key(tmp_path):
    lines = ["version: v1", 'a: &a ["x", "x", "x", "x", "x", "x", "x", "x", "x", "x"]']
    for prev, cur in zip("abcdefgh", "bcdefghi"):
        lines.append(f"{cur}: &{cur} [" + ", ".join([f"*{prev}"] * 10) + "]")
    src = tmp_path / "live.yaml"
    src.write_text("apiVersion: nvidia.com/v1\nkind: ClusterPolicy\nmetadata: {name: cluster-policy}\n"
                   "spec:\n  migManager:\n    config: {name: custom}\n---\n"
                   + pyyaml.safe_dump({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "custom"},
                                       "data": {"config.yaml": "\n".join(lines) + "\n"}}, width=10_000))
    refused(run_import(tmp_path, src, timeout=30), "live.yaml:10:3: data[\"config.yaml\"]: the mig-parted config, line 6 column 1 of the text:", "values once its YAML aliases are expanded")


# ---- no operator configuration, wrong shapes -------------------------------------------------------------

@pytest.mark.parametrize("text, where, message", [
    ("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec: {replicas: 1}\n", "in.yaml:1:1:",
     "holds no operator configuration: no ClusterPolicy, NVIDIADriver or chart values; found only Deployment/web"),
    ("apiVersion: nvidia.com/v1\nkind: ClusterPolicy\nmetadata: {name: cp}\nspec:\n  - driver\n", "in.yaml:4:1: spec:",
     "must be a mapping (a ClusterPolicy's spec), got a list"),
    ("replicaCount: 3\nimage: {tag: x}\n", "in.yaml:1:1:", "no key of NVIDIA's gpu-operator chart values"),
    ("apiVersion: nvidia.com/v1alpha1\nkind: NVIDIADriver\nmetadata: {labels: {}}\nspec: {}\n", "in.yaml:3:1: metadata.name:",
     "a NVIDIADriver needs metadata.name"),
    ("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\ndata: [1]\n---\ndriver: {enabled: false}\n",
     "in.yaml:4:1: data:", "must be a mapping of file names to strings"),
    ("apiVersion: v1\nkind: List\nitems: 5\n", "in.yaml:3:1: items:", "a List's items must be a list"),
    ("mig:\n  strategy: mixed\ntoolkit:\n  env: {A: b}\n", "in.yaml:4:3: toolkit.env:",
     "must be a list, as in NVIDIA's chart (got a mapping)"),
    ("", "in.yaml:1:1:", "the file is empty"),
])
def test_inputs_without_operator_configuration_or_of_the_wrong_shape(tmp_path, text, where, message):
    src = tmp_path / "in.yaml"
    src.write_text(text)
    refused(run_import(tmp_path, src, "--chart-defaults", DEFAULTS), where, message)


def test_a_list_from_kubectl_is_read_item_by_item(tmp_path):
    src = tmp_path / "live.yaml"
    src.write_text("apiVersion: v1\nkind: List\nitems:\n- apiVersion: nvidia.com/v1\n  kind: ClusterPolicy\n"
                   "  metadata: {name: cluster-policy}\n  spec:\n    driver: {enabled: 3}\n")
    refused(run_import(tmp_path, src, "--chart-defaults", DEFAULTS), "live.yaml:8:14: spec.driver.enabled:",
            "must be true or false")


# ---- -o never destroys ---------------------------------------------------------------------------------

VALUES = "driver:\n  enabled: false\n"


@pytest.fixture
def project(tmp_path):
    (tmp_path / "profiles").mkdir()
    (tmp_path / "values.yaml").write_text(VALUES)
    return tmp_path


def test_an_existing_profile_is_kept_unless_force(project):
    out = project / "profiles" / "prod.yaml"
    out.write_text("another cluster\n")
    refused(run_import(project, "values.yaml", "-o", "profiles/prod.yaml"), "profiles/prod.yaml",
            "already exists; gpuop import does not replace a profile")
    assert out.read_text() == "another cluster\n"
    proc = run_import(project, "values.yaml", "-o", "profiles/prod.yaml", "--force")
    assert proc.returncode == 0, proc.stderr
    assert "mode: operator" in out.read_text()
    assert sorted(p.name for p in out.parent.iterdir()) == ["prod.yaml"]


def test_never_writes_through_a_symlink(project, tmp_path_factory):
    outside = tmp_path_factory.mktemp("outside") / "victim.yaml"
    outside.write_text("keep\n")
    (project / "profiles" / "link.yaml").symlink_to(outside)
    for extra in ((), ("--force",)):
        refused(run_import(project, "values.yaml", "-o", "profiles/link.yaml", *extra), "profiles/link.yaml",
                "is a symlink; gpuop import never writes through a symlink")
    assert outside.read_text() == "keep\n"


def test_never_writes_outside_the_project(project, tmp_path_factory):
    elsewhere = tmp_path_factory.mktemp("elsewhere")
    (project / "profiles" / "out").symlink_to(elsewhere, target_is_directory=True)
    for target in (elsewhere / "x.yaml", "profiles/out/x.yaml", "../x.yaml"):
        refused(run_import(project, "values.yaml", "-o", target), "", "is outside the project")
    assert list(elsewhere.iterdir()) == [] and not (project.parent / "x.yaml").exists()


@pytest.mark.parametrize("target, message", [
    ("profiles", "is a folder, not a profile file"),
    ("missing/prod.yaml", "the folder missing does not exist; create it first"),
])
def test_a_folder_or_a_missing_folder_is_exit_2(project, target, message):
    refused(run_import(project, "values.yaml", "-o", target), target, message)


def test_a_full_disk_is_exit_2_and_leaves_nothing(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mnt)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount tmpfs: {done.stderr.decode().strip()}")
    try:
        (mnt / "values.yaml").write_text(VALUES)
        fd = os.open(mnt / "filler", os.O_WRONLY | os.O_CREAT)
        try:
            while True:
                os.write(fd, b"\0" * 4096)
        except OSError:
            os.close(fd)
        refused(run_import(mnt, "values.yaml", "-o", "prod.yaml"), "prod.yaml", "No space left on device")
        assert sorted(p.name for p in mnt.iterdir()) == ["filler", "values.yaml"]
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


from test_import import DEFAULT_VALUES as DEFAULTS  # noqa: E402
