"""Approve with edits (decision D17): ``decide_approval(..., edited_input=)``.

The edit is stored beside the request (the audit shows what was asked and what was allowed),
bound by its ``editHash``, refused on anything but approving a tool call, checked against the
tool's schema when the call is about to run, and the call runs once on it. A decision without
an edit is stored exactly as before (OMA's row).
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from approval_helpers import dispatch_request, stored, tamper, tool_request
from ledger_helpers import ALICE, BOB, _code, _ledger
from pydantic import BaseModel

from oma_actors import (
    AgentConfig,
    CheckpointOptions,
    DurableApprovalError,
    OpenMultiAgent,
    Task,
    Team,
    TeamRunResult,
    ToolContext,
    define_tool,
)
from oma_actors.approvals import (
    ApprovalDecision,
    ApprovalRequest,
    Suspend,
    ToolCallRequest,
    decide_approval,
    decision_from_json,
    decision_to_json,
    get_approval_record,
)
from oma_actors.approvals.canonical import hash_approval_edit
from oma_actors.approvals.records import record_text
from oma_actors.llm import ChatOptions, LLMResponse, Message, TextBlock, ToolUseBlock
from oma_actors.stores import FileStore, InMemoryStore


async def test_an_edit_is_stored_beside_the_request_and_bound_by_its_hash() -> None:
    store = InMemoryStore()
    request = tool_request()
    await _ledger(store).ensure_request(request)
    record = await decide_approval(
        store, request_id=request.id, request_hash=request.request_hash, decision="approve",
        reviewer=ALICE, edited_input={"amount": 5},
    )  # fmt: skip
    assert record.decision is not None
    assert record.decision.edited_input == {"amount": 5}
    row = await stored(store, request.id)
    assert row["request"]["content"]["input"] == {"amount": 7}, "what was asked"
    assert row["decision"]["editedInput"] == {"amount": 5}, "what was allowed"
    assert len(row["decision"]["editHash"]) == 64
    again = await get_approval_record(store, request.id)
    assert again == record


async def test_a_decision_without_an_edit_keeps_omas_row() -> None:
    store = InMemoryStore()
    request = tool_request()
    await _ledger(store).ensure_request(request)
    record = await _ledger(store).decide(
        request_id=request.id, request_hash=request.request_hash, decision="approve",
        reviewer=ALICE,
    )  # fmt: skip
    assert record.decision is not None
    assert set(decision_to_json(record.decision)) == {
        "version", "requestId", "runId", "scope", "requestHash", "decision", "reviewer",
        "decidedAt",
    }  # fmt: skip
    assert record.raw == record_text(request, record.decision)


async def approved_with_an_edit(store: InMemoryStore) -> ApprovalRequest:
    """A tool call's request in ``store``'s ledger, approved by Alice on ``{"amount": 5}``."""
    request = tool_request()
    await _ledger(store).ensure_request(request)
    await _ledger(store).decide(
        request_id=request.id, request_hash=request.request_hash, decision="approve",
        reviewer=ALICE, edited_input={"amount": 5},
    )  # fmt: skip
    return request


@pytest.mark.parametrize(
    "change",
    [
        lambda d: d.update(editedInput={"amount": 500}),
        lambda d: d.pop("editedInput"),
        lambda d: d.update(editHash="0" * 64),
        lambda d: d.update(decision="rejected"),
    ],
    ids=["edit_changed", "edit_removed", "hash_changed", "edit_on_a_rejection"],
)
async def test_a_stored_edit_changed_after_the_decision_is_refused(change: Any) -> None:
    store = InMemoryStore()
    request = await approved_with_an_edit(store)
    await tamper(store, request.id, lambda row: change(row["decision"]))
    assert await _code(get_approval_record(store, request.id)) == "APPROVAL_INTEGRITY_ERROR"


async def test_an_edit_that_is_no_object_is_refused_even_with_a_matching_hash() -> None:
    # Whoever can write the store can recompute the hash: the shape is checked on its own.
    store = InMemoryStore()
    request = await approved_with_an_edit(store)

    def to_a_list(decision: dict[str, Any]) -> None:
        decision["editedInput"] = [5]
        decision["editHash"] = hash_approval_edit(request.request_hash, [5])  # type: ignore[arg-type]

    await tamper(store, request.id, lambda row: to_a_list(row["decision"]))
    with pytest.raises(DurableApprovalError, match="no editedInput object") as caught:
        await get_approval_record(store, request.id)
    assert caught.value.code == "APPROVAL_INTEGRITY_ERROR"


def test_a_decision_given_in_python_is_checked_as_a_stored_one() -> None:
    # ``decision_from_json`` is public: what no JSON text can hold is refused, typed.
    request = tool_request()
    good = decision_to_json(
        ApprovalDecision(
            request_id=request.id, run_id=request.run_id, scope=request.scope,
            request_hash=request.request_hash, decision="approved", reviewer=ALICE,
            decided_at=datetime(2026, 12, 5, tzinfo=UTC), edited_input={"amount": 5},
        )
    )  # fmt: skip
    assert decision_from_json(good, request=request).edited_input == {"amount": 5}
    with pytest.raises(DurableApprovalError, match="must be an object") as caught:
        decision_from_json([good])
    assert caught.value.code == "APPROVAL_INTEGRITY_ERROR"
    nan = {**good, "editedInput": {"amount": float("nan")}}
    with pytest.raises(DurableApprovalError, match="not canonical JSON") as caught:
        decision_from_json(nan, request=request)
    assert caught.value.code == "APPROVAL_INTEGRITY_ERROR"


async def test_an_edit_is_refused_where_it_has_no_meaning() -> None:
    store = InMemoryStore()
    tool, dispatch = tool_request(), dispatch_request()
    for request in (tool, dispatch):
        await _ledger(store).ensure_request(request)

    async def decide(request: Any, decision: str, edit: Any) -> Any:
        return await _ledger(store).decide(
            request_id=request.id, request_hash=request.request_hash,
            decision=decision, reviewer=ALICE, edited_input=edit,  # type: ignore[arg-type]
        )  # fmt: skip

    assert await _code(decide(tool, "approve", [1])) == "APPROVAL_VALIDATION_ERROR"
    assert await _code(decide(tool, "reject", {"amount": 5})) == "APPROVAL_VALIDATION_ERROR"
    assert await _code(decide(dispatch, "approve", {"x": 1})) == "APPROVAL_VALIDATION_ERROR"
    assert (await get_approval_record(store, tool.id)).decision is None  # type: ignore[union-attr]


async def test_repeating_a_decision_must_repeat_its_edit() -> None:
    store = InMemoryStore()
    request = tool_request()
    await _ledger(store).ensure_request(request)
    first = await _ledger(store).decide(
        request_id=request.id, request_hash=request.request_hash, decision="approve",
        reviewer=ALICE, edited_input={"amount": 5},
    )  # fmt: skip
    same = await _ledger(store).decide(
        request_id=request.id, request_hash=request.request_hash, decision="approve",
        reviewer=ALICE, edited_input={"amount": 5},
    )  # fmt: skip
    assert same == first
    other = _ledger(store).decide(
        request_id=request.id, request_hash=request.request_hash, decision="approve",
        reviewer=ALICE, edited_input={"amount": 6},
    )  # fmt: skip
    assert await _code(other) == "APPROVAL_CONFLICT"
    plain = _ledger(store).decide(
        request_id=request.id, request_hash=request.request_hash, decision="approve",
        reviewer=BOB,
    )  # fmt: skip
    assert await _code(plain) == "APPROVAL_CONFLICT"


class Charge(BaseModel):
    amount: int


def charging_team(charged: list[int]) -> Team:
    async def charge(args: Charge, ctx: ToolContext) -> str:
        charged.append(args.amount)
        return f"charged {args.amount}"

    def answer(messages: list[Message], options: ChatOptions) -> LLMResponse:
        if any(m.role == "user" and m is not messages[0] for m in messages):
            return LLMResponse([TextBlock("done")])
        return LLMResponse(
            [ToolUseBlock("call-1", "charge", {"amount": 700})], stop_reason="tool_use"
        )

    tool = define_tool(
        name="charge", description="c", input_model=Charge, execute=charge, effect="unsafe"
    )
    from oma_actors.testing import ScriptedAdapter

    return Team("t", [AgentConfig("w", adapter=ScriptedAdapter(answer), tools=[tool])])


def gate(call: ToolCallRequest) -> Suspend:
    return Suspend("review")


async def suspended_run(tmp_path: Path, charged: list[int]) -> tuple[FileStore, TeamRunResult]:
    store = FileStore(tmp_path / "state.json")
    first = await OpenMultiAgent(on_tool_call=gate).run_tasks(
        charging_team(charged), [Task("pay", "x", assignee="w", id="t1")],
        checkpoint=CheckpointOptions(store=store, run_id="r1"),
    )  # fmt: skip
    assert first.pending_approvals
    return store, first


async def resume(store: FileStore, charged: list[int]) -> TeamRunResult:
    return await OpenMultiAgent(on_tool_call=gate).restore(
        charging_team(charged), checkpoint=CheckpointOptions(store=store, run_id="r1")
    )


async def test_the_call_runs_once_on_the_edited_input(tmp_path: Path) -> None:
    charged: list[int] = []
    store, first = await suspended_run(tmp_path, charged)
    [request] = first.pending_approvals
    await decide_approval(
        store, request_id=request.id, request_hash=request.request_hash, decision="approve",
        reviewer=ALICE, edited_input={"amount": 70},
    )  # fmt: skip
    result = await resume(store, charged)
    assert result.success, result.status
    assert charged == [70]
    [decision] = result.approval_decisions
    assert decision.edited_input == {"amount": 70}


async def test_an_edit_the_tool_refuses_fails_the_call_instead_of_running_the_original(
    tmp_path: Path,
) -> None:
    charged: list[int] = []
    store, first = await suspended_run(tmp_path, charged)
    [request] = first.pending_approvals
    await decide_approval(
        store, request_id=request.id, request_hash=request.request_hash, decision="approve",
        reviewer=ALICE, edited_input={"amount": "seventy"},
    )  # fmt: skip
    result = await resume(store, charged)
    assert result.success, result.status  # the run goes on: the decision cannot be changed
    assert charged == []  # neither the edit nor the model's input ran
    [record] = result.agent_results["w"].tool_calls
    assert record.is_error
    assert record.output.startswith("APPROVAL_VALIDATION_ERROR: ")
    assert "call-1" in record.output
    assert "does not fit tool 'charge'" in record.output
    again = await resume(store, charged)  # the finished run restores as it ended
    assert again.success
    assert charged == []


async def test_an_edit_tampered_before_the_restore_is_refused(tmp_path: Path) -> None:
    charged: list[int] = []
    store, first = await suspended_run(tmp_path, charged)
    [request] = first.pending_approvals
    await decide_approval(
        store, request_id=request.id, request_hash=request.request_hash, decision="approve",
        reviewer=ALICE, edited_input={"amount": 70},
    )  # fmt: skip
    await tamper(
        store, request.id, lambda row: row["decision"].update(editedInput={"amount": 7000})
    )
    with pytest.raises(DurableApprovalError) as caught:
        await resume(store, charged)
    assert caught.value.code == "APPROVAL_INTEGRITY_ERROR"
    assert charged == []


def oma(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "oma_actors.cli.main", *args],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip


def test_the_cli_approves_with_an_edit_and_shows_both_inputs(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    request = tool_request()

    async def pending() -> None:
        await _ledger(FileStore(path)).ensure_request(request)

    asyncio.run(pending())
    common = [request.id, "--store", str(path), "--approve", "--reviewer", "alice"]
    bad = oma("approvals", "decide", *common, "--hash", request.request_hash, "--edit-input", "{")
    assert bad.returncode == 2
    assert "--edit-input is not JSON" in bad.stderr
    done = oma(
        "approvals", "decide", *common, "--hash", request.request_hash,
        "--edit-input", '{"amount": 5}',
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    shown = oma("approvals", "show", request.id, "--store", str(path))
    assert "approved with this input instead (editedInput)" in shown.stdout
    assert '"amount": 7' in shown.stdout
    assert '"amount": 5' in shown.stdout
    listed = json.loads(oma("approvals", "list", "--store", str(path), "--json").stdout)
    assert listed[0]["decision"]["edited_input"] == {"amount": 5}
