"""Restore of snapshots written elsewhere: the TypeScript OMA fixture and v1 runTeam snapshots."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from acceptance_helpers import answer, titled

from oma_actors import AgentConfig, CheckpointOptions, OpenMultiAgent, Team
from oma_actors.checkpoint import Checkpoint, checkpoint_key
from oma_actors.events import ProgressEvent
from oma_actors.stores import FileStore, InMemoryStore
from oma_actors.testing import ScriptedAdapter

FIXTURE = Path(__file__).resolve().parents[3] / "shared" / "fixtures" / "oma" / "task-boundary"


async def test_typescript_oma_checkpoint_restores_here(tmp_path: Path) -> None:
    shutil.copy(FIXTURE / "store.json", tmp_path / "store.json")
    scenario = json.loads((FIXTURE / "scenario.json").read_text())
    assert scenario["runId"] == "fixture-task-boundary"
    adapter = ScriptedAdapter(titled)
    shared = InMemoryStore()
    team = Team(
        "fixture-team", [AgentConfig("worker", adapter=adapter)], shared_memory_store=shared
    )
    store = FileStore(tmp_path / "store.json")
    result = await OpenMultiAgent().restore(
        team, checkpoint=CheckpointOptions(store=store, run_id="fixture-task-boundary")
    )
    assert adapter.call_count == 1
    assert "first output" in adapter.calls[0].prompt
    assert [task.status for task in result.tasks] == ["completed", "completed"]
    note = await shared.get("seed/note")
    assert note is not None
    assert json.loads(note.value) == {"keep": True}
    assert result.attempt == 2
    saved = await Checkpoint(store, run_id="fixture-task-boundary").load_latest()
    assert saved is not None
    assert saved.attempt == 2
    assert saved.version == 4


def v1_team_snapshot(first_id: str, second_id: str) -> str:
    """A v1 runTeam snapshot as OMA wrote them: first completed, second pending, a goal."""
    task = {"createdAt": "2026-01-01T00:00:00.000Z", "updatedAt": "2026-01-01T00:00:00.000Z"}
    return json.dumps(
        {
            "version": 1,
            "mode": "runTeam",
            "runId": "team-run",
            "createdAt": "2026-01-01T00:00:00.000Z",
            "goal": "explain checkpoints",
            "queue": {
                "version": 1,
                "tasks": [
                    {**task, "id": first_id, "title": "first", "description": "do first",
                     "status": "completed", "assignee": "worker", "result": "first output"},
                    {**task, "id": second_id, "title": "second", "description": "do second",
                     "status": "pending", "assignee": "worker", "dependsOn": [first_id]},
                ],
                "pending": [second_id], "inProgress": [], "completed": [first_id],
                "failed": [], "blocked": [], "skipped": [],
            },
            "completedTaskResults": [{"taskId": first_id, "assignee": "worker", "result": "first output"}],
        }
    )  # fmt: skip


async def test_t22_restored_run_team_re_runs_only_the_synthesis() -> None:
    store = InMemoryStore()
    await store.set(checkpoint_key("team-run"), v1_team_snapshot("t1", "t2"))
    workers = ScriptedAdapter(titled)
    synth = ScriptedAdapter([answer("SYNTHESIZED ANSWER")])
    team = Team("t", [AgentConfig("worker", adapter=workers)])
    result = await OpenMultiAgent().restore(
        team,
        checkpoint=CheckpointOptions(store=store, run_id="team-run"),
        coordinator=AgentConfig("coordinator", adapter=synth),
    )
    assert (workers.call_count, synth.call_count) == (1, 1)
    assert "## Original Goal\nexplain checkpoints" in synth.calls[0].prompt
    assert result.agent_results["coordinator"].output == "SYNTHESIZED ANSWER"
    assert [task.status for task in result.tasks] == ["completed", "completed"]
    assert result.attempt == 2  # v1 counts as attempt 1 (spec CK-07)
    # Decision D4: the synthesis is persisted, so a restore of the finished run calls nothing.
    again = await OpenMultiAgent().restore(
        team, checkpoint=CheckpointOptions(store=store, run_id="team-run")
    )
    assert again.agent_results["coordinator"].output == "SYNTHESIZED ANSWER"
    assert (workers.call_count, synth.call_count) == (1, 1)


async def test_t23_failed_restore_synthesis_keeps_the_task_outputs() -> None:
    store = InMemoryStore()
    await store.set(checkpoint_key("team-run"), v1_team_snapshot("t1", "t2"))

    class Broken:
        async def chat(self, messages: object, options: object) -> object:
            raise RuntimeError("coordinator down")

    events: list[ProgressEvent] = []
    team = Team("t", [AgentConfig("worker", adapter=ScriptedAdapter(titled))])
    result = await OpenMultiAgent(on_progress=events.append).restore(
        team,
        checkpoint=CheckpointOptions(store=store, run_id="team-run"),
        coordinator=AgentConfig("coordinator", adapter=Broken()),  # type: ignore[arg-type]
    )
    assert "coordinator" not in result.agent_results
    assert [task.status for task in result.tasks] == ["completed", "completed"]
    assert [type(e).__name__ for e in events if type(e).__name__ == "SynthesisFailed"]
    assert not result.success
