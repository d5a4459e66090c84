"""The ``RunStore`` seam and its adapter over any atomic key/value store (RS-03, RS-04).

The seam is deliberately three methods and a declaration: read a record, create it if absent,
replace it only while its version is the one expected. Lease expiry, fencing, legal transitions
and repeat-safety all live above it in ``RunLedger``, so a new backend reproduces storage
semantics, not a state machine.

``atomicity`` is a claim the caller makes, not something the adapter can detect: an
``InMemoryStore`` or a ``FileStore`` serialises writers inside one process only, so it is
``"process"`` (fine for sequential restarts on one machine, not for several workers); only a
store whose compare-and-set is atomic against every writer (a database) may be declared
``"cross-process"``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal, Protocol, runtime_checkable

from oma_actors.errors import LeaseError
from oma_actors.keyspace import RUN_KEY_PREFIX, run_record_key
from oma_actors.runs.lifecycle import ATOMIC_REQUIRED, VALIDATION
from oma_actors.runs.record import RunRecord
from oma_actors.stores.base import Put, is_atomic_store, layers
from oma_actors.stores.file import FileStore
from oma_actors.stores.memory import InMemoryStore

if TYPE_CHECKING:
    from oma_actors.stores.base import AtomicStore

Atomicity = Literal["process", "cross-process"]
"""How far a run store's compare-and-set reaches."""


@runtime_checkable
class RunStore(Protocol):
    """Strongly consistent, versioned storage of run records (RS-03)."""

    atomicity: Atomicity
    """``"process"`` or ``"cross-process"``: who the store's writes are atomic against."""

    async def get(self, run_id: str) -> RunRecord | None:
        """Return the record of ``run_id``, or ``None`` when the run is unknown.

        Raises:
            LeaseError: ``RUN_INTEGRITY_ERROR`` when the stored record is not valid.
        """
        ...

    async def create(self, record: RunRecord) -> bool:
        """Insert ``record`` only if the run has no record; ``False`` to a race's loser.

        Raises:
            LeaseError: ``RUN_VALIDATION_ERROR`` unless ``record.version`` is 1.
        """
        ...

    async def compare_and_set(self, run_id: str, expected_version: int, next: RunRecord) -> bool:
        """Replace the record only while its version is ``expected_version``.

        Returns:
            ``False`` when the record is missing or its version differs (nothing written).

        Raises:
            LeaseError: ``RUN_VALIDATION_ERROR`` when ``next.run_id`` is not ``run_id`` or
                ``next.version`` is not ``expected_version + 1``.
        """
        ...


def record_put(record: RunRecord) -> Put:
    """The store write that holds ``record`` at ``__oma_run__/<runId>`` (with OMA's metadata).

    This is the one place the stored form is decided; a fenced write that also moves the
    record (``RunLeaseHandle.fenced``) uses it too, so both paths write identical bytes.
    """
    metadata = {
        "namespace": "run",
        "schema": RunRecord.schema,
        "runId": record.run_id,
        "version": record.version,
        "status": record.status,
        "attempt": record.attempt,
        "fencingToken": record.fencing_token,
        "updatedAt": record.to_dict()["updatedAt"],
    }
    return Put(run_record_key(record.run_id), record.to_json(), metadata)


