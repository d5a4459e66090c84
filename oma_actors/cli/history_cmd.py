"""``oma runs history|fork|cancel|delete``: the operator's verbs over a run (decision D17).

``history`` lists every restorable point of a journal-first run (``run_history``); ``fork``
starts a new run at one of them (``fork_run``: no model call, the parent untouched); ``cancel``
cancels through the run record (``RunLedger.cancel``: the live owner is fenced out, a later
restore is refused); ``delete`` removes a run's checkpoint, history anchors, approval rows, run
record and journal (its rows in a database store; the JSONL file its snapshot names when no
other run shares it and it lies beside the store, or the one ``--journal`` names), and refuses a
live run (its record running under a lease that has not expired), whose owner would write them
again. Errors are one line on stderr and exit code 2.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from datetime import UTC, datetime
from typing import TYPE_CHECKING

import aiofiles.os

from oma_actors.approvals import APPROVAL_KEY_PREFIX, approval_request_id
from oma_actors.checkpoint import (
    CHECKPOINT_KEY_PREFIX,
    Checkpoint,
    checkpoint_key,
    fork_run,
    history_keys,
    run_history,
)
from oma_actors.cli.encryption import keyring_from_env, sealed_journal
from oma_actors.cli.failure import CommandFailed
from oma_actors.cli.inspect import HISTORY_PREFIX
from oma_actors.cli.store_option import add_store_option, reading, writing
from oma_actors.cli.tail import named_file, named_journal
from oma_actors.errors import CheckpointError, CorruptStoreError, LeaseError
from oma_actors.journal import JsonlRunJournal, open_journal
from oma_actors.journal.jsonl_marks import marks_path
from oma_actors.journal.open import DATABASE_STORE_KINDS
from oma_actors.journal.sql import SqlRunJournal
from oma_actors.readable import to_iso
from oma_actors.runs import MemoryStoreRunStore, RunLedger, is_terminal
from oma_actors.stores import UnreadableEntry, list_each, parse_store_uri

if TYPE_CHECKING:
    import argparse
    from collections.abc import AsyncIterator

    from rich.console import Console

    from oma_actors.checkpoint import CheckpointSnapshot
    from oma_actors.journal import RunJournal
    from oma_actors.stores import AtomicStore, MemoryEntry, StoreTarget

ACTIONS = ("history", "fork", "cancel", "delete")


def add_actions(actions: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``history``, ``fork``, ``cancel`` and ``delete`` to ``oma runs``."""
    history = actions.add_parser(
        "history",
        help="list every restorable point of a journal-first run, oldest first",
        description="List a journal-first run's history points: seq, attempt, boundary, label.",
    )
    history.add_argument("run_id", metavar="RUN", help="the run id")
    add_store_option(history, read_only=True)
    _journal_option(history)
    history.add_argument("--json", action="store_true", help="print a JSON array")
    fork = actions.add_parser(
        "fork",
        help="start a new run at a history point, without re-running effects",
        description=(
            "Write a new run that starts at the history point SEQ of RUN: committed tool "
            "results replay, a call started but not committed there is never run again. No "
            "model is called and RUN is not changed. Continue it with restore(run_id=NEW)."
        ),
    )
    fork.add_argument("run_id", metavar="RUN", help="the run to fork")
    fork.add_argument("--at", dest="seq", type=int, required=True, metavar="SEQ")
    fork.add_argument("--as", dest="new_run_id", required=True, metavar="NEW")
    add_store_option(fork, read_only=False)
    _journal_option(fork)
    cancel = actions.add_parser(
        "cancel",
        help="cancel a run through its run record: its owner is fenced out",
        description="cancel a run through its run record: its owner is fenced out",
    )
    cancel.add_argument("run_id", metavar="RUN", help="the run id")
    add_store_option(cancel, read_only=False)
    delete = actions.add_parser(
        "delete",
        help="delete a run's checkpoint, history, approvals, record and journal; refuses a "
        "live run",
        description=(
            "Delete a run's checkpoint, history anchors, approval rows, run record and journal. "
            "A JSONL journal is removed only when it holds no other run's events, no other "
            "state names it, and it lies in the store file's directory or --journal names it; "
            "otherwise it is kept and the output says why. Refuses a live run."
        ),
    )
    delete.add_argument("run_id", metavar="RUN", help="the run id")
    add_store_option(delete, read_only=False)
    delete.add_argument(
        "--journal",
        metavar="PATH",
        help="the run's JSONL journal file to delete (a path or file:///abs/path), also when "
        "it is not beside the store; a journal the snapshot names that is another file is kept",
    )


