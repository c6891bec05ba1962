"""`python -m gpuop.cli`."""

from gpuop.cli.main import entry

entry()
