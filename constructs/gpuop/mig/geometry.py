"""MIG geometry: the layout checker over the MIG catalog (catalog/mig.py, data/mig.yaml).

`check_layout(gpu_model, layout) -> Result` decides whether a `{profile: count}` layout can be created on
one GPU of that model and, if so, gives one placement (profile, start slot, size per instance); if not,
every reason: unknown GPU, not MIG-capable, bad name or count, unknown profile (with the allowed ones),
over the max count, media-engine rules, no placement (what collides, what stays free). Placements are
searched (instances' slot intervals must not overlap); the GB in profile names are never added up.
`single_strategy_problem(layout)`: the MIG `single` strategy needs exactly one profile kind.

Sources: ../shared/refs/mig/FACTS.md §0 (validity rules 1-5), §2 (name grammar, counts), §4 (tables),
§5 (placement model and search), §6 (`+me`, `+me.all`, `-me`, `+gfx`), §7 (compute-instance profiles);
NVML nvml.h (nvmlDeviceGetGpuInstancePossiblePlacements_v2: overlapping memory slices fail).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from itertools import combinations
from typing import Mapping

from gpuop import catalog
from gpuop.catalog.names import did_you_mean
from gpuop.catalog.mig import NAME, MigCatalog, MigFamily, MigProfile, load_mig  # noqa: F401 (re-exported)

def attributes(name: str) -> frozenset[str]:
    """'+me' -> {'me'}, '+me.all' -> {'me.all'}, '+gfx' -> {'gfx'}, '-me' -> {'-me'}, plain -> {}."""
    m = NAME.match(name)
    if not m or not m["sign"]:
        return frozenset()
    return frozenset(("" if m["sign"] == "+" else "-") + a for a in m["attrs"].split(","))


def family_of(gpu_model: str, gpus: Mapping | None = None) -> MigFamily | None:
    """The MIG profile family of a catalog GPU model; None if unknown or not MIG-capable."""
    gpu = (catalog.load().gpus if gpus is None else gpus).get(gpu_model)
    return load_mig().families[getattr(gpu, "migFamily")] if gpu is not None and gpu.migCapable else None


@dataclass(frozen=True)
class Instance:
    """One GPU instance of a placement: units [start, start + size) of the GPU."""
    profile: str
    start: int
    size: int
    compute: int

    def __str__(self) -> str:  # 3g.40gb@4-7, 1g.10gb@2
        return f"{self.profile}@{self.start}" + (f"-{self.start + self.size - 1}" if self.size > 1 else "")


@dataclass(frozen=True)
class Problem:
    kind: str  # unknown-gpu not-mig-capable bad-name bad-count unknown-profile over-max media no-placement
    message: str


@dataclass(frozen=True)
class Result:
    gpu: str
    family: MigFamily | None = field(repr=False)
    layout: tuple[tuple[str, int], ...]  # the positive counts, largest profiles first
    placement: tuple[Instance, ...] = ()
    problems: tuple[Problem, ...] = ()
    warnings: tuple[str, ...] = ()

    ok = property(lambda self: not self.problems)
    reasons = property(lambda self: [p.message for p in self.problems])


def describe(layout: Mapping[str, int] | tuple) -> str:
    """{'1g.10gb': 2, '3g.40gb': 1} -> '3g.40gb x1 + 1g.10gb x2' (largest compute first)."""
    items = sorted(layout.items() if isinstance(layout, Mapping) else layout, key=lambda kv: (-_g(kv[0]), kv[0]))
    return " + ".join(f"{n} x{c}" for n, c in items) or "no instances"


def _g(name: str) -> int:
    return int(m["g"]) if (m := NAME.match(name)) else 0


def single_strategy_problem(layout: Mapping[str, int]) -> str | None:
    """MIG strategy `single` advertises one resource type per node: one profile kind per layout."""
    kinds = sorted((n for n, c in layout.items() if c), key=lambda n: (-_g(n), n))
    return None if len(kinds) <= 1 else (
        f"strategy single advertises one MIG resource type per node, so the layout must use exactly one "
        f"profile; it has {len(kinds)}: {', '.join(kinds)} (use strategy: mixed, or one profile)")


def check_layout(gpu_model: str, layout: Mapping[str, int], *, gpus: Mapping | None = None) -> Result:
    """Check one GPU's layout; deterministic. `gpus`: the GPU catalog (default: catalog.load().gpus)."""
    gpus = catalog.load().gpus if gpus is None else gpus
    gpu = gpus.get(gpu_model)
    if gpu is None:
        hint = did_you_mean(gpu_model, gpus, limit=3, cutoff=0.5)
        hint = f"; {hint}" if hint else ""
        return Result(gpu_model, None, (), problems=(Problem("unknown-gpu", f"{gpu_model!r} is not a GPU "
                      f"model of the catalog{hint} (list: gpuop mig gpus)"),))
    if not gpu.migCapable:
        return Result(gpu_model, None, (), problems=(Problem("not-mig-capable", f"{gpu_model} is not "
                      "MIG-capable: it refuses any MIG layout (MIG-capable models: gpuop mig gpus)"),))
    mig = load_mig()
    family = mig.families[getattr(gpu, "migFamily")]
    problems = _syntax(layout, family)
    if problems:
        return Result(gpu_model, family, (), problems=tuple(problems))
    wanted = tuple(sorted(((n, c) for n, c in layout.items() if c > 0), key=lambda kv: (-_g(kv[0]), kv[0])))
    if layout and not wanted:
        return Result(gpu_model, family, (), problems=(Problem("bad-count", "all counts are 0 (mig-parted "
                      "refuses that; an empty layout {} keeps MIG on with no instances)"),))
    warnings: list[str] = []
    unknown = [n for n, _ in wanted if family.profile(n) is None]
    variant = next((v for v in mig.variants(family.name) if unknown
                    and all(v.profile(n) for n, _ in wanted)), None)
    if variant is not None:
        warnings.append(f"{describe(wanted)} uses the {variant.name} profile names ({variant.gpus}); "
                        f"production boards name them {', '.join(family.names)}: check the nodes' "
                        "`nvidia-smi mig -lgip`")
        family, unknown = variant, []
    for n in unknown:
        problems.append(Problem("unknown-profile", _unknown(n, gpu_model, family, mig)))
    for n, c in wanted:
        p = family.profile(n)
        if p is not None and c > p.max:
            problems.append(Problem("over-max", f"{n} x{c} exceeds max {p.max} on {gpu_model}"))
    if problems:
        return Result(gpu_model, family, wanted, problems=tuple(problems), warnings=tuple(warnings))
    problems += _media(gpu_model, family, wanted)
    groups = sorted(((family.profile(n), c) for n, c in wanted), key=lambda pc: (-pc[0].memory, -pc[0].compute,
                                                                                pc[0].name))
    chosen = _search(groups, family.units)
    placement = tuple(sorted((Instance(p.name, s, p.memory, p.compute) for (p, _), starts in zip(groups, chosen)
                              for s in starts), key=lambda i: i.start))
    left = {p.name: c - len(starts) for (p, c), starts in zip(groups, chosen) if c > len(starts)}
    if left:
        problems.append(Problem("no-placement", _explain(gpu_model, family, wanted, placement, left)))
    used = sum(p.compute * c for p, c in groups)
    if used > family.computeSlices and not left:  # redundant guard (FACTS.md §5.1)
        problems.append(Problem("no-placement", f"no placement: {describe(wanted)} on {gpu_model} needs "
                                f"{used} of {family.computeSlices} compute slices"))
    return Result(gpu_model, family, wanted, () if problems else placement, tuple(problems), tuple(warnings))


