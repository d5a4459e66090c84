"""``RunWriter``: the one path to a run's durable state (decision D2, "one writer per run").

Every durable write of a run goes through its writer: the admission snapshot, each runner
boundary, task completions, the synthesis, the plan suspension and the rejection terminal. The
writer owns what used to be re-derived at each call site:

- the **revision** (count of this run's successful saves, continuing a restored snapshot's);
- the **outcome** of a save: ``Saved(revision)``, ``NotSaved(error)`` when nothing reached the
  store (the snapshot could not be encoded), ``Unknown(error)`` when the store failed mid-write
  and may or may not hold the new value;
- **strictness**, decided by the boundary's name (``STRICT_BOUNDARIES``), not by the caller;
- the **events** (``CheckpointSaved`` / ``CheckpointSaveFailed``, with the boundary named) and
  the **boundary reports** to a probe (``boundaries.report``), before and after each write.

Writes are serialized by a lock, so snapshots land in the order their boundaries were reached
even when the writer is shared by an actor and a flow.

**Fenced writes (decision D11).** A run with a run store holds a lease; its writer is given the
lease as a ``Fence``. When the lease's record lives in the checkpoint's own store, each snapshot
is written in ONE ``apply`` with the check "the run record is exactly what this owner last wrote"
and the record's move to this checkpoint (OMA's ``recordCheckpoint``): after a takeover no write
of the old owner lands, not even one. When the record lives elsewhere, the record moves first and
the snapshot follows (OMA's order, RS-12), which can let one stale snapshot through; that is
``process`` ownership and is documented as such. A write refused by the fence is ``Fenced``: the
run has lost its lease and must stop.

**Journal-first saves (decision D10).** With a durable journal attached (``attach_journal``), a
per-turn boundary whose journal events, folded into the restore view, give exactly the run's
state is saved by making those events durable (``CheckpointSaved.mode == "journal"``); every
other boundary compacts: the whole v5 snapshot is written as above (``journal_path``). The
snapshot is built only then (``RunAtBoundary.build``): a journal-only save reads the run's
watermark and calls in flight alone (issue 19). A fenced writer (a run with a lease) takes the
journal path only when its appends can carry the fence (D15): a database journal in the
database of the run record appends each batch in one transaction with the record check, so
after a takeover no event of the old owner lands, and a refused append is ``Fenced`` like a
refused snapshot. An append to a journal file cannot carry the fence, so on a JSONL journal
every boundary of a leased run stays a fenced snapshot (D11). Each compaction also keeps its
history anchor (``anchors``, D17), which ``run_history`` and ``state_at`` fold the journal
from: on an atomic store the latest snapshot is its own newest anchor, copied only when the
next compaction overwrites it (``_store_latest_anchor``). A compaction made only because the
tail outgrew the snapshot keeps none in a store that is one document (a FileStore: see
``_save_by_path``).

**Dispatch marks (issue 18).** A journal-only ``tool_dispatch`` save is the one an ``unsafe``
call runs on, and events above the last compaction are known to the journal alone: cut off, they
would take the dispatch record with them. So once the boundary's events are durable, the writer
also makes a ``DispatchMark`` durable (``journal.marks``: beside the journal, never in its
tail) for each call the run newly holds dispatched and uncommitted: "the journal held seq
S". A restore whose journal ends below a mark refuses (or salvages, never re-running the
marked calls). A mark that cannot be made durable fails the boundary (``Unknown``): the call
does not run.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Literal, Protocol

from oma_actors.checkpoint.anchors import (
    anchor_put,
    anchors_beyond,
    history_entries,
    history_keys,
    latest_anchor,
    uncopied_anchor,
)
from oma_actors.checkpoint.at_boundary import RunAtBoundary
from oma_actors.checkpoint.boundaries import STRICT_BOUNDARIES, BoundaryPoint, installed_probe
from oma_actors.checkpoint.codec import encode
from oma_actors.checkpoint.fragments import EncodeCache
from oma_actors.errors import CheckpointError, KeyMismatchError, LeaseError
from oma_actors.events import CheckpointSaved, CheckpointSaveFailed
from oma_actors.journal.marks import DispatchMark, marks_of_journal
from oma_actors.keyspace import checkpoint_key
from oma_actors.stores.base import ConditionalStore, Remove, one_document
from oma_actors.stores.redacting import redactor_of

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Mapping, Sequence

    from oma_actors.checkpoint.boundaries import Boundary
    from oma_actors.checkpoint.journal_path import JournalPath, JournalTail
    from oma_actors.checkpoint.manager import Checkpoint
    from oma_actors.domain.snapshot import CheckpointSnapshot
    from oma_actors.events import ProgressEvent
    from oma_actors.journal.marks import DispatchMarks
    from oma_actors.stores.base import Expect, MemoryEntry, MemoryStore, Put, Write

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Saved:
    """The snapshot is durable; ``revision`` counts this run's successful saves."""

    revision: int

    @property
    def durable(self) -> bool:
        """Always ``True``: the write is known to be on the store."""
        return True


