"""What the validate stage hands forward: the loaded profile, its typed model and the warnings found.

It lives below both stages so that the plan, which reads it, needs nothing of validate (validate/runner.py
makes it, plan/build.py reads it)."""

from __future__ import annotations

from dataclasses import dataclass

from gpuop.errors import Issue
from gpuop.profile.load import LoadedProfile
from gpuop.profile.models import ClusterProfile


@dataclass(frozen=True)
class ValidProfile:
    loaded: LoadedProfile
    profile: ClusterProfile
    warnings: tuple[Issue, ...] = ()
