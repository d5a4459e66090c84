"""The exception tree of oma-actors.

::

    OmaError
    ├── ConfigurationError        bad options, unknown agents, misuse of the API
    │   ├── RunExistsError        a fresh run on a key that holds an unfinished run (D12)
    │   └── KeyMismatchError      a key ring's key is not the one of its id that sealed the store
    ├── StoreError                a store could not do what was asked
    │   └── CorruptStoreError     a store's durable bytes are unreadable (never "empty")
    ├── CheckpointError           a checkpoint value is invalid
    │   ├── UnsupportedSchemaError
    │   ├── RunIdMismatchError
    │   ├── CheckpointNotFoundError  restore() found no snapshot and was given no tasks (D12)
    │   ├── JournalUnavailableError  a durable snapshot's journal is absent and cannot be opened
    │   ├── JournalDamagedError      a durable snapshot's journal tail fails a fold check
    │   ├── NoHistoryError        a run keeps no history (not journal-first, D17)
    │   └── NotAHistoryPointError a fork or state_at seq that is no history point (D17)
    ├── DurableApprovalError      approval ledger failures, carrying a code
    ├── LeaseError                a run record refused a command (lease held or lost, ...)
    ├── TaskGraphError            cycles, unknown dependencies, bad plans
    ├── ActorStoppedError         an actor stopped before it could answer
    ├── ActorFailedError          an actor under the escalate policy failed (cause: the error)
    ├── AskTimeoutError           an ask got no reply in time
    ├── MailboxFullError          a bounded mailbox refused a message
    ├── ToolInputError            a tool was called with input that fails its schema
    └── LLMError                  a model provider failed
        ├── AuthenticationError
        ├── RateLimitError        (retryable)
        ├── OverloadedError       (retryable)
        └── ProviderError         any other provider failure

Cancellation is never caught or wrapped by anything in this package.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

SEALED_PREFIX = "oma-sealed:v1:"
"""What every value an ``EncryptingStore`` sealed starts with (``stores.keyring.PREFIX``)."""


def sealed_note(text: str) -> str:
    """For an error about a stored value that does not parse: `` (it is sealed: ...)`` when the
    value is sealed, so a reader without the keys is not told of damage, else ``""``."""
    if not text.startswith(SEALED_PREFIX):
        return ""
    return (
        " (it is sealed: read the store through an EncryptingStore with its KeyRing; oma: set "
        "OMA_ENCRYPTION_KEYS)"
    )


class OmaError(Exception):
    """Base class of every error raised by oma-actors."""


class ConfigurationError(OmaError):
    """Options or inputs contradict each other or name something that does not exist."""


class RunExistsError(ConfigurationError):
    """A fresh run was started on a checkpoint key that holds an unfinished run (decision D12).

    Nothing was written. Pass ``on_existing="restore"`` to continue the stored run, or
    ``"overwrite"`` to replace it.
    """

    def __init__(self, key: str, run_id: str, status: str) -> None:
        super().__init__(
            f"checkpoint key {key!r} holds an unfinished run {run_id!r} ({status}); "
            'pass on_existing="restore" to continue it or "overwrite" to replace it'
        )
        self.key = key
        self.run_id = run_id
        self.status = status


class KeyMismatchError(ConfigurationError):
    """The ring's active key is another key than the one that sealed the values stored under
    its id: nothing was sealed or written. ``where`` names a value it does not open, ``key_id``
    the id (never a key)."""

    def __init__(self, where: str, key_id: str) -> None:
        super().__init__(
            f"{where}: sealed under key id {key_id!r}, which this ring's key {key_id!r} does not "
            "open (another key with the same id): nothing was written; use the key file its "
            "values were sealed with"
        )
        self.where = where
        self.key_id = key_id


class StoreError(OmaError):
    """A store operation failed."""


class CorruptStoreError(StoreError):
    """The durable bytes behind a store cannot be read; the store refuses to start empty."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason


class StoreLimitError(StoreError):
    """A write would make the store hold more than it reads back; nothing was written.

    A file store refuses a state file over its read limit when it loads, so a write past that
    limit would leave a store (and a sidecar booting on it) that cannot be opened again.
    """

    def __init__(self, path: str, size: int, limit: int) -> None:
        super().__init__(
            f"{path}: the state file would be {size} bytes, over the {limit}-byte limit of "
            "what the store reads back; nothing was written"
        )
        self.path = path
        self.size = size
        self.limit = limit