@dataclass(frozen=True, slots=True)
class NotSaved:
    """Nothing was written (e.g. the snapshot could not be serialized)."""

    error: str

    @property
    def durable(self) -> bool:
        """Always ``False``: the store was not touched."""
        return False


@dataclass(frozen=True, slots=True)
class Unknown:
    """The store failed during the write; the new value may or may not be stored."""

    error: str

    @property
    def durable(self) -> bool:
        """Always ``False``: a strict boundary must not rely on a write it cannot confirm."""
        return False


@dataclass(frozen=True, slots=True)
class Fenced:
    """The run's lease is lost: the fence refused the write and nothing was written."""

    error: str

    @property
    def durable(self) -> bool:
        """Always ``False``: another owner holds the run."""
        return False


SaveOutcome = Saved | NotSaved | Unknown | Fenced

SaveMode = Literal["snapshot", "journal"]
"""How a save was made durable: the whole snapshot, or the journal's events alone (D10)."""


class Fence(Protocol):
    """What a writer needs of a run lease (``oma_actors.runs.RunLeaseHandle`` is one)."""

    @property
    def fence_store(self) -> ConditionalStore | None:
        """The store holding the run record, when it can apply atomic batches."""
        ...

    async def fenced(
        self,
        apply: Callable[[list[Expect], list[Write]], Awaitable[bool]],
        *,
        checkpoint_ref: Mapping[str, object] | None = None,
    ) -> bool:
        """Apply ``apply(checks, writes)`` under the fence; raise ``LeaseError`` when lost."""
        ...

    async def record_checkpoint(self, ref: Mapping[str, object]) -> Any:
        """Move the run record to ``ref`` (fenced); raise ``LeaseError`` when lost."""
        ...


