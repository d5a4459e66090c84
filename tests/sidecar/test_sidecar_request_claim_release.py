"""Deleting a run releases its request_id's claim only when the claim names that run.

Records written before request claims may share a request_id (the retry race claims fixed).
Deleting one that the claim does not name must keep the claim, so a retry of the request still
attaches to the run it names instead of starting another.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sidecar_helpers import TOKEN, run_request
from test_sidecar_protocol import config, seed

from oma_actors import open_store
from sidecar._pb.oma.v1 import sidecar_pb2 as pb
from sidecar.client import SidecarClient
from sidecar.record import NO_TENANT, RunRecordV1
from sidecar.record_codec import encode
from sidecar.request_claims import RequestClaim, RequestClaims
from sidecar.server import Sidecar
from sidecar.start_checks import request_digest

if TYPE_CHECKING:
    from pathlib import Path


def legacy(run_id: str, request: pb.StartRunRequest) -> RunRecordV1:
    """A finished run of ``request`` as an older sidecar wrote it."""
    spec = pb.StartRunRequest()
    spec.CopyFrom(request)
    spec.run_id = run_id
    return RunRecordV1(
        run_id=run_id, request_id=request.request_id, request=spec, store_uri="memory://",
        request_digest=request_digest(request), seq_reserved_until=1024,
        legacy_status=pb.RUN_STATUS_COMPLETED,
    )  # fmt: skip


async def test_deleting_a_run_the_claim_does_not_name_keeps_the_claim(tmp_path: Path) -> None:
    state = f"file://{tmp_path / 'state.json'}"
    request = run_request("", tools=("echo",), arguments={"text": "x"}, task_ids=("t1",))
    request.request_id = "req-shared"
    await seed(state, {"a": encode(legacy("a", request)), "b": encode(legacy("b", request))})
    async with open_store(state) as store:
        claim = RequestClaim(run_id="a", digest=request_digest(request))
        assert await RequestClaims(store).claim(NO_TENANT, request.request_id, claim)
    async with Sidecar(config(state)) as server, SidecarClient(server.address, TOKEN) as client:
        await client.delete_run("b")
        async with open_store(state) as store:
            kept = await RequestClaims(store).find(NO_TENANT, request.request_id)
        assert kept is not None
        assert kept.run_id == "a"
        retry = await client.start_run(request)
        assert (retry.created, retry.run.run_id) == (False, "a")
