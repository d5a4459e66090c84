"""``traceId``/``spanId`` on journal events when tracing is on, and nothing when it is off.

Tracing is on when an OpenTelemetry span is current (``telemetry/context.py``): every event
recorded then carries the span's trace and span id, in OMA's key order: ``spanId`` after
``agentName`` (the runner's ``journalScope``, agent/runner.ts), ``traceId`` last, after the
fields ``JournalRecorder.emit`` stamps (journal.ts), and reads back. With no span current, the lines
are what they were before the fields existed: no key added, byte-identical through a read and
re-write.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from opentelemetry.sdk.trace import TracerProvider

from oma_actors import AgentConfig, CheckpointOptions, OpenMultiAgent, Task, Team, TokenUsage
from oma_actors.journal import JournalOptions, JsonlRunJournal
from oma_actors.journal.codec import parse_line, to_json_line
from oma_actors.llm import LLMResponse, TextBlock
from oma_actors.stores import InMemoryStore
from oma_actors.telemetry.otel import otel_progress
from oma_actors.testing import ScriptedAdapter

BASE_ORDER = ["type", "taskId", "agentName", "spanId", "sourceEventSeqs", "seq",
              "timestampUnixMs", "runId", "attempt", "traceId"]  # fmt: skip
STAMPED = ["seq", "timestampUnixMs", "runId", "attempt", "traceId"]
"""What ``JournalRecorder.emit`` adds after the draft (``{...draft, seq, ..., traceId}``)."""


def team() -> Team:
    adapter = ScriptedAdapter([LLMResponse([TextBlock("done")], usage=TokenUsage(1, 1))])
    return Team("t", [AgentConfig("w", adapter=adapter)])


async def run(path: Path) -> list[str]:
    journal = JsonlRunJournal(path, flush_interval_ms=0)
    result = await OpenMultiAgent().run_tasks(
        team(), [Task("one", "do it", id="a")], journal=JournalOptions(journal),
        checkpoint=CheckpointOptions(store=InMemoryStore(), run_id="r1"),
    )  # fmt: skip
    assert result.success
    await journal.close()
    return (await asyncio.to_thread(path.read_text)).splitlines()


async def test_off_no_trace_fields_and_lines_unchanged(tmp_path: Path) -> None:
    lines = await run(tmp_path / "run.jsonl")
    assert lines
    for line in lines:
        raw = json.loads(line)
        assert "traceId" not in raw
        assert "spanId" not in raw
        assert to_json_line(parse_line(line)) == line  # nothing added on a re-write


async def test_on_every_event_names_the_current_trace(tmp_path: Path) -> None:
    tracing = otel_progress(TracerProvider())
    with tracing.run(attempt=1) as ref:
        lines = await run(tmp_path / "run.jsonl")
    assert lines
    for line in lines:
        raw = json.loads(line)
        assert (raw["traceId"], raw["spanId"]) == (ref.trace_id, ref.span_id)
        base = [key for key in raw if key in BASE_ORDER]
        assert base == [key for key in BASE_ORDER if key in raw]  # OMA's base-field order
        assert list(raw)[-len(STAMPED) :] == STAMPED  # the payload before the stamped fields
        event = parse_line(line)
        assert (event.trace_id, event.span_id) == (ref.trace_id, ref.span_id)
        assert "traceId" not in event.data
        assert to_json_line(event) == line