class CheckpointError(OmaError):
    """A stored checkpoint value is invalid."""


class JournalUnavailableError(CheckpointError):
    """A snapshot saved journal-first depends on its journal, which cannot be opened (D15).

    Raised by a restore before any write. Pass the journal (``journal=``) to restore with it.

    Attributes:
        journal_ref: the snapshot's ``journalRef`` (``None`` when it names none).
    """

    def __init__(self, journal_ref: Mapping[str, object] | None, reason: str) -> None:
        super().__init__(
            f"the snapshot depends on its journal {dict(journal_ref or {})!r}, which cannot be "
            f"opened: {reason}; pass journal= (oma: --journal) to restore with it"
        )
        self.journal_ref = dict(journal_ref) if journal_ref is not None else None
        self.reason = reason


class JournalDamagedError(CheckpointError):
    """A durable journal's tail fails a fold check; the restore refused and wrote nothing (D15).

    ``restore(..., on_damaged_journal="salvage")`` proceeds instead, with every call the tail
    shows as started treated as outcome unknown (never re-run).

    Attributes:
        seq: the first bad event's seq (``None`` when the check names no event).
        reason: which check failed.
    """

    def __init__(self, seq: int | None, reason: str) -> None:
        at = f" at seq {seq}" if seq is not None else ""
        super().__init__(
            f"the run's journal is damaged{at}: {reason}; "
            'restore(..., on_damaged_journal="salvage") proceeds without re-running any call '
            "it shows as started"
        )
        self.seq = seq
        self.reason = reason


class NoHistoryError(CheckpointError):
    """A run keeps no history in this store: unknown, or not saved journal-first (D17).

    ``saved``: the run has a checkpoint, saved by snapshots alone (the message says why such a
    run keeps no history)."""

    def __init__(self, run_id: str, *, saved: bool = False) -> None:
        why = (
            ": this run was saved by snapshots (OMA's mode, or a leased run whose journal "
            "cannot carry its lease's fence, such as a JSONL file; a leased run is journal-first "
            "with its journal in its run record's database)"
            if saved
            else ""
        )
        super().__init__(
            f"run {run_id!r} has no history in this store: only a run saved journal-first "
            f"(a durable journal) keeps one{why}"
        )
        self.run_id = run_id


class NotAHistoryPointError(CheckpointError):
    """A seq that is no history point of the run; ``nearest`` are the points around it."""

    def __init__(self, run_id: str, seq: int, nearest: Sequence[int]) -> None:
        near = " and ".join(str(s) for s in nearest) or "none"
        super().__init__(
            f"seq {seq} is not a history point of run {run_id!r}; the nearest points are "
            f"{near} (see run_history)"
        )
        self.run_id = run_id
        self.seq = seq
        self.nearest = tuple(nearest)


class RunIdTakenError(CheckpointError):
    """``fork_run``'s ``new_run_id`` is taken: a snapshot, a history, a run record or journal
    events of that id exist (a fork never overwrites a run, nor takes another's events as its
    own). Nothing was written. ``run_id``: the id."""

    def __init__(self, run_id: str, why: str) -> None:
        super().__init__(f"run {run_id!r} {why}: a fork never takes over a run; choose another id")
        self.run_id = run_id


class UnsupportedSchemaError(CheckpointError):
    """A checkpoint or plan uses a schema version this build cannot read."""

    def __init__(self, version: object, supported: Sequence[int]) -> None:
        super().__init__(
            f"unsupported checkpoint schema version {version!r} (supported: "
            f"{', '.join(str(v) for v in supported)})"
        )
        self.version = version
        self.supported = tuple(supported)


class RunIdMismatchError(CheckpointError):
    """A checkpoint belongs to a different run than the caller asked for."""

    def __init__(self, expected: str, found: str) -> None:
        super().__init__(
            f"checkpoint run id {found!r} does not match requested run id {expected!r}"
        )
        self.expected = expected
        self.found = found


class CheckpointNotFoundError(CheckpointError):
    """``restore()`` found no snapshot at the key and was given no tasks to run (decision D12)."""

    def __init__(self, key: str) -> None:
        super().__init__(f"no checkpoint at {key!r} and no tasks to run: nothing to restore")
        self.key = key


