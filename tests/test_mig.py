"""MIG geometry: the catalog against NVIDIA's tables, the placement checker, the pictures, the CLI and
the profile rule.

Ground truth: ../shared/refs/mig/FACTS.md (§4 tables, §5 placement rule and worked examples, §6 media
engines) and NVIDIA's own layouts in ../shared/refs/gpu-operator/default-mig-parted-config.configmap.yaml.
The tables below are typed in from FACTS.md, independently of catalog/data/mig.yaml.
"""

from __future__ import annotations

import itertools
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import yaml

from conftest import REFS, REPO, run_gpuop, run_main
from gpuop import catalog
from gpuop.mig import geometry
from gpuop.mig import picture
from gpuop.mig.geometry import check_layout

GPUS = catalog.load().gpus
MIG_GPUS = [n for n, g in GPUS.items() if g.migCapable]
NON_MIG_GPUS = [n for n, g in GPUS.items() if not g.migCapable]

# FACTS.md §4.1: F8 geometry per kind: (compute slices, memory slices, max, starts)
F8 = {"1g-small": (1, 1, 7, (0, 1, 2, 3, 4, 5, 6)), "1g-small+me": (1, 1, 1, (0, 1, 2, 3, 4, 5, 6)),
      "1g-large": (1, 2, 4, (0, 2, 4, 6)), "2g": (2, 2, 3, (0, 2, 4)), "3g": (3, 4, 2, (0, 4)),
      "4g": (4, 4, 1, (0,)), "7g": (7, 8, 1, (0,))}
# FACTS.md §4.1 "Profile names per GPU", in F8 kind order
_NAMES = {
    "5gb": "1g.5gb 1g.5gb+me 1g.10gb 2g.10gb 3g.20gb 4g.20gb 7g.40gb",
    "80": "1g.10gb 1g.10gb+me 1g.20gb 2g.20gb 3g.40gb 4g.40gb 7g.80gb",
    "94": "1g.12gb 1g.12gb+me 1g.24gb 2g.24gb 3g.47gb 4g.47gb 7g.94gb",
    "96": "1g.12gb 1g.12gb+me 1g.24gb 2g.24gb 3g.48gb 4g.48gb 7g.96gb",
    "141": "1g.18gb 1g.18gb+me 1g.35gb 2g.35gb 3g.71gb 4g.71gb 7g.141gb",
    "144": "1g.18gb 1g.18gb+me 1g.36gb 2g.36gb 3g.72gb 4g.72gb 7g.144gb",
    "180": "1g.23gb 1g.23gb+me 1g.45gb 2g.45gb 3g.90gb 4g.90gb 7g.180gb",
    "186": "1g.23gb 1g.23gb+me 1g.47gb 2g.47gb 3g.93gb 4g.93gb 7g.186gb",
    "269": "1g.34gb 1g.34gb+me 1g.67gb 2g.67gb 3g.135gb 4g.135gb 7g.269gb",
    "278": "1g.35gb 1g.35gb+me 1g.70gb 2g.70gb 3g.139gb 4g.139gb 7g.278gb",
}
F8_NAMES = {gpu: dict(zip(F8, _NAMES[key].split())) for key, gpus in {
    "5gb": "A100-SXM4-40GB A100-PCIE-40GB A800-40GB",
    "80": "A100-SXM4-80GB A100-PCIE-80GB A800-80GB H100-SXM5-80GB H100-PCIE-80GB H800",
    "94": "H100-NVL-94GB H800-NVL-94GB H100-SXM5-94GB", "96": "GH200-96GB H100-96GB H20 PG506-96GB",
    "141": "H200-SXM5-141GB H200-NVL-141GB", "144": "GH200-144GB", "180": "B200-180GB", "186": "GB200-186GB",
    "269": "B300-269GB", "278": "GB300-278GB"}.items() for gpu in gpus.split()}
