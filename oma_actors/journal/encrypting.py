"""``EncryptingJournal``: a ``RunJournal`` decorator that seals each event's payload (at rest).

::

    journal = EncryptingJournal(JsonlRunJournal("run.jsonl"), KeyRing.from_file("keys"))

What is sealed is the variant's own fields (``JournalEvent.data``: message content, tool input
and output, goals, metadata, approval content): they become one field, ``sealed``, holding an
AES-256-GCM envelope of their JSON (``oma_actors.stores.keyring``). OMA's base fields stay
readable (``type``, ``seq``, ``runId``, ``attempt``, ``timestampUnixMs``, ``taskId``,
``agentName``, ``sourceEventSeqs``): every backend orders and slices by ``seq``, the JSONL
reader needs ``type`` and the base fields to accept a line, and none of them carries content.
All of them are the associated data of the seal, so a line moved to another run or seq, or one
whose type, attempt or attribution was edited, fails authentication like a flipped byte.

Reads fail closed: an event without exactly one sealed field (plaintext), sealed under a key id
not in the ring, or failing its tag raises ``CorruptStoreError`` naming the run, the seq and the
key id; no event of that read is returned.

Before its first append an instance proves that its active key is the key that sealed the events
already stored under that id, as ``EncryptingStore`` does: an event it opened counts, else it
reads the appended run's events, then every event. A key that opens none of them raises
``KeyMismatchError`` and nothing is appended (its events would open for nobody else). A journal
that cannot be read is appended to unproven, as before (its own reads fail anyway). The ring
remembers the proof for the inner journal, so a wrapper made anew over it (the sidecar's, per
attempt) reads nothing more. A fenced append is not checked here: its run's lease wrote first
through the ``EncryptingStore`` over the same database, which proved the key on that store.

The wrapper knows only the ``RunJournal`` protocol, so it works over any backend;
``append_now`` exists only when the inner journal has it.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Protocol, cast

from oma_actors.errors import ConfigurationError, CorruptStoreError, StoreError
from oma_actors.journal.base import RunJournal, read_run
from oma_actors.journal.errors import JournalAppendError
from oma_actors.journal.sql import FencedJournal
from oma_actors.jsontext import escape_lone_surrogates
from oma_actors.stores.base import is_conditional_store
from oma_actors.stores.encrypting import EncryptingStore
from oma_actors.stores.keyring import KeyMismatchError, KeyRing, UnsealError

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Sequence

    from oma_actors.journal.event import JournalEvent
    from oma_actors.journal.marks import DispatchMark
    from oma_actors.journal.sql import AppendFence
    from oma_actors.stores.base import ConditionalStore, Expect, Write

SEALED_FIELD = "sealed"
"""The one variant field an encrypted event carries: the envelope of all the others."""


class AppendNow(Protocol):
    """The signature of ``JsonlRunJournal.append_now``."""

    async def __call__(self, events: Sequence[JournalEvent]) -> None:
        """Append without waiting out the batching window."""
        ...


def _context(event: JournalEvent) -> bytes:
    # Every readable field, in a fixed order, as JSON: unambiguous, so no two events share one.
    bound = [
        event.run_id,
        event.seq,
        event.type,
        event.attempt,
        event.timestamp_unix_ms,
        event.task_id,
        event.agent_name,
        event.source_event_seqs,
    ]
    if event.trace_id is not None or event.span_id is not None:
        # Bound only when present, so events sealed before they existed still open.
        bound += [event.trace_id, event.span_id]
    return b"journal\x00" + json.dumps(bound, separators=(",", ":")).encode("utf-8")


def seal_event(event: JournalEvent, keyring: KeyRing) -> JournalEvent:
    """``event`` with its payload replaced by the one sealed field, under the active key."""
    # A lone surrogate (a tool's output may hold one) written as JSON.stringify writes it: the
    # payload then always encodes, and opens as the same value.
    payload = escape_lone_surrogates(
        json.dumps(event.data, separators=(",", ":"), ensure_ascii=False)
    )
    envelope = keyring.seal(payload.encode("utf-8"), _context(event))
    return replace(event, data={SEALED_FIELD: envelope})


def open_event(event: JournalEvent, keyring: KeyRing, *, journal: str) -> JournalEvent:
    """``event`` as it was before ``seal_event``, its payload opened.

    For a reader that parses journal lines itself (the sidecar's journal watch).

    Args:
        event: A sealed event, as the inner journal stores it.
        keyring: The keys.
        journal: The journal it came from (a path or kind), for the error.

    Raises:
        CorruptStoreError: The event is not sealed, names a key id not in the ring, or fails
            authentication. The error names the journal, the run, the seq and the key id.
    """
    where = f"journal {journal} run {event.run_id!r} event seq {event.seq}"
    envelope = event.data.get(SEALED_FIELD)
    if len(event.data) != 1 or not isinstance(envelope, str):
        raise CorruptStoreError(where, "the event is not sealed (plaintext in a sealed journal)")
    try:
        data = json.loads(keyring.open(envelope, _context(event)))
    except UnsealError as exc:
        raise CorruptStoreError(where, exc.reason) from None
    if not isinstance(data, dict):  # authenticated, so only a writer with our key made it
        raise CorruptStoreError(where, "the sealed payload is not a JSON object")
    return replace(event, data=data)


class EncryptingJournal:
    """Wraps a run journal so that every event's payload is sealed (see the module docstring).

    Args:
        inner: Any ``RunJournal`` (JSONL, in-memory, or a database-backed one).
        keyring: The keys; the active one seals, every one in the ring opens.

    Attributes:
        inner: The wrapped journal.
        keyring: The keys.
        append_now: Present only when ``inner`` has a callable ``append_now``.

    Raises:
        ConfigurationError: ``inner`` is not a ``RunJournal``, or ``keyring`` not a ``KeyRing``.
    """

    append_now: AppendNow

    def __init__(self, inner: RunJournal, keyring: KeyRing) -> None:
        if not isinstance(inner, RunJournal):
            raise ConfigurationError(f"EncryptingJournal needs a RunJournal, got {inner!r}")
        if not isinstance(keyring, KeyRing):
            raise ConfigurationError(f"EncryptingJournal needs a KeyRing, got {keyring!r}")
        self.inner = inner
        self.keyring = keyring
        # Whether the active key is proven the key of its id here (see _prove), and the event
        # a failed proof could not open: every later append is refused, reading nothing.
        self._proven = keyring.proven_for(inner)
        self._refused: JournalEvent | None = None
        self._proving = asyncio.Lock()
        urgent = getattr(inner, "append_now", None)
        if callable(urgent):
            self._urgent: AppendNow = urgent
            self.append_now = self._append_now

    def seal(self, event: JournalEvent) -> JournalEvent:
        """``event`` with its payload replaced by the one sealed field, redacted first by the
        inner journal's rules when it redacts (``redact_event``): under the seal, the inner
        journal only sees the envelope."""
        redact = getattr(self.inner, "redact_event", None)
        if callable(redact):
            event = redact(event)
        return seal_event(event, self.keyring)

    def open(self, event: JournalEvent) -> JournalEvent:
        """``event`` as it was appended, its payload opened (see ``open_event``)."""
        opened = open_event(event, self.keyring, journal=self._name())
        if not self._proven and self.keyring.sealed_by_active(event.data[SEALED_FIELD]):
            self._proved()  # it opened: the active key is the one that sealed it
        return opened

    async def append(self, events: Sequence[JournalEvent]) -> None:
        """Seal each event's payload and append them to the inner journal.

        Raises:
            KeyMismatchError: The active key is not the one this journal's events under its id
                were sealed with (see the module docstring); nothing was appended.
        """
        await self._prove(events)
        await self.inner.append([self.seal(event) for event in events])

    async def _append_now(self, events: Sequence[JournalEvent]) -> None:
        await self._prove(events)
        await self._urgent([self.seal(event) for event in events])

    def _proved(self) -> None:
        self._proven = True
        self.keyring.note_proven(self.inner)

    async def _prove(self, events: Sequence[JournalEvent]) -> None:
        """Return once the active key is proven the key that sealed the events stored under
        its id (nothing is read after the first time).

        Raises:
            KeyMismatchError: Events under that id are stored and the key opens none of them.
        """
        if self._proven or not events:
            return
        async with self._proving:  # one proof: concurrent first appends wait for its answer
            if self._refused is None and not self._proven:
                self._refused, read = await self._disproof(events[0].run_id)
                if self._refused is None:
                    self._proven = True
                    if read:  # an unreadable journal is tried again by the next wrapper
                        self.keyring.note_proven(self.inner)
            if self._refused is not None:
                where = f"journal {self._name()} run {self._refused.run_id!r} event seq "
                raise KeyMismatchError(f"{where}{self._refused.seq}", self.keyring.active)

    async def _disproof(self, run_id: str) -> tuple[JournalEvent | None, bool]:
        """The first stored event under the active id that the key does not open, when none
        opens (``None`` when one opens, none is stored, or the journal cannot be read), and
        whether the whole journal was read."""
        failed: JournalEvent | None = None
        read = False
        for run in (run_id, None):  # the appended run's own events, then every run's
            try:
                events = await (read_run(self.inner, run) if run else self.inner.read_from(0))
            except (StoreError, OSError):
                continue  # unreadable: no witness (an append does not read, and may still work)
            read = run is None
            candidates = [
                event
                for event in events
                if isinstance(envelope := event.data.get(SEALED_FIELD), str)
                and self.keyring.sealed_by_active(envelope)
            ]
            proof = self.keyring.proves_active(
                (event.data[SEALED_FIELD], _context(event)) for event in candidates
            )
            if proof.opens:
                return None, True
            if failed is None and proof.failed is not None:
                failed = candidates[proof.failed]
        return failed, read

    def shares_database(self, store: object) -> bool:
        """Whether the appends can carry the run lease's fence of ``store`` (D15): the inner
        journal is a database journal in the database of the store ``store`` seals (an
        ``EncryptingStore`` over it), so a sealed leased run is journal-first as a plain one."""
        return (
            isinstance(self.inner, FencedJournal)
            and isinstance(store, EncryptingStore)
            and self.inner.shares_database(store.inner)
        )

    async def append_fenced(self, events: Sequence[JournalEvent], fence: AppendFence) -> None:
        """Seal the events and append them through the inner journal under ``fence``, its run
        record check restated on the sealed record the database holds (the inner transaction
        compares stored strings; a record sealed anew since fails it, never passes it).

        Raises:
            JournalAppendError: the inner journal cannot fence, or the fence's store is not
                sealed (``shares_database`` said no); nothing was appended.
            LeaseError, JournalClosedError, JournalDuplicateError, StoreError: as the inner
                journal's ``append_fenced``.
        """
        store = fence.fence_store
        if not isinstance(self.inner, FencedJournal) or not isinstance(store, EncryptingStore):
            raise JournalAppendError(
                f"{self._name()}: a sealed journal fences its appends only by a sealed store "
                "in its own database"
            )
        sealed = [self.seal(event) for event in events]
        await self.inner.append_fenced(sealed, _SealedFence(fence, store))

    async def read_from(self, seq: int) -> list[JournalEvent]:
        """Every event with ``seq >= seq``, payloads opened, in order.

        Raises:
            CorruptStoreError: Any event read cannot be opened (see ``open``).
        """
        return [self.open(event) for event in await self.inner.read_from(seq)]

    async def read_run(self, run_id: str, seq: int = 0) -> list[JournalEvent]:
        """The events of ``run_id`` with ``seq >= seq``, payloads opened: the inner journal's
        own run read (run ids stay readable), so other runs' events are neither read nor opened.

        Raises:
            CorruptStoreError: Any event read cannot be opened (see ``open``).
        """
        return [self.open(event) for event in await read_run(self.inner, run_id, seq)]

    async def mark(self, mark: DispatchMark) -> None:
        """The inner journal's dispatch mark (ids and a seq only, as readable as its run ids);
        nothing when the inner journal keeps none."""
        inner = getattr(self.inner, "mark", None)
        if inner is not None:
            await inner(mark)

    async def marks_of(self, run_id: str, above: int = 0) -> list[DispatchMark]:
        """The inner journal's dispatch marks of ``run_id`` above ``above`` (none without)."""
        inner = getattr(self.inner, "marks_of", None)
        return [] if inner is None else list(await inner(run_id, above))

    async def close(self) -> None:
        """Close the inner journal."""
        await self.inner.close()

    def describe(self) -> dict[str, Any]:
        """The inner journal's description with ``"sealed": true`` (the snapshot's journalRef)."""
        return {**self.inner.describe(), "sealed": True}

    def _name(self) -> str:
        described = self.inner.describe()
        return str(described.get("path") or described.get("kind"))

    def __repr__(self) -> str:
        return f"EncryptingJournal({self.inner!r}, {self.keyring!r})"


class _SealedFence:
    """A run lease's fence whose record check is restated on the sealed record for the inner
    journal's transaction (``EncryptingStore.sealed_checks``)."""

    def __init__(self, fence: AppendFence, store: EncryptingStore) -> None:
        self._fence = fence
        self._store = store

    @property
    def fence_store(self) -> ConditionalStore | None:
        """The sealed store's inner store: the table the inner transaction reads."""
        inner = self._store.inner
        return cast("ConditionalStore", inner) if is_conditional_store(inner) else None

    async def fenced(self, apply: Callable[[list[Expect], list[Write]], Awaitable[bool]]) -> bool:
        """The lease's fenced write, handing ``apply`` its checks on the sealed values."""

        async def sealed(checks: list[Expect], writes: list[Write]) -> bool:
            restated = await self._store.sealed_checks(checks)
            if restated is None:  # the record is not the one this lease holds: the lease decides
                return False
            return await apply(restated, writes)

        return await self._fence.fenced(sealed)


__all__ = ["SEALED_FIELD", "AppendNow", "EncryptingJournal", "open_event", "seal_event"]