def _journal_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--journal",
        metavar="URI",
        help="the run's journal: a JSONL file (a path or file:///abs/path) or a database "
        "(sqlite:///abs/x.db, postgresql://...); default: the one its snapshots name",
    )


async def run(args: argparse.Namespace, console: Console) -> int:
    """Carry out one of ``ACTIONS``; 0 done, 2 refused or failed (one line on stderr).

    Raises:
        OmaError: the store or journal cannot be opened or read (``main`` prints it).
    """
    if args.action == "history":
        return await _history(args, console)
    async with writing(args.store) as store:  # sealed with OMA_ENCRYPTION_KEYS when set
        if args.action == "fork":
            async with _journal(store, args) as journal:
                info = await fork_run(
                    store, args.run_id, at_seq=args.seq, new_run_id=args.new_run_id,
                    journal=journal,
                )  # fmt: skip
            console.out(f"forked {info.parent_run_id} at seq {info.parent_seq} as {info.run_id}")
            return 0
        if args.action == "cancel":
            record = await RunLedger(MemoryStoreRunStore(store)).cancel(args.run_id)
            console.out(f"{record.run_id}: {record.status} (fencing token {record.fencing_token})")
            return 0
        return await _delete(store, args, console)


async def _history(args: argparse.Namespace, console: Console) -> int:
    async with reading(args.store) as store, _journal(store, args) as journal:
        points = await run_history(store, args.run_id, journal=journal)
    if args.json:
        rows = [
            {
                "seq": p.seq,
                "attempt": p.attempt,
                "boundary": p.boundary,
                "task_id": p.task_id,
                "at": to_iso(p.at),
                "label": p.label,
            }
            for p in points
        ]
        console.out(json.dumps(rows, indent=2), highlight=False)
        return 0
    for p in points:
        console.out(f"{p.seq:>6}  a{p.attempt}  {p.boundary:<20} {p.label}", highlight=False)
    return 0


async def _delete(store: AtomicStore, args: argparse.Namespace, console: Console) -> int:
    run_id = args.run_id
    given = _given_journal(args)  # before anything is deleted
    runs = MemoryStoreRunStore(store)
    record = await runs.get(run_id)
    now = datetime.now(UTC)
    lease = record.lease if record is not None and record.status == "running" else None
    if lease is not None and lease.is_live(now):
        _fail(
            f"run {run_id!r} is live (running, leased to {lease.owner} until "
            f"{to_iso(lease.expires_at)}): cancel it first"
        )
        return 2
    if record is not None and not is_terminal(record.status):
        # The record first, in one compare-and-set that refuses a live lease: a restore that
        # took the run since the read above makes this refuse, and once it is cancelled no
        # restore can take it while its state is deleted (the check alone left that window).
        try:
            await RunLedger(runs).cancel(run_id, "deleted", unless_held=True)
        except LeaseError as exc:
            if exc.code != "RUN_LEASE_HELD":
                raise
            _fail(f"run {run_id!r} is live (a restore took it just now): cancel it first")
            return 2
    unreadable = False
    try:
        snapshot = await Checkpoint(store, run_id=run_id).load_latest()
    except (CheckpointError, CorruptStoreError):
        # Deleted all the same; the journal file it names is not known (a sealed snapshot
        # read without OMA_ENCRYPTION_KEYS, a damaged one), so it is left alone.
        snapshot, unreadable = None, True
    keys = [checkpoint_key(run_id)]
    # The run's own keys alone (a database store holds every run's).
    keys += await history_keys(store, run_id)
    found = [key for key in keys if await store.get(key) is not None]
    # Its approval rows hold the tool input asked about and the reviewer's edit (AP-11).
    approvals, unread = await _approval_rows(store, run_id)
    # The run's state first, its journal after: a delete cut short leaves no snapshot without
    # the journal it depends on, only events a later delete still finds.
    for key in found + approvals:
        await store.delete(key)
    if record is not None:
        await runs.delete(run_id)
    journal = await _delete_journal(store, args, snapshot, given)
    if not found and not approvals and record is None and journal is None:
        _fail(f"no run {run_id!r} in this store")
        return 2
    if journal is None and unreadable:
        journal = "not known (its snapshot could not be read), a journal file is left alone"
    kept = f" ({unread} unreadable kept)" if unread else ""
    console.out(
        f"deleted run {run_id}: {len(found)} snapshot(s), {len(approvals)} approval row(s)"
        f"{kept}, record: {record is not None}, journal: {journal or 'none'}"
    )
    return 0


