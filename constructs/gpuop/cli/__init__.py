"""The face: argparse, the one error boundary, `gpuop mig` and the cdk8s app entry."""
