"""Key/value stores: the protocols and the two embedded backends.

``InMemoryStore`` lives and dies with the process; ``FileStore`` keeps one JSON file in OMA's
format. Both satisfy ``ConditionalStore`` (so ``AtomicStore``) and ``ExpiringStore``.
"""

from oma_actors.stores.base import (
    AtomicStore,
    ConditionalStore,
    Expect,
    ExpiringStore,
    MemoryEntry,
    MemoryStore,
    Put,
    Remove,
    Write,
    is_atomic_store,
    is_conditional_store,
    is_memory_store,
)
from oma_actors.stores.file import FileStore
from oma_actors.stores.memory import InMemoryStore

__all__ = [
    "AtomicStore",
    "ConditionalStore",
    "Expect",
    "ExpiringStore",
    "FileStore",
    "InMemoryStore",
    "MemoryEntry",
    "MemoryStore",
    "Put",
    "Remove",
    "Write",
    "is_atomic_store",
    "is_conditional_store",
    "is_memory_store",
]