# FACTS.md §4.2 and §4.3: name -> (compute, memory units, max, starts)
A30 = {"1g.6gb": (1, 1, 4, (0, 1, 2, 3)), "1g.6gb+me": (1, 1, 1, (0, 1, 2, 3)), "2g.12gb": (2, 2, 2, (0, 2)),
       "2g.12gb+me": (2, 2, 1, (0, 2)), "4g.24gb": (4, 4, 1, (0,))}
_Q1, _Q2 = (0, 3, 6, 9), (0, 6)
RTX6000 = {"1g.24gb": (1, 3, 4, _Q1), "1g.24gb+me": (1, 3, 1, _Q1), "1g.24gb+gfx": (1, 3, 4, _Q1),
           "1g.24gb+me.all": (1, 3, 1, _Q1), "1g.24gb-me": (1, 3, 4, _Q1), "2g.48gb": (2, 6, 2, _Q2),
           "2g.48gb+gfx": (2, 6, 2, _Q2), "2g.48gb+me.all": (2, 6, 1, _Q2), "2g.48gb-me": (2, 6, 2, _Q2),
           "4g.96gb": (4, 12, 1, (0,)), "4g.96gb+gfx": (4, 12, 1, (0,))}


def expected_table(gpu: str) -> dict[str, tuple]:
    if gpu == "A30-24GB":
        return A30
    if gpu == "RTX-PRO-6000-Blackwell-96GB":
        return RTX6000
    return {name: F8[kind] for kind, name in F8_NAMES[gpu].items()}


def reasons(gpu: str, layout: dict) -> list[str]:
    return check_layout(gpu, layout).reasons


# ---------------------------------------------------------------- the catalog agrees with NVIDIA's tables

@pytest.mark.parametrize("gpu", MIG_GPUS)
def test_catalog_matches_facts_tables(gpu):
    fam = geometry.family_of(gpu)
    got = {p.name: (p.compute, p.memory, p.max, p.starts) for p in fam.profiles}
    assert got == expected_table(gpu)
    assert (fam.units, fam.computeSlices) == ((4, 4) if gpu == "A30-24GB" else (12, 4) if "RTX" in gpu else (8, 7))


def test_every_gpu_has_a_table_and_non_mig_gpus_none():
    assert set(MIG_GPUS) == set(F8_NAMES) | {"A30-24GB", "RTX-PRO-6000-Blackwell-96GB"}
    assert {"L40S", "T4", "L4"} <= set(NON_MIG_GPUS)
    assert all(geometry.family_of(g) is None for g in NON_MIG_GPUS)
    mig = geometry.load_mig()
    assert mig.sources and all(f.variantOf in (None, *mig.families) for f in mig.families.values())


@pytest.mark.parametrize("gpu", MIG_GPUS)
def test_full_packs_and_over_max(gpu):
    """`all-<profile>` at its max count fits; one more is refused with the max named."""
    for name, (_, _, mx, _) in expected_table(gpu).items():
        r = check_layout(gpu, {name: mx})
        assert r.ok and len(r.placement) == mx, (name, r.reasons)
        assert reasons(gpu, {name: mx + 1}) == [f"{name} x{mx + 1} exceeds max {mx} on {gpu}"]


# FACTS.md §5.3: the 12 maximal A100-40GB layouts (without 1g-large and +me), by F8 kind
MAXIMAL = ["7", "4-3", "4-2-1", "4-1-1-1", "3-3", "3-2-2", "3-2-1-1", "3-1-1-1-1", "2-2-2-1", "2-2-1-1-1",
           "2-1-1-1-1-1", "1-1-1-1-1-1-1"]
_KIND = {"7": "7g", "4": "4g", "3": "3g", "2": "2g", "1": "1g-small"}


@pytest.mark.parametrize("gpu", sorted(F8_NAMES))
def test_maximal_f8_layouts_fit_and_nothing_more(gpu):
    names = F8_NAMES[gpu]
    for shape in MAXIMAL:
        layout: dict[str, int] = {}
        for part in shape.split("-"):
            layout[names[_KIND[part]]] = layout.get(names[_KIND[part]], 0) + 1
        assert check_layout(gpu, layout).ok, (shape, reasons(gpu, layout))
        more = {**layout, names["1g-small"]: layout.get(names["1g-small"], 0) + 1}
        kinds = [p.kind for p in check_layout(gpu, more).problems]
        assert kinds in (["no-placement"], ["over-max"]), shape  # 1x7 + 1 is over the max of 7


