"""Run journals of the sidecar: a durable JSONL journal beside each run's file store (D10).

With ``--store`` a state file (``file://`` or a bare path), every checkpointed run whose
checkpoint store is a file store keeps a journal at ``<store file>.journals/<name>.jsonl``,
``<name>`` derived from the run id (:func:`journal_name`). Its attempts run journal-first
(``JournalOptions(durable=True)``): each per-turn boundary is saved by an fsync'd journal append
and the snapshot in the store is rewritten only at compaction points; a restore folds the tail.

Database stores (SQLite, PostgreSQL, Redis) and ``memory://`` keep no journal, nor does a
sidecar started with ``--no-journal``: their runs save whole snapshots. A run that has a journal
file keeps using it when restored, whatever the server's setting, because its newest tool
commits may be in the journal alone: a restore without it would run them again.

The journal and its directory are private to the sidecar's user (0600 and 0700), like the
state and token files. One writer per file holds because the state file's lock admits one
sidecar per store file.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import re
import stat
from typing import TYPE_CHECKING

import grpc

from oma_actors import EncryptingJournal, JournalOptions, JsonlRunJournal, parse_store_uri
from sidecar.status import FailedPrecondition, InvalidArgument, SidecarError

if TYPE_CHECKING:
    from oma_actors import KeyRing, RunJournal
    from sidecar._pb.oma.v1 import sidecar_pb2 as pb

JOURNALS_SUFFIX = ".journals"
JOURNAL_EXT = ".jsonl"
JOURNAL_UNAVAILABLE = "JOURNAL_UNAVAILABLE"
_HASH_CHARS = 16  # 64 bits of sha256: the part that keeps names apart (case-folding too)
_READABLE_CHARS = 64
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


class JournalFileError(SidecarError):
    """A run's journal file could not be created or removed (``path`` in the metadata).

    A removal that fails leaves the run's record in place, so the deletion can be repeated.
    """

    code = grpc.StatusCode.INTERNAL

    def __init__(self, reason: str, path: str, action: str, exc: OSError) -> None:
        problem = exc.strerror or type(exc).__name__
        super().__init__(
            reason, f"run journal {path}: could not {action} it: {problem}", metadata={"path": path}
        )


def journal_name(run_id: str) -> str:
    """A file name for ``run_id``'s journal: a sha256 prefix of the exact id (distinct for ids
    that differ only in case or in characters replaced) and a readable, sanitized part."""
    digest = hashlib.sha256(run_id.encode()).hexdigest()[:_HASH_CHARS]
    readable = _UNSAFE.sub("_", run_id)[:_READABLE_CHARS]
    return f"{digest}-{readable}{JOURNAL_EXT}"


class RunJournals:
    """Which runs keep a journal, where it is, and opening, reading and removing it.

    Args:
        state_uri: the normalized ``--store``; journals are kept only when it is a file store.
        enabled: ``False`` (``--no-journal``): new runs keep none.
        keyring: ``--encryption-keys``: every journal is an ``EncryptingJournal`` (payloads
            sealed at rest) and every reader opens events with these keys.
    """

    def __init__(
        self, *, state_uri: str, enabled: bool = True, keyring: KeyRing | None = None
    ) -> None:
        self._state_kind = parse_store_uri(state_uri).kind
        self.enabled = enabled and self._state_kind == "file"
        self.keyring = keyring

    def reader(self, path: str) -> RunJournal:
        """A journal over ``path`` for reading: sealed when the sidecar has keys."""
        journal = JsonlRunJournal(path)
        return journal if self.keyring is None else EncryptingJournal(journal, self.keyring)

    def path_of(self, run_id: str, store_uri: str) -> str | None:
        """Where the journal of a run checkpointing to ``store_uri`` is (``None``: a store kept
        by no file, so no journal)."""
        target = parse_store_uri(store_uri)
        if target.kind != "file":
            return None
        return os.path.join(target.location + JOURNALS_SUFFIX, journal_name(run_id))

    def check_request(self, options: pb.CheckpointOptions, store_uri: str) -> None:
        """Refuse a request asking for a journal that its run would not get.

        Raises:
            FailedPrecondition: the server keeps no journals (``--no-journal``, or a
                ``--store`` that is not a file store); reason ``JOURNAL_UNAVAILABLE``.
            InvalidArgument: the run saves no checkpoint, or its store is not a file store.
        """
        if not options.journal:
            return
        field = "checkpoint.journal"
        if not self.enabled:
            why = (
                "this sidecar runs with --no-journal"
                if self._state_kind == "file"
                else f"this sidecar's --store is a {self._state_kind} store, and journals are "
                "kept beside file stores only"
            )
            raise FailedPrecondition(
                JOURNAL_UNAVAILABLE,
                f"{field}: run journals are off: {why} (ServerInfo capability 'journal')",
                metadata={"field": field},
            )
        if options.disabled:
            raise InvalidArgument(
                field, "a run without checkpoints keeps no journal", reason=JOURNAL_UNAVAILABLE
            )
        kind = parse_store_uri(store_uri).kind
        if kind != "file":
            raise InvalidArgument(
                field,
                f"a {kind} checkpoint store keeps no journal (journals are kept beside "
                "file:// stores only)",
                reason=JOURNAL_UNAVAILABLE,
            )

    async def open(self, run_id: str, store_uri: str) -> RunJournal | None:
        """The journal an attempt of the run writes (the caller closes it), or ``None``.

        A new run gets one when journals are on; a run whose journal file exists always gets it
        back (its tail may hold commits no snapshot has).
        """
        path = self.path_of(run_id, store_uri)
        if path is None:
            return None
        if not self.enabled and not await asyncio.to_thread(os.path.isfile, path):
            return None
        try:
            await asyncio.to_thread(_create_private, path)
        except OSError as exc:
            raise JournalFileError("JOURNAL_OPEN_FAILED", path, "create", exc) from None
        journal = JsonlRunJournal(path, flush_interval_ms=0)
        return journal if self.keyring is None else EncryptingJournal(journal, self.keyring)

    async def existing(self, run_id: str, store_uri: str) -> str | None:
        """The run's journal file if it exists (for reading), else ``None``."""
        path = self.path_of(run_id, store_uri)
        if path is None or not await asyncio.to_thread(os.path.isfile, path):
            return None
        return path

    async def remove(self, run_id: str, store_uri: str) -> bool:
        """Remove the run's journal file; whether there was one.

        Raises:
            JournalFileError: the file exists and could not be removed.
        """
        path = self.path_of(run_id, store_uri)
        if path is None:
            return False
        try:
            await asyncio.to_thread(os.unlink, path)
        except FileNotFoundError:
            return False
        except OSError as exc:
            raise JournalFileError("JOURNAL_REMOVE_FAILED", path, "remove", exc) from None
        return True


def journal_options(journal: RunJournal | None) -> JournalOptions | None:
    """The journal options of an attempt: journal-first (D10), or ``None`` for no journal."""
    return JournalOptions(journal, durable=True) if journal is not None else None


def _create_private(path: str) -> None:
    """Create the journal directory (0700) and file (0600) before the journal opens it.

    ``JsonlRunJournal`` creates a missing file world-readable; one created here first keeps
    the mode it is given. A file from before is narrowed to 0600 too.
    """
    directory = os.path.dirname(path)
    os.makedirs(directory, mode=0o700, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW, 0o600)
    try:
        if stat.S_IMODE(os.fstat(fd).st_mode) & 0o077:
            os.fchmod(fd, 0o600)
    finally:
        os.close(fd)


def inside_journal_directory(path: str) -> bool:
    """Whether ``path`` lies in a journal directory (no store may be kept there)."""
    return os.path.basename(os.path.dirname(path)).endswith(JOURNALS_SUFFIX)
