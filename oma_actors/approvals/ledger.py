"""The durable approval ledger: one compare-and-set row per request (spec AP-11..AP-17).

The ledger row ``__oma_approval__/<requestId>`` is the primary record of what was reviewed and
what was decided; checkpoints only carry copies. Every write is a compare-and-set, so a request
row is created once and a decision is recorded once: the first decision wins, and a reviewer who
lost a race is told so rather than silently overwriting (AP-16).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Literal, cast

from oma_actors.approvals.canonical import VALIDATION, stable_json
from oma_actors.approvals.records import (
    ApprovalRecord,
    check_reviewer,
    decided_record_text,
    parse_record,
    record_text,
    request_from_json,
    request_to_json,
)
from oma_actors.clock import from_iso, to_iso, utcnow
from oma_actors.domain.approvals import ApprovalDecision, ApprovalRequest
from oma_actors.errors import DurableApprovalError
from oma_actors.keyspace import APPROVAL_KEY_PREFIX, approval_key
from oma_actors.stores.base import is_atomic_store
from oma_actors.stores.prefix import list_under

if TYPE_CHECKING:
    import builtins
    from collections.abc import Callable
    from datetime import datetime

    from oma_actors.domain.approvals import Reviewer
    from oma_actors.stores.base import AtomicStore, MemoryStore

ATOMIC_STORE_REQUIRED = "APPROVAL_ATOMIC_STORE_REQUIRED"
CONFLICT = "APPROVAL_CONFLICT"
NOT_FOUND = "APPROVAL_NOT_FOUND"
STALE_DECISION = "APPROVAL_STALE_DECISION"


def require_atomic_store(store: object) -> AtomicStore:
    """Return ``store`` typed as an ``AtomicStore``, or refuse it (AP-17).

    The check is duck-typed: any store with a callable ``compare_and_set`` qualifies, and
    ``RedactingStore`` never does (its redaction would change what a hash binds).

    Raises:
        DurableApprovalError: ``APPROVAL_ATOMIC_STORE_REQUIRED`` when there is no callable
            ``compare_and_set``.
    """
    if not is_atomic_store(store):
        raise DurableApprovalError(
            ATOMIC_STORE_REQUIRED,
            f"durable approvals need a store with compare_and_set; {type(store).__name__} has none",
        )
    return cast("AtomicStore", store)


class DurableApprovalLedger:
    """Creates, reads and decides approval rows in an atomic store.

    Args:
        store: The store holding the rows; it must have ``compare_and_set``.
        now: The clock stamping ``decidedAt`` (default: the wall clock).

    Raises:
        DurableApprovalError: ``APPROVAL_ATOMIC_STORE_REQUIRED`` for a store without
            ``compare_and_set``.
    """

    def __init__(self, store: AtomicStore, *, now: Callable[[], datetime] = utcnow) -> None:
        self._store = require_atomic_store(store)
        self._now = now

    async def ensure_request(self, request: ApprovalRequest) -> ApprovalRecord:
        """Create the row for ``request``, or return the identical row that exists (AP-12).

        Returns:
            The stored record, possibly already carrying a decision.

        Raises:
            DurableApprovalError: ``APPROVAL_INTEGRITY_ERROR`` when ``request`` (or the row
                found) does not verify; ``APPROVAL_CONFLICT`` when a row with this id holds a
                different request (any field, including ``reason`` and ``requested_at``).
        """
        checked = request_from_json(request_to_json(request))
        text = record_text(checked)
        metadata = _metadata(checked, requestedAt=to_iso(checked.requested_at))
        if await self._store.compare_and_set(approval_key(checked.id), None, text, metadata):
            return ApprovalRecord(request=checked, decision=None, raw=text)
        existing = await self.get(checked.id)
        if existing is None:
            # Rows are never deleted by the ledger: something outside it removed this one
            # between our compare-and-set and our read.
            raise DurableApprovalError(CONFLICT, f"approval {checked.id} changed concurrently")
        if stable_json(request_to_json(existing.request)) != stable_json(request_to_json(checked)):
            raise DurableApprovalError(
                CONFLICT, f"approval {checked.id} already exists with different content"
            )
        return existing

    async def get(self, request_id: str) -> ApprovalRecord | None:
        """Return the verified row of ``request_id``, or ``None`` when there is none (AP-13).

        Raises:
            DurableApprovalError: ``APPROVAL_INTEGRITY_ERROR`` when the row is not valid JSON,
                not a valid record, or holds another request than its key says.
        """
        return await _read(self._store, request_id)

    async def decide(
        self,
        *,
        request_id: str,
        request_hash: str,
        decision: Literal["approve", "reject"],
        reviewer: Reviewer,
        edited_input: dict[str, Any] | None = None,
    ) -> ApprovalRecord:
        """Record the first decision on a request (AP-16).

        Checks, in order: the reviewer, the decision value, that the row exists, that it
        verifies, that ``request_hash`` is the hash the row binds (so a reviewer can only decide
        on the exact content they saw), and that nothing was decided yet. Repeating the
        decision that was recorded (same value, same reviewer id) returns the existing record.

        Args:
            request_id: The request decided on.
            request_hash: The hash the reviewer saw.
            decision: ``"approve"`` or ``"reject"``.
            reviewer: Who decides; the id is trimmed.
            edited_input: approve a tool call with this input instead of the model's (D17):
                bound into the decision by its ``editHash``, stored beside the request, and
                validated against the tool's schema when the call is about to run.

        Returns:
            The record carrying the decision.

        Raises:
            DurableApprovalError: ``APPROVAL_VALIDATION_ERROR`` (reviewer, decision value),
                ``APPROVAL_NOT_FOUND``, ``APPROVAL_INTEGRITY_ERROR`` (the row does not verify),
                ``APPROVAL_STALE_DECISION`` (``request_hash`` differs) or ``APPROVAL_CONFLICT``
                (another decision was recorded first, possibly concurrently).
        """
        reviewer = check_reviewer(reviewer)
        if decision not in ("approve", "reject"):
            raise DurableApprovalError(
                VALIDATION, f"approval decision must be 'approve' or 'reject', not {decision!r}"
            )
        record = await _read(self._store, request_id)
        if record is None:
            raise DurableApprovalError(NOT_FOUND, f"approval {request_id} was not found")
        request = record.request
        edit = _checked_edit(edited_input, request, decision)
        if request_hash != request.request_hash:
            raise DurableApprovalError(
                STALE_DECISION,
                f"approval {request_id} changed after review: its hash is "
                f"{request.request_hash}, not {request_hash}",
            )
        value: Literal["approved", "rejected"] = "approved" if decision == "approve" else "rejected"
        if record.decision is not None:
            return _repeat_or_conflict(record, value, reviewer, "already decided", edit)
        decided = ApprovalDecision(
            request_id=request.id,
            run_id=request.run_id,
            scope=request.scope,
            request_hash=request.request_hash,
            decision=value,
            reviewer=reviewer,
            decided_at=from_iso(to_iso(self._now())),
            edited_input=edit,
        )
        text = decided_record_text(record, decided)
        at = to_iso(decided.decided_at)
        metadata = _metadata(request, decision=value, reviewerId=reviewer.id, decidedAt=at)
        # Compare against the exact text we verified: any write in between (another decision,
        # or an edit) makes this fail rather than be overwritten.
        if await self._store.compare_and_set(approval_key(request_id), record.raw, text, metadata):
            return ApprovalRecord(request=request, decision=decided, raw=text)
        winner = await _read(self._store, request_id)
        if winner is None or winner.decision is None:
            raise DurableApprovalError(CONFLICT, f"approval {request_id} changed concurrently")
        return _repeat_or_conflict(winner, value, reviewer, "was decided concurrently", edit)

    async def list(self, *, run_id: str | None = None) -> builtins.list[ApprovalRecord]:
        """Every approval row in store order, optionally only those of ``run_id``.

        Keys outside ``__oma_approval__/`` are skipped.

        Raises:
            DurableApprovalError: ``APPROVAL_INTEGRITY_ERROR`` for any row that does not verify.
        """
        records: builtins.list[ApprovalRecord] = []
        # The rows' prefix alone: another run's or another kind's value (one that does not open
        # under this process's keys, say) is never read, so it cannot fail this listing.
        for entry in await list_under(self._store, APPROVAL_KEY_PREFIX):
            if not entry.key.startswith(APPROVAL_KEY_PREFIX):
                continue
            record = parse_record(entry.value, entry.key.removeprefix(APPROVAL_KEY_PREFIX))
            if run_id is None or record.request.run_id == run_id:
                records.append(record)
        return records


async def decide_approval(
    store: MemoryStore,
    *,
    request_id: str,
    request_hash: str,
    decision: Literal["approve", "reject"],
    reviewer: Reviewer,
    edited_input: dict[str, Any] | None = None,
) -> ApprovalRecord:
    """Record a reviewer's decision in ``store`` (``DurableApprovalLedger(store).decide``).

    Raises:
        DurableApprovalError: ``APPROVAL_ATOMIC_STORE_REQUIRED`` for a store without
            ``compare_and_set``, then as ``DurableApprovalLedger.decide``.
    """
    ledger = DurableApprovalLedger(require_atomic_store(store))
    return await ledger.decide(
        request_id=request_id,
        request_hash=request_hash,
        decision=decision,
        reviewer=reviewer,
        edited_input=edited_input,
    )


async def get_approval_record(store: MemoryStore, request_id: str) -> ApprovalRecord | None:
    """Read the verified row of ``request_id`` from any store (reading needs no CAS).

    Raises:
        DurableApprovalError: ``APPROVAL_INTEGRITY_ERROR`` as ``DurableApprovalLedger.get``.
    """
    return await _read(store, request_id)


async def _read(store: MemoryStore, request_id: str) -> ApprovalRecord | None:
    entry = await store.get(approval_key(request_id))
    return None if entry is None else parse_record(entry.value, request_id)


def _metadata(request: ApprovalRequest, **extra: str) -> dict[str, object]:
    """The store metadata of a ledger write (AP-12, AP-16): queryable without parsing the row."""
    return {
        "namespace": "approval",
        "version": 1,
        "runId": request.run_id,
        "scope": request.scope,
        "requestHash": request.request_hash,
        **extra,
    }


def _checked_edit(
    edited_input: object, request: ApprovalRequest, decision: str
) -> dict[str, Any] | None:
    """``edited_input`` as canonical JSON, or refused (D17); ``None`` stays ``None``.

    Raises:
        DurableApprovalError: ``APPROVAL_VALIDATION_ERROR`` when it is not a JSON object, or
            edits anything but the approval of a tool call.
    """
    if edited_input is None:
        return None
    if not isinstance(edited_input, dict):
        raise DurableApprovalError(VALIDATION, "edited_input must be a JSON object (a dict)")
    if request.scope != "tool_call" or decision != "approve":
        raise DurableApprovalError(
            VALIDATION,
            f"edited_input applies only to approving a tool call; approval {request.id} is "
            f"a {request.scope} request and the decision is {decision!r}",
        )
    plain: dict[str, Any] = json.loads(stable_json(edited_input))
    return plain


def _repeat_or_conflict(
    record: ApprovalRecord,
    value: str,
    reviewer: Reviewer,
    what: str,
    edit: dict[str, Any] | None = None,
) -> ApprovalRecord:
    existing = record.decision
    assert existing is not None
    if (
        existing.decision == value
        and existing.reviewer.id == reviewer.id
        and existing.edited_input == edit
    ):
        return record
    raise DurableApprovalError(
        CONFLICT,
        f"approval {record.request.id} {what}: {existing.decision} by {existing.reviewer.id}",
    )
