"""The `cdk8s synth` entry point (cdk8s.yaml): the same stacks as `gpuop synth`, one Chart per cluster.

Reads the bundled profiles (or GPUOP_PROFILES, a path list) through the same load/validate/plan
stages and lets cdk8s write the rendered manifests to its output folder; operator-mode clusters (whose
operands NVIDIA's operator deploys) go to its `preview/` subfolder, never beside the deployable ones.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path


def main() -> int:
    from gpuop.errors import UserError

    paths = [Path(p) for p in os.environ.get("GPUOP_PROFILES", "profiles").split(os.pathsep) if p]
    try:
        from gpuop.components.runtime import start_cdk8s

        cdk8s = start_cdk8s()        # the Node jsii runs on; none is exit 2 with what to install
        from gpuop.pipeline.run import plan_all

        plans, warnings = plan_all(paths)
    except UserError as exc:
        print(exc, file=sys.stderr)
        return 2
    from gpuop.kube.folders import PREVIEW
    from gpuop.stack.chart import GpuStack

    app = cdk8s.App()
    # operator mode: NVIDIA's operator deploys the operands; gpuop's are a review preview, written apart
    # (<output>/preview/), as gpuop synth writes them to dist/<cluster>/preview/
    operator = [p for p in plans if p.operator is not None]
    preview = cdk8s.App(outdir=os.path.join(app.outdir, PREVIEW)) if operator else None
    for plan in plans:
        GpuStack(preview if plan.operator is not None else app, plan.name, plan, fill=True)
    app.synth()
    # cdk8s's writer (the `yaml` package, YAML 1.1 schema) leaves strings such as `0o17`, `0B1` or `=` plain,
    # which kubectl or YAML 1.2 readers type otherwise: each chart's file is rewritten with the same objects,
    # in cdk8s's order and under its name, by gpuop's writer (kube/yamlio.py), as `gpuop synth` writes them
    from gpuop.kube.yamlio import dump

    if preview is not None:
        preview.synth()
    for a in (app, preview) if preview is not None else (app,):
        for chart in a.charts:
            path = Path(a.outdir) / f"{chart.node.id}{a.output_file_extension}"
            path.write_text("---\n".join(dump(obj) for obj in chart.to_json()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
