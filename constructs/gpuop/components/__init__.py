"""Stage 4, construct: one module per GPU component, each a cdk8s construct built from its props alone.

A module names the objects it owns and the upstream asset it mirrors, and where it differs on purpose.
Shared pieces: base.py (the construct base class), props.py (props declared once), builders.py (object
shapes every operand repeats), openshift.py (the OpenShift transforms). The registry that orders the
components and derives their props from a plan is stack/registry.py; nothing here reads a plan.
"""
