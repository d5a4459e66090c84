"""A run's journal: record the facts of its conversations as they happen (D14, spec 17.2).

Nothing here diffs states. Each fact comes from where it happens, as a typed value
(``agents.facts``): the turn loop reports, with each boundary, what it did to reach that state
(an answer with its usage and stop reason, a call dispatched, a result committed, the results
message sent back, a turn closed), and ``record`` writes each as OMA's event: ``assistant/message``
naming its ``llm/request``, ``tool/call`` (an ``unsafe`` tool's at its dispatch boundary, any
other just before its result), ``tool/result`` (lineage: its call), ``user/message`` origin
``tool_results`` (lineage: the results) and ``turn/end``. A checkpointed run records them as
its run actor adopts the boundary's state, so the snapshot built next has a watermark and
``journalSeq`` entries that cover them (JR-08, JR-12). Just before each model call, ``request``
records the conversation's opening prompt when no request sent it yet (``user/message`` origin
``input``), then ``turn/start`` and ``llm/request`` (every block with its lineage, JR-07).
Every recorded block is registered with the recorder (JR-19), and a restore re-attaches the
snapshot's ``conversationLineage`` to the restored blocks. A retry the runner decides outside
any boundary (``Retrying``) comes through ``facts_hook`` and closes the failed turn. The run's
other events (plan, task status, approvals, shared memory) are recorded by ``journal_events``,
task status and approvals from the facts the run actor reports (``run_facts``).

Two modes (``JournalOptions.durable``). OMA's (``False``): appends are best-effort (JR-06), they
never fail or slow the run; the snapshot stays the save path and the tail only adds granularity
(JR-20). Journal-first (``True``, decision D10): the run's writer saves the per-turn boundaries
by making their events durable and writes the snapshot only at compaction points
(``checkpoint.journal_path``).

On restore the tail above the snapshot is folded in (``journal_setup.fold_restored``); a tail
that fails a fold check is discarded whole with ``JournalTailDiscarded`` (D6). Calls the tail
shows as started but not committed are marked dispatched when their tool is ``unsafe``
(decision D1), so they are never re-run: the model gets ``TOOL_OUTCOME_UNKNOWN`` unless
``reconcile`` decides.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, assert_never

from oma_actors.agents.facts import (
    Answered,
    BudgetExceeded,
    CallCommitted,
    CallDispatched,
    Prompted,
    ResultsReturned,
    Retrying,
    TurnEnded,
    TurnLimitReached,
)
from oma_actors.checkpoint.journal_path import JournalPath
from oma_actors.domain.messages import ToolResultBlock, ToolUseBlock
from oma_actors.journal import vocabulary as v
from oma_actors.journal.event import TURN_END
from oma_actors.journal.recorder import JournalRecorder
from oma_actors.journal.ref import durable_ref
from oma_actors.orchestration.journal_context import (
    check_rewrite_lineage,
    record_rewrite,
)
from oma_actors.orchestration.journal_setup import (
    forgets_before,
    unsafe_tools,
)
from oma_actors.orchestration.journal_tasks import (
    OptionsHashes,
    TaskJournal,
    unknown_lineage,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from oma_actors.agents.config import Team
    from oma_actors.agents.context import ContextRewrite
    from oma_actors.agents.facts import Facts
    from oma_actors.agents.loop import BoundaryHook, RequestHook
    from oma_actors.agents.runner import FactHook
    from oma_actors.checkpoint.run_writer import RunWriter
    from oma_actors.domain.inflight import BoundaryKind, RunnerState, ToolCommit
    from oma_actors.domain.messages import ChatOptions, Message
    from oma_actors.domain.snapshot import (
        CheckpointSnapshot,
        ConversationLineage,
        InFlightTask,
    )
    from oma_actors.events import ProgressEvent
    from oma_actors.journal.event import JournalEvent
    from oma_actors.journal.options import JournalOptions

__all__ = ["RunJournaling"]


class RunJournaling:
    """The recorder of one attempt of a run and what it recorded per task."""

    def __init__(self, recorder: JournalRecorder, ref: dict[str, object]) -> None:
        self.recorder = recorder
        self._described = ref
        self._journal_first = False
        # By task id; ``None`` is a conversation outside the queue (the coordinator's, or the
        # one of ``run_agent``): its events carry no taskId, so a fold never reads them.
        self._tasks: dict[str | None, TaskJournal] = {}
        # (task, agent) -> turns of each entry of the last durable snapshot: what a restore
        # would fold this attempt's events into (JR-13); the others' events it ignores.
        self._durable: dict[tuple[str, str], int] = {}
        self._hashes = OptionsHashes()
        self._ended = False

    @property
    def journal_first(self) -> bool:
        """Whether the journal is the save path between snapshots (``attach`` decided, D10)."""
        return self._journal_first

    @property
    def durable(self) -> bool:
        """Whether the journal is the run's save path (D10)."""
        return self.recorder.durable

    def attach(self, writer: RunWriter, team: Team) -> None:
        """Make a durable journal the writer's save path between snapshots (D10)."""
        # OMA records each durable snapshot in the journal (JR-08: its watermark is below it).
        writer.on_snapshot(self._snapshot_durable)
        path = JournalPath(
            self.recorder, unsafe=unsafe_tools(team), enforce_lineage=self.recorder.enforce_lineage
        )
        weaker = forgets_before(self.recorder.journal, writer.checkpoint.store)
        if not self.durable or weaker or not writer.attach_journal(path):
            # OMA's mode; a journal that forgets what the store keeps; or a leased run on a
            # journal that cannot carry the fence (D11): the snapshot stays the save path.
            self.recorder.stop_keeping()
            # Even so, a leased run's best-effort events are fenced when the journal can carry
            # it (D15): after a takeover none of them lands either.
            writer.fence_journal(self.recorder)
            return
        # Journal-first: every snapshot from now on depends on this journal (D15), and says so
        # in its journalRef, so that no restore runs without it.
        self._journal_first = True

    @property
    def ref(self) -> dict[str, object]:
        """The ``journalRef`` of a snapshot built now: the journal's ``describe()``, marked
        durable when saving journal-first (the writer adds ``through`` when it compacts)."""
        if not self._journal_first:
            return dict(self._described)
        return durable_ref(self._described)

    def _snapshot_durable(self, snapshot: CheckpointSnapshot) -> None:
        self._durable = _entry_turns(snapshot)
        self.saved(snapshot.mode, 5, snapshot.journal_watermark_seq or 0)

    def end(self, code: str, message: str | None = None) -> None:
        """Record the attempt's ``run/end`` (``status: {code}``, ``error: {message}``), once.

        Every exit path ends the journal (OMA's rule), a raise or a cancellation included; the
        first end recorded is the attempt's (a cancellation that lands while the end of a run
        that finished is being flushed adds no second one).
        """
        if self._ended:
            return
        self._ended = True
        self.recorder.emit(v.run_ended(status=code, error=message))

    def abort(self, error: BaseException) -> None:
        """The attempt raised or was cancelled: record ``run/end`` (status ``aborted``) anyway.

        Nothing is awaited, so a cancellation goes on at once; the recorder appends what it was
        given in the background, best-effort as every append (JR-06).
        """
        self.end("aborted", str(error) or type(error).__name__)
        self.release_trailing()

    def release_trailing(self) -> None:
        """At the end of an attempt, let out the held events a restore would not fold.

        Events emitted between boundaries (a fresh conversation's prompt, recorded before its
        first request; a failed call's ``turn/end``) may never be covered by a snapshot. They
        are harmless when no durable snapshot holds their task (a fold ignores them), and a
        ``turn/end`` is when it does not raise the entry's turn count.
        """

        def harmless(event: JournalEvent) -> bool:
            turns = self._durable.get((event.task_id or "", event.agent_name or ""))
            if turns is None:
                return True
            return event.type == TURN_END and event.data.get("turn", turns + 1) <= turns

        self.recorder.release_trailing(harmless)

    @classmethod
    async def open(
        cls,
        options: JournalOptions,
        *,
        run_id: str,
        attempt: int,
        emit: Callable[[ProgressEvent], None],
        snapshot: CheckpointSnapshot | None = None,
        seen_through: int = 0,
    ) -> RunJournaling:
        """Open the journal of an attempt; seqs continue above the snapshot's watermark.

        ``seen_through``: the highest seq of the run the restore already read from the journal
        (its tail): the recorder then reads only what lies above it.
        """
        watermark = snapshot.journal_watermark_seq if snapshot is not None else None
        recorder = await JournalRecorder.open(
            options.journal,
            run_id=run_id,
            attempt=attempt,
            watermark_seq=max(watermark or 0, seen_through),
            durable=options.durable,
            enforce_lineage=options.enforce_lineage,
            on_error=emit,
        )
        journaling = cls(recorder, dict(options.journal.describe()))
        if snapshot is not None:
            journaling._durable = _entry_turns(snapshot)
            for entry in snapshot.in_flight:
                journaling._restored(entry.task_id, entry.assignee, entry.state, entry)
        return journaling

    def _restored(self, task_id: str, agent: str, state: RunnerState, entry: InFlightTask) -> None:
        """Take over a restored entry: what the journal holds of it, and its blocks' lineage.

        The runner resumes with these very state objects, so registering their blocks makes
        the next ``llm/request`` name each block's source (JR-09: a v5 restore passes
        ``enforce_lineage``; an entry without lineage, from v4, does not).
        """
        lineage = list(entry.conversation_lineage or unknown_lineage(state))
        for message, row in zip(state.conversation, lineage, strict=False):
            for block, seqs in zip(message.content, row, strict=False):
                if seqs is not None:
                    self.recorder.register_blocks([block], seqs)
        last = lineage[-1] if lineage and state.conversation else ()
        answer = state.phase == "executing_tools" and state.conversation[-1].role == "assistant"
        self._tasks[task_id] = TaskJournal(
            agent=agent,
            lineage=lineage,
            committed={i.call.id for i in state.pending if i.commit is not None},
            calls={i.call.id: None for i in state.pending if i.dispatched and i.commit is None},
            requested={i.call.id: i.call for i in state.pending},
            last_seq=entry.journal_seq,
            # The open round's answer, for the lineage of its tool/call events.
            answer=last[0][0] if answer and last and last[0] else None,
            # A turn is closed once its results went back (awaiting the model again).
            closed=state.turns if state.phase == "awaiting_model" else state.turns - 1,
        )

    def request_hook(self, task_id: str | None, agent: str) -> RequestHook:
        """The model-request hook of one task's runner (see ``request``)."""

        def hook(
            state: RunnerState,
            options: ChatOptions,
            rewrite: ContextRewrite | None,
            opening: Facts,
        ) -> None:
            self.request(task_id, agent, state, options, rewrite, opening)

        return hook

    def facts_hook(self, task_id: str | None, agent: str) -> FactHook:
        """The hook that records the facts one task's runner reports outside a boundary."""

        def hook(facts: Facts) -> None:
            self.record(task_id, agent, facts)

        return hook

    def boundary_hook(self, task_id: str | None, agent: str) -> BoundaryHook:
        """The boundary hook of one task's runner in a run without a checkpoint.

        It records what each boundary shows and answers ``True``, the answer the loop gets
        without any hook: a journal changes no behaviour. A retry starts a new conversation.
        """

        async def hook(state: RunnerState, kind: BoundaryKind, facts: Facts) -> bool:
            if kind == "attempt_reset":
                self.forget(task_id)
            self.record(task_id, agent, facts)
            return True

        return hook

    def request(
        self,
        task_id: str | None,
        agent: str,
        state: RunnerState,
        options: ChatOptions,
        rewrite: ContextRewrite | None = None,
        opening: Facts = (),
    ) -> None:
        """Record ``turn/start`` and ``llm/request`` just before a model call (spec 17.2).

        A fresh conversation's prompt is recorded first (no boundary has shown it yet), so
        every block sent has its lineage. The descriptors list EVERY block of the
        conversation, as OMA's do: O(conversation) bytes per request. A durable journal
        (journal-first) records ``llm/request`` only with ``enforce_lineage``. A context
        strategy's ``rewrite`` is recorded between the two, as OMA orders them
        (``journal_context.record_rewrite``).

        Raises:
            JournalLineageError: ``enforce_lineage`` is on and a block has no lineage (JR-09);
                no ``turn/start`` or ``llm/request`` is recorded and the call must not be made.
        """
        scope: dict[str, Any] = {"task_id": task_id, "agent_name": agent}
        task = self._task(task_id, agent)
        self.record(task_id, agent, opening)  # the caller's prompt, before anything it sends
        if self.recorder.durable and task.last_seq is not None and _opens(opening, state):
            task.opened = (state, task.last_seq)
        turn = state.turns + 1
        if self.recorder.durable and not self.recorder.enforce_lineage:
            # Journal-first keeps a turn O(what changed): OMA's llm/request lists every block
            # of the conversation at every call, O(n^2) bytes over a run (188 MB for 1000
            # turns of 1 KiB). It is recorded in OMA's mode, and whenever lineage is enforced.
            task.pinned = True
            self.recorder.emit(v.turn_started(turn=turn, **scope))
            if rewrite is not None:
                record_rewrite(self.recorder, task, rewrite, scope)
            task.request, task.turn, task.model = None, turn, options.model
            return
        if rewrite is not None:
            # Its blocks get their lineage when the replace is recorded, after turn/start; a
            # request refused for a block without lineage (JR-09) is refused before anything.
            check_rewrite_lineage(self.recorder, rewrite)
        blocks = [] if rewrite is not None else self.recorder.request_blocks(state.conversation)
        task.pinned = True
        system_hash, tools_hash = self._hashes(options)
        self.recorder.emit(v.turn_started(turn=turn, **scope))
        if rewrite is not None:
            record_rewrite(self.recorder, task, rewrite, scope)
            blocks = self.recorder.request_blocks(state.conversation)
        event = self.recorder.emit(
            v.llm_request(
                turn=turn,
                model=options.model,
                blocks=blocks,
                system_prompt_hash=system_hash,
                tools_hash=tools_hash,
                **scope,
            )
        )
        task.request, task.turn, task.model = event.seq, turn, options.model

    def turn_failed(self, task_id: str | None) -> None:
        """The task's model call failed (no answer): close its open turn with ``error``."""
        task = self._tasks.get(task_id)
        if task is None:
            return
        task.pinned = False
        if task.turn is None:
            return
        scope: dict[str, Any] = {"task_id": task_id, "agent_name": task.agent}
        # OMA closes the turn it opened (turn/start said ``task.turn``). The failed call
        # counted no turn in the state, so the fold skips an ``error`` turn/end's number.
        event = self.recorder.emit(v.turn_ended(turn=task.turn, outcome="error", **scope))
        task.last_seq = event.seq
        task.request = task.turn = None

    def record(self, task_id: str | None, agent: str, facts: Facts) -> None:
        """Record the facts a task's runner reported with a boundary, in the order they happened.

        Never raises. Each fact is one OMA event (spec 17.2), except a parked turn's end
        reported again (the journal holds one end per turn).
        """
        task = self._task(task_id, agent)
        scope: dict[str, Any] = {"task_id": task_id, "agent_name": agent}
        for fact in facts:
            match fact:
                case Prompted(message=message):
                    self._record_prompt(task, message, scope)
                case Answered():
                    self._record_answer(task, fact, scope)
                case CallDispatched(call=call):
                    self._record_call(task, call, scope)
                case CallCommitted(call=call, commit=commit):
                    self._record_result(task, commit.block, call, commit, scope)
                    if fact.consumes_approval:
                        # The run's pending approvals lose its request (AP-34).
                        self.recorder.uncarried(f"call {call.id!r} used up its approval")
                case ResultsReturned(message=message):
                    self._record_results(task, message, scope)
                case TurnEnded(turn=turn, outcome=outcome) if turn > task.closed:
                    # Folded (the turn counter): ``turn`` is the state's own, so a fold leaves
                    # it as is. One end per turn: a parked turn is reported until it resumes.
                    event = self.recorder.emit(v.turn_ended(turn=turn, outcome=outcome, **scope))
                    task.closed = turn
                    task.last_seq = event.seq
                case TurnEnded():
                    pass
                case BudgetExceeded():
                    self.recorder.uncarried(f"task {task_id!r} exceeded its token budget")
                case TurnLimitReached(max_turns=limit):
                    # The stop completes the conversation (its last assistant text, success)
                    # but OMA writes no event for it: the fold still has it awaiting the model.
                    self.recorder.uncarried(f"task {task_id!r} stopped at max_turns ({limit})")
                case Retrying():
                    self.turn_failed(task_id)  # the attempt's model call failed
                case _:
                    assert_never(fact)

    def settle(self, in_flight: Mapping[str, tuple[str, RunnerState]]) -> None:
        """At a save: forget tasks no longer in flight (done or reset), keep the others.

        A task requested before the run saw any boundary of it (its first turn) stays pinned
        until a save holds it in flight.
        """
        for task_id in set(self._tasks) - set(in_flight):
            if not self._tasks[task_id].pinned:
                self.forget(task_id)
        for task_id, (agent, _) in in_flight.items():
            self._task(task_id, agent).pinned = False

    def opened(
        self, in_flight: Mapping[str, tuple[str, RunnerState]], watermark: int | None
    ) -> Mapping[str, tuple[str, RunnerState]]:
        """``in_flight`` with the conversations the journal opened at or below ``watermark``
        that the run holds no boundary of yet (journal-first).

        A task's first request records its prompt journal-only, and its first boundary comes
        only with the model's answer. A snapshot a sibling task's boundary writes meanwhile
        has a watermark above that prompt, and a fold opens a conversation only from a prompt
        above the watermark: without this entry the task's later events (its calls and their
        results, saved journal-only) were skipped on restore and the task started over, running
        its recorded calls again. The entry is what the fold would have opened: the state the
        first request sent, marked at its prompt.
        """
        if watermark is None:
            return in_flight
        extra = {
            task_id: (task.agent, task.opened[0])
            for task_id, task in self._tasks.items()
            if task.opened is not None
            and task.opened[1] <= watermark
            and task_id is not None
            and task_id not in in_flight
        }
        return {**in_flight, **extra} if extra else in_flight

    def _task(self, task_id: str | None, agent: str) -> TaskJournal:
        """What the journal holds of a task's conversation (a new one for another agent)."""
        task = self._tasks.get(task_id)
        if task is None or task.agent != agent:
            task = self._tasks[task_id] = TaskJournal(agent=agent)
        return task

    def forget(self, task_id: str | None) -> None:
        """A task finished or restarts afresh: its next state starts a new conversation."""
        self._tasks.pop(task_id, None)

    def entry_fields(
        self, task_id: str, state: RunnerState
    ) -> tuple[int | None, ConversationLineage | None]:
        """The ``journalSeq`` and ``conversationLineage`` of a task's in-flight entry."""
        task = self._tasks.get(task_id)
        if task is None or len(task.lineage) != len(state.conversation):
            return None, None
        return task.last_seq, tuple(task.lineage)

    def saved(self, mode: str, version: int, watermark: int) -> None:
        """Record ``checkpoint/saved`` after a snapshot with ``watermark`` became durable."""
        self.recorder.emit(v.checkpoint_saved(mode=mode, version=version, watermark_seq=watermark))

    def _record_prompt(self, task: TaskJournal, message: Message, scope: dict[str, Any]) -> None:
        """The caller's prompt (``user/message`` origin ``input``), with the request sending it.

        Recorded before ``turn/start``, so every block the request sends has its lineage.
        """
        event = self.recorder.emit(v.user_message(message=message, origin="input", **scope))
        self._lineage(task, message, event.seq)

    def _record_answer(self, task: TaskJournal, answer: Answered, scope: dict[str, Any]) -> None:
        """``assistant/message``: the answer, naming the ``llm/request`` it answers (JR-07)."""
        message = answer.message
        request = [task.request] if task.request is not None else None
        event = self.recorder.emit(
            v.assistant_message(
                message=message,
                usage=answer.usage,
                model=task.model or None,
                stop_reason=answer.stop_reason,
                source_event_seqs=request,
                **scope,
            )
        )
        task.request = task.turn = None
        self._lineage(task, message, event.seq)
        task.answer = event.seq
        task.requested = {b.id: b for b in message.content if isinstance(b, ToolUseBlock)}

    def _record_results(self, task: TaskJournal, message: Message, scope: dict[str, Any]) -> None:
        """``user/message`` origin ``tool_results``, naming the results it gathers (JR-07)."""
        results = [b for b in message.content if isinstance(b, ToolResultBlock)]
        # A result this attempt saw no commit of (settled before a restore): recorded now.
        for block in results:
            if block.tool_use_id not in task.committed:
                call = task.requested.get(block.tool_use_id)
                self._record_result(task, block, call, None, scope)
        # A result committed before a restore has no tool/result this attempt knows of: its
        # tool/call then, when known.
        sources = []
        # Journal-first, a result is written once (issue 19): the message refers to the
        # tool/result holding the very block; OMA's mode writes OMA's message.
        recorded: dict[str, int] = {}
        for b in results:
            held = task.results.get(b.tool_use_id)
            seq = held[0] if held is not None else task.calls.get(b.tool_use_id)
            if seq is not None:
                sources.append(seq)
            if held is not None and self.recorder.durable and held[1] == b:
                recorded[b.tool_use_id] = held[0]
        event = self.recorder.emit(
            v.user_message(
                message=message,
                origin="tool_results",
                recorded=recorded,
                source_event_seqs=sources,
                **scope,
            )
        )
        task.committed.clear()
        task.calls.clear()
        task.results.clear()
        task.requested.clear()
        task.answer = None
        self._lineage(task, message, event.seq)

    def _lineage(self, task: TaskJournal, message: Message, seq: int) -> None:
        """Every block of a recorded message comes from its event (JR-07, by block identity)."""
        task.lineage.append(tuple((seq,) for _ in message.content))
        task.last_seq = seq
        self.recorder.register_blocks(message.content, [seq])

    def _record_call(self, task: TaskJournal, call: ToolUseBlock, scope: dict[str, Any]) -> None:
        """``tool/call``: the call starts (OMA emits it just before the tool runs)."""
        sources = [task.answer] if task.answer is not None else None
        event = self.recorder.emit(v.tool_call(call=call, source_event_seqs=sources, **scope))
        task.calls[call.id] = event.seq
        task.last_seq = event.seq

    def _record_result(
        self,
        task: TaskJournal,
        block: ToolResultBlock,
        call: ToolUseBlock | None,
        commit: ToolCommit | None,
        scope: dict[str, Any],
    ) -> None:
        """``tool/result`` (and its ``tool/call`` first, when the call had none)."""
        if call is not None and call.id not in task.calls:
            self._record_call(task, call, scope)
        record = commit.record if commit is not None else None
        usage = commit.delegation_usage if commit is not None else None
        source = task.calls.get(block.tool_use_id)
        event = self.recorder.emit(
            v.tool_result(
                result=block,
                record=record,
                delegation_usage=usage,
                once=self.recorder.durable,
                call=call,
                source_event_seqs=[source] if source is not None else None,
                **scope,
            )
        )
        task.committed.add(block.tool_use_id)
        task.results[block.tool_use_id] = (event.seq, block)
        task.last_seq = event.seq


def _entry_turns(snapshot: CheckpointSnapshot) -> dict[tuple[str, str], int]:
    """(task, agent) -> turn count of each in-flight entry of ``snapshot``."""
    return {(e.task_id, e.assignee): e.state.turns for e in snapshot.in_flight}


def _opens(opening: Facts, state: RunnerState) -> bool:
    """Whether a request's ``opening`` facts open ``state``'s conversation (its only message
    is their prompt), rather than go on with it."""
    first = state.conversation[0] if len(state.conversation) == 1 else None
    return any(isinstance(fact, Prompted) and fact.message is first for fact in opening)
