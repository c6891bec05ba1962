"""Stages 4-5, construct and synthesize: the component registry, the cdk8s chart, synthesized objects."""
