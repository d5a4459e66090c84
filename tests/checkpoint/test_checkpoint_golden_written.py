"""The write golden: the exact bytes ``encode`` produces for a fixed snapshot.

The write golden (``golden/written_v4.json``) pins the exact bytes ``encode`` produces for a
fixed snapshot; after a deliberate format change regenerate it with::

    OMA_UPDATE_GOLDEN=1 .venv/bin/pytest tests/checkpoint -k written_snapshot_matches
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import replace
from typing import Any

from checkpoint_support import (
    GOLDEN_DIR,
    KEY,
    PNG_BASE64,
    T0,
    T1,
    T2,
)

from oma_actors.checkpoint import (
    CheckpointSnapshot,
    CompletedTask,
    InFlightTask,
    RunIdentity,
    decode,
    encode,
)
from oma_actors.domain.inflight import PendingCall, RunnerState, ToolCommit
from oma_actors.domain.messages import (
    ImageBlock,
    Message,
    TextBlock,
    TokenUsage,
    ToolResultBlock,
    ToolUseBlock,
)
from oma_actors.domain.results import AgentRunResult, ToolCallRecord
from oma_actors.domain.tasks import TaskState

WRITTEN_GOLDEN = GOLDEN_DIR / "written_v4.json"


def build_written_snapshot() -> CheckpointSnapshot:
    """A deterministic snapshot exercising every field ``encode`` writes."""
    gather = TaskState(
        id="t-gather",
        title="gather",
        description="Collect the quarterly figures.",
        status="completed",
        assignee="researcher",
        result="Umsatz +12 % — stabil",
        created_at=T0,
        updated_at=T1,
    )
    analyze = TaskState(
        id="t-analyze",
        title="analyze",
        description="Explain the change.",
        status="in_progress",
        assignee="analyst",
        depends_on=("t-gather",),
        max_retries=2,
        retry_delay_ms=250,
        retry_backoff=1.5,
        metadata={"priority": "high"},
        created_at=T0,
        updated_at=T2,
    )
    report = TaskState(
        id="t-report",
        title="report",
        description="Write the report.",
        status="blocked",
        assignee="writer",
        depends_on=("t-analyze",),
        created_at=T0,
        updated_at=T0,
    )
    appendix = TaskState(
        id="t-appendix",
        title="appendix",
        description="Add an appendix.",
        status="skipped",
        result="Skipped: run aborted.",
        created_at=T0,
        updated_at=T2,
    )
    chart = ToolUseBlock("toolu_chart_1", "render_chart", {"series": "revenue"})
    rich = ToolResultBlock(
        chart.id,
        [
            TextBlock("chart rendered"),
            ImageBlock("image/png", data=PNG_BASE64),
            ImageBlock("", url="https://charts.example.com/revenue.png"),
        ],
    )
    gather_result = AgentRunResult(
        success=True,
        output="Umsatz +12 % — stabil",
        messages=[
            Message("assistant", [TextBlock("Rendering."), chart]),
            Message("user", [rich]),
            Message("assistant", [TextBlock("Umsatz +12 % — stabil")]),
        ],
        token_usage=TokenUsage(1200, 80),
        tool_calls=[
            ToolCallRecord(
                tool_name="render_chart",
                input={"series": "revenue"},
                output="chart rendered",
                duration_ms=412,
            )
        ],
        turns=2,
    )
    fetch = ToolUseBlock("toolu_fetch_1", "fetch_page", {"url": "https://example.com/q3"})
    post = ToolUseBlock("toolu_post_2", "post_update", {"channel": "finance", "text": "Q3 up"})
    fetch_record = ToolCallRecord(
        tool_name="fetch_page",
        input={"url": "https://example.com/q3"},
        output="Q3 revenue 1.2M",
        duration_ms=830,
        tool_call_id=fetch.id,
    )
    prompt = Message("user", [TextBlock("# Task: analyze\n\nExplain the change.")])
    turn = Message("assistant", [TextBlock("Checking sources."), fetch, post])
    runner = RunnerState(
        phase="executing_tools",
        conversation=(prompt, turn),
        messages=(turn,),
        turns=1,
        token_usage=TokenUsage(640, 45),
        tool_calls=(replace(fetch_record, tool_call_id=""),),
        pending=(
            PendingCall(
                call=fetch,
                commit=ToolCommit(
                    block=ToolResultBlock(fetch.id, "Q3 revenue 1.2M"), record=fetch_record
                ),
            ),
            PendingCall(call=post, dispatched=True),
        ),
    )
    return CheckpointSnapshot(
        version=4,
        mode="runTeam",
        run_id="golden-run",
        attempt=2,
        revision=3,
        created_at="2025-11-05T12:00:00.000Z",
        tasks=(gather, analyze, report, appendix),
        identity=RunIdentity(
            run_id="golden-run",
            attempt=2,
            trace_id="0123456789abcdef0123456789abcdef",
            root_span_id="fedcba9876543210",
        ),
        goal="Summarise the quarterly numbers.",
        metadata={"experiment": "golden", "prompt_version": 3},
        shared_memory={
            "version": 1,
            "turnCount": 1,
            "entries": [
                {
                    "key": "researcher/task:t-gather:result",
                    "value": "Umsatz +12 % — stabil",
                    "createdAt": "2025-11-05T11:59:30.500Z",
                    "metadata": {"agent": "researcher"},
                }
            ],
        },
        turn_count=1,
        completed=(
            CompletedTask(
                task_id="t-gather",
                assignee="researcher",
                result="Umsatz +12 % — stabil",
                agent_result=gather_result,
            ),
        ),
        in_flight=(InFlightTask(task_id="t-analyze", assignee="analyst", state=runner),),
    )


def test_written_snapshot_matches_golden_bytes() -> None:
    text = encode(build_written_snapshot())
    if os.environ.get("OMA_UPDATE_GOLDEN") == "1":
        WRITTEN_GOLDEN.write_text(text, encoding="utf-8")
    assert text == WRITTEN_GOLDEN.read_text(encoding="utf-8")


def test_written_golden_shape() -> None:
    text = WRITTEN_GOLDEN.read_text(encoding="utf-8")
    assert "\n" not in text
    assert ": " not in text.split('"goal"')[0]
    assert "—" in text  # non-ASCII written as is, like JSON.stringify
    raw = json.loads(text)
    assert list(raw)[:4] == ["version", "mode", "createdAt", "revision"]
    assert raw["version"] == 4
    assert raw["revision"] == 3
    assert raw["identity"] == {
        "runId": "golden-run",
        "attempt": 2,
        "lastTraceId": "0123456789abcdef0123456789abcdef",
        "lastRootSpanId": "fedcba9876543210",
    }
    assert raw["queue"]["version"] == 1
    assert raw["queue"]["inProgress"] == ["t-analyze"]
    assert raw["queue"]["tasks"][1]["dependsOn"] == ["t-gather"]
    assert raw["queue"]["tasks"][1]["createdAt"] == "2025-11-05T11:58:00.125Z"
    assert raw["queue"]["tasks"][1]["retryBackoff"] == 1.5
    assert raw["pendingApprovals"] == []
    assert raw["approvalDecisions"] == []
    assert raw["messageBus"] == {"version": 1, "messages": [], "readState": []}
    entry = raw["inFlightTasks"][0]
    assert list(entry)[:8] == [
        "taskId",
        "assignee",
        "phase",
        "conversationMessages",
        "messages",
        "tokenUsage",
        "toolCalls",
        "turns",
    ]
    committed, dispatched = entry["pendingToolCalls"]
    assert committed["commit"]["result"] == {
        "type": "tool_result",
        "tool_use_id": "toolu_fetch_1",
        "content": "Q3 revenue 1.2M",
    }
    assert dispatched == {
        "call": {
            "type": "tool_use",
            "id": "toolu_post_2",
            "name": "post_update",
            "input": {"channel": "finance", "text": "Q3 up"},
        },
        "dispatched": True,
    }
    assert _snake_case_keys(raw) == set()


_ANTHROPIC_KEYS = {"input_tokens", "output_tokens", "tool_use_id", "media_type", "is_error"}
_FREE_FORM = {"metadata", "input", "sharedMemory"}


def _snake_case_keys(value: Any) -> set[str]:
    """Structural keys that are neither camelCase nor Anthropic block fields."""
    found: set[str] = set()
    if isinstance(value, dict):
        for key, item in value.items():
            if not re.fullmatch(r"[a-z][a-zA-Z0-9]*", key) and key not in _ANTHROPIC_KEYS:
                found.add(key)
            if key not in _FREE_FORM:
                found |= _snake_case_keys(item)
    elif isinstance(value, list):
        for item in value:
            found |= _snake_case_keys(item)
    return found


def test_written_golden_decodes_to_the_built_snapshot() -> None:
    built = build_written_snapshot()
    loaded = decode(WRITTEN_GOLDEN.read_text(encoding="utf-8"), key=KEY)
    # The only normalisation: an absent message bus is written as OMA's empty bus.
    assert loaded.message_bus == {"version": 1, "messages": [], "readState": []}
    assert loaded == replace(built, message_bus=loaded.message_bus)
    assert loaded.in_flight[0].state.pending[1].dispatched is True
    assert loaded.completed[0].agent_result == built.completed[0].agent_result
