"""The public test kit: a scripted model, the store contract checks and fault-injecting stores."""

from oma_actors.testing.scripted import RecordedCall, ScriptedAdapter, text_response
from oma_actors.testing.store_contract import (
    check_atomic_store,
    check_expiring_store,
    check_memory_store,
)

__all__ = [
    "RecordedCall",
    "ScriptedAdapter",
    "check_atomic_store",
    "check_expiring_store",
    "check_memory_store",
    "text_response",
]
