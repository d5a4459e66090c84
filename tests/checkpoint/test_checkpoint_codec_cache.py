"""The encode cache: reusing message text between saves never changes what is written."""

from __future__ import annotations

import json
from dataclasses import replace

from oma_actors.checkpoint.codec import decode, encode
from oma_actors.checkpoint.fragments import EncodeCache
from oma_actors.domain.inflight import RunnerState
from oma_actors.domain.messages import Message, TextBlock, ToolResultBlock, ToolUseBlock
from oma_actors.domain.results import ToolCallRecord
from oma_actors.domain.snapshot import CheckpointSnapshot, InFlightTask, RunIdentity
from oma_actors.domain.tasks import TaskState


def snapshot_with(
    conversation: tuple[Message, ...], records: tuple[ToolCallRecord, ...]
) -> CheckpointSnapshot:
    task = TaskState(
        id="t1", title="t", description="\x00deadbeef:0\x00", status="in_progress", assignee="w"
    )
    state = RunnerState(
        phase="awaiting_model",
        conversation=conversation,
        messages=conversation[1:],
        turns=len(conversation) // 2,
        tool_calls=records,
    )
    return CheckpointSnapshot(
        version=4,
        mode="runTasks",
        run_id="r",
        attempt=1,
        revision=0,
        created_at="2026-01-01T00:00:00.000Z",
        tasks=(task,),
        identity=RunIdentity(run_id="r", attempt=1, trace_id="a" * 32, root_span_id="b" * 16),
        in_flight=(InFlightTask(task_id="t1", assignee="w", state=state),),
    )


def test_cached_encoding_equals_fresh_encoding_save_after_save() -> None:
    cache = EncodeCache()
    conversation: tuple[Message, ...] = (Message("user", [TextBlock('go "quoted" ü \x00')]),)
    records: tuple[ToolCallRecord, ...] = ()
    for turn in range(5):
        call = ToolUseBlock(f"c{turn}", "echo", {"n": turn, "s": "x" * turn})
        conversation += (
            Message("assistant", [call]),
            Message("user", [ToolResultBlock(f"c{turn}", f"out {turn}", is_error=turn == 3)]),
        )
        records += (
            ToolCallRecord(
                tool_name="echo", input={"n": turn}, output=f"out {turn}", duration_ms=turn
            ),
        )
        snapshot = snapshot_with(conversation, records)
        cached = encode(snapshot, cache)
        assert cached == encode(snapshot)  # byte-identical to an uncached encoding
        assert decode(cached, key="k").in_flight[0].state.conversation == conversation
        # A second save of the same state reuses every fragment and still writes the same text.
        assert encode(replace(snapshot, revision=turn), cache) == encode(
            replace(snapshot, revision=turn)
        )


def test_a_user_string_shaped_like_a_placeholder_is_left_alone() -> None:
    snapshot = snapshot_with((Message("user", [TextBlock("hi")]),), ())
    text = encode(snapshot, EncodeCache())
    assert json.loads(text)["queue"]["tasks"][0]["description"] == "\x00deadbeef:0\x00"
