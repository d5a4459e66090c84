"""The context strategies as pure rewrites: thresholds, tool pairs never split, lineage sources.

Each strategy is applied to hand-built conversations (the prompt, then assistant/user turns)
and its result is checked against the rules of ``agents/context_rules.py``: what is dropped or
replaced, what is kept by identity (so lineage carries over), and that every result can be
sent (``check_sendable``).
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from oma_actors import (
    AgentConfig,
    CompressToolResults,
    ConfigurationError,
    ContextStrategyError,
    CustomContext,
    SlidingWindow,
    Summarize,
    TokenUsage,
)
from oma_actors.agents.context_rules import (
    COMPRESSED_MARK,
    SUMMARY_MARK,
    TRUNCATION_NOTICE,
    check_sendable,
    compress_tool_results,
    custom,
    sliding_window,
    summary_input,
)
from oma_actors.agents.context_step import ContextStep
from oma_actors.journal.context_layout import apply_layout, layout_of
from oma_actors.llm import (
    ChatOptions,
    ImageBlock,
    LLMResponse,
    Message,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
)
from oma_actors.testing import ScriptedAdapter


def conversation(turns: int, *, payload: str = "r", text_every: int = 0) -> tuple[Message, ...]:
    """The prompt and ``turns`` tool turns (every ``text_every``-th a text answer + repair)."""
    out = [Message("user", [TextBlock("prompt")])]
    for i in range(1, turns + 1):
        if text_every and i % text_every == 0:
            out += [Message("assistant", [TextBlock(f"answer {i}")]),
                    Message("user", [TextBlock(f"repair {i}")])]  # fmt: skip
            continue
        calls = [ToolUseBlock(f"c{i}a", "t", {}), ToolUseBlock(f"c{i}b", "t", {})]
        results = [ToolResultBlock(c.id, f"{payload} {c.id}") for c in calls]
        out += [Message("assistant", list(calls)), Message("user", list(results))]
    return tuple(out)


def ids(messages: Sequence[Message]) -> set[int]:
    return {id(b) for m in messages for b in m.content}


# -- SlidingWindow ----------------------------------------------------------------------------


def test_sliding_window_waits_until_the_turns_exceed_the_window() -> None:
    assert sliding_window(conversation(3), SlidingWindow(3)) is None


@pytest.mark.parametrize("window", [1, 2, 3, 5])
@pytest.mark.parametrize("turns", [2, 4, 7])
@pytest.mark.parametrize("text_every", [0, 2, 3])
def test_sliding_window_keeps_the_last_turns_whole(
    window: int, turns: int, text_every: int
) -> None:
    before = conversation(turns, text_every=text_every)
    rewrite = sliding_window(before, SlidingWindow(window))
    if turns <= window:
        assert rewrite is None
        return
    assert rewrite is not None
    after = rewrite.after
    check_sendable(after)  # no tool_use without its tool_result, roles alternate, user last
    assert len(after) == 1 + 2 * window
    assert after[1:] == before[len(before) - 2 * window :]
    assert all(a is b for a, b in zip(after[1:], before[len(before) - 2 * window :], strict=True))
    # The prompt keeps its own block (same object) and gains the notice, a replacement whose
    # sources are the dropped blocks.
    assert after[0].content[0] is before[0].content[0]
    assert after[0].content[-1].text == TRUNCATION_NOTICE  # type: ignore[union-attr]
    [made] = rewrite.replacements
    assert made.block is after[0].content[-1]
    dropped = rewrite.dropped()
    assert [id(b) for b in made.sources] == [id(b) for b in dropped]
    assert len(dropped) == sum(len(m.content) for m in before[1 : len(before) - 2 * window])
    assert rewrite.detail == {"droppedTurns": turns - window}


def test_a_second_window_keeps_the_notice_and_makes_nothing() -> None:
    first = sliding_window(conversation(4), SlidingWindow(2))
    assert first is not None
    grown = (*first.after, *conversation(5)[-2:])
    second = sliding_window(grown, SlidingWindow(2))
    assert second is not None
    assert second.replacements == ()
    assert second.after[0] is not grown[0] or second.after[0].content[-1] is grown[0].content[-1]
    notices = [b for b in second.after[0].content if getattr(b, "text", "") == TRUNCATION_NOTICE]
    assert len(notices) == 1
    assert notices[0] is first.after[0].content[-1]


# -- CompressToolResults ----------------------------------------------------------------------


def test_compress_replaces_only_long_answered_results() -> None:
    before = list(conversation(3, payload="long-output"))
    short = ToolResultBlock("c1b", "ok")
    error = ToolResultBlock("c2a", "e" * 100, is_error=True)
    before[2] = Message("user", [before[2].content[0], short])
    before[4] = Message("user", [error, before[4].content[1]])
    rewrite = compress_tool_results(tuple(before), CompressToolResults(10))
    assert rewrite is not None
    check_sendable(rewrite.after)
    made = {r.block.tool_use_id: r for r in rewrite.replacements}  # type: ignore[union-attr]
    assert sorted(made) == ["c1a", "c2b"]  # not the short one, not the error, not the latest
    assert rewrite.after[-1] is before[-1]
    assert rewrite.after[2].content[1] is short
    assert rewrite.after[4].content[0] is error
    marker = made["c1a"].block
    assert isinstance(marker, ToolResultBlock)
    assert marker.content.startswith(COMPRESSED_MARK)
    assert made["c1a"].sources == (before[2].content[0],)
    assert rewrite.dropped() == [before[2].content[0], before[4].content[1]]


def test_compress_leaves_results_at_the_threshold_and_compresses_once() -> None:
    before = conversation(3, payload="x" * 6)  # "xxxxxx c1a": 10 characters
    assert compress_tool_results(before, CompressToolResults(10)) is None
    rewrite = compress_tool_results(before, CompressToolResults(9))
    assert rewrite is not None
    assert compress_tool_results(rewrite.after, CompressToolResults(9)) is None


def test_compress_waits_for_a_second_round_of_results() -> None:
    assert compress_tool_results(conversation(1, payload="y" * 50), CompressToolResults(1)) is None


# -- CustomContext ----------------------------------------------------------------------------


def test_custom_passthrough_is_no_rewrite() -> None:
    assert custom(conversation(2), CustomContext(lambda messages: list(messages))) is None


def test_custom_blocks_it_makes_are_replacements_of_the_whole_input() -> None:
    def keep_last(messages: list[Message]) -> list[Message]:
        head = Message("user", [TextBlock("condensed")])
        return [head, *messages[-2:]]

    before = conversation(3)
    rewrite = custom(before, CustomContext(keep_last))
    assert rewrite is not None
    [made] = rewrite.replacements
    assert made.block.text == "condensed"  # type: ignore[union-attr]
    assert {id(b) for b in made.sources} == ids(before)
    assert rewrite.after[1:] == before[-2:]


def test_custom_cannot_edit_the_conversation_in_place() -> None:
    def trim(messages: list[Message]) -> list[Message]:
        messages[0].content.append(TextBlock("note"))
        return messages

    before = conversation(1)
    rewrite = custom(before, CustomContext(trim))
    assert rewrite is not None
    assert len(before[0].content) == 1  # the state's own message is untouched
    assert [r.block.text for r in rewrite.replacements] == ["note"]  # type: ignore[union-attr]


@pytest.mark.parametrize("bad", [[], None, ["not a message"]])
def test_custom_must_return_messages(bad: object) -> None:
    strategy = CustomContext(lambda messages: bad)  # type: ignore[arg-type, return-value]
    with pytest.raises(ContextStrategyError, match="non-empty list of Message"):
        custom(conversation(1), strategy)


async def test_a_custom_result_that_splits_a_tool_pair_is_refused() -> None:
    def split(messages: list[Message]) -> list[Message]:
        return [messages[0], messages[-1]]  # results without their calls

    step = ContextStep(
        strategy=CustomContext(split), adapter=ScriptedAdapter([]), options=ChatOptions(model="m")
    )
    with pytest.raises(ContextStrategyError, match="tool_result must follow its tool_use"):
        await step.rewrite(conversation(2))


# -- check_sendable ---------------------------------------------------------------------------


def test_check_sendable_refuses_a_call_without_its_results() -> None:
    convo = conversation(2)
    cut = (convo[0], convo[1], Message("user", [TextBlock("no results")]))
    with pytest.raises(ContextStrategyError, match="a tool_use must keep its tool_result"):
        check_sendable(cut)


def test_check_sendable_refuses_an_assistant_last() -> None:
    with pytest.raises(ContextStrategyError, match="must end with a user message"):
        check_sendable(conversation(1)[:2])


# -- Summarize --------------------------------------------------------------------------------


def summary_script(messages: Sequence[Message], options: ChatOptions) -> LLMResponse:
    assert options.tools == []  # the summary call never offers tools
    return LLMResponse([TextBlock("  short  ")], usage=TokenUsage(11, 4))


async def test_summarize_waits_for_its_threshold() -> None:
    adapter = ScriptedAdapter(summary_script)
    step = ContextStep(strategy=Summarize(10_000), adapter=adapter, options=ChatOptions(model="m"))
    assert await step.rewrite(conversation(4)) is None
    assert adapter.call_count == 0


async def test_summarize_replaces_the_older_half_and_supersedes_its_last_summary() -> None:
    adapter = ScriptedAdapter(summary_script)
    step = ContextStep(strategy=Summarize(10), adapter=adapter, options=ChatOptions(model="sum"))
    before = conversation(4)
    rewrite = await step.rewrite(before)
    assert rewrite is not None
    assert adapter.call_count == 1
    assert rewrite.after[1:] == before[5:]
    assert rewrite.after[1] is before[5]
    [made] = rewrite.replacements
    assert made.block.text == f"{SUMMARY_MARK}\nshort"  # type: ignore[union-attr]
    assert {id(b) for b in made.sources} == ids(before[1:5])
    assert rewrite.usage == TokenUsage(11, 4)
    assert rewrite.detail == {
        "summaryModel": "sum",
        "usage": {"input_tokens": 11, "output_tokens": 4},
    }
    # The next summary is told the previous one and replaces it.
    grown = (*rewrite.after, *conversation(6)[-4:])
    again = await step.rewrite(grown)
    assert again is not None
    assert made.block in again.replacements[0].sources
    assert adapter.calls[1].prompt.count(f"{SUMMARY_MARK}") == 1
    summaries = [
        b for b in again.after[0].content if getattr(b, "text", "").startswith(SUMMARY_MARK)
    ]
    assert len(summaries) == 1
    assert summaries[0] is again.replacements[0].block


async def test_summarize_needs_two_turns() -> None:
    adapter = ScriptedAdapter(summary_script)
    step = ContextStep(strategy=Summarize(1), adapter=adapter, options=ChatOptions(model="m"))
    assert await step.rewrite(conversation(1)) is None


# -- configuration and layout -----------------------------------------------------------------


@pytest.mark.parametrize(
    "make",
    [lambda: SlidingWindow(0), lambda: Summarize(0), lambda: CompressToolResults(-1),
     lambda: SlidingWindow(True), lambda: CustomContext(3),  # type: ignore[arg-type]
     lambda: Summarize(5, summarizer="m")],  # type: ignore[arg-type]
)  # fmt: skip
def test_bad_strategies_are_refused(make: object) -> None:
    with pytest.raises(ConfigurationError):
        make()  # type: ignore[operator]


def test_agent_config_refuses_an_unknown_strategy() -> None:
    with pytest.raises(ConfigurationError, match="context_strategy"):
        AgentConfig("a", context_strategy="sliding")  # type: ignore[arg-type]


def test_layout_round_trips_with_lineage() -> None:
    before = conversation(4)
    rewrite = sliding_window(before, SlidingWindow(1))
    assert rewrite is not None
    derived = [r.block for r in rewrite.replacements]
    layout = layout_of(rewrite.before, rewrite.after, derived)
    lineage = tuple(
        tuple((10 * m + b,) for b in range(len(msg.content))) for m, msg in enumerate(before)
    )
    rebuilt, rows = apply_layout(before, lineage, layout, derived, 99)
    assert rebuilt == rewrite.after
    assert rows is not None
    assert rows[0] == ((0,), (99,))  # the prompt's block, then the notice from the replace
    assert rows[1] == lineage[7]
    # The survivors are one run of unchanged messages, not a list of their blocks.
    assert layout[1:] == [{"keep": [7, 8]}]


def test_a_layout_grows_with_what_changed_not_with_the_conversation() -> None:
    before = conversation(40, payload="z" * 50)
    grown = (*before, *conversation(41, payload="z" * 50)[-2:])
    first = compress_tool_results(grown, CompressToolResults(10))
    assert first is not None
    again = (*first.after, *conversation(42, payload="z" * 50)[-2:])
    rewrite = compress_tool_results(again, CompressToolResults(10))
    assert rewrite is not None
    assert len(rewrite.replacements) == 2  # the one round answered since the last rewrite
    layout = layout_of(rewrite.before, rewrite.after, [r.block for r in rewrite.replacements])
    assert len(layout) == 3  # unchanged run, the compressed message, unchanged run
    rebuilt, _ = apply_layout(
        rewrite.before, None, layout, [r.block for r in rewrite.replacements], 1
    )
    assert rebuilt == rewrite.after


def test_a_message_keeping_part_of_one_or_taking_another_role_is_no_keep() -> None:
    # Its blocks are a prefix of one message of before (or all of them, under another role):
    # recorded as "keep" it would come back whole, or as the other role, on restore.
    text, use = TextBlock("look"), ToolUseBlock("c1", "search", {})
    before = (Message("user", [TextBlock("go")]), Message("assistant", [text, use]))
    for after in (
        (before[0], Message("assistant", [text])),
        (before[0], Message("user", [text, use])),
    ):
        layout = layout_of(before, after, [])
        assert layout[1] != {"keep": [1, 1]}
        rebuilt, _ = apply_layout(before, None, layout, [], 1)
        assert rebuilt == after


@pytest.mark.parametrize("layout", [None, [], [{"role": "user", "blocks": [[9, 0]]}],
                                    [{"role": "user", "blocks": [3]}],
                                    [{"role": "system", "blocks": [[0, 0]]}],
                                    [{"keep": [0, 5]}], [{"keep": [1, 0]}], [{"keep": 0}]])  # fmt: skip
def test_a_bad_layout_is_refused(layout: object) -> None:
    with pytest.raises(ValueError, match="layout"):
        apply_layout(conversation(1), None, layout, [], 5)


def test_the_summary_request_shows_images_as_placeholders_even_inside_tool_results() -> None:
    # A base64 image would make the summary request larger than what it summarizes.
    picture = ImageBlock(media_type="image/png", data="iVBORw0KGgo" * 1000)
    older = [
        Message("user", [TextBlock("look"), picture]),
        Message("user", [ToolResultBlock("c1", [TextBlock("shot"), picture])]),
    ]
    text = summary_input(older, None)
    assert "iVBORw0KGgo" not in text
    assert text.count("[image: image/png]") == 2
    assert "shot" in text
