"""The ``oma`` command line; the only place that starts an event loop."""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from oma_actors.actors import event_loop_factory
from oma_actors.errors import OmaError

if TYPE_CHECKING:
    from collections.abc import Sequence


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of every ``oma`` command."""
    parser = argparse.ArgumentParser(
        prog="oma",
        description="oma-actors: run teams of LLM agents over a task graph.",
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    demo = commands.add_parser(
        "demo",
        help="run the offline research team demo",
        description=(
            "Run a research team (3 agents, 5 dependent tasks, tools that write notes) on the "
            "offline scripted model, showing progress and the final brief."
        ),
    )
    demo.add_argument(
        "--out",
        type=Path,
        default=Path("oma-demo-out"),
        help="folder for the notes (default: %(default)s)",
    )
    demo.add_argument(
        "--live",
        action="store_true",
        help="use a real provider (needs ANTHROPIC_API_KEY or OPENAI_API_KEY)",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``oma`` script."""
    args = build_parser().parse_args(argv)
    from rich.console import Console

    console = Console()
    try:
        with asyncio.Runner(loop_factory=event_loop_factory()) as runner:
            if args.command == "demo":
                from oma_actors.cli.demo import run_demo

                return runner.run(run_demo(args.out, live=args.live, console=console))
    except OmaError as exc:
        console.print(f"[red]error:[/] {exc}")
        return 2
    return 2


if __name__ == "__main__":
    sys.exit(main())
