"""Tool call ids unique in a task's transcript (``oma_actors.agents.call_ids``)."""

from __future__ import annotations

from oma_actors.agents.call_ids import distinct_call_ids, transcript_call_ids
from oma_actors.domain.messages import (
    LLMResponse,
    Message,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
)

EARLIER = (
    Message("user", [TextBlock("go")]),
    Message("assistant", [ToolUseBlock("0", "search", {})]),
    Message("user", [ToolResultBlock("0", "found")]),
)


def _response(*ids: str) -> LLMResponse:
    return LLMResponse(
        [TextBlock("calling"), *(ToolUseBlock(i, f"tool{n}", {"n": n}) for n, i in enumerate(ids))],
        stop_reason="tool_use",
    )


def test_the_transcript_s_ids_are_its_calls_ids() -> None:
    assert transcript_call_ids(EARLIER) == {"0"}
    assert transcript_call_ids(()) == set()


def test_an_id_the_transcript_or_the_response_already_holds_or_none_gets_a_fresh_one() -> None:
    used = transcript_call_ids(EARLIER)
    response = _response("0", "y", "y", "", "x")

    got = distinct_call_ids(response, used)

    uses = got.tool_uses
    assert [u.name for u in uses] == ["tool0", "tool1", "tool2", "tool3", "tool4"]
    assert [u.input for u in uses] == [{"n": n} for n in range(5)]
    assert uses[0].id.startswith("call_")  # "0" was the earlier turn's
    assert uses[1].id == "y"  # an id of its own is the model's, as sent
    assert uses[2].id.startswith("call_")  # "y" again in the same response
    assert uses[3].id.startswith("call_")  # none given
    assert uses[4].id == "x"
    assert len({u.id for u in uses}) == 5
    assert got.content[0] == TextBlock("calling")  # the rest of the response as it was
    assert used == {"0", *(u.id for u in uses)}  # the next response is checked against them


def test_a_response_whose_ids_are_all_new_is_returned_as_it_is() -> None:
    used = {"0"}
    response = _response("a", "b")

    assert distinct_call_ids(response, used) is response
    assert used == {"0", "a", "b"}
