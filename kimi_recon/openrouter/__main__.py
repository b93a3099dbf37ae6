"""``python -m kimi_recon.openrouter generate ...``: the adapter's command without the main CLI."""

import sys

from .cli import main

sys.exit(main())
