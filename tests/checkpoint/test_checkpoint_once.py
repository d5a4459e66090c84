"""A journal-first snapshot holds each tool output once (``checkpoint.once``, issue 19 item 5).

The in-flight entry's ``messages`` is written as ``messagesFrom`` and each record's output that is
its result's text is left out, in the entry and in a completed task's ``agentResult``; ``decode``
gives back exactly the state. OMA's form (a snapshot that does not depend on its journal) is
unchanged, and a durable snapshot re-saved in OMA's form carries nothing of the short form.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest
from checkpoint_support import KEY, make_snapshot, task_state

from oma_actors.checkpoint import CheckpointSnapshot, InFlightTask, decode, encode
from oma_actors.checkpoint.validate import problem
from oma_actors.domain.inflight import RunnerState
from oma_actors.domain.messages import Message, TextBlock, TokenUsage, ToolResultBlock, ToolUseBlock
from oma_actors.domain.results import AgentRunResult, ToolCallRecord
from oma_actors.domain.snapshot import CompletedTask
from oma_actors.errors import CheckpointError

PROMPT = Message("user", [TextBlock("do it")])


def output(n: int) -> str:
    return f"output {n} " + "y" * 200


def rounds(n: int) -> tuple[tuple[Message, ...], tuple[ToolCallRecord, ...]]:
    """``n`` tool rounds after the prompt: the runner's messages and their records."""
    messages: list[Message] = []
    records = []
    for i in range(n):
        messages.append(Message("assistant", [ToolUseBlock(f"c{i}", "echo", {"i": i})]))
        messages.append(Message("user", [ToolResultBlock(f"c{i}", output(i))]))
        records.append(
            ToolCallRecord(
                tool_name="echo",
                input={"i": i},
                output=output(i),
                duration_ms=i,
                tool_call_id=f"c{i}",
            )
        )
    return tuple(messages), tuple(records)


def durable(snapshot: CheckpointSnapshot) -> CheckpointSnapshot:
    return replace(
        snapshot, version=5, journal_watermark_seq=40, journal_ref={"kind": "X", "durable": True}
    )


def snapshot_with_rounds(n: int = 3) -> CheckpointSnapshot:
    messages, records = rounds(n)
    state = RunnerState(
        phase="awaiting_model",
        conversation=(PROMPT, *messages),
        messages=messages,
        turns=n,
        token_usage=TokenUsage(5, 5),
        tool_calls=records,
    )
    done = AgentRunResult(
        success=True, output="a done", messages=list(messages), token_usage=TokenUsage(3, 2),
        tool_calls=list(records), turns=n,
    )  # fmt: skip
    tasks = (task_state("a", "completed", result="a done"), task_state("b", "in_progress"))
    return make_snapshot(
        tasks=tasks,
        completed=(CompletedTask(task_id="a", assignee=None, result="a done", agent_result=done),),
        in_flight=(InFlightTask(task_id="b", assignee="worker", state=state),),
    )


def test_a_durable_snapshot_holds_each_output_once_and_decodes_to_its_state() -> None:
    snapshot = durable(snapshot_with_rounds())
    text = encode(snapshot)
    # One copy in the entry's conversation, one in the completed task's messages.
    assert text.count(output(1)) == 2
    raw = json.loads(text)
    entry = raw["inFlightTasks"][0]
    assert (entry["messages"], entry["messagesFrom"]) == ([], 1)
    assert problem(raw) is None
    back = decode(text, key=KEY)
    assert back.in_flight[0].state == snapshot.in_flight[0].state
    agent = back.completed[0].agent_result
    assert agent is not None
    assert agent.tool_calls == snapshot.completed[0].agent_result.tool_calls  # type: ignore[union-attr]


def test_a_record_keeps_the_members_that_differ_from_its_call_and_result() -> None:
    snapshot = durable(snapshot_with_rounds())
    item = snapshot.in_flight[0]
    records = list(item.state.tool_calls)
    records[1] = replace(records[1], input={"i": "edited"}, output="reported apart")
    state = replace(item.state, tool_calls=tuple(records))
    snapshot = replace(snapshot, in_flight=(replace(item, state=state),))
    text = encode(snapshot)
    written = json.loads(text)["inFlightTasks"][0]["toolCalls"]
    assert written[0] == {"duration": 0}
    assert written[1] == {"input": {"i": "edited"}, "output": "reported apart", "duration": 1}
    assert decode(text, key=KEY).in_flight[0].state == state


