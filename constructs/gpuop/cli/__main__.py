"""`python -m gpuop.cli`."""

import sys

from gpuop.cli.main import main

sys.exit(main())
