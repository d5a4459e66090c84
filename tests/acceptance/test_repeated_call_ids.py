"""A model that names every turn's tool call alike (scripted models, custom adapters, some
OpenAI-compatible servers) still gets one idempotency key per effect and one approval per
gated call: the agent loop gives a repeated id a fresh one (``oma_actors.agents.call_ids``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from acceptance_helpers import answer, calls
from approvals_flow_helpers import approve, options, worker_team
from pydantic import BaseModel

from oma_actors import OpenMultiAgent, Task, ToolContext, define_tool
from oma_actors.approvals import Suspend
from oma_actors.stores import FileStore
from oma_actors.testing import ScriptedAdapter

if TYPE_CHECKING:
    from pathlib import Path

    from oma_actors.tools.base import Tool


class Charge(BaseModel):
    amount: int


def charge_tool(charged: list[tuple[int, str]]) -> Tool:
    async def charge(args: Charge, ctx: ToolContext) -> str:
        charged.append((args.amount, ctx.idempotency_key))
        return f"charged {args.amount}"

    return define_tool(
        name="charge_card", description="Charge the card.", input_model=Charge, execute=charge
    )


def same_call_twice() -> ScriptedAdapter:
    """Two turns calling ``charge_card`` with one id and one input, then an answer."""
    turn = calls(("c1", "charge_card", {"amount": 5}))
    return ScriptedAdapter([turn, turn, answer("done")])


async def test_two_charges_named_alike_get_two_idempotency_keys(tmp_path: Path) -> None:
    charged: list[tuple[int, str]] = []
    adapter = same_call_twice()
    team = worker_team(adapter, tools=[charge_tool(charged)])

    result = await OpenMultiAgent().run_tasks(
        team, [Task("pay", "pay twice", assignee="worker")],
        checkpoint=options(FileStore(tmp_path / "state.json")),
    )  # fmt: skip

    assert result.success, result.status
    assert [amount for amount, _ in charged] == [5, 5]
    first, second = (key for _, key in charged)
    assert first.endswith(":c1")  # the model's own id, as it sent it
    assert second != first  # not taken for a retry of the first charge
    [task_result] = [r for r in result.agent_results.values() if r.tool_calls]
    assert [call.tool_call_id for call in task_result.tool_calls] == [
        first.rsplit(":", 1)[1],
        second.rsplit(":", 1)[1],
    ]
    # The model was sent the id each result answers.
    sent = adapter.calls[2].messages
    used = [block.id for message in sent for block in message.content if hasattr(block, "name")]
    assert len(set(used)) == 2


async def test_a_gated_tool_called_twice_alike_asks_twice_and_charges_once_each(
    tmp_path: Path,
) -> None:
    charged: list[tuple[int, str]] = []
    adapter = same_call_twice()
    team = worker_team(adapter, tools=[charge_tool(charged)])
    store = FileStore(tmp_path / "state.json")
    gate = lambda _call: Suspend("finance review")  # noqa: E731

    result = await OpenMultiAgent(on_tool_call=gate).run_tasks(
        team, [Task("pay", "pay twice", assignee="worker")], checkpoint=options(store)
    )
    asked: list[str] = []
    for _ in range(3):
        if result.status.code != "suspended":
            break
        [request] = result.pending_approvals
        asked.append(request.id)
        await approve(store, request.id, request.request_hash)
        result = await OpenMultiAgent(on_tool_call=gate).restore(team, checkpoint=options(store))

    assert result.success, result.status  # no APPROVAL_CONFLICT
    assert len(asked) == 2
    assert asked[0] != asked[1]  # the second call's approval is its own
    assert [amount for amount, _ in charged] == [5, 5]  # each approved charge ran once
    assert charged[0][1] != charged[1][1]
