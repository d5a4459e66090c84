"""Child process of ``test_restore_synthesis``: a ``run_team`` that dies in its synthesis call.

argv: store file, journal file. Every task finishes and is saved; the coordinator's synthesis
call then ends the process with ``os._exit(CRASH_EXIT)``, before any answer or save.
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from coordinator_scenario import lead, team

from oma_actors import CheckpointOptions, OpenMultiAgent
from oma_actors.journal import JournalOptions, JsonlRunJournal
from oma_actors.stores import FileStore
from oma_actors.testing.crash_points import CRASH_EXIT


def crash() -> None:
    os._exit(CRASH_EXIT)


async def main(store_path: str, journal_path: str) -> None:
    squad, _ = team()
    await OpenMultiAgent().run_team(
        squad,
        "explain",
        coordinator=lead(plan=(10, 4), synthesis=(5, 2), on_synthesis=crash),
        checkpoint=CheckpointOptions(store=FileStore(store_path), run_id="team-1"),
        journal=JournalOptions(JsonlRunJournal(journal_path, flush_interval_ms=0), durable=False),
    )


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:3]))
    sys.exit(3)  # the synthesis never ran
