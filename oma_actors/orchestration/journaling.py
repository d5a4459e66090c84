"""A run's journal: record what each boundary changed, fold the tail on restore.

The runner reports each durable boundary with its whole ``RunnerState``; this module turns the
difference from the last state it saw of that task into OMA's journal events (spec 17.2):
the task's prompt (``user/message`` origin ``input``), each model answer (``assistant/message``
with its usage), a ``tool/call`` when a call starts (an ``unsafe`` tool's at its dispatch
boundary, any other just before its result), each committed result (``tool/result``, lineage:
its call) and the results message (``user/message`` origin ``tool_results``, lineage: the
results). The events are emitted before the boundary's snapshot is built, so the snapshot's
watermark and each entry's ``journalSeq`` cover them (JR-08, JR-12), and every conversation
message gets its lineage (JR-19).

Two modes (``JournalOptions.durable``). OMA's (``False``): appends are best-effort (JR-06), they
never fail or slow the run; the snapshot stays the save path and the tail only adds granularity
(JR-20). Journal-first (``True``, decision D10): the run's writer saves the per-turn boundaries
by making their events durable and writes the snapshot only at compaction points
(``checkpoint.journal_path``).

On restore the tail above the snapshot is folded in (``checkpoint.fold``); a tail that fails a
fold check is discarded whole with ``JournalTailDiscarded`` (D6). Calls the tail shows as
started but not committed are marked dispatched when their tool is ``unsafe`` (decision D1), so
they are never re-run: the model gets ``TOOL_OUTCOME_UNKNOWN`` unless ``reconcile`` decides.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from oma_actors.checkpoint.fold import Discarded, fold_tail, tail_read_from
from oma_actors.checkpoint.journal_fields import adopt_journal_fields
from oma_actors.checkpoint.journal_path import JournalPath, mark_started_unsafe
from oma_actors.domain.messages import ToolResultBlock, ToolUseBlock
from oma_actors.errors import ConfigurationError
from oma_actors.events import JournalTailDiscarded
from oma_actors.journal import vocabulary as v
from oma_actors.journal.options import JournalOptions
from oma_actors.journal.recorder import JournalRecorder

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from oma_actors.agents.config import Team
    from oma_actors.checkpoint.run_writer import RunWriter
    from oma_actors.checkpoint.snapshot import CheckpointSnapshot, ConversationLineage
    from oma_actors.domain.inflight import PendingCall, RunnerState
    from oma_actors.domain.messages import Message, TokenUsage
    from oma_actors.events import ProgressEvent
    from oma_actors.orchestration.run import RunState

Lineage = tuple[tuple[int, ...] | None, ...]


@dataclass(slots=True)
class _Task:
    """What the journal already holds of one task's conversation."""

    agent: str
    messages: int = 0  # conversation messages recorded (or restored)
    lineage: list[Lineage] = field(default_factory=list)
    committed: set[str] = field(default_factory=set)  # call ids with a tool/result
    calls: dict[str, int] = field(default_factory=dict)  # call id -> its tool/call seq
    answer: int | None = None  # the open round's assistant/message seq
    requested: dict[str, ToolUseBlock] = field(default_factory=dict)  # the open round's calls
    usage: TokenUsage | None = None  # the state's usage when last observed
    last_seq: int | None = None


