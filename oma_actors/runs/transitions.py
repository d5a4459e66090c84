"""The next record of every ledger and handle command, as pure functions (RS-06..RS-09).

No I/O and no checks of who owns what: the ledger and the handle decide whether a command may
run, then ask here what the record becomes. Each result is one write: ``version + 1`` and
``updatedAt = now``. Only a change of owner moves the fencing token (a new acquisition or an
operator's cancel); a takeover of a record that still carries someone's expired lease also
starts a new attempt, while a released or resumed record (no lease) keeps its attempt.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from oma_actors.runs.fields import from_ms, iso_ms, to_ms
from oma_actors.runs.record import Lease, RunRecord, lease_live

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from datetime import datetime

    from oma_actors.runs.lifecycle import RunStatus


def new_lease(owner: str, now: datetime, ttl_ms: int) -> Lease:
    """A lease of ``owner`` from ``now`` for ``ttl_ms`` milliseconds."""
    return Lease(owner, now, from_ms(to_ms(now) + ttl_ms))


def created(run_id: str, owner: str, now: datetime, ttl_ms: int) -> RunRecord:
    """The first record of a run: running, version 1, attempt 1, fencing token 1 (RS-06)."""
    return RunRecord(
        run_id=run_id,
        version=1,
        status="running",
        attempt=1,
        fencing_token=1,
        lease=new_lease(owner, now, ttl_ms),
        created_at=now,
        updated_at=now,
    )


def acquired(current: RunRecord, owner: str, now: datetime, ttl_ms: int) -> RunRecord:
    """``current`` taken by ``owner`` (RS-06): running, a new lease, the fencing token + 1.

    The token moves even when ``owner`` renews its own live lease, so an older handle of the
    same owner is fenced out too. The attempt grows only on a takeover of a record that still
    carries a lease (someone else's, or an expired one of ``owner``).
    """
    renewal = (
        lease_live(current, now) and current.lease is not None and current.lease.owner == owner
    )
    takeover = current.lease is not None and not renewal
    return replace(
        current,
        version=current.version + 1,
        status="running",
        attempt=current.attempt + 1 if takeover else current.attempt,
        fencing_token=current.fencing_token + 1,
        lease=new_lease(owner, now, ttl_ms),
        updated_at=now,
    )


def renewed(current: RunRecord, owner: str, now: datetime, ttl_ms: int) -> RunRecord:
    """``current`` with its lease extended from ``now`` (RS-09 ``renew``)."""
    return replace(
        current,
        version=current.version + 1,
        lease=new_lease(owner, now, ttl_ms),
        updated_at=now,
    )


def checkpointed(
    current: RunRecord, ref: Mapping[str, object], owner: str, now: datetime, ttl_ms: int
) -> RunRecord:
    """``current`` pointing at checkpoint ``ref``, lease renewed in the same write (RS-09)."""
    return replace(
        current,
        version=current.version + 1,
        checkpoint_ref=dict(ref),
        lease=new_lease(owner, now, ttl_ms),
        updated_at=now,
    )


def suspended(current: RunRecord, approval_ids: Sequence[str], now: datetime) -> RunRecord:
    """``current`` suspended on ``approval_ids``, its lease dropped (RS-09 ``suspend``)."""
    return replace(
        current,
        version=current.version + 1,
        status="suspended",
        lease=None,
        suspension={"suspendedAt": iso_ms(now), "pendingApprovalIds": list(approval_ids)},
        updated_at=now,
    )


def finished(
    current: RunRecord, status: RunStatus, outcome: Mapping[str, object], now: datetime
) -> RunRecord:
    """``current`` closed as ``status`` with ``outcome``, its lease dropped (RS-09)."""
    return replace(
        current,
        version=current.version + 1,
        status=status,
        lease=None,
        outcome=dict(outcome),
        updated_at=now,
    )


def released(current: RunRecord, now: datetime) -> RunRecord:
    """``current`` given up unfinished: queued, no lease, same attempt (RS-09 ``release``)."""
    return replace(
        current, version=current.version + 1, status="queued", lease=None, updated_at=now
    )


def resumed(current: RunRecord, now: datetime) -> RunRecord:
    """``current`` made eligible again: queued, lease and suspension cleared (RS-07)."""
    return replace(
        current,
        version=current.version + 1,
        status="queued",
        lease=None,
        suspension=None,
        updated_at=now,
    )


def cancelled(current: RunRecord, message: str | None, now: datetime) -> RunRecord:
    """``current`` cancelled by an operator (RS-08): no lease, the fencing token + 1.

    Moving the token is what stops the worker that holds the run: its next fenced write is
    refused with ``RUN_LEASE_LOST``.
    """
    outcome: dict[str, object] = {"code": "cancelled"}
    if message is not None:
        outcome["message"] = message
    return replace(
        current,
        version=current.version + 1,
        status="cancelled",
        fencing_token=current.fencing_token + 1,
        lease=None,
        outcome=outcome,
        updated_at=now,
    )
