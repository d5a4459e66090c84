"""A ``run_team`` restored after its tasks finished but before its synthesis (item 4 of #23).

The child process finishes every task, then dies (``os._exit``) inside the coordinator's
synthesis call. The restore runs only the synthesis, and journals it as a fresh run does: the
coordinator's conversation (``user/message``, ``turn/start``, ``llm/request``,
``assistant/message``, ``turn/end`` under its name, no task) before ``run/end``, and
``verify_run`` passes. The decomposition stays charged to the run's budget across the restore.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest
from coordinator_scenario import lead, team

from oma_actors import CheckpointOptions, OpenMultiAgent
from oma_actors.events import BudgetExceeded, ProgressEvent
from oma_actors.journal import JournalOptions, JsonlRunJournal, verify_run
from oma_actors.stores import FileStore
from oma_actors.testing.crash_points import CRASH_EXIT

CHILD = Path(__file__).with_name("synthesis_child.py")
ONE_CALL = ["user/message", "turn/start", "llm/request", "assistant/message", "turn/end"]


async def crashed_in_synthesis(tmp_path: Path) -> tuple[Path, Path]:
    store_path, journal_path = tmp_path / "state.json", tmp_path / "run.jsonl"
    child = await asyncio.create_subprocess_exec(
        sys.executable, str(CHILD), str(store_path), str(journal_path),
        stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    _, stderr = await child.communicate()
    assert child.returncode == CRASH_EXIT, stderr.decode()
    return store_path, journal_path


async def restore(
    store_path: Path, journal_path: Path, **options: object
) -> tuple[object, list[ProgressEvent]]:
    squad, worker = team()
    events: list[ProgressEvent] = []
    result = await OpenMultiAgent(on_progress=events.append, **options).restore(  # type: ignore[arg-type]
        squad,
        coordinator=lead(plan=(10, 4), synthesis=(5, 2)),
        checkpoint=CheckpointOptions(store=FileStore(store_path), run_id="team-1"),
        journal=JournalOptions(JsonlRunJournal(journal_path, flush_interval_ms=0), durable=False),
    )
    assert worker.call_count == 0  # every task was done: only the synthesis runs
    return result, events


async def test_the_restored_synthesis_is_journaled_like_a_fresh_one(tmp_path: Path) -> None:
    store_path, journal_path = await crashed_in_synthesis(tmp_path)
    before = await JsonlRunJournal(journal_path).read_from(0)
    result, _ = await restore(store_path, journal_path)
    assert result.success, result.status  # type: ignore[attr-defined]
    events = await JsonlRunJournal(journal_path).read_from(0)
    later = [e for e in events[len(before) :] if e.type != "checkpoint/saved"]
    assert later[0].type == "run/start"
    assert later[0].data["mode"] == "restore"
    lead_events = [e for e in later if e.agent_name == "lead"]
    assert [e.type for e in lead_events] == ONE_CALL
    assert all(e.task_id is None for e in lead_events)
    answer = next(e for e in lead_events if e.type == "assistant/message")
    assert answer.data["message"]["content"] == [{"type": "text", "text": "final answer"}]
    assert answer.data["usage"] == {"input_tokens": 5, "output_tokens": 2}
    # run/end closes the attempt after the synthesis, as on the live path.
    assert later[-1].type == "run/end"
    assert later[-1].data["status"] == {"code": "ok"}
    assert later.index(answer) < len(later) - 1
    verdict = await verify_run(events)
    assert verdict.ok, verdict.failures


@pytest.mark.parametrize(("budget", "over"), [(25, False), (24, True)])
async def test_the_decomposition_stays_charged_across_the_restore(
    tmp_path: Path, budget: int, over: bool
) -> None:
    store_path, journal_path = await crashed_in_synthesis(tmp_path)
    # 14 (plan) + 2 + 2 (tasks) + 7 (synthesis) = 25; without the plan 11.
    result, events = await restore(store_path, journal_path, max_token_budget=budget)
    exceeded = [e for e in events if isinstance(e, BudgetExceeded)]
    if not over:
        assert result.success, result.status  # type: ignore[attr-defined]
        assert not exceeded
        return
    assert result.status.code == "budget_exhausted"  # type: ignore[attr-defined]
    assert [e.used for e in exceeded] == [25]
    events_after = await JsonlRunJournal(journal_path).read_from(0)
    assert events_after[-1].type == "run/end"
    assert events_after[-1].data["status"] == {"code": "budget_exhausted"}
