"""Golden checkpoints read: one per schema version (spec 7.2), decoded to typed fields.

Read goldens (``golden/v*.json``) are hand-written in OMA's camelCase shape.
"""

from __future__ import annotations

import json

import pytest
from checkpoint_support import (
    KEY,
    PNG_BASE64,
    _decode_golden,
    _statuses,
    golden_json,
)

from oma_actors.checkpoint import (
    RunIdentity,
    decode,
)
from oma_actors.domain.inflight import PendingCall, ToolCommit
from oma_actors.domain.messages import (
    ImageBlock,
    TextBlock,
    TokenUsage,
    ToolResultBlock,
    ToolUseBlock,
)
from oma_actors.domain.results import ToolCallRecord

READ_GOLDENS = [
    "v1_with_run_id.json",
    "v1_without_run_id.json",
    "v2.json",
    "v3.json",
    "v4.json",
    "v5.json",
]


# -- every version decodes ---------------------------------------------------------------------


@pytest.mark.parametrize("name", READ_GOLDENS)
def test_golden_decodes_with_its_version_and_raw(name: str) -> None:
    raw = golden_json(name)
    snapshot = _decode_golden(name)
    assert snapshot.version == raw["version"]
    assert snapshot.mode == raw["mode"]
    assert snapshot.created_at == raw["createdAt"]
    assert snapshot.raw == raw
    assert [task.id for task in snapshot.tasks] == [task["id"] for task in raw["queue"]["tasks"]]
    assert [item.task_id for item in snapshot.completed] == [
        item["taskId"] for item in raw["completedTaskResults"]
    ]


def test_v1_with_run_id_typed_fields() -> None:
    snapshot = _decode_golden("v1_with_run_id.json")
    assert snapshot.version == 1
    assert snapshot.mode == "runTasks"
    assert snapshot.run_id == "legacy-report-run"
    assert snapshot.identity is None
    assert snapshot.attempt == 1  # CK-07: v1 counts as attempt 1
    assert snapshot.revision == 0
    assert snapshot.in_flight == ()
    assert snapshot.pending_approvals == ()
    assert snapshot.approval_decisions == ()
    assert _statuses(snapshot) == {
        "fetch sources": "completed",
        "draft report": "in_progress",
        "review": "blocked",
    }
    fetch, draft, review = snapshot.tasks
    assert draft.depends_on == (fetch.id,)
    assert review.depends_on == (draft.id,)
    assert draft.assignee == "writer"
    assert fetch.result is not None
    assert fetch.result.startswith("Found 3 sources")
    assert fetch.created_at.isoformat() == "2025-06-02T14:01:02.117000+00:00"
    assert snapshot.in_progress_ids == [draft.id]
    assert not snapshot.is_finished
    assert snapshot.turn_count == 1
    assert snapshot.shared_memory is not None
    assert [e["key"] for e in snapshot.shared_memory["entries"]] == [
        f"researcher/task:{fetch.id}:result"
    ]
    (done,) = snapshot.completed
    assert done.assignee == "researcher"
    assert done.result == fetch.result
    result = done.agent_result
    assert result is not None
    assert result.success is True
    assert result.output == fetch.result
    assert result.token_usage == TokenUsage(1830, 212)
    assert result.tool_calls == [
        ToolCallRecord(
            tool_name="render_chart",
            input={"series": "energy-density", "from": 2019, "to": 2025},
            output="Rendered chart 'energy density 2019-2025' (1x1 preview).",
            duration_ms=388,
            # OMA's record has no id: it is the call's whose result it records (messages[1]).
            tool_call_id="toolu_01HGvJXq6n3kE1p3WdQy8ZtR",
        )
    ]
    assert [m.role for m in result.messages] == ["assistant", "user", "assistant"]
    assert result.messages[1].content[0] == ToolResultBlock(
        "toolu_01HGvJXq6n3kE1p3WdQy8ZtR",
        [
            TextBlock("Rendered chart 'energy density 2019-2025' (1x1 preview)."),
            ImageBlock("image/png", data=PNG_BASE64),
            ImageBlock("", url="https://charts.example.com/energy-density-2025.png"),
        ],
    )


def test_v1_without_run_id_typed_fields() -> None:
    snapshot = _decode_golden("v1_without_run_id.json")
    assert snapshot.version == 1
    assert snapshot.mode == "runTeam"
    assert snapshot.run_id == ""  # CK-07: restore will mint a new run id
    assert snapshot.identity is None
    assert snapshot.attempt == 1
    assert snapshot.revision == 0
    assert snapshot.goal == "Write a haiku about checkpoints."
    assert snapshot.shared_memory is None
    assert snapshot.turn_count is None
    assert snapshot.metadata is None
    assert _statuses(snapshot) == {"brainstorm": "completed", "write haiku": "pending"}
    (done,) = snapshot.completed
    assert done.agent_result is None  # CK-10: agentResult may be absent
    assert done.result is not None
    assert done.result.startswith("1. a bookmark")


