"""``oma serve --encryption-keys FILE``: every store value and run journal payload sealed at rest.

A run on the sidecar (registry, run record, checkpoints, journal) leaves no plaintext of its
tool input in the state file or the journal; the RPCs that read them (WatchRun on the journal,
GetRunTimeline) still answer in plaintext, and a forged journal line is DATA_LOSS, never sent.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
from typing import TYPE_CHECKING

import grpc
import pytest
from sidecar_helpers import run_request
from test_sidecar_journal import run_to_end, serving
from test_sidecar_journal_watch import journal_of, watch_journal
from test_sidecar_timeline import timeline

from oma_actors.journal import EncryptingJournal, JsonlRunJournal
from oma_actors.stores import EncryptingStore, FileStore, KeyRing
from sidecar._pb.oma.v1 import sidecar_pb2 as pb
from sidecar.cli import main

if TYPE_CHECKING:
    from pathlib import Path

    from service_kit import FreshStores

SECRET = "patient-record-MRN-00731"
RING = KeyRing({"k1": bytes(range(32))}, active="k1")


async def test_a_run_leaves_no_plaintext_at_rest_and_reads_back_through_the_keys(
    tmp_path: Path,
) -> None:
    state = tmp_path / "state.json"
    request = run_request("enc-1", tools=("echo",), arguments={"text": SECRET})
    request.checkpoint.journal = True
    async with serving(f"file://{state}", encryption_keys=RING) as client:
        await run_to_end(client, request)
        watched = await asyncio.wait_for(watch_journal(client, "enc-1"), 15)
        drawn = await timeline(client, "enc-1")
    journal = journal_of(state, "enc-1")
    for path in (state, journal):
        assert SECRET.encode() not in await asyncio.to_thread(path.read_bytes), path
    assert any(SECRET in str(event.data) for event in watched)  # opened for the client
    assert SECRET in drawn.timeline_json

    store = FileStore(state)
    try:
        values = [entry.value for entry in await EncryptingStore(store, RING).list()]
    finally:
        await store.aclose()
    assert any("enc-1" in value for value in values)  # the registry's record, opened
    events = await EncryptingJournal(JsonlRunJournal(journal), RING).read_from(0)
    assert [event.seq for event in events] == [event.seq for event in watched]

    # A line of another seq pasted over the first: the stream refuses it rather than send it.
    lines = (await asyncio.to_thread(journal.read_text)).splitlines()
    first, second = json.loads(lines[0]), json.loads(lines[1])
    first["sealed"] = second["sealed"]
    lines[0] = json.dumps(first, separators=(",", ":"))
    await asyncio.to_thread(journal.write_text, "\n".join(lines) + "\n")
    async with serving(f"file://{state}", encryption_keys=RING) as client:
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await asyncio.wait_for(watch_journal(client, "enc-1"), 15)
    assert caught.value.code() == grpc.StatusCode.DATA_LOSS
    assert "authentication failed" in str(caught.value.details())


def test_serve_refuses_a_key_file_others_can_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    keys = tmp_path / "keys"
    keys.write_text(f"k1:{base64.b64encode(bytes(32)).decode()}\n")
    os.chmod(keys, 0o644)
    code = main(["--store", str(tmp_path / "state.json"), "--encryption-keys", str(keys)])
    assert code == 2
    assert "--encryption-keys" in capsys.readouterr().err


async def test_a_sealed_run_on_postgres_is_journal_first_and_keeps_its_history(
    fresh_stores: FreshStores,
) -> None:
    """Sealed appends carry the lease's fence (D15): a sidecar run on an encrypted PostgreSQL
    store saves its turns by journal appends and lists its history (it kept fenced snapshots
    and had none while the sealed journal could not carry the fence)."""
    dsn, table = fresh_stores.postgres_table()
    async with serving(f"{dsn}?table={table}", encryption_keys=RING) as client:
        await run_to_end(client, run_request("enc-pg", tools=("echo",), arguments={"text": SECRET}))
        response = await client.runs.GetRunHistory(
            pb.GetRunHistoryRequest(run_id="enc-pg"), metadata=client.metadata
        )
    boundaries = [point.boundary for point in response.points]
    assert boundaries[0] == "admission"
    assert "tool_commit" in boundaries
