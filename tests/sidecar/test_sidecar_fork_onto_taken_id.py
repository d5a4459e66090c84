"""``ForkRun`` onto a taken run id is refused before it writes anything of the child.

``fork_run`` writes the child's checkpoint and history at ``new_run_id`` in the parent's store
before the child's run record is created, and refuses an id taken in that store only. A run of
that id kept in another store (here the sidecar's own, where the parent's store is a request's
``store_uri``) is found by the registry check, which comes first: without it the fork left an
orphan child (checkpoint and history, no run record) in the parent's store.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import grpc
import pytest
from test_sidecar_auth import error_info
from test_sidecar_history import fork, history
from test_sidecar_journal import echo_run, run_to_end, serving

if TYPE_CHECKING:
    from pathlib import Path


async def test_a_fork_onto_a_run_of_another_store_writes_nothing(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    other = root / "other.json"
    async with serving(f"file://{root / 'state.json'}") as client:
        await run_to_end(client, echo_run("parent", store_uri=f"file://{other}"))
        await run_to_end(client, echo_run("taken"))
        other_before = other.read_text()
        at = (await history(client, "parent"))[1].seq
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await fork(client, "parent", at, "taken")
        assert caught.value.code() == grpc.StatusCode.ALREADY_EXISTS
        assert error_info(caught.value).reason == "RUN_ALREADY_EXISTS"
        assert other.read_text() == other_before  # no orphan child in the parent's store