# FACTS.md §5.4: worked examples on A100-SXM4-40GB (layout, verdict, placement)
WORKED = [
    ({"4g.20gb": 1, "2g.10gb": 1, "1g.5gb": 1}, ["4g.20gb@0-3", "2g.10gb@4-5", "1g.5gb@6"]),
    ({"4g.20gb": 2}, None),
    ({"3g.20gb": 2}, ["3g.20gb@0-3", "3g.20gb@4-7"]),
    ({"4g.20gb": 1, "3g.20gb": 1}, ["4g.20gb@0-3", "3g.20gb@4-7"]),
    ({"3g.20gb": 2, "1g.5gb": 1}, None),
    ({"3g.20gb": 1, "1g.5gb": 4}, ["1g.5gb@0", "1g.5gb@1", "1g.5gb@2", "1g.5gb@3", "3g.20gb@4-7"]),
    ({"2g.10gb": 3, "1g.10gb": 1}, ["2g.10gb@0-1", "2g.10gb@2-3", "2g.10gb@4-5", "1g.10gb@6-7"]),
    ({"1g.10gb": 4, "1g.5gb": 1}, None),
]


@pytest.mark.parametrize("layout,placement", WORKED)
def test_facts_worked_examples(layout, placement):
    r = check_layout("A100-SXM4-40GB", layout)
    assert r.ok == (placement is not None), r.reasons
    if placement:
        assert [str(i) for i in r.placement] == placement


def test_memory_oversubscription_and_compute_shortage_are_explained():
    assert reasons("A100-SXM4-40GB", {"1g.10gb": 4, "1g.5gb": 1}) == [
        "no placement: 1g.10gb x4 + 1g.5gb x1 on A100-SXM4-40GB needs 9 of 8 memory slices; best fit "
        "1g.10gb@0-1, 1g.10gb@2-3, 1g.10gb@4-5, 1g.10gb@6-7 leaves 1g.5gb x1 unplaced (its starts "
        "0,1,2,3,4,5,6 collide with 1g.10gb@0-1, 1g.10gb@2-3, 1g.10gb@4-5, 1g.10gb@6-7); free memory slices: none"]
    # memory adds up (8 of 8) but compute does not: there is no 1-slice start at 7 (FACTS.md §5.3)
    assert reasons("H100-SXM5-80GB", {"2g.20gb": 3, "1g.10gb": 2}) == [
        "no placement: 2g.20gb x3 + 1g.10gb x2 on H100-SXM5-80GB needs 8 of 7 compute slices; best fit "
        "2g.20gb@0-1, 2g.20gb@2-3, 2g.20gb@4-5, 1g.10gb@6 leaves 1g.10gb x1 unplaced (its starts "
        "0,1,2,3,4,5,6 collide with 2g.20gb@0-1, 2g.20gb@2-3, 2g.20gb@4-5, 1g.10gb@6); free memory slices: 7"]
    # RTX PRO 6000: 12-unit grid
    assert check_layout("RTX-PRO-6000-Blackwell-96GB", {"2g.48gb": 2, "1g.24gb": 1}).problems[0].kind == "no-placement"


@pytest.mark.parametrize("gpu,layout", [
    ("H100-NVL-94GB", {"1g.12gb": 2, "2g.24gb": 1, "3g.47gb": 1}),    # names sum to 95 "GB" on a 94GB card
    ("H200-SXM5-141GB", {"1g.18gb": 2, "2g.35gb": 1, "3g.71gb": 1}),  # 142 > 141
    ("B300-269GB", {"1g.34gb": 2, "2g.67gb": 1, "3g.135gb": 1}),      # 270 > 269
    ("GB300-278GB", {"1g.35gb": 2, "2g.70gb": 1, "3g.139gb": 1}),     # 279 > 278
    ("H100-SXM5-80GB", {"3g.40gb": 1, "2g.20gb": 1, "1g.10gb": 2}),   # profiles/prod-east.yaml
])
def test_gb_in_names_is_never_added_up(gpu, layout):
    assert check_layout(gpu, layout).ok


