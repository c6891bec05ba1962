#!/usr/bin/env python3
"""Build NVIDIA's GPU Operator controller code of an older release as the differential test's oracle.

    tools/nvidia-operator/build_release.py TAG [--src CHECKOUT] [--go GO]

The renderer (../shared/tools/nvidia-operator: render.sh, build.sh, harness/) is written against v26.7.0. For an
older tag this copies the tool folder to BUILDS/TAG/tool, makes the edits of HARNESS_EDITS[TAG] to that copy's
harness (never to the shared one), copies the checkout (default BUILDS/TAG/src, an unmodified NVIDIA/gpu-operator
at TAG with its vendor/) to BUILDS/TAG/build-src, drops compat/before-v26.7/ and compat/TAG/<package>/*.go (the names the harness takes from v26.7.0,
written with the tag's own code) into those packages, runs the copy's build.sh under `nice -n 15`, and copies
the tag's chart (deployments/gpu-operator) to BUILDS/TAG/chart. BUILDS: $GPUOP_NVIDIA_OPERATOR_BUILDS, else
~/.cache/gpuop/nvidia-operator (where tests/operator_differential.py looks). The build log and its time go to
BUILDS/TAG/build.log. Offline: build.sh builds from the checkout's vendor/ with GOPROXY=off.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import stat
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
MODULE = "module github.com/NVIDIA/gpu-operator"

CONTROLLERS = "harness/controllers/zz_gpuop_render_test.go"
STATE = "harness/internal/state/zz_gpuop_render_test.go"
# The NVIDIADriver half before v26.7.0 (both older tags): no internal/nvidiadriver package (getNodePools selects a
# CR's nodes by its nodeSelector while rendering), and getManifestObjects reads the ClusterPolicy itself from the
# info catalog, not the host root (compat/<tag>/internal/state keeps it in gpuopClusterPolicy).
STATE_BEFORE_26_7 = (
    ('\t"github.com/NVIDIA/gpu-operator/internal/nvidiadriver"\n', "",
     "no internal/nvidiadriver before v26.7.0"),
    ('\tif _, err := nvidiadriver.AssignOwners(ctx, cl); err != nil {\n\t\tt.Fatalf("AssignOwners: %v", err)\n\t}\n',
     "", "no AssignOwners before v26.7.0: internal/state/nodepool.go getNodePools selects by the CR's nodeSelector"),
    ("\t\thostRoot = cp.Spec.HostPaths.RootFS\n",
     "\t\thostRoot = cp.Spec.HostPaths.RootFS\n\t\tgpuopClusterPolicy = *cp\n",
     "keep the ClusterPolicy for the info catalog"),
    ("\tcatalog.Add(InfoTypeHostRoot, hostRoot)\n",
     "\t_ = hostRoot\n\tcatalog.Add(InfoTypeClusterPolicyCR, gpuopClusterPolicy)\n",
     "getManifestObjects reads InfoTypeClusterPolicyCR (internal/state/driver.go), there is no InfoTypeHostRoot"),
    ("\t\tobjs, err := sd.getManifestObjects(ctx, cr, catalog)\n",
     "\t\tif err := gpuopValidateNodeSelector(ctx, cl, cr); err != nil {\n"
     '\t\t\tlog = append(log, fmt.Sprintf("%s ERROR %v", cr.Name, err))\n\t\t\tcontinue\n\t\t}\n'
     "\t\tobjs, err := sd.getManifestObjects(ctx, cr, catalog)\n",
     "the controller refuses every CR while two CRs' nodeSelectors select one node, before rendering "
     "(controllers/nvidiadriver_controller.go, internal/validator/validator.go); v26.7.0 assigns owners instead"),
)
# Per tag, per harness file of the tool folder: edits to the copy of the shared harness for what the tag's code
# lacks and a compat file cannot add (struct fields, asset folders, packages): (text, replacement, why). Each text
# must occur exactly once, so a changed shared harness stops the build instead of being edited wrongly.
HARNESS_EDITS: dict[str, dict[str, tuple[tuple[str, str, str], ...]]] = {
    "v26.3.3": {CONTROLLERS: (), STATE: STATE_BEFORE_26_7},
    "v25.10.1": {
        CONTROLLERS: (
            ('\tif err := validateClusterPolicySpec(&cp.Spec); err != nil {\n'
             '\t\tt.Fatalf("validateClusterPolicySpec: %v", err)\n\t}\n', "",
             "v25.10.1's init() validates nothing (controllers/state_manager.go L754-888; validateClusterPolicySpec "
             "came later)"),
            ('"state-kata-device-plugin", ', "",
             "v25.10.1 has no assets/state-kata-device-plugin and init() adds no such state (state_manager.go "
             "L784-803)"),
            ('\tif n.hasGPUNodes {\n\t\tn.gpuNodeOSRelease, n.gpuNodeOSTag, err = n.getGPUNodeOSInfo()\n'
             '\t\tmust(err)\n\t}\n', "",
             "v25.10.1's ClusterPolicyController has no gpuNodeOSRelease/gpuNodeOSTag (state_manager.go L142-167): "
             "its transforms read the GPU node's OS where they need it"),
            ('osTag=%s openshift=%q dtk=%v", n.runtime, n.gpuNodeOSTag,', 'openshift=%q dtk=%v", n.runtime,',
             "the same missing field, in the harness's log line"),
        ),
        STATE: STATE_BEFORE_26_7,
    },
}


def builds_root() -> Path:
    env = os.environ.get("GPUOP_NVIDIA_OPERATOR_BUILDS")
    return Path(env) if env else Path.home() / ".cache" / "gpuop" / "nvidia-operator"


def shared_tool() -> Path:
    env = os.environ.get("GPUOP_TOOLS")
    return (Path(env) if env else REPO.parent / "shared" / "tools") / "nvidia-operator"


def _writable(path: Path) -> None:
    """The tool folder's copies are read-only (the shared folder is): make a tree removable and writable."""
    for root, dirs, files in os.walk(path):
        for name in dirs + files:
            p = Path(root) / name
            if not p.is_symlink():
                p.chmod(p.stat().st_mode | stat.S_IWUSR)
    path.chmod(path.stat().st_mode | stat.S_IWUSR)


