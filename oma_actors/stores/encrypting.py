"""EncryptingStore: a store decorator that seals every value with AES-256-GCM (encryption at rest).

::

    store = EncryptingStore(SqliteStore("state.db"), KeyRing.from_file("keys"))

Each value is sealed under the ring's active key with a random nonce and the entry key as
associated data (``oma_actors.stores.keyring``), so the inner store only ever holds envelopes,
and a value copied or moved to another entry fails authentication. Reads fail closed: a value
that is plaintext, names a key id not in the ring, or fails its tag raises ``CorruptStoreError``
naming the entry, from ``get`` and ``list`` alike; nothing unauthenticated is ever returned.

Only the value is sealed. Keys and metadata stay readable: metadata is the bookkeeping index
OMA's tools query without decoding an entry (namespace, schema version, run id, status, fencing
token, request hash: CK-03, AP-12, RS-04), and the durable copy of every one of those facts is
inside the sealed value. Do not put secrets in metadata.

Compare-and-set cannot compare ciphertexts (two seals of one plaintext differ), so ``apply`` and
``compare_and_set`` read each checked entry, open it and compare plaintexts, then hand the inner
store the sealed strings they read as its expected values: the inner store's own atomic step
then lands only if nothing changed in between. When it refuses, the entries are read again; the
call returns ``False`` only after it has seen a plaintext that differs, so a concurrent rewrite
of the same plaintext (a re-seal, ``oma keys rotate``) never fails a check that holds. To spare
the read where it is a database round trip, a call's first round may guess the sealed string
from the small values this instance last wrote or read (a fenced write checks the record its
owner just wrote); the inner store's atomic check turns a wrong guess into a refusal, and the
next round reads.

An envelope names its key by id only, so before its first write an instance proves that its
active key is the key that sealed the values already stored under that id: it opens one of them
(a value it read already counts; else it reads the entry it writes, then the runtime's small
records, then every entry). A key that opens none of them is another key with the same id, and
every write raises ``KeyMismatchError`` (a ``ConfigurationError``) before anything is written:
values it sealed would open for nobody else. The first writer under an id leaves a witness for
the next ones, even on a store that holds nothing yet: the key proof ``__oma_key__/<key id>``, a
value sealed under that key, created with the inner store's compare-and-set, so of two writers
holding different bytes under one id, the one that loses the creation is refused (a store without
compare-and-set gets it written unguarded). Later writers find it first, with one read. It is
the wrapper's bookkeeping: its listings leave it out. The proof is remembered by the ring for the
inner store, so a wrapper made anew over it reads nothing more.

Like the test kit's wrappers, it has exactly the inner store's capabilities: ``compare_and_set``,
``apply`` and ``set_with_expiry`` exist only when the inner store has them.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import TYPE_CHECKING, Any, cast

from oma_actors.errors import ConfigurationError, CorruptStoreError, StoreError
from oma_actors.keyspace import (
    APPROVAL_KEY_PREFIX,
    CHECKPOINT_KEY_PREFIX,
    RUN_KEY_PREFIX,
    SIDECAR_KEY_PREFIX,
    key_proof_id,
    key_proof_key,
)
from oma_actors.stores.base import (
    Apply,
    CompareAndSet,
    Expect,
    JsonText,
    Put,
    SetWithExpiry,
    is_atomic_store,
    is_memory_store,
    one_document,
)
from oma_actors.stores.keyring import KeyMismatchError, KeyRing, UnsealError
from oma_actors.stores.prefix import UnreadableEntry, list_under, takes_prefix
from oma_actors.stores.redacting import redactor_of

if TYPE_CHECKING:
    import builtins
    from collections.abc import AsyncIterator, Mapping, Sequence

    from oma_actors.stores.base import (
        AtomicStore,
        ConditionalStore,
        ExpiringStore,
        MemoryEntry,
        MemoryStore,
        Write,
    )


KNOWN_CHARS = 4096
"""Values up to this many characters are remembered as a guess for the next check of their key
(run records, approval rows, fencing tokens; never snapshots)."""
KNOWN_KEYS = 1024
"""At most this many keys are remembered (the oldest is dropped), so memory stays bounded."""

MAX_ROUNDS = 64
"""Reads + inner compare-and-sets one call makes before giving up: every refusal means another
writer replaced a checked entry in between, so only a store that refuses a check that holds
(a broken one) or a rewrite storm gets this far; it is an error, never a silent ``False``."""


def _racing(keys: builtins.list[str]) -> StoreError:
    return StoreError(
        f"encrypted compare-and-set on {keys!r}: the inner store refused {MAX_ROUNDS} times "
        "while every check held"
    )


WITNESS_PREFIXES = (RUN_KEY_PREFIX, SIDECAR_KEY_PREFIX, APPROVAL_KEY_PREFIX, CHECKPOINT_KEY_PREFIX)
"""Where the key proof looks, in this order, before it lists every entry: the runtime's small
records first (run records, the sidecar's, approvals), then the runs' latest snapshots; history
anchors, the bulk of a database store, only when none of these holds a value under the id."""


def _context(key: str) -> bytes:
    # "store" keeps a store value from ever opening as a journal payload and vice versa.
    return b"store\x00" + key.encode("utf-8", "surrogatepass")


class EncryptingStore:
    """Wraps a store so that every value it holds is sealed (see the module docstring).

    Args:
        inner: The store that receives the sealed values.
        keyring: The keys; the active one seals, every one in the ring opens.

    Attributes:
        inner: The wrapped store.
        keyring: The keys.
        redactor: The rules of a ``RedactingStore`` it wraps, applied before sealing.
        compare_and_set: Present only when ``inner`` has a callable ``compare_and_set``.
        apply: Present only when ``inner`` has a callable ``apply``.
        set_with_expiry: Present only when ``inner`` has a callable ``set_with_expiry``.

    Raises:
        ConfigurationError: ``inner`` is not a store, or ``keyring`` is not a ``KeyRing``.
    """

    compare_and_set: CompareAndSet
    apply: Apply
    set_with_expiry: SetWithExpiry

    def __init__(self, inner: MemoryStore, keyring: KeyRing) -> None:
        if not is_memory_store(inner):
            raise ConfigurationError(
                f"EncryptingStore needs a store with get/set/list/delete/clear, got {inner!r}"
            )
        if not isinstance(keyring, KeyRing):
            raise ConfigurationError(f"EncryptingStore needs a KeyRing, got {keyring!r}")
        self.inner = inner
        self.keyring = keyring
        # Applied to plaintext before it is sealed (the redacting store leaves the envelopes it
        # is handed alone: ``keyring.is_envelope``), as a redacting journal's rules under an
        # ``EncryptingJournal``; ``redactor_of`` hands them to a producer that redacts as it
        # encodes (the checkpoint codec), whose text is then not redacted again.
        self.redactor = redactor_of(inner)
        # Small values this instance last wrote or read: key -> (sealed, plaintext). A guess
        # only, never a source of truth (see _sealed_if_holds).
        self._known: dict[str, tuple[str, str]] = {}
        # Whether the active key is proven the key of its id here (see _prove), and the entry
        # that a failed proof could not open: every later write is refused, reading nothing.
        self._proven = keyring.proven_for(inner)
        self._refused: str | None = None
        self._proving = asyncio.Lock()
        if callable(getattr(inner, "compare_and_set", None)):
            self.compare_and_set = self._compare_and_set
        if callable(getattr(inner, "apply", None)):
            self.apply = self._apply
        if callable(getattr(inner, "set_with_expiry", None)):
            self.set_with_expiry = self._set_with_expiry

    key_proof_id = staticmethod(key_proof_id)
    """The key id whose key proof (see the module docstring) is stored at a key, or ``None``
    when the key holds a value (``keyspace.key_proof_id``, for callers of the public API)."""

    @property
    def one_document(self) -> bool:
        """Whether the wrapped store is one document (``stores.base.one_document``)."""
        return one_document(self.inner)

    def seal(self, key: str, value: str) -> str:
        """The envelope of ``value`` at ``key``, sealed under the active key (redacted first by
        the rules of a ``RedactingStore`` this store wraps).

        Raises:
            StoreError: ``value`` is not valid Unicode (a lone surrogate); nothing is written.
        """
        redactor = self.redactor
        if redactor is not None and not (
            isinstance(value, JsonText) and value.redacted_by() is redactor
        ):
            value = redactor.value(value)
        try:
            plaintext = value.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise StoreError(
                f"value of entry {key!r} is not valid Unicode ({exc.reason})"
            ) from None
        return self.keyring.seal(plaintext, _context(key))

    def open(self, key: str, envelope: str) -> str:
        """The plaintext of the envelope stored at ``key``.

        Raises:
            CorruptStoreError: The value is plaintext, sealed under a key id not in the ring, or
                fails authentication (tampered, or moved from another entry). Names the entry.
        """
        try:
            plaintext = self.keyring.open(envelope, _context(key))
        except UnsealError as exc:
            raise CorruptStoreError(f"encrypted entry {key!r}", exc.reason) from None
        if not self._proven and self.keyring.sealed_by_active(envelope):
            self._proved()  # it opened: the active key is the one that sealed it
        try:
            return plaintext.decode("utf-8")
        except UnicodeDecodeError:  # authenticated, so only a writer with our key made this
            raise CorruptStoreError(
                f"encrypted entry {key!r}", "sealed bytes are not UTF-8"
            ) from None

    def _proved(self) -> None:
        self._proven = True
        self.keyring.note_proven(self.inner)

    async def _prove(self, key: str) -> None:
        """Return once the active key is proven the key that sealed the values stored under its
        id (nothing is read after the first time); a write to ``key`` may then be sealed.

        Raises:
            KeyMismatchError: Values under that id are stored and the key opens none of them;
                nothing was written.
        """
        if self._proven:
            return
        async with self._proving:  # one proof: concurrent first writes wait for its answer
            if self._refused is None and not self._proven:
                failed, seen = await self._disproof(key)
                if failed is None and not seen:  # nothing under the id yet: its first writer
                    failed = await self._leave_proof()
                self._refused = failed
                if self._refused is None:
                    self._proved()
            if self._refused is not None:
                raise KeyMismatchError(f"encrypted entry {self._refused!r}", self.keyring.active)

    async def _disproof(self, key: str) -> tuple[str | None, bool]:
        """The first entry under the active id that the key does not open, when none opens
        (``None`` when one opens or none is stored: nothing disagrees), and whether any value
        under the id was stored."""
        failed: str | None = None
        seen = False
        async for entries in self._witnesses(key):
            candidates = [entry for entry in entries if self.keyring.sealed_by_active(entry.value)]
            seen = seen or bool(candidates)
            proof = self.keyring.proves_active((e.value, _context(e.key)) for e in candidates)
            if proof.opens:
                return None, True
            if failed is None and proof.failed is not None:
                failed = candidates[proof.failed].key
        return failed, seen

    async def _leave_proof(self) -> str | None:
        """Create the key proof of the active id on a store that held nothing under it (see the
        module docstring): the proof's key when another writer created it first with other
        bytes under the id, else ``None``."""
        proof = key_proof_key(self.keyring.active)
        sealed = self.seal(proof, self.keyring.active)
        if not is_atomic_store(self.inner):
            await self.inner.set(proof, sealed)
            return None
        if await cast("AtomicStore", self.inner).compare_and_set(proof, None, sealed):
            return None
        found = await self.inner.get(proof)  # another writer created it since the store was read
        if found is None:  # and it was cleared since: nothing to disagree with
            return None
        if not self.keyring.sealed_by_active(found.value):
            return None  # re-sealed under another id by a rotation: no witness either way
        opened = self.keyring.proves_active([(found.value, _context(proof))])
        return proof if opened.opens is False else None

    async def _witnesses(self, key: str) -> AsyncIterator[builtins.list[MemoryEntry]]:
        """The stored entries a proof tries, cheapest first: the key proof, the entry written,
        then ``WITNESS_PREFIXES``, then every entry."""
        for one in (key_proof_key(self.keyring.active), key):
            entry = await self.inner.get(one)
            yield [] if entry is None else [entry]
        if takes_prefix(self.inner):  # else each prefix would list the whole store again
            for prefix in WITNESS_PREFIXES:
                yield await list_under(self.inner, prefix)
        yield await self.inner.list()

    def _opened(self, entry: MemoryEntry) -> MemoryEntry:
        return replace(entry, value=self.open(entry.key, entry.value))

    def _note(self, key: str, sealed: str, plaintext: str) -> None:
        """Remember that ``key`` held ``sealed`` (``plaintext``), if it is small."""
        self._known.pop(key, None)
        if len(plaintext) <= KNOWN_CHARS:
            self._known[key] = (sealed, plaintext)
            if len(self._known) > KNOWN_KEYS:
                del self._known[next(iter(self._known))]  # the oldest

    async def get(self, key: str) -> MemoryEntry | None:
        """Return the entry at ``key`` with its value opened, or ``None``.

        Raises:
            CorruptStoreError: The stored value cannot be opened (see ``open``).
        """
        entry = await self.inner.get(key)
        if entry is None:
            return None
        opened = self._opened(entry)
        self._note(key, entry.value, opened.value)
        return opened

    async def set(self, key: str, value: str, metadata: Mapping[str, Any] | None = None) -> None:
        """Seal ``value`` and write it at ``key``; the metadata is written as given (readable).

        Raises:
            KeyMismatchError: The active key is not the one values under its id were sealed
                with (see the module docstring); nothing was written.
        """
        sealed = self.seal(key, value)  # a value that cannot be sealed writes nothing, no proof
        await self._prove(key)
        self._known.pop(key, None)
        await self.inner.set(key, sealed, metadata)
        self._note(key, sealed, value)

    async def list(self, prefix: str | None = None) -> builtins.list[MemoryEntry]:
        """Every entry (with ``prefix``: whose key starts with it) opened, in the inner order.

        Keys are not sealed, so the inner store does the prefix filtering.

        Raises:
            CorruptStoreError: Any stored value cannot be opened; no entry is returned then.
        """
        return [self._opened(entry) for entry in await self._listed(prefix)]

    async def list_each(self, prefix: str) -> builtins.list[MemoryEntry | UnreadableEntry]:
        """The entries under ``prefix``, each opened on its own (``stores.prefix.list_each``):
        one that does not open is an ``UnreadableEntry`` in its place, where ``list`` refuses
        every entry.

        Raises:
            StoreError: the inner store cannot be listed.
        """
        found: builtins.list[MemoryEntry | UnreadableEntry] = []
        for entry in await self._listed(prefix):
            try:
                found.append(self._opened(entry))
            except CorruptStoreError as exc:
                found.append(
                    UnreadableEntry(key=entry.key, error=str(exc), metadata=entry.metadata)
                )
        return found

    async def _listed(self, prefix: str | None) -> builtins.list[MemoryEntry]:
        """The inner entries under ``prefix``, without the key proofs (the wrapper's own)."""
        entries = await list_under(self.inner, prefix)
        return [entry for entry in entries if key_proof_id(entry.key) is None]

    async def delete(self, key: str) -> None:
        """Remove ``key`` from the inner store."""
        self._known.pop(key, None)
        await self.inner.delete(key)

    async def clear(self) -> None:
        """Remove every entry of the inner store."""
        self._known.clear()
        await self.inner.clear()

    async def _set_with_expiry(
        self,
        key: str,
        value: str,
        expires_at_turn: int,
        metadata: Mapping[str, Any] | None = None,
    ) -> None:
        inner = cast("ExpiringStore", self.inner)
        sealed = self.seal(key, value)
        await self._prove(key)
        self._known.pop(key, None)
        await inner.set_with_expiry(key, sealed, expires_at_turn, metadata)

    async def _compare_and_set(
        self,
        key: str,
        expected: str | None,
        value: str,
        metadata: Mapping[str, Any] | None = None,
    ) -> bool:
        inner = cast("AtomicStore", self.inner)
        sealed = self.seal(key, value)
        await self._prove(key)
        for attempt in range(MAX_ROUNDS):
            current = await self._sealed_if_holds((Expect(key, expected),), guess=attempt == 0)
            if current is None:
                return False
            if await inner.compare_and_set(key, current[0].value, sealed, metadata):
                self._note(key, sealed, value)
                return True
        raise _racing([key])

    async def _apply(self, checks: Sequence[Expect], writes: Sequence[Write]) -> bool:
        inner = cast("ConditionalStore", self.inner)
        sealed = [
            Put(write.key, self.seal(write.key, write.value), write.metadata)
            if isinstance(write, Put)
            else write
            for write in writes
        ]
        put = next((write.key for write in writes if isinstance(write, Put)), None)
        if put is not None:
            await self._prove(put)
        for attempt in range(MAX_ROUNDS):
            current = await self._sealed_if_holds(checks, guess=attempt == 0)
            if current is None:
                return False
            if await inner.apply(current, sealed):
                for write, stored in zip(writes, sealed, strict=True):
                    if isinstance(write, Put) and isinstance(stored, Put):
                        self._note(write.key, stored.value, write.value)
                    else:
                        self._known.pop(write.key, None)
                return True
        raise _racing([check.key for check in checks])

    async def sealed_checks(self, checks: Sequence[Expect]) -> builtins.list[Expect] | None:
        """``checks`` (on plaintexts) restated on the sealed values the inner store holds now,
        or ``None`` when one of them does not hold.

        For a transaction beside the inner store that compares its stored strings itself (a
        database journal's fenced append reads the run record in its own transaction): a
        value replaced after this read fails that comparison, never passes it.

        Raises:
            CorruptStoreError: A checked value cannot be opened (fails closed).
        """
        return await self._sealed_if_holds(checks, guess=True)

    async def _sealed_if_holds(
        self, checks: Sequence[Expect], *, guess: bool
    ) -> builtins.list[Expect] | None:
        """The checks restated on the sealed values read now, or ``None`` if a plaintext differs.

        The inner store compares the sealed strings atomically, so a value replaced after this
        read (even by one that opens to the same plaintext) fails the inner step, and the caller
        reads again rather than reporting a mismatch it never saw.

        With ``guess`` (a call's first round), a check whose expected plaintext is the one this
        instance last wrote or read at that key is restated on that sealed string without a
        read: a fenced write checks the run record its owner just wrote, and on a database the
        read is a round trip. A wrong guess is safe: the inner step refuses it, and the next
        round reads. A guess is never used to report a mismatch.
        """
        restated: builtins.list[Expect] = []
        for check in checks:
            known = self._known.get(check.key) if guess else None
            if known is not None and check.value is not None and known[1] == check.value:
                restated.append(Expect(check.key, known[0]))
                continue
            entry = await self.inner.get(check.key)
            if entry is None:
                if check.value is not None:
                    return None
                restated.append(Expect(check.key, None))
                continue
            # A corrupt value raises here even when the check expects absence: fail closed.
            plaintext = self.open(check.key, entry.value)
            self._note(check.key, entry.value, plaintext)
            if check.value is None or plaintext != check.value:
                return None
            restated.append(Expect(check.key, entry.value))
        return restated

    def __repr__(self) -> str:
        return f"EncryptingStore({self.inner!r}, {self.keyring!r})"


__all__ = ["EncryptingStore"]