def _enumerate(fam):
    for counts in itertools.product(*(range(p.max + 1) for p in fam.profiles)):
        if any(counts):
            yield {p.name: c for p, c in zip(fam.profiles, counts) if c}, \
                sum(p.compute * c for p, c in zip(fam.profiles, counts)), \
                sum(p.memory * c for p, c in zip(fam.profiles, counts))


@pytest.mark.parametrize("gpu,expected", [("H100-SXM5-80GB", 3839), ("A30-24GB", 119)])
def test_placement_search_agrees_with_totals_exhaustively(gpu, expected):
    """FACTS.md §5.3: within the max caps, a placement exists iff Σg <= C and Σmem <= N (3,839 F8 and 119
    A30 layouts): so no layout here fits by totals yet has no placement, and the search finds them all."""
    fam, n = geometry.family_of(gpu), 0
    for layout, g, mem in _enumerate(fam):
        n += 1
        r = check_layout(gpu, layout)
        placed = not any(p.kind == "no-placement" for p in r.problems)
        assert placed == (g <= fam.computeSlices and mem <= fam.units), (layout, r.reasons)
        if r.ok:
            cover = [u for i in r.placement for u in range(i.start, i.start + i.size)]
            assert len(cover) == len(set(cover)) and all(i.start in fam.profile(i.profile).starts for i in r.placement)
    assert n == expected


def test_rtx6000_shapes_agree_with_totals():
    """The 12-unit grid, by shape: 1g (3 units), 2g (6), 4g (12), spread over media-compatible variants."""
    pools = {1: ["1g.24gb", "1g.24gb-me", "1g.24gb+gfx"], 2: ["2g.48gb", "2g.48gb-me"], 4: ["4g.96gb", "4g.96gb+gfx"]}
    for n1, n2, n4 in itertools.product(range(6), range(4), range(3)):
        layout: dict[str, int] = {}
        for g, n in ((1, n1), (2, n2), (4, n4)):
            for i in range(n):
                name = pools[g][i % len(pools[g])]
                layout[name] = layout.get(name, 0) + 1
        if layout:
            assert check_layout("RTX-PRO-6000-Blackwell-96GB", layout).ok == (n1 + 2 * n2 + 4 * n4 <= 4), layout


def test_fits_by_totals_but_slots_collide_is_explained(monkeypatch):
    """No NVIDIA GPU has such a layout (see above); a made-up geometry exercises the explanation."""
    fam = geometry.MigFamily(name="T", gpus="test", units=4, computeSlices=4, placements="inferred", source="test",
                             profiles=(geometry.MigProfile(name="2g.2gb", kind="2g", compute=2, memory=2, max=1,
                                                           starts=(1,)),
                                       geometry.MigProfile(name="1g.1gb", kind="1g", compute=1, memory=1, max=2,
                                                           starts=(0, 2))))
    monkeypatch.setattr(geometry, "load_mig", lambda: geometry.MigCatalog(sources=(), families={"T": fam}, digest=""))
    gpus = {"TEST": catalog.Gpu(name="TEST", architecture="test", migCapable=True, migFamily="T")}
    assert check_layout("TEST", {"2g.2gb": 1, "1g.1gb": 2}, gpus=gpus).reasons == [
        "no placement: 2g.2gb x1 + 1g.1gb x2 on TEST fits by totals (4/4 memory slices, 4/4 compute slices) but "
        "its allowed start slots collide; best fit 1g.1gb@0, 2g.2gb@1-2 leaves 1g.1gb x1 unplaced (its starts 0,2 "
        "collide with 1g.1gb@0, 2g.2gb@1-2); free memory slices: 3"]


