"""define_tool, input validation and tool-call execution."""

from __future__ import annotations

import asyncio

import pytest
from pydantic import BaseModel

from oma_actors import ConfigurationError, ToolContext, ToolResult, define_tool
from oma_actors.llm import ToolUseBlock
from oma_actors.tools import execute_tool_call


class Add(BaseModel):
    a: int
    b: int


async def add(args: BaseModel, ctx: ToolContext) -> str:
    assert isinstance(args, Add)
    return str(args.a + args.b)


ADD = define_tool(name="add", description="add two ints", input_model=Add, execute=add)
CTX = ToolContext(run_id="r", task_id="t", tool_call_id="c1", agent_name="w", task_attempt=1)


def test_spec_exposes_the_pydantic_schema() -> None:
    spec = ADD.spec
    assert spec.name == "add"
    assert spec.input_schema["required"] == ["a", "b"]
    assert spec.input_schema["properties"]["a"]["type"] == "integer"


@pytest.mark.parametrize(
    ("kwargs", "fragment"),
    [
        ({"name": "bad name"}, "tool name"),
        ({"name": ""}, "tool name"),
        ({"input_model": dict}, "input_model"),
        ({"effect": "risky"}, "effect"),
    ],
)
def test_malformed_definitions_raise(kwargs: dict[str, object], fragment: str) -> None:
    base: dict[str, object] = {
        "name": "ok",
        "description": "d",
        "input_model": Add,
        "execute": add,
    }
    with pytest.raises(ConfigurationError, match=fragment):
        define_tool(**{**base, **kwargs})  # type: ignore[arg-type]


async def test_valid_call_returns_result_and_record() -> None:
    outcome = await execute_tool_call(
        ToolUseBlock("c1", "add", {"a": 2, "b": 3}), {"add": ADD}, CTX
    )
    assert outcome.block.tool_use_id == "c1"
    assert outcome.block.content == "5"
    assert not outcome.block.is_error
    assert outcome.record.tool_name == "add"
    assert outcome.record.input == {"a": 2, "b": 3}
    assert outcome.record.output == "5"


async def test_a_plain_function_s_return_value_is_its_result_and_it_runs_once() -> None:
    """A sync ``execute`` has run its effect when it returns: awaiting its value would raise
    ``TypeError``, shown to the model as a failed call it could retry (a second effect)."""
    ran: list[int] = []

    def charge(args: BaseModel, ctx: ToolContext) -> ToolResult:
        assert isinstance(args, Add)
        ran.append(args.a)
        return ToolResult(f"charged {args.a}")

    tool = define_tool(name="charge", description="charge", input_model=Add, execute=charge)
    outcome = await execute_tool_call(
        ToolUseBlock("c1", "charge", {"a": 7, "b": 0}), {"charge": tool}, CTX
    )
    assert (outcome.block.content, outcome.block.is_error) == ("charged 7", False)
    assert ran == [7]


async def test_rich_content_that_is_no_content_block_is_an_error_result() -> None:
    """A dict in the provider's JSON shape cannot be sent, journaled or checkpointed (its
    snapshot would not restore): the call ends in an error result naming the part."""

    async def rich(args: BaseModel, ctx: ToolContext) -> ToolResult:
        return ToolResult("x", content=({"type": "text", "text": "hi"},))  # type: ignore[arg-type]

    tool = define_tool(name="rich", description="rich", input_model=Add, execute=rich)
    outcome = await execute_tool_call(
        ToolUseBlock("c1", "rich", {"a": 1, "b": 2}), {"rich": tool}, CTX
    )
    assert outcome.block.is_error
    assert "part 0 is a dict" in str(outcome.block.content)


async def test_invalid_input_is_an_error_result_naming_the_field() -> None:
    outcome = await execute_tool_call(ToolUseBlock("c1", "add", {"a": "x"}), {"add": ADD}, CTX)
    assert outcome.block.is_error
    text = str(outcome.block.content)
    assert "a:" in text
    assert "b:" in text


async def test_unknown_tool_is_an_error_result() -> None:
    outcome = await execute_tool_call(ToolUseBlock("c1", "rm", {}), {"add": ADD}, CTX)
    assert outcome.block.is_error
    assert '"rm" is not available' in str(outcome.block.content)


async def test_tool_exception_is_an_error_result() -> None:
    async def boom(args: BaseModel, ctx: ToolContext) -> str:
        raise RuntimeError("disk full")

    tool = define_tool(name="boom", description="", input_model=Add, execute=boom)
    outcome = await execute_tool_call(
        ToolUseBlock("c", "boom", {"a": 1, "b": 1}), {"boom": tool}, CTX
    )
    assert outcome.block.is_error
    assert "RuntimeError: disk full" in str(outcome.block.content)


async def test_tool_result_error_flag_and_context_are_passed() -> None:
    seen: list[ToolContext] = []

    async def check(args: BaseModel, ctx: ToolContext) -> ToolResult:
        seen.append(ctx)
        return ToolResult("nope", is_error=True)

    tool = define_tool(name="check", description="", input_model=Add, execute=check)
    outcome = await execute_tool_call(
        ToolUseBlock("c9", "check", {"a": 1, "b": 1}), {"check": tool}, CTX
    )
    assert outcome.block.is_error
    assert seen == [CTX]
    assert seen[0].idempotency_key == "r:t:c1"


async def test_cancellation_propagates_from_a_tool() -> None:
    started = asyncio.Event()

    async def hang(args: BaseModel, ctx: ToolContext) -> str:
        started.set()
        await asyncio.sleep(10)
        return "never"

    tool = define_tool(name="hang", description="", input_model=Add, execute=hang)
    call = asyncio.ensure_future(
        execute_tool_call(ToolUseBlock("c", "hang", {"a": 1, "b": 1}), {"hang": tool}, CTX)
    )
    await started.wait()
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
