"""``settle_record``: how a run ended, written into its run record by the lease holder.

One rule for every holder of a run's lease (the orchestrator's flows, the sidecar holding a
lease around an attempt): ``ok`` completes the run, ``suspended`` suspends it on its pending
approvals, ``aborted`` (the lease was lost) leaves the record to its new owner, anything else
fails it with the status as the outcome.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Sequence

    from oma_actors.runs.handle import RunLeaseHandle


async def settle_record(
    lease: RunLeaseHandle, code: str, message: str | None, approval_ids: Sequence[str]
) -> None:
    """Settle the run record of ``lease`` from the run's status ``code`` and ``message``.

    Raises:
        LeaseError: the lease was lost, or the record moved on (the new owner decides).
    """
    outcome: dict[str, object] = {"code": code}
    if message:
        outcome["message"] = message
    match code:
        case "ok":
            await lease.complete(outcome)
        case "suspended":
            await lease.suspend(approval_ids)
        case "aborted":
            return
        case _:
            await lease.fail(outcome)
