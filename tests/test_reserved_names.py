"""User-given names never collide with the names gpuop writes (validate/reserved.py): a pool config named like a
built-in one, two operator ConfigMaps with one name, a user-created ConfigMap named like one of gpuop's are each
refused at their line (exit 2) instead of silently changing what runs on the nodes. The registry is checked
against what gpuop really writes (every ConfigMap of the compiled examples), and by property: every reserved name
is refused for its kind, every other valid name accepted.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuop.errors import UserError
from gpuop.kube.yamlio import load_all
from gpuop.profile.load import load_profile
from gpuop.validate import reserved
from gpuop.validate.runner import validate

from conftest import REPO, run_gpuop

OPERATOR_PROFILE = (REPO / "profiles" / "keep-operator.yaml").read_text()
BASE = """\
apiVersion: gpuop/v1alpha1
kind: ClusterProfile
metadata: {name: t}
spec:
  platform: {type: kubernetes, version: "1.33"}
  os: ubuntu24.04
  driver: {version: "580"}
  nodePools:
    - name: a
      gpu: L40S
      nodeSelector: {pool: a}
"""


def issues(tmp_path, text: str) -> list[str]:
    (tmp_path / "p.yaml").write_text(text)
    try:
        validate(load_profile(tmp_path / "p.yaml"))
    except UserError as exc:
        return [str(i).replace(str(tmp_path) + "/", "") for i in exc.issues if i.rule == "reserved-names"]
    return []


@pytest.mark.fast
def test_a_sharing_config_named_like_the_built_in_default_is_refused(tmp_path):
    text = BASE + "      sharing: {timeSlicing: {replicas: 2}, configName: default}\n"
    assert issues(tmp_path, text) == [
        'p.yaml:12:45: spec.nodePools[0].sharing.configName: Invalid value: "default": is the name of gpuop\'s '
        "device-plugin config of every node without a nvidia.com/device-plugin.config label (no sharing); a "
        "device-plugin config of yours under it would replace gpuop's (or be replaced): choose another name"]


@pytest.mark.fast
@pytest.mark.parametrize("name, why", [
    ("all-disabled", "is the name of gpuop's MIG config of MIG-capable nodes without a layout (MIG off); a mig-parted "
                     "config of yours under it would replace gpuop's (or be replaced): choose another name"),
    ("3x2g.20gb", "is gpuop's name of the MIG layout 3x2g.20gb, not of this pool's; name the config after its own "
                  "layout, or choose a name that is no layout's"),
])
def test_a_mig_config_named_like_one_gpuop_writes_is_refused(tmp_path, name, why):
    text = BASE.replace("gpu: L40S", "gpu: H100-SXM5-80GB") + \
        f'      nodeGroup: a\n      mig: {{strategy: single, layout: {{"1g.10gb": 7}}, configName: {name}}}\n'
    assert issues(tmp_path, text) == [f'p.yaml:13:55: spec.nodePools[0].mig.configName: Invalid value: "{name}": {why}']


def operator_profile(tmp_path, old: str, new: str) -> str:
    """keep-operator.yaml with one edit, its parent beside it."""
    (tmp_path / "_base.yaml").write_text((REPO / "profiles" / "_base.yaml").read_text())
    assert old in OPERATOR_PROFILE
    return OPERATOR_PROFILE.replace(old, new)


@pytest.mark.fast
def test_two_operator_config_maps_with_one_name_are_refused(tmp_path):
    text = operator_profile(tmp_path, "install: helm}", "install: helm, devicePluginConfig: {name: gpu}, "
                                                        "migManagerConfig: {name: gpu}}")
    found = issues(tmp_path, text)
    assert [f.split(": ", 1)[1] for f in found] == [
        'spec.delivery.operator.migManagerConfig.name: Duplicate value: "gpu": also the name of '
        "spec.delivery.operator.devicePluginConfig's ConfigMap; each ConfigMap needs its own name"], found
    assert found[0].startswith("p.yaml:18:"), found


@pytest.mark.fast
def test_an_operator_config_map_named_like_another_of_gpuops_is_refused(tmp_path):
    text = operator_profile(tmp_path, "install: helm}", "install: helm, migManagerConfig: {name: device-plugin-config}}")
    found = issues(tmp_path, text)
    assert len(found) == 1 and 'spec.delivery.operator.migManagerConfig.name: Invalid value: "device-plugin-config": ' \
        "is the name of a ConfigMap gpuop writes in the stack's namespace" in found[0], found


@pytest.mark.fast
@pytest.mark.parametrize("field", ["repoConfig", "certConfig"])
def test_a_user_created_config_map_named_like_one_gpuop_writes_is_refused(tmp_path, field):
    text = BASE.replace('driver: {version: "580"}',
                        f'driver: {{version: "580", {field}: {{configMapName: nvidia-driver-startup-probe, files: [a]}}}}')
    found = issues(tmp_path, text)
    assert found == [f'p.yaml:7:41: spec.driver.{field}.configMapName: Invalid value: '
                     '"nvidia-driver-startup-probe": is the name of a ConfigMap gpuop writes in the stack\'s namespace; '
                     "a ConfigMap of yours under it would replace gpuop's (or be replaced): choose another name"], found


@pytest.mark.slow
def test_the_cli_refuses_a_built_in_config_name_with_exit_2(tmp_path):
    (tmp_path / "profiles").mkdir()
    (tmp_path / "gpuop.yaml").write_text((REPO / "gpuop.yaml").read_text())
    (tmp_path / "profiles" / "p.yaml").write_text(BASE + "      sharing: {timeSlicing: {replicas: 2}, configName: default}\n")
    proc = run_gpuop("validate", cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.startswith('profiles/p.yaml:12:45: spec.nodePools[0].sharing.configName: Invalid value: "default"')


@pytest.mark.slow
def test_the_registry_holds_every_config_map_gpuop_writes(dist):
    """Derived, not hoped: every ConfigMap in the stack's namespace of the compiled examples (stack and operator mode)
    is reserved (Argo CD's own argocd-cm, in its namespace, is no name a profile gives)."""
    written = set()
    for f in dist.rglob("*.yaml"):
        rel = f.relative_to(dist).as_posix()
        if rel.startswith(("charts/", "fleet/")) or "/argocd/" in rel or f.name == "kustomization.yaml":
            continue
        try:
            docs = load_all(f.read_text())
        except Exception:  # noqa: BLE001 - templates with Helm expressions are not YAML
            continue
        for obj in docs:
            if isinstance(obj, dict) and obj.get("kind") == "ConfigMap" and obj.get("apiVersion") == "v1":
                name = (obj.get("metadata") or {}).get("name")
                if isinstance(name, str) and "{{" not in name:
                    written.add(name)
            for extra in ((obj.get("extraObjects") or []) if isinstance(obj, dict) else []):
                if isinstance(extra, dict) and extra.get("kind") == "ConfigMap":
                    written.add(extra["metadata"]["name"])
    assert written, "the examples write ConfigMaps"
    assert written <= reserved.RESERVED[reserved.CONFIG_MAP].names, written - reserved.RESERVED[reserved.CONFIG_MAP].names


CONFIG_NAME = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?$")
ALL_RESERVED = sorted({n for r in reserved.RESERVED.values() for n in r.names})
# any valid name, gpuop's own names of every kind mixed in (a random one almost never is one)
names = st.one_of(st.from_regex(r"\A[a-z0-9]([a-z0-9.-]{0,30}[a-z0-9])?\Z"), st.sampled_from(ALL_RESERVED))


@pytest.mark.fast
@settings(max_examples=300, deadline=None)
@given(kind=st.sampled_from(sorted(reserved.RESERVED)), name=names)
def test_a_name_is_refused_exactly_when_gpuop_writes_it_for_that_kind(kind, name):
    problem = reserved.reserved_problem(kind, name)
    if name in reserved.RESERVED[kind].names:
        assert problem is not None and problem.startswith(f'Invalid value: "{name}": is the name of ')
    else:
        assert problem is None


@pytest.mark.fast
@pytest.mark.parametrize("kind", sorted(reserved.RESERVED))
def test_every_reserved_name_is_refused_for_its_kind(kind):
    for name in reserved.RESERVED[kind].names:
        assert reserved.reserved_problem(kind, name).startswith(f'Invalid value: "{name}": is the name of ')


@pytest.mark.fast
@settings(max_examples=60, deadline=None)
@given(name=names.filter(lambda n: CONFIG_NAME.match(n) and len(n) <= 63))
def test_a_pool_sharing_config_name_is_refused_exactly_when_reserved(tmp_path_factory, name):
    tmp = tmp_path_factory.mktemp("p")
    found = issues(tmp, BASE + f"      sharing: {{timeSlicing: {{replicas: 2}}, configName: '{name}'}}\n")
    assert bool(found) == (name in reserved.RESERVED[reserved.PLUGIN_CONFIG].names), found


TWO_POOLS = BASE + "      sharing: {timeSlicing: {replicas: 4}}\n" + """\
    - name: b
      gpu: L40S
      nodeSelector: {pool: b}
"""


@pytest.mark.fast
def test_a_sharing_config_named_like_another_pools_derived_config_is_refused(tmp_path):
    import yaml

    from gpuop import catalog
    from gpuop.profile.models import ClusterProfile

    taken = reserved.derived_plugin_configs(ClusterProfile.model_validate(yaml.safe_load(TWO_POOLS)).spec,
                                            catalog.load())[0]
    assert taken.startswith("time-slicing-4-")
    clash = TWO_POOLS + f"      sharing: {{timeSlicing: {{replicas: 2}}, configName: {taken}}}\n"
    assert issues(tmp_path, clash) == [
        f'p.yaml:16:45: spec.nodePools[1].sharing.configName: Invalid value: "{taken}": is the device-plugin config '
        "gpuop writes for pool 'a' (other sharing or MIG settings); one name is one config: choose a name gpuop "
        "does not derive"]
    same = TWO_POOLS + f"      sharing: {{timeSlicing: {{replicas: 4}}, configName: {taken}}}\n"   # the same config
    assert issues(tmp_path, same) == []