class RunJournaling:
    """The recorder of one attempt of a run and what it recorded per task."""

    def __init__(self, recorder: JournalRecorder, ref: dict[str, object]) -> None:
        self.recorder = recorder
        self.ref = ref
        self._tasks: dict[str, _Task] = {}

    @property
    def durable(self) -> bool:
        """Whether the journal is the run's save path (D10)."""
        return self.recorder.durable

    def attach(self, writer: RunWriter, team: Team) -> None:
        """Make a durable journal the writer's save path between snapshots (D10)."""
        # OMA records each durable snapshot in the journal (JR-08: its watermark is below it).
        writer.on_snapshot(
            lambda snapshot: self.saved(snapshot.mode, 5, snapshot.journal_watermark_seq or 0)
        )
        path = JournalPath(
            self.recorder, unsafe=_unsafe_tools(team), enforce_lineage=self.recorder.enforce_lineage
        )
        if not self.durable or not writer.attach_journal(path):
            # OMA's mode, or a leased run (its saves stay fenced snapshots, D11).
            self.recorder.stop_keeping()

    @classmethod
    async def open(
        cls,
        options: JournalOptions,
        *,
        run_id: str,
        attempt: int,
        emit: Callable[[ProgressEvent], None],
        snapshot: CheckpointSnapshot | None = None,
    ) -> RunJournaling:
        """Open the journal of an attempt; seqs continue above the snapshot's watermark."""
        watermark = snapshot.journal_watermark_seq if snapshot is not None else None
        recorder = await JournalRecorder.open(
            options.journal,
            run_id=run_id,
            attempt=attempt,
            watermark_seq=watermark or 0,
            durable=options.durable,
            enforce_lineage=options.enforce_lineage,
            on_error=emit,
        )
        journaling = cls(recorder, dict(options.journal.describe()))
        if snapshot is not None:
            for entry in snapshot.in_flight:
                lineage = entry.conversation_lineage
                journaling._tasks[entry.task_id] = _Task(
                    agent=entry.assignee,
                    messages=len(entry.state.conversation),
                    lineage=list(lineage) if lineage is not None else _unknown(entry.state),
                    committed={i.call.id for i in entry.state.pending if i.commit is not None},
                    usage=entry.state.token_usage,
                    requested={i.call.id: i.call for i in entry.state.pending},
                    last_seq=entry.journal_seq,
                )
        return journaling

    def observe(self, task_id: str, agent: str, state: RunnerState) -> None:
        """Record what ``state`` holds that the journal does not yet (never raises)."""
        task = self._tasks.get(task_id)
        if task is None or task.agent != agent:
            task = self._tasks[task_id] = _Task(agent=agent)
        scope: dict[str, Any] = {"task_id": task_id, "agent_name": agent}
        for message in state.conversation[task.messages :]:
            self._record_message(task, message, state, scope)
        for item in state.pending:
            if item.dispatched and item.call.id not in task.calls:
                self._record_call(task, item.call, scope)
            if item.commit is not None and item.call.id not in task.committed:
                self._record_result(task, item.commit.block, item, scope)
        task.messages = len(state.conversation)
        task.usage = state.token_usage

    def observe_all(self, in_flight: Mapping[str, tuple[str, RunnerState]]) -> None:
        """Record every in-flight state; forget tasks no longer in flight (done or reset)."""
        for task_id in set(self._tasks) - set(in_flight):
            self.forget(task_id)
        for task_id, (agent, state) in in_flight.items():
            self.observe(task_id, agent, state)

    def forget(self, task_id: str) -> None:
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

    def _record_message(
        self, task: _Task, message: Message, state: RunnerState, scope: dict[str, Any]
    ) -> None:
        if message.role == "assistant":
            # The answer's usage is what the state gained since it was last seen: a boundary
            # records one answer. (If two coalesced, the sum lands on the last one; a durable
            # journal then compacts, because the fold would not rebuild the same usage.)
            usage = state.token_usage if task.usage is None else state.token_usage - task.usage
            event = self.recorder.emit(v.assistant_message(message=message, usage=usage, **scope))
            task.lineage.append(tuple((event.seq,) for _ in message.content))
            task.last_seq = event.seq
            task.answer = event.seq
            task.usage = state.token_usage
            task.requested = {b.id: b for b in message.content if isinstance(b, ToolUseBlock)}
            return
        results = [b for b in message.content if isinstance(b, ToolResultBlock)]
        if results:
            # Results committed before this boundary without a commit boundary of their own.
            for block in results:
                if block.tool_use_id not in task.committed:
                    self._record_result(task, block, None, scope)
            sources = [task.calls[b.tool_use_id] for b in results if b.tool_use_id in task.calls]
            event = self.recorder.emit(
                v.user_message(
                    message=message, origin="tool_results", source_event_seqs=sources, **scope
                )
            )
            task.committed.clear()
            task.calls.clear()
            task.requested.clear()
            task.answer = None
        else:
            event = self.recorder.emit(v.user_message(message=message, origin="input", **scope))
        task.lineage.append(tuple((event.seq,) for _ in message.content))
        task.last_seq = event.seq

    def _record_call(self, task: _Task, call: ToolUseBlock, scope: dict[str, Any]) -> None:
        """``tool/call``: the call starts (OMA emits it just before the tool runs)."""
        sources = [task.answer] if task.answer is not None else None
        event = self.recorder.emit(v.tool_call(call=call, source_event_seqs=sources, **scope))
        task.calls[call.id] = event.seq
        task.last_seq = event.seq

    def _record_result(
        self, task: _Task, block: ToolResultBlock, item: PendingCall | None, scope: dict[str, Any]
    ) -> None:
        call = item.call if item is not None else task.requested.get(block.tool_use_id)
        if call is not None and call.id not in task.calls:
            self._record_call(task, call, scope)
        commit = item.commit if item is not None else None
        record = commit.record if commit is not None else None
        usage = commit.delegation_usage if commit is not None else None
        source = task.calls.get(block.tool_use_id)
        event = self.recorder.emit(
            v.tool_result(
                result=block,
                record=record,
                delegation_usage=usage,
                source_event_seqs=[source] if source is not None else None,
                **scope,
            )
        )
        task.committed.add(block.tool_use_id)
        task.last_seq = event.seq


