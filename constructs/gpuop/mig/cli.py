"""`gpuop mig gpus | check | show`: the MIG catalog and checker on the command line."""

from __future__ import annotations


def add_arguments(parser) -> None:
    parser.add_argument("action", choices=["gpus", "check", "show"])


def run(args) -> int:
    raise NotImplementedError("gpuop mig is not implemented yet")
