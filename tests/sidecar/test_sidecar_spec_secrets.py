"""The spec a run keeps holds no secret in clear: its metadata is checked and masked at start.

The run registry keeps each run's ``StartRunRequest`` (``__oma_sidecar__/run/<id>``, for
``GetRun`` and ``RestoreRun``). A secret-looking value in a task's metadata was ``[redacted]``
in the checkpoint, the approvals and the journal, yet stored in clear there; the run's own
metadata took credential-like keys (``api_key``) and kept and returned their values in clear.
"""

from __future__ import annotations

import asyncio
import math
from typing import TYPE_CHECKING, Any

import grpc
import pytest
from sidecar_helpers import run_request
from test_sidecar_auth import error_info

from sidecar import convert
from sidecar._pb.oma.v1 import sidecar_pb2 as pb
from sidecar.client import error_reason
from sidecar.status import InvalidArgument

if TYPE_CHECKING:
    from sidecar.client import SidecarClient
    from sidecar.server import Sidecar

SECRET = "sk-ant-api03-" + "S" * 48
OTHER_SECRET = "sk-ant-api03-" + "T" * 48


def nested(levels: int) -> dict[str, Any]:
    """An object ``levels`` objects deep."""
    value: dict[str, Any] = {"leaf": 1}
    for _ in range(levels - 1):
        value = {"inner": value}
    return value


def gated_request(run_id: str) -> pb.StartRunRequest:
    """One task calling ``echo``, gated at its dispatch, a secret in both metadata."""
    request = run_request(run_id, tools=("echo",), arguments={"text": "hi"}, task_ids=("t1",))
    request.approval_gates.task_dispatch = True
    request.tasks.tasks[0].metadata.update({"lane": "fast", "note": SECRET})
    request.metadata.update({"team": "blue", "note": SECRET, "n": 3, "auth": f"Bearer {SECRET}"})
    return request


async def stored_texts(sidecar: Sidecar) -> dict[str, str]:
    assert sidecar.state is not None
    return {entry.key: entry.value for entry in await sidecar.state.list()}


async def test_a_restored_run_completes_and_no_stored_spec_holds_the_secret(
    client: SidecarClient, sidecar: Sidecar
) -> None:
    request = gated_request("spec-1")
    started = await client.start_run(request)
    assert dict(started.run.metadata) == {
        "team": "blue", "note": "[redacted]", "n": 3, "auth": "Bearer [redacted]",
    }  # fmt: skip
    events = await asyncio.wait_for(_events(client, "spec-1"), 10)
    assert events[-1].run_status.status == pb.RUN_STATUS_SUSPENDED
    [approval] = await client.list_approvals("spec-1")
    assert SECRET not in approval.canonical_json
    assert '"note":"[redacted]"' in approval.canonical_json
    decided = await client.approvals.DecideApproval(
        pb.DecideApprovalRequest(
            id=approval.id, request_hash=approval.request_hash,
            decision=pb.DecideApprovalRequest.DECISION_APPROVE, reviewer=pb.Reviewer(id="ann"),
            resume=pb.DecideApprovalRequest.RESUME_POLICY_NEVER,
        ),
        metadata=client.metadata,
    )  # fmt: skip
    assert decided.recorded
    restored = await client.restore_run("spec-1")  # from the checkpoint, with the stored spec
    assert restored.resumed_from_checkpoint
    async with asyncio.timeout(10):
        resumed = [event async for event in client.watch("spec-1", follow_suspended=True)]
    assert resumed[-1].run_status.status == pb.RUN_STATUS_COMPLETED
    run = await client.get_run("spec-1", full=True)
    assert (run.status, run.attempt) == (pb.RUN_STATUS_COMPLETED, 2)
    assert [task.result for task in run.tasks] == ["done: echo:hi"]
    assert run.metadata["note"] == "[redacted]"
    [listed] = await client.list_runs()
    assert listed.metadata["note"] == "[redacted]"
    texts = await stored_texts(sidecar)
    leaked = sorted(key for key, text in texts.items() if SECRET in text)
    assert leaked == []  # not the run record either
    spec_text = texts["__oma_sidecar__/run/spec-1"]
    assert "[redacted]" in spec_text
    assert '"lane": "fast"' in spec_text or '"lane":"fast"' in spec_text
    [latest] = [text for key, text in texts.items() if key == "__oma_checkpoint__/spec-1/latest"]
    assert '"note":"[redacted]"' in latest  # the restored run's task metadata: still masked


async def _events(client: SidecarClient, run_id: str) -> list[pb.RunEvent]:
    return [event async for event in client.watch(run_id)]


