"""run_agent end to end: the turn loop, tools, limits and errors through the public API."""

from __future__ import annotations

import asyncio

from acceptance_helpers import answer, calls
from pydantic import BaseModel

from oma_actors import AgentConfig, OpenMultiAgent, ToolContext, define_tool
from oma_actors.errors import AuthenticationError, RateLimitError
from oma_actors.llm import LLMResponse, TextBlock, ToolResultBlock, ToolUseBlock
from oma_actors.testing import ScriptedAdapter


class Echo(BaseModel):
    text: str


async def test_final_answer_with_usage_and_turns() -> None:
    adapter = ScriptedAdapter([answer("hello", usage=(5, 7))])
    result = await OpenMultiAgent().run_agent(AgentConfig("a", adapter=adapter), "hi")
    assert result.success
    assert result.output == "hello"
    assert result.turns == 1
    assert (result.token_usage.input_tokens, result.token_usage.output_tokens) == (5, 7)
    assert adapter.calls[0].prompt == "hi"


async def test_parallel_tool_calls_run_concurrently_and_return_in_call_order() -> None:
    both_started = asyncio.Event()
    running = 0
    contexts: list[ToolContext] = []

    async def slow_echo(args: BaseModel, ctx: ToolContext) -> str:
        nonlocal running
        assert isinstance(args, Echo)
        contexts.append(ctx)
        running += 1
        if running == 2:
            both_started.set()
        # Both calls must be in flight at once, or this wait times out.
        await asyncio.wait_for(both_started.wait(), timeout=2)
        # The first call finishes last, so completion order differs from call order.
        await asyncio.sleep(0.05 if args.text == "first" else 0)
        return args.text.upper()

    tool = define_tool(name="echo", description="", input_model=Echo, execute=slow_echo)
    adapter = ScriptedAdapter(
        [
            calls(("t1", "echo", {"text": "first"}), ("t2", "echo", {"text": "second"})),
            answer("done"),
        ]
    )
    agent = AgentConfig("worker", adapter=adapter, tools=[tool])
    result = await OpenMultiAgent().run_agent(agent, "go")
    assert result.output == "done"
    results = adapter.calls[1].messages[-1].content
    assert [block.tool_use_id for block in results if isinstance(block, ToolResultBlock)] == [
        "t1",
        "t2",
    ]
    assert [block.content for block in results if isinstance(block, ToolResultBlock)] == [
        "FIRST",
        "SECOND",
    ]
    assert [record.tool_call_id for record in result.tool_calls] == ["t1", "t2"]
    assert {ctx.tool_call_id for ctx in contexts} == {"t1", "t2"}
    assert all(ctx.agent_name == "worker" and ctx.task_attempt == 1 for ctx in contexts)
    assert result.turns == 2


async def test_unknown_tool_and_bad_input_reach_the_model_as_errors() -> None:
    async def echo(args: BaseModel, ctx: ToolContext) -> str:
        return "unused"

    tool = define_tool(name="echo", description="", input_model=Echo, execute=echo)
    adapter = ScriptedAdapter(
        [calls(("a", "nope", {}), ("b", "echo", {"wrong": 1})), answer("recovered")]
    )
    result = await OpenMultiAgent().run_agent(AgentConfig("w", adapter=adapter, tools=[tool]), "x")
    blocks = [b for b in adapter.calls[1].messages[-1].content if isinstance(b, ToolResultBlock)]
    assert [block.is_error for block in blocks] == [True, True]
    assert "not available" in str(blocks[0].content)
    assert "text" in str(blocks[1].content)
    assert result.success


async def test_max_turns_stops_the_loop_and_the_run_ends_normally() -> None:
    # OMA (runner.ts: ``if (turns >= this.maxTurns) break``, then "use whatever text was last
    # emitted"; agent.ts: a plain result is ``success`` with status ``ok``): the stop is no
    # failure, the output is the last assistant message's text.
    async def echo(args: BaseModel, ctx: ToolContext) -> str:
        return "again"

    tool = define_tool(name="echo", description="", input_model=Echo, execute=echo)

    def forever(messages: object, options: object) -> object:
        n = len(adapter.calls)
        call = ToolUseBlock(f"c{n}", "echo", {"text": "x"})
        return LLMResponse([TextBlock(f"still working {n}"), call], stop_reason="tool_use")

    adapter = ScriptedAdapter(forever)  # type: ignore[arg-type]
    agent = AgentConfig("w", adapter=adapter, tools=[tool], max_turns=3)
    result = await OpenMultiAgent().run_agent(agent, "loop")
    assert adapter.call_count == 3
    assert result.turns == 3
    assert result.success
    assert result.status is None  # the plain ``ok``
    assert result.output == "still working 3"
    assert [m.role for m in result.messages] == ["assistant", "user"] * 3
    assert len(result.tool_calls) == 3


async def test_max_turns_with_a_silent_last_turn_has_an_empty_output() -> None:
    # OMA takes the LAST assistant message's text, even when it is empty (no fallback text).
    async def echo(args: BaseModel, ctx: ToolContext) -> str:
        return "again"

    tool = define_tool(name="echo", description="", input_model=Echo, execute=echo)
    adapter = ScriptedAdapter(
        [
            LLMResponse(
                [TextBlock("first look"), ToolUseBlock("c1", "echo", {"text": "x"})],
                stop_reason="tool_use",
            ),
            calls(("c2", "echo", {"text": "x"})),
        ]
    )
    agent = AgentConfig("w", adapter=adapter, tools=[tool], max_turns=2)
    result = await OpenMultiAgent().run_agent(agent, "loop")
    assert (result.success, result.output, result.turns) == (True, "", 2)


async def test_provider_error_fails_the_run_without_raising() -> None:
    class Failing:
        async def chat(self, messages: object, options: object) -> object:
            raise AuthenticationError("anthropic", "bad key", status=401)

    result = await OpenMultiAgent().run_agent(AgentConfig("w", adapter=Failing()), "x")  # type: ignore[arg-type]
    assert not result.success
    assert "bad key" in result.output


async def test_run_agent_is_a_single_attempt_even_for_retryable_errors() -> None:
    attempts = 0

    class Limited:
        async def chat(self, messages: object, options: object) -> object:
            nonlocal attempts
            attempts += 1
            raise RateLimitError("openai", "slow down", status=429)

    result = await OpenMultiAgent().run_agent(AgentConfig("w", adapter=Limited()), "x")  # type: ignore[arg-type]
    assert attempts == 1
    assert not result.success


async def test_tool_use_block_ids_are_kept_in_the_conversation() -> None:
    async def echo(args: BaseModel, ctx: ToolContext) -> str:
        return ctx.tool_call_id

    tool = define_tool(name="echo", description="", input_model=Echo, execute=echo)
    adapter = ScriptedAdapter([calls(("toolu_42", "echo", {"text": "x"})), answer("ok")])
    await OpenMultiAgent().run_agent(AgentConfig("w", adapter=adapter, tools=[tool]), "x")
    assistant = adapter.calls[1].messages[1]
    assert isinstance(assistant.content[0], ToolUseBlock)
    assert assistant.content[0].id == "toolu_42"
    result_block = adapter.calls[1].messages[2].content[0]
    assert isinstance(result_block, ToolResultBlock)
    assert result_block.content == "toolu_42"
