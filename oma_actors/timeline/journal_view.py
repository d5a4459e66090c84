"""Turns and tool-call marks read from a run's journal (OMA's event vocabulary, spec 17.2).

The journal records which attempt issued each call, which attempt started it (``tool/call``),
which attempt committed its result, which attempt closed its turn (the ``user/message`` of
origin ``tool_results``), and the approval a call waited on and its decision. Those facts tell a
replayed result from a call that ran again, from one that was settled by ``reconcile`` or
refused by a reviewer: see ``model`` for the marks.

It also records how each turn ended (``turn/end``), so a task's tries are told apart: a try
whose model call failed ends its turn ``error``, and the retry (``max_retries``) starts a fresh
conversation with the task's prompt again (``user/message`` origin ``input``), whose call ids
may repeat the failed try's. And how each attempt ended (``run/end``): an attempt that has not
ended is the live one, whose calls run as soon as its answer is saved.
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

Row = tuple[int, str, bool]
"""A committed result: (attempt, short text, is_error)."""


@dataclass(slots=True)
class _Call:
    call_id: str
    tool_name: str
    attempt: int
    results: list[Row] = field(default_factory=list)
    closed_in: int | None = None
    # Attempts whose tool/call started this call (an unsafe call's durable dispatch, or the
    # start recorded with a commit).
    started: list[int] = field(default_factory=list)


@dataclass(slots=True)
class _Turn:
    attempt: int
    text: str
    usage: dict[str, Any] | None
    task_try: int
    calls: list[_Call] = field(default_factory=list)
    outcome: str | None = None


@dataclass(slots=True)
class _Task:
    """One task's facts: its turns, and the state of its current try."""

    turns: list[_Turn] = field(default_factory=list)
    attempts: set[int] = field(default_factory=set)
    tries: int = 1
    # The current try's last turn ended ``error``: a new prompt starts the next try.
    failed: bool = False
    # A turn/start not answered yet (its model call is out, or failed).
    asking: bool = False
    # (try, call id) -> the call; try -> call id -> its committed results.
    calls: dict[tuple[int, str], _Call] = field(default_factory=dict)
    results: dict[int, dict[str, list[Row]]] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class RunEnd:
    """An attempt's ``run/end``: its status code and message, and its seq."""

    code: str
    message: str | None
    seq: int


@dataclass(slots=True)
class ApprovalFacts:
    """A run's ``approval/request`` and ``approval/decision`` payloads, by request id."""

    requests: dict[str, dict[str, Any]] = field(default_factory=dict)
    decisions: dict[str, dict[str, Any]] = field(default_factory=dict)

    def add(self, kind: str, data: dict[str, Any]) -> None:
        """Keep the payload of an ``approval/*`` event (the first decision of a request wins)."""
        if kind == "approval/request":
            request = data.get("request")
            if isinstance(request, dict) and isinstance(request.get("id"), str):
                self.requests[request["id"]] = request
        elif kind == "approval/decision":
            decision = data.get("decision")
            if isinstance(decision, dict) and isinstance(decision.get("requestId"), str):
                self.decisions.setdefault(decision["requestId"], decision)

    def by_hash(self, request_hash: str) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
        """The request and decision whose request has ``request_hash`` (a fork's parent's)."""
        for request_id, request in self.requests.items():
            if request.get("requestHash") == request_hash:
                return request, self.decisions.get(request_id)
        for decision in self.decisions.values():
            if decision.get("requestHash") == request_hash:
                return None, decision
        return None, None


def approval_facts(
    run_id: str, events: Sequence[JournalEvent], through: int | None = None
) -> ApprovalFacts:
    """The approval payloads of ``run_id``'s current life, up to seq ``through`` if given."""
    facts = ApprovalFacts()
    for event in current_life(run_id, events):
        if through is not None and event.seq > through:
            break
        if event.type.startswith("approval/"):
            facts.add(event.type, event.data)
    return facts


