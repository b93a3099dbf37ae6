"""``python -m kimi_recon ...``: the ``kimi-recon`` command (every subcommand), for an environment whose scripts
directory is not on PATH."""

import sys

from .cli import main

sys.exit(main())
