"""Choosing a run's journal, and folding its tail into a restored snapshot (spec 17.3, D10).

``resolve_journal`` picks the journal in force for a call (JR-02); ``fold_restored`` is the restore
side: the snapshot's tail is folded in, or discarded whole with ``JournalTailDiscarded`` (D6).
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Literal, get_args

from oma_actors.checkpoint.journal_path import mark_started_unsafe
from oma_actors.checkpoint.stranded import strand_unresumable
from oma_actors.errors import ConfigurationError, JournalDamagedError
from oma_actors.events import JournalTailDiscarded, ToolOutcomeUnknown
from oma_actors.journal.base import InMemoryRunJournal
from oma_actors.journal.encrypting import EncryptingJournal
from oma_actors.journal.event import TOOL_CALL
from oma_actors.journal.fields import adopt_journal_fields
from oma_actors.journal.fold import Discarded, Folded, StartedCall, fold_tail
from oma_actors.journal.marks import marks_of_journal
from oma_actors.journal.options import JournalOptions
from oma_actors.journal.ref import depends_on_journal
from oma_actors.journal.tail import lost_events, read_journal_tail
from oma_actors.stores.base import layers
from oma_actors.stores.encrypting import EncryptingStore
from oma_actors.stores.memory import InMemoryStore
from oma_actors.stores.redacting import RedactingStore

if TYPE_CHECKING:
    from collections.abc import Callable, Collection, Mapping, Sequence

    from oma_actors.agents.config import Team
    from oma_actors.domain.snapshot import CheckpointSnapshot
    from oma_actors.events import ProgressEvent
    from oma_actors.journal.base import RunJournal
    from oma_actors.journal.event import JournalEvent
    from oma_actors.journal.marks import DispatchMark

OnDamagedJournal = Literal["refuse", "salvage"]
"""What a restore does with a journal-first snapshot's damaged tail (D15)."""


async def fold_restored(
    snapshot: CheckpointSnapshot,
    options: JournalOptions,
    team: Team,
    emit: Callable[[ProgressEvent], None],
    *,
    on_damaged: OnDamagedJournal = "refuse",
) -> CheckpointSnapshot:
    """The snapshot with its journal tail folded in (see ``fold_restored_tail``)."""
    folded, _ = await fold_restored_tail(snapshot, options, team, emit, on_damaged=on_damaged)
    return folded


async def fold_restored_tail(
    snapshot: CheckpointSnapshot,
    options: JournalOptions,
    team: Team,
    emit: Callable[[ProgressEvent], None],
    *,
    on_damaged: OnDamagedJournal = "refuse",
) -> tuple[CheckpointSnapshot, int]:
    """The snapshot with its journal tail folded in (spec 17.3), or as stored when discarded.

    Also returns the highest seq of the run read from the journal (0 when none), so the
    attempt's recorder continues above it without reading and parsing the tail a second time.

    Only a snapshot written with a journal (v5) has a tail (JR-11). A journal file may hold the
    events of several runs (they share its batches, D10): the run's tail is its own events.
    Calls the tail shows as started whose tool is ``unsafe`` are marked dispatched (D1), whether
    the tail folds or is discarded. With a durable journal the revision continues above every
    revision the journal-only saves of the tail reported.

    A tail that fails a fold check is discarded whole (OMA's rule, D6) unless the snapshot was
    saved journal-first (D15): its tail then holds saved state, so the restore refuses, or with
    ``on_damaged="salvage"`` keeps what folds before the first bad event and treats every call
    the tail shows as started, of any tool, as outcome unknown (see ``salvage``).

    A journal that lost events a journal-first snapshot knew it held (``lost_events``) is
    refused the same way; salvaged, every call the snapshot holds uncommitted is treated as
    outcome unknown too (what the lost events held cannot be known).

    Raises:
        JournalDamagedError: a journal-first snapshot's tail fails a fold check, or its journal
            lost events, and ``on_damaged="refuse"``. Raised before anything is written.
    """
    snapshot = adopt_journal_fields(snapshot)
    if snapshot.journal_watermark_seq is None:
        return snapshot, 0
    events = await read_journal_tail(options.journal, snapshot)
    marks = await read_marks(options.journal, snapshot)
    lost = await lost_events(options.journal, snapshot, events) or marks_past_tail(
        snapshot, events, marks
    )
    marked = marked_calls(marks)
    if lost is not None:
        if on_damaged != "salvage":
            raise JournalDamagedError(lost.seq, lost.reason)
        # What the journal lost cannot be read back: any call the snapshot holds uncommitted
        # may have started, and every marked one did, so none runs again.
        lost = replace(lost, started_calls=(*lost.started_calls, *uncommitted(snapshot), *marked))
    result = fold_tail(snapshot, events, enforce_lineage=options.enforce_lineage)
    unsafe = unsafe_tools(team)
    if lost is not None:
        result = replace(
            result if isinstance(result, Discarded) else lost,
            snapshot=result.snapshot,
            started_calls=(*result.started_calls, *lost.started_calls),
        )
        unsafe = all_tools(team)
        emit(JournalTailDiscarded(run_id=snapshot.run_id, reason=lost.reason))
    elif isinstance(result, Discarded):
        if depends_on_journal(snapshot):
            if on_damaged != "salvage":
                raise JournalDamagedError(result.seq, result.reason)
            result = salvage(snapshot, events, result, enforce_lineage=options.enforce_lineage)
            unsafe = all_tools(team)
        result = replace(result, started_calls=(*result.started_calls, *marked))
        emit(JournalTailDiscarded(run_id=snapshot.run_id, reason=result.reason))
    folded = mark_started_unsafe(result.snapshot, result.started_calls, unsafe)
    if isinstance(result, Discarded):
        # A call that started in the part of the tail not folded, whose task's conversation
        # the restored state does not hold (issue 19): the task would start over and the model
        # could ask for the call again. Its task fails closed instead.
        never = never_rerun(result.started_calls, events, marked, unsafe)
        folded, stranded = strand_unresumable(folded, never)
        for call in stranded:
            emit(
                ToolOutcomeUnknown(
                    run_id=snapshot.run_id, task_id=call.task_id or "", tool_call_id=call.call_id
                )
            )
    if options.durable:
        # Journal-only saves after the snapshot each reported a revision (CheckpointSaved) and
        # each appended at least one event above the watermark: continuing above that count
        # means no revision is reported twice for the run (it may skip some).
        above = sum(1 for event in events if event.seq > snapshot.journal_watermark_seq)
        folded = replace(folded, revision=folded.revision + above)
    # The next attempt's seqs start above every seq a mark vouches for too: a journal that
    # lost events must not have their seqs reused (a later restore would read them as the
    # marked ones).
    highest = max((event.seq for event in events), default=0)
    return folded, max(highest, max((mark.seq for mark in marks), default=0))