# ---------------------------------------------------------------- names, +me rules, non-MIG GPUs

def test_unknown_profiles_name_the_allowed_ones():
    assert reasons("H100-SXM5-80GB", {"1g.5gb": 1}) == [
        "1g.5gb is not a MIG profile of H100-SXM5-80GB; allowed: 1g.10gb, 1g.10gb+me, 1g.20gb, 2g.20gb, 3g.40gb, "
        "4g.40gb, 7g.80gb (did you mean 1g.10gb or 1g.20gb?)"]
    for gpu, name in [("H100-SXM5-80GB", "1g.20gb+me"), ("H100-SXM5-80GB", "2g.20gb+me"),
                      ("A100-SXM4-40GB", "1g.10gb+me"), ("H200-SXM5-141GB", "1g.10gb"),
                      ("RTX-PRO-6000-Blackwell-96GB", "1g.24gb+me,gfx"), ("A30-24GB", "2g.12gb-me")]:
        assert [p.kind for p in check_layout(gpu, {name: 1}).problems] == ["unknown-profile"], (gpu, name)
    assert [p.kind for p in check_layout("H100-SXM5-80GB", {"3G.40GB": 1, "1c.3g.40gb": 1}).problems] == ["bad-name"] * 2
    assert reasons("H100-SXM5-80GB", {"3g.40gb": 0}) == [
        "all counts are 0 (mig-parted refuses that; an empty layout {} keeps MIG on with no instances)"]
    assert check_layout("H100-SXM5-80GB", {}).ok and check_layout("H100-SXM5-80GB", {"3g.40gb": 2, "1g.10gb": 0}).ok


def test_gb200_early_board_names_are_accepted_with_a_warning_but_not_mixed():
    r = check_layout("GB200-186GB", {"3g.95gb": 2})
    assert r.ok and r.family.name == "F8-186GB-early" and "production boards name them" in r.warnings[0]
    assert check_layout("GB200-186GB", {"3g.93gb": 1, "1g.23gb": 4}).warnings == ()
    mixed = check_layout("GB200-186GB", {"3g.95gb": 1, "3g.93gb": 1})
    assert [p.kind for p in mixed.problems] == ["unknown-profile"] and "cannot be mixed" in mixed.reasons[0]


@pytest.mark.parametrize("gpu,layout,kinds", [
    ("H100-SXM5-80GB", {"1g.10gb+me": 2}, ["over-max"]),                        # one OFA outside 7g
    ("H100-SXM5-80GB", {"1g.10gb+me": 1, "1g.10gb": 6}, []),
    ("A100-SXM4-40GB", {"1g.5gb+me": 1, "3g.20gb": 1, "2g.10gb": 1}, []),
    ("A30-24GB", {"1g.6gb+me": 1, "2g.12gb+me": 1}, ["media"]),                 # 1 JPEG + 1 OFA (low confidence)
    ("A30-24GB", {"1g.6gb+me": 1, "1g.6gb": 1, "2g.12gb": 1}, []),
    ("RTX-PRO-6000-Blackwell-96GB", {"1g.24gb+me.all": 1, "1g.24gb-me": 3}, []),
    ("RTX-PRO-6000-Blackwell-96GB", {"2g.48gb+me.all": 1, "2g.48gb-me": 1}, []),
    ("RTX-PRO-6000-Blackwell-96GB", {"1g.24gb+me.all": 1, "1g.24gb": 1}, ["media"]),
    ("RTX-PRO-6000-Blackwell-96GB", {"1g.24gb+me.all": 1, "1g.24gb+gfx": 1}, ["media"]),
    ("RTX-PRO-6000-Blackwell-96GB", {"1g.24gb+me.all": 1, "2g.48gb+me.all": 1}, ["media", "media"]),
    ("RTX-PRO-6000-Blackwell-96GB", {"1g.24gb+me": 1, "1g.24gb": 3}, []),
    ("RTX-PRO-6000-Blackwell-96GB", {"1g.24gb+gfx": 2, "2g.48gb": 1}, []),
])
def test_media_engine_rules(gpu, layout, kinds):
    assert [p.kind for p in check_layout(gpu, layout).problems] == kinds


