"""A request_id starts one run, also when its retries race on sidecars sharing a store.

A client retries ``StartRun`` without a run id (the sidecar assigns one) while its first
attempt is still in flight, through a load balancer: the attempts reach different sidecars of
one PostgreSQL store at once. Each used to look for a run of the request_id, find none, and start
a run of its own.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING

import grpc
import pytest
from sidecar_helpers import TOKEN, run_request
from test_sidecar_auth import error_info
from test_sidecar_protocol import config, seed
from test_sidecar_scale_out import shared_store, sidecar_process

from oma_actors import open_store
from sidecar._pb.oma.v1 import sidecar_pb2 as pb
from sidecar.client import SidecarClient
from sidecar.record import NO_TENANT, RunRecordV1
from sidecar.record_codec import encode
from sidecar.request_claims import RequestClaim, RequestClaims, claim_key
from sidecar.server import Sidecar
from sidecar.start_checks import request_digest

if TYPE_CHECKING:
    from pathlib import Path

__all__ = ["shared_store"]  # the fixture, used by name


async def test_racing_retries_of_one_request_on_two_sidecars_start_one_run(
    shared_store: str,
) -> None:
    async with contextlib.AsyncExitStack() as stack:
        started = [await stack.enter_async_context(sidecar_process(shared_store)) for _ in range(2)]
        clients = [
            await stack.enter_async_context(SidecarClient(address, TOKEN)) for _, address in started
        ]
        for client in clients:
            await client.ready()
        for attempt in range(3):
            anonymous = run_request("", arguments={"query": str(attempt)})
            # A tool of the run's own, so no host needs to be connected to start it.
            anonymous.team.host_tools.add(name="lookup", input_schema_json='{"type": "object"}')
            answers = await asyncio.gather(
                *(client.start_run(anonymous) for client in clients for _ in range(3))
            )
            assert len({answer.run.run_id for answer in answers}) == 1, answers
            assert [answer.created for answer in answers].count(True) == 1
        assert len(await clients[0].list_runs()) == 3


def anonymous_request(request_id: str = "") -> pb.StartRunRequest:
    """A run without a run id (the sidecar assigns it) of the in-process sidecar's ``echo``."""
    request = run_request("", tools=("echo",), arguments={"text": "x"}, task_ids=("t1",))
    request.request_id = request_id or request.request_id
    return request


async def finished_run(client: SidecarClient, run_id: str) -> None:
    async for _ in client.watch(run_id):
        pass


async def test_a_run_registered_before_claims_is_found_by_its_retry(tmp_path: Path) -> None:
    state = f"file://{tmp_path / 'state.json'}"
    request = anonymous_request()
    spec = pb.StartRunRequest()
    spec.CopyFrom(request)
    spec.run_id = "older"
    old = RunRecordV1(
        run_id="older", request_id=request.request_id, request=spec, store_uri="memory://",
        request_digest=request_digest(request), seq_reserved_until=1024,
        legacy_status=pb.RUN_STATUS_COMPLETED,
    )  # fmt: skip
    await seed(state, {"older": encode(old)})  # and no claim: written by an older sidecar
    async with Sidecar(config(state)) as server, SidecarClient(server.address, TOKEN) as client:
        retry = await client.start_run(request)
        assert (retry.created, retry.run.run_id) == (False, "older")
        assert [run.run_id for run in await client.list_runs()] == ["older"]


async def test_a_claim_whose_run_was_never_written_is_completed_by_a_retry(
    tmp_path: Path,
) -> None:
    # Its creator died between the claim and the run record: the retry writes the run under
    # the claimed id, once; another body under the request_id is still refused.
    state = f"file://{tmp_path / 'state.json'}"
    request = anonymous_request()
    async with open_store(state) as store:
        claim = RequestClaim(run_id="claimed-1", digest=request_digest(request))
        assert await RequestClaims(store).claim(NO_TENANT, request.request_id, claim)
    async with Sidecar(config(state)) as server, SidecarClient(server.address, TOKEN) as client:
        other = pb.StartRunRequest()
        other.CopyFrom(request)
        other.tasks.tasks[0].title = "Another title"
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await client.start_run(other)
        info = error_info(caught.value)
        assert (info.reason, info.metadata["existing_run_id"]) == ("REQUEST_ID_REUSED", "claimed-1")
        first, again = [await client.start_run(request) for _ in range(2)]
        assert (first.created, first.run.run_id) == (True, "claimed-1")
        assert (again.created, again.run.run_id) == (False, "claimed-1")


async def test_deleting_a_run_removes_its_claim(tmp_path: Path) -> None:
    state = f"file://{tmp_path / 'state.json'}"
    request = anonymous_request()
    async with Sidecar(config(state)) as server, SidecarClient(server.address, TOKEN) as client:
        run_id = (await client.start_run(request)).run.run_id
        await finished_run(client, run_id)
        await client.delete_run(run_id)
        async with open_store(state) as store:
            assert await RequestClaims(store).find(NO_TENANT, request.request_id) is None
        again = await client.start_run(request)  # the request starts again, as before claims
        assert again.created
        assert again.run.run_id != run_id


async def test_a_run_id_taken_by_another_request_meanwhile_leaves_no_claim(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    state = f"file://{tmp_path / 'state.json'}"
    async with Sidecar(config(state)) as server, SidecarClient(server.address, TOKEN) as client:
        registry = server.registry
        assert registry is not None
        late = run_request("contested", tools=("echo",), arguments={"text": "x"})
        rival = RunRecordV1(
            run_id="contested", request_id="rival", request=late, store_uri="memory://"
        )
        create = registry.create

        async def racing(record: RunRecordV1) -> RunRecordV1:
            # Another request takes the run id between this start's checks and its write.
            if record.request_id == late.request_id:
                await create(rival)
            return await create(record)

        monkeypatch.setattr(registry, "create", racing)
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await client.start_run(late)
        assert error_info(caught.value).reason == "RUN_ALREADY_EXISTS"
        assert await registry.requests.find(NO_TENANT, late.request_id) is None


async def test_an_unreadable_claim_is_reported_not_replaced(tmp_path: Path) -> None:
    state = f"file://{tmp_path / 'state.json'}"
    request = anonymous_request()
    async with open_store(state) as store:
        await store.set(claim_key(NO_TENANT, request.request_id), "{not json")
    async with Sidecar(config(state)) as server, SidecarClient(server.address, TOKEN) as client:
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await client.start_run(request)
        assert caught.value.code() == grpc.StatusCode.DATA_LOSS
        assert error_info(caught.value).reason == "RUN_RECORD_UNREADABLE"
        assert await client.list_runs() == []
