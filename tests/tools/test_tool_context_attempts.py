"""``ToolContext.task_attempt`` counts a task's tries, ``run_attempt`` the run's attempts.

``attempt`` (the old name, which meant the task's try while every other ``attempt`` is the
run's) still reads, with a ``DeprecationWarning``.
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from pydantic import BaseModel

from oma_actors import (
    AgentConfig,
    CheckpointOptions,
    OpenMultiAgent,
    Task,
    Team,
    ToolContext,
    define_tool,
)
from oma_actors.approvals import Reviewer, Suspend, decide_approval
from oma_actors.llm import (
    ChatOptions,
    LLMResponse,
    Message,
    ScriptedAdapter,
    TextBlock,
    ToolUseBlock,
)
from oma_actors.stores import InMemoryStore


class NoArgs(BaseModel):
    """The probe takes no input."""


def probe(seen: list[ToolContext]):  # type: ignore[no-untyped-def]
    async def run(args: BaseModel, ctx: ToolContext) -> str:
        seen.append(ctx)
        return "ok"

    return define_tool(
        name="probe", description="records its context", input_model=NoArgs, execute=run
    )


def call_then_answer(*, fail_first_answer: bool = False) -> ScriptedAdapter:
    """Call ``probe`` once, then answer; optionally fail the first answer (a retryable error)."""
    failed: list[bool] = []

    def script(messages: Sequence[Message], options: ChatOptions) -> LLMResponse:
        if len(messages) == 1:
            return LLMResponse([ToolUseBlock("call-1", "probe", {})], stop_reason="tool_use")
        if fail_first_answer and not failed:
            failed.append(True)
            raise RuntimeError("model unavailable")
        return LLMResponse([TextBlock("done")])

    return ScriptedAdapter(script)


def team(adapter: ScriptedAdapter, seen: list[ToolContext]) -> Team:
    return Team("t", [AgentConfig("worker", adapter=adapter, tools=[probe(seen)])])


def test_attempt_is_deprecated_and_reads_the_task_attempt() -> None:
    ctx = ToolContext(
        run_id="r", task_id="t", tool_call_id="c", agent_name="a", task_attempt=3, run_attempt=2
    )
    with pytest.warns(DeprecationWarning, match="task_attempt"):
        assert ctx.attempt == 3


async def test_a_retried_task_counts_its_tries_in_one_run_attempt() -> None:
    seen: list[ToolContext] = []
    result = await OpenMultiAgent().run_tasks(
        team(call_then_answer(fail_first_answer=True), seen),
        [Task("a", "x", max_retries=1, retry_delay_ms=1)],
    )
    assert result.success, result.status
    assert [(c.task_attempt, c.run_attempt) for c in seen] == [(1, 1), (2, 1)]


async def test_a_restored_run_hands_its_tools_the_run_attempt() -> None:
    store = InMemoryStore()
    seen: list[ToolContext] = []
    adapter = call_then_answer()
    options = CheckpointOptions(store=store, run_id="run-1")
    first = await OpenMultiAgent(on_tool_call=lambda call: Suspend("review")).run_tasks(
        team(adapter, seen), [Task("a", "x")], checkpoint=options
    )
    [request] = first.pending_approvals
    await decide_approval(
        store, request_id=request.id, request_hash=request.request_hash, decision="approve",
        reviewer=Reviewer("r"),
    )  # fmt: skip
    result = await OpenMultiAgent().restore(team(adapter, seen), checkpoint=options)
    assert result.success, result.status
    assert result.attempt == 2
    assert [(c.task_attempt, c.run_attempt) for c in seen] == [(1, 2)]