def _unknown(state: RunnerState) -> list[Lineage]:
    """Lineage of messages recorded before the journal (none is known)."""
    return [tuple(None for _ in message.content) for message in state.conversation]


async def fold_restored(
    snapshot: CheckpointSnapshot,
    options: JournalOptions,
    team: Team,
    emit: Callable[[ProgressEvent], None],
) -> CheckpointSnapshot:
    """The snapshot with its journal tail folded in (spec 17.3), or as stored when discarded.

    Only a snapshot written with a journal (v5) has a tail (JR-11). A journal file may hold the
    events of several runs (they share its batches, D10): the run's tail is its own events.
    Calls the tail shows as started whose tool is ``unsafe`` are marked dispatched (D1), whether
    the tail folds or is discarded. With a durable journal the revision continues above every
    revision the journal-only saves of the tail reported.
    """
    snapshot = adopt_journal_fields(snapshot)
    if snapshot.journal_watermark_seq is None:
        return snapshot
    events = [
        event
        for event in await options.journal.read_from(tail_read_from(snapshot))
        if event.run_id == snapshot.run_id or not snapshot.run_id
    ]
    result = fold_tail(snapshot, events, enforce_lineage=options.enforce_lineage)
    if isinstance(result, Discarded):
        emit(JournalTailDiscarded(run_id=snapshot.run_id, reason=result.reason))
    folded = mark_started_unsafe(result.snapshot, result.started_calls, _unsafe_tools(team))
    if options.durable:
        # Journal-only saves after the snapshot each reported a revision (CheckpointSaved) and
        # each appended at least one event above the watermark: continuing above that count
        # means no revision is reported twice for the run (it may skip some).
        above = sum(1 for event in events if event.seq > snapshot.journal_watermark_seq)
        folded = replace(folded, revision=folded.revision + above)
    return folded


def _unsafe_tools(team: Team) -> Mapping[str, frozenset[str]]:
    """Per agent, the names of its ``unsafe`` tools."""
    return {
        agent.name: frozenset(tool.name for tool in agent.tools if tool.effect == "unsafe")
        for agent in team.agents
    }


def resolve_journal(*layers: object) -> JournalOptions | None:
    """The journal in force: the first layer that says anything (per call, then the default).

    ``None`` says nothing; ``False`` or ``JournalOptions(enabled=False)`` says "no journal"; a
    bare ``RunJournal`` means ``JournalOptions(journal)``: durable, the journal-first save path
    (D10).

    Raises:
        ConfigurationError: a layer is neither a journal nor ``JournalOptions``.
    """
    for layer in layers:
        if layer is None:
            continue
        if layer is False:
            return None
        if isinstance(layer, JournalOptions):
            return layer if layer.enabled else None
        if is_run_journal(layer):
            return JournalOptions(layer)  # type: ignore[arg-type]
        raise ConfigurationError(
            f"journal must be a RunJournal or JournalOptions, not {type(layer).__name__}"
        )
    return None


def is_run_journal(candidate: object) -> bool:
    """Whether ``candidate`` has the ``RunJournal`` methods (JR-01)."""
    return all(
        callable(getattr(candidate, name, None))
        for name in ("append", "read_from", "close", "describe")
    )


async def finish_journal(journaling: RunJournaling | None, state: RunState) -> None:
    """Record how the attempt ended (``run/end``) and wait until the journal has it all."""
    if journaling is None:
        return
    status = state.status
    journaling.recorder.emit(
        v.run_ended(
            status=status.code if status is not None else "ok",
            error=status.message if status is not None and status.code != "ok" else None,
        )
    )
    # Held events of a snapshot that never became durable stay out (see JournalRecorder).
    journaling.recorder.release_trailing()
    await journaling.recorder.flush()
