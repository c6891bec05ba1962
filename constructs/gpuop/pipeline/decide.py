"""What a compile does with one cluster: a named state with its reason, decided once before any work.

Modelled on Flux helm-controller's DetermineReleaseState: the facts gathered first (the stats proof of the last
run, the build-cache entry, the previous output's index entry and lock), then one state, then one action per
state in pipeline/run.py:

| state       | when                                                                       | action                      |
|-------------|----------------------------------------------------------------------------|-----------------------------|
| PROVEN      | every input file has the stats the last successful run read it with, same  | index entry, folder, lock   |
|             | salt, folder as written (pipeline/noop.py `proven`)                        | entry and warnings kept     |
| ELSEWHERE   | a cache entry names the cluster and its name hashes to another shard       | named only (never built)    |
| ON_DISK     | a cache entry the previous index.json vouches for, and the folder on disk  | the folder linked unchanged |
|             | is what it writes (outputs/cluster.py `reusable`)                          |                             |
| FROM_CACHE  | a cache entry the previous index.json vouches for, its files as its header | the cached files written    |
| BUILD       | anything else (no cache, no entry, not vouched for, files missing or not   | load, validate, plan,       |
|             | what the header says)                                                      | synthesize, package         |

The cache is a hint, never evidence: an entry is used only when an index.json outside the cache (the previous
output's) records the same inputs compiling to the tree the entry claims. The chart version of a cluster is
decided here for the states that know its content (ON_DISK, FROM_CACHE); a BUILD's is decided by the worker that
builds it (`chart_version`, from the same lock entry) and carried on the build from then on.
"""

from __future__ import annotations

import dataclasses
import enum
import hashlib
from dataclasses import dataclass
from typing import Callable

from gpuop.outputs.cluster import ClusterBuild, expected_tree, reusable
from gpuop.outputs.version import next_version


class State(enum.Enum):
    PROVEN = "proven"
    ELSEWHERE = "elsewhere"
    ON_DISK = "on disk"
    FROM_CACHE = "from cache"
    BUILD = "build"


@dataclass(frozen=True)
class Facts:
    """What is known of one profile before anything of it is compiled. Each field is read by `decide` only."""
    proven: str | None = None           # the cluster name, when the stats proof covers it (noop.proven)
    hit: dict | None = None             # its build-cache header (BuildCache.get), None: no entry or no cache
    cached: bool = True                 # a build cache is in use at all (for the reason only)
    stored: Callable[[], dict | None] = lambda: None    # the entry's files, read only when they must be written
    previous: object = None             # write.Previous: the last output (its index, lock, charts)
    record: dict | None = None          # the provenance the profile compiles with now (keys.provenance)
    locks: dict = dataclasses.field(default_factory=dict)   # the previous lock's clusters: name -> entry
    trusted: frozenset = frozenset()    # folders of `previous` whose stats are as the last run wrote them
    reuse: bool = True                  # an unchanged folder may be linked from `previous` (else written)
    shard: tuple[int, int] | None = None


@dataclass(frozen=True)
class Decision:
    state: State
    reason: str
    name: str | None = None             # known without building: PROVEN, ELSEWHERE, ON_DISK, FROM_CACHE
    chart_version: str | None = None    # ON_DISK, FROM_CACHE (a BUILD's is the worker's: `chart_version`)
    build: ClusterBuild | None = None   # ON_DISK: without files (the folder on disk); FROM_CACHE: with the cached files
    warnings: tuple = ()                # FROM_CACHE, ON_DISK: the entry's warnings (Issue fields)


def in_shard(name: str, shard: tuple[int, int] | None) -> bool:
    """`synth --shard K/N`: the cluster whose name hashes to K of N."""
    if shard is None:
        return True
    k, n = shard
    return int(hashlib.sha256(name.encode()).hexdigest()[:8], 16) % n == k - 1


def chart_version(build: ClusterBuild, locks: dict) -> str:
    """The chart version the lock gives a cluster's content: its own lock entry only (the same content keeps
    its version; outputs/version.py)."""
    return next_version(locks.get(build.name), build.digest, build.minor_key)


def witness(previous, name: str, record: dict | None, version: str) -> str | None:
    """The tree digest the previous output's index.json records for this cluster, when it records the same
    inputs (provenance) and the same chart version: what a cache entry must agree with to be used."""
    entry = previous.index.get(name) if previous is not None and record is not None else None
    if not entry or entry.get("chartVersion") != version:
        return None
    prov = entry.get("provenance")
    if not isinstance(prov, dict) or prov.get("inputs") != record["inputs"]:
        return None
    tree = entry.get("treeDigest")
    return tree if isinstance(tree, str) else None


def decide(facts: Facts) -> Decision:
    """The state of one cluster from its facts alone (see the module docstring)."""
    if facts.proven is not None:
        return Decision(State.PROVEN, "its input files have the stats the last run read them with, and its folder "
                        "is as that run wrote it", facts.proven)
    if facts.hit is None:
        return Decision(State.BUILD, "no entry in the build cache" if facts.cached else "no build cache")
    build = ClusterBuild(files=None, **facts.hit["build"])
    if not in_shard(build.name, facts.shard):
        return Decision(State.ELSEWHERE, "another shard builds it", build.name)
    version = chart_version(build, facts.locks)
    seen = witness(facts.previous, build.name, facts.record, version)
    if seen is None or (facts.hit.get("trees") or {}).get(version) != seen:
        return Decision(State.BUILD, "the previous index.json does not vouch for the cache entry")
    build = dataclasses.replace(build, chart_version=version)
    warnings = tuple(facts.hit["warnings"])
    if facts.reuse and reusable(build, facts.previous, version, build.name in facts.trusted):
        return Decision(State.ON_DISK, "its folder on disk is what the vouched-for cache entry writes", build.name,
                        version, build, warnings)
    stored = facts.stored()
    if stored is None:
        return Decision(State.BUILD, "the cache entry's files are missing")
    build = dataclasses.replace(build, files=stored)
    if expected_tree(build, version) != seen:
        return Decision(State.BUILD, "the cache entry's files are not what its header says")
    return Decision(State.FROM_CACHE, "the previous index.json vouches for the cache entry", build.name, version,
                    build, warnings)
