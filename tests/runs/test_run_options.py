"""RunStoreOptions and the precedence of run-store settings (the orchestrator's side of RS-12)."""

from __future__ import annotations

from run_helpers import code_of_call

from oma_actors.runs import MemoryStoreRunStore, RunStoreOptions, resolve_run_store
from oma_actors.stores import InMemoryStore
from oma_actors.testing import FakeClock


def test_a_bare_store_means_the_defaults_and_false_opts_out() -> None:
    store, other = MemoryStoreRunStore(InMemoryStore()), MemoryStoreRunStore(InMemoryStore())
    assert resolve_run_store(store) == RunStoreOptions(store)
    assert resolve_run_store(None, store) == RunStoreOptions(store)
    named = RunStoreOptions(store, owner="w", lease_ttl=5.0, heartbeat=False)
    assert resolve_run_store(named, other) is named
    assert resolve_run_store(False, store) is None
    assert resolve_run_store(None, None) is None
    assert resolve_run_store() is None


async def test_options_make_a_ledger_with_their_terms() -> None:
    clock = FakeClock()
    options = RunStoreOptions(
        MemoryStoreRunStore(InMemoryStore()), owner="w", lease_ttl=5.0, clock=clock.unix
    )
    ledger = options.ledger()
    assert (ledger.owner, ledger.lease_ttl, ledger.run_store) == ("w", 5.0, options.store)
    handle = await ledger.acquire("r", heartbeat=options.heartbeat)
    assert handle.record.lease is not None
    assert handle.record.lease.acquired_at == clock.now()
    await handle.release()


def test_bad_options_are_refused_when_made() -> None:
    store = MemoryStoreRunStore(InMemoryStore())
    assert code_of_call(RunStoreOptions, store, owner=" ") == "RUN_VALIDATION_ERROR"
    assert code_of_call(RunStoreOptions, store, lease_ttl=0) == "RUN_VALIDATION_ERROR"
