"""Turns and tool-call marks read from a run's journal (OMA's event vocabulary, spec 17.2).

The journal records which attempt issued each call, which attempt started it (``tool/call``),
which attempt committed its result, which attempt closed its turn (the ``user/message`` of
origin ``tool_results``), and the approval a call waited on and its decision. Those facts tell a
replayed result from a call that ran again, from one that was settled by ``reconcile`` or
refused by a reviewer: see ``model`` for the marks.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from oma_actors.timeline.text import summarize
from oma_actors.timeline.values import (
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
    # Attempts whose tool/call started this call (an unsafe call's durable dispatch, or the
    # start recorded with a commit).
    started: list[int] = field(default_factory=list)


@dataclass(slots=True)
class _Turn:
    attempt: int
    text: str
    usage: dict[str, Any] | None
    calls: list[_Call] = field(default_factory=list)


class JournalView:
    """A run's journal events grouped by task: turns, calls, results and attempts."""

    def __init__(self, run_id: str, events: Sequence[JournalEvent]) -> None:
        """Group ``events`` of run ``run_id`` (others are ignored) by task, in seq order.

        Only the run's current life counts: a fresh run given the id of a run it replaced (a
        finished one, or one overwritten) starts with a ``run/start`` of attempt 1, and the
        events before it, still in a journal file other runs share, are that other run's.
        """
        self._turns: dict[str, list[_Turn]] = {}
        self._attempts: dict[str, set[int]] = {}
        self._results: dict[str, dict[str, list[tuple[int, str, bool]]]] = {}
        self._calls: dict[tuple[str, str], _Call] = {}
        # tool call id -> its approval request id; request id -> "approved" / "rejected".
        # (task, call id) -> its approval request: a call id is unique within one conversation
        # only (two tasks' models may both name a call ``call_0``).
        self._approval_of: dict[tuple[str, str], str] = {}
        self._verdicts: dict[str, str] = {}
        calls = self._calls
        for event in current_life(run_id, events):
            task = event.task_id
            if event.type.startswith("approval/"):
                self._approval(event.type, event.data)  # decisions are run-scoped (no task)
            if task is None:
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
                raw = data.get("call") or {}
                self._issue(calls, turns[-1], task, raw, event.attempt)
                calls[(task, str(raw.get("id", "")))].started.append(event.attempt)
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

    def _approval(self, kind: str, data: dict[str, Any]) -> None:
        if kind == "approval/request":
            request = data.get("request") or {}
            content = request.get("content") if isinstance(request, dict) else None
            content = content if isinstance(content, dict) else {}
            task, call_id = content.get("taskId"), content.get("toolCallId")
            if (
                isinstance(task, str)
                and isinstance(call_id, str)
                and isinstance(request.get("id"), str)
            ):
                self._approval_of[(task, call_id)] = request["id"]
        elif kind == "approval/decision":
            decision = data.get("decision") or {}
            if isinstance(decision, dict) and isinstance(decision.get("requestId"), str):
                self._verdicts[decision["requestId"]] = str(decision.get("decision"))

    def starts(self, task_id: str) -> dict[str, tuple[int, ...]]:
        """The task's calls that a ``tool/call`` started: call id -> the attempts, in order."""
        return {
            call_id: tuple(call.started)
            for (task, call_id), call in self._calls.items()
            if task == task_id and call.started
        }

    def verdict(self, task_id: str, call_id: str) -> str | None:
        """``approved``/``rejected`` when the task's call's approval was decided; ``""`` while
        undecided; ``None`` when the call never waited on an approval."""
        request = self._approval_of.get((task_id, call_id))
        return None if request is None else self._verdicts.get(request, "")

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
        current = max(later, final_attempt)
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
                    calls=tuple(
                        _mark(
                            c,
                            pending.get(c.call_id),
                            later,
                            current,
                            self.verdict(task_id, c.call_id),
                        )
                        for c in turn.calls
                    ),
                )
            )
        return tuple(out)


def _mark(
    call: _Call, item: PendingCall | None, last_attempt: int, current: int, verdict: str | None
) -> TimelineCall:
    """The call's mark from its facts; ``current`` is the run's attempt (see ``model``)."""

    def made(mark: Any, attempt: int, text: str | None, error: bool) -> TimelineCall:
        return TimelineCall(call_id=call.call_id, tool_name=call.tool_name, mark=mark,
                            attempt=attempt, result=text, is_error=error)  # fmt: skip

    if call.results:
        attempt, text, error = call.results[-1]
        if verdict == "rejected":
            return made("rejected", attempt, text, error)  # answered with the refusal, not run
        if attempt not in call.started and any(start < attempt for start in call.started):
            # Started by an earlier attempt, committed by one that did not start it: an unsafe
            # call is never run twice (D1); the restore settled it through reconcile, or told
            # the model its outcome is unknown (an error result).
            return made("outcome unknown" if error else "settled", attempt, text, error)
        if verdict is not None:
            return made("executed", attempt, text, error)  # ran once, after its approval
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
    if call.started and item is not None and item.commit is None:
        # Started, no result: still running in the attempt that started it (a host call waiting
        # for a host), or its attempt ended and the outcome is unknown until a restore settles it.
        start = call.started[-1]
        return made("running" if start == current else "outcome unknown", start, None, False)
    return call_from_state(call.call_id, call.tool_name, None, item, attempt=call.attempt)


def current_life(run_id: str, events: Sequence[JournalEvent]) -> list[JournalEvent]:
    """The events of ``run_id`` from its latest fresh start on, in seq order.

    A fresh run starts with ``run/start`` at attempt 1; a restore's start, and a fork's first
    (it continues its parent's attempts), have a later attempt. Without a fresh start in
    ``events`` (a fork, or a journal cut below it) every event of the run counts.
    """
    mine = sorted((e for e in events if e.run_id == run_id), key=lambda e: e.seq)
    starts = [i for i, e in enumerate(mine) if e.type == "run/start" and e.attempt == 1]
    return mine[starts[-1] :] if starts else mine