async def test_a_retry_still_matches_and_another_secret_is_another_request(
    client: SidecarClient, sidecar: Sidecar
) -> None:
    # The digest of request_id idempotency is the request's as received: the same request
    # again attaches to its run, one with another secret is another request.
    request = gated_request("spec-2")
    first = await client.start_run(request)
    again = await client.start_run(request)
    assert first.created
    assert not again.created
    assert again.run.run_id == "spec-2"
    other = pb.StartRunRequest()
    other.CopyFrom(request)
    other.metadata.update({"note": OTHER_SECRET})
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await client.start_run(other)
    assert error_reason(caught.value) == "REQUEST_ID_REUSED"
    unnamed = gated_request("")  # found by its request_id's claim, not by a run id
    assigned = (await client.start_run(unnamed)).run.run_id
    assert (await client.start_run(unnamed)).run.run_id == assigned
    other.CopyFrom(unnamed)
    other.tasks.tasks[0].metadata.update({"note": OTHER_SECRET})
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await client.start_run(other)
    assert error_reason(caught.value) == "REQUEST_ID_REUSED"
    texts = await stored_texts(sidecar)
    assert all(SECRET not in text and OTHER_SECRET not in text for text in texts.values())


@pytest.mark.parametrize(
    ("metadata", "field", "names"),
    [
        ({"api_key": SECRET}, "metadata.api_key", "metadata key 'api_key' looks like a credential"),
        ({"ok": 1, "password": "hunter2"}, "metadata.password", "key 'password' looks like"),
        ({"db": {"token": "hunter2"}}, "metadata.db", "metadata['db']['token'] looks like"),
        ({"9lives": 1}, "metadata.9lives", "metadata key '9lives' is not a valid key"),
        ({"x": math.nan}, "metadata.x", "NaN"),
        ({"deep": nested(10)}, "metadata.deep", "nests deeper"),
        ({f"k{index}": index for index in range(33)}, "metadata", "has 33 keys"),
        ({f"k{index}": "v" * 1000 for index in range(20)}, "metadata", "bytes of JSON"),
    ],
)  # fmt: skip
async def test_run_metadata_follows_the_rules_of_task_metadata(
    client: SidecarClient, metadata: dict[str, Any], field: str, names: str
) -> None:
    request = run_request("spec-3", tools=("echo",), arguments={"text": "x"}, task_ids=("t1",))
    request.metadata.update(metadata)
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await client.start_run(request)
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT, caught.value
    assert error_info(caught.value).metadata["field"] == field
    details = caught.value.details() or ""
    assert names in details
    assert "hunter2" not in details
    assert SECRET not in details
    assert "task 'run'" not in details
    assert await client.list_runs() == []


async def test_a_nan_in_task_metadata_is_refused_naming_it(client: SidecarClient) -> None:
    # It answered INTERNAL (the Struct could not be turned into JSON).
    request = run_request("spec-4", tools=("echo",), arguments={"text": "x"}, task_ids=("t1",))
    request.tasks.tasks[0].metadata.update({"ratio": math.inf})
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await client.start_run(request)
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert error_info(caught.value).metadata["field"] == "tasks.tasks[0].metadata.ratio"


def plan_request(metadata: dict[str, Any]) -> pb.StartRunRequest:
    agent = pb.AgentSpec(name="worker", provider="scripted")
    task = pb.TaskSpec(id="p1", title="P1", description="Do it.")
    task.metadata.update(metadata)
    return pb.StartRunRequest(
        run_id="plan-1", request_id="q", team=pb.TeamSpec(name="team", agents=[agent]),
        plan=pb.PlanArtifact(version=1, tasks=[task]),
    )  # fmt: skip


def test_a_plan_task_s_metadata_is_checked_and_masked_too() -> None:
    with pytest.raises(InvalidArgument) as caught:
        convert.check_start(plan_request({"secret": "x"}), lambda _: True)
    assert caught.value.field == "plan.tasks[0].metadata"
    spec = plan_request({"note": SECRET, "n": 2})
    convert.check_start(spec, lambda _: True)
    convert.mask_metadata(spec)
    assert convert.struct_to_dict(spec.plan.tasks[0].metadata) == {"note": "[redacted]", "n": 2}


def test_masking_leaves_metadata_without_secrets_and_other_fields_alone() -> None:
    spec = gated_request("spec-5")
    spec.tasks.tasks[0].description = f"Use {SECRET}."  # not metadata: the run needs it
    empty = spec.tasks.tasks.add(id="t2", title="T2", description="d")
    empty.metadata.SetInParent()
    convert.mask_metadata(spec)
    assert convert.struct_to_dict(spec.tasks.tasks[0].metadata) == {
        "lane": "fast", "note": "[redacted]",
    }  # fmt: skip
    assert spec.tasks.tasks[0].description == f"Use {SECRET}."
    assert spec.tasks.tasks[1].HasField("metadata")
    assert not spec.tasks.tasks[1].metadata.fields
    bare = run_request("spec-6", tools=("echo",))
    convert.mask_metadata(bare)
    assert not bare.HasField("metadata")
    assert not bare.tasks.tasks[0].HasField("metadata")
