"""A request_id starts one run: a retry naming another run id is refused, not a second run.

``sidecar.start_checks.attach_retry`` and ``check_claimed`` each refuse (``REQUEST_ID_REUSED``)
a start whose request_id already names a run (or a claim of one) under another run id. With a
request digest the digest differs too (it covers the run id); these tests use a run record and
a claim written without one (by an older sidecar, or backfilled from such a record), where the
run id comparison is the only thing that tells the two requests apart.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import grpc
import pytest
from sidecar_helpers import TOKEN, run_request
from test_sidecar_auth import error_info
from test_sidecar_protocol import config, seed

from oma_actors import open_store
from sidecar._pb.oma.v1 import sidecar_pb2 as pb
from sidecar.client import SidecarClient
from sidecar.record import NO_TENANT, RunRecordV1
from sidecar.record_codec import encode
from sidecar.request_claims import RequestClaim, RequestClaims
from sidecar.server import Sidecar

if TYPE_CHECKING:
    from pathlib import Path


def named_request(run_id: str) -> pb.StartRunRequest:
    """A run of the in-process sidecar's ``echo`` under ``run_id``, request_id ``req-1``."""
    request = run_request(run_id, tools=("echo",), arguments={"text": "x"}, task_ids=("t1",))
    request.request_id = "req-1"
    return request


async def test_a_request_id_of_a_run_is_refused_under_another_run_id(tmp_path: Path) -> None:
    state = f"file://{tmp_path / 'state.json'}"
    spec = named_request("first")
    old = RunRecordV1(
        run_id="first", request_id=spec.request_id, request=spec, store_uri="memory://",
        seq_reserved_until=1024, legacy_status=pb.RUN_STATUS_COMPLETED,
    )  # fmt: skip
    await seed(state, {"first": encode(old)})  # no digest, no claim: an older sidecar's run
    async with Sidecar(config(state)) as server, SidecarClient(server.address, TOKEN) as client:
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await client.start_run(named_request("second"))
        info = error_info(caught.value)
        assert (info.reason, info.metadata["existing_run_id"]) == ("REQUEST_ID_REUSED", "first")
        assert [run.run_id for run in await client.list_runs()] == ["first"]


async def test_a_claimed_request_id_is_refused_under_another_run_id(tmp_path: Path) -> None:
    # The claim's creator died before it wrote the run record: the claim alone names the run.
    state = f"file://{tmp_path / 'state.json'}"
    request = named_request("claimed-1")
    async with open_store(state) as store:
        claim = RequestClaim(run_id="claimed-1", digest="")  # backfilled: no digest
        assert await RequestClaims(store).claim(NO_TENANT, request.request_id, claim)
    async with Sidecar(config(state)) as server, SidecarClient(server.address, TOKEN) as client:
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await client.start_run(named_request("other"))
        info = error_info(caught.value)
        assert (info.reason, info.metadata["existing_run_id"]) == ("REQUEST_ID_REUSED", "claimed-1")
        assert await client.list_runs() == []