def _syntax(layout: Mapping, family: MigFamily) -> list[Problem]:
    """FACTS.md §2, §7: the mig-parted name grammar (GPU-instance profiles only) and counts >= 0."""
    out = []
    for name, count in layout.items():
        m = NAME.match(name) if isinstance(name, str) else None
        if m is None or m["c"]:
            out.append(Problem("bad-name", f"{name} is a compute-instance profile; layouts name GPU-instance "
                               f"profiles only (e.g. {name.split('.', 1)[1]})" if m else f"{name!r} is not a MIG "
                               f"profile name (<G>g.<GB>gb, optionally +attr or -attr, case-sensitive, e.g. "
                               f"{family.profiles[-1].name})"))
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            out.append(Problem("bad-count", f"invalid count {count!r} for {name}: counts are whole numbers >= 0"))
    return out


def _unknown(name: str, gpu_model: str, family: MigFamily, mig: MigCatalog) -> str:
    msg = f"{name} is not a MIG profile of {gpu_model}; allowed: {', '.join(family.names)}"
    same = [p.name for p in family.profiles if p.compute == _g(name) and attributes(p.name) == attributes(name)]
    if same:
        msg += f" (did you mean {' or '.join(same)}?)"
    variant = next((v for v in mig.variants(family.name) if v.profile(name)), None)
    if variant is not None:
        msg += (f"; {name} is a {variant.gpus} name ({variant.name}), which cannot be mixed with "
                f"{family.name} names")
    return msg