async def _approval_rows(store: AtomicStore, run_id: str) -> tuple[list[str], int]:
    """The keys of ``run_id``'s approval rows, and how many rows that name it (in their
    metadata) could not be read, which are kept: their run is not known for sure."""
    keys: list[str] = []
    unread = 0
    for entry in await list_each(store, APPROVAL_KEY_PREFIX):
        owner = _row_of(entry)
        if owner == run_id:
            keys.append(entry.key)
        elif owner is None and (entry.metadata or {}).get("runId") == run_id:
            unread += 1
    return keys, unread


def _row_of(entry: MemoryEntry | UnreadableEntry) -> str | None:
    """The run an approval row belongs to: its request's ``runId``, when the row's key is the
    request id that run, scope, boundary and hash give (AP-09), so a row is never taken for
    another run's; ``None`` when the row cannot be read or its key is not its request's."""
    if isinstance(entry, UnreadableEntry):
        return None
    try:
        row = json.loads(entry.value)
    except ValueError:  # sealed and read without the keys, or damaged
        return None
    request = row.get("request") if isinstance(row, dict) else None
    if not isinstance(request, dict):
        return None
    run, scope = request.get("runId"), request.get("scope")
    boundary, digest = request.get("boundary"), request.get("requestHash")
    if not (
        isinstance(run, str)
        and isinstance(scope, str)
        and isinstance(boundary, str)
        and isinstance(digest, str)
    ):
        return None
    own_key = APPROVAL_KEY_PREFIX + approval_request_id(run, scope, boundary, digest)
    return run if entry.key == own_key else None


def _given_journal(args: argparse.Namespace) -> str | None:
    """The real path of the JSONL file ``--journal`` names (``None``: none given).

    Raises:
        CommandFailed: ``--journal`` is not a file, or the store keeps its journal in its
            database (exit 2).
        ConfigurationError: ``--journal`` is not a path or URI.
    """
    if args.journal is None:
        return None
    journal = parse_store_uri(args.journal)
    if parse_store_uri(args.store).kind in DATABASE_STORE_KINDS:
        raise CommandFailed("--journal: a database store's runs keep their journal in it")
    if journal.kind != "file":
        raise CommandFailed(f"--journal {args.journal}: not a JSONL file path")
    return journal.location


async def _delete_journal(
    store: AtomicStore,
    args: argparse.Namespace,
    snapshot: CheckpointSnapshot | None,
    given: str | None,
) -> str | None:
    """Delete the run's journal where its store keeps it; what was done (``None``: none found).

    A database store keeps it in its own journal table (D15): the run's rows go. Beside a file
    store it is the JSONL file the snapshot names, or ``given`` (``--journal``; a file the
    snapshot names that is another one is kept). The snapshot's ``journalRef`` is an absolute
    path, so in a copy of a store's directory it names the original's file: a file outside the
    store file's own directory is kept unless ``--journal`` names it. The file is removed with
    its dispatch marks when every event in it is the run's and no other state in the store
    names it (a fork's child depends on its parent's journal file before its first event: D15),
    kept otherwise (other runs' lines cannot be taken out while another process may append),
    which the summary says.
    """
    run_id: str = args.run_id
    target = parse_store_uri(args.store)
    if target.kind in DATABASE_STORE_KINDS:
        table = open_journal(args.store)
        try:
            count = await table.delete_run(run_id) if isinstance(table, SqlRunJournal) else 0
        finally:
            await table.close()
        return f"{count} event(s)" if count else None
    named = named_file(snapshot) if snapshot is not None else None
    path: str | None = named
    notes: list[str] = []
    if given is not None:
        path = given
        if named is not None and not await _same_file(named, given):
            notes.append(f"{named} kept (the snapshot names it, not --journal)")
    if path is None or not await aiofiles.os.path.isfile(path):
        return "; ".join(notes) or None
    if given is None and not (target.kind == "file" and await _beside(path, target)):
        return f"{path} kept (not beside the store; --journal {path} deletes it)"
    return "; ".join([await _remove_journal(store, run_id, path), *notes])


