"""``one_document``: which stores hold every entry in one document (D17's anchor policy).

A size-only compaction keeps its history anchor on every store but these (``RunWriter``): in
a FileStore each anchor would be parsed by every restore and rewritten by every write.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from oma_actors.stores import EncryptingStore, FileStore, InMemoryStore, RedactingStore, SqliteStore
from oma_actors.stores.base import MemoryStore, one_document
from oma_actors.stores.keyring import KeyRing
from oma_actors.testing.forwarding import ForwardingStore

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

RING = KeyRing({"k1": bytes(range(32))}, active="k1")


@pytest.mark.parametrize(
    ("make", "expected"),
    [
        (lambda path: FileStore(path / "state.json"), True),
        (lambda path: EncryptingStore(FileStore(path / "state.json"), RING), True),
        (lambda path: RedactingStore(FileStore(path / "state.json")), True),
        (lambda path: RedactingStore(EncryptingStore(FileStore(path / "s.json"), RING)), True),
        (lambda path: InMemoryStore(), False),
        (lambda path: SqliteStore(path / "state.db"), False),
        (lambda path: EncryptingStore(InMemoryStore(), RING), False),
        (lambda path: RedactingStore(InMemoryStore()), False),
        (lambda path: ForwardingStore(FileStore(path / "state.json")), True),
        (lambda path: ForwardingStore(InMemoryStore()), False),
    ],
    ids=[
        "file", "encrypted-file", "redacted-file", "redacted-encrypted-file", "memory", "sqlite",
        "encrypted-memory", "redacted-memory", "test-kit-wrapped-file", "test-kit-wrapped-memory",
    ],
)  # fmt: skip
def test_only_a_file_store_is_one_document_also_behind_wrappers(
    tmp_path: Path, make: Callable[[Path], MemoryStore], expected: bool
) -> None:
    assert one_document(make(tmp_path)) is expected


def test_a_store_that_says_nothing_is_not_one_document() -> None:
    class Plain:
        pass

    assert one_document(Plain()) is False
