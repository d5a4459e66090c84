"""Child process of ``test_context_crash``: run the step scenario and die at a boundary.

argv: store file, journal file, crash point, strategy (``window`` or ``summarize``). The process ends with ``os._exit(CRASH_EXIT)``
at the crash point (``crash_at``), so nothing after it runs.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from context_scenario import script, team

from oma_actors import CheckpointOptions, OpenMultiAgent, SlidingWindow, Summarize, Task
from oma_actors.journal import JournalOptions, JsonlRunJournal
from oma_actors.stores import FileStore
from oma_actors.testing import ScriptedAdapter
from oma_actors.testing.crash_points import crash_at

STRATEGIES = {"window": SlidingWindow(2), "summarize": Summarize(30)}


async def main(store_path: str, journal_path: str, point: str, strategy: str) -> None:
    journal = JournalOptions(
        JsonlRunJournal(journal_path, flush_interval_ms=0), enforce_lineage=True
    )
    with crash_at(point):
        await OpenMultiAgent().run_tasks(
            team(ScriptedAdapter(script), STRATEGIES[strategy]),
            [Task("steps", "do the steps", id="a")],
            checkpoint=CheckpointOptions(store=FileStore(store_path), run_id="r1"),
            journal=journal,
        )


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:5]))
    sys.exit(3)  # the crash point was never reached
