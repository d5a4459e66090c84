"""``oma runs list|show``: every run in a store; one run's timeline in the terminal or a page.

(``history``, ``fork``, ``cancel`` and ``delete`` live in ``history_cmd``.)

The checkpoint says where a run can continue; the run record (when runs are owned through a run
store) says who may advance it. An operator deciding whether to restore, wait for a lease or
cancel needs both on one line. A record's stored status stays ``running`` after its process
died, so both commands show the record as ``RunSummary.state`` reads it now (``running (lease
expired 12s ago)`` once its lease has expired). ``runs show`` draws one run's timeline
(``build_timeline``) from its checkpoint and its journal (``--journal``, else the one the
snapshot names, as a restore does, D15), then the run record's line; ``--html`` also writes
the page.

``list`` reads the checkpoints and run records alone, each value on its own
(``stores.list_each``): one that cannot be opened is a row marked ``unreadable`` and a line
naming its key and error, never a failed listing. ``show`` reads the run's (and its fork
parent's) events alone (``read_run``): other runs' events in a shared journal are not opened.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict
from datetime import UTC, datetime
from typing import TYPE_CHECKING

import aiofiles
import aiofiles.os

from oma_actors.checkpoint import Checkpoint, list_checkpoints
from oma_actors.cli import history_cmd
from oma_actors.cli.encryption import keyring_from_env, sealed_journal
from oma_actors.cli.failure import CommandFailed
from oma_actors.cli.inspect import RUN_RECORD_PREFIX
from oma_actors.cli.store_option import add_store_option, missing_store, reading
from oma_actors.cli.tail import named_journal, with_tail
from oma_actors.errors import CorruptStoreError, LeaseError
from oma_actors.journal import JsonlRunJournal, read_run
from oma_actors.runs import MemoryStoreRunStore, RunRecord, RunSummary
from oma_actors.stores import UnreadableEntry, list_each
from oma_actors.timeline import build_timeline, render_timeline_html, render_timeline_text
from oma_actors.timeline.terminal import terminal_safe

if TYPE_CHECKING:
    import argparse

    from rich.console import Console

    from oma_actors.checkpoint import CheckpointSummary
    from oma_actors.journal import JournalEvent
    from oma_actors.stores import AtomicStore, MemoryStore


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``runs list|show`` to the ``oma`` sub-commands."""
    runs = commands.add_parser("runs", help="list the runs in a store")
    actions = runs.add_subparsers(dest="action", metavar="ACTION", required=True)
    listing = actions.add_parser(
        "list",
        help="list every run: its checkpoint and, when owned, its run record",
        description=(
            "List the runs in a store: checkpoint status, attempt and revision, and from the "
            "run record (if the run is owned through a run store) its status, owner, lease "
            "expiry and fencing token. A running record whose lease has expired (its process "
            "died or stalled) shows as 'running (lease expired 12s ago)'."
        ),
    )
    add_store_option(listing, read_only=True)
    listing.add_argument("--json", action="store_true", help="print a JSON array")
    show = actions.add_parser(
        "show",
        help="draw one run's timeline: lanes per task, turns, tool calls and their marks",
        description=(
            "Draw a run's timeline from its checkpoint and, with --journal, its journal: one "
            "lane per task, turns and tool calls in order, each call marked executed, replayed, "
            "re-ran or outcome unknown, approvals, attempts and token usage, then the run "
            "record's status as 'oma runs list' shows it. Without a journal a replayed or re-run "
            "call cannot be told from one that ran once."
        ),
    )
    show.add_argument("run_id", metavar="RUN", help="the run id")
    add_store_option(show, read_only=True)
    show.add_argument(
        "--journal", metavar="PATH",
        help="the run's JSONL journal (default: the one the snapshot names, when it exists)",
    )  # fmt: skip
    show.add_argument("--no-journal", action="store_true", help="draw the stored snapshot alone")
    show.add_argument("--html", metavar="OUT", help="also write the timeline as an HTML page")
    show.add_argument(
        "--json", action="store_true", help="print the timeline model (and fork lineage) as JSON"
    )
    history_cmd.add_actions(actions)


async def run(args: argparse.Namespace, console: Console) -> int:
    """Carry out ``oma runs list|show``; 0 done.

    Raises:
        CommandFailed: No store file, no journal file, no such run or an ``--html`` path that
            cannot be written (exit 2, on stderr).
    """
    missing = await missing_store(args.store)
    if missing is not None:
        raise CommandFailed(missing)
    if args.action == "show":
        return await _show(args, console)
    if args.action in history_cmd.ACTIONS:
        return await history_cmd.run(args, console)
    async with reading(args.store) as store:
        checkpoints = await list_checkpoints(store)
        records = await _records(store)
    rows = _merge(checkpoints, records)
    if args.json:
        console.out(json.dumps(rows, indent=2), highlight=False)
        return 0
    _print(rows, console)
    for summary in checkpoints:
        if summary.error is not None:
            _print_unreadable(console, summary.key, summary.error)
    for record in records:
        if record.error is not None:
            _print_unreadable(console, RUN_RECORD_PREFIX + record.run_id, record.error)
    return 0


