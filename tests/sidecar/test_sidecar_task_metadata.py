"""StartRun refuses task metadata that breaks OMA's rules before the run exists."""

from __future__ import annotations

import grpc
import pytest
from google.protobuf import struct_pb2
from sidecar_helpers import run_request
from test_sidecar_auth import error_info

from sidecar._pb.oma.v1 import sidecar_pb2 as pb
from sidecar.client import SidecarClient
from sidecar.server import Sidecar


@pytest.mark.parametrize(
    ("metadata", "names"),
    [
        ({"password": "hunter2"}, "metadata key 'password' looks like a credential"),
        ({"9lives": 1}, "metadata key '9lives' is not a valid key"),
        ({"db": {"api_key": "k"}}, "metadata['db']['api_key'] looks like a credential"),
    ],
)
async def test_bad_task_metadata_is_refused_before_the_run_exists(
    client: SidecarClient, metadata: dict[str, object], names: str
) -> None:
    request = run_request("meta-1", tools=("echo",), task_ids=("t1", "t2"))
    struct = struct_pb2.Struct()
    struct.update(metadata)
    request.tasks.tasks[1].metadata.CopyFrom(struct)
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await client.start_run(request)
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert error_info(caught.value).metadata["field"] == "tasks.tasks[1].metadata"
    assert names in (caught.value.details() or "")
    assert "hunter2" not in (caught.value.details() or "")
    assert await client.list_runs() == []


async def test_good_task_metadata_is_stored_masked(client: SidecarClient, sidecar: Sidecar) -> None:
    request = run_request("meta-2", tools=("echo",), arguments={"text": "x"}, task_ids=("t1",))
    request.tasks.tasks[0].metadata.update({"lane": "fast", "note": "Bearer abcdefgh12345678"})
    await client.start_run(request)
    events = [event async for event in client.watch("meta-2")]
    assert events[-1].run_status.status == pb.RUN_STATUS_COMPLETED
    assert sidecar.state is not None
    entries = await sidecar.state.list()
    # Everything stored holds only the masked value: what the run wrote itself (checkpoints,
    # events) and the run spec the sidecar keeps (tests/sidecar/test_sidecar_spec_secrets.py).
    written = [e.value for e in entries]
    assert all("abcdefgh12345678" not in text for text in written)
    assert any('"note":"Bearer [redacted]"' in text for text in written)
