"""The values the synthesize stage hands to the writers: a cluster's objects with their owners.

Kept apart from synth.py so writers and the cache never import cdk8s (which starts Node).
"""

from __future__ import annotations

from dataclasses import dataclass

from gpuop.plan.model import StackPlan


@dataclass(frozen=True)
class StackObject:
    component: str            # registry name of the component that owns it
    values_key: str | None    # the Helm values key that toggles it (None: always on)
    body: dict                # with value slots still in it


@dataclass(frozen=True)
class Synthesized:
    plan: StackPlan
    objects: tuple[StackObject, ...]
