"""The status of a task's result when a tool approval suspends it, as OMA reports it (16562ed).

OMA (``packages/core/src``): ``Agent.run`` turns a suspended runner result into an
``AgentRunResult`` with ``success: false`` and the status
``{code: 'suspended', message: 'Durable approval required before execution can continue.'}``
(``agent/agent.ts`` 499-509; the streaming path, 887-898, gives the same status). Its token
usage is the runner's total and its tool calls are only those already committed: the suspended
turn breaks (``agent/runner.ts`` 1072-1080) before its records are pushed (1097). The task keeps
that result (``orchestrator/task-execution.ts`` 1357), reports it in ``agent_complete``
(1418-1431), and ``buildTeamRunResult`` collapses it under its agent, a failed merge keeping the
later part's status (``orchestrator.ts`` 3283-3302). Spec AP-27.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel
from test_parity_suspended_usage import approve_pending

from oma_actors import (
    AgentConfig,
    CheckpointOptions,
    OpenMultiAgent,
    RunOutcome,
    Task,
    Team,
    TeamRunResult,
    TokenUsage,
    ToolContext,
    define_tool,
)
from oma_actors.approvals import Allow, Suspend
from oma_actors.approvals.gates import ToolCallRequest
from oma_actors.events import AgentCompleted, ProgressEvent
from oma_actors.llm import ChatOptions, LLMResponse, Message, TextBlock, ToolUseBlock
from oma_actors.stores import InMemoryStore
from oma_actors.testing import ScriptedAdapter

RUN = "suspended-status"
SUSPENDED = RunOutcome("suspended", "Durable approval required before execution can continue.")
"""OMA's status of an agent result suspended on a durable approval (agent.ts 505)."""
LOOKUP, CHARGE_TURN, ANSWER, QUOTE = (
    TokenUsage(3, 4),
    TokenUsage(10, 20),
    TokenUsage(2, 3),
    TokenUsage(1, 1),
)


class Amount(BaseModel):
    amount: int


async def _price(args: Amount, ctx: ToolContext) -> str:
    return "7 EUR"


async def _charge(args: Amount, ctx: ToolContext) -> str:
    return "charged"


PRICE = define_tool(name="lookup_price", description="price", input_model=Amount, execute=_price)
CHARGE = define_tool(name="charge_card", description="charge", input_model=Amount, execute=_charge)


def _payer(messages: Sequence[Message], options: ChatOptions) -> LLMResponse:
    """Quote without tools; pay with a free lookup, then the gated charge, then the answer."""
    first = messages[0].content[0]
    assert isinstance(first, TextBlock)
    if "quote it" in first.text:
        return LLMResponse([TextBlock("7 EUR")], stop_reason="end_turn", usage=QUOTE)
    if len(messages) == 1:
        lookup = ToolUseBlock("call-1", "lookup_price", {"amount": 7})
        return LLMResponse(
            [TextBlock("Looking it up."), lookup], stop_reason="tool_use", usage=LOOKUP
        )
    if len(messages) == 3:
        charge = ToolUseBlock("call-2", "charge_card", {"amount": 7})
        return LLMResponse(
            [TextBlock("Charging now."), charge], stop_reason="tool_use", usage=CHARGE_TURN
        )
    return LLMResponse([TextBlock("paid")], stop_reason="end_turn", usage=ANSWER)


def _team() -> Team:
    return Team(
        "billing", [AgentConfig("payer", adapter=ScriptedAdapter(_payer), tools=[PRICE, CHARGE])]
    )


def _gate(call: ToolCallRequest) -> Allow | Suspend:
    return Suspend("Finance review") if call.tool_name == "charge_card" else Allow()


PAY = Task("pay", "pay it", id="pay", assignee="payer")


async def _suspended(
    store: InMemoryStore, tasks: Sequence[Task] = (PAY,)
) -> tuple[TeamRunResult, list[ProgressEvent]]:
    events: list[ProgressEvent] = []
    result = await OpenMultiAgent(on_tool_call=_gate, on_progress=events.append).run_tasks(
        _team(), list(tasks), checkpoint=CheckpointOptions(store=store, run_id=RUN)
    )
    assert result.status.code == "suspended"
    return result, events


async def test_a_suspended_tasks_result_has_omas_suspended_status() -> None:
    # agent.ts 499-509: success false, status {code: 'suspended', message: ...}, the runner's
    # total usage; runner.ts 1072-1097: the suspended turn's calls are not among the tool calls.
    result, _ = await _suspended(InMemoryStore())
    pay = result.task_results["pay"]
    assert pay.status == SUSPENDED
    assert not pay.success
    assert pay.token_usage == LOOKUP + CHARGE_TURN
    assert [call.tool_name for call in pay.tool_calls] == ["lookup_price"]
    assert result.agent_results["payer"].status == SUSPENDED
    # The run's own status keeps its task-level message (task-execution.ts 1418-1421).
    assert result.status == RunOutcome(
        "suspended", "Durable approval required before task execution can continue."
    )


async def test_the_agent_complete_of_a_suspended_task_carries_its_status() -> None:
    # task-execution.ts 1423-1429: agent_complete's data is the suspended result itself.
    result, events = await _suspended(InMemoryStore())
    [done] = [e for e in events if isinstance(e, AgentCompleted)]
    assert done.result.status == SUSPENDED
    assert done.result == result.task_results["pay"]


async def test_an_agents_merged_result_takes_the_suspended_tasks_status() -> None:
    # orchestrator.ts 3288-3290: a failed merge keeps the later part's status, so the agent's
    # completed quote followed by its suspended payment reads suspended.
    quote = Task("quote", "quote it", id="quote", assignee="payer")
    pay = Task("pay", "pay it", id="pay", assignee="payer", depends_on=["quote"])
    result, _ = await _suspended(InMemoryStore(), [quote, pay])
    assert result.task_results["quote"].status is None  # ok
    merged = result.agent_results["payer"]
    assert (merged.success, merged.status) == (False, SUSPENDED)
    assert merged.token_usage == QUOTE + LOOKUP + CHARGE_TURN


async def test_the_approved_and_restored_result_replaces_the_suspended_one() -> None:
    # orchestrator.ts 3187-3210: only completed results are restored; the resumed task's ok
    # result (agent.ts 603-604) stands in task_results, with no trace of the suspension.
    store = InMemoryStore()
    suspended, _ = await _suspended(store)
    await approve_pending(store, suspended)
    result = await OpenMultiAgent().restore(
        _team(), checkpoint=CheckpointOptions(store=store, run_id=RUN)
    )
    assert result.status.code == "ok"
    pay = result.task_results["pay"]
    assert (pay.success, pay.status, pay.output) == (True, None, "paid")
    assert pay.token_usage == LOOKUP + CHARGE_TURN + ANSWER
    assert [call.tool_name for call in pay.tool_calls] == ["lookup_price", "charge_card"]


async def test_a_suspended_results_output_is_the_text_of_the_turn_that_asked() -> None:
    # agent.ts 501 passes the runner's output through: runner.ts 1206-1207 sets finalOutput to
    # each turn's text and the suspended turn breaks (1076-1080) with it, so the output is the
    # text beside the gated call; the merged entry joins the non-empty outputs (3296).
    result, events = await _suspended(InMemoryStore())
    assert result.task_results["pay"].output == "Charging now."
    [done] = [e for e in events if isinstance(e, AgentCompleted)]
    assert done.result.output == "Charging now."