async def _show(args: argparse.Namespace, console: Console) -> int:
    if args.journal is not None and not await aiofiles.os.path.exists(args.journal):
        raise CommandFailed(f"no journal file at {args.journal}")
    if args.html is not None:
        await _check_page_path(args.html)
    async with reading(args.store) as store:
        snapshot = await Checkpoint(store, run_id=args.run_id).load_latest()
        record = await _record(store, args.run_id)
    if snapshot is None:
        raise CommandFailed(f"no checkpoint of run {args.run_id}")
    events: list[JournalEvent] | None = None
    # Like a restore, follow the journal the snapshot names (journalRef) unless told otherwise,
    # and show the snapshot with its tail folded: after a journal-first crash the dispatch
    # record of a started call is in the tail only, and the call must not read "pending".
    view = await with_tail(
        snapshot, journal=args.journal, skip=args.no_journal, store_uri=args.store
    )
    journal = None
    if not args.no_journal and args.journal is not None:  # checked above: the file exists
        journal = sealed_journal(JsonlRunJournal(args.journal), keyring_from_env())
    elif not args.no_journal:  # the one the snapshot names: a file, or in its database (D15)
        journal = named_journal(view.snapshot, args.store)
    if journal is not None:
        # A fork's parent's events too: its approval rows show the parent's request and decision.
        parent = view.snapshot.forked_from
        runs = {snapshot.run_id} | ({parent.run_id} if parent is not None else set())
        try:
            # Their events alone: another run's in a shared journal (sealed under another
            # key, damaged) is neither parsed nor opened, so it cannot fail this run's view.
            events = []
            for run_id in sorted(runs):
                events += await read_run(journal, run_id)
        finally:
            await journal.close()
    # The run record says a cancel no attempt was running for (then no run/end tells it).
    timeline = build_timeline(view.snapshot, events, record=record)
    if args.json:  # the timeline model, fork lineage included (forked_from), and the record
        shown = {**asdict(timeline), "record": None if record is None else asdict(record)}
        console.out(json.dumps(shown, indent=2, default=str), highlight=False)
        return 0
    if args.html is not None:  # written first: if it fails, stdout holds no half a result
        await _write_page(args.html, render_timeline_html(timeline))
    console.print(render_timeline_text(timeline))
    if record is not None:
        console.print(terminal_safe(_record_line(record)), markup=False, highlight=False)
    if view.note is not None and not view.ok:
        console.print(view.note, style="yellow", markup=False)
    if args.html is not None:
        console.print(
            f"timeline page: {terminal_safe(args.html)}",
            markup=False,
            highlight=False,
            soft_wrap=True,
        )
    return 0


async def _record(store: AtomicStore, run_id: str) -> RunSummary | None:
    """The run record of ``run_id`` as ``oma runs list`` shows it (``None``: the run is not
    owned through a run store); an unreadable record is shown as such, not an error: the
    timeline comes from the checkpoint and is still worth drawing."""
    try:
        record: RunRecord | LeaseError | None = await MemoryStoreRunStore(store).get(run_id)
    except LeaseError as exc:
        record = exc
    except CorruptStoreError as exc:  # sealed under a key not in OMA_ENCRYPTION_KEYS
        return _unreadable_record(run_id, str(exc))
    if record is None:
        return None
    return RunSummary.of(record, run_id=run_id, now=datetime.now(UTC))


async def _records(store: MemoryStore) -> list[RunSummary]:
    """``list_runs(store)``, with a record whose value does not open (``list_each``)
    summarized as ``unreadable`` rather than failing the listing."""
    now = datetime.now(UTC)
    found: list[RunSummary] = []
    for entry in await list_each(store, RUN_RECORD_PREFIX):
        run_id = entry.key.removeprefix(RUN_RECORD_PREFIX)
        if isinstance(entry, UnreadableEntry):
            found.append(_unreadable_record(run_id, entry.error))
            continue
        try:
            record: RunRecord | LeaseError = RunRecord.parse(entry.value, run_id=run_id)
        except LeaseError as exc:
            record = exc
        found.append(RunSummary.of(record, run_id=run_id, now=now))
    return found


def _unreadable_record(run_id: str, error: str) -> RunSummary:
    return RunSummary(
        run_id=run_id, status="unreadable", state="unreadable", attempt=0, fencing_token=0,
        error=error,
    )  # fmt: skip


def _print_unreadable(console: Console, key: str, error: str) -> None:
    """``unreadable KEY: ERROR``, as ``oma checkpoint list`` prints it."""
    console.print(terminal_safe(f"unreadable {key}: {error}"), style="red", markup=False)


def _record_line(record: RunSummary) -> str:
    """``record: <state>, owner O, attempt A, fencing token N``, or why it is unreadable."""
    if record.error is not None:
        return f"record: unreadable ({record.error})"
    owner = "" if record.owner is None else f", owner {record.owner}"
    return (
        f"record: {record.state}{owner}, attempt {record.attempt}, "
        f"fencing token {record.fencing_token}"
    )


async def _check_page_path(path: str) -> None:
    """Refuse an ``--html`` path that cannot be written before any work is done.

    Raises:
        CommandFailed: The path is a directory or its directory does not exist (exit 2).
    """
    if await aiofiles.os.path.isdir(path):
        raise CommandFailed(f"--html {path} is a directory, not a file")
    folder = os.path.dirname(path) or "."
    if not await aiofiles.os.path.isdir(folder):
        raise CommandFailed(f"--html {path}: no directory {folder}")


async def _write_page(path: str, html: str) -> None:
    """Write the timeline page to ``path``.

    Raises:
        CommandFailed: The page cannot be written (permissions, a full disk...; exit 2).
    """
    try:
        async with aiofiles.open(path, "w", encoding="utf-8") as page:
            await page.write(html)
    except OSError as exc:
        raise CommandFailed(f"cannot write --html {path}: {exc.strerror or exc}") from None


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
            _field(rec, "state"),  # the stored status, read against the lease's expiry
            _field(rec, "owner"),
            _field(rec, "fencing_token"),
        )
        table.add_row(*(Text(terminal_safe(cell)) for cell in cells))  # never markup
    console.print(table)


def _field(part: object, name: str) -> str:
    if not isinstance(part, dict):
        return "-"
    value = part.get(name)
    return "-" if value is None else str(value)
