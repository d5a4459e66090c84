"""Acknowledging host tool results once a durable save contains their commit records.

A host's winning result is acknowledged ``COMMITTED`` only when the runtime reports a durable
save containing the call's commit record: a ``CheckpointSaved`` whose ``committed`` names the
call's tool_call_id (for the call's run and task). That is the save outcome itself, not an
inference from the order of events: a save that failed says nothing, and a later durable save
that contains the record (the turn's next boundary saves every committed call again) still
acknowledges it. A result no durable save ever contained is acknowledged ``NOT_DURABLE`` when its
run ends.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from sidecar._pb.oma.v1 import sidecar_pb2 as pb

if TYPE_CHECKING:
    import asyncio
    from collections.abc import Callable, Iterable

Ack = pb.ResultAck.Status


def call_key(run_id: str | None, task_id: str | None, tool_call_id: str) -> str:
    """A tool call's idempotency key, ``run_id:task_id:tool_call_id`` (as ``ToolContext``'s)."""
    return f"{run_id or ''}:{task_id or ''}:{tool_call_id}"


@dataclass(slots=True)
class _Waiting:
    """Where the acknowledgement of one winning result goes."""

    session_id: str | None  # the stream that sent the result (None: the unary fallback)
    call_id: str
    run_id: str
    waiter: asyncio.Future[int] | None  # the unary fallback's reply


class CommitAcks:
    """Winning results waiting for a durable save, by idempotency key.

    Args:
        send: sends a message on a session's stream (by session id), if it is still open.
    """

    def __init__(self, send: Callable[[str, pb.ToolServerMessage], None]) -> None:
        self._send = send
        self._waiting: dict[str, _Waiting] = {}

    def expect(
        self,
        key: str,
        *,
        run_id: str,
        call_id: str,
        session_id: str | None,
        waiter: asyncio.Future[int] | None,
    ) -> None:
        """The result for ``key`` won: acknowledge it once a durable save contains it."""
        self._waiting[key] = _Waiting(session_id, call_id, run_id, waiter)

    def on_saved(self, run_id: str | None, task_id: str | None, committed: Iterable[str]) -> None:
        """A durable save of ``run_id`` contains the commit records of ``committed``."""
        for tool_call_id in committed:
            waiting = self._waiting.pop(call_key(run_id, task_id, tool_call_id), None)
            if waiting is not None:
                self._ack(waiting, Ack.STATUS_COMMITTED)

    def forget_run(self, run_id: str) -> None:
        """The run ended: results still waiting for a durable save will never get one."""
        for key, waiting in list(self._waiting.items()):
            if waiting.run_id == run_id:
                del self._waiting[key]
                self._ack(waiting, Ack.STATUS_NOT_DURABLE)

    def forget_session(self, session_id: str) -> None:
        """A stream ended: its results' acknowledgements have nowhere to go."""
        for key, waiting in list(self._waiting.items()):
            if waiting.session_id == session_id and waiting.waiter is None:
                del self._waiting[key]

    def _ack(self, waiting: _Waiting, status: int) -> None:
        if waiting.waiter is not None:
            if not waiting.waiter.done():
                waiting.waiter.set_result(status)
            return
        if waiting.session_id is not None:
            ack = pb.ResultAck(call_id=waiting.call_id, status=status)  # type: ignore[arg-type]
            self._send(waiting.session_id, pb.ToolServerMessage(result_ack=ack))
