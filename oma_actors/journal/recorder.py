"""``JournalRecorder``: one per run; gives events seqs and appends them in order (JR-05..JR-09).

``open()`` reads the journal once and continues from ``max(journal tail, snapshot watermark)``, so
one logical run reads as one stream across attempts, even on a fresh journal file. ``emit``
assigns the seq synchronously (strictly increasing with concurrent tasks) and queues the event.
A journal with ``append_nowait`` (JSONL, SQLite, PostgreSQL) takes it into its open batch at
once, which it commits in order with every other run's: no task, no queue of ours, one done
callback per batch of the run. Any other journal (or a fenced append) gets one drain task that
appends whatever accumulated, in seq order, a batch at a time. Either way a waiting call waits on
a future of its own, so cancelling it never cancels a batch other calls or runs wait on.

Two modes. ``durable=False`` is OMA's: nothing the journal does raises into the run; a failed
batch is reported through ``on_error`` (a ``JournalAppendFailed``) and dropped. ``durable=True``
makes the journal a save path: ``await append(draft)`` returns only once the batch holding the
event is on disk, and raises the batch's error; the recorder also keeps the events it emitted
until the run's writer takes them (``take_through``) and answers ``durable_through(seq)``: are
all events up to ``seq`` on disk? A failed batch keeps failing that question until a snapshot
that covers it was written (``cover``), because a later event folded on top of a lost one would
restore a wrong state. Failed batches are reported in both modes.

A durable recorder also **holds** its events until the writer releases them (``release``,
``durable_through``): a boundary that writes the whole snapshot releases its events only once
that snapshot is durable. Otherwise a crash during the snapshot write could leave in the journal
events the fold cannot take (a final answer: the runner cannot resume from it), and the fold
would then discard the whole tail, journal-only saves included (JR-16). Held events keep their
order: everything emitted after a held event is held too.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import time
from typing import TYPE_CHECKING, Any

from oma_actors.events import JournalAppendFailed
from oma_actors.journal.base import read_run
from oma_actors.journal.errors import JournalAppendError, JournalLineageError
from oma_actors.journal.event import FOLDED_TYPES, JournalEvent
from oma_actors.journal.sql import FencedJournal
from oma_actors.journal.vocabulary import canonical_content_hash, request_block
from oma_actors.telemetry.context import current_trace

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Sequence

    from oma_actors.domain.messages import ContentBlock, Message
    from oma_actors.journal.base import RunJournal
    from oma_actors.journal.batching import AppendNowait
    from oma_actors.journal.sql import AppendFence
    from oma_actors.journal.vocabulary import EventDraft, Json


class _Batch:
    """One batch of a run's events on its way to the journal, and who waits for it.

    ``token`` is the journal's future of the batch holding them (``append_nowait``), or ``None``
    on the drain task's path. Waiters are private futures, one per waiting call: a cancelled
    waiter cancels only its own wait, never the batch other runs share.
    """

    __slots__ = ("error", "first", "landed", "last", "token", "waiters")

    def __init__(self, first: int, token: asyncio.Future[Any] | None) -> None:
        self.first = first
        self.last = first
        self.token = token
        self.landed = False
        self.error: BaseException | None = None
        self.waiters: list[asyncio.Future[None]] = []

    async def wait(self) -> None:
        """Return once the batch landed or failed (see ``error``)."""
        if not self.landed:
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self.waiters.append(waiter)
            await waiter


class JournalRecorder:
    """Records one run's events into a ``RunJournal``; create it with ``open``."""

    def __init__(
        self,
        journal: RunJournal,
        *,
        run_id: str,
        attempt: int,
        last_seq: int,
        durable: bool,
        enforce_lineage: bool,
        on_error: Callable[[JournalAppendFailed], None] | None,
        clock: Callable[[], float],
    ) -> None:
        """Use ``open``; this constructor trusts ``last_seq``."""
        self.journal = journal
        self.run_id = run_id
        self.attempt = attempt
        self.durable = durable
        self.enforce_lineage = enforce_lineage
        self._last_seq = last_seq
        self._on_error = on_error
        self._clock = clock
        self._pending: list[JournalEvent] = []
        self._batch: _Batch | None = None
        self._drain: asyncio.Task[None] | None = None
        # The journal's own batching, when it has it: events go straight into its open batch
        # (no drain task, no second queue); ``None`` sends them through ``_drain_pending``.
        self._nowait: AppendNowait | None = getattr(journal, "append_nowait", None)
        self._lineage: dict[int, tuple[object, list[int]]] = {}
        self._hashes: dict[int, tuple[object, str]] = {}
        # Durable mode only, while a writer saves through the journal (until ``stop_keeping``):
        # events not yet taken by the writer, events held until it releases them, open batches
        # by first seq, failed batches as (first seq, last seq, error) above the covered seq.
        self._for_writer = durable
        self._kept: list[JournalEvent] = []
        self._held: list[JournalEvent] = []
        self._released = last_seq
        self._batches: dict[int, _Batch] = {}  # not yet landed, by first seq
        self._failed: list[tuple[int, int, BaseException]] = []
        self._covered = last_seq
        self._appended = 0
        self._fence: AppendFence | None = None
        # A leased run's check before each unfenced append (``guard_appends``).
        self._guard: Callable[[], Awaitable[None]] | None = None
        # Why the writer's next save must compact: a fact recorded since its last save that
        # the fold does not carry and no event says (D14). ``None``: nothing of the kind.
        self._uncarried: str | None = None

    @classmethod
    async def open(
        cls,
        journal: RunJournal,
        *,
        run_id: str,
        attempt: int,
        watermark_seq: int = 0,
        durable: bool = False,
        enforce_lineage: bool = False,
        on_error: Callable[[JournalAppendFailed], None] | None = None,
        clock: Callable[[], float] = time.time,
    ) -> JournalRecorder:
        """Open the recorder of one attempt of a run.

        Args:
            journal: the backend.
            run_id: the run; only its events count towards the tail.
            attempt: this attempt (1 for a fresh run).
            watermark_seq: the restored snapshot's ``journalWatermarkSeq`` (0 without one).
            durable: the journal is the save path (see the module docstring).
            enforce_lineage: ``request_blocks`` raises for a block without lineage (JR-09).
            on_error: receives a ``JournalAppendFailed`` per failed batch; exceptions it raises
                are swallowed (a progress callback never breaks the run).
            clock: Unix seconds, for ``timestampUnixMs``.

        Raises:
            Exception: only when ``durable``: the journal could not be read, so the next seq is
                unknown. Without ``durable`` that is reported and seqs continue from the watermark.
        """
        last = watermark_seq
        found = 0
        try:
            tail = await read_run(journal, run_id, watermark_seq + 1)
        except Exception as exc:
            if durable:
                raise
            _report(on_error, run_id, f"journal tail unreadable: {exc}")
        else:
            found = max((e.seq for e in tail if e.run_id == run_id), default=0)
            last = max(last, found)
        recorder = cls(
            journal,
            run_id=run_id,
            attempt=attempt,
            last_seq=last,
            durable=durable,
            enforce_lineage=enforce_lineage,
            on_error=on_error,
            clock=clock,
        )
        recorder._appended = found
        return recorder

    @property
    def last_seq(self) -> int:
        """The seq of the last event emitted (the watermark a snapshot built now folds, JR-08)."""
        return self._last_seq

    @property
    def appended_seq(self) -> int:
        """The highest seq of this run known to be in the journal (0: none known yet).

        A journal that later holds no event of the run at or above it lost events (D15).
        """
        return self._appended

    def emit(self, draft: EventDraft) -> JournalEvent:
        """Stamp the draft with the next seq and queue it; never raises, never waits."""
        self._last_seq += 1
        trace = current_trace()
        event = JournalEvent(
            seq=self._last_seq,
            type=draft.type,
            run_id=self.run_id,
            attempt=self.attempt,
            timestamp_unix_ms=int(self._clock() * 1000),
            task_id=draft.task_id,
            agent_name=draft.agent_name,
            trace_id=trace[0] if trace is not None else None,
            span_id=trace[1] if trace is not None else None,
            source_event_seqs=draft.source_event_seqs,
            data=dict(draft.data),
        )
        if not self._for_writer:
            self._queue(event)
            return event
        self._kept.append(event)
        if self._held or event.seq > self._released:
            self._held.append(event)
        else:
            self._queue(event)
        return event

    def _queue(self, event: JournalEvent) -> None:
        nowait = self._nowait
        if (
            nowait is not None
            and self._fence is None
            and self._guard is None
            and not self._pending
            and (self._drain is None or self._drain.done())
        ):
            # Nothing of ours is queued before it, so handing it to the journal now keeps the
            # seq order: the journal commits its batches in order.
            try:
                token = nowait((event,), now=self.durable)
            except Exception as exc:  # closed, or not encodable: this event's batch failed
                self._batch = failed = self._open_batch(event.seq, None)
                self._landed(failed, exc)
                return
            batch = self._batch
            if batch is not None and batch.token is token:
                batch.last = event.seq  # the same journal batch: one waiter list, one callback
                return
            self._batch = batch = self._open_batch(event.seq, token)
            token.add_done_callback(functools.partial(self._token_done, batch))
            return
        if not self._pending:
            self._batch = self._open_batch(event.seq, None)
        assert self._batch is not None
        self._batch.last = event.seq
        self._pending.append(event)
        if self._drain is None or self._drain.done():
            self._drain = asyncio.create_task(self._drain_pending())

    def _open_batch(self, first: int, token: asyncio.Future[Any] | None) -> _Batch:
        batch = _Batch(first, token)
        self._batches[first] = batch
        return batch

    def _token_done(self, batch: _Batch, token: asyncio.Future[Any]) -> None:
        if token.cancelled():
            error: BaseException | None = JournalAppendError(
                f"journal batch of run {self.run_id!r} was cancelled (the loop is closing)"
            )
        else:
            error = token.exception()  # retrieved here, once, for every run of the batch
        self._landed(batch, error)

    def _landed(self, batch: _Batch, error: BaseException | None) -> None:
        """The batch landed (``error is None``) or failed: record it and wake its waiters."""
        batch.landed = True
        batch.error = error
        self._batches.pop(batch.first, None)
        if error is None:
            self._appended = max(self._appended, batch.last)
        else:
            _report(self._on_error, self.run_id, f"{type(error).__name__}: {error}")
            if self.durable:
                self._failed.append((batch.first, batch.last, error))
        for waiter in batch.waiters:
            if not waiter.done():  # a cancelled waiter's call is gone
                waiter.set_result(None)
        batch.waiters.clear()

    def release(self, seq: int) -> None:
        """Let the held events up to ``seq`` go to the journal (durable mode)."""
        self._released = max(self._released, seq)
        cut = 0
        while cut < len(self._held) and self._held[cut].seq <= self._released:
            self._queue(self._held[cut])
            cut += 1
        del self._held[:cut]

    def release_trailing(self, harmless: Callable[[JournalEvent], bool] | None = None) -> None:
        """At the end of an attempt: release what is held unless it would change a task's state.

        Held events that change an entry belong to a snapshot that is not known durable (its
        write failed): in the journal, a restore might not be able to fold them. ``run/end``
        and ``checkpoint/saved`` change nothing and go out. ``harmless`` may vouch for a folded
        event a restore would not apply (say, of a task no durable snapshot holds, JR-13).
        """
        if not any(
            event.type in FOLDED_TYPES and (harmless is None or not harmless(event))
            for event in self._held
        ):
            self.release(self._last_seq)

    async def append(self, draft: EventDraft) -> JournalEvent:
        """Emit the draft and wait until its batch is appended.

        Raises:
            Exception: when ``durable``, the batch's append error. Without ``durable`` nothing
                is raised (the failure went to ``on_error``).
        """
        event = self.emit(draft)
        self.release(event.seq)
        batch = self._batch
        assert batch is not None
        await batch.wait()
        if batch.error is not None and self.durable:
            raise batch.error
        return event

    async def flush(self) -> None:
        """Wait until every emitted event was appended or reported failed; never raises."""
        while True:
            if self._drain is not None and not self._drain.done():
                await asyncio.shield(self._drain)
            elif self._batches:
                await next(reversed(self._batches.values())).wait()
            else:
                return

    def fence_appends(self, fence: AppendFence) -> bool:
        """Append every later batch under ``fence`` (a run lease), in one transaction with its
        record check, when the journal can (a database journal sharing the record's database).

        Returns:
            ``True`` if from now on no batch lands without the fence's check holding;
            ``False`` (nothing changed) if the journal cannot carry the fence.
        """
        journal = self.journal
        if not isinstance(journal, FencedJournal) or not journal.shares_database(fence.fence_store):
            return False
        self._fence = fence
        return True

    def guard_appends(self, check: Callable[[], Awaitable[None]]) -> None:
        """Run ``check`` before each later batch is appended; a batch whose check raises is
        dropped (its error reported as any failed append's).

        For a leased run whose journal cannot carry the fence (a JSONL file, D11): the check
        re-reads the run record, so a holder stalled past its lease and taken over (it does not
        know yet) appends nothing of its own after the takeover; what it still appends is a
        batch whose check passed just before. Batches go through the drain task from now on.
        """
        self._guard = check

    def stop_keeping(self) -> None:
        """No writer will take the events (its journal path was refused): keep and hold none."""
        self._for_writer = False
        self._uncarried = None
        self._kept.clear()
        self.release(self._last_seq)

    def uncarried(self, reason: str) -> None:
        """A fact the fold does not carry happened: the writer's next save compacts (D14).

        For the facts no event carries (a consumed approval, an exceeded budget, a task
        assigned but not started ...); an event's own kind says it for the others
        (``checkpoint.journal_path``). Only while a writer saves through the journal.
        """
        if self._for_writer and self._uncarried is None:
            self._uncarried = reason

    def take_uncarried(self) -> str | None:
        """Why the next save compacts (see ``uncarried``), once; ``None`` when nothing says so."""
        reason, self._uncarried = self._uncarried, None
        return reason

    def take_through(self, seq: int) -> list[JournalEvent]:
        """The kept events with ``seq <= seq`` not taken before, in order (durable mode)."""
        cut = 0
        while cut < len(self._kept) and self._kept[cut].seq <= seq:
            cut += 1
        taken, self._kept = self._kept[:cut], self._kept[cut:]
        return taken

    async def durable_through(self, seq: int) -> None:
        """Return once every event with ``seq <= seq`` is on disk (durable mode).

        Releases the held events up to ``seq`` first.

        Raises:
            JournalAppendError: a batch holding an event at or below ``seq`` and above the
                covered seq (``cover``) failed; the journal has a hole the fold must not cross.
        """
        self.release(seq)
        while True:
            # The last batch at or below ``seq`` first; the loop then sees to any other.
            waiting = [batch for first, batch in self._batches.items() if first <= seq]
            if not waiting:
                break
            await waiting[-1].wait()
        for first, last, error in self._failed:
            if first <= seq and last > self._covered:
                raise JournalAppendError(
                    f"journal events {first}..{last} of run {self.run_id!r} were not appended: "
                    f"{type(error).__name__}: {error}"
                ) from error

    def cover(self, seq: int) -> None:
        """A snapshot holding the run's state through ``seq`` is durable: older holes are moot."""
        self._covered = max(self._covered, seq)
        self._failed = [entry for entry in self._failed if entry[1] > self._covered]

    def register_blocks(self, blocks: Sequence[object], source_event_seqs: Sequence[int]) -> None:
        """Record the lineage of blocks, by object identity (survives message rebuilds, JR-07)."""
        for block in blocks:
            self._lineage[id(block)] = (block, list(source_event_seqs))

    def lineage_for(self, block: object) -> list[int] | None:
        """The lineage recorded for this very block object, or ``None``."""
        found = self._lineage.get(id(block))
        return None if found is None or found[0] is not block else list(found[1])

    def hash_for(self, block: ContentBlock | Json) -> str:
        """The block's canonical content hash, cached per block object."""
        cached = self._hashes.get(id(block))
        if cached is not None and cached[0] is block:
            return cached[1]
        digest = canonical_content_hash(block)
        self._hashes[id(block)] = (block, digest)
        return digest

    def request_blocks(self, messages: Sequence[Message]) -> list[Json]:
        """The ``RequestBlockDescriptor`` of every block of a request's conversation.

        Each block's hash is computed once (``hash_for``): a conversation is sent again with
        every request, and re-hashing it would make a run quadratic in hashing too.

        Raises:
            JournalLineageError: ``enforce_lineage`` is on and a block has no lineage.
        """
        out: list[Json] = []
        for m_index, message in enumerate(messages):
            for b_index, block in enumerate(message.content):
                seqs = self.lineage_for(block)
                descriptor = request_block(
                    message_index=m_index,
                    block_index=b_index,
                    role=message.role,
                    block=block,
                    source_event_seqs=seqs,
                    content_hash=self.hash_for(block),
                )
                if seqs is None and self.enforce_lineage:
                    raise JournalLineageError(m_index, b_index, str(descriptor["blockType"]))
                out.append(descriptor)
        return out

    async def _drain_pending(self) -> None:
        # Yield once so that events emitted in the same step of the loop share a batch.
        await asyncio.sleep(0)
        while self._pending:
            events, batch = self._pending, self._batch
            self._pending, self._batch = [], None
            assert batch is not None
            error: Exception | None = None
            try:
                # A durable run waits on these events: skip the batching window when the
                # backend allows it (JsonlRunJournal.append_now); batches are still shared.
                if self._fence is not None and isinstance(self.journal, FencedJournal):
                    # The lease's record check and these rows in one transaction (D15).
                    await self.journal.append_fenced(events, self._fence)
                else:
                    if self._guard is not None:
                        await self._guard()  # raises the lease's loss: the batch is dropped
                    urgent = getattr(self.journal, "append_now", None) if self.durable else None
                    await (urgent or self.journal.append)(events)
            except Exception as exc:
                error = exc
            self._landed(batch, error)


def _report(
    on_error: Callable[[JournalAppendFailed], None] | None, run_id: str, error: str
) -> None:
    if on_error is None:
        return
    with contextlib.suppress(Exception):  # a progress callback never breaks the run
        on_error(JournalAppendFailed(run_id=run_id, error=error))
