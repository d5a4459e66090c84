"""ListRuns pages neither skip nor repeat a run (helper's mutation sweep).

The page token is the offset of the next page: one off and every page after the first repeats
(or skips) the run at its edge.
"""

from __future__ import annotations

import pytest
from sidecar_helpers import run_request

from sidecar._pb.oma.v1 import sidecar_pb2 as pb
from sidecar.client import SidecarClient


async def all_pages(client: SidecarClient, size: int) -> list[str]:
    ids: list[str] = []
    token = ""
    for _ in range(10):
        request = pb.ListRunsRequest(page_size=size, page_token=token)
        page = await client.runs.ListRuns(request, metadata=client.metadata)
        ids.extend(run.run_id for run in page.runs)
        token = page.next_page_token
        if not token:
            return ids
    raise AssertionError("pages never ended")


@pytest.mark.parametrize("size", [1, 2, 3, 4])
async def test_run_pages_neither_skip_nor_repeat(client: SidecarClient, size: int) -> None:
    for index in range(4):
        request = run_request(f"paged-{index}", tools=("echo",), arguments={"text": "x"})
        await client.start_run(request)
        [_ async for _ in client.watch(f"paged-{index}")]
    every = [run.run_id for run in await client.list_runs()]
    assert sorted(every) == [f"paged-{index}" for index in range(4)]
    assert await all_pages(client, size) == every
