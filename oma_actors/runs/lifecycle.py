"""The run lifecycle: six statuses, the legal moves between them, and the error codes (RS-02).

Pure and tiny on purpose: an external store, a dashboard or the sidecar can apply exactly the
rules the ledger applies. Terminal statuses have no way out, so a late or repeated command can
never reopen a finished run.
"""

from __future__ import annotations

from typing import Final, Literal

from oma_actors.errors import LeaseError

RunStatus = Literal["queued", "running", "suspended", "completed", "failed", "cancelled"]
"""The durable status of a run (OMA's ``RunLifecycleStatus``)."""

RUN_STATUSES: Final[tuple[RunStatus, ...]] = (
    "queued",
    "running",
    "suspended",
    "completed",
    "failed",
    "cancelled",
)
TERMINAL_STATUSES: Final[frozenset[str]] = frozenset({"completed", "failed", "cancelled"})

LEASE_HELD: Final = "RUN_LEASE_HELD"
LEASE_LOST: Final = "RUN_LEASE_LOST"
ALREADY_TERMINAL: Final = "RUN_ALREADY_TERMINAL"
SUSPENDED: Final = "RUN_SUSPENDED"
NOT_FOUND: Final = "RUN_NOT_FOUND"
CONFLICT: Final = "RUN_CONFLICT"
INVALID_TRANSITION: Final = "RUN_INVALID_TRANSITION"
VALIDATION: Final = "RUN_VALIDATION_ERROR"
INTEGRITY: Final = "RUN_INTEGRITY_ERROR"
ATOMIC_REQUIRED: Final = "RUN_STORE_ATOMIC_REQUIRED"

_LEGAL: Final[dict[str, frozenset[str]]] = {
    "queued": frozenset({"running", "cancelled", "failed"}),
    "running": frozenset({"queued", "suspended", "completed", "failed", "cancelled"}),
    "suspended": frozenset({"queued", "running", "cancelled", "failed"}),
    "completed": frozenset(),
    "failed": frozenset(),
    "cancelled": frozenset(),
}


def is_terminal(status: str) -> bool:
    """Whether ``status`` is final: ``completed``, ``failed`` or ``cancelled`` (RS-02)."""
    return status in TERMINAL_STATUSES


def can_transition(current: str, target: str) -> bool:
    """Whether ``current -> target`` is a legal move (RS-02); the same status is not a move.

    Legal: queued to running, cancelled or failed; running to queued, suspended, completed,
    failed or cancelled; suspended to queued, running, cancelled or failed; nothing out of a
    terminal status.
    """
    return target in _LEGAL.get(current, frozenset())


def check_transition(run_id: str, current: str, target: str) -> None:
    """Refuse an illegal move (RS-02).

    Raises:
        LeaseError: ``RUN_ALREADY_TERMINAL`` when ``current`` is terminal, otherwise
            ``RUN_INVALID_TRANSITION``; neither carries a record.
    """
    if can_transition(current, target):
        return
    code = ALREADY_TERMINAL if is_terminal(current) else INVALID_TRANSITION
    raise LeaseError(code, f"run {run_id!r} cannot move from {current!r} to {target!r}")
