"""``python -m sidecar``: the same as ``oma serve``."""

import sys

from sidecar.cli import main

sys.exit(main())
