"""The `cdk8s synth` entry point (cdk8s.yaml): the same stacks as `gpuop synth`, one Chart per cluster.

Reads the bundled profiles (or GPUOP_PROFILES, a path list) through the same load/validate/plan
stages and lets cdk8s write the rendered manifests to its output folder.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")


def main() -> int:
    import cdk8s

    from gpuop.errors import UserError
    from gpuop.pipeline.run import plan_all
    from gpuop.stack.chart import GpuStack

    paths = [Path(p) for p in os.environ.get("GPUOP_PROFILES", "profiles").split(os.pathsep) if p]
    try:
        plans, warnings = plan_all(paths)
    except UserError as exc:
        print(exc, file=sys.stderr)
        return 2
    app = cdk8s.App()
    for plan in plans:
        GpuStack(app, plan.name, plan, fill=True)
    app.synth()
    return 0


if __name__ == "__main__":
    sys.exit(main())