async def read_marks(journal: RunJournal, snapshot: CheckpointSnapshot) -> list[DispatchMark]:
    """The dispatch marks of the snapshot's run above its watermark (issue 18); none when the
    journal keeps no marks.

    Raises:
        Exception: the backend's read error (a restore must not go on past a mark it cannot
            read).
    """
    keeper = marks_of_journal(journal)
    if keeper is None or not snapshot.run_id:
        return []
    return await keeper.marks_of(snapshot.run_id, snapshot.journal_watermark_seq or 0)


def marks_past_tail(
    snapshot: CheckpointSnapshot, tail: Sequence[JournalEvent], marks: Sequence[DispatchMark]
) -> Discarded | None:
    """Why the journal lost events a dispatch mark vouches for, or ``None`` (issue 18).

    A mark was written once the journal held the run through its seq, before the marked call
    ran: a tail that ends below it was cut (truncated, rows deleted, replaced).
    """
    if not marks:
        return None
    last = marks[-1]
    ends = max((event.seq for event in tail), default=snapshot.journal_watermark_seq or 0)
    if ends >= last.seq:
        return None
    return Discarded(
        snapshot=snapshot,
        seq=last.seq,
        reason=(
            f"the journal of run {snapshot.run_id!r} ends at seq {ends}, but it held seq "
            f"{last.seq} when call {last.call_id!r} of task {last.task_id!r} was dispatched: "
            "events were lost"
        ),
    )


def marked_calls(marks: Sequence[DispatchMark]) -> tuple[StartedCall, ...]:
    """The calls the marks name, as started (each was dispatched)."""
    return tuple(
        StartedCall(
            task_id=mark.task_id,
            agent_name=mark.agent_name,
            call_id=mark.call_id,
            seq=mark.seq,
            has_result=False,
        )
        for mark in marks
    )


def never_rerun(
    started: Sequence[StartedCall],
    events: Sequence[JournalEvent],
    marked: Sequence[StartedCall],
    tools: Mapping[str, Collection[str]],
) -> list[StartedCall]:
    """The started calls that must not run again: marked ones, and those of a tool in ``tools``
    (per agent: its ``unsafe`` tools, or all of them when salvaging)."""
    names: dict[tuple[str | None, str | None, str], object] = {}
    for event in events:
        call = event.data.get("call") if event.type == TOOL_CALL else None
        if isinstance(call, dict) and isinstance(call.get("id"), str):
            names[(event.task_id, event.agent_name, call["id"])] = call.get("name")
    keys = {(call.task_id, call.agent_name, call.call_id) for call in marked}
    return [
        call
        for call in started
        if (key := (call.task_id, call.agent_name, call.call_id)) in keys
        or names.get(key) in tools.get(call.agent_name or "", ())
    ]


def uncommitted(snapshot: CheckpointSnapshot) -> tuple[StartedCall, ...]:
    """Every call the snapshot holds pending without a commit, as started."""
    return tuple(
        StartedCall(
            task_id=entry.task_id,
            agent_name=entry.assignee,
            call_id=item.call.id,
            seq=0,
            has_result=False,
        )
        for entry in snapshot.in_flight
        for item in entry.state.pending
        if item.commit is None
    )