class DurableApprovalError(OmaError):
    """A durable approval could not be recorded, found or validated."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code


class ObservedRunRecord(Protocol):
    """What a ``LeaseError`` tells about the record it saw; the value is a ``RunRecord``.

    Spelled as a protocol because this module sits below ``oma_actors.runs`` in the layers.
    """

    @property
    def run_id(self) -> str:
        """The run."""
        ...

    @property
    def version(self) -> int:
        """The record's write counter."""
        ...

    @property
    def status(self) -> str:
        """``queued``, ``running``, ``suspended``, ``completed``, ``failed`` or ``cancelled``."""
        ...

    @property
    def attempt(self) -> int:
        """The execution attempt."""
        ...

    @property
    def fencing_token(self) -> int:
        """The ownership counter."""
        ...


class LeaseError(OmaError):
    """A run record refused an ownership or lifecycle command (spec RS); ``code`` names why.

    ``code`` is one of ``RUN_LEASE_HELD``, ``RUN_LEASE_LOST``, ``RUN_ALREADY_TERMINAL``,
    ``RUN_SUSPENDED``, ``RUN_NOT_FOUND``, ``RUN_CONFLICT``, ``RUN_INVALID_TRANSITION``,
    ``RUN_VALIDATION_ERROR``, ``RUN_INTEGRITY_ERROR`` or ``RUN_STORE_ATOMIC_REQUIRED``.
    ``record`` is the ``RunRecord`` observed when the refusal was decided, when one was read.
    """

    def __init__(self, code: str, message: str, record: ObservedRunRecord | None = None) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.record = record


class TaskGraphError(OmaError):
    """A task graph or plan is invalid: cycles, unknown references, duplicates."""

    def __init__(self, message: str, tasks: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.tasks = tuple(tasks)


class ActorStoppedError(OmaError):
    """The actor stopped (or its system shut down) before it answered."""


class ActorFailedError(OmaError):
    """An actor supervised with ``Supervision.escalate()`` failed; ``__cause__`` is its error."""

    def __init__(self, actor: str) -> None:
        super().__init__(f"actor {actor!r} failed and escalated; its system shut down")
        self.actor = actor


class AskTimeoutError(OmaError, TimeoutError):
    """An ask received no reply within its timeout."""


class MailboxFullError(OmaError):
    """A bounded mailbox is full and the sender asked not to wait."""


class ToolInputError(OmaError):
    """Model-issued tool input does not match the tool's input schema."""


class LLMError(OmaError):
    """A model provider call failed.

    Attributes:
        provider: the provider name (``"anthropic"``, ``"openai"``, ...).
        status: the HTTP status when there was one.
        retryable: whether the call may succeed if repeated.
    """

    retryable: bool = False

    def __init__(self, provider: str, message: str, *, status: int | None = None) -> None:
        super().__init__(f"{provider}: {message}")
        self.provider = provider
        self.status = status


class AuthenticationError(LLMError):
    """The provider rejected the credentials (HTTP 401/403)."""


class RateLimitError(LLMError):
    """The provider rate-limited the call (HTTP 429); retried with backoff."""

    retryable = True


class OverloadedError(LLMError):
    """The provider is overloaded or had a transient server error; retried with backoff."""

    retryable = True


class ProviderError(LLMError):
    """Any other provider failure (bad request, unexpected response)."""


__all__ = [
    "ActorFailedError",
    "ActorStoppedError",
    "AskTimeoutError",
    "AuthenticationError",
    "CheckpointError",
    "CheckpointNotFoundError",
    "ConfigurationError",
    "CorruptStoreError",
    "DurableApprovalError",
    "JournalDamagedError",
    "JournalUnavailableError",
    "KeyMismatchError",
    "LLMError",
    "LeaseError",
    "MailboxFullError",
    "NoHistoryError",
    "NotAHistoryPointError",
    "ObservedRunRecord",
    "OmaError",
    "OverloadedError",
    "ProviderError",
    "RateLimitError",
    "RunExistsError",
    "RunIdMismatchError",
    "RunIdTakenError",
    "StoreError",
    "StoreLimitError",
    "TaskGraphError",
    "ToolInputError",
    "UnsupportedSchemaError",
]
