"""Golden checkpoints re-encoded: every version round-trips, and so does OMA's own checkpoint."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path

import pytest
from checkpoint_support import (
    KEY,
    OMA_FIXTURE_DIR,
    _decode_golden,
    _statuses,
    golden_json,
    oma_fixture_json,
)

from oma_actors.checkpoint import (
    Checkpoint,
    RunIdentity,
    decode,
    encode,
)
from oma_actors.domain.messages import (
    Message,
    TextBlock,
    TokenUsage,
)
from oma_actors.stores.file import FileStore

# -- round trip --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    [
        pytest.param("v1_with_run_id.json"),
        pytest.param("v1_without_run_id.json"),
        "v2.json",
        "v3.json",
        "v4.json",
        "v5.json",
    ],
)
def test_round_trip_re_decodes_equal(name: str) -> None:
    first = _decode_golden(name)
    written = encode(first)
    second = decode(written, key=KEY)
    assert second.version == 4
    if first.identity is None:
        # v4 needs an identity: a v1 gets one with its run id, attempt 1 and no trace to link to.
        assert second.identity is not None
        assert (second.identity.run_id, second.identity.attempt) == (first.run_id, 1)
        assert (second.identity.trace_id, second.identity.root_span_id) == ("", "")
        second = replace(second, identity=None)
    assert replace(second, version=first.version) == first
    assert encode(second) == written  # stable: a second pass changes nothing


def test_round_trip_keeps_the_v1_content_it_writes() -> None:
    """What survives re-encoding a v1: its content, written as version 4."""
    raw = golden_json("v1_with_run_id.json")
    written = json.loads(encode(_decode_golden("v1_with_run_id.json")))
    assert written["version"] == 4
    assert written["queue"] == raw["queue"]
    assert written["sharedMemory"] == raw["sharedMemory"]
    original = raw["completedTaskResults"][0]["agentResult"]
    rewritten = written["completedTaskResults"][0]["agentResult"]
    assert rewritten["messages"] == original["messages"]
    assert rewritten["toolCalls"] == original["toolCalls"]
    assert rewritten["tokenUsage"] == original["tokenUsage"]


def test_v3_round_trip_keeps_the_in_flight_json() -> None:
    raw = golden_json("v3.json")
    written = json.loads(encode(_decode_golden("v3.json")))
    assert written["identity"] == raw["identity"]
    assert written["queue"] == raw["queue"]
    assert written["sharedMemory"] == raw["sharedMemory"]
    for before, after in zip(raw["inFlightTasks"], written["inFlightTasks"], strict=True):
        for field in ("taskId", "assignee", "phase", "tokenUsage", "toolCalls", "turns"):
            assert after[field] == before[field], field
        assert len(after["conversationMessages"]) == len(before["conversationMessages"])
    committed, uncommitted = written["inFlightTasks"][0]["pendingToolCalls"]
    assert committed["call"] == raw["inFlightTasks"][0]["pendingToolCalls"][0]["call"]
    assert (
        committed["commit"]["record"]
        == raw["inFlightTasks"][0]["pendingToolCalls"][0]["commit"]["record"]
    )
    assert committed["commit"]["result"]["tool_use_id"] == "toolu_01Fetch0000000000000001"
    assert "commit" not in uncommitted
    assert "pendingToolCalls" not in written["inFlightTasks"][1]


# -- the TypeScript OMA's own checkpoint -------------------------------------------------------


def test_oma_checkpoint_decodes_with_oma_values() -> None:
    scenario = oma_fixture_json("scenario.json")
    summary = scenario["checkpointSummary"]
    raw = oma_fixture_json("checkpoint.pretty.json")
    snapshot = decode(json.dumps(raw), key=scenario["checkpointKey"])
    assert snapshot.version == summary["version"] == 4
    assert snapshot.mode == summary["mode"]
    assert snapshot.run_id == scenario["runId"]
    assert snapshot.attempt == summary["identity"]["attempt"] == 1
    assert snapshot.revision == 0  # OMA does not write our revision
    assert snapshot.identity == RunIdentity(
        run_id=summary["identity"]["runId"],
        attempt=summary["identity"]["attempt"],
        trace_id=summary["identity"]["lastTraceId"],
        root_span_id=summary["identity"]["lastRootSpanId"],
    )
    ids = scenario["taskIds"]
    partitions = summary["queuePartitionsByTitle"]
    expected = {title: "pending" for title in partitions["pending"]}
    expected |= {title: "completed" for title in partitions["completed"]}
    assert _statuses(snapshot) == expected
    assert [task.id for task in snapshot.tasks] == [ids["first"], ids["second"]]
    assert snapshot.tasks[1].depends_on == (ids["first"],)
    assert snapshot.in_flight == ()
    assert summary["inFlightTasks"] == []
    assert snapshot.turn_count == summary["turnCount"]
    assert snapshot.shared_memory is not None
    assert [e["key"] for e in snapshot.shared_memory["entries"]] == summary["sharedMemoryKeys"]
    (done,) = snapshot.completed
    (expected_done,) = summary["completedTaskResults"]
    assert done.task_id == ids[expected_done["task"]]
    assert done.assignee == expected_done["assignee"]
    assert done.result == expected_done["result"]
    assert done.agent_result is not None
    assert done.agent_result.output == expected_done["result"]
    assert done.agent_result.token_usage == TokenUsage(1, 1)
    assert done.agent_result.messages == [
        Message("assistant", [TextBlock(expected_done["result"])])
    ]


async def test_oma_store_file_loads_through_file_store(tmp_path: Path) -> None:
    scenario = oma_fixture_json("scenario.json")
    path = tmp_path / "store.json"
    shutil.copyfile(OMA_FIXTURE_DIR / "store.json", path)
    async with FileStore.open(path) as store:
        assert [entry.key for entry in await store.list()] == scenario["storeKeys"]
        loaded = await Checkpoint(store, run_id=scenario["runId"]).load_latest()
    assert loaded is not None
    assert loaded == decode(json.dumps(oma_fixture_json("checkpoint.pretty.json")), key=KEY)
    assert loaded.raw == oma_fixture_json("checkpoint.pretty.json")


def test_oma_checkpoint_round_trip() -> None:
    raw = oma_fixture_json("checkpoint.pretty.json")
    first = decode(json.dumps(raw), key=KEY)
    written = encode(first)
    assert decode(written, key=KEY) == first
    rewritten = json.loads(written)
    # Everything OMA wrote outside the results comes back byte-for-byte equal in value.
    for field in ("version", "mode", "createdAt", "identity", "queue", "sharedMemory"):
        assert rewritten[field] == raw[field], field
    for field in ("messageBus", "turnCount", "inFlightTasks", "pendingApprovals"):
        assert rewritten[field] == raw[field], field
    assert rewritten["approvalDecisions"] == raw["approvalDecisions"]
    before = raw["completedTaskResults"][0]
    after = rewritten["completedTaskResults"][0]
    for field in ("taskId", "assignee", "result"):
        assert after[field] == before[field]
    for field in ("success", "output", "messages", "tokenUsage", "toolCalls"):
        assert after["agentResult"][field] == before["agentResult"][field], field
