"""``GetRunHistory`` and ``ForkRun`` (decision D17) end to end over gRPC.

A journal-first run on a file store finishes; its history is listed, a fork at a tool commit is
registered INTERRUPTED and restored to completion without running the committed call again.
"""

from __future__ import annotations

import asyncio
import itertools
from pathlib import Path

import grpc
import pytest
from google.protobuf.json_format import MessageToDict
from test_sidecar_auth import error_info
from test_sidecar_crash import finished
from test_sidecar_journal import echo_run, run_to_end, serving

from sidecar._pb.oma.v1 import sidecar_pb2 as pb
from sidecar.client import SidecarClient


async def history(client: SidecarClient, run_id: str) -> list[pb.HistoryPoint]:
    response: pb.GetRunHistoryResponse = await client.runs.GetRunHistory(
        pb.GetRunHistoryRequest(run_id=run_id), metadata=client.metadata
    )
    return list(response.points)


async def fork(client: SidecarClient, run_id: str, seq: int, new: str) -> pb.ForkRunResponse:
    response: pb.ForkRunResponse = await client.runs.ForkRun(
        pb.ForkRunRequest(run_id=run_id, at_seq=seq, new_run_id=new), metadata=client.metadata
    )
    return response


def executed(events: list[pb.RunEvent]) -> list[str]:
    """The tool calls that ran (``tool_called`` not replayed)."""
    found = [MessageToDict(e.data) for e in events if e.type == "tool_called"]
    return [data["tool_call_id"] for data in found if not data.get("replayed")]


async def test_history_then_fork_then_restore_the_child(tmp_path: Path) -> None:
    async with serving(f"file://{tmp_path / 'state.json'}") as client:
        parent_events = await run_to_end(client, echo_run("h-1"), progress=True)
        points = await history(client, "h-1")
        assert points[0].boundary == "admission"
        commits = [p for p in points if p.boundary == "tool_commit"]
        assert commits, [p.label for p in points]
        at = commits[-1]
        assert at.label.endswith("tool echo committed")

        forked = await fork(client, "h-1", at.seq, "h-1-fork")
        assert (forked.run_id, forked.parent_run_id, forked.parent_seq) == (
            "h-1-fork", "h-1", at.seq,
        )  # fmt: skip
        assert forked.run.status == pb.RUN_STATUS_INTERRUPTED
        await client.restore_run("h-1-fork")
        events = await asyncio.wait_for(finished(client, "h-1-fork", progress=True), 15)
        assert events[-1].run_status.status == pb.RUN_STATUS_COMPLETED
        # The point is the parent's last commit: every call had run; the child runs none again.
        assert len(executed(parent_events)) == 4
        assert executed(events) == []
        child_points = await history(client, "h-1-fork")
        assert child_points[0].seq == at.seq
        assert child_points[0].boundary == "fork"
        # DeleteRun removes a run's history anchors with its checkpoint.
        await client.delete_run("h-1")
    assert "__oma_history__/h-1/" not in (tmp_path / "state.json").read_text()
    assert "__oma_history__/h-1-fork/" in (tmp_path / "state.json").read_text()


async def test_bad_forks_are_refused_with_their_reasons(tmp_path: Path) -> None:
    async with serving(f"file://{tmp_path / 'state.json'}") as client:
        await run_to_end(client, echo_run("h-2"))
        seqs = [p.seq for p in await history(client, "h-2")]
        gap = next(s + 1 for s, t in itertools.pairwise(seqs) if t > s + 1)
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await fork(client, "h-2", gap, "h-2-fork")
        assert caught.value.code() == grpc.StatusCode.FAILED_PRECONDITION
        assert error_info(caught.value).reason == "NOT_A_HISTORY_POINT"
        await fork(client, "h-2", seqs[1], "h-2-fork")
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await fork(client, "h-2", seqs[1], "h-2-fork")
        assert caught.value.code() == grpc.StatusCode.ALREADY_EXISTS
        assert error_info(caught.value).reason == "RUN_ALREADY_EXISTS"  # StartRun's name for it
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await history(client, "nope")
        assert caught.value.code() == grpc.StatusCode.NOT_FOUND


@pytest.mark.parametrize("text", ["{", "[1]"])
async def test_an_edited_input_that_is_no_json_object_is_refused(tmp_path: Path, text: str) -> None:
    async with serving(f"file://{tmp_path / 'state.json'}") as client:
        request = pb.DecideApprovalRequest(
            id="apr_" + "0" * 32, request_hash="0" * 64,
            decision=pb.DecideApprovalRequest.DECISION_APPROVE,
            reviewer=pb.Reviewer(id="alice"), edited_input_json=text,
        )  # fmt: skip
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await client.approvals.DecideApproval(request, metadata=client.metadata)
        assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "edited_input_json" in (caught.value.details() or "")
