"""A journal-first run on a SQLite store and its database journal, killed inside an unsafe tool.

``python tests/journal/sqlite_crash_child.py DB READY``: runs ``journal_first``'s card-charging
task on ``SqliteStore(DB)`` with ``SqliteRunJournal(DB)`` (the journal in the store's own
database, D15); the second charge's tool charges, writes ``READY`` and hangs until the parent
kills this process (SIGKILL), so the dispatch record is in the journal alone.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from journal_first import RUN_ID, Ledger, the_task

from oma_actors import CheckpointOptions, OpenMultiAgent
from oma_actors.journal import JournalOptions, SqliteRunJournal
from oma_actors.stores import SqliteStore


async def main(db: Path, ready: Path) -> None:
    ledger = Ledger(hang_on="c1")
    async with SqliteStore(db) as store:
        journal = SqliteRunJournal(db)
        run = asyncio.ensure_future(
            OpenMultiAgent().run_tasks(
                ledger.team(), the_task(),
                checkpoint=CheckpointOptions(store=store, run_id=RUN_ID),
                journal=JournalOptions(journal),
            )
        )  # fmt: skip
        await ledger.hanging.wait()
        await asyncio.to_thread(ready.write_text, "charged")
        await run  # never returns: the parent kills this process


if __name__ == "__main__":
    asyncio.run(main(Path(sys.argv[1]), Path(sys.argv[2])))
