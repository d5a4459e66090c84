"""The write golden's snapshot, and the one place that writes golden files.

``golden/written_v4.json`` pins the exact bytes ``encode`` produces for the snapshot built here.
Tests only ever read it; after a deliberate format change, regenerate it explicitly with::

    .venv/bin/python tests/checkpoint/update_goldens.py

and review the diff before committing it.
"""

from __future__ import annotations

from pathlib import Path

from checkpoint_support import GOLDEN_DIR, PNG_BASE64, T0, T1, T2

from oma_actors.checkpoint import (
    CheckpointSnapshot,
    CompletedTask,
    InFlightTask,
    RunIdentity,
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

WRITTEN_NAME = "written_v4.json"


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
                tool_call_id=chart.id,
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
        tool_calls=(fetch_record,),
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


def write_goldens(directory: Path = GOLDEN_DIR) -> list[Path]:
    """Write every golden this module builds into ``directory``; the paths written."""
    path = directory / WRITTEN_NAME
    path.write_text(encode(build_written_snapshot()), encoding="utf-8")
    return [path]