class MemoryStoreRunStore:
    """A ``RunStore`` over any ``AtomicStore``, at ``__oma_run__/<runId>`` (RS-04).

    One backend can then hold checkpoints, approval rows and run records together. Writes swap
    the exact stored text with the store's ``compare_and_set``; reads are strict, so a corrupt
    record raises rather than reading as absent.

    Args:
        store: The backing store; it must have a callable ``compare_and_set``.
        atomicity: The reach of that compare-and-set, declared by the caller: ``"process"``
            (the default, and the truth for ``InMemoryStore`` and ``FileStore``) or
            ``"cross-process"`` (only for a store atomic against every writer: a database).

    Raises:
        LeaseError: ``RUN_STORE_ATOMIC_REQUIRED`` for a store without ``compare_and_set``;
            ``RUN_VALIDATION_ERROR`` for another ``atomicity`` value, or ``"cross-process"``
            declared for an ``InMemoryStore`` or a ``FileStore``.
    """

    def __init__(self, store: AtomicStore, *, atomicity: Atomicity = "process") -> None:
        if not is_atomic_store(store):
            raise LeaseError(
                ATOMIC_REQUIRED,
                f"a run store needs compare_and_set; {type(store).__name__} has none",
            )
        if atomicity not in ("process", "cross-process"):
            raise LeaseError(
                VALIDATION, f"atomicity must be 'process' or 'cross-process', not {atomicity!r}"
            )
        embedded = next(
            (layer for layer in layers(store) if isinstance(layer, InMemoryStore | FileStore)),
            None,
        )
        if atomicity == "cross-process" and embedded is not None:
            # The two embedded stores serialise writers inside one process only, and so does
            # a wrapper over one (an ``EncryptingStore``); claiming more is exactly the
            # misconfiguration that lets two workers both own a run.
            raise LeaseError(
                VALIDATION, f"a {type(embedded).__name__} cannot be declared 'cross-process'"
            )
        self.store = store
        self.atomicity: Atomicity = atomicity

    async def get(self, run_id: str) -> RunRecord | None:
        """Return the record of ``run_id`` or ``None`` (RS-03).

        Raises:
            LeaseError: ``RUN_INTEGRITY_ERROR`` for invalid JSON, an invalid record, or a record
                of another run than its key names.
        """
        found = await self._read(run_id)
        return None if found is None else found[0]

    async def create(self, record: RunRecord) -> bool:
        """Insert ``record`` iff the run has no record (RS-03).

        Raises:
            LeaseError: ``RUN_VALIDATION_ERROR`` unless ``record.version`` is 1.
        """
        if record.version != 1:
            raise LeaseError(
                VALIDATION,
                f"run record {record.run_id!r} must be created at version 1, not {record.version}",
            )
        return await self._swap(None, record)

    async def compare_and_set(self, run_id: str, expected_version: int, next: RunRecord) -> bool:
        """Replace the record iff it is at ``expected_version`` (RS-03).

        The swap compares the exact text that was read, so a write landing between this read
        and this write (even one at the same version) makes it fail rather than be overwritten.

        Raises:
            LeaseError: ``RUN_VALIDATION_ERROR`` for a ``next`` of another run or a version
                that is not ``expected_version + 1``; ``RUN_INTEGRITY_ERROR`` when the stored
                record does not verify.
        """
        if next.run_id != run_id:
            raise LeaseError(
                VALIDATION, f"run record {next.run_id!r} cannot be written as run {run_id!r}"
            )
        if next.version != expected_version + 1:
            raise LeaseError(
                VALIDATION,
                f"run record {run_id!r}: a write after version {expected_version} must be "
                f"version {expected_version + 1}, not {next.version}",
            )
        found = await self._read(run_id)
        if found is None or found[0].version != expected_version:
            return False
        return await self._swap(found[1], next)

    async def delete(self, run_id: str) -> None:
        """Remove the record of ``run_id`` (retention, test teardown); missing is a no-op."""
        await self.store.delete(run_record_key(run_id))

    async def _read(self, run_id: str) -> tuple[RunRecord, str] | None:
        entry = await self.store.get(run_record_key(run_id))
        if entry is None:
            return None
        return RunRecord.parse(entry.value, run_id=run_id), entry.value

    async def _swap(self, expected: str | None, record: RunRecord) -> bool:
        put = record_put(record)
        return await self.store.compare_and_set(put.key, expected, put.value, put.metadata)


def is_run_record_key(key: str) -> bool:
    """Whether ``key`` lies in the run-record namespace ``__oma_run__/``."""
    return key.startswith(RUN_KEY_PREFIX)
