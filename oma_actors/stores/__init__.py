"""Key/value stores: the protocols, the embedded backends, and ``open_store(uri)``.

``InMemoryStore`` lives and dies with the process; ``FileStore`` keeps one JSON file in OMA's
format for one process; ``SqliteStore`` shares one database file between the processes of a
machine. ``PostgresStore`` (``oma_actors.stores.postgres``, extra ``postgres``) and
``RedisStore`` (``oma_actors.stores.redis``, extra ``redis``) span machines. All satisfy
``ConditionalStore`` (so ``AtomicStore``) and ``ExpiringStore``.
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
from oma_actors.stores.encrypting import EncryptingStore
from oma_actors.stores.file import FileStore
from oma_actors.stores.keyring import KeyRing
from oma_actors.stores.memory import InMemoryStore
from oma_actors.stores.prefix import UnreadableEntry, list_each
from oma_actors.stores.presence import store_missing, table_missing
from oma_actors.stores.redacting import RedactingStore
from oma_actors.stores.redaction import redact_object
from oma_actors.stores.sqlite import SqliteStore
from oma_actors.stores.uri import StoreTarget, open_store, parse_store_uri

__all__ = [
    "AtomicStore",
    "ConditionalStore",
    "EncryptingStore",
    "Expect",
    "ExpiringStore",
    "FileStore",
    "InMemoryStore",
    "KeyRing",
    "MemoryEntry",
    "MemoryStore",
    "Put",
    "RedactingStore",
    "Remove",
    "SqliteStore",
    "StoreTarget",
    "UnreadableEntry",
    "Write",
    "is_atomic_store",
    "is_conditional_store",
    "is_memory_store",
    "list_each",
    "open_store",
    "parse_store_uri",
    "redact_object",
    "store_missing",
    "table_missing",
]
