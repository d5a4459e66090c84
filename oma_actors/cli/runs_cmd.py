"""``oma runs list``: every run in a store, from its checkpoint and its run record side by side.

The checkpoint says where a run can continue; the run record (when runs are owned through a run
store) says who may advance it. An operator deciding whether to restore, wait for a lease or
cancel needs both on one line.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import TYPE_CHECKING

from oma_actors import list_checkpoints, list_runs
from oma_actors.cli.store_option import add_store_option, missing_store, reading

if TYPE_CHECKING:
    import argparse

    from rich.console import Console

    from oma_actors import CheckpointSummary, RunSummary


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``runs list`` to the ``oma`` sub-commands."""
    runs = commands.add_parser("runs", help="list the runs in a store")
    actions = runs.add_subparsers(dest="action", metavar="ACTION", required=True)
    listing = actions.add_parser(
        "list",
        help="list every run: its checkpoint and, when owned, its run record",
        description=(
            "List the runs in a store: checkpoint status, attempt and revision, and from the "
            "run record (if the run is owned through a run store) its status, owner, lease "
            "expiry and fencing token."
        ),
    )
    add_store_option(listing, read_only=True)
    listing.add_argument("--json", action="store_true", help="print a JSON array")


async def run(args: argparse.Namespace, console: Console) -> int:
    """Carry out ``oma runs list``; 0 done, 2 no store file."""
    missing = await missing_store(args.store)
    if missing is not None:
        console.print(f"[red]no store file at {missing}[/]", markup=True, highlight=False)
        return 2
    async with reading(args.store) as store:
        checkpoints = await list_checkpoints(store)
        records = await list_runs(store)
    rows = _merge(checkpoints, records)
    if args.json:
        console.out(json.dumps(rows, indent=2), highlight=False)
        return 0
    _print(rows, console)
    return 0


def _merge(
    checkpoints: list[CheckpointSummary], records: list[RunSummary]
) -> list[dict[str, object]]:
    """One row per run id, checkpoint first, in store order (an unreadable value by its key)."""
    rows: dict[str, dict[str, object]] = {}
    for summary in checkpoints:
        rows.setdefault(summary.run_id or summary.key, {})["checkpoint"] = asdict(summary)
    for record in records:
        rows.setdefault(record.run_id, {})["record"] = asdict(record)
    return [{"run_id": run_id, **parts} for run_id, parts in rows.items()]


def _print(rows: list[dict[str, object]], console: Console) -> None:
    from rich.table import Table
    from rich.text import Text

    if not rows:
        console.print("no runs in the store", markup=False)
        return
    table = Table("run", "checkpoint", "rev", "record", "owner", "token")
    table.columns[0].overflow = "fold"  # run ids are copied from here: wrap, never elide
    for row in rows:
        cp = row.get("checkpoint")
        rec = row.get("record")
        cells = (
            str(row["run_id"]),
            _field(cp, "status"),
            _field(cp, "revision"),
            _field(rec, "status"),
            _field(rec, "owner"),
            _field(rec, "fencing_token"),
        )
        table.add_row(*(Text(cell) for cell in cells))  # stored text is never markup
    console.print(table)


def _field(part: object, name: str) -> str:
    if not isinstance(part, dict):
        return "-"
    value = part.get(name)
    return "-" if value is None else str(value)
