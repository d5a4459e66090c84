"""One claim on a run at a time in this process: a restore, an adoption, a cancel, a deletion.

Across processes the run record arbitrates every claim (D16): a restore, an adoption and a
deletion take the run's lease, a cancel cancels the record unless a sidecar holds it
(``sidecar.run_ledger``). Two claims of one process share its owner id, so the lease cannot
tell them apart (the second acquisition is a renewal); they are taken one after the other
instead, each reading the run after the one before it finished (and launched its attempt).
"""

from __future__ import annotations

import asyncio
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import AsyncIterator


class Claims:
    """A lock per run for this process's claims, kept only while someone holds or awaits it."""

    def __init__(self) -> None:
        self._locks: dict[str, tuple[asyncio.Lock, list[int]]] = {}

    @asynccontextmanager
    async def held(self, run_id: str) -> AsyncIterator[None]:
        """Hold the claim lock of ``run_id`` for the block."""
        lock, users = self._locks.setdefault(run_id, (asyncio.Lock(), [0]))
        users[0] += 1
        try:
            async with lock:
                yield
        finally:
            users[0] -= 1
            if not users[0]:
                del self._locks[run_id]

    def __len__(self) -> int:
        """How many runs have a claim held or awaited now."""
        return len(self._locks)
