"""Boot: only this owner's active runs are interrupted; older state files still load."""

from __future__ import annotations

import asyncio
import base64
import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import grpc
import pytest
from sidecar_helpers import ECHO, TOKEN, SiblingWritesFirst, legacy_record_text, run_request

from oma_actors.keyspace import sidecar_key
from oma_actors.stores import FileStore, InMemoryStore
from sidecar._pb.oma.v1 import sidecar_pb2 as pb
from sidecar.boot import recover
from sidecar.client import SidecarClient, error_reason
from sidecar.owner import check_owner_id, default_owner_id
from sidecar.record import RunRecordV1
from sidecar.record_codec import decode
from sidecar.runs import RunRegistry
from sidecar.server import ServerConfig, ServerConfigError, Sidecar

ROOT = Path(__file__).resolve().parents[2]


async def finished(client: SidecarClient, run_id: str) -> list[pb.RunEvent]:
    return [event async for event in client.watch(run_id)]


def record_of(run_id: str) -> RunRecordV1:
    request = run_request(run_id, tools=("echo",), arguments={"text": run_id}, task_ids=("t1",))
    return RunRecordV1(
        run_id=run_id,
        request_id=request.request_id,
        owner_id="",
        request=request,
        store_uri="memory://",
    )


def never_spawns(coro: object) -> None:
    raise AssertionError("no background work expected")


async def running(store: InMemoryStore | FileStore, owner: str, *run_ids: str) -> None:
    """Runs of ``owner`` left running, as a sidecar that died would leave them."""
    runs = RunRegistry(store, owner_id=owner, spawn=never_spawns)
    for run_id in run_ids:
        await runs.create(record_of(run_id))
        await runs.set_status(run_id, pb.RUN_STATUS_RUNNING)


async def stored(store: InMemoryStore | FileStore, run_id: str) -> RunRecordV1:
    entry = await store.get(sidecar_key("run", run_id))
    assert entry is not None
    return decode(entry.value)


async def test_booting_owner_a_leaves_owner_b_active_runs_untouched() -> None:
    store = InMemoryStore()
    await running(store, "owner-a", "a-1")
    await running(store, "owner-b", "b-1")
    done = RunRegistry(store, owner_id="owner-a", spawn=never_spawns)
    await done.create(record_of("a-done"))
    await done.set_status("a-done", pb.RUN_STATUS_COMPLETED)
    b_before = await store.get(sidecar_key("run", "b-1"))

    interrupted = await recover(RunRegistry(store, owner_id="owner-a", spawn=never_spawns))

    assert [record.run_id for record in interrupted] == ["a-1"]
    a_run = await stored(store, "a-1")
    assert (a_run.status, a_run.outcome.code) == (pb.RUN_STATUS_INTERRUPTED, "interrupted")
    b_after = await store.get(sidecar_key("run", "b-1"))
    assert b_before is not None
    assert b_after is not None
    assert b_after.value == b_before.value  # not even rewritten
    assert (await stored(store, "b-1")).status == pb.RUN_STATUS_RUNNING
    assert (await stored(store, "a-done")).status == pb.RUN_STATUS_COMPLETED


async def test_records_of_the_older_format_are_adopted_once() -> None:
    store = InMemoryStore()
    active = run_request("old-active")
    finished = run_request("old-done")
    await store.set(sidecar_key("run", "old-active"), legacy_record_text(active))
    await store.set(
        sidecar_key("run", "old-done"),
        legacy_record_text(finished, status="RUN_STATUS_COMPLETED", seq_reserved_until=1024),
    )
    event = pb.RunEvent(run_id="old-done", seq=7, type="run_status")
    event.run_status.status = pb.RUN_STATUS_COMPLETED
    history = json.dumps([base64.b64encode(event.SerializeToString()).decode()])
    await store.set(sidecar_key("events", "old-done"), history)

    runs = RunRegistry(store, owner_id="owner-a", spawn=never_spawns)
    interrupted = await recover(runs)

    assert [record.run_id for record in interrupted] == ["old-active"]
    for run_id in ("old-active", "old-done"):
        entry = await store.get(sidecar_key("run", run_id))
        assert entry is not None
        assert json.loads(entry.value)["schema"] == 1  # rewritten in the new format
        assert json.loads(entry.value)["owner_id"] == "owner-a"
    assert (await stored(store, "old-active")).request == active
    assert (await stored(store, "old-done")).status == pb.RUN_STATUS_COMPLETED
    log = await runs.log_of("old-done")
    assert [e.seq for e in log.since(0)] == [7]
    # A second boot of another owner finds nothing left to adopt or interrupt.
    assert await recover(RunRegistry(store, owner_id="owner-b", spawn=never_spawns)) == []
    assert (await stored(store, "old-done")).owner_id == "owner-a"