def test_me_all_message():
    assert reasons("RTX-PRO-6000-Blackwell-96GB", {"1g.24gb+me.all": 1, "1g.24gb": 2}) == [
        "1g.24gb+me.all takes every media engine: it can share RTX-PRO-6000-Blackwell-96GB only with -me "
        "profiles, not 1g.24gb (NVML *_ALL_ME)"]


@pytest.mark.parametrize("gpu", NON_MIG_GPUS)
def test_non_mig_gpus_refuse_any_layout(gpu):
    for layout in ({"1g.5gb": 1}, {"1g.24gb": 1}, {}):
        assert reasons(gpu, layout) == [f"{gpu} is not MIG-capable: it refuses any MIG layout "
                                        "(MIG-capable models: gpuop mig gpus)"]


def test_single_strategy_needs_one_profile_kind():
    assert geometry.single_strategy_problem({"1g.10gb": 7}) is None
    assert geometry.single_strategy_problem({"1g.10gb": 2, "3g.40gb": 1, "7g.80gb": 0}) == (
        "strategy single advertises one MIG resource type per node, so the layout must use exactly one profile; "
        "it has 2: 3g.40gb, 1g.10gb (use strategy: mixed, or one profile)")


# ---------------------------------------------------------------- NVIDIA's default mig-parted config

def _default_specs():
    cm = yaml.safe_load((REFS / "gpu-operator" / "default-mig-parted-config.configmap.yaml").read_text())
    config = yaml.safe_load(cm["data"]["config.yaml"])
    assert config["version"] == "v1"
    for name, specs in config["mig-configs"].items():
        for spec in specs:
            if spec["mig-enabled"]:
                yield name, spec


def _models_for(spec) -> list[str]:
    """device-filter PCI ids -> catalog models (gpus.yaml); no filter -> every MIG GPU whose profile names
    (or a variant's) cover the spec, i.e. the GPUs the config was written for."""
    ids = spec.get("device-filter")
    if ids is not None:
        by_id = {i.upper(): n for n, g in GPUS.items() for i in g.pciDeviceIds}
        ids = [ids] if isinstance(ids, str) else ids
        missing = [i for i in ids if i.upper() not in by_id]
        assert not missing, f"device ids not in gpus.yaml: {missing}"
        return sorted({by_id[i.upper()] for i in ids})
    names = set(spec["mig-devices"])
    mig = geometry.load_mig()
    return [g for g in MIG_GPUS if any(names <= set(f.names) for f in
                                       (geometry.family_of(g), *mig.variants(geometry.family_of(g).name)))]


def test_every_default_mig_parted_config_is_accepted_for_its_gpus():
    checked = 0
    for name, spec in _default_specs():
        models = _models_for(spec)
        assert models, f"{name}: no GPU in the catalog has {sorted(spec['mig-devices'])}"
        for model in models:
            r = check_layout(model, spec["mig-devices"])
            assert r.ok, (name, model, r.reasons)
            checked += 1
    assert checked > 100


def test_default_configs_per_gpu():
    balanced = {m: spec["mig-devices"] for name, spec in _default_specs() if name == "all-balanced"
                for m in _models_for(spec)}
    assert set(balanced) == set(MIG_GPUS) - {"H100-SXM5-94GB"}  # its id is in pci.ids only (gpus.yaml note)
    stale = [m for name, spec in _default_specs() if name in ("all-3g.95gb", "all-7g.189gb")
             for m in _models_for(spec)]
    assert stale == ["GB200-186GB", "GB200-186GB"]


# ---------------------------------------------------------------- pictures

