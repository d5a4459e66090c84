"""``anchors_beyond`` when the anchor being added is already among the anchors listed.

A writer that is not on an atomic store's batch path (a leased run's fenced writes, a store
without ``apply``) writes the new anchor first and then lists the run's anchors to find what a
one-document store drops (``RunWriter._beyond_budget``): the list holds the new anchor itself.
It must be counted once, and never dropped.
"""

from __future__ import annotations

from datetime import UTC, datetime

from oma_actors.checkpoint.anchors import anchors_beyond
from oma_actors.stores.base import MemoryEntry, Put


def entry(seq: int, size: int) -> MemoryEntry:
    key = f"__oma_history__/r/{seq:012d}"
    return MemoryEntry(key=key, value="x" * size, metadata=None, created_at=datetime.now(UTC))


def test_the_anchor_being_added_counts_once_when_it_is_listed_already() -> None:
    """Guards the ``entry.key != adding.key`` filter of ``anchors_beyond``: listed after its own
    write, the new anchor is not weighed twice, so exactly the anchors the budget has no room
    for go (the same as when it is not listed yet), and the new one stays."""
    older = [entry(1, 100), entry(2, 100)]
    adding = Put("__oma_history__/r/000000000003", "x" * 100, None)
    listed = [*older, entry(3, 100)]
    # A budget of 250 bytes: the new anchor and one older one fit, not two.
    budget = 250
    before = anchors_beyond(older, adding, 0, floor=budget)
    after = anchors_beyond(listed, adding, 0, floor=budget)
    assert before == [older[0].key]
    assert after == before
    assert adding.key not in after