def test_omas_form_is_unchanged_without_a_durable_journal() -> None:
    text = encode(snapshot_with_rounds())
    # The conversation, the messages and the records of the entry, and the completed result's.
    assert text.count(output(1)) == 5
    assert "messagesFrom" not in text


def test_a_rewritten_conversation_keeps_its_messages_in_full() -> None:
    snapshot = durable(snapshot_with_rounds())
    item = snapshot.in_flight[0]
    summary = Message("user", [TextBlock("summary")])
    state = replace(item.state, conversation=(PROMPT, summary, *item.state.messages[-2:]))
    snapshot = replace(snapshot, in_flight=(replace(item, state=state),))
    entry = json.loads(encode(snapshot))["inFlightTasks"][0]
    assert "messagesFrom" not in entry
    assert len(entry["messages"]) == len(state.messages)
    assert decode(encode(snapshot), key=KEY).in_flight[0].state == state


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"messagesFrom": 99}, "messagesFrom is not an index"),
        ({"messagesFrom": True}, "messagesFrom is not an index"),
        ({"messages": [{"role": "user", "content": "x"}]}, "not empty beside messagesFrom"),
    ],
)
def test_the_validator_refuses_a_bad_messages_from(change: dict[str, Any], reason: str) -> None:
    raw = json.loads(encode(durable(snapshot_with_rounds())))
    raw["inFlightTasks"][0].update(change)
    found = problem(raw)
    assert found is not None
    assert reason in found


def test_an_output_left_out_without_its_result_is_refused() -> None:
    raw = json.loads(encode(durable(snapshot_with_rounds())))
    raw["inFlightTasks"][0]["toolCalls"].append({"toolName": "echo", "input": {}, "duration": 0})
    with pytest.raises(CheckpointError, match="do not pair"):
        decode(json.dumps(raw), key=KEY)


def test_a_durable_snapshot_re_saved_in_omas_form_carries_nothing_of_the_short_form() -> None:
    restored = decode(encode(durable(snapshot_with_rounds())), key=KEY)
    oma = replace(restored, version=4, journal_watermark_seq=None, journal_ref=None)
    entry = json.loads(encode(oma))["inFlightTasks"][0]
    assert "messagesFrom" not in entry
    assert len(entry["messages"]) == 6
    assert decode(encode(oma), key=KEY).in_flight[0].state == restored.in_flight[0].state


def test_a_record_leaving_its_name_to_a_missing_call_is_refused() -> None:
    raw = json.loads(encode(durable(snapshot_with_rounds())))
    entry = raw["inFlightTasks"][0]
    entry["conversationMessages"][1]["content"][0]["id"] = "another"  # c0's call is gone
    with pytest.raises(CheckpointError, match="not there"):
        decode(json.dumps(raw), key=KEY)


def in_flight_with(snapshot: CheckpointSnapshot, **changes: Any) -> CheckpointSnapshot:
    item = snapshot.in_flight[0]
    return replace(snapshot, in_flight=(replace(item, state=replace(item.state, **changes)),))


@pytest.mark.parametrize("how", ["a record fewer", "a record naming another call"])
def test_records_that_do_not_pair_with_their_results_are_written_in_full(how: str) -> None:
    # Written once, a record takes its call and output from the n-th result block: a record
    # that is not that block's would be read back with another call's output.
    snapshot = durable(snapshot_with_rounds())
    records = list(snapshot.in_flight[0].state.tool_calls)
    if how == "a record fewer":
        records = records[1:]
    else:
        records[1] = replace(records[1], tool_call_id="c2")
    snapshot = in_flight_with(snapshot, tool_calls=tuple(records))
    text = encode(snapshot)
    written = json.loads(text)["inFlightTasks"][0]["toolCalls"]
    assert all({"toolName", "input", "output"} <= item.keys() for item in written)
    back = decode(text, key=KEY).in_flight[0].state.tool_calls
    assert [(r.tool_name, r.input, r.output) for r in back] == [
        (r.tool_name, r.input, r.output) for r in records
    ]


def test_messages_longer_than_the_conversation_are_written_in_full() -> None:
    snapshot = durable(snapshot_with_rounds())
    state = snapshot.in_flight[0].state
    # Rewritten shorter than the runner's messages, which begin as it does.
    snapshot = in_flight_with(snapshot, conversation=state.messages[:2])
    entry = json.loads(encode(snapshot))["inFlightTasks"][0]
    assert "messagesFrom" not in entry
    assert len(entry["messages"]) == len(state.messages)
    assert decode(encode(snapshot), key=KEY).in_flight[0].state == snapshot.in_flight[0].state