def _fresh(path: Path) -> None:
    if path.exists():
        _writable(path)
        shutil.rmtree(path)


def copy_tool(tag: str, shared: Path, dest: Path) -> list[str]:
    """The shared tool folder without its build output, the tag's harness edits applied; returns the edits made."""
    _fresh(dest)
    shutil.copytree(shared, dest, ignore=shutil.ignore_patterns("bin", "root"))
    _writable(dest)
    done = []
    for name, edits in HARNESS_EDITS[tag].items():
        harness = dest / name
        text = harness.read_text()
        for old, new, why in edits:
            if text.count(old) != 1:
                raise SystemExit(f"{harness}: the text to edit for {tag} ({why}) occurs {text.count(old)} times, "
                                 "not once: the shared harness changed; update HARNESS_EDITS")
            text = text.replace(old, new)
            done.append(f"{name}: {why}")
        harness.write_text(text)
    return done


def copy_checkout(tag: str, src: Path, work: Path) -> list[str]:
    """A copy of the unmodified checkout with the compat files (compat/before-v26.7/ and compat/TAG/, each
    <package folder>/*.go) in their package folders; returns their paths."""
    _fresh(work)
    shutil.copytree(src, work, symlinks=True, ignore=shutil.ignore_patterns(".git"))
    _writable(work)
    names = []
    # what every tag before v26.7.0 shares, then the tag's own
    for base in (HERE / "compat" / "before-v26.7", HERE / "compat" / tag):
        for f in sorted(base.rglob("*.go")):
            rel = f.relative_to(base)
            shutil.copy(f, work / rel)
            names.append(str(rel))
    return names


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("tag", choices=sorted(HARNESS_EDITS))
    ap.add_argument("--src", type=Path, help="checkout of NVIDIA/gpu-operator at TAG (default BUILDS/TAG/src)")
    ap.add_argument("--go", default="go", help="Go >= the tag's go.mod (default: go on PATH)")
    args = ap.parse_args(argv)
    root = builds_root() / args.tag
    src = (args.src or root / "src").resolve()
    gomod = src / "go.mod"
    if not gomod.is_file() or MODULE not in gomod.read_text() or not (src / "vendor").is_dir():
        print(f"{src}: not a checkout of NVIDIA/gpu-operator with vendor/ (fetch github:NVIDIA/gpu-operator and "
              f"`git worktree add` the tag {args.tag})", file=sys.stderr)
        return 2
    shared = shared_tool()
    if not (shared / "build.sh").is_file():
        print(f"{shared}: no nvidia-operator tool folder (set GPUOP_TOOLS)", file=sys.stderr)
        return 2
    edits = copy_tool(args.tag, shared, root / "tool")
    compat = copy_checkout(args.tag, src, root / "build-src")
    log = root / "build.log"
    start = time.monotonic()
    with log.open("w") as out:
        out.write(f"tag {args.tag}\ncompat {' '.join(compat)}\n" + "".join(f"harness edit: {e}\n" for e in edits))
        out.flush()
        # nice: the machine is shared with test runs
        rc = subprocess.run(["nice", "-n", "15", str(root / "tool" / "build.sh"), str(root / "build-src"), args.go],
                            stdout=out, stderr=subprocess.STDOUT).returncode
        seconds = time.monotonic() - start
        out.write(f"rc={rc} seconds={seconds:.0f}\n")
    if rc != 0:
        print(f"build of {args.tag} failed (rc {rc}): {log}", file=sys.stderr)
        return 1
    _fresh(root / "chart")
    shutil.copytree(root / "build-src" / "deployments" / "gpu-operator", root / "chart", symlinks=True)
    version = re.search(r"^version:\s*(\S+)", (root / "chart" / "Chart.yaml").read_text(), re.M)
    print(f"built {args.tag} in {seconds:.0f} s: {root / 'tool' / 'render.sh'}, chart {root / 'chart'} "
          f"({version.group(1) if version else '?'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
