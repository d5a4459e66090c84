"""Run state through encode/decode: queue (T-01, T-02), shared memory (T-03), rich tool results
(T-06) and redaction (T-07, T-08)."""

from __future__ import annotations

import json
from dataclasses import replace

from checkpoint_support import (
    IDENTITY,
    KEY,
    PNG_BASE64,
    T0,
    T1,
    golden_json,
    golden_text,
    make_snapshot,
    oma_fixture_json,
    task_state,
)

from oma_actors.checkpoint import (
    Checkpoint,
    CheckpointSnapshot,
    CompletedTask,
    InFlightTask,
    decode,
    encode,
)
from oma_actors.clock import to_iso
from oma_actors.domain.inflight import PendingCall, RunnerState, ToolCommit
from oma_actors.domain.jsonforms import block_to_json
from oma_actors.domain.messages import (
    ImageBlock,
    Message,
    TextBlock,
    TokenUsage,
    ToolResultBlock,
    ToolUseBlock,
)
from oma_actors.domain.results import AgentRunResult, ToolCallRecord
from oma_actors.domain.tasks import Task, TaskState, TaskStatus
from oma_actors.orchestration.queue import TaskQueue
from oma_actors.orchestration.shared_memory import SharedMemory, restore_memory
from oma_actors.stores.memory import InMemoryStore
from oma_actors.stores.redacting import RedactingStore


def _through_codec(snapshot: CheckpointSnapshot) -> CheckpointSnapshot:
    return decode(encode(snapshot), key=KEY)


def _partitions(queue: TaskQueue) -> dict[str, list[str]]:
    statuses: tuple[TaskStatus, ...] = (
        "pending",
        "in_progress",
        "completed",
        "failed",
        "blocked",
        "skipped",
    )
    return {status: [task.id for task in queue.with_status(status)] for status in statuses}


# -- T-01 / T-02: the task queue ---------------------------------------------------------------


def test_t01_queue_partitions_and_results_survive() -> None:
    a = Task("a", "do a", id="a", assignee="worker")
    b = Task("b", "do b", id="b", assignee="worker", max_retries=3, metadata={"lane": "fast"})
    c = Task("c", "do c", id="c", assignee="worker", depends_on=["a"])
    queue = TaskQueue.from_tasks([a, b, c])
    queue.start("b", "worker")
    queue.start("a", "worker")
    queue.complete("a", "result of a")
    before = _partitions(queue)
    assert before["completed"] == ["a"]
    assert before["in_progress"] == ["b"]
    assert before["pending"] == ["c"]

    snapshot = _through_codec(make_snapshot(tasks=tuple(queue.tasks)))
    assert snapshot.raw["queue"]["pending"] == ["c"]
    assert snapshot.raw["queue"]["inProgress"] == ["b"]
    assert snapshot.raw["queue"]["completed"] == ["a"]

    restored = TaskQueue(snapshot.tasks)
    assert _partitions(restored) == before
    assert restored.get("a").result == "result of a"
    assert restored.get("c").depends_on == ("a",)
    assert restored.get("b").max_retries == 3
    assert restored.get("b").metadata == {"lane": "fast"}
    for original, back in zip(queue.tasks, restored.tasks, strict=True):
        assert replace(back, created_at=original.created_at, updated_at=original.updated_at) == (
            original
        )
        assert to_iso(back.created_at) == to_iso(original.created_at)  # millisecond precision
        assert to_iso(back.updated_at) == to_iso(original.updated_at)


def test_t02_reset_in_progress_after_restore() -> None:
    tasks = (
        task_state("a", "in_progress"),
        task_state("b", "blocked", depends_on=("a",)),
        task_state("x", "pending"),
        task_state("y", "in_progress", depends_on=("x",)),  # its dependency never completed
    )
    snapshot = _through_codec(make_snapshot(tasks=tasks, completed=()))
    assert snapshot.in_progress_ids == ["a", "y"]
    queue = TaskQueue(snapshot.tasks)
    reset = queue.reset_in_progress()
    assert sorted(task.id for task in reset) == ["a", "y"]
    assert queue.get("a").status == "pending"
    assert queue.get("b").status == "blocked"
    assert queue.get("x").status == "pending"
    assert queue.get("y").status == "blocked"  # TQ-13: pending-but-not-ready becomes blocked


