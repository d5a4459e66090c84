"""One process of the cross-process compare-and-set race: increment one counter key N times.

``python race_child.py URI KEY N`` opens the store with ``open_store(URI)``, prints ``ready``,
waits for a line on stdin (so every racer is open before any starts), then increments KEY N
times with a read + compare-and-set retry loop and prints ``done <conflicts>``, the number of
lost compare-and-sets it retried. A store that refuses to open (a FileStore held by another
process) makes it print the error on stderr and exit with ``REFUSED``.
"""

from __future__ import annotations

import asyncio
import sys

from oma_actors.errors import StoreError
from oma_actors.stores import AtomicStore, open_store

REFUSED = 3


async def increment(store: AtomicStore, key: str) -> int:
    """Add one to the integer at ``key``; returns how many compare-and-sets it lost first."""
    conflicts = 0
    while True:
        entry = await store.get(key)
        current = entry.value if entry is not None else None
        if await store.compare_and_set(key, current, str(int(current or "0") + 1)):
            return conflicts
        conflicts += 1


async def main(uri: str, key: str, count: int) -> int:
    try:
        async with open_store(uri) as store:
            print("ready", flush=True)
            await asyncio.to_thread(sys.stdin.readline)
            conflicts = 0
            for _ in range(count):
                conflicts += await increment(store, key)
            print(f"done {conflicts}", flush=True)
    except StoreError as exc:
        print(f"refused: {exc}", file=sys.stderr, flush=True)
        return REFUSED
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3]))))
