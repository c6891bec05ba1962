"""`gpuop init [DIR]`: a starter project for an installed gpuop.

It writes what the source checkout has and an installed gpuop cannot reach otherwise:

- gpuop.yaml (the settings: where dist/ lives in git) and profiles/example.yaml, a small profile whose
  `$schema` line points at schemas/profile.schema.json, which init writes from the installed gpuop (the
  same files as `gpuop schema`), so an editor checks profiles against the version that compiles them;
- package.json and package-lock.json: `npm ci` installs Node 24 (jsii's runtime for cdk8s) and the cdk8s CLI
  into node_modules/, where gpuop finds them by itself; cdk8s.yaml for `cdk8s synth` (`npm run synth`
  runs it with the CLI's upgrade check off, which otherwise asks the npm registry on every run);
- .gitignore (node_modules/, the build cache, the output lock, cdk8s.out/, the report page) and the review gate for pull
  requests (.github/workflows/gpuop.yml, the workflow of examples/ci installing this gpuop release).

It never overwrites: when any of these files exists, nothing is written and each one is reported.
"""

from __future__ import annotations

import sys
from pathlib import Path

from gpuop import __version__
from gpuop.errors import Issue, UserError

SCAFFOLD = Path(__file__).parent / "scaffold"
# The install step of examples/ci/github-actions.yml, and what a project of profiles installs instead.
CI_INSTALL = "python -m pip install --disable-pip-version-check .\n"
CI_INSTALL_RELEASE = (f'python -m pip install --disable-pip-version-check "gpuop=={__version__}"'
                      "   # or the URL you install gpuop from\n")

SETTINGS = """\
# gpuop project settings: where the compiled dist/ lives in git, for the Argo CD and Flux objects.
apiVersion: gpuop/v1alpha1
kind: Settings
gitops:
  repoURL: https://git.example.com/platform/gpu-clusters.git     # this repository's clone URL
  revision: main
  path: dist
"""

PROFILE = """\
# yaml-language-server: $schema=../schemas/profile.schema.json
# One cluster: a vanilla Kubernetes cluster with a pool of L40S nodes. `gpuop synth` compiles every
# profile of profiles/ into dist/<name>/ (Helm chart, Kustomize overlay, manifests, Argo CD and Flux
# objects); `gpuop validate` checks them without writing. Files whose name starts with "_" are partial
# profiles for `extends:`.
apiVersion: gpuop/v1alpha1
kind: ClusterProfile
metadata:
  name: example
  labels: {environment: dev}
spec:
  platform: {type: kubernetes, version: "1.33"}
  os: ubuntu24.04
  driver: {version: "580"}
  nodePools:
    - name: inference
      nodes: 2
      gpusPerNode: 1
      gpu: L40S
"""

CDK8S = """\
# `cdk8s synth` (or `npm run synth`, with the CLI's upgrade check off) runs gpuop's App: the profiles of
# profiles/ (or GPUOP_PROFILES) through the same stages as `gpuop synth`, one cdk8s Chart per cluster,
# into cdk8s.out/. `python3` is the Python gpuop is installed in (an activated venv).
language: python
app: python3 -m gpuop.cli.cdk8s_app
output: cdk8s.out
"""

GITIGNORE = """\
# Node 24 and the cdk8s CLI (`npm ci`)
node_modules/
# gpuop's build cache and the lock of a running `gpuop synth`
.gpuop-cache/
.dist.lock
# `cdk8s synth` output (dist/ is committed: it is what Argo CD and Flux apply)
cdk8s.out/
# `gpuop report`'s page (a build artifact: publish it from CI)
/report/
"""


def files() -> dict[str, str]:
    """Every file of the starter project, by its path in the project."""
    from gpuop.kube.yamlio import dump_json
    from gpuop.outputs.values import values_schema
    from gpuop.profile.models import profile_json_schema

    workflow = (SCAFFOLD / "github-actions.yml").read_text()
    if CI_INSTALL not in workflow:     # the example changed its install step: say so rather than ship it wrong
        raise AssertionError("scaffold/github-actions.yml has no install step to replace")
    workflow = workflow.replace(CI_INSTALL, CI_INSTALL_RELEASE, 1)
    return {
        "gpuop.yaml": SETTINGS,
        "profiles/example.yaml": PROFILE,
        "schemas/profile.schema.json": dump_json(profile_json_schema()),
        "schemas/values.schema.json": dump_json(values_schema()),
        "package.json": (SCAFFOLD / "package.json").read_text(),
        "package-lock.json": (SCAFFOLD / "package-lock.json").read_text(),
        "cdk8s.yaml": CDK8S,
        ".gitignore": GITIGNORE,
        ".github/workflows/gpuop.yml": workflow,
    }


def run(target: Path) -> list[str]:
    """Write the starter project into `target` (created if missing); the paths written."""
    content = files()
    if target.exists() and not target.is_dir():
        raise UserError(Issue(str(target), 0, 0, "", "is a file, not a folder; pass the folder to create the "
                              "project in (e.g. gpuop init my-clusters)"))
    present = [p for p in content if (target / p).exists()]
    if present:
        raise UserError([Issue(str(target / p), 0, 0, "", "already exists; gpuop init writes nothing over a "
                               "file (move it away, or run init in an empty folder)") for p in present])
    try:
        for rel, text in content.items():
            path = target / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            with open(path, "x", encoding="utf-8", newline="\n") as fh:
                fh.write(text)
    except OSError as exc:
        raise UserError(Issue(str(target), 0, 0, "", f"cannot be written: {exc.strerror or exc}")) from None
    return list(content)


def main(target: Path) -> int:
    written = run(target)
    shown = "." if str(target) in ("", ".") else str(target)
    print(f"gpuop: wrote a starter project in {shown}: {', '.join(written)}", file=sys.stderr)
    print("next: npm ci (Node 24 and the cdk8s CLI), then gpuop synth (profiles/ -> dist/)", file=sys.stderr)
    return 0
