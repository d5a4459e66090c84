"""``oma approvals``: list, show and decide durable approval requests in a store.

``--store`` takes any ``open_store`` URI (a bare path is a file store; see ``store_option``).
``list`` and ``show`` only read, and read a state file without locking it, so they work beside
a running sidecar. ``decide`` locks a state file: while another process (a running ``oma serve``
or a worker) holds it, the decision is refused, because that process would overwrite it; decide
through that process, or stop it first.

A reviewer decides on the exact content they were shown: ``show`` prints the canonical JSON that
was hashed and its hash, and ``decide`` requires that hash back (``--hash``), so a request whose
content changed since it was shown is refused as stale instead of being approved blind.

Exit codes: 0 done; 2 with one line on stderr for everything that could not be done: not found
or refused (the ``DurableApprovalError`` code is printed; a request decided before is refused as
"already decided: <decision> by <reviewer>"), usage (no store file, a malformed ``--hash``) or a
store that cannot be opened. Stored text is printed through ``terminal_safe``.
"""

from __future__ import annotations

import json
import re
import sys
import textwrap
from typing import TYPE_CHECKING, Any

from oma_actors import DurableApprovalError, StoreError
from oma_actors.approvals import DurableApprovalLedger, Reviewer, approval_hash_input
from oma_actors.cli.failure import CommandFailed
from oma_actors.cli.store_option import (
    add_store_option,
    held_elsewhere,
    missing_store,
    reading,
    shown_store,
    writing,
)
from oma_actors.readable import to_iso
from oma_actors.timeline.terminal import terminal_safe

if TYPE_CHECKING:
    import argparse

    from rich.console import Console

    from oma_actors.approvals import ApprovalDecision, ApprovalRecord

_HASH = re.compile(r"[0-9a-f]{64}")


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``approvals list|show|decide`` to the ``oma`` sub-commands.

    Args:
        commands: The sub-parsers of the top-level ``oma`` parser.
    """
    approvals = commands.add_parser(
        "approvals",
        help="list, show and decide durable approval requests",
        description="Review durable approval requests kept in a store.",
    )
    actions = approvals.add_subparsers(dest="action", metavar="ACTION", required=True)
    listing = actions.add_parser("list", help="list approval requests and their decisions")
    add_store_option(listing, read_only=True)
    listing.add_argument("--run-id", help="only the requests of this run")
    listing.add_argument("--pending", action="store_true", help="only undecided requests")
    listing.add_argument("--json", action="store_true", help="print a JSON array")
    show = actions.add_parser(
        "show", help="print a request, the exact canonical JSON that was hashed, and its hash"
    )
    show.add_argument("request_id", metavar="ID", help="the request id (apr_...)")
    add_store_option(show, read_only=True)
    decide = actions.add_parser(
        "decide",
        help="record the first (and final) decision on a request",
        description=(
            "Approve or reject a request. The first decision wins and is immutable. A state "
            "file held by another process (a running sidecar) is refused: decide through it."
        ),
    )
    decide.add_argument("request_id", metavar="ID", help="the request id (apr_...)")
    add_store_option(decide, read_only=False)
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
    decide.add_argument(
        "--edit-input",
        metavar="JSON",
        help="approve a tool call with this input (a JSON object) instead of the model's",
    )


async def run(args: argparse.Namespace, console: Console) -> int:
    """Carry out an ``oma approvals`` command parsed by ``add_parser``'s parser.

    Returns:
        The exit code: 0 done.

    Raises:
        CommandFailed: Not found, refused (already decided, stale hash) or bad usage; exit 2.
        ConfigurationError: ``--store`` is not a store URI.
        StoreError: The store cannot be opened or read; for ``decide``, also when another
            process holds the state file (the message says to decide through it).
    """
    missing = await missing_store(args.store)
    if missing is not None:
        raise CommandFailed(missing)
    if args.action == "decide" and not _HASH.fullmatch(args.request_hash):
        raise CommandFailed("--hash must be the 64 lowercase hex digits printed by `show`")
    try:
        if args.action == "decide":
            return await _decide_in(args, console)
        async with reading(args.store) as store:
            ledger = DurableApprovalLedger(store)
            if args.action == "list":
                return await _list(ledger, args, console)
            if args.action == "show":
                return await _show(ledger, args, console)
    except DurableApprovalError as exc:
        raise CommandFailed(f"refused: {exc}") from exc
    raise CommandFailed(f"unknown approvals action {args.action!r}")


async def _decide_in(args: argparse.Namespace, console: Console) -> int:
    try:
        async with writing(args.store) as store:
            return await _decide(DurableApprovalLedger(store), args, console)
    except StoreError as exc:
        if not held_elsewhere(exc):
            raise
        # Deciding here would race the holder's own writes (D13): send the reviewer to it.
        raise StoreError(
            "refused: another process holds this state file, such as a running sidecar "
            "(oma serve) or worker; decide through that process (the sidecar's DecideApproval "
            f"RPC) or stop it, then decide again. {exc}"
        ) from exc


async def _list(ledger: DurableApprovalLedger, args: argparse.Namespace, console: Console) -> int:
    records = await ledger.list(run_id=args.run_id)
    if args.pending:
        records = [record for record in records if record.decision is None]
    if args.json:
        listed = json.dumps([_as_json(record) for record in records], indent=2)
        console.out(listed, highlight=False)
        return 0
    if not records:
        _say(console, "no approval requests")
        return 0
    for record in records:
        _print_listed(console, record)
    pending = sum(record.decision is None for record in records)
    _say(console, f"{len(records)} request(s), {pending} pending")
    return 0


def _print_listed(console: Console, record: ApprovalRecord) -> None:
    """Two lines per request that fit 80 columns; longer values wrap, never cut off."""
    from rich.text import Text

    request = record.request
    width = max(console.width, 60)
    # The id (36 characters) comes first and never wraps, so it can be copied whole.
    head = textwrap.fill(
        f"{request.id}  {_status(record.decision, when=False)}",
        width=width,
        subsequent_indent=" " * (len(request.id) + 2),
    )
    marked = " · CONSEQUENTIAL" if _consequential(request.content) else ""
    details = textwrap.fill(
        f"run {request.run_id} · {request.scope} {request.boundary}{marked} · "
        f"requested {to_iso(request.requested_at)}",
        width=width,
        initial_indent="    ",
        subsequent_indent="    ",
    )
    # Text is never parsed for markup or emoji codes: stored data prints verbatim.
    text = Text(terminal_safe(f"{head}\n{details}", keep_newlines=True))
    text.stylize("bold", 0, len(request.id))
    console.print(text, soft_wrap=True)


def _as_json(record: ApprovalRecord) -> dict[str, Any]:
    request, decision = record.request, record.decision
    return {
        "id": request.id,
        "run_id": request.run_id,
        "scope": request.scope,
        "boundary": request.boundary,
        "request_hash": request.request_hash,
        "requested_at": to_iso(request.requested_at),
        "reason": request.reason,
        "consequential": _consequential(request.content),
        "status": "pending" if decision is None else decision.decision,
        "decision": None
        if decision is None
        else {
            "decision": decision.decision,
            "reviewer": {
                "id": decision.reviewer.id,
                "display_name": decision.reviewer.display_name,
            },
            "decided_at": to_iso(decision.decided_at),
            "edited_input": decision.edited_input,
        },
    }


async def _show(ledger: DurableApprovalLedger, args: argparse.Namespace, console: Console) -> int:
    record = await ledger.get(args.request_id)
    if record is None:
        raise CommandFailed(f"APPROVAL_NOT_FOUND: approval {args.request_id} was not found")
    request = record.request
    _say(console, ("approval request ", "bold"), (request.id, "bold"))
    for label, value in (
        ("run", request.run_id),
        ("scope", request.scope),
        ("boundary", request.boundary),
        ("requested", to_iso(request.requested_at)),
        ("reason", request.reason),
        *_tool_lines(request.content),
        ("status", _status(record.decision)),
    ):
        if value is not None:
            _say(console, f"  {label:<10} ", value)
    _say(console, "content:")
    from rich.text import Text  # JSON escapes C0 controls but not C1 ones or bidi overrides

    content = json.dumps(request.content, indent=2, ensure_ascii=False)
    console.print(Text(terminal_safe(content, keep_newlines=True)), soft_wrap=True)
    _say(console, "hashed canonical JSON (exact text, one line):")
    _say(console, approval_hash_input(request.scope, request.boundary, request.content))
    _say(console, "request hash: ", request.request_hash)
    if record.decision is not None and record.decision.edited_input is not None:
        _say(console, "approved with this input instead (editedInput):")
        console.print_json(data=record.decision.edited_input)
    if record.decision is None:
        _say(
            console,
            f"to decide: oma approvals decide {request.id} --store {shown_store(args.store)} "
            f"--approve|--reject --reviewer NAME --hash {request.request_hash}",
        )
    return 0


def _consequential(content: dict[str, Any]) -> bool | None:
    """A tool call's ``consequential`` flag (it is hashed with the call); ``None`` otherwise."""
    if content.get("kind") != "tool_call":
        return None
    return content.get("consequential") is True