async def test_boot_leaves_a_run_a_sibling_took_over_meanwhile() -> None:
    store = SiblingWritesFirst()
    await running(store, "owner-a", "a-1")
    # Between the boot's read and its write, another sidecar restores the run and owns it.
    store.sibling_change = lambda record: replace(
        record, owner_id="owner-b", status=pb.RUN_STATUS_QUEUED, attempt=2
    )
    assert await recover(RunRegistry(store, owner_id="owner-a", spawn=never_spawns)) == []
    after = await stored(store, "a-1")
    assert (after.owner_id, after.status, after.attempt) == ("owner-b", pb.RUN_STATUS_QUEUED, 2)


async def test_an_older_record_a_sibling_adopted_meanwhile_stays_its_own() -> None:
    store = SiblingWritesFirst()
    await store.set(sidecar_key("run", "old-1"), legacy_record_text(run_request("old-1")))
    store.sibling_change = lambda record: replace(
        record, owner_id="owner-b", status=pb.RUN_STATUS_INTERRUPTED
    )
    assert await recover(RunRegistry(store, owner_id="owner-a", spawn=never_spawns)) == []
    after = await stored(store, "old-1")
    assert (after.owner_id, after.status) == ("owner-b", pb.RUN_STATUS_INTERRUPTED)


def server_config(path: Path, owner_id: str | None) -> ServerConfig:
    return ServerConfig(
        token=TOKEN,
        listen="127.0.0.1:0",
        store_uri=f"file://{path}",
        python_tools={"echo": ECHO},
        heartbeat_s=0.5,
        grace_s=0.1,
        owner_id=owner_id,
    )


async def test_a_sidecar_boots_on_a_shared_store_as_its_owner(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    async with FileStore.open(path) as store:
        await running(store, "owner-a", "a-1")
        await running(store, "owner-b", "b-1")
        siblings = RunRegistry(store, owner_id="owner-b", spawn=never_spawns)
        await siblings.create(record_of("b-2"))
        await siblings.set_status("b-2", pb.RUN_STATUS_INTERRUPTED)
        await store.set(
            sidecar_key("run", "old-1"),
            legacy_record_text(run_request("old-1"), status="RUN_STATUS_CANCELLED"),
        )
    async with (
        Sidecar(server_config(path, "owner-a")) as server,
        SidecarClient(server.address, TOKEN) as client,
    ):
        assert server.interrupted == ["a-1"]
        assert (await client.get_run("a-1")).status == pb.RUN_STATUS_INTERRUPTED
        assert (await client.get_run("b-1")).status == pb.RUN_STATUS_RUNNING
        assert (await client.get_run("old-1")).status == pb.RUN_STATUS_CANCELLED
        for call, reason in (
            (client.cancel_run("b-1"), "RUN_OWNED_ELSEWHERE"),
            (client.restore_run("b-1"), "RUN_ACTIVE"),
        ):
            with pytest.raises(grpc.aio.AioRpcError) as caught:
                await call
            assert caught.value.code() == grpc.StatusCode.FAILED_PRECONDITION
            assert error_reason(caught.value) == reason
        # Restoring a sibling's interrupted run makes this sidecar its owner.
        await client.restore_run("b-2")
        events = await asyncio.wait_for(finished(client, "b-2"), 10)
        assert events[-1].run_status.status == pb.RUN_STATUS_COMPLETED
    async with FileStore.open(path) as store:
        assert (await stored(store, "b-2")).owner_id == "owner-a"
        assert (await stored(store, "b-1")).owner_id == "owner-b"
        assert (await stored(store, "old-1")).owner_id == "owner-a"


def test_the_default_owner_id_is_stable_per_store_and_listen_address() -> None:
    first = default_owner_id("file:///srv/state.json", "127.0.0.1:50051")
    assert first == default_owner_id("file:///srv/state.json", "127.0.0.1:50051")
    assert first != default_owner_id("file:///srv/state.json", "127.0.0.1:50052")
    assert first != default_owner_id("file:///srv/other.json", "127.0.0.1:50051")
    assert check_owner_id(first) == first
    for bad in ("", " x", "a b", "x" * 129):
        with pytest.raises(ValueError, match="owner id"):
            check_owner_id(bad)


async def test_a_bad_owner_id_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ServerConfigError, match="--owner-id"):
        async with Sidecar(server_config(tmp_path / "s.json", "bad id")):
            pass
    async with Sidecar(server_config(tmp_path / "s.json", None)) as server:
        expected = default_owner_id(f"file://{tmp_path / 's.json'}", "127.0.0.1:0")
        assert server.owner_id == expected


def test_serve_help_documents_the_owner_id() -> None:
    shown = subprocess.run(
        [sys.executable, "-m", "sidecar", "--help"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    assert "--owner-id" in shown
    assert "derived from --store and --listen" in " ".join(shown.split())
