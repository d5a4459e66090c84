"""``oma checkpoint show|list``: read the checkpoints in a store, readably or as JSON.

``show`` folds the run's journal tail into the snapshot, as a restore does (``cli.tail``), and
says how many events it folded; ``--raw`` prints the stored JSON as it is.

Both only read: a state file is read without locking it (see ``store_option``), so they work
beside a running sidecar or worker and show the last revision it wrote.

A listing reads only the namespace it shows, each value on its own (``list_checkpoints``, over
``stores.list_each``): one value that cannot be opened (sealed under a key not in
``OMA_ENCRYPTION_KEYS``, tampered) is listed as ``unreadable`` with its error, and neither hides
the other runs nor fails the command.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import TYPE_CHECKING

from oma_actors.checkpoint import (
    CHECKPOINT_KEY_PREFIX,
    Checkpoint,
    CheckpointSummary,
    list_checkpoints,
)
from oma_actors.cli.display import show_snapshot
from oma_actors.cli.failure import CommandFailed
from oma_actors.cli.store_option import add_store_option, missing_store, reading, shown_store
from oma_actors.cli.tail import add_journal_options, with_tail
from oma_actors.stores import list_each
from oma_actors.timeline.terminal import terminal_safe

if TYPE_CHECKING:
    import argparse

    from rich.console import Console

    from oma_actors.stores import MemoryStore

# The namespaces of run records (spec RS-01) and history anchors (D17). ``oma_actors.keyspace``
# spells them, but the CLI may import the public API alone (import-linter) and neither prefix
# is public yet; tests/cli/test_cli_unreadable_entries.py pins both to keyspace's.
RUN_RECORD_PREFIX = "__oma_run__/"
HISTORY_PREFIX = "__oma_history__/"


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``checkpoint show|list`` to the ``oma`` sub-commands.

    Args:
        commands: The sub-parsers of the top-level ``oma`` parser.
    """
    checkpoint = commands.add_parser("checkpoint", help="inspect checkpoints")
    actions = checkpoint.add_subparsers(dest="action", metavar="ACTION", required=True)
    show = actions.add_parser(
        "show",
        help="print a stored snapshot readably",
        description=(
            "Print the latest snapshot of a run stored in a store, with its journal tail "
            "folded in (as a restore would see the run)."
        ),
    )
    add_store_option(show, read_only=True)
    show.add_argument("--run-id", help="the run (default: the only checkpoint in the store)")
    show.add_argument("--key", help="an explicit checkpoint key")
    show.add_argument("--raw", action="store_true", help="print the stored JSON (no tail)")
    add_journal_options(show)
    listing = actions.add_parser(
        "list",
        help="list every run checkpointed in a store and where it stands",
        description=(
            "List the checkpoints in a store: run, status (in_progress, suspended, completed, "
            "failed, rejected, or unreadable with its error), attempt, revision, save time."
        ),
    )
    add_store_option(listing, read_only=True)
    listing.add_argument("--json", action="store_true", help="print a JSON array")


async def run(args: argparse.Namespace, console: Console) -> int:
    """Carry out an ``oma checkpoint`` command parsed by ``add_parser``'s parser.

    Returns:
        The exit code: 0 done, 1 the journal tail was checked and does not fold.

    Raises:
        CommandFailed: No store file, no checkpoint, or several runs and no ``--run-id``
            (exit 2, on stderr).
        ConfigurationError: ``--store`` is not a store URI.
        StoreError: The store cannot be opened or read.
    """
    missing = await missing_store(args.store)
    if missing is not None:
        raise CommandFailed(missing)
    async with reading(args.store) as store:
        if args.action == "list":
            found = await list_checkpoints(store)
            return _print_list(found, json_out=args.json, console=console)
        return await _show(store, args, console)


async def _show(store: MemoryStore, args: argparse.Namespace, console: Console) -> int:
    key: str | None = args.key
    if args.run_id is None and key is None:
        # The checkpoint keys alone: a value that does not open still names its key.
        keys = [entry.key for entry in await list_each(store, CHECKPOINT_KEY_PREFIX)]
        if len(keys) != 1:
            listed = ", ".join(keys) or "none"
            raise CommandFailed(f"{len(keys)} checkpoints in the store ({listed}); pass --run-id")
        key = keys[0]
    snapshot = await Checkpoint(store, run_id=args.run_id, key=key).load_latest()
    if snapshot is None:
        raise CommandFailed(f"no checkpoint for run {args.run_id!r} in {shown_store(args.store)}")
    if args.raw:
        console.print_json(json.dumps(snapshot.raw))
        return 0
    view = await with_tail(
        snapshot, journal=args.journal, skip=args.no_journal, store_uri=args.store
    )
    show_snapshot(console, view.snapshot)
    if view.note is not None:
        console.print(terminal_safe(view.note), style=None if view.ok else "yellow", markup=False)
    return 0 if view.ok else 1


def _print_list(found: list[CheckpointSummary], *, json_out: bool, console: Console) -> int:
    from rich.table import Table
    from rich.text import Text

    if json_out:
        console.out(json.dumps([asdict(summary) for summary in found], indent=2), highlight=False)
        return 0
    if not found:
        console.print("no checkpoints in the store", markup=False)
        return 0
    table = Table("run", "status", "attempt", "revision", "saved")
    table.columns[0].overflow = "fold"  # wrap, never elide: run ids are copied from here
    for summary in found:
        # An unreadable value has no run id: name it by its key, and print why below.
        name = summary.run_id or summary.key
        row = (name, summary.status, str(summary.attempt), str(summary.revision), summary.saved_at)
        table.add_row(*(Text(terminal_safe(cell)) for cell in row))  # never parsed as markup
    console.print(table)
    for summary in found:
        if summary.error is not None:
            line = terminal_safe(f"unreadable {summary.key}: {summary.error}")
            console.print(line, style="red", markup=False)
    return 0