def _tool_lines(content: dict[str, Any]) -> list[tuple[str, str | None]]:
    """The tool call at a glance: which tool, and whether it is consequential (real effects)."""
    flag = _consequential(content)
    if flag is None:
        return []
    effects = "yes: granting it permits real side effects" if flag else "no"
    return [("tool", f"{content.get('toolName')} (agent {content.get('agentName')})"),
            ("consequential", effects)]  # fmt: skip


async def _decide(ledger: DurableApprovalLedger, args: argparse.Namespace, console: Console) -> int:
    edited = None
    if args.edit_input is not None:
        try:
            edited = json.loads(args.edit_input)
        except ValueError as exc:
            print(f"oma approvals: --edit-input is not JSON: {exc}", file=sys.stderr)
            return 2
    record = await ledger.decide(
        request_id=args.request_id,
        request_hash=args.request_hash,
        decision=args.decision,
        reviewer=Reviewer(args.reviewer, args.reviewer_name),
        edited_input=edited,
    )
    _say(console, f"{record.request.id}: ", _status(record.decision))
    return 0


def _say(console: Console, *parts: str | tuple[str, str]) -> None:
    """Print ``parts`` as plain text (no markup, emoji codes, highlighting or control
    characters: each part passes ``terminal_safe``), on one soft line."""
    from rich.text import Text

    safe = [
        (terminal_safe(part[0]), part[1]) if isinstance(part, tuple) else terminal_safe(part)
        for part in parts
    ]
    console.print(Text.assemble(*safe), soft_wrap=True)


def _status(decision: ApprovalDecision | None, *, when: bool = True) -> str:
    if decision is None:
        return "pending"
    who = decision.reviewer.id
    if decision.reviewer.display_name:
        who += f" ({decision.reviewer.display_name})"
    at = f" at {to_iso(decision.decided_at)}" if when else ""
    return f"{decision.decision} by {who}{at}"
