"""``oma approvals``: list, show and decide durable approval requests in a FileStore file.

A reviewer decides on the exact content they were shown: ``show`` prints the canonical JSON that
was hashed and its hash, and ``decide`` requires that hash back (``--hash``), so a request whose
content changed since it was shown is refused as stale instead of being approved blind.

Exit codes: 0 done; 1 not found or refused (the ``DurableApprovalError`` code is printed);
2 usage (no store file, a malformed ``--hash``).
"""

from __future__ import annotations

import re
from datetime import UTC
from pathlib import Path
from typing import TYPE_CHECKING

import aiofiles.os

from oma_actors import DurableApprovalError, FileStore, Reviewer
from oma_actors.approvals import DurableApprovalLedger, approval_hash_input

if TYPE_CHECKING:
    import argparse
    from datetime import datetime

    from rich.console import Console

    from oma_actors import ApprovalDecision

_HASH = re.compile(r"[0-9a-f]{64}")


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``approvals list|show|decide`` to the ``oma`` sub-commands.

    Args:
        commands: The sub-parsers of the top-level ``oma`` parser.
    """
    approvals = commands.add_parser(
        "approvals",
        help="list, show and decide durable approval requests",
        description="Review durable approval requests kept in a FileStore file.",
    )
    actions = approvals.add_subparsers(dest="action", metavar="ACTION", required=True)
    listing = actions.add_parser("list", help="list approval requests and their decisions")
    _store_option(listing)
    listing.add_argument("--run-id", help="only the requests of this run")
    listing.add_argument("--pending", action="store_true", help="only undecided requests")
    show = actions.add_parser(
        "show", help="print a request, the exact canonical JSON that was hashed, and its hash"
    )
    show.add_argument("request_id", metavar="ID", help="the request id (apr_...)")
    _store_option(show)
    decide = actions.add_parser(
        "decide",
        help="record the first (and final) decision on a request",
        description="Approve or reject a request. The first decision wins and is immutable.",
    )
    decide.add_argument("request_id", metavar="ID", help="the request id (apr_...)")
    _store_option(decide)
    verdict = decide.add_mutually_exclusive_group(required=True)
    for flag, value in (("--approve", "approve"), ("--reject", "reject")):
        verdict.add_argument(
            flag, dest="decision", action="store_const", const=value, help=f"{value} the request"
        )
    decide.add_argument("--reviewer", required=True, help="the reviewer's id (recorded)")
    decide.add_argument("--reviewer-name", help="the reviewer's display name")
    decide.add_argument(
        "--hash",
        dest="request_hash",
        required=True,
        help="the request hash you reviewed, as printed by `show`",
    )


def _store_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--store", type=Path, required=True, help="path of the FileStore file")


async def run(args: argparse.Namespace, console: Console) -> int:
    """Carry out an ``oma approvals`` command parsed by ``add_parser``'s parser.

    Returns:
        The exit code: 0 done, 1 not found or refused, 2 usage.
    """
    if not await aiofiles.os.path.exists(args.store):
        _say(console, ("no store file at ", "red"), str(args.store))
        return 2
    if args.action == "decide" and not _HASH.fullmatch(args.request_hash):
        _say(console, ("--hash must be the 64 lowercase hex digits printed by `show`", "red"))
        return 2
    try:
        async with FileStore.open(args.store) as store:
            ledger = DurableApprovalLedger(store)
            if args.action == "list":
                return await _list(ledger, args, console)
            if args.action == "show":
                return await _show(ledger, args, console)
            if args.action == "decide":
                return await _decide(ledger, args, console)
    except DurableApprovalError as exc:
        _say(console, ("refused: ", "red"), str(exc))
        return 1
    _say(console, ("unknown approvals action ", "red"), repr(args.action))
    return 2


async def _list(ledger: DurableApprovalLedger, args: argparse.Namespace, console: Console) -> int:
    from rich.table import Table
    from rich.text import Text

    records = await ledger.list(run_id=args.run_id)
    if args.pending:
        records = [record for record in records if record.decision is None]
    if not records:
        _say(console, "no approval requests")
        return 0
    table = Table("id", "run", "scope", "boundary", "requested", "status")
    for column in table.columns:
        column.overflow = "fold"  # wrap, never elide: ids and times are copied from here
    table.columns[0].no_wrap = True
    for record in records:
        request = record.request
        cells = (
            request.id,
            request.run_id,
            request.scope,
            request.boundary,
            _when(request.requested_at),
            _status(record.decision, when=False),
        )
        # Text cells are never parsed for markup or emoji codes: stored data prints verbatim.
        table.add_row(*(Text(cell) for cell in cells))
    console.print(table)
    return 0


async def _show(ledger: DurableApprovalLedger, args: argparse.Namespace, console: Console) -> int:
    record = await ledger.get(args.request_id)
    if record is None:
        _say(console, ("APPROVAL_NOT_FOUND: ", "red"), f"approval {args.request_id} was not found")
        return 1
    request = record.request
    _say(console, ("approval request ", "bold"), (request.id, "bold"))
    for label, value in (
        ("run", request.run_id),
        ("scope", request.scope),
        ("boundary", request.boundary),
        ("requested", _when(request.requested_at)),
        ("reason", request.reason),
        ("status", _status(record.decision)),
    ):
        if value is not None:
            _say(console, f"  {label:<10} ", value)
    _say(console, "content:")
    console.print_json(data=request.content)
    _say(console, "hashed canonical JSON (exact text, one line):")
    _say(console, approval_hash_input(request.scope, request.boundary, request.content))
    _say(console, "request hash: ", request.request_hash)
    if record.decision is None:
        _say(
            console,
            f"to decide: oma approvals decide {request.id} --store {args.store} "
            f"--approve|--reject --reviewer NAME --hash {request.request_hash}",
        )
    return 0


async def _decide(ledger: DurableApprovalLedger, args: argparse.Namespace, console: Console) -> int:
    record = await ledger.decide(
        request_id=args.request_id,
        request_hash=args.request_hash,
        decision=args.decision,
        reviewer=Reviewer(args.reviewer, args.reviewer_name),
    )
    _say(console, f"{record.request.id}: ", _status(record.decision))
    return 0


def _say(console: Console, *parts: str | tuple[str, str]) -> None:
    """Print ``parts`` verbatim (no markup, emoji codes or highlighting), on one soft line."""
    from rich.text import Text

    console.print(Text.assemble(*parts), soft_wrap=True)


def _status(decision: ApprovalDecision | None, *, when: bool = True) -> str:
    if decision is None:
        return "pending"
    who = decision.reviewer.id
    if decision.reviewer.display_name:
        who += f" ({decision.reviewer.display_name})"
    at = f" at {_when(decision.decided_at)}" if when else ""
    return f"{decision.decision} by {who}{at}"


def _when(moment: datetime) -> str:
    """A stored time as the ledger writes it (UTC, milliseconds, ``Z``), so it can be compared."""
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