class RunWriter:
    """Writes one run's snapshots, in order, and answers every save with a ``SaveOutcome``.

    Args:
        checkpoint: the run's checkpoint (store and key).
        emit: receives ``CheckpointSaved`` / ``CheckpointSaveFailed``.
        revision: successful saves before this attempt (a restored snapshot's revision).
        fence: the run's lease, when it has a run store: every write is fenced by it.
        replaces: a fresh run: whatever run its key holds (a finished one, or one the caller
            chose to overwrite) is replaced whole, its history included. Before the first write
            lands, the run's history anchors are deleted and the latest snapshot it overwrites
            is not kept as one: the history of the run id is this run's alone (D17).
    """

    def __init__(
        self,
        checkpoint: Checkpoint,
        *,
        emit: Callable[[ProgressEvent], None],
        revision: int = 0,
        fence: Fence | None = None,
        replaces: bool = False,
    ) -> None:
        self._checkpoint = checkpoint
        self._replacing = replaces
        self._emit = emit
        self._revision = revision
        self._fence = fence
        self._saved = 0
        self._failed = 0
        self._journal_saves = 0
        # On a RedactingStore, each message is redacted as it is first encoded, and the store
        # writes the text as it is: one serialization per save, not encode + parse + encode.
        self._cache = EncodeCache(redactor_of(checkpoint.store))
        self._lock = asyncio.Lock()
        self._journal: JournalPath | None = None
        self._marks: DispatchMarks | None = None
        self._marked: set[tuple[str, str, str]] = set()
        self._last_size = 0
        self._on_snapshot: Callable[[CheckpointSnapshot], None] | None = None
        self._predecessor_kept = False
        # What this writer last wrote as the latest snapshot on the anchor path: the next
        # compaction copies it from here instead of reading the store (``None``: unknown).
        self._latest_written: Put | None = None

    def on_snapshot(self, callback: Callable[[CheckpointSnapshot], None]) -> None:
        """Call ``callback`` with each snapshot once it is durable (the journal's record of it)."""
        self._on_snapshot = callback

    def attach_journal(self, journal: JournalPath) -> bool:
        """Make the run's durable journal its save path between snapshots (D10).

        A fenced writer accepts it only when the journal's appends carry the lease's fence
        (``JournalTail.fence_appends``: a database journal in the run record's database, D15).
        Otherwise (a journal file) it is refused (``False``): after a takeover a stale owner's
        journal-only save (an unsafe tool's dispatch record, say) would still "succeed"; with a
        lease every boundary then stays a fenced snapshot and the journal only extends it.
        """
        if not self.fence_journal(journal.tail):
            return False
        self._journal = journal
        # The recorder's backend keeps the dispatch marks (a custom journal may keep none).
        backend = getattr(journal.tail, "journal", None)
        self._marks = None if backend is None else marks_of_journal(backend)
        return True

    def fence_journal(self, tail: JournalTail) -> bool:
        """Make ``tail``'s appends carry this writer's lease fence, when it has one (D15).

        Returns:
            ``True`` when no append of the run can land after a takeover: the writer has no
            lease, or the journal carries its fence (a database journal in the run record's
            database). ``False`` when the journal cannot (a JSONL file): its appends stay
            unfenced, so it must not be the save path.
        """
        if self._fence is None or tail.fence_appends(self._fence):
            return True
        # Unfenced appends still stop at a takeover: each batch first checks the run record
        # (a holder stalled past its lease learns of the takeover there, not after appending).
        guard = getattr(tail, "guard_appends", None)
        if callable(guard):
            guard(self._lease_held)
        return False

    async def _lease_held(self) -> None:
        """Raise the lease's loss, after re-reading the run record (``confirm_lost``)."""
        fence = self._fence
        confirm = getattr(fence, "confirm_lost", None)
        if confirm is not None and await confirm():
            lost = getattr(fence, "lost", None)
            raise (
                lost
                if isinstance(lost, LeaseError)
                else LeaseError("RUN_LEASE_LOST", "the run's lease was lost")
            )

    @property
    def journal(self) -> JournalPath | None:
        """The attached journal path, if the run saves through a durable journal."""
        return self._journal

    @property
    def journal_saves(self) -> int:
        """Saves made durable by the journal alone (this attempt only)."""
        return self._journal_saves

    @property
    def compactions(self) -> int:
        """Snapshots written while a durable journal was attached (this attempt only)."""
        return self._saved - self._journal_saves if self._journal is not None else 0

    @property
    def checkpoint(self) -> Checkpoint:
        """The checkpoint this writer writes (its store holds the run's other records too)."""
        return self._checkpoint

    @property
    def revision(self) -> int:
        """Successful saves so far (continuing the restored snapshot's count)."""
        return self._revision

    @property
    def saved(self) -> int:
        """Saves this writer made durable (this attempt only)."""
        return self._saved

    @property
    def failed(self) -> int:
        """Saves this writer attempted that are not known durable (this attempt only)."""
        return self._failed

    async def save(
        self,
        snapshot: CheckpointSnapshot,
        *,
        boundary: Boundary,
        task_id: str | None = None,
        committed: Sequence[str] = (),
    ) -> SaveOutcome:
        """Write ``snapshot`` stamped with the next revision, as the boundary ``boundary``.

        ``save_run`` with the snapshot already built (a flow's save, a test): see there.
        """
        return await self.save_run(
            RunAtBoundary.of(snapshot), boundary=boundary, task_id=task_id, committed=committed
        )

    async def save_run(
        self,
        run: RunAtBoundary,
        *,
        boundary: Boundary,
        task_id: str | None = None,
        committed: Sequence[str] = (),
    ) -> SaveOutcome:
        """Save ``run`` as the boundary ``boundary``, stamped with the next revision.

        The whole snapshot is built (``run.build``) only when it is written: a journal-only
        save (D10) appends the boundary's events and builds none (issue 19).

        Never raises for a store or encoding failure: the outcome says what happened, and a
        ``CheckpointSaveFailed`` event reports it. A strict boundary's caller must not go on
        unless the outcome is ``Saved`` (``outcome.durable``).

        Args:
            run: the run as it is at the boundary.
            boundary: the boundary's name; decides strictness.
            task_id: the task whose state the boundary records, if any.
            committed: tool-call ids whose commit records the save makes durable.
        """
        async with self._lock:
            return await self._write(run, boundary, task_id, tuple(committed))

    async def _write(
        self,
        run: RunAtBoundary,
        boundary: Boundary,
        task_id: str | None,
        committed: tuple[str, ...],
    ) -> SaveOutcome:
        strict = boundary in STRICT_BOUNDARIES
        revision = self._revision + 1
        run_id = run.run_id
        # The context's probe, which nothing in a save changes: read once.
        probe = installed_probe()
        if probe is not None:
            probe(
                BoundaryPoint(
                    run_id=run_id, boundary=boundary, phase="before", task_id=task_id,
                    revision=revision,
                )
            )  # fmt: skip
        outcome, snapshot = await self._save_by_path(run, boundary, revision)
        if probe is not None:
            # Built, not ``replace``d from the first: a few microseconds at every boundary.
            probe(
                BoundaryPoint(
                    run_id=run_id, boundary=boundary, phase="after", task_id=task_id,
                    revision=revision, durable=outcome.durable,
                )
            )  # fmt: skip
        if isinstance(outcome, Saved):
            self._revision = outcome.revision
            self._saved += 1
            mode: SaveMode = "snapshot" if snapshot is not None else "journal"
            self._journal_saves += mode == "journal"
            if snapshot is not None and self._on_snapshot is not None:
                self._on_snapshot(snapshot)
            self._emit(
                CheckpointSaved(
                    run_id=run_id, revision=outcome.revision, boundary=boundary,
                    task_id=task_id, committed=committed, mode=mode,
                )
            )  # fmt: skip
            return outcome
        self._failed += 1
        # A strict boundary's failure stops the step that needed it; say so louder.
        logger.log(
            logging.ERROR if strict else logging.WARNING,
            "checkpoint save at %s failed: %s",
            boundary,
            outcome.error,
        )
        self._emit(
            CheckpointSaveFailed(
                run_id=run_id, error=outcome.error, boundary=boundary, strict=strict
            )
        )
        return outcome

    async def _save_by_path(
        self, run: RunAtBoundary, boundary: Boundary, revision: int
    ) -> tuple[SaveOutcome, CheckpointSnapshot | None]:
        """Save ``run`` by the journal alone or as a whole snapshot; return that snapshot.

        ``None`` for the snapshot: the save was (or failed as) a journal-only one, and no
        snapshot was built.
        """
        journal = self._journal
        if journal is None:
            snapshot = replace(await run.build(), revision=revision)
            return await self._store(snapshot), snapshot
        watermark = run.watermark or 0
        if journal.journal_only(watermark, boundary):
            if self._marked:
                # A marked call that committed is forgotten: a later call a model names alike
                # (an id is unique within one turn only, for some models) gets its own mark.
                self._marked.intersection_update(run.dispatched_uncommitted())
            try:
                await journal.commit(watermark)
                if boundary == "tool_dispatch":
                    await self._mark_dispatched(run, watermark)
            except Exception as exc:  # the append failed: an outcome, never a crash of the run
                lost = _lease_lost(exc)
                if lost is not None:  # the fence refused the append: nothing of it landed
                    return Fenced(str(lost)), None
                return Unknown(f"{type(exc).__name__}: {exc}"), None
            return Saved(revision), None
        # A compaction: only now is the whole snapshot needed (built at the boundary's
        # watermark, the seq the decision took the boundary's events through).
        snapshot = await journal.vouch(replace(await run.build(), revision=revision))
        # A compaction only because the tail outgrew the snapshot is exactly what the journal
        # folds to: history is complete without its anchor (D17). Where an anchor costs only
        # its bytes (a database row or a memory key: a restore reads the latest snapshot
        # alone) it is kept, so a fold to any point (``state_at``, ``fork_run``) starts at most
        # one compaction's tail below it. In a store that is one document (a FileStore) every
        # anchor is in the file each restore parses and each write rewrites: measured, a
        # 1000-turn run's restore 2x slower, its bytes written 1.9x
        # (``bench/history_run_cost.py``); so it is not kept there.
        keep = not journal.outgrown or not one_document(self._checkpoint.store)
        anchor = boundary if keep else None
        outcome = await self._store(snapshot, anchor=anchor)
        if isinstance(outcome, Saved):
            journal.compacted(snapshot, self._last_size)
        else:
            journal.lost()
        return outcome, snapshot

    async def _mark_dispatched(self, run: RunAtBoundary, seq: int) -> None:
        """Mark each call ``run`` newly holds dispatched and uncommitted (issue 18).

        Called once the boundary's events are durable, so a mark never claims more than the
        journal holds. The seq marked is the boundary's watermark: the journal holds the run
        at least that far, the call's ``tool/call`` included.

        Raises:
            Exception: the backend could not make a mark durable (the call must not run).
        """
        marks = self._marks
        if marks is None:
            return
        for key in run.dispatched_uncommitted():
            task_id, agent, call_id = key
            if key in self._marked:
                continue
            await marks.mark(
                DispatchMark(
                    run_id=run.run_id, seq=seq, task_id=task_id, agent_name=agent,
                    call_id=call_id,
                )
            )  # fmt: skip
            self._marked.add(key)

    async def _store(
        self, snapshot: CheckpointSnapshot, *, anchor: Boundary | None = None
    ) -> SaveOutcome:
        try:
            text = encode(snapshot, self._cache)
        except CheckpointError as exc:
            return NotSaved(str(exc))
        self._last_size = len(text)
        try:
            store = self._checkpoint.store
            replaced = await self._replaced_anchors(store, snapshot.run_id)
            if (
                (anchor is not None or self._journal is not None)
                and self._fence is None
                and isinstance(store, ConditionalStore)
                and self._checkpoint.key == checkpoint_key(snapshot.run_id)
            ):
                outcome = await self._store_latest_anchor(store, text, snapshot, anchor, replaced)
                if isinstance(outcome, Saved):
                    self._replaced()
                return outcome
            self._latest_written = None  # this path writes the latest snapshot on its own
            for key in replaced:
                await store.delete(key)
            if not self._predecessor_kept and not self._replacing:
                # A previous attempt may have left its newest anchor as the latest snapshot
                # (``_store_latest_anchor``); this writer never does on these paths, so only
                # its first write can overwrite one: copied first, never lost.
                await self._keep_latest_anchor(store)
            kept = None if anchor is None else anchor_put(self._checkpoint, text, snapshot, anchor)
            if kept is not None:
                # Written first, so a history never names a missing anchor.
                await store.set(kept.key, kept.value, kept.metadata)
                for key in await self._beyond_budget(store, snapshot.run_id, kept, len(text)):
                    await store.delete(key)
            if self._fence is None:
                await self._checkpoint.write_encoded(text, snapshot)
            elif not await self._write_fenced(self._fence, text, snapshot):
                return NotSaved("the fenced write was refused although the lease is held")
        except LeaseError as exc:
            if exc.code != "RUN_LEASE_LOST":
                return NotSaved(str(exc))  # a refused record update: nothing was written
            return Fenced(str(exc))
        except KeyMismatchError:
            # Not a store failure but the wrong key: no save of this run can ever land, and
            # running on would do its effects with nothing durable. The run stops here (its
            # admission save comes before any model call).
            raise
        except Exception as exc:  # any store failure is an outcome, never a crash of the run
            # No read-back to "confirm" the write: a store may serve reads from a cache that
            # already holds the value its failed flush never made durable (FileStore, FS-08).
            return Unknown(f"{type(exc).__name__}: {exc}")
        self._replaced()
        return Saved(snapshot.revision)

    async def _beyond_budget(
        self, store: MemoryStore, run_id: str, adding: Put, latest_bytes: int
    ) -> list[str]:
        """The run's oldest anchors a one-document store drops as ``adding`` is kept
        (``anchors_beyond``); none in any other store, where an anchor costs only its bytes."""
        if not one_document(store):
            return []
        return anchors_beyond(await history_entries(store, run_id), adding, latest_bytes)

    async def _replaced_anchors(self, store: MemoryStore, run_id: str) -> list[str]:
        """The history anchors of the run a fresh run replaces (``replaces``), to remove with
        its first write; ``[]`` once a write landed.

        The replaced run's latest snapshot, which may be its newest anchor still uncopied, is
        overwritten by that write and not copied. Asked again until a write lands: a failed
        first write may have removed some anchors and kept the latest.
        """
        # A key holding no run has no history to forget: a new run id costs one read, not a
        # listing of a store holding many runs.
        if not self._replacing or await store.get(self._checkpoint.key) is None:
            return []
        return await history_keys(store, run_id)

    def _replaced(self) -> None:
        """A write landed: the run the key held is gone, and nothing of it is left to keep."""
        self._replacing = False
        self._predecessor_kept = True

    async def _keep_latest_anchor(self, store: MemoryStore) -> None:
        """Copy the run's latest snapshot to its history key when it is an uncopied anchor."""
        current = await store.get(self._checkpoint.key)
        copy = None
        if current is not None:
            copy = uncopied_anchor(current.key, current.value, current.metadata)
        if copy is not None:
            await store.set(copy.key, copy.value, copy.metadata)
        self._predecessor_kept = True

    async def _store_latest_anchor(
        self,
        store: ConditionalStore,
        text: str,
        snapshot: CheckpointSnapshot,
        anchor: Boundary | None,
        replaced: Sequence[str] = (),
    ) -> SaveOutcome:
        """Write the latest snapshot as its own newest anchor; copy the one it overwrites;
        remove the ``replaced`` anchors of a run the write replaces, in the same batch.

        A journal-first compaction's anchor (D17) is, until the next compaction, the run's
        latest snapshot itself: its metadata carries the anchor's summary (``latest_anchor``)
        and no copy is written. The copy of an anchor is written only by the batch that
        overwrites it, so the last anchor of a run (its terminal compaction, the largest
        snapshot) is never written twice (P3). One atomic batch: a history never names a
        missing anchor, and the store (not this writer) says what is still uncopied, so a
        restored attempt's first compaction keeps its predecessor's last anchor too.
        """
        previous: Put | MemoryEntry | None = self._latest_written
        self._latest_written = None
        if previous is None and not self._replacing:
            # Only the first compaction of an attempt reads: what a predecessor left there
            # (the run a fresh run replaces keeps no anchor).
            previous = await store.get(self._checkpoint.key)
        writes: list[Write] = [Remove(key) for key in replaced]
        if previous is not None:
            copy = uncopied_anchor(previous.key, previous.value, previous.metadata)
            if copy is not None:
                writes.append(copy)
                dropped = await self._beyond_budget(store, snapshot.run_id, copy, len(text))
                writes.extend(Remove(key) for key in dropped if key not in replaced)
        latest = latest_anchor(self._checkpoint, text, snapshot, anchor)
        writes.append(latest)
        if not await store.apply([], writes):
            return NotSaved("the store refused an unconditional batch")
        # Known again only once the batch landed: after a failure the store is read again.
        self._latest_written = latest
        return Saved(snapshot.revision)

    async def _write_fenced(self, fence: Fence, text: str, snapshot: CheckpointSnapshot) -> bool:
        put = self._checkpoint.put(text, snapshot)
        ref = {"key": put.key, "snapshotVersion": snapshot.version, "savedAt": snapshot.created_at}
        store = fence.fence_store
        if store is not None and store is self._checkpoint.store:

            async def apply(checks: list[Expect], writes: list[Write]) -> bool:
                # One transaction: the fence, the record's move and the snapshot (D11).
                return await store.apply(checks, [*writes, put])

            return await fence.fenced(apply, checkpoint_ref=ref)
        # The record lives in another store: move it first, then write (OMA's RS-12 order).
        await fence.record_checkpoint(ref)
        await self._checkpoint.write_encoded(text, snapshot)
        return True


def _lease_lost(error: BaseException) -> LeaseError | None:
    """The ``RUN_LEASE_LOST`` behind ``error`` (a failed append names it as its cause)."""
    seen: BaseException | None = error
    while seen is not None:
        if isinstance(seen, LeaseError) and seen.code == "RUN_LEASE_LOST":
            return seen
        seen = seen.__cause__
    return None
