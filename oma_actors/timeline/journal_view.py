"""Turns and tool-call marks read from a run's journal (OMA's event vocabulary, spec 17.2).

The journal records which attempt issued each call, which attempt committed its result and
which attempt closed its turn (the ``user/message`` of origin ``tool_results``). That is what
tells a replayed result from a call that ran again: see ``model`` for the marks.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from oma_actors.timeline.text import summarize
from oma_actors.timeline.values import (
    OUTCOME_UNKNOWN_CODE,
    TimelineCall,
    TimelineTurn,
    call_from_state,
)

if TYPE_CHECKING:
    from collections.abc import Sequence

    from oma_actors.domain.inflight import PendingCall
    from oma_actors.journal import JournalEvent


@dataclass(slots=True)
class _Call:
    call_id: str
    tool_name: str
    attempt: int
    results: list[tuple[int, str, bool]] = field(default_factory=list)
    closed_in: int | None = None


@dataclass(slots=True)
class _Turn:
    attempt: int
    text: str
    usage: dict[str, Any] | None
    calls: list[_Call] = field(default_factory=list)


class JournalView:
    """A run's journal events grouped by task: turns, calls, results and attempts."""

    def __init__(self, run_id: str, events: Sequence[JournalEvent]) -> None:
        """Group ``events`` of run ``run_id`` (others are ignored) by task, in seq order."""
        self._turns: dict[str, list[_Turn]] = {}
        self._attempts: dict[str, set[int]] = {}
        self._results: dict[str, dict[str, list[tuple[int, str, bool]]]] = {}
        calls: dict[tuple[str, str], _Call] = {}
        for event in sorted(events, key=lambda e: e.seq):
            task = event.task_id
            if event.run_id != run_id or task is None:
                continue
            self._attempts.setdefault(task, set()).add(event.attempt)
            turns = self._turns.setdefault(task, [])
            data = event.data
            if event.type == "assistant/message":
                message = data.get("message") or {}
                content = message.get("content") or []
                turns.append(_Turn(event.attempt, summarize(content), data.get("usage")))
                # A call is issued by the answer that requests it (its tool/call comes when it
                # starts, possibly in a later attempt).
                for block in content:
                    if isinstance(block, dict) and block.get("type") == "tool_use":
                        self._issue(calls, turns[-1], task, block, event.attempt)
            elif event.type == "tool/call" and turns:
                self._issue(calls, turns[-1], task, data.get("call") or {}, event.attempt)
            elif event.type == "tool/result":
                call_id = str(data.get("toolCallId", ""))
                result = data.get("result") or {}
                row = (
                    event.attempt,
                    summarize(result.get("content", "")),
                    bool(result.get("is_error")),
                )
                self._results.setdefault(task, {}).setdefault(call_id, []).append(row)
                found = calls.get((task, call_id))
                if found is not None:
                    found.results.append(row)
            elif event.type == "user/message" and data.get("origin") == "tool_results" and turns:
                for call in turns[-1].calls:
                    if call.closed_in is None:
                        call.closed_in = event.attempt

    @staticmethod
    def _issue(
        calls: dict[tuple[str, str], _Call],
        turn: _Turn,
        task: str,
        raw: dict[str, Any],
        attempt: int,
    ) -> None:
        call_id = str(raw.get("id", ""))
        if (task, call_id) in calls:
            return
        call = _Call(call_id, str(raw.get("name", "")), attempt)
        calls[(task, call_id)] = call
        turn.calls.append(call)

    def has_task(self, task_id: str) -> bool:
        """Whether the journal holds any event of ``task_id``."""
        return task_id in self._turns

    def attempts(self, task_id: str) -> tuple[int, ...]:
        """The attempts that recorded events of ``task_id``, ascending."""
        return tuple(sorted(self._attempts.get(task_id, ())))

    def results(self, task_id: str) -> dict[str, list[tuple[int, str, bool]]]:
        """The task's committed results by call id: (attempt, short text, is_error), in order."""
        return self._results.get(task_id, {})

    def turns(
        self, task_id: str, pending: dict[str, PendingCall], final_attempt: int
    ) -> tuple[TimelineTurn, ...]:
        """The task's turns, each call marked (``pending`` is the snapshot's in-flight calls)."""
        later = max(self._attempts.get(task_id, {0}))
        out: list[TimelineTurn] = []
        for index, turn in enumerate(self._turns.get(task_id, ()), start=1):
            usage = turn.usage or {}
            out.append(
                TimelineTurn(
                    index=index,
                    attempt=turn.attempt,
                    text=turn.text,
                    input_tokens=usage.get("input_tokens") if turn.usage else None,
                    output_tokens=usage.get("output_tokens") if turn.usage else None,
                    calls=tuple(_mark(c, pending.get(c.call_id), later) for c in turn.calls),
                )
            )
        return tuple(out)


def _mark(call: _Call, item: PendingCall | None, last_attempt: int) -> TimelineCall:
    def made(mark: Any, attempt: int, text: str | None, error: bool) -> TimelineCall:
        return TimelineCall(call_id=call.call_id, tool_name=call.tool_name, mark=mark,
                            attempt=attempt, result=text, is_error=error)  # fmt: skip

    if call.results:
        attempt, text, error = call.results[-1]
        if OUTCOME_UNKNOWN_CODE in text:
            return made("outcome unknown", attempt, text, error)
        if attempt > call.attempt:
            return made("re-ran", attempt, text, error)
        if call.closed_in is not None and call.closed_in > call.attempt:
            return made("replayed", call.closed_in, text, error)
        if call.closed_in is None and last_attempt > call.attempt and item is None:
            return made("replayed", last_attempt, text, error)
        return made("executed", attempt, text, error)
    if item is None and call.closed_in is not None and call.closed_in > call.attempt:
        # Its commit reached the snapshot but not the journal (a best-effort append lost in the
        # crash); the later attempt closed the turn without running it: the result was replayed.
        return made("replayed", call.closed_in, None, False)
    return call_from_state(call.call_id, call.tool_name, None, item, attempt=call.attempt)
