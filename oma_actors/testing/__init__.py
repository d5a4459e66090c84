"""The public test kit: a scripted model, the store contract checks and fault-injecting stores."""

from oma_actors.llm.scripted import RecordedCall, ScriptedAdapter, text_response
from oma_actors.testing.clock import FakeClock
from oma_actors.testing.crash_points import CRASH_EXIT, CrashPoint, CrashPointError, crash_at
from oma_actors.testing.faults import CrashingStore, FailingStore, UnknownOutcomeStore
from oma_actors.testing.forwarding import ForwardingStore
from oma_actors.testing.journal_contract import JournalHooks, check_run_journal
from oma_actors.testing.store_contract import (
    check_atomic_store,
    check_conditional_store,
    check_expiring_store,
    check_memory_store,
    check_run_ownership,
)
from oma_actors.testing.stores import MinimalStore, RecordingStore, RendezvousStore, StoreCall

__all__ = [
    "CRASH_EXIT",
    "CrashPoint",
    "CrashPointError",
    "CrashingStore",
    "FailingStore",
    "FakeClock",
    "ForwardingStore",
    "JournalHooks",
    "MinimalStore",
    "RecordedCall",
    "RecordingStore",
    "RendezvousStore",
    "ScriptedAdapter",
    "StoreCall",
    "UnknownOutcomeStore",
    "check_atomic_store",
    "check_conditional_store",
    "check_expiring_store",
    "check_memory_store",
    "check_run_journal",
    "check_run_ownership",
    "crash_at",
    "text_response",
]
