"""``oma verify JOURNAL [--json]``: audit a run journal offline (spec JR-21..JR-23).

``JOURNAL`` is a JSONL file (a path, or ``file:///abs/run.jsonl``), or the URI of a store whose
database keeps its runs' journal (``sqlite:///abs/state.db``, ``postgresql://...[?table=T]``:
the ``--store`` URIs of the other commands, opened by ``open_journal`` as a restore opens them,
D15). A journal may hold many runs (seqs are numbered per run): each run is verified on its own,
the summary counts the runs, and every finding names its run and seq. A database journal is
keyed ``(run_id, seq)`` and read back in seq order, so the sequence check cannot fail on it:
the database refused a repeated seq when it was appended.

A fork's child continues in its parent's journal, and its conversation up to the fork point is
its parent's: its links to those events are followed into the parent's (``verify_run(...,
forks=...)``) for every run the store's snapshots say was forked (``forkedFrom``). The store is
``JOURNAL`` itself when it is a store's URI, else ``--store``; it is read only for the runs whose
links found a gap, and a run whose snapshot cannot be read keeps its gaps. Without a store, a
child's links to its parent stay inconclusive gaps, as any link the journal cannot resolve.

Like every command that reads, this one creates nothing: a store that is not there, or one whose
database holds no journal table (its runs kept no journal there), is refused, never given an
empty one to read. A store that keeps no journal (Redis, memory) is refused by name.

Exit codes: 0 the journal verifies (inconclusive gaps alone are ok), 1 it has failures, 2 it
cannot be read or verified (missing file or store, a bad line or row, no valid event at all,
sealed events without their keys), with one line on stderr.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
from dataclasses import asdict
from typing import TYPE_CHECKING

from oma_actors.checkpoint import Checkpoint
from oma_actors.cli.encryption import KEYS_ENV, keyring_from_env, sealed_journal
from oma_actors.cli.failure import CommandFailed
from oma_actors.cli.store_option import STORE_HELP, missing_store, reading
from oma_actors.errors import CheckpointError, CorruptStoreError
from oma_actors.journal import JsonlRunJournal, open_journal, verify_run
from oma_actors.journal.encrypting import SEALED_FIELD
from oma_actors.journal.open import DATABASE_STORE_KINDS
from oma_actors.journal.sql import SqlRunJournal
from oma_actors.stores import parse_store_uri, table_missing
from oma_actors.timeline.terminal import terminal_safe

if TYPE_CHECKING:
    import argparse
    from collections.abc import Sequence

    from rich.console import Console

    from oma_actors.checkpoint import CheckpointSnapshot
    from oma_actors.journal import JournalEvent, RunJournal, VerifyFinding, VerifyResult


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``verify`` to the ``oma`` sub-commands."""
    verify = commands.add_parser(
        "verify",
        help=(
            "verify a run journal (a JSONL file, or a SQLite or PostgreSQL store's): "
            "sequences, links, request block lineage"
        ),
        description=(
            "Verify a run journal offline, each run it holds on its own: strictly increasing "
            "sequences per run, every sourceEventSeqs link, and that every block a model was "
            "shown is reproducible from the journal. JOURNAL is a JSONL file, or the store URI "
            "of a SQLite or PostgreSQL store, whose database keeps its runs' journal (the "
            "sequence check holds there by construction: a row is keyed by run and seq). "
            "Nothing is created: a missing store or journal table is refused. Exit 0 ok, "
            "1 failures, 2 unreadable or not verifiable."
        ),
    )
    verify.add_argument(
        "journal",
        metavar="JOURNAL",
        help=(
            "a .jsonl journal file (a path or file:///abs/run.jsonl), or a store URI: "
            "sqlite:///abs/state.db or postgresql://user@host:5432/db[?table=T]"
        ),
    )
    verify.add_argument(
        "--store",
        metavar="URI",
        default=None,
        help=(
            "the checkpoint store of the journal's runs, to follow a fork's child's links into "
            "its parent's events (default: JOURNAL when it is a store URI); "
            + STORE_HELP
            + "; read, never locked or created"
        ),
    )
    verify.add_argument("--json", action="store_true", help="print the result as JSON")


async def run(args: argparse.Namespace, console: Console) -> int:
    """Carry out ``oma verify``; 0 ok, 1 failures.

    Raises:
        CommandFailed: The journal or ``--store`` is missing (a file, a store, a store's
            journal table), the journal is kept by no store of that kind (Redis, memory),
            holds no valid event (a file of garbage alone proves nothing, so it is not "ok"),
            or is sealed and no keys were given; ``main`` prints it as one line on stderr,
            exit 2. An unreadable journal
            raises its own typed error, printed the same way: a bad line or row, a database
            that cannot be reached or is not one, and a path that is not a regular file (a
            FIFO, ``/dev/zero``, ``/proc/kmsg``, a directory) or is over the journal read limit,
            both refused before anything is read, so none of them hangs or loads gigabytes.
        ConfigurationError: ``JOURNAL`` or ``--store`` is a malformed URI or of an unknown
            scheme.
    """
    opened, where = await _open(args.journal)
    missing = None if args.store is None else await missing_store(args.store)
    if missing is not None:
        await opened.close()
        raise CommandFailed(missing)
    keyring = keyring_from_env()
    journal = sealed_journal(opened, keyring)
    try:
        events = await journal.read_from(0)
    finally:
        await journal.close()
    if keyring is None and any(SEALED_FIELD in event.data for event in events):
        # Sealed payloads prove nothing about lineage: a pass here would be vacuous.
        raise CommandFailed(
            f"{where} is sealed (EncryptingJournal): set {KEYS_ENV} to its key file"
        )
    result = await verify_run(events)
    if result.stats["events"] == 0:
        # Zero events is what an empty file, a wrong file or one torn line all read as.
        raise CommandFailed(f"no valid event in {where}: it is not a run journal, or it is empty")
    store = _store_of(args)
    if store is not None and result.inconclusive:
        result = await _following_forks(store, events, result)
    if args.json:
        console.out(json.dumps(_as_json(result), indent=2), highlight=False)
    else:
        _print(result, console)
    return 0 if result.ok else 1


