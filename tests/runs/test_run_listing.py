"""``list_runs``: a record's stored status read against its lease at the time of the listing.

A worker that dies leaves its record ``running`` (nothing writes the death down); the listing
must not call that run live once its lease has expired.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from run_helpers import START, record

from oma_actors.runs import Lease, MemoryStoreRunStore, list_runs
from oma_actors.stores.base import ConditionalStore

TTL = timedelta(seconds=60)


@pytest.mark.parametrize(
    ("after_expiry", "state", "live"),
    [
        (timedelta(seconds=-1), "running", True),
        (timedelta(0), "running (lease expired 0s ago)", False),  # expiry is exclusive (OMA's)
        (timedelta(seconds=12), "running (lease expired 12s ago)", False),
        (timedelta(seconds=119), "running (lease expired 119s ago)", False),
        (timedelta(minutes=5, seconds=30), "running (lease expired 5m ago)", False),
        (timedelta(hours=3), "running (lease expired 3h ago)", False),
        (timedelta(days=2, hours=1), "running (lease expired 2d ago)", False),
    ],
)
async def test_a_running_record_whose_lease_expired_is_not_live(
    store: ConditionalStore, after_expiry: timedelta, state: str, live: bool
) -> None:
    await MemoryStoreRunStore(store).create(record(lease=Lease("worker-a", START, START + TTL)))
    (summary,) = await list_runs(store, now=START + TTL + after_expiry)
    assert (summary.status, summary.state, summary.live) == ("running", state, live)
    assert summary.owner == "worker-a"  # the stored facts are listed as they are


async def test_settled_and_unleased_records_read_as_stored(store: ConditionalStore) -> None:
    runs = MemoryStoreRunStore(store)
    await runs.create(record(run_id="done", status="completed", lease=None))
    await runs.create(record(run_id="waiting", status="suspended", lease=None))
    await runs.create(record(run_id="orphan", lease=None))
    await store.set("__oma_run__/broken", "{not json")
    later = START + timedelta(days=1)
    shown = {s.run_id: (s.state, s.live) for s in await list_runs(store, now=later)}
    assert shown == {
        "done": ("completed", False),
        "waiting": ("suspended", False),
        "orphan": ("running (no lease)", False),
        "broken": ("unreadable", False),
    }
