"""``on_task_dispatch``: ask before each dispatch, suspend durably, consume approvals.

Spec AP-21 (dispatch suspension) and AP-32 (consuming an approved dispatch).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from oma_actors.approvals import (
    approval_request_id,
    create_approval_request,
    dispatch_content,
    hash_approval_request,
)
from oma_actors.approvals.gates import Allow, Deny, GateFailed, Suspend, consult
from oma_actors.domain.jsonforms import task_to_json
from oma_actors.domain.results import RunOutcome

if TYPE_CHECKING:
    from oma_actors.approvals.gates import Gate
    from oma_actors.domain.approvals import ApprovalRequest
    from oma_actors.domain.tasks import TaskState

Publish = Callable[[list["ApprovalRequest"], str | None], Awaitable[bool]]


@dataclass(frozen=True, slots=True)
class Go:
    """Dispatch the task; ``consumed`` names an approved request used up by this dispatch."""

    consumed: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Halt:
    """Stop dispatching; once in-flight work drains, skip the rest with ``reason``."""

    reason: str
    status: RunOutcome


@dataclass(frozen=True, slots=True, kw_only=True)
class Wait:
    """Stop dispatching and leave the rest pending: the run is suspended for a reviewer."""

    status: RunOutcome


class DispatchGate:
    """The dispatch gate of one run.

    Args:
        gate: the user's ``on_task_dispatch`` (or ``None`` when only approvals are consumed).
        run_id: the run's id (request ids are bound to it).
        can_suspend: the run has a checkpoint whose store has ``compare_and_set``.
        approved: task id -> an approved dispatch request restored from the ledger.
    """

    def __init__(
        self,
        gate: Gate | None,
        *,
        run_id: str,
        can_suspend: bool,
        approved: dict[str, ApprovalRequest] | None = None,
    ) -> None:
        self._gate = gate
        self._run_id = run_id
        self._can_suspend = can_suspend
        self._approved = dict(approved or {})

    def approved_first(self, ready: list[TaskState]) -> list[TaskState]:
        """``ready`` with the tasks whose dispatch a reviewer approved first (a stable sort).

        OMA dispatches the approved boundary before any other ready task, without asking the
        gate (``task-execution.ts``: ``approvedDispatchTaskId``): another task's denial or
        suspension must not stop the work the reviewer let through.
        """
        if not self._approved:
            return ready
        return sorted(ready, key=lambda task: task.id not in self._approved)

    async def check(self, task: TaskState, publish: Publish) -> Go | Halt | Wait:
        """Decide whether ``task`` (already assigned) may be dispatched now."""
        content = dispatch_content(task_to_json(task))
        approved = self._approved.get(task.id)
        if approved is not None:
            digest = hash_approval_request("task_dispatch", task.id, content)
            candidate = approval_request_id(self._run_id, "task_dispatch", task.id, digest)
            if candidate == approved.id and digest == approved.request_hash:
                # Spec AP-32: the reviewed boundary runs once, without asking the gate again.
                del self._approved[task.id]
                return Go(consumed=approved.id)
        if self._gate is None:
            return Go()
        match await consult(self._gate, task):
            case Allow():
                return Go()
            case Deny():
                return Halt(
                    reason="Skipped: task dispatch approval rejected.",
                    status=RunOutcome("rejected", "Task dispatch approval rejected."),
                )
            case GateFailed(error=error):
                return _callback_error(error)
            case Suspend(reason=reason):
                if not self._can_suspend:
                    return _callback_error(
                        "APPROVAL_ATOMIC_STORE_REQUIRED: durable suspension needs a checkpoint "
                        "store with compare_and_set"
                    )
                request = create_approval_request(
                    run_id=self._run_id,
                    scope="task_dispatch",
                    boundary=task.id,
                    content=content,
                    reason=reason,
                )
                if not await publish([request], task.id):
                    return _callback_error(
                        "APPROVAL_INTEGRITY_ERROR: the suspension could not be checkpointed"
                    )
                return Wait(status=RunOutcome("suspended", "Task dispatch approval pending."))


def _callback_error(error: str) -> Halt:
    return Halt(
        reason=f"Skipped: task dispatch callback error — {error}",
        status=RunOutcome("error", f"task dispatch callback error: {error}"),
    )
