"""``runner_to_json``/``runner_from_json``: an in-flight entry with OMA's members and no others,
its records read back with the ids and error flags of their calls."""

from __future__ import annotations

import json
from typing import Any

from oma_actors.domain.inflight import PendingCall, RunnerState, ToolCommit
from oma_actors.domain.jsonforms import records_from_json, runner_from_json, runner_to_json
from oma_actors.domain.messages import Message, TextBlock, ToolResultBlock, ToolUseBlock
from oma_actors.domain.results import ToolCallRecord


def _completed(**changes: Any) -> RunnerState:
    prompt = Message("user", [TextBlock("look things up")])
    return RunnerState(
        phase="completed", conversation=(prompt,), turns=2, final_output="x", **changes
    )


def test_a_budget_failure_is_carried_by_budget_exceeded_alone() -> None:
    """OMA's in-flight entry has no ``success``: an over-budget completion must not add one."""
    over_budget = _completed(success=False, budget_exceeded=True)
    out = runner_to_json("t1", "worker", over_budget)
    assert "success" not in out
    assert out["budgetExceeded"] is True
    assert runner_from_json(out) == over_budget  # read back as failed


def test_a_failure_oma_never_persists_keeps_our_success_member() -> None:
    stopped = _completed(success=False)  # e.g. a failed model call: no OMA member says it
    out = runner_to_json("t1", "worker", stopped)
    assert out["success"] is False
    assert runner_from_json(out) == stopped
    assert "success" not in runner_to_json("t1", "worker", _completed())


def _record(output: str) -> dict[str, Any]:
    return {"toolName": "price", "input": {"sku": "a"}, "output": output, "duration": 1}


def test_records_take_the_id_and_error_of_the_call_whose_result_they_hold() -> None:
    # OMA's record has neither; the conversation has both. Two calls of one tool with one
    # input are told apart by their results; a record whose call the conversation no longer
    # holds (a context strategy summarized it away) takes no other call's id.
    def turn(call_id: str, output: str, error: bool = False) -> list[Message]:
        use = ToolUseBlock(call_id, "price", {"sku": "a"})
        result = ToolResultBlock(call_id, output, is_error=error)
        return [Message("assistant", [use]), Message("user", [result])]

    messages = [*turn("c2", "down", error=True), *turn("c3", "11")]
    raw = [_record("12"), _record("down"), _record("11")]  # c1 ("12") was summarized away
    records = records_from_json(raw, messages)
    assert [(r.tool_call_id, r.is_error) for r in records] == [
        ("", False),
        ("c2", True),
        ("c3", False),
    ]
    # An id a model used again in a later turn still pairs each record with its own result.
    again = [*turn("c", "12"), *turn("c", "down", error=True)]
    assert [(r.tool_call_id, r.is_error) for r in records_from_json(raw[:2], again)] == [
        ("c", False),
        ("c", True),
    ]


def test_a_pending_commit_s_record_takes_its_call_s_id() -> None:
    # This round's commits are not in the conversation yet: their results are the pending
    # calls' commit blocks.
    use = ToolUseBlock("c1", "price", {"sku": "a"})
    record = ToolCallRecord(tool_name="price", input={"sku": "a"}, output="11", duration_ms=1,
                            tool_call_id="c1")  # fmt: skip
    state = RunnerState(
        phase="executing_tools",
        conversation=(Message("user", [TextBlock("go")]), Message("assistant", [use])),
        turns=1,
        tool_calls=(record,),
        pending=(
            PendingCall(
                call=use, commit=ToolCommit(block=ToolResultBlock("c1", "11"), record=record)
            ),
        ),
    )
    assert runner_from_json(runner_to_json("t1", "worker", state)) == state


def _talk(input_value: object) -> RunnerState:
    prompt = Message("user", [TextBlock("look things up")])
    use = Message("assistant", [ToolUseBlock("c1", "price", {"sku": input_value})])
    answer = Message("user", [ToolResultBlock("c1", "12")])
    return RunnerState(
        phase="awaiting_model", conversation=(prompt, use, answer), messages=(use, answer), turns=1
    )


def test_messages_that_are_the_conversation_s_end_are_its_decoded_messages() -> None:
    """The entry holds the run's messages twice (OMA's format); read back, they are the
    conversation's own (frozen) objects, as a running runner holds them, not a second decode."""
    out = runner_to_json("t1", "worker", _talk(1))
    state = runner_from_json(out)
    assert state == _talk(1)
    assert all(a is b for a, b in zip(state.messages, state.conversation[1:], strict=True))


def test_messages_that_differ_from_the_conversation_are_decoded_on_their_own() -> None:
    """Python's ``==`` takes ``1 == 1.0 == True``; JSON does not. A ``messages`` member that
    differs from the conversation only so, or in any other way, keeps its own values."""
    for value in (1.0, True, 2):
        out = json.loads(json.dumps(runner_to_json("t1", "worker", _talk(1))))  # as read
        out["messages"][0]["content"][0]["input"]["sku"] = value
        state = runner_from_json(out)
        read = state.messages[0].content[0]
        assert isinstance(read, ToolUseBlock)
        assert type(read.input["sku"]) is type(value)
        assert read.input["sku"] == value
        assert state.conversation == _talk(1).conversation
    out = runner_to_json("t1", "worker", _talk(1))
    out["messages"] = out["messages"][:1]  # not the conversation's end: decoded alone
    assert runner_from_json(out).messages == _talk(1).messages[:1]