# -- T-03: shared memory -----------------------------------------------------------------------

CHECKPOINT_ROW = "__oma_checkpoint__/run-test/latest"
APPROVAL_ROW = "__oma_approval__/apr_0123456789abcdef0123456789abcdef"


async def test_t03_shared_memory_snapshot_and_restore() -> None:
    source_store = InMemoryStore()
    memory = SharedMemory(source_store)
    plain = await memory.write("researcher", "finding", "cats sleep 16h", {"source": "web"})
    structured = await memory.write("researcher", "stats", {"hours": [16, 12], "ok": True})
    await source_store.set_with_expiry(
        "researcher/draft", "temporary draft", memory.turn_count + 3, {"agent": "researcher"}
    )
    await source_store.set(CHECKPOINT_ROW, "old checkpoint")
    await source_store.set(APPROVAL_ROW, '{"version":1}')
    memory.advance_turn()

    shared = await memory.snapshot()
    keys = [entry["key"] for entry in shared["entries"]]
    assert keys == [plain, structured, "researcher/draft"]  # reserved keys never snapshotted
    snapshot = _through_codec(make_snapshot(shared_memory=shared, turn_count=memory.turn_count))
    assert snapshot.shared_memory == shared
    assert snapshot.turn_count == 1

    target_store = InMemoryStore()
    await target_store.set(CHECKPOINT_ROW, "current checkpoint")
    await target_store.set(APPROVAL_ROW, "ledger row")
    await target_store.set("stale/entry", "from another run")
    restored = SharedMemory(target_store)
    assert snapshot.shared_memory is not None
    await restore_memory(restored, snapshot.shared_memory)

    assert restored.turn_count == 1
    assert await restored.read(plain) == "cats sleep 16h"
    plain_entry = await target_store.get(plain)
    assert plain_entry is not None
    assert plain_entry.metadata == {"source": "web", "agent": "researcher"}
    assert await restored.read(structured) == {"hours": [16, 12], "ok": True}
    assert await restored.read("researcher/draft") == "temporary draft"
    draft = await target_store.get("researcher/draft")
    assert draft is not None
    assert draft.expires_at_turn == 3
    assert await target_store.get("stale/entry") is None
    # Reserved rows are neither snapshotted nor deleted nor overwritten by a restore.
    checkpoint_row = await target_store.get(CHECKPOINT_ROW)
    approval_row = await target_store.get(APPROVAL_ROW)
    assert checkpoint_row is not None
    assert checkpoint_row.value == "current checkpoint"
    assert approval_row is not None
    assert approval_row.value == "ledger row"
    assert await restored.read(CHECKPOINT_ROW) is None

    restored.advance_turn()
    restored.advance_turn()
    assert await restored.read("researcher/draft") is None  # expired at turn 3, as before


async def test_t03_restore_ignores_reserved_keys_inside_a_snapshot() -> None:
    store = InMemoryStore()
    await store.set(CHECKPOINT_ROW, "real checkpoint")
    shared = {
        "version": 1,
        "turnCount": 2,
        "entries": [
            {"key": CHECKPOINT_ROW, "value": "forged", "createdAt": "2025-01-01T00:00:00.000Z"},
            {"key": APPROVAL_ROW, "value": "forged", "createdAt": "2025-01-01T00:00:00.000Z"},
            {"key": "w/k", "value": "v", "createdAt": "2025-01-01T00:00:00.000Z"},
        ],
    }
    memory = SharedMemory(store)
    embedded = _through_codec(make_snapshot(shared_memory=shared)).shared_memory
    assert embedded == shared
    await restore_memory(memory, embedded)
    row = await store.get(CHECKPOINT_ROW)
    assert row is not None
    assert row.value == "real checkpoint"
    assert await store.get(APPROVAL_ROW) is None
    assert [entry.key for entry in await store.list()] == [CHECKPOINT_ROW, "w/k"]
    assert memory.turn_count == 2


