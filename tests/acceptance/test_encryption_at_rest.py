"""Encryption at rest end to end: a leased run suspends on a durable approval, is approved and
restored, all on an ``EncryptingStore``; the store's bytes never hold the run's plaintext.

This is what compare-and-set on sealed values is for: the approval row is created and decided
by compare-and-set, the run record is leased and fenced by ``apply``, and each checkpoint lands
in the same atomic batch as its record. Over a file store and over SQLite.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

import pytest
from acceptance_helpers import answer
from approvals_flow_helpers import approve, worker_team

from oma_actors import CheckpointOptions, OpenMultiAgent, Task
from oma_actors.approvals import Suspend, get_approval_record
from oma_actors.runs import MemoryStoreRunStore, RunLedger
from oma_actors.stores import EncryptingStore, FileStore, KeyRing
from oma_actors.stores.keyring import PREFIX
from oma_actors.testing import ScriptedAdapter

if TYPE_CHECKING:
    from pathlib import Path

    from service_kit import FreshStores

    from oma_actors.stores import AtomicStore

SECRET = "card-5555-4444-3333-1111"
RING = KeyRing({"k1": bytes(range(32))}, active="k1")
RUN = "enc-run"


async def open_inner(backend: str, tmp_path: Path, fresh_stores: FreshStores) -> AtomicStore:
    if backend == "file":
        return FileStore(tmp_path / "state.json")
    return await fresh_stores.sqlite(tmp_path / "state.db")


@pytest.mark.parametrize("backend", ["file", "sqlite"])
async def test_a_leased_approved_run_on_an_encrypted_store_keeps_no_plaintext(
    backend: str, tmp_path: Path, fresh_stores: FreshStores
) -> None:
    inner = await open_inner(backend, tmp_path, fresh_stores)
    store = EncryptingStore(inner, RING)
    runs = MemoryStoreRunStore(store)
    adapter = ScriptedAdapter([answer(f"charged {SECRET}")])
    options = CheckpointOptions(store=store, run_id=RUN)
    task = Task("charge", f"charge {SECRET}", assignee="worker")

    first = await OpenMultiAgent(
        run_store=runs, on_task_dispatch=lambda _task: Suspend(f"approve {SECRET}")
    ).run_tasks(worker_team(adapter), [task], checkpoint=options)
    assert first.status.code == "suspended"
    [request] = first.pending_approvals
    suspended = await RunLedger(runs).get(RUN)
    assert suspended is not None
    assert suspended.status == "suspended"

    await approve(store, request.id, request.request_hash)
    await RunLedger(runs).request_resume(RUN)  # queued again: a restore may lease it
    done = await OpenMultiAgent(run_store=runs, on_task_dispatch=lambda _task: False).restore(
        worker_team(adapter), checkpoint=options
    )
    assert done.success, done.status
    assert adapter.call_count == 1
    record = await RunLedger(runs).get(RUN)
    assert record is not None
    assert record.status == "completed"
    assert record.fencing_token > suspended.fencing_token  # the restore took the lease again
    decided = await get_approval_record(store, request.id)
    assert decided is not None
    assert decided.decision is not None
    assert decided.decision.decision == "approved"

    entries = await inner.list()
    assert {e.key.split("/")[0] for e in entries} >= {
        "__oma_checkpoint__", "__oma_run__", "__oma_approval__",
    }  # fmt: skip
    assert all(entry.value.startswith(PREFIX + "k1:") for entry in entries)
    await inner.aclose()  # type: ignore[attr-defined]
    files = await asyncio.to_thread(lambda: sorted(tmp_path.glob("state.*")))
    assert files
    for path in files:
        assert SECRET.encode() not in await asyncio.to_thread(path.read_bytes), path