def _store_of(args: argparse.Namespace) -> str | None:
    """The store whose snapshots say which runs are forks: ``--store``, else ``JOURNAL`` when it
    is a database store's URI (its runs' snapshots are in that database), else none."""
    if args.store is not None:
        return str(args.store)
    return args.journal if parse_store_uri(args.journal).kind in DATABASE_STORE_KINDS else None


async def _following_forks(
    uri: str, events: Sequence[JournalEvent], result: VerifyResult
) -> VerifyResult:
    """``result``, verified again with the forks among the runs that have gaps (and their
    parents, up each chain of forks), when there are any."""
    snapshots: dict[str, CheckpointSnapshot | None] = {}
    todo = sorted({finding.run_id for finding in result.inconclusive if finding.run_id})
    async with reading(uri) as store:
        while todo:
            run_id = todo.pop()
            if run_id in snapshots:
                continue
            # A snapshot that cannot be read (damaged, sealed without keys) says nothing about
            # its run's origin: that run's gaps stay as they are.
            snapshots[run_id] = None
            with contextlib.suppress(CheckpointError, CorruptStoreError):
                snapshots[run_id] = await Checkpoint(store, run_id=run_id).load_latest()
            origin = snapshots[run_id]
            if origin is not None and origin.forked_from is not None:
                todo.append(origin.forked_from.run_id)
    forks = {
        run_id: snapshot.forked_from
        for run_id, snapshot in snapshots.items()
        if snapshot is not None and snapshot.forked_from is not None
    }
    return await verify_run(events, forks=forks) if forks else result


async def _open(uri: str) -> tuple[RunJournal, str]:
    """The journal ``uri`` names, opened to be read, and how messages name it.

    Raises:
        CommandFailed: No such file, store or journal table, or a store that keeps no journal.
        ConfigurationError: A malformed URI or an unknown scheme.
    """
    target = parse_store_uri(uri)  # the store URI forms of every --store; a bare path: a file
    if target.kind == "file":
        path = target.location if uri.startswith("file:") else uri
        if not await asyncio.to_thread(os.path.lexists, path):
            # A missing file reads as an empty journal (JR-04): "ok: 0 events" would be a lie.
            raise CommandFailed(f"no journal file at {path}")
        return JsonlRunJournal(path), path
    if target.kind not in DATABASE_STORE_KINDS:
        # Redis keeps none; memory:// would be a new, empty one of this process.
        raise CommandFailed(
            f"{target.uri}: a {target.kind} store keeps no run journal to verify "
            "(verify the JSONL journal its runs wrote)"
        )
    missing = await missing_store(uri)
    if missing is not None:
        raise CommandFailed(missing)
    journal = open_journal(uri)  # connects on the first read, and creates a missing table then
    assert isinstance(journal, SqlRunJournal)  # open_journal of a database store kind
    where = f"the journal of {target.uri}"
    if await table_missing(target, journal.table):
        await journal.close()  # never read, so never connected: this releases nothing else
        raise CommandFailed(f"no run journal in {target.uri} (it holds no {journal.table} table)")
    return journal, where


def _as_json(result: VerifyResult) -> dict[str, object]:
    return {
        "ok": result.ok,
        "failures": [_finding_json(f) for f in result.failures],
        "inconclusive": [_finding_json(f) for f in result.inconclusive],
        "stats": result.stats,
        "runs": list(result.runs),
    }


def _finding_json(finding: VerifyFinding) -> dict[str, object]:
    out = {key: value for key, value in asdict(finding).items() if value not in (None, ())}
    if "missing_seqs" in out:
        out["missing_seqs"] = list(finding.missing_seqs)
    return out


def _print(result: VerifyResult, console: Console) -> None:
    stats = result.stats
    runs = len(result.runs)
    console.out(
        f"{'ok' if result.ok else 'FAILED'}: {runs} run{'' if runs == 1 else 's'}, "
        f"{stats['events']} events, {stats['requests']} requests, "
        f"{stats['blocks_checked']} blocks checked",
        highlight=False,
    )
    for label, findings in (("failure", result.failures), ("inconclusive", result.inconclusive)):
        for finding in findings:
            where = (
                f" (message {finding.message_index}, block {finding.block_index})"
                if finding.message_index is not None
                else ""
            )
            missing = f" missing {list(finding.missing_seqs)}" if finding.missing_seqs else ""
            console.out(
                # The run id comes from the file: never let it drive the terminal.
                f"  {label}: run {terminal_safe(str(finding.run_id))} seq {finding.seq} "
                f"{finding.code}/{finding.reason}{where}{missing}",
                highlight=False,
            )