async def test_oma_embedded_shared_memory_restores() -> None:
    """The fixture's ``seed/note`` is JSON-encoded and comes back as ``{"keep": true}``."""
    snapshot = decode(json.dumps(oma_fixture_json("checkpoint.pretty.json")), key=KEY)
    memory = SharedMemory(InMemoryStore())
    assert snapshot.shared_memory is not None
    await restore_memory(memory, snapshot.shared_memory)
    assert await memory.read("seed/note") == {"keep": True}
    assert memory.turn_count == snapshot.turn_count == 1


# -- T-06: rich tool results -------------------------------------------------------------------


def test_t06_rich_tool_result_block_is_exact_after_decode_and_encode() -> None:
    raw = golden_json("v1_with_run_id.json")
    original = raw["completedTaskResults"][0]["agentResult"]["messages"][1]["content"][0]
    assert [part["type"] for part in original["content"]] == ["text", "image", "image"]
    snapshot = decode(golden_text("v1_with_run_id.json"), key=KEY)
    result = snapshot.completed[0].agent_result
    assert result is not None
    block = result.messages[1].content[0]
    assert block_to_json(block) == original
    rewritten = json.loads(encode(snapshot))
    assert rewritten["completedTaskResults"][0]["agentResult"]["messages"][1]["content"][0] == (
        original
    )


def test_rich_results_round_trip_in_completed_and_in_flight_state() -> None:
    call = ToolUseBlock("toolu_shot", "screenshot", {"url": "https://example.com"})
    rich = ToolResultBlock(
        call.id,
        [
            TextBlock("captured"),
            ImageBlock("image/png", data=PNG_BASE64),
            ImageBlock("", url="https://cdn.example.com/shot.png"),
        ],
    )
    record = ToolCallRecord(
        tool_name="screenshot",
        input={"url": "https://example.com"},
        output="captured",
        duration_ms=950,
        tool_call_id=call.id,
    )
    other = ToolUseBlock("toolu_ocr", "ocr", {"lang": "de"})
    prompt = Message("user", [TextBlock("Look at the page.")])
    turn = Message("assistant", [call, other])
    state = RunnerState(
        phase="executing_tools",
        conversation=(prompt, turn),
        messages=(turn,),
        turns=1,
        token_usage=TokenUsage(10, 5),
        tool_calls=(record,),
        pending=(
            PendingCall(call=call, commit=ToolCommit(block=rich, record=record)),
            PendingCall(call=other),
        ),
    )
    result = AgentRunResult(
        success=True,
        output="done",
        messages=[turn, Message("user", [rich]), Message("assistant", [TextBlock("done")])],
        token_usage=TokenUsage(20, 9),
        tool_calls=[record],
        turns=2,
    )
    snapshot = make_snapshot(
        tasks=(task_state("a", "completed", result="done"), task_state("b", "in_progress")),
        completed=(
            CompletedTask(task_id="a", assignee="worker", result="done", agent_result=result),
        ),
        in_flight=(InFlightTask(task_id="b", assignee="worker", state=state),),
    )
    back = _through_codec(snapshot)
    assert back == snapshot
    commit = back.in_flight[0].state.pending[0].commit
    assert commit is not None
    assert commit.block == rich
    image = commit.block.content[1]
    assert isinstance(image, ImageBlock)
    assert image.data == PNG_BASE64


# -- T-07 / T-08: redaction --------------------------------------------------------------------

SK = "sk-abcdefghijklmnop"
PASSWORD = 'password="hunter2"'


