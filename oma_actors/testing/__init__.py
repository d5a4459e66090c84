"""The public test kit: a scripted model, the store contract checks and fault-injecting stores."""

from oma_actors.testing.faults import CrashingStore, FailingStore, UnknownOutcomeStore
from oma_actors.testing.scripted import RecordedCall, ScriptedAdapter, text_response
from oma_actors.testing.store_contract import (
    check_atomic_store,
    check_expiring_store,
    check_memory_store,
)

__all__ = [
    "CrashingStore",
    "FailingStore",
    "RecordedCall",
    "ScriptedAdapter",
    "UnknownOutcomeStore",
    "check_atomic_store",
    "check_expiring_store",
    "check_memory_store",
    "text_response",
]
