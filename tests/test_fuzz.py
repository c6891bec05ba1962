"""Property-based fuzzing of the profile input: documents that mix valid fields with garbage
(wrong types, huge numbers, newlines, control characters, lone surrogates, deep nesting, YAML-ish noise)
go through the real command line, in process (`gpuop.cli.main.main`, the same boundary `gpuop` runs).

The property: `gpuop validate` exits 0 or 2, never 1 (a bug), and prints no traceback; when it exits 0,
`gpuop synth` exits 0 or 2 too, and on 0 every file it wrote parses (YAML or JSON). On 2 the last line
is the error count. Bounded time comes from the input limits (docs/input-limits.md); the suite asserts
no timings.

Budget: GPUOP_FUZZ_EXAMPLES examples (default 20, derandomized so CI is repeatable), of which the first
GPUOP_FUZZ_SYNTHS valid ones (default 4) are compiled; `make fuzz` runs a larger, random budget and
compiles every valid document.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
from pathlib import Path

import yaml
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from gpuop.cli.main import main

REPO = Path(__file__).resolve().parents[1]
BUDGET = int(os.environ.get("GPUOP_FUZZ_EXAMPLES", "20"))
LONG_RUN = "GPUOP_FUZZ_EXAMPLES" in os.environ   # `make fuzz`: random examples, and shrink what fails
# A synth costs ~1-3 s (cdk8s); in the suite only the first few valid documents are compiled, so the
# test stays well under 30 s. `make fuzz` compiles every valid one.
SYNTHS = [int(os.environ.get("GPUOP_FUZZ_SYNTHS", "1000000" if LONG_RUN else "4"))]

# ---- values: valid ones for each field, and garbage any field may get instead --------------------

GARBAGE_TEXT = st.text(alphabet=st.sampled_from(
    list("abcXYZ019-_./: \n\t{}[]&*!|>'\"#%@`,?") + ["\x00", "\x01", "\x7f", "\u00e9", "\ud800", "\udfff",
                                                     "\u2028", "\ufeff", "\U0001F600"]), max_size=40)
SCALAR_GARBAGE = st.one_of(
    GARBAGE_TEXT,
    st.integers(min_value=-(2**70), max_value=2**70),
    st.sampled_from([2**31, 2**63, -1, 0, 1.5, float("inf"), float("nan"), True, False, None, "", "\n", "a\n"]),
)
GARBAGE = st.recursive(SCALAR_GARBAGE, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(GARBAGE_TEXT, inner, max_size=4)), max_leaves=12)


def maybe(valid) -> st.SearchStrategy:
    """A valid value, garbage one time in eight: keeps enough documents valid to reach synth."""
    # the garbage choice comes last: hypothesis favours (and shrinks towards) the first elements
    return st.sampled_from([False] * 7 + [True]).flatmap(lambda garbage: GARBAGE if garbage else valid)


NAMES = st.sampled_from(["c1", "prod-east", "a", "x" * 53, "gpu-01"])
POOL = st.fixed_dictionaries({
    "name": maybe(st.sampled_from(["train", "infer", "p1"])),
    "gpu": maybe(st.sampled_from(["H100-SXM5-80GB", "L40S", "A100-SXM4-80GB"])),
}, optional={
    "nodeSelector": maybe(st.dictionaries(st.sampled_from(["pool", "node.kubernetes.io/instance-type"]),
                                          st.sampled_from(["a", "p5.48xlarge", ""]), max_size=2)),
    "mig": maybe(st.fixed_dictionaries({"strategy": st.sampled_from(["single", "mixed"]),
                                        "layout": st.sampled_from([{"1g.10gb": 7}, {"3g.40gb": 2}, {}])})),
    "sharing": maybe(st.sampled_from([{"timeSlicing": {"replicas": 4}}, {"mps": {"replicas": 2}}])),
})
TOLERATION = st.fixed_dictionaries({}, optional={
    "key": maybe(st.sampled_from(["nvidia.com/gpu", "a", ""])),
    "operator": maybe(st.sampled_from(["Exists", "Equal"])),
    "value": maybe(st.sampled_from(["x", "", "yes"])),
    "effect": maybe(st.sampled_from(["NoSchedule", "NoExecute", "PreferNoSchedule"])),
    "tolerationSeconds": maybe(st.integers(min_value=0, max_value=3600)),
})
SPEC = st.fixed_dictionaries({
    "platform": maybe(st.just({"type": "kubernetes", "version": "1.33"})),
    "os": maybe(st.sampled_from(["ubuntu24.04", "ubuntu22.04"])),
    "nodePools": maybe(st.lists(POOL, min_size=1, max_size=3)),
}, optional={
    "namespace": maybe(st.sampled_from(["gpu-operator", "gpu"])),
    "driver": maybe(st.sampled_from([{"version": "580"}, {"enabled": False}, {"upgradePolicy": {"maxParallelUpgrades": 2}}])),
    "images": maybe(st.sampled_from([{"pullSecrets": ["s1"]}, {"registry": "registry.example.com/nvidia"}])),
    "daemonsets": maybe(st.fixed_dictionaries({}, optional={
        "tolerations": st.lists(TOLERATION, max_size=2),
        "priorityClassName": maybe(st.sampled_from(["system-node-critical", "gpu-critical"]))})),
    "devicePlugin": maybe(st.sampled_from([{"enabled": True}, {"resources": {"requests": {"cpu": "50m"}}}])),
})
DOCUMENT = st.fixed_dictionaries({
    "apiVersion": maybe(st.just("gpuop/v1alpha1")),
    "kind": maybe(st.just("ClusterProfile")),
    "metadata": maybe(st.fixed_dictionaries({"name": maybe(NAMES)}, optional={
        "labels": maybe(st.dictionaries(st.sampled_from(["env", "region"]), st.sampled_from(["prod", "us-east-1"]),
                                        max_size=2))})),
    "spec": maybe(SPEC),
}, optional={"extends": maybe(st.just("_base.yaml"))})


def _as_text(doc: dict, noise: str, where: int) -> str:
    """The document as YAML (PyYAML escapes what YAML cannot hold raw, e.g. "\\ud800"), sometimes with
    YAML-ish noise spliced in at a random place."""
    text = yaml.safe_dump(doc, sort_keys=False, allow_unicode=False, width=1000)
    if noise:
        cut = where % (len(text) + 1)
        text = text[:cut] + noise + text[cut:]
    return text


def _run(root: Path, *args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    cwd = os.getcwd()
    os.chdir(root)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(list(args))
    finally:
        os.chdir(cwd)
    return code, out.getvalue(), err.getvalue()


def _assert_contract(code: int, err: str) -> None:
    assert code in (0, 2), err
    assert "Traceback" not in err and "please report" not in err and "internal error" not in err, err
    if code == 2:
        last = err.rstrip("\n").splitlines()[-1]
        assert last.startswith("gpuop: ") and last.endswith("; nothing written"), err


def _parses(dist: Path) -> None:
    """Every YAML and JSON file parses (Helm templates are Go templates, not YAML: the Helm tests render them)."""
    for f in sorted(dist.rglob("*")):
        if "templates" in f.relative_to(dist).parts:
            continue
        if f.suffix in (".yaml", ".yml"):
            list(yaml.safe_load_all(f.read_text(encoding="utf-8")))
        elif f.suffix == ".json":
            json.loads(f.read_text(encoding="utf-8"))


@settings(max_examples=BUDGET, deadline=None, database=None, derandomize=not LONG_RUN,
          phases=list(Phase) if LONG_RUN else [Phase.explicit, Phase.generate],   # shrinking takes minutes
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much])
@given(doc=DOCUMENT, noise=st.one_of(st.just(""), st.just(""), GARBAGE_TEXT), where=st.integers(min_value=0))
def test_fuzzed_profiles_exit_0_or_2_never_a_bug(tmp_path_factory, doc, noise, where):
    root = tmp_path_factory.mktemp("fuzz")
    (root / "profiles").mkdir()
    shutil.copy(REPO / "gpuop.yaml", root / "gpuop.yaml")
    (root / "profiles" / "_base.yaml").write_text(
        "apiVersion: gpuop/v1alpha1\nkind: ClusterProfile\nspec: {os: ubuntu24.04}\n")
    text = _as_text(doc, noise, where)
    (root / "profiles" / "fuzz.yaml").write_bytes(text.encode("utf-8", "surrogatepass"))
    code, out, err = _run(root, "validate")
    _assert_contract(code, err)
    if code == 0 and SYNTHS[0] > 0:
        SYNTHS[0] -= 1
        code, out, err = _run(root, "synth", "--no-cache", "--jobs", "1", "--no-progress", "-o", "dist")
        _assert_contract(code, err)
        if code == 0:
            _parses(root / "dist")