class JournalView:
    """A run's journal events grouped by task: turns, calls, results, tries and attempts."""

    def __init__(self, run_id: str, events: Sequence[JournalEvent]) -> None:
        """Group ``events`` of run ``run_id`` (others are ignored) by task, in seq order.

        Only the run's current life counts: a fresh run given the id of a run it replaced (a
        finished one, or one overwritten) starts with a ``run/start`` of attempt 1, and the
        events before it, still in a journal file other runs share, are that other run's.
        """
        self._tasks: dict[str, _Task] = {}
        # (task, call id) -> its approval request: a call id is unique within one conversation
        # only (two tasks' models may both name a call ``call_0``).
        self._approval_of: dict[tuple[str, str], str] = {}
        self.approvals = ApprovalFacts()
        self.ends: dict[int, RunEnd] = {}
        """Each attempt's ``run/end``."""
        self.live: int | None = None
        """The attempt whose ``run/start`` is the run's last start or end: it has not ended."""
        for event in current_life(run_id, events):
            if event.type.startswith("approval/"):
                self._approval(event.type, event.data)  # decisions are run-scoped (no task)
            elif event.type == "run/start":
                self.live = event.attempt
            elif event.type == "run/end":
                status, error = event.data.get("status"), event.data.get("error")
                code = status.get("code") if isinstance(status, dict) else None
                message = error.get("message") if isinstance(error, dict) else None
                self.ends.setdefault(
                    event.attempt,
                    RunEnd(str(code or ""), None if message is None else str(message), event.seq),
                )
                self.live = None
            if event.task_id is not None:
                self._task_event(self._tasks.setdefault(event.task_id, _Task()), event)

    def _task_event(self, task: _Task, event: JournalEvent) -> None:
        task.attempts.add(event.attempt)
        turns, data, kind = task.turns, event.data, event.type
        if kind == "user/message" and data.get("origin") == "input":
            # The task's prompt: its first try's, or a retry's fresh conversation after a try
            # whose model call failed. (A restore re-sending the prompt of a conversation that
            # saved no answer continues the same try.)
            if task.failed:
                task.tries += 1
                task.failed = False
            task.asking = False
        elif kind == "turn/start":
            task.asking = True
        elif kind == "assistant/message":
            task.asking = False
            message = data.get("message") or {}
            content = message.get("content") or []
            turns.append(_Turn(event.attempt, summarize(content), data.get("usage"), task.tries))
            # A call is issued by the answer that requests it (its tool/call comes when it
            # starts, possibly in a later attempt).
            for block in content:
                if isinstance(block, dict) and block.get("type") == "tool_use":
                    self._issue(task, turns[-1], block, event.attempt)
        elif kind == "tool/call" and turns:
            raw = data.get("call") or {}
            self._issue(task, turns[-1], raw, event.attempt)
            task.calls[(task.tries, str(raw.get("id", "")))].started.append(event.attempt)
        elif kind == "tool/result":
            call_id = str(data.get("toolCallId", ""))
            result = data.get("result") or {}
            text, error = summarize(result.get("content", "")), bool(result.get("is_error"))
            row = (event.attempt, text, error)
            task.results.setdefault(task.tries, {}).setdefault(call_id, []).append(row)
            found = task.calls.get((task.tries, call_id))
            if found is not None:
                found.results.append(row)
        elif kind == "user/message" and data.get("origin") == "tool_results" and turns:
            for call in turns[-1].calls:
                if call.closed_in is None:
                    call.closed_in = event.attempt
        elif kind == "turn/end":
            outcome = str(data.get("outcome") or "") or None
            if task.asking:
                # The turn's model call got no answer (it failed): a turn with no text.
                turns.append(_Turn(event.attempt, "", None, task.tries, outcome=outcome))
                task.asking = False
            elif turns and turns[-1].task_try == task.tries:
                turns[-1].outcome = outcome
            task.failed = outcome == "error"

    def _approval(self, kind: str, data: dict[str, Any]) -> None:
        self.approvals.add(kind, data)
        if kind != "approval/request":
            return
        request = data.get("request") or {}
        content = request.get("content") if isinstance(request, dict) else None
        content = content if isinstance(content, dict) else {}
        task, call_id = content.get("taskId"), content.get("toolCallId")
        request_id = request.get("id")
        if isinstance(task, str) and isinstance(call_id, str) and isinstance(request_id, str):
            self._approval_of[(task, call_id)] = request_id

    def approval_of(self, task_id: str, call_id: str) -> str | None:
        """The id of the approval request the task's call waited on, if it did."""
        return self._approval_of.get((task_id, call_id))

    def verdict(self, task_id: str, call_id: str) -> str | None:
        """``approved``/``rejected`` when the task's call's approval was decided; ``""`` while
        undecided; ``None`` when the call never waited on an approval."""
        request = self._approval_of.get((task_id, call_id))
        if request is None:
            return None
        decision = self.approvals.decisions.get(request)
        return "" if decision is None else str(decision.get("decision"))

    @staticmethod
    def _issue(task: _Task, turn: _Turn, raw: dict[str, Any], attempt: int) -> None:
        call_id = str(raw.get("id", ""))
        if (task.tries, call_id) in task.calls:
            return
        call = _Call(call_id, str(raw.get("name", "")), attempt)
        task.calls[(task.tries, call_id)] = call
        turn.calls.append(call)

    def has_task(self, task_id: str) -> bool:
        """Whether the journal holds any event of ``task_id``."""
        return task_id in self._tasks

    def attempts(self, task_id: str) -> tuple[int, ...]:
        """The attempts that recorded events of ``task_id``, ascending."""
        task = self._tasks.get(task_id)
        return tuple(sorted(task.attempts)) if task is not None else ()

    def tries(self, task_id: str) -> int:
        """How many tries of ``task_id`` the journal shows (1 without a retry)."""
        task = self._tasks.get(task_id)
        return task.tries if task is not None else 1

    def results(self, task_id: str) -> dict[str, list[Row]]:
        """The committed results of the task's last try by call id, in order."""
        task = self._tasks.get(task_id)
        return {} if task is None else task.results.get(task.tries, {})

    def starts(self, task_id: str) -> dict[str, tuple[int, ...]]:
        """The calls of the task's last try that a ``tool/call`` started: call id -> the
        attempts, in order."""
        task = self._tasks.get(task_id)
        if task is None:
            return {}
        return {
            call_id: tuple(call.started)
            for (number, call_id), call in task.calls.items()
            if number == task.tries and call.started
        }

    def turns(
        self, task_id: str, pending: dict[str, PendingCall], final_attempt: int
    ) -> tuple[TimelineTurn, ...]:
        """The task's turns, try by try, each call marked (``pending`` is the snapshot's
        in-flight calls: those of the last try's open turn)."""
        task = self._tasks.get(task_id)
        if task is None:
            return ()
        later = max(task.attempts, default=0)
        current = max(later, final_attempt)
        out: list[TimelineTurn] = []
        index = 0
        for turn in task.turns:
            index = 1 if not out or out[-1].task_try != turn.task_try else index + 1
            usage = turn.usage or {}
            last_try = turn.task_try == task.tries
            out.append(
                TimelineTurn(
                    index=index,
                    attempt=turn.attempt,
                    text=turn.text,
                    input_tokens=usage.get("input_tokens") if turn.usage else None,
                    output_tokens=usage.get("output_tokens") if turn.usage else None,
                    calls=tuple(
                        self._mark(
                            task_id,
                            c,
                            pending.get(c.call_id) if last_try else None,
                            later,
                            current,
                        )
                        for c in turn.calls
                    ),
                    task_try=turn.task_try,
                    outcome=turn.outcome,
                )
            )
        return tuple(out)

    def _mark(
        self, task_id: str, call: _Call, item: PendingCall | None, last_attempt: int, current: int
    ) -> TimelineCall:
        """The call's mark from its facts; ``current`` is the run's attempt (see ``model``)."""
        verdict = self.verdict(task_id, call.call_id)
        approval = self.approval_of(task_id, call.call_id)

        def made(mark: Any, attempt: int, text: str | None, error: bool) -> TimelineCall:
            return TimelineCall(call_id=call.call_id, tool_name=call.tool_name, mark=mark,
                                attempt=attempt, result=text, is_error=error,
                                approval_id=approval)  # fmt: skip

        if call.results:
            attempt, text, error = call.results[-1]
            if verdict == "rejected":
                return made("rejected", attempt, text, error)  # answered with the refusal
            if attempt not in call.started and any(start < attempt for start in call.started):
                # Started by an earlier attempt, committed by one that did not start it: an
                # unsafe call is never run twice (D1); the restore settled it through
                # reconcile, or told the model its outcome is unknown (an error result).
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
            # Its commit reached the snapshot but not the journal (a best-effort append lost in
            # the crash); the later attempt closed the turn without running it: replayed.
            return made("replayed", call.closed_in, None, False)
        if call.started and item is not None and item.commit is None:
            # Started, no result: still running in the attempt that started it (a host call
            # waiting for a host), or its attempt ended and the outcome is unknown until a
            # restore settles it (``model`` marks it so when the attempt ended under it).
            start = call.started[-1]
            return made("running" if start == current else "outcome unknown", start, None, False)
        if (
            item is not None
            and item.commit is None
            and not item.awaiting_approval
            and not item.dispatched
            and self.live == current
        ):
            # Issued in the live attempt's open turn, neither held by an approval nor committed:
            # a turn's calls all run as soon as its answer is saved (a safe call's tool/call is
            # recorded only with its result), so it is running now.
            return made("running", current, None, False)
        marked = call_from_state(call.call_id, call.tool_name, None, item, attempt=call.attempt)
        if marked.approval_id is None and approval is not None:
            return made(marked.mark, call.attempt, None, False)
        return marked


def current_life(run_id: str, events: Sequence[JournalEvent]) -> list[JournalEvent]:
    """The events of ``run_id`` from its latest fresh start on, in seq order.

    A fresh run starts with ``run/start`` at attempt 1; a restore's start, and a fork's first
    (it continues its parent's attempts), have a later attempt. Without a fresh start in
    ``events`` (a fork, or a journal cut below it) every event of the run counts.
    """
    mine = sorted((e for e in events if e.run_id == run_id), key=lambda e: e.seq)
    starts = [i for i, e in enumerate(mine) if e.type == "run/start" and e.attempt == 1]
    return mine[starts[-1] :] if starts else mine
