"""Every checkpoint the TypeScript OMA wrote (shared/fixtures/oma) is read, restored and re-saved
here as OMA itself did it: the same model calls and outcome, and a re-save that changes only what
OMA's own re-save changes.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from oma_fixtures import (
    FIXTURES,
    NAMES,
    OURS,
    changes,
    fixture_team,
    oma_resaves,
    restamped,
    scenario,
    stored_value,
)

from oma_actors import CheckpointOptions, OpenMultiAgent, TeamRunResult
from oma_actors.checkpoint import decode, encode
from oma_actors.checkpoint.validate import problem
from oma_actors.domain.messages import TextBlock
from oma_actors.stores import FileStore
from oma_actors.testing import RecordingStore

Json = dict[str, Any]


def test_every_fixture_is_found() -> None:
    assert {"task-boundary", "queue-v2-plan-revisions"} <= set(NAMES)


@pytest.mark.parametrize("name", NAMES)
def test_the_store_file_holds_the_pretty_checkpoint(name: str) -> None:
    pretty = json.loads((FIXTURES / name / "checkpoint.pretty.json").read_text(encoding="utf-8"))
    assert json.loads(stored_value(name)) == pretty


@pytest.mark.parametrize("name", NAMES)
def test_decode_then_encode_keeps_every_member(name: str) -> None:
    original = json.loads(stored_value(name))
    snapshot = decode(stored_value(name), key=scenario(name)["checkpointKey"])
    written = json.loads(encode(snapshot))
    assert written == original | {"revision": 0}  # our revision counter, and nothing else


@pytest.mark.parametrize("name", NAMES)
async def test_restore_behaves_as_oma_did(name: str, tmp_path: Path) -> None:
    result, adapters, shared, _ = await _restore(name, tmp_path)
    spec = scenario(name)
    observed = spec["observedResume"]
    assert {agent: a.call_count for agent, a in adapters.items()} == observed["modelCalls"]
    for record in observed["modelCallRecords"]:
        call = adapters[record["agent"]].calls[record["callIndex"]]
        assert call.options.system_prompt == record["systemPrompt"]
        assert call.options.model == record["model"]
        # The prerequisite outputs reach the model (the exact wording: the test below).
        prompt = _last_user_text(call.messages)
        for line in record["lastUserText"].splitlines()[-1:]:
            assert line in prompt
    for text in spec["expectedResume"].get("lastModelInputContains", []):
        assert any(text in _last_user_text(a.calls[-1].messages) for a in adapters.values())
    statuses = {task.title: task.status for task in result.tasks}
    assert statuses == spec["expectedResume"]["finalTaskStatuses"]
    assert [(t.id, t.title, t.status) for t in result.tasks] == [
        (t["id"], t["title"], t["status"]) for t in observed["result"]["tasks"]
    ]
    assert result.attempt == observed["checkpointAfterResume"]["attempt"]
    for title, output in observed["result"]["taskOutputs"].items():
        (task,) = [task for task in result.tasks if task.title == title]
        assert result.task_results[task.id].output == output
    usage = observed["result"].get("totalTokenUsage")
    if usage is not None:
        assert (result.token_usage.input_tokens, result.token_usage.output_tokens) == (
            usage["input_tokens"],
            usage["output_tokens"],
        )
    for seeded in spec["team"].get("seededSharedMemory", []):
        entry = await shared.get(seeded["fullKey"])
        assert entry is not None
        assert json.loads(entry.value) == observed["sharedMemorySeedRestored"]


@pytest.mark.parametrize("name", NAMES)
async def test_restore_sends_omas_prompts(name: str, tmp_path: Path) -> None:
    _, adapters, _, _ = await _restore(name, tmp_path)
    for record in scenario(name)["observedResume"]["modelCallRecords"]:
        call = adapters[record["agent"]].calls[record["callIndex"]]
        assert _last_user_text(call.messages) == record["lastUserText"]


@pytest.mark.parametrize("name", NAMES)
async def test_restore_outcome_matches_oma(name: str, tmp_path: Path) -> None:
    """The run's outcome as OMA reported it; a failure a plan revision recovered is not one."""
    result, _, _, _ = await _restore(name, tmp_path)
    observed = scenario(name)["observedResume"]["result"]
    assert (result.status.code, result.success) == (observed["status"]["code"], observed["success"])