def test_text_picture():
    out = picture.text(check_layout("H100-SXM5-80GB", {"3g.40gb": 1, "2g.20gb": 1, "1g.10gb": 2}))
    assert out.isascii()
    assert "| A 2g.20gb     | B     | C     | D 3g.40gb                     |" in out
    assert "  D  3g.40gb: memory slices 4-7, 3 compute slices" in out
    assert "free memory slices: 7" in picture.text(check_layout("A100-SXM4-40GB", {"1g.5gb": 7}))
    with pytest.raises(ValueError):
        picture.text(check_layout("H100-SXM5-80GB", {"3g.40gb": 3}))


@pytest.mark.parametrize("gpu,layout", [
    ("H100-SXM5-80GB", {"3g.40gb": 1, "2g.20gb": 1, "1g.10gb": 2}),
    ("RTX-PRO-6000-Blackwell-96GB", {"1g.24gb+me.all": 1, "1g.24gb-me": 1}),
    ("A30-24GB", {"1g.6gb": 4}), ("GB200-186GB", {"7g.189gb": 1}),
])
def test_svg_is_valid_with_one_rect_per_instance(gpu, layout):
    r = check_layout(gpu, layout)
    doc = picture.svg(r)
    assert doc == picture.svg(check_layout(gpu, layout))  # deterministic
    root = ET.fromstring(doc)
    ns = "{http://www.w3.org/2000/svg}"
    assert root.tag == f"{ns}svg"
    rects = root.findall(f".//{ns}rect")
    assert len(rects) == len(r.placement) == sum(layout.values())
    assert [rect.find(f"{ns}title").text.split(": ", 1)[1] for rect in rects] == [str(i) for i in r.placement]
    texts = " ".join(t.text or "" for t in root.iter(f"{ns}text"))
    assert "Legend" in texts and all(i.profile in texts for i in r.placement)


def test_docs_example_is_current():
    r = check_layout("H100-SXM5-80GB", {"3g.40gb": 1, "2g.20gb": 1, "1g.10gb": 2})
    assert (REPO / "docs" / "mig-example.svg").read_text(encoding="utf-8") == picture.svg(r)


# ---------------------------------------------------------------- CLI (subprocess) and profiles

@pytest.mark.parametrize("args,code,stdout,stderr", [
    (["check", "--gpu", "H100-SXM5-80GB", "3g.40gb=1", "2g.20gb=1", "1g.10gb=2"], 0,
     "H100-SXM5-80GB: 3g.40gb x1 + 2g.20gb x1 + 1g.10gb x2 fits: 2g.20gb@0-1, 1g.10gb@2, 1g.10gb@3, 3g.40gb@4-7\n", ""),
    (["check", "--gpu", "H100-SXM5-80GB", "3g.40gb=3"], 2, "",
     "gpuop mig: 3g.40gb x3 exceeds max 2 on H100-SXM5-80GB\n"),
    (["check", "--gpu", "H100-SXM5-80GB", "3g.40gb=x"], 2, "",
     "gpuop mig: bad layout entry '3g.40gb=x': COUNT must be a whole number >= 0, e.g. 3g.40gb=1\n"),
    (["check", "--gpu", "H100", "3g.40gb=1"], 2, "",
     "gpuop mig: 'H100' is not a GPU model of the catalog; did you mean H100-SXM5-80GB, H100-PCIE-80GB, "
     "H100-NVL-94GB? (list: gpuop mig gpus)\n"),      # the models it starts, as the profile check suggests
    (["show", "--gpu", "L40S", "1g.5gb=1"], 2, "",
     "gpuop mig: L40S is not MIG-capable: it refuses any MIG layout (MIG-capable models: gpuop mig gpus)\n"),
])
def test_cli_exit_codes_and_messages(tmp_path, args, code, stdout, stderr):
    proc = run_main("mig", *args, cwd=tmp_path)
    assert (proc.returncode, proc.stdout, proc.stderr) == (code, stdout, stderr)