def _secret_snapshot(*, shared: dict[str, object] | None) -> CheckpointSnapshot:
    tasks = (
        task_state("a", "completed", result=PASSWORD),
        task_state("b", "pending", depends_on=("a",)),
    )
    result = AgentRunResult(
        success=True,
        output=PASSWORD,
        messages=[Message("assistant", [TextBlock(f"{PASSWORD} and {SK}")])],
        token_usage=TokenUsage(4, 2),
    )
    return make_snapshot(
        tasks=tasks,
        completed=(
            CompletedTask(task_id="a", assignee="worker", result=PASSWORD, agent_result=result),
        ),
        shared_memory=shared,
        identity=replace(IDENTITY, run_id="secret-run"),
    )


async def test_t07_checkpoint_through_a_redacting_store() -> None:
    inner = InMemoryStore()
    shared = {
        "version": 1,
        "turnCount": 1,
        "entries": [
            {
                "key": "researcher/note",
                "value": f"the api key is {SK}",
                "metadata": {"agent": "researcher"},
                "createdAt": to_iso(T0),
            }
        ],
    }
    checkpoint = Checkpoint(RedactingStore(inner), run_id="secret-run")
    await checkpoint.save(_secret_snapshot(shared=shared))

    loaded = await checkpoint.load_latest()
    assert loaded is not None
    assert [(task.id, task.status) for task in loaded.tasks] == [
        ("a", "completed"),
        ("b", "pending"),
    ]
    assert loaded.run_id == "secret-run"
    assert loaded.completed[0].result == 'password="[redacted]"'
    assert loaded.tasks[0].result == 'password="[redacted]"'
    assert loaded.shared_memory is not None
    assert loaded.shared_memory["entries"][0]["value"] == "the api key is [redacted]"
    agent_result = loaded.completed[0].agent_result
    assert agent_result is not None
    assert agent_result.output == 'password="[redacted]"'
    assert agent_result.token_usage == TokenUsage(4, 2)  # input_tokens is not a secret name

    (entry,) = await inner.list()
    assert entry.key == "__oma_checkpoint__/secret-run/latest"
    assert entry.metadata is not None
    assert entry.metadata["runId"] == "secret-run"
    assert "hunter2" not in entry.value
    assert SK not in entry.value


async def test_t08_one_redacting_store_for_memory_and_checkpoint() -> None:
    inner = InMemoryStore()
    store = RedactingStore(inner)
    memory = SharedMemory(store)
    key = await memory.write("worker", "creds", f"{PASSWORD} token {SK}")
    shared_value = await memory.read(key)
    assert isinstance(shared_value, str)
    assert "hunter2" not in shared_value
    assert SK not in shared_value
    assert "[redacted]" in shared_value
    memory.advance_turn()

    checkpoint = Checkpoint(store, run_id="secret-run")
    # The checkpoint store IS the shared store: no embedded memory, only the turn counter.
    await checkpoint.save(replace(_secret_snapshot(shared=None), turn_count=memory.turn_count))
    loaded = await checkpoint.load_latest()
    assert loaded is not None
    assert loaded.completed[0].result == 'password="[redacted]"'
    assert loaded.turn_count == 1
    assert loaded.shared_memory is None

    entries = await inner.list()
    assert [entry.key for entry in entries] == [key, "__oma_checkpoint__/secret-run/latest"]
    for entry in entries:
        assert "hunter2" not in entry.value, entry.key
        assert SK not in entry.value, entry.key
    assert [shared.key for shared in await memory.list_all()] == [key]


def test_task_timestamps_keep_millisecond_precision() -> None:
    task = TaskState(
        id="t", title="t", description="d", status="pending", created_at=T0, updated_at=T1
    )
    (back,) = _through_codec(make_snapshot(tasks=(task,), completed=())).tasks
    assert (back.created_at, back.updated_at) == (T0, T1)
