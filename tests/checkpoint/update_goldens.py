"""Regenerate the checkpoint goldens: the one command that writes them (tests only read them).

Run it from the repository root after a deliberate format change, then review the diff::

    .venv/bin/python tests/checkpoint/update_goldens.py

``--directory`` writes somewhere else instead (the tests use it to check this command).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

# Run as a script, this folder is sys.path[0]: the helpers import as the tests import them.
from checkpoint_support import GOLDEN_DIR
from written_golden import write_goldens


def main(argv: list[str] | None = None) -> int:
    """Write every checkpoint golden and print each path written."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--directory", type=Path, default=GOLDEN_DIR, help="where to write")
    args = parser.parse_args(argv)
    for path in write_goldens(args.directory):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