def test_cli_gpus_and_show_svg(tmp_path):
    proc = run_main("mig", "gpus", cwd=tmp_path)
    assert proc.returncode == 0 and all(name in proc.stdout for name in GPUS)
    assert "1g.10gb x7, 1g.10gb+me x1, 1g.20gb x4, 2g.20gb x3, 3g.40gb x2, 4g.40gb x1, 7g.80gb x1" in proc.stdout
    proc = run_main("mig", "show", "--gpu", "A100-SXM4-40GB", "3g.20gb=1", "1g.5gb=4", "--svg", "out/p.svg",
                     cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "| A     | B     | C     | D     | E 3g.20gb" in proc.stdout and len(ET.parse(tmp_path / "out" / "p.svg").getroot()) > 5
    proc = run_main("mig", "show", "--gpu", "A100-SXM4-40GB", "3g.20gb=2", "1g.5gb=1", "--svg", "bad.svg",
                     cwd=tmp_path)
    assert proc.returncode == 2 and proc.stderr.startswith("gpuop mig: no placement: ")
    assert not (tmp_path / "bad.svg").exists()


def _profile(layout: str, strategy: str = "mixed", gpu: str = "A100-SXM4-40GB") -> str:
    return ("apiVersion: gpuop/v1alpha1\nkind: ClusterProfile\nmetadata:\n  name: bad\nspec:\n"
            "  platform: {type: kubernetes, version: \"1.33\"}\n  os: ubuntu24.04\n  nodePools:\n"
            f"    - name: train\n      gpu: {gpu}\n      mig:\n        strategy: {strategy}\n"
            f"        layout: {layout}\n")


def test_synth_refuses_an_impossible_layout_located(tmp_path):
    shutil.copy(REPO / "gpuop.yaml", tmp_path / "gpuop.yaml")
    (tmp_path / "profiles").mkdir()
    (tmp_path / "profiles" / "bad.yaml").write_text(_profile('{"3g.20gb": 2, "1g.5gb": 1}'))
    proc = run_gpuop("synth", "profiles", "-o", "dist", cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.splitlines()[0] == (
        "profiles/bad.yaml:13:9: spec.nodePools[0].mig.layout: no placement: 3g.20gb x2 + 1g.5gb x1 on "
        "A100-SXM4-40GB needs 9 of 8 memory slices; best fit 3g.20gb@0-3, 3g.20gb@4-7 leaves 1g.5gb x1 unplaced "
        "(its starts 0,1,2,3,4,5,6 collide with 3g.20gb@0-3, 3g.20gb@4-7); free memory slices: none")
    assert not (tmp_path / "dist").exists()


def _issues(tmp_path: Path, text: str):
    from gpuop.errors import UserError
    from gpuop.profile.load import load_profile
    from gpuop.validate.runner import validate

    (tmp_path / "p.yaml").write_text(text)
    try:
        return validate(load_profile(tmp_path / "p.yaml")).warnings
    except UserError as exc:
        return exc.issues


def test_profile_rules(tmp_path):
    over = _issues(tmp_path, _profile('{"3g.40gb": 3}', gpu="H100-SXM5-80GB"))
    assert [(i.path, i.message) for i in over] == [
        ("spec.nodePools[0].mig.layout", "3g.40gb x3 exceeds max 2 on H100-SXM5-80GB")]
    single = _issues(tmp_path, _profile('{"3g.20gb": 1, "1g.5gb": 4}', strategy="single"))
    assert [(i.path, i.line) for i in single] == [("spec.nodePools[0].mig.strategy", 12)]
    early = _issues(tmp_path, _profile('{"7g.189gb": 1}', gpu="GB200-186GB"))
    assert [(i.severity, i.path) for i in early] == [("warning", "spec.nodePools[0].mig.layout")]
    non_mig = _issues(tmp_path, _profile('{"1g.5gb": 1}', gpu="T4"))
    assert "T4 is not MIG-capable: it refuses any MIG layout (MIG-capable models: gpuop mig gpus)" in [
        i.message for i in non_mig]


def test_bundled_profiles_validate(tmp_path):
    proc = run_main("validate", str(REPO / "profiles"), cwd=REPO)
    assert proc.returncode == 0, proc.stderr
