"""pipeline/decide.py: each cluster's state from its facts alone — no profile, no cache folder, no process."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpuop.outputs.cluster import ClusterBuild, expected_tree, files_digest, output_digest
from gpuop.outputs.version import VERSION_PLACEHOLDER
from gpuop.pipeline.decide import Facts, State, chart_version, decide, in_shard
from gpuop.pipeline.write import Previous

FILES = {"c/chart/Chart.yaml": f"name: c\nversion: {VERSION_PLACEHOLDER}\n", "c/manifests/a.yaml": "kind: A\n"}
BUILD = ClusterBuild("c", FILES, "sha256:content", "minor", {"name": "c", "chart": "c/chart"}, files_digest(FILES))
RECORD = {"inputs": "sha256:inputs"}


def _previous(tmp: Path, version: str = "0.1.0", inputs: str = "sha256:inputs", charts: bool = True,
              lock: dict | None = None) -> Previous:
    entry = {"name": "c", "chartVersion": version, "provenance": {"inputs": inputs},
             "treeDigest": expected_tree(BUILD, version), "outputDigest": output_digest(BUILD, version)}
    return Previous(tmp, {"clusters": lock or {}}, {"c": entry}, {f"c-{version}.tgz": tmp / "x.tgz"} if charts else {})


def _hit(version: str = "0.1.0", tree: str | None = None) -> dict:
    return {"build": BUILD.head(), "warnings": [{"file": "p.yaml", "line": 1, "col": 1, "path": "spec",
                                                 "message": "w", "severity": "warning"}],
            "trees": {version: tree or expected_tree(BUILD, version)}}


def _never():
    raise AssertionError("the cache entry's files were read")


def test_a_profile_the_stats_proof_covers_is_proven_without_a_cache_entry():
    d = decide(Facts(proven="c"))
    assert (d.state, d.name, d.build) == (State.PROVEN, "c", None)


def test_no_build_cache_means_build_and_says_so():
    d = decide(Facts(cached=False))
    assert (d.state, d.reason) == (State.BUILD, "no build cache")


def test_no_cache_entry_means_build_and_says_so():
    d = decide(Facts())
    assert (d.state, d.reason) == (State.BUILD, "no entry in the build cache")


def test_a_cached_cluster_of_another_shard_is_named_and_never_built():
    other = next(k for k in (1, 2) if not in_shard("c", (k, 2)))
    d = decide(Facts(hit=_hit(), shard=(other, 2), stored=_never))
    assert (d.state, d.name) == (State.ELSEWHERE, "c")


def test_a_cache_entry_without_a_previous_output_is_not_evidence(tmp_path):
    d = decide(Facts(hit=_hit(), record=RECORD, stored=_never))
    assert d.state is State.BUILD and "does not vouch" in d.reason


def test_a_cache_entry_whose_inputs_the_previous_index_does_not_record_is_rebuilt(tmp_path):
    d = decide(Facts(hit=_hit(), previous=_previous(tmp_path, inputs="sha256:other"), record=RECORD, stored=_never))
    assert d.state is State.BUILD and "does not vouch" in d.reason


def test_a_cache_entry_claiming_another_tree_than_the_index_records_is_rebuilt(tmp_path):
    d = decide(Facts(hit=_hit(tree="sha256:forged"), previous=_previous(tmp_path), record=RECORD, stored=_never))
    assert d.state is State.BUILD and "does not vouch" in d.reason


def test_a_vouched_for_entry_whose_folder_is_unchanged_is_kept_on_disk_without_reading_its_files(tmp_path):
    d = decide(Facts(hit=_hit(), previous=_previous(tmp_path), record=RECORD, trusted=frozenset({"c"}), stored=_never))
    assert (d.state, d.name, d.chart_version, d.build.files) == (State.ON_DISK, "c", "0.1.0", None)
    assert d.build.chart_version == "0.1.0" and [w["message"] for w in d.warnings] == ["w"]


def test_a_folder_on_disk_that_does_not_hash_to_its_digest_is_written_again_from_the_cache(tmp_path):
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "edited.yaml").write_text("by hand\n")
    d = decide(Facts(hit=_hit(), previous=_previous(tmp_path), record=RECORD, stored=lambda: dict(FILES)))
    assert (d.state, d.chart_version, d.build.files) == (State.FROM_CACHE, "0.1.0", FILES)


def test_without_reuse_a_vouched_for_entry_is_written_from_the_cache_even_when_unchanged(tmp_path):
    d = decide(Facts(hit=_hit(), previous=_previous(tmp_path), record=RECORD, trusted=frozenset({"c"}), reuse=False,
                     stored=lambda: dict(FILES)))
    assert d.state is State.FROM_CACHE


def test_a_vouched_for_entry_without_its_archive_is_not_kept_on_disk(tmp_path):
    d = decide(Facts(hit=_hit(), previous=_previous(tmp_path, charts=False), record=RECORD,
                     trusted=frozenset({"c"}), stored=lambda: dict(FILES)))
    assert d.state is State.FROM_CACHE


def test_a_cache_entry_whose_files_are_gone_is_rebuilt(tmp_path):
    d = decide(Facts(hit=_hit(), previous=_previous(tmp_path), record=RECORD, stored=lambda: None))
    assert (d.state, d.reason) == (State.BUILD, "the cache entry's files are missing")


@pytest.mark.parametrize("files", [{}, {**FILES, "c/manifests/a.yaml": "kind: B\n"}, {**FILES, "c/extra": "x"}])
def test_a_cache_entry_whose_files_are_not_what_its_header_says_is_rebuilt(tmp_path, files):
    d = decide(Facts(hit=_hit(), previous=_previous(tmp_path), record=RECORD, stored=lambda: files))
    assert (d.state, d.reason) == (State.BUILD, "the cache entry's files are not what its header says")


def test_the_chart_version_is_the_one_the_clusters_own_lock_entry_gives(tmp_path):
    lock = {"c": {"version": "0.4.2", "digest": BUILD.digest, "minorKey": "minor"},
            "other": {"version": "9.0.0", "digest": "sha256:x", "minorKey": "m"}}
    assert chart_version(BUILD, lock) == "0.4.2"
    assert chart_version(BUILD, {"c": {**lock["c"], "digest": "sha256:old"}}) == "0.4.3"
    assert chart_version(BUILD, {"c": {**lock["c"], "digest": "sha256:old", "minorKey": "was"}}) == "0.5.0"
    d = decide(Facts(hit=_hit("0.4.2"), previous=_previous(tmp_path, "0.4.2"), record=RECORD, locks=lock,
                     trusted=frozenset({"c"}), stored=_never))
    assert (d.state, d.chart_version, d.build.chart_version) == (State.ON_DISK, "0.4.2", "0.4.2")


def test_the_decided_chart_version_is_not_part_of_the_cache_entry():
    import dataclasses

    assert dataclasses.replace(BUILD, chart_version="1.2.3").head() == BUILD.head()



@given(inputs_match=st.booleans(), forged=st.booleans(), version_match=st.booleans(), trusted=st.booleans(),
       reuse=st.booleans(), charts=st.booleans(), stored=st.sampled_from(["ok", "missing", "other"]))
def test_a_cache_entry_is_used_only_when_the_previous_index_vouches_for_it(inputs_match, forged, version_match, trusted,
                                                                            reuse, charts, stored):
    out = Path("/nonexistent-gpuop-output")        # no folder on disk: only a trusted one is taken as unchanged
    previous = _previous(out, "0.1.0" if version_match else "0.2.0",
                         inputs="sha256:inputs" if inputs_match else "sha256:other", charts=charts)
    files = {"ok": dict(FILES), "missing": None, "other": {**FILES, "c/manifests/a.yaml": "kind: B\n"}}[stored]
    d = decide(Facts(hit=_hit(tree="sha256:forged" if forged else None), previous=previous, record=RECORD,
                     trusted=frozenset({"c"}) if trusted else frozenset(), reuse=reuse, stored=lambda: files))
    vouched = inputs_match and version_match and not forged
    if not vouched:
        want = State.BUILD
    elif reuse and trusted and charts:
        want = State.ON_DISK
    else:
        want = State.FROM_CACHE if stored == "ok" else State.BUILD
    assert d.state is want, d.reason
    assert (d.chart_version is not None) == (want in (State.ON_DISK, State.FROM_CACHE))


def test_assemble_writes_the_decided_chart_version_and_never_computes_one():
    # the version is decided once per cluster (decide / the worker that builds it); assemble only fills it in, so
    # a build without one is gpuop's bug, never a second, possibly different, computation
    import dataclasses
    import json

    from gpuop.outputs.cluster import assemble

    decided = dataclasses.replace(BUILD, chart_version="0.1.3")    # what the lock alone would not give: 0.1.0
    out = assemble([decided], None)
    assert json.loads(out.files["versions.lock.json"])["clusters"]["c"]["version"] == "0.1.3"
    assert out.files["c/chart/Chart.yaml"] == "name: c\nversion: 0.1.3\n"
    with pytest.raises(ValueError, match="no chart version decided"):
        assemble([BUILD], None)
