"""MIG geometry: the catalog (catalog/data/mig.yaml) as frozen models, and the layout checker.

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

import difflib
import hashlib
import re
from collections import Counter
from dataclasses import dataclass
from functools import lru_cache
from typing import Literal, Mapping

import yaml
from pydantic import BaseModel, ConfigDict, model_validator

from .. import catalog

#: mig-parted / go-nvlib profile name grammar: `[<C>c.]<G>g.<GB>gb[+attr[,attr..] | -attr[,attr..]]`
NAME = re.compile(r"^(?:(?P<c>[1-9][0-9]*)c\.)?(?P<g>[1-9][0-9]*)g\.(?P<gb>[0-9]+)gb"
                  r"(?:(?P<sign>[+-])(?P<attrs>[a-z][a-z.]*(?:,[a-z][a-z.]*)*))?$")


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def attributes(name: str) -> frozenset[str]:
    """'+me' -> {'me'}, '+me.all' -> {'me.all'}, '+gfx' -> {'gfx'}, '-me' -> {'-me'}, plain -> {}."""
    m = NAME.match(name)
    if not m or not m["sign"]:
        return frozenset()
    return frozenset(("" if m["sign"] == "+" else "-") + a for a in m["attrs"].split(","))


class MigProfile(_Frozen):
    name: str
    kind: str
    compute: int  # compute slices, the <G>g of the name
    memory: int  # placement units taken (memory slices)
    max: int  # instances per GPU
    starts: tuple[int, ...]
    smiId: int | None = None
    nvml: str | None = None
    media: str | None = None
    engines: dict[str, int] | None = None
    minDriver: str | None = None
    confidence: Literal["low"] | None = None
    note: str | None = None

    @property
    def attributes(self) -> frozenset[str]:
        return attributes(self.name)


class MeLimit(_Frozen):
    count: int
    confidence: Literal["low"] | None = None
    why: str


class MigFamily(_Frozen):
    name: str
    gpus: str
    units: int
    unit: str = "memory slice"
    computeSlices: int
    placements: Literal["observed", "inferred"]
    source: str
    note: str | None = None
    confidence: Literal["low"] | None = None
    variantOf: str | None = None
    meInstancesMax: MeLimit | None = None
    profiles: tuple[MigProfile, ...]

    @model_validator(mode="after")
    def _consistent(self) -> "MigFamily":
        names = [p.name for p in self.profiles]
        if len(set(names)) != len(names):
            raise ValueError(f"{self.name}: duplicate profile names")
        for p in self.profiles:
            m = NAME.match(p.name)
            if not m or m["c"] or int(m["g"]) != p.compute:
                raise ValueError(f"{self.name}: {p.name} does not match its compute slices {p.compute}")
            if not p.starts or any(s < 0 or s + p.memory > self.units for s in p.starts) or p.max < 1:
                raise ValueError(f"{self.name}: {p.name} has starts or max outside the {self.units}-unit grid")
        return self

    def profile(self, name: str) -> MigProfile | None:
        return next((p for p in self.profiles if p.name == name), None)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.profiles)


class MigCatalog(_Frozen):
    sources: tuple[str, ...]
    families: dict[str, MigFamily]
    digest: str

    def variants(self, family: str) -> tuple[MigFamily, ...]:
        return tuple(f for f in self.families.values() if f.variantOf == family)


@lru_cache(maxsize=1)
def load_mig() -> MigCatalog:
    raw = (catalog.DATA / "mig.yaml").read_bytes()
    doc = yaml.load(raw, Loader=yaml.CSafeLoader)
    families = {k: MigFamily(name=k, **v) for k, v in doc["families"].items()}
    return MigCatalog(sources=doc["sources"], families=families, digest=hashlib.sha256(raw).hexdigest())


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
    family: MigFamily | None
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
        close = difflib.get_close_matches(gpu_model, list(gpus), n=3, cutoff=0.5)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        return Result(gpu_model, None, (), problems=(Problem("unknown-gpu", f"{gpu_model!r} is not a GPU "
                      f"model of the catalog{hint} (list: gpuop mig gpus)"),))
    if not gpu.migCapable:
        return Result(gpu_model, None, (), problems=(Problem("not-mig-capable", f"{gpu_model} is not "
                      "MIG-capable: it refuses any MIG layout (MIG-capable models: gpuop mig gpus)"),))
    mig = load_mig()
    family = mig.families[getattr(gpu, "migFamily")]
    problems: list[Problem] = []
    for name, count in layout.items():
        m = NAME.match(name) if isinstance(name, str) else None
        if m is None:
            problems.append(Problem("bad-name", f"{name!r} is not a MIG profile name (<G>g.<GB>gb, optionally "
                                    f"+attr or -attr, case-sensitive, e.g. {family.profiles[-1].name})"))
        elif m["c"]:
            problems.append(Problem("bad-name", f"{name} is a compute-instance profile; layouts name GPU-instance "
                                    f"profiles only (e.g. {name.split('.', 1)[1]})"))
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            problems.append(Problem("bad-count", f"invalid count {count!r} for {name}: counts are whole "
                                    "numbers >= 0"))
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
    items = sorted((family.profile(n) for n, c in wanted for _ in range(c)),
                   key=lambda p: (-p.memory, -p.compute, p.name))
    starts = _search(items)
    placement = tuple(sorted((Instance(p.name, s, p.memory, p.compute) for p, s in zip(items, starts)
                              if s is not None), key=lambda i: i.start))
    if len(placement) < len(items):
        problems.append(Problem("no-placement", _explain(gpu_model, family, items, placement, starts)))
    used = sum(p.compute for p in items)
    if used > family.computeSlices and len(placement) == len(items):  # redundant guard (FACTS.md §5.1)
        problems.append(Problem("no-placement", f"no placement: {describe(wanted)} on {gpu_model} needs "
                                f"{used} of {family.computeSlices} compute slices"))
    return Result(gpu_model, family, wanted, () if problems else placement, tuple(problems), tuple(warnings))


def _unknown(name: str, gpu_model: str, family: MigFamily, mig: MigCatalog) -> str:
    msg = f"{name} is not a MIG profile of {gpu_model}; allowed: {', '.join(family.names)}"
    same = [p.name for p in family.profiles if p.compute == _g(name) and p.attributes == attributes(name)]
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
        if "me.all" in family.profile(n).attributes:
            others = [o for o, _ in wanted if o != n and "-me" not in family.profile(o).attributes]
            if others:
                out.append(Problem("media", f"{n} takes every media engine: it can share {gpu_model} only "
                                   f"with -me profiles, not {', '.join(others)} (NVML *_ALL_ME)"))
    limit = family.meInstancesMax
    me = [(n, c) for n, c in wanted if "me" in family.profile(n).attributes]
    if limit is not None and sum(c for _, c in me) > limit.count:
        low = " (confidence: low)" if limit.confidence == "low" else ""
        out.append(Problem("media", f"at most {limit.count} +me instance on {gpu_model}, the layout has "
                           f"{describe(me)}: {limit.why}{low}"))
    return out


def _search(items: list[MigProfile]) -> list[int | None]:
    """Start slots with pairwise disjoint intervals (FACTS.md §5.2): a depth-first search over the
    instances, largest first, memoised on (instance, used-units bitmask). When no full placement exists
    it returns the best partial one (most units, then instances placed; None = left out)."""
    memo: dict[tuple[int, int], tuple[tuple[int, int], list[int | None]]] = {}
    total = [(sum(p.memory for p in items[i:]), len(items) - i) for i in range(len(items) + 1)]

    def best(i: int, used: int) -> tuple[tuple[int, int], list[int | None]]:
        if i == len(items):
            return (0, 0), []
        if (i, used) not in memo:
            p, top = items[i], None
            for s in p.starts:
                bits = ((1 << p.memory) - 1) << s
                if not used & bits:
                    (mem, n), rest = best(i + 1, used | bits)
                    if top is None or (mem + p.memory, n + 1) > top[0]:
                        top = ((mem + p.memory, n + 1), [s] + rest)
                    if top[0] == total[i]:
                        break
            if top is None or top[0] != total[i]:
                score, rest = best(i + 1, used)
                if top is None or score > top[0]:
                    top = (score, [None] + rest)
            memo[(i, used)] = top
        return memo[(i, used)]

    return best(0, 0)[1]


def _explain(gpu_model: str, family: MigFamily, items: list[MigProfile], placed, starts) -> str:
    mem, g = sum(p.memory for p in items), sum(p.compute for p in items)
    need = []
    if mem > family.units:
        need.append(f"needs {mem} of {family.units} {family.unit}s")
    if g > family.computeSlices:
        need.append(f"needs {g} of {family.computeSlices} compute slices")
    if not need:
        need.append(f"fits by totals ({mem}/{family.units} {family.unit}s, {g}/{family.computeSlices} "
                    "compute slices) but its allowed start slots collide")
    left = Counter(p.name for p, s in zip(items, starts) if s is None)
    parts = []
    for name, n in left.items():
        p = family.profile(name)
        hit = [str(i) for i in placed
               if any(i.start < s + p.memory and s < i.start + i.size for s in p.starts)]
        parts.append(f"{name} x{n} unplaced (its starts {','.join(map(str, p.starts))} collide with "
                     f"{', '.join(hit)})")
    free = [u for u in range(family.units) if not any(i.start <= u < i.start + i.size for i in placed)]
    return (f"no placement: {describe(Counter(p.name for p in items))} on {gpu_model} {'; '.join(need)}; best fit "
            f"{', '.join(map(str, placed))} leaves {'; '.join(parts)}; free {family.unit}s: "
            f"{','.join(map(str, free)) or 'none'}")
