"""The journal's errors, placed in the package tree of ``oma_actors.errors``.

::

    StoreError
    ├── CorruptStoreError
    │   └── JournalCorruptError   a journal line other than a torn trailing one is unreadable
    ├── JournalClosedError        an append after ``close()``
    ├── JournalDuplicateError     a database journal already holds an event's (run_id, seq)
    └── JournalAppendError        durable mode: events a boundary needs were not appended
    OmaError
    └── JournalLineageError       ``enforce_lineage``: a model-visible block has no lineage (JR-09)
"""

from __future__ import annotations

from oma_actors.errors import CorruptStoreError, OmaError, StoreError


class JournalCorruptError(CorruptStoreError):
    """A journal line cannot be read; the journal refuses to drop it silently.

    Attributes:
        line: the 1-based line number in the journal file (0 when read from a single string).
        field: the field at fault (``"json"`` when the line is not JSON at all).
    """

    def __init__(self, path: str, line: int, field: str, reason: str) -> None:
        super().__init__(path, f"line {line}: {field}: {reason}")
        self.line = line
        self.field = field


class JournalClosedError(StoreError):
    """The journal was closed; an append after ``close()`` is refused, not dropped."""


class JournalDuplicateError(StoreError):
    """A database journal already holds ``(run_id, seq)``: the append is refused, never merged.

    Nothing of the refused append is stored; other appends of the same batch are unaffected.

    Attributes:
        run_id: the run.
        seq: the first seq of the append that is already stored (or repeated within it).
    """

    def __init__(self, journal: str, run_id: str, seq: int) -> None:
        super().__init__(f"{journal}: run {run_id!r} already has an event with seq {seq}")
        self.run_id = run_id
        self.seq = seq


class JournalAppendError(StoreError):
    """Durable mode: a batch holding events a boundary depends on failed to append."""


class JournalLineageError(OmaError):
    """A model-visible block has no recorded lineage and ``enforce_lineage`` is on (JR-09).

    Terminal for retries: the same conversation fails the same way on every attempt.

    Attributes:
        code: always ``"MISSING_CONTEXT_REPLACE"``.
        message_index: the message of the block in the request.
        block_index: the block within that message.
        block_type: the block's type (``"text"``, ``"tool_use"``, ...).
    """

    code = "MISSING_CONTEXT_REPLACE"

    def __init__(self, message_index: int, block_index: int, block_type: str) -> None:
        super().__init__(
            f"MISSING_CONTEXT_REPLACE: block {block_index} ({block_type}) of message "
            f"{message_index} has no recorded journal lineage"
        )
        self.message_index = message_index
        self.block_index = block_index
        self.block_type = block_type
