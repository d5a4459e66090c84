"""The ``oma`` command line; the only place that starts an event loop."""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from oma_actors import OmaError, event_loop_factory
from oma_actors.cli import approvals_cmd, inspect, keys_cmd, plugins, runs_cmd, verify_cmd
from oma_actors.cli.failure import CommandFailed
from oma_actors.timeline.terminal import terminal_safe

if TYPE_CHECKING:
    from collections.abc import Coroutine, Iterable, Sequence
    from importlib.metadata import EntryPoint

    from rich.console import Console


def build_parser(
    extra_commands: Iterable[EntryPoint] | None = None,
) -> argparse.ArgumentParser:
    """The argument parser of every ``oma`` command.

    Args:
        extra_commands: the plugin commands to add (``oma serve`` among them); by default the
            installed entry points of the ``oma_actors.cli`` group.
    """
    parser = argparse.ArgumentParser(
        prog="oma", description="oma-actors: run teams of LLM agents over a task graph."
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    demo = commands.add_parser(
        "demo",
        help="run the research team, kill it mid-task, and restore it",
        description=(
            "Run a research team (3 agents, 5 dependent tasks, tools that write notes) on the "
            "offline scripted model in a child process that is killed mid-task, then restore "
            "the run from its checkpoint and show what was skipped, replayed and re-run."
        ),
    )
    demo.add_argument(
        "--out",
        type=Path,
        default=Path("oma-demo-out"),
        help=(
            "folder for notes and state.json (default: oma-demo-out); the demo replaces only "
            "its own earlier output there: a state.json, journal or note it did not write, or a "
            "state.json another process has open, is refused"
        ),
    )
    demo.add_argument("--no-crash", action="store_true", help="run once, without the crash")
    demo.add_argument(
        "--approval",
        action="store_true",
        help="suspend on a tool call, approve it from another process, resume",
    )
    demo.add_argument(
        "--live",
        action="store_true",
        help="use a real provider (ANTHROPIC_API_KEY or OPENAI_API_KEY)",
    )
    demo.add_argument("--child", action="store_true", help=argparse.SUPPRESS)

    inspect.add_parser(commands)
    approvals_cmd.add_parser(commands)
    runs_cmd.add_parser(commands)
    verify_cmd.add_parser(commands)
    keys_cmd.add_parser(commands)
    plugins.add_plugin_parsers(
        commands, plugins.discover() if extra_commands is None else extra_commands
    )
    return parser


def command(args: argparse.Namespace, console: Console) -> Coroutine[Any, Any, int]:
    """The coroutine that carries out ``args``."""
    plugin: plugins.LoadedCommand | None = getattr(args, plugins.PLUGIN_DEST, None)
    if plugin is not None:
        return plugin.run(args)
    if args.command == "approvals":
        return approvals_cmd.run(args, console)
    if args.command == "checkpoint":
        return inspect.run(args, console)
    if args.command == "runs":
        return runs_cmd.run(args, console)
    if args.command == "verify":
        return verify_cmd.run(args, console)
    if args.command == "keys":
        return keys_cmd.run(args, console)
    from oma_actors.cli import demo

    if args.child:
        return demo.run_crashing_child(args.out, console)
    if args.approval:
        return demo.run_approval_demo(args.out, console=console)
    if args.no_crash or args.live:
        return demo.run_plain(args.out, live=args.live, console=console)
    return demo.run_demo(args.out, console=console)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``oma`` script."""
    args = build_parser().parse_args(argv)
    from rich.console import Console

    console = Console()
    try:
        with asyncio.Runner(loop_factory=event_loop_factory()) as runner:
            return runner.run(command(args, console))
    except (OmaError, CommandFailed) as exc:
        # One line on stderr, no traceback, nothing on stdout (a --json consumer parses stdout):
        # a bad --store URI, an unreachable or locked store, a corrupt file, a refused decision.
        # Plain text made terminal-safe: a message may hold brackets, a stored key or an id.
        message = terminal_safe(" ".join(str(exc).split()))
        kind = "" if isinstance(exc, CommandFailed) else f"{type(exc).__name__}: "
        print(f"oma {args.command}: {kind}{message}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