async def _remove_journal(store: AtomicStore, run_id: str, path: str) -> str:
    """Remove the JSONL journal ``path`` of ``run_id`` (and its marks) unless another run's
    events are in it or another run's state may name it; what was done."""
    reader = JsonlRunJournal(path, flush_interval_ms=0)
    try:
        others = {event.run_id for event in await reader.read_from(0)} - {run_id}
    finally:
        await reader.close()
    if others:
        return f"{path} kept (it holds other runs' events too)"
    elsewhere = await _named_elsewhere(store, path)
    if elsewhere is not None:
        return f"{path} kept ({elsewhere})"
    for name in (path, marks_path(path)):
        with contextlib.suppress(FileNotFoundError):
            await aiofiles.os.remove(name)
    return f"{path} removed"


async def _beside(path: str, store: StoreTarget) -> bool:
    """Whether the journal file ``path`` lies in the directory of the store file ``store``."""
    folder = os.path.dirname(await aiofiles.os.path.abspath(path))
    return await _same_file(folder, os.path.dirname(store.location))


async def _same_file(first: str, second: str) -> bool:
    """Whether two paths name one file (or directory): the same, or both existing and one."""
    absolute = aiofiles.os.path.abspath
    if await absolute(first) == await absolute(second):
        return True
    try:
        return await aiofiles.os.path.samefile(first, second)
    except OSError:  # one is missing: another path to nothing is not this file
        return False


async def _named_elsewhere(store: AtomicStore, path: str) -> str | None:
    """Why a value left in ``store`` (the deleted run's are gone) may name the journal ``path``
    (a snapshot's or an anchor's ``journalRef``): ``None`` when none does.

    Only snapshots and anchors carry a ``journalRef``, so only they are read; one that cannot
    be read (sealed under a key not at hand, damaged) might name it, and keeps the file too.
    """
    spelled = json.dumps(os.path.basename(path), ensure_ascii=False)[1:-1]
    for prefix in (CHECKPOINT_KEY_PREFIX, HISTORY_PREFIX):
        for entry in await list_each(store, prefix):
            if isinstance(entry, UnreadableEntry) or not entry.value.lstrip().startswith("{"):
                return f"{entry.key} cannot be read and may name it"
            if spelled not in entry.value:
                continue  # most values: no parse
            try:
                ref = json.loads(entry.value).get("journalRef")
            except ValueError:
                return f"{entry.key} cannot be read and may name it"
            named = ref.get("path") if isinstance(ref, dict) else None
            if isinstance(named, str) and await _same_file(named, path):
                return "another run's state names it"
    return None


@contextlib.asynccontextmanager
async def _journal(
    store: AtomicStore, args: argparse.Namespace
) -> AsyncIterator[RunJournal | None]:
    """The journal of ``args.run_id`` to read, closed after; ``None``: the one its snapshot
    names, which the history opens by itself.

    ``--journal`` (a path, ``file://``, or a database's URI: ``open_journal``), and with
    ``OMA_ENCRYPTION_KEYS`` also the journal the snapshot names (a file, or its store's
    database journal), are opened sealed with those keys: the history cannot open a sealed
    journal by itself (it has no keys).
    """
    journal: RunJournal | None = None
    if args.journal is not None:
        journal = sealed_journal(open_journal(args.journal), keyring_from_env())
    elif keyring_from_env() is not None:
        with contextlib.suppress(CheckpointError, CorruptStoreError):  # the history says it
            snapshot = await Checkpoint(store, run_id=args.run_id).load_latest()
            journal = None if snapshot is None else named_journal(snapshot, args.store)
    try:
        yield journal
    finally:
        if journal is not None:
            await journal.close()


def _fail(message: str) -> None:
    print(f"oma runs: {message}", file=sys.stderr)
