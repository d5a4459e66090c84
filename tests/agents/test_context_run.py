"""Context strategies in a run: the journal's ``context/replace`` events, usage and failures.

Every strategy runs the step scenario with a journal under ``enforce_lineage``: the run
succeeds, each rewrite is a ``context/replace`` whose replacements name their sources, the
requests after it name the replace for the blocks it made, and ``verify_run`` passes. A
summary call's tokens are the task's (``detail.usage``, the result's usage, the budget).
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from context_scenario import SUMMARY, script, sent, team

from oma_actors import (
    AgentConfig,
    CheckpointOptions,
    CompressToolResults,
    CustomContext,
    OpenMultiAgent,
    SlidingWindow,
    Summarize,
    Task,
    TokenUsage,
)
from oma_actors.agents.context import ContextStrategy
from oma_actors.agents.context_rules import SUMMARY_MARK
from oma_actors.journal import InMemoryRunJournal, JournalEvent, JournalOptions, verify_run
from oma_actors.llm import Message, TextBlock
from oma_actors.stores import InMemoryStore
from oma_actors.testing import ScriptedAdapter, text_response

TASKS = [Task("steps", "do the steps", id="a")]


def condense(messages: list[Message]) -> list[Message]:
    """Keep the prompt and the last turn, with a note of its own."""
    if len(messages) < 5:
        return messages
    prompt = Message("user", [*messages[0].content, TextBlock(f"{len(messages)} messages")])
    return [prompt, *messages[-2:]]


async def run(
    strategy: ContextStrategy, *, durable: bool = False, budget: int | None = None
) -> tuple[ScriptedAdapter, object, list[JournalEvent]]:
    adapter = ScriptedAdapter(script)
    journal = InMemoryRunJournal()
    the_team = team(adapter, strategy)
    if budget is not None:
        agent = replace(the_team.agents[0], max_token_budget=budget)
        the_team = replace(the_team, agents=(agent,))
    result = await OpenMultiAgent().run_tasks(
        the_team, TASKS,
        checkpoint=CheckpointOptions(store=InMemoryStore(), run_id="r1"),
        journal=JournalOptions(journal, durable=durable, enforce_lineage=True),
    )  # fmt: skip
    return adapter, result, await journal.read_from(0)


STRATEGIES = {
    "sliding-window": SlidingWindow(2),
    "compress-tool-results": CompressToolResults(10),
    "summarize": Summarize(60),
    "custom": CustomContext(condense),
}


@pytest.mark.parametrize("durable", [False, True])
@pytest.mark.parametrize("kind", sorted(STRATEGIES))
async def test_each_strategy_is_journaled_with_lineage(kind: str, durable: bool) -> None:
    adapter, result, events = await run(STRATEGIES[kind], durable=durable)
    assert result.success, result.status  # type: ignore[attr-defined]
    replaces = [e for e in events if e.type == "context/replace"]
    assert replaces
    assert {e.data["strategy"] for e in replaces} == {kind}
    by_seq = {e.seq: e for e in events}
    for event in replaces:
        assert (event.task_id, event.agent_name) == ("a", "w")
        assert event.data["detail"]["layout"]
        for made in event.data["replacements"]:
            assert made["sourceEventSeqs"]
            assert all(by_seq[s].type in ("user/message", "assistant/message", "context/replace")
                       for s in made["sourceEventSeqs"])  # fmt: skip
        # OMA's order: turn/start, context/replace, then the request that sends the rewrite.
        assert by_seq[event.seq - 1].type == "turn/start"
        assert by_seq[event.seq + 1].type == "llm/request"
        blocks = by_seq[event.seq + 1].data["blocks"]
        assert sum(b["sourceEventSeqs"] == [event.seq] for b in blocks) == len(
            event.data["replacements"]
        )
    verdict = await verify_run(events)
    assert verdict.ok, verdict.failures
    assert verdict.stats["blocks_checked"] > 0
    assert len(sent(adapter)) == 6  # five steps and the answer, whatever was cut


async def test_without_a_strategy_nothing_is_replaced() -> None:
    adapter = ScriptedAdapter(script)
    journal = InMemoryRunJournal()
    await OpenMultiAgent().run_tasks(
        team(adapter, None), TASKS, journal=JournalOptions(journal)
    )  # fmt: skip
    assert not [e for e in await journal.read_from(0) if e.type == "context/replace"]


async def test_the_summary_call_counts_as_the_tasks_usage() -> None:
    _plain_adapter, plain, _ = await run(SlidingWindow(100))
    adapter, result, events = await run(Summarize(60))
    summaries = [c for c in adapter.calls if not c.options.tools]
    assert summaries
    spent = TokenUsage(7 * len(summaries), 3 * len(summaries))
    assert result.token_usage == plain.token_usage + spent  # type: ignore[attr-defined]
    replaces = [e for e in events if e.type == "context/replace"]
    assert [e.data["detail"]["usage"] for e in replaces] == [
        {"input_tokens": 7, "output_tokens": 3}
    ] * len(summaries)
    assert SUMMARY_MARK + "\n" + SUMMARY in adapter.calls[-1].prompt


async def test_a_summary_call_can_spend_the_agents_budget() -> None:
    # Five steps with a window that never cuts cost 11/6 (17 tokens): under a budget of 20.
    _, within, _ = await run(SlidingWindow(100), budget=20)
    assert within.success  # type: ignore[attr-defined]
    _, result, _ = await run(Summarize(60), budget=20)
    assert not result.success  # type: ignore[attr-defined]
    assert result.status.code == "budget_exhausted"  # type: ignore[attr-defined]


async def test_a_summarizer_agent_writes_the_summary() -> None:
    writer = ScriptedAdapter(lambda messages, options: text_response("by the writer"))
    summarizer = AgentConfig("writer", model="small", adapter=writer)
    adapter, result, events = await run(Summarize(60, summarizer=summarizer))
    assert result.success  # type: ignore[attr-defined]
    assert writer.call_count >= 1
    assert all(c.options.model == "small" for c in writer.calls)
    assert not [c for c in adapter.calls if not c.options.tools]  # the agent's model wrote none
    [first, *_] = [e for e in events if e.type == "context/replace"]
    assert first.data["detail"]["summaryModel"] == "small"
    assert "by the writer" in first.data["replacements"][0]["block"]["text"]


async def test_a_strategy_that_breaks_the_conversation_fails_the_task_for_good() -> None:
    def broken(messages: list[Message]) -> list[Message]:
        return [messages[0], messages[-1]] if len(messages) > 2 else messages

    adapter = ScriptedAdapter(script)
    result = await OpenMultiAgent().run_tasks(
        team(adapter, CustomContext(broken)), [Task("s", "steps", id="a", max_retries=2)]
    )  # fmt: skip
    assert not result.success
    [task] = result.tasks
    assert "a tool_result must follow its tool_use" in (task.result or "")
    assert len(sent(adapter)) == 1  # not retried: the same conversation would be refused again
