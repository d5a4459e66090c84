"""``oma verify JOURNAL [--json]``: audit a run journal offline (spec JR-21..JR-23).

A journal may hold many runs (seqs are numbered per run): each run is verified on its own, the
summary counts the runs, and every finding names its run and seq.

Exit codes: 0 the journal verifies (inconclusive gaps alone are ok), 1 it has failures, 2 it
cannot be read (missing file, a bad line that is not a torn trailing one, no valid event at
all), with one line on stderr.
"""

from __future__ import annotations

import asyncio
import json
import os
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING

from oma_actors.cli.encryption import KEYS_ENV, keyring_from_env, sealed_journal
from oma_actors.cli.failure import CommandFailed
from oma_actors.journal import JsonlRunJournal, verify_run
from oma_actors.journal.encrypting import SEALED_FIELD
from oma_actors.timeline.terminal import terminal_safe

if TYPE_CHECKING:
    import argparse

    from rich.console import Console

    from oma_actors.journal import VerifyFinding, VerifyResult


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``verify`` to the ``oma`` sub-commands."""
    verify = commands.add_parser(
        "verify",
        help="verify a run journal (JSONL): sequences, links, request block lineage",
        description=(
            "Verify a JSONL run journal offline, each run it holds on its own: strictly "
            "increasing sequences per run, every sourceEventSeqs link, and that every block a "
            "model was shown is reproducible from the journal. Exit 0 ok, 1 failures, "
            "2 unreadable."
        ),
    )
    verify.add_argument("journal", type=Path, metavar="JOURNAL", help="the .jsonl journal file")
    verify.add_argument("--json", action="store_true", help="print the result as JSON")


async def run(args: argparse.Namespace, console: Console) -> int:
    """Carry out ``oma verify``; 0 ok, 1 failures.

    Raises:
        CommandFailed: The journal is missing, holds no valid event (a file of garbage alone
            proves nothing, so it is not "ok"), or is sealed and no keys were given; ``main``
            prints it as one line on stderr, exit 2. An unreadable journal raises its own typed
            error, printed the same way: a bad line, and a path that is not a regular file (a
            FIFO, ``/dev/zero``, ``/proc/kmsg``, a directory) or is over the journal read limit,
            both refused before anything is read, so none of them hangs or loads gigabytes.
    """
    path: Path = args.journal
    if not await asyncio.to_thread(os.path.lexists, path):
        # A missing file reads as an empty journal (JR-04): "ok: 0 events" would be a lie here.
        raise CommandFailed(f"no journal file at {path}")
    keyring = keyring_from_env()
    journal = sealed_journal(JsonlRunJournal(path), keyring)
    try:
        events = await journal.read_from(0)
    finally:
        await journal.close()
    if keyring is None and any(SEALED_FIELD in event.data for event in events):
        # Sealed payloads prove nothing about lineage: a pass here would be vacuous.
        raise CommandFailed(f"{path} is sealed (EncryptingJournal): set {KEYS_ENV} to its key file")
    result = await verify_run(events)
    if result.stats["events"] == 0:
        # Zero events is what an empty file, a wrong file or one torn line all read as.
        raise CommandFailed(f"no valid event in {path}: it is not a run journal, or it is empty")
    if args.json:
        console.out(json.dumps(_as_json(result), indent=2), highlight=False)
    else:
        _print(result, console)
    return 0 if result.ok else 1


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