@pytest.mark.parametrize("name", NAMES)
async def test_restore_keeps_the_plan_revision_history(name: str, tmp_path: Path) -> None:
    result, _, _, _ = await _restore(name, tmp_path)
    original = json.loads(stored_value(name))["queue"]["tasks"]
    for task, raw in zip(result.tasks, original, strict=False):
        assert task.superseded_by_revision == raw.get("supersededByRevision")
        assert task.recovered_by_revision == raw.get("recoveredByRevision")


@pytest.mark.parametrize("name", NAMES)
async def test_first_resave_changes_only_what_oma_restamps(name: str, tmp_path: Path) -> None:
    """Before any work, a re-save differs from OMA's file only where OMA's own re-save does."""
    _, _, _, writes = await _restore(name, tmp_path)
    original = json.loads(stored_value(name))
    unexpected = [
        (path, kind)
        for path, kind in changes(original, writes[0])
        if not restamped(path) and not (kind == "added" and path in OURS)
    ]
    assert unexpected == []


@pytest.mark.parametrize("name", NAMES)
async def test_no_resave_drops_a_member_oma_wrote(name: str, tmp_path: Path) -> None:
    """Real transitions move ids between partitions; nothing else OMA wrote ever disappears."""
    _, _, _, writes = await _restore(name, tmp_path)
    original = json.loads(stored_value(name))
    for write in writes:
        assert problem(write) is None
        dropped = [
            path
            for path, kind in changes(original, write)
            if kind == "removed" and not path.startswith(_TRANSITIONS)
        ]
        assert dropped == []


@pytest.mark.parametrize("name", NAMES)
async def test_final_resave_matches_omas(name: str, tmp_path: Path) -> None:
    """The last write equals OMA's last write, but for re-stamps and our own members."""
    _, _, _, writes = await _restore(name, tmp_path)
    oma = oma_resaves(name)
    final = writes[-1]
    if oma is None:
        after = scenario(name)["observedResume"]["checkpointAfterResume"]
        assert final["version"] == after["version"]
        assert final["identity"]["attempt"] == after["attempt"]
        assert len(final["queue"]["completed"]) == after["queue"]["completed"]
        assert len(final["queue"]["pending"]) == after["queue"]["pending"]
        assert len(final["inFlightTasks"]) == after["inFlightTasks"]
        return
    original = json.loads(stored_value(name))
    produced_here = {
        f"$.completedTaskResults[{index}].agentResult"
        for index, item in enumerate(oma[-1]["completedTaskResults"])
        if item["taskId"] not in {done["taskId"] for done in original["completedTaskResults"]}
    }
    unexpected = [
        (path, kind)
        for path, kind in changes(oma[-1], final)
        if not restamped(path)
        and not (kind == "added" and path in OURS)
        and not _our_result_form(path, kind, produced_here)
    ]
    assert unexpected == []


# Lists a real state transition shrinks: ids leave a partition, a finished task's entry goes.
_TRANSITIONS = ("$.queue.pending[", "$.queue.inProgress[", "$.queue.blocked[", "$.inFlightTasks[")


def _our_result_form(path: str, kind: str, produced_here: set[str]) -> bool:
    """A result our runner produced: it has turns, and no OMA trace identity or status."""
    head, _, member = path.rpartition(".")
    if head not in produced_here:
        return False
    return (kind, member) in {("removed", "identity"), ("removed", "status"), ("added", "turns")}


async def _restore(
    name: str, tmp_path: Path
) -> tuple[TeamRunResult, dict[str, Any], Any, list[Json]]:
    """Restore a copy of the fixture's store as OMA's resume procedure did; return the writes."""
    spec = scenario(name)
    path = tmp_path / "store.json"
    shutil.copyfile(FIXTURES / name / "store.json", path)
    team, adapters, shared = fixture_team(name)
    async with FileStore.open(path) as inner:
        store = RecordingStore(inner)
        result = await OpenMultiAgent().restore(
            team, checkpoint=CheckpointOptions(store=store, run_id=spec["runId"])
        )
    writes = [json.loads(value) for value in store.values(spec["checkpointKey"])]
    assert writes, "a restore that ran work must have saved"
    return result, adapters, shared, writes


def _last_user_text(messages: Any) -> str:
    last = [message for message in messages if message.role == "user"][-1]
    return "".join(block.text for block in last.content if isinstance(block, TextBlock))