def salvage(
    snapshot: CheckpointSnapshot,
    events: Sequence[JournalEvent],
    discarded: Discarded,
    *,
    enforce_lineage: bool,
) -> Discarded:
    """A damaged journal-first tail, kept as far as it is sound (``on_damaged="salvage"``).

    The events before the first bad one passed every check up to it, so they fold when they
    fold on their own; the rest are not folded (the journal keeps them, for audit). Every call
    the whole tail shows as started stays in ``started_calls``: the caller marks each one
    dispatched whatever its tool's effect, so none runs again (``TOOL_OUTCOME_UNKNOWN`` or the
    tool's ``reconcile``).
    """
    if discarded.seq is None:
        return discarded
    bad = discarded.seq
    # The events before the bad one in file order (a duplicate's first copy is sound), else
    # those below its seq (a swapped pair: the one that came too early is dropped too).
    last = max((i for i, event in enumerate(events) if event.seq == bad), default=len(events))
    for prefix in (events[:last], [event for event in events if event.seq < bad]):
        sound = fold_tail(snapshot, prefix, enforce_lineage=enforce_lineage)
        if isinstance(sound, Folded):
            return replace(discarded, snapshot=sound.snapshot)
    return discarded


def unsafe_tools(team: Team) -> Mapping[str, frozenset[str]]:
    """Per agent, the names of its ``unsafe`` tools."""
    return {
        agent.name: frozenset(tool.name for tool in agent.tools if tool.effect == "unsafe")
        for agent in team.agents
    }


def safe_tools(team: Team) -> Mapping[str, frozenset[str]]:
    """Per agent, the names of its tools that are not ``unsafe`` (a restore may re-run their
    started calls, D1)."""
    return {
        agent.name: frozenset(tool.name for tool in agent.tools if tool.effect != "unsafe")
        for agent in team.agents
    }


def all_tools(team: Team) -> Mapping[str, frozenset[str]]:
    """Per agent, the names of all its tools (a salvaged tail marks every started call)."""
    return {agent.name: frozenset(tool.name for tool in agent.tools) for agent in team.agents}


def check_on_damaged(value: object) -> OnDamagedJournal:
    """``value`` as an ``on_damaged_journal`` choice.

    Raises:
        ConfigurationError: it is neither ``"refuse"`` nor ``"salvage"``.
    """
    if value not in get_args(OnDamagedJournal):
        raise ConfigurationError(f'on_damaged_journal must be "refuse" or "salvage", not {value!r}')
    return value  # type: ignore[return-value]


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


def check_at_rest(options: JournalOptions | None, store: object | None) -> None:
    """Refuse a journal that would keep in clear what the checkpoint ``store`` seals or
    redacts.

    A journal's events hold what the snapshots hold (the prompts, tool inputs and outputs,
    answers); journal-first, the journal is the save path. An ``EncryptingStore`` beside a
    journal that is no ``EncryptingJournal``, or a ``RedactingStore`` beside a journal that
    redacts nothing (``redact=``), would leave all of it in clear at rest while the caller
    believes it sealed or redacted. An in-memory journal keeps nothing at rest. Wrappers that
    name what they wrap ``inner`` are looked through on both sides (``layers``).

    Raises:
        ConfigurationError: the store seals or redacts and the journal does not; nothing was
            written.
    """
    if options is None or store is None:
        return
    journal = options.journal
    if isinstance(journal, InMemoryRunJournal):
        return
    if _wraps(store, EncryptingStore) and not _wraps(journal, EncryptingJournal):
        raise ConfigurationError(
            "the checkpoint store seals its values (EncryptingStore) but the run journal does "
            "not: its events would keep the run's prompts, tool inputs and outputs in clear; "
            "pass EncryptingJournal(journal, keyring)"
        )
    if _wraps(store, RedactingStore) and not _redacting(journal):
        raise ConfigurationError(
            "the checkpoint store redacts its values (RedactingStore) but the run journal does "
            "not: its events would keep what the store redacts in clear; give the journal the "
            "store's rules: JsonlRunJournal(path, redact=store.patterns) (or SqliteRunJournal, "
            "PostgresRunJournal with redact=)"
        )


def _redacting(journal: object) -> bool:
    """Whether ``journal``, or a journal it wraps, redacts what it writes (``redacts``)."""
    return any(getattr(layer, "redacts", False) is True for layer in layers(journal))


def _wraps(candidate: object, kind: type) -> bool:
    """Whether ``candidate`` is a ``kind``, or wraps one (``layers``)."""
    return any(isinstance(layer, kind) for layer in layers(candidate))


def forgets_before(journal: object, store: object) -> bool:
    """Whether ``journal`` loses on a crash what ``store`` keeps (an in-memory journal beside a
    persistent store): then journal-only saves would be weaker than the snapshots they replace.

    Either may be wrapped (an ``EncryptingJournal`` over an in-memory journal, a store behind a
    redacting or forwarding layer): what they wrap decides, so a sealed in-memory journal beside
    a ``FileStore`` never becomes the save path, and an in-memory store behind a wrapper keeps
    its journal-only saves."""
    return _wraps(journal, InMemoryRunJournal) and not _wraps(store, InMemoryStore)
