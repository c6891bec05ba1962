"""A platform team's cdk8s app built on gpuop (gpuop.api; docs/constructs.md).

One chart holds the cluster's GPU stack, compiled from profiles/inference.yaml exactly as `gpuop synth`
compiles it (validation included: a bad profile stops here with every problem located). The app then
adds objects of its own to the same chart (a quota for the tenants' GPU requests, a smoke-test Job) and
patches one operand: the device plugin's pods get the team's cost-centre label and a PriorityClass of
the platform's own.
"""

from __future__ import annotations

from pathlib import Path

import cdk8s

from gpuop.api import GpuStack

HERE = Path(__file__).resolve().parent


def build(app: cdk8s.App) -> GpuStack:
    stack = GpuStack(app, "inference", profile=HERE / "profiles" / "inference.yaml")
    ns = stack.plan.namespace

    # Objects of our own, beside gpuop's.
    cdk8s.ApiObject(stack, "tenant-quota", api_version="v1", kind="ResourceQuota",
                    metadata=cdk8s.ApiObjectMetadata(name="gpu-quota", namespace="tenants")).add_json_patch(
        cdk8s.JsonPatch.add("/spec", {"hard": {"requests.nvidia.com/gpu": "8"}}))
    cdk8s.ApiObject(stack, "smoke-test", api_version="batch/v1", kind="Job",
                    metadata=cdk8s.ApiObjectMetadata(name="gpu-smoke-test", namespace=ns)).add_json_patch(
        cdk8s.JsonPatch.add("/spec", {"backoffLimit": 0, "template": {"spec": {
            "restartPolicy": "Never",
            "containers": [{"name": "cuda", "image": "nvcr.io/nvidia/cuda:12.9.1-base-ubuntu24.04",
                            "command": ["nvidia-smi"], "resources": {"limits": {"nvidia.com/gpu": 1}}}]}}}))

    # Patch an operand: the device plugin's pods.
    plugin = stack.api_object("DaemonSet", "nvidia-device-plugin-daemonset")
    plugin.add_json_patch(cdk8s.JsonPatch.add("/spec/template/metadata/labels/cost-centre", "ml-platform"),
                          cdk8s.JsonPatch.replace("/spec/template/spec/priorityClassName", "gpu-node-critical"))
    return stack


if __name__ == "__main__":
    app = cdk8s.App()
    build(app)
    app.synth()
