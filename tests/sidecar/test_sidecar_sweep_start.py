"""An explicit checkpoint key lies under its own run's prefix, ``/`` included (helper's sweep).

Run ids are one namespace across tenants: a key of run ``ck`` that may start with
``__oma_checkpoint__/ck`` without the ``/`` would reach into run ``ck-other``'s keys (another
tenant's, maybe) and overwrite its checkpoint.
"""

from __future__ import annotations

import grpc
import pytest
from sidecar_helpers import run_request
from test_sidecar_auth import error_info

from oma_actors.keyspace import CHECKPOINT_KEY_PREFIX
from sidecar.client import SidecarClient


@pytest.mark.parametrize(
    "key", [f"{CHECKPOINT_KEY_PREFIX}ck-other/latest", f"{CHECKPOINT_KEY_PREFIX}ck/"]
)
async def test_a_key_outside_the_runs_own_prefix_is_refused(
    client: SidecarClient, key: str
) -> None:
    request = run_request("ck", tools=("echo",), arguments={"text": "x"}, task_ids=("t1",))
    request.checkpoint.key = key
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await client.start_run(request)
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert error_info(caught.value).metadata["field"] == "checkpoint.key"


async def test_a_key_under_the_runs_own_prefix_is_accepted(client: SidecarClient) -> None:
    request = run_request("ck", tools=("echo",), arguments={"text": "x"}, task_ids=("t1",))
    request.checkpoint.key = f"{CHECKPOINT_KEY_PREFIX}ck/main"
    assert (await client.start_run(request)).created