def test_v2_typed_fields() -> None:
    snapshot = _decode_golden("v2.json")
    assert snapshot.version == 2
    assert snapshot.mode == "runFromPlan"
    assert snapshot.identity == RunIdentity(
        run_id="plan-run-2025-07",
        attempt=2,
        trace_id="4bf92f3577b34da6a3ce929d0e0e4736",
        root_span_id="00f067aa0ba902b7",
    )
    assert snapshot.run_id == "plan-run-2025-07"
    assert snapshot.attempt == 2
    assert snapshot.revision == 0
    assert snapshot.metadata == {
        "experiment": "plan-b",
        "dataset_tag": "q3-eval",
        "temperature": 0.2,
        "canary": True,
        "tags": ["nightly", "eu-west"],
    }
    assert snapshot.in_flight == ()  # CK-08: v2 restarts in-progress tasks at the boundary
    assert _statuses(snapshot) == {
        "inventory": "completed",
        "map columns": "failed",
        "write migration": "failed",
        "notify finance": "in_progress",
    }
    inventory, mapping, migration, _notify = snapshot.tasks
    assert (inventory.max_retries, inventory.retry_delay_ms, inventory.retry_backoff) == (
        2,
        500,
        1.5,
    )
    assert mapping.metadata == {"priority": "high"}
    assert migration.result == f'Cancelled: dependency "{mapping.id}" failed.'
    assert snapshot.message_bus is not None
    assert snapshot.message_bus["readState"] == [{"agentName": "liaison", "messageIds": ["msg-1"]}]
    (done,) = snapshot.completed
    assert done.agent_result is not None
    assert done.agent_result.output == "42 columns; 3 deprecated."
    assert done.agent_result.token_usage == TokenUsage(640, 18)


def test_v2_ignores_in_flight_state_it_cannot_have() -> None:
    """CK-08: v1/v2 have no in-flight state; a stray ``inFlightTasks`` is not resumed."""
    raw = golden_json("v2.json")
    raw["inFlightTasks"] = golden_json("v3.json")["inFlightTasks"]
    assert decode(json.dumps(raw), key=KEY).in_flight == ()


def test_v3_in_flight_runner_state() -> None:
    snapshot = _decode_golden("v3.json")
    assert snapshot.version == 3
    assert snapshot.run_id == "run-v3-pricing"
    assert snapshot.attempt == 1
    assert snapshot.revision == 0
    assert snapshot.pending_approvals == ()
    assert snapshot.approval_decisions == ()
    assert _statuses(snapshot) == {
        "gather": "completed",
        "analyze": "in_progress",
        "summarize": "in_progress",
        "recommend": "blocked",
    }
    analyze, summarize = snapshot.in_flight
    assert analyze.task_id == snapshot.tasks[1].id
    assert analyze.assignee == "analyst"
    assert summarize.task_id == snapshot.tasks[2].id
    assert summarize.assignee == "writer"

    state = analyze.state
    assert state.phase == "executing_tools"
    assert state.turns == 1
    assert state.token_usage == TokenUsage(812, 96)
    assert len(state.conversation) == 2
    assert state.conversation[0].role == "user"
    assert state.messages == state.conversation[1:]
    fetch = ToolUseBlock(
        "toolu_01Fetch0000000000000001", "fetch_page", {"url": "https://shop.example.com/pricing"}
    )
    note = ToolUseBlock(
        "toolu_01Note00000000000000002", "write_note", {"title": "pricing", "body": "ours=$11"}
    )
    assert state.conversation[1].content[1:] == [fetch, note]
    committed, uncommitted = state.pending
    assert committed == PendingCall(
        call=fetch,
        commit=ToolCommit(
            block=ToolResultBlock(fetch.id, "Our plan: $11/month."),
            record=ToolCallRecord(
                tool_name="fetch_page",
                input={"url": "https://shop.example.com/pricing"},
                output="Our plan: $11/month.",
                duration_ms=1204,
                tool_call_id=fetch.id,
            ),
        ),
    )
    assert uncommitted == PendingCall(call=note)
    assert state.uncommitted == (uncommitted,)
    assert [record.tool_name for record in state.tool_calls] == ["fetch_page"]

    waiting = summarize.state
    assert waiting.phase == "awaiting_model"
    assert waiting.turns == 2
    assert waiting.token_usage == TokenUsage(1410, 58)
    assert waiting.pending == ()
    assert len(waiting.conversation) == 5
    assert len(waiting.messages) == 4
    assert [record.output for record in waiting.tool_calls] == ["12", "6"]
    assert waiting.conversation[4].content == [
        ToolResultBlock("toolu_01Calc00000000000000004", "6", is_error=False)
    ]


def test_v4_typed_fields() -> None:
    snapshot = _decode_golden("v4.json")
    assert snapshot.version == 4
    assert snapshot.mode == "runTeam"
    assert snapshot.revision == 12
    assert snapshot.run_id == "team-talk-42"
    assert snapshot.attempt == 3
    assert snapshot.goal == "Prepare a 20 minute talk on durable agents."
    assert snapshot.turn_count == 0
    assert snapshot.completed == ()
    assert snapshot.pending_approvals == ()
    assert snapshot.approval_decisions == ()
    assert _statuses(snapshot) == {"outline": "in_progress", "slides": "blocked"}
    (outline,) = snapshot.in_flight
    assert outline.state.phase == "completed"
    assert outline.state.final_output.startswith("1. Why runs crash")
    assert outline.state.success is True
    assert outline.state.turns == 1
    assert outline.state.token_usage == TokenUsage(95, 40)
    assert outline.state.pending == ()


def test_v5_typed_fields() -> None:
    snapshot = _decode_golden("v5.json")
    assert snapshot.version == 5
    assert snapshot.run_id == "run-v3-pricing"
    assert snapshot.revision == 0  # absent -> 0
    v3 = _decode_golden("v3.json")
    assert snapshot.tasks == v3.tasks
    assert snapshot.in_flight == v3.in_flight
    assert snapshot.completed == v3.completed
    assert snapshot.raw["journalWatermarkSeq"] == 57
