"""Profile rules for MIG layouts: each pool's layout must fit its GPU (placement search).

check_layouts_fit_their_gpus (validate/rules.py), for every node pool with a non-empty `mig.layout`: the GPU must be MIG-capable and the layout must fit one GPU of that
model (geometry.check_layout: known profiles, max counts, media-engine rules, a placement); errors are
located at `spec.nodePools[i].mig.layout`. `strategy: single` (also the default when omitted) needs
exactly one profile kind; that error is located at `spec.nodePools[i].mig.strategy`.

Sources: ../shared/refs/mig/FACTS.md §0, §4-§6 (through catalog/data/mig.yaml); NVIDIA's
device plugin and GFD with `MIG_STRATEGY=single` advertise one resource per GPU, so a pool layout mixing
profile kinds needs `mixed`.
"""

from __future__ import annotations

from gpuop.mig import geometry
from gpuop.validate.rules import Context, rule


@rule("mig-layout-fits-gpu", source="catalog/data/mig.yaml (NVIDIA MIG user guide: supported profiles and "
      "placements); k8s-device-plugin: strategy single needs one profile kind")
def check_layouts_fit_their_gpus(ctx: Context) -> list:
    """A pool's MIG layout that one GPU of its model cannot hold (unknown profiles, counts, media engines,
    no placement), or more than one profile kind under strategy single."""
    errors: list = []
    warnings: list = []
    at, loaded, cat = ctx.at, ctx.loaded, ctx.cat
    for i, pool in enumerate(ctx.spec.nodePools):
        mig = pool.mig
        if mig is None or not mig.layout:
            continue
        if cat.gpus and pool.gpu not in cat.gpus:
            continue  # validate reports the unknown model at spec.nodePools[i].gpu
        where = ("spec", "nodePools", i, "mig", "layout")
        result = geometry.check_layout(pool.gpu, dict(mig.layout), gpus=cat.gpus or None)
        errors += [at(where, reason) for reason in result.reasons]
        warnings += [at(where, w, "warning") for w in result.warnings]
        if mig.strategy == "single" and result.family is not None:
            problem = geometry.single_strategy_problem(mig.layout)
            if problem:
                loc = ("spec", "nodePools", i, "mig", "strategy")
                if loc not in loaded.positions.table:
                    problem = problem.replace("strategy single", "strategy single (the default when omitted)", 1)
                errors.append(at(loc, problem))
    return errors + warnings


RULES = ((check_layouts_fit_their_gpus,),)


def applies(ctx: Context) -> bool:
    return True
