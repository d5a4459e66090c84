"""The size estimate and the compression marker count what OMA counts, as JavaScript counts it.

OMA's ``estimateTokens`` (``utils/tokens.ts``) adds up content characters only: a text or
reasoning block's text, a tool result's ``toolResultContentSize`` (``tool/result.ts``), the
``JSON.stringify`` of a tool call's input and a flat 64 per image; then ``ceil(chars / 4)``.
Lengths are JavaScript's ``.length``: UTF-16 code units, so a character past U+FFFF counts 2.
An image counted at its base64 length would keep ``Summarize`` above its threshold for good: it
would ask for a summary before every model call.
"""

from __future__ import annotations

from collections.abc import Sequence

from context_scenario import script, team

from oma_actors import CompressToolResults, Summarize
from oma_actors.agents.context_rules import (
    compress_tool_results,
    estimate_tokens,
    tool_result_content_size,
)
from oma_actors.agents.runner import resolve_agent, run_task
from oma_actors.domain.inflight import RunnerState
from oma_actors.llm import (
    ContentBlock,
    ImageBlock,
    Message,
    ReasoningBlock,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
)
from oma_actors.testing import ScriptedAdapter

PICTURE = ImageBlock("image/png", data="iVBORw0KGgo=" * 400)  # 4,800 characters of base64


def size(*blocks: ContentBlock) -> int:
    return estimate_tokens([Message("user", list(blocks))])


def test_an_image_counts_64_characters_whatever_its_size() -> None:
    assert size(PICTURE) == 16
    assert size(TextBlock("abcd"), PICTURE) == 17  # (4 + 64) / 4
    assert size(ImageBlock("image/png", url="https://example.test/a.png")) == 16


def test_a_tool_call_counts_the_javascript_json_of_its_input() -> None:
    # JSON.stringify({b: 1.0, a: "x"}) is '{"b":1,"a":"x"}': 15 characters, keys in their order
    # and the number as JavaScript writes it (Python's json would write 1.0 and spaces). The
    # call's id and name are not content: only the input counts.
    call = ToolUseBlock("call-with-a-long-id", "a_tool_with_a_long_name", {"b": 1.0, "a": "x"})
    assert size(call, TextBlock("y")) == 4  # 15 + 1 characters
    assert size(call, TextBlock("yz")) == 5


def test_a_tool_result_counts_its_content_size() -> None:
    # toolResultContentSize: text is its length; an image part is its base64 (or URL), its
    # media type and 32 more.
    assert tool_result_content_size("hello") == 5
    inline = ImageBlock("image/png", data="QUJD")
    linked = ImageBlock("image/png", url="https://x.test/a.png")
    assert tool_result_content_size([TextBlock("abc"), inline]) == 3 + (4 + 9 + 32)
    assert tool_result_content_size([linked]) == 20 + 9 + 32
    result = ToolResultBlock("c1", [TextBlock("abc"), inline, linked])
    assert size(result) == -(-(48 + 61) // 4)  # the tool_use_id and the JSON around are not
    assert size(ToolResultBlock("c1", "x" * 8)) == 2


def test_lengths_are_utf16_code_units() -> None:
    # Three emoji are 3 code points but 6 UTF-16 code units: 2 tokens, not 1.
    assert size(TextBlock("\U0001f600" * 3)) == 2
    assert size(ReasoningBlock("\U0001f600" * 3)) == 2
    assert tool_result_content_size("\U0001f600" * 3) == 6
    assert size(ToolUseBlock("c1", "t", {"k": "\U0001f600"})) == 3  # {"k":"😀"}: 10 units
    assert size(TextBlock("é" * 5)) == 2  # a BMP character is one unit


def test_the_compression_marker_is_omas() -> None:
    # OMA: "[Tool output compressed — N chars, already processed]", or "N estimated chars" for
    # rich content, N its toolResultContentSize.
    def turns(output: str | list[ContentBlock]) -> tuple[Message, ...]:
        out = [Message("user", [TextBlock("prompt")])]
        for call_id, result in (("c1", output), ("c2", "latest")):
            out += [Message("assistant", [ToolUseBlock(call_id, "t", {})]),
                    Message("user", [ToolResultBlock(call_id, result)])]  # fmt: skip
        return tuple(out)

    plain = compress_tool_results(turns("\U0001f600" * 30), CompressToolResults(50))
    assert plain is not None
    assert plain.after[2].content[0] == ToolResultBlock(
        "c1", "[Tool output compressed — 60 chars, already processed]"
    )
    rich = compress_tool_results(
        turns([TextBlock("shot"), ImageBlock("image/png", data="QUJD")]), CompressToolResults(40)
    )
    assert rich is not None
    assert rich.after[2].content[0] == ToolResultBlock(
        "c1", "[Tool output compressed — 49 estimated chars, already processed]"
    )


async def summary_calls(prompt: Sequence[ContentBlock]) -> tuple[int, int]:
    """(summary calls, model turns) of the step scenario under ``Summarize(70)`` from ``prompt``."""
    adapter = ScriptedAdapter(script)
    agent = team(adapter, Summarize(70)).agents[0]
    start = RunnerState(phase="awaiting_model", conversation=(Message("user", list(prompt)),))
    outcome = await run_task(
        resolve_agent(agent), None, "", run_id=None, emit=lambda event: None, resume=start
    )
    assert outcome.result.success, outcome.result.output
    summaries = sum(not call.options.tools for call in adapter.calls)
    return summaries, len(adapter.calls) - summaries


async def test_an_image_in_the_prompt_does_not_summarize_before_every_call() -> None:
    with_image = await summary_calls([TextBlock("do the steps"), PICTURE])
    with_text = await summary_calls([TextBlock("do the steps"), TextBlock("p" * 64)])
    # The image costs what 64 characters of text cost: the same summaries, at the same turns.
    assert with_image == with_text
    summaries, turns = with_image
    assert 1 <= summaries < turns - 2  # never before the first two turns; here not every later
