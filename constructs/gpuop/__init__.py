"""gpuop: compile GPU cluster profiles into Helm charts, Kustomize overlays, Argo CD and Flux objects.

The NVIDIA GPU Operator's job, done ahead of time: every operand the Operator renders at run time is
a cdk8s construct here, fed by a frozen plan computed from a declarative cluster profile.
"""

__version__ = "0.1.0"
