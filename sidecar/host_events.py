"""What the tool host tells a run's watchers: deliveries, waits and timeouts of host tool calls.

A host tool call that no connected host can take used to show nothing until its timeout, after
which the model got an error result and the run still ended "ok". Now every step is an event
in the run's log (``tool_call_dispatched``, ``tool_call_waiting``, ``tool_call_timed_out``), and
the calls that timed out are counted into the outcome message of the attempt.
"""

from __future__ import annotations

import contextlib
from dataclasses import replace
from typing import TYPE_CHECKING

from sidecar._pb.oma.v1 import sidecar_pb2 as pb
from sidecar.convert import dict_to_struct
from sidecar.record import UnknownRunError

if TYPE_CHECKING:
    from collections.abc import Mapping

    from sidecar.host_calls import HostSession, PendingCall
    from sidecar.record import Outcome
    from sidecar.runs import RunRegistry
    from sidecar.tool_host import ToolHost


class HostCallEvents:
    """Announces the tool host's deliveries, waits and timeouts in the runs' event logs.

    Args:
        registry: where the events go.
    """

    def __init__(self, registry: RunRegistry) -> None:
        self._registry = registry
        self._timed_out: dict[str, list[str]] = {}  # run id -> "tool (tool_call_id)"

    def attach(self, tool_host: ToolHost) -> None:
        """Receive ``tool_host``'s callbacks."""
        tool_host.on_dispatch = self.on_dispatch
        tool_host.on_waiting = self.on_waiting
        tool_host.on_expired = self.on_expired

    def on_dispatch(self, pending: PendingCall, session: HostSession) -> None:
        """Announce a delivery of a host tool call."""
        event = self._event("tool_call_dispatched", pending, {})
        detail = event.tool_call_dispatched
        detail.tool_name = pending.tool_name
        detail.tool_call_id = pending.tool_call_id
        detail.session_id = session.session_id
        detail.delivery_attempt = pending.delivery_attempt
        self._emit(pending.run_id, event)

    def on_waiting(self, pending: PendingCall, reason: str) -> None:
        """Announce a call that no host can take now (it waits until its timeout)."""
        data = {"reason": reason, "timeout_s": pending.deadline_s}
        self._emit(pending.run_id, self._event("tool_call_waiting", pending, data))

    def on_expired(self, pending: PendingCall) -> None:
        """Announce a call that got no result in time, and remember it for the outcome."""
        data = {"timeout_s": pending.deadline_s, "delivered": pending.delivery_attempt > 0}
        self._emit(pending.run_id, self._event("tool_call_timed_out", pending, data))
        self._timed_out.setdefault(pending.run_id, []).append(
            f"{pending.tool_name} ({pending.tool_call_id})"
        )

    def annotate(self, run_id: str, outcome: Outcome) -> Outcome:
        """``outcome`` with the host calls of the attempt that timed out; forgets them."""
        calls = self._timed_out.pop(run_id, [])
        if not calls:
            return outcome
        note = f"{len(calls)} host tool call(s) got no result in time: {', '.join(calls)}"
        message = f"{outcome.message}; {note}" if outcome.message else note
        return replace(outcome, message=message)

    def forget(self, run_id: str) -> None:
        """The attempt ended without an outcome to annotate."""
        self._timed_out.pop(run_id, None)

    @staticmethod
    def _event(kind: str, pending: PendingCall, data: Mapping[str, object]) -> pb.RunEvent:
        fields = {"tool_name": pending.tool_name, "tool_call_id": pending.tool_call_id, **data}
        return pb.RunEvent(
            type=kind, task_id=pending.task_id, agent=pending.agent, data=dict_to_struct(fields)
        )

    def _emit(self, run_id: str, event: pb.RunEvent) -> None:
        # A call of no run of this sidecar (a direct ToolHost user) has no log to go to.
        with contextlib.suppress(UnknownRunError):
            self._registry.emit(run_id, event)
