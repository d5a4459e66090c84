"""Key/value stores: the protocols and the two embedded backends.

``InMemoryStore`` lives and dies with the process; ``FileStore`` keeps one JSON file in OMA's
format. Both satisfy ``AtomicStore`` and ``ExpiringStore``.
"""

from oma_actors.stores.base import (
    AtomicStore,
    ExpiringStore,
    MemoryEntry,
    MemoryStore,
    is_atomic_store,
    is_memory_store,
)
from oma_actors.stores.file import FileStore
from oma_actors.stores.memory import InMemoryStore

__all__ = [
    "AtomicStore",
    "ExpiringStore",
    "FileStore",
    "InMemoryStore",
    "MemoryEntry",
    "MemoryStore",
    "is_atomic_store",
    "is_memory_store",
]