def _media(gpu_model: str, family: MigFamily, wanted) -> list[Problem]:
    """FACTS.md §6: `+me.all` allows only `-me` companions; the family's cap on `+me` instances."""
    out = []
    for n, _ in wanted:
        if "me.all" in attributes(n):
            others = [o for o, _ in wanted if o != n and "-me" not in attributes(o)]
            if others:
                out.append(Problem("media", f"{n} takes every media engine: it can share {gpu_model} only "
                                   f"with -me profiles, not {', '.join(others)} (NVML *_ALL_ME)"))
    limit = family.meInstancesMax
    me = [(n, c) for n, c in wanted if "me" in attributes(n)]
    if limit is not None and sum(c for _, c in me) > limit.count:
        low = " (confidence: low)" if limit.confidence == "low" else ""
        out.append(Problem("media", f"at most {limit.count} +me instance on {gpu_model}, the layout has "
                           f"{describe(me)}: {limit.why}{low}"))
    return out


def _search(groups: list[tuple[MigProfile, int]], units: int) -> list[tuple[int, ...]]:
    """Start slots with pairwise disjoint intervals (FACTS.md §5.2): for each (profile, count), largest
    first, a set of its allowed starts; depth-first, memoised on (group, used-units bitmask), most
    instances tried first. Without a full placement it returns the partial one that places the most units."""
    options = [_options(p.starts, p.memory, count) for p, count in groups]
    total = [sum(p.memory * c for p, c in groups[j:]) for j in range(len(groups))]
    memo: dict[tuple[int, int], tuple[int, list[tuple[int, ...]]]] = {}

    def best(j: int, used: int) -> tuple[int, list[tuple[int, ...]]]:
        if j == len(groups):
            return 0, []
        if (j, used) not in memo:
            bound, top = min(total[j], units - bin(used).count("1")), (-1, [])
            for combo, bits, mem in options[j]:
                if not bits & used:
                    got, rest = best(j + 1, used | bits)
                    if got + mem > top[0]:
                        top = (got + mem, [combo] + rest)
                        if top[0] >= bound:
                            break
            memo[(j, used)] = top
        return memo[(j, used)]

    return best(0, 0)[1]


@lru_cache(maxsize=512)
def _options(starts: tuple[int, ...], size: int, count: int) -> tuple[tuple[tuple[int, ...], int, int], ...]:
    """Every choice of at most `count` pairwise disjoint starts: (starts, bitmask, units), largest first."""
    picks = (c for k in range(min(count, len(starts)), -1, -1) for c in combinations(starts, k))
    masks = ((c, sum(((1 << size) - 1) << s for s in c)) for c in picks)
    return tuple((c, bits, len(c) * size) for c, bits in masks if bin(bits).count("1") == len(c) * size)


def _explain(gpu_model: str, family: MigFamily, wanted, placed, left: dict[str, int]) -> str:
    mem = sum(family.profile(n).memory * c for n, c in wanted)
    g = sum(family.profile(n).compute * c for n, c in wanted)
    need = [f"needs {a} of {b} {what}s" for a, b, what in ((mem, family.units, family.unit),
                                                           (g, family.computeSlices, "compute slice")) if a > b]
    if not need:
        need.append(f"fits by totals ({mem}/{family.units} {family.unit}s, {g}/{family.computeSlices} "
                    "compute slices) but its allowed start slots collide")
    parts = []
    for name, n in left.items():
        p = family.profile(name)
        hit = [str(i) for i in placed if any(i.start < s + p.memory and s < i.start + i.size for s in p.starts)]
        parts.append(f"{name} x{n} unplaced (its starts {','.join(map(str, p.starts))} collide with "
                     f"{', '.join(hit)})")
    free = [u for u in range(family.units) if not any(i.start <= u < i.start + i.size for i in placed)]
    return (f"no placement: {describe(wanted)} on {gpu_model} {'; '.join(need)}; best fit "
            f"{', '.join(map(str, placed)) or 'nothing'} leaves {'; '.join(parts)}; free {family.unit}s: "
            f"{','.join(map(str, free)) or 'none'}")
