"""Fork at a crash-interrupted unsafe call (decision D17): the child never runs it again.

P1 runs the ``chain`` scenario journal-first with the ``unsafe`` ledger tool and is killed inside
the tool after its effect (``os._exit``), so the journal holds the call's dispatch record and no
result. The last point of P1's history is that dispatch; a fork there, restored in this process
with the same team, must answer the call ``TOOL_OUTCOME_UNKNOWN`` without invoking the tool, and
leave the crashed parent's entries as they were.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from crash_checks import effect_counts
from crash_harness import Scenario
from crash_scenarios import RUN_ID, build_team
from crash_tool import ToolBehaviour

from oma_actors import CheckpointOptions, OpenMultiAgent
from oma_actors.checkpoint import fork_run, run_history
from oma_actors.events import ProgressEvent, ToolOutcomeUnknown
from oma_actors.journal import JournalOptions, JsonlRunJournal
from oma_actors.stores import FileStore
from oma_actors.testing.crash_points import CRASH_EXIT


def parent_entries(sc: Scenario) -> list[dict[str, object]]:
    """The store file's entries of the parent run (its snapshot and anchors), as written."""
    entries = json.loads(sc.store_path.read_bytes())["entries"]
    return [entry for entry in entries if f"/{RUN_ID}/" in entry["key"]]


async def fork_and_restore(sc: Scenario) -> tuple[str, list[ProgressEvent]]:
    store = FileStore(sc.store_path)
    journal = JsonlRunJournal(sc.journal_path, flush_interval_ms=0)
    try:
        points = await run_history(store, RUN_ID, journal=journal)
        last = points[-1]
        assert (last.boundary, last.label) == (
            "tool_dispatch",
            "alpha turn 1: tool ledger dispatched",
        )
        await fork_run(store, RUN_ID, at_seq=last.seq, new_run_id="fork-1", journal=journal)
        team, _ = build_team("chain", sc.ledger_dir, ToolBehaviour(mode="unsafe"))
        events: list[ProgressEvent] = []
        result = await OpenMultiAgent(on_progress=events.append).restore(
            team,
            checkpoint=CheckpointOptions(store=store, run_id="fork-1"),
            journal=JournalOptions(journal),
        )
        assert result.success, result.status
        return last.label, events
    finally:
        await journal.close()


def test_fork_at_a_crash_interrupted_unsafe_call_never_reruns_it(tmp_path: Path) -> None:
    sc = Scenario(tmp_path, "chain", "unsafe", save="journal")
    p1 = sc.run(crash="tool:after_effect", expect=CRASH_EXIT)
    assert effect_counts(sc.effects(p1.pid)) == {"alpha-t0-A": 1}
    parent = parent_entries(sc)

    _, events = asyncio.run(fork_and_restore(sc))

    assert effect_counts(sc.effects()) == {"alpha-t0-A": 1}, "the fork never re-ran the call"
    unknown = [e.tool_call_id for e in events if isinstance(e, ToolOutcomeUnknown)]
    assert unknown == ["alpha-t0-A"]
    assert parent_entries(sc) == parent, "the parent's entries are byte-identical"
