"""Run journals of the sidecar: journal-first saves on file stores, restore folds the tail.

A run whose checkpoint store is a file store keeps ``<state file>.journals/<name>.jsonl``: its
per-turn boundaries are saved by journal appends, the state file only at compaction points; a
restore (after ``kill -9`` of a child sidecar) folds the tail, so a tool commit that only the
journal held is never run again. DeleteRun and retention remove the file; ``--no-journal`` and
database stores keep none, and a request asking for a journal there is refused.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import stat
from pathlib import Path
from typing import TYPE_CHECKING, Any

import grpc
import pytest
from google.protobuf.json_format import MessageToDict
from sidecar_helpers import ECHO, TOKEN, answer, eventually, lookup_tool, run_request
from test_sidecar_auth import error_info
from test_sidecar_crash import SHORT_LEASE, finished, free_port, sidecar_process
from test_sidecar_timeline import timeline

from oma_actors.journal import JsonlRunJournal
from sidecar._pb.oma.v1 import sidecar_pb2 as pb
from sidecar.client import HostTools, SidecarClient, error_reason
from sidecar.journals import journal_name
from sidecar.server import ServerConfig, Sidecar

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Iterator

COMPACTIONS = {"admission", "task_completed"}
"""Boundaries that always write a snapshot; a final answer (``terminal``) is a journal save (D14)."""
PADDING = " Background." * 800
"""Makes a task's snapshot far bigger than its few turns' tail: a tail that outgrows the last
snapshot compacts (D10), and these tests need the turns saved by the journal alone."""


def config(store_uri: str, **overrides: Any) -> ServerConfig:
    settings: dict[str, Any] = {
        "token": TOKEN,
        "listen": "127.0.0.1:0",
        "store_uri": store_uri,
        "python_tools": {"echo": ECHO},
        "heartbeat_s": 0.5,
        "grace_s": 0.1,
        **overrides,
    }
    return ServerConfig(**settings)


@contextlib.asynccontextmanager
async def serving(store_uri: str, **overrides: Any) -> AsyncIterator[SidecarClient]:
    async with (
        Sidecar(config(store_uri, **overrides)) as server,
        SidecarClient(server.address, TOKEN) as client,
    ):
        yield client


@pytest.fixture
def umask_022() -> Iterator[None]:
    """A permissive umask, so only the sidecar's own modes keep its files private."""
    old = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(old)


def echo_run(run_id: str, *, store_uri: str = "", calls: int = 2) -> pb.StartRunRequest:
    """Two tasks; the agent calls ``echo`` ``calls`` times in each, one call a turn."""
    request = run_request(
        run_id, tools=("echo",), arguments={"text": "x"}, task_ids=("t1", "t2"), store_uri=store_uri
    )
    for task in request.tasks.tasks:
        task.description += PADDING
    turns = request.team.agents[0].scripted.turns
    for index in range(1, calls):
        call = pb.ScriptedToolCall(name="echo", input_json=json.dumps({"text": f"x{index}"}))
        turns.insert(index, pb.ScriptedTurn(tool_calls=[call]))
    return request


def asking_journal(request: pb.StartRunRequest) -> pb.StartRunRequest:
    """``request`` with ``CheckpointOptions.journal`` set."""
    request.checkpoint.journal = True
    return request


def saves(events: list[pb.RunEvent]) -> list[dict[str, Any]]:
    return [MessageToDict(e.data) for e in events if e.type == "checkpoint_saved"]


async def run_to_end(
    client: SidecarClient, request: pb.StartRunRequest, **fields: bool
) -> list[pb.RunEvent]:
    """Start ``request`` and watch it to its end (``progress=True``: its progress events, where
    the checkpoint saves are told)."""
    await client.start_run(request)
    events = await asyncio.wait_for(finished(client, request.run_id, **fields), 15)
    assert events[-1].run_status.status == pb.RUN_STATUS_COMPLETED, events[-1]
    return events


async def journal_events(path: Path) -> list[Any]:
    reader = JsonlRunJournal(path)
    try:
        return await reader.read_from(0)
    finally:
        await reader.close()


def test_journal_names_are_safe_and_distinct() -> None:
    names = {journal_name(run_id) for run_id in ("Run-1", "run-1", "run.1", "run_1")}
    assert len(names) == 4  # ids differing in case or in a replaced character stay apart
    assert journal_name("run.1").endswith("-run_1.jsonl")
    assert all("/" not in name and not name.startswith(".") for name in names)


async def test_a_run_on_a_file_store_saves_its_turns_to_a_private_journal(
    tmp_path: Path, umask_022: None
) -> None:
    state = tmp_path / "state.json"
    async with serving(f"file://{state}") as client:
        assert "journal" in (await client.server_info()).capabilities
        events = await run_to_end(client, echo_run("j-1"), progress=True)
        drawn = json.loads((await timeline(client, "j-1")).timeline_json)
    path = tmp_path / "state.json.journals" / journal_name("j-1")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    recorded = await journal_events(path)
    assert sum(e.type == "tool/result" for e in recorded) == 4  # 2 calls in each of 2 tasks
    done = saves(events)
    by_journal = [save for save in done if save["mode"] == "journal"]
    snapshots = [save for save in done if save["mode"] == "snapshot"]
    # Journal-first: most per-turn saves are appends (their commits acknowledged by them); the
    # state file is rewritten at the compaction points, which are never journal saves.
    assert len(by_journal) >= 6, done
    assert len(snapshots) < len(by_journal), done
    assert {save["boundary"] for save in snapshots} >= COMPACTIONS
    assert not COMPACTIONS & {save["boundary"] for save in by_journal}
    assert any(save["boundary"] == "tool_commit" and save["committed"] for save in by_journal)
    assert any(save["boundary"] == "terminal" for save in by_journal)
    assert drawn["from_journal"] is True  # GetRunTimeline reads the run's journal


async def test_delete_run_and_retention_remove_the_journal(tmp_path: Path) -> None:
    state = tmp_path / "state.json"
    journals = tmp_path / "state.json.journals"
    async with serving(f"file://{state}") as client:
        await run_to_end(client, echo_run("gone"))
        await run_to_end(client, echo_run("kept"))
        await run_to_end(client, echo_run("stuck"))
        assert await client.delete_run("gone") > 0
        assert not (journals / journal_name("gone")).exists()
        assert (journals / journal_name("kept")).is_file()
        # A journal that cannot be removed: a typed error naming it, and the run stays listed
        # (its record kept), so a second DeleteRun finishes the deletion.
        stuck = journals / journal_name("stuck")
        stuck.unlink()
        (stuck / "blocker").mkdir(parents=True)
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await client.delete_run("stuck")
        assert refused.value.code() == grpc.StatusCode.INTERNAL
        assert error_reason(refused.value) == "JOURNAL_REMOVE_FAILED"
        # Named as the sidecar names its own store to a caller, never by its server path.
        shown = f"<default store>.journals/{journal_name('stuck')}"
        assert shown in (refused.value.details() or "")
        assert str(tmp_path) not in (refused.value.details() or "")
        assert error_info(refused.value).metadata["path"] == shown
        assert (await client.get_run("stuck")).status == pb.RUN_STATUS_COMPLETED
        (stuck / "blocker").rmdir()
        stuck.rmdir()
        await client.delete_run("stuck")
        with pytest.raises(grpc.aio.AioRpcError) as gone:
            await client.get_run("stuck")
        assert gone.value.code() == grpc.StatusCode.NOT_FOUND
    async with serving(f"file://{state}", retain_runs=0, retention_interval_s=0.05) as client:
        await eventually(lambda: not any(journals.iterdir()))
        for _ in range(250):  # the record goes last, after the journal
            if not await client.list_runs():
                break
            await asyncio.sleep(0.02)
        assert await client.list_runs() == []


async def test_a_sidecar_without_journals_saves_whole_snapshots(tmp_path: Path) -> None:
    state = tmp_path / "state.json"
    async with serving(f"file://{state}", journal=False) as client:
        info = await client.server_info()
        events = await run_to_end(client, echo_run("plain"), progress=True)
    assert "journal" not in info.capabilities
    assert {save["mode"] for save in saves(events)} == {"snapshot"}
    assert not (tmp_path / "state.json.journals").exists()


async def test_journal_true_is_refused_where_runs_keep_none(tmp_path: Path) -> None:
    async def refusal(client: SidecarClient, request: pb.StartRunRequest) -> grpc.aio.AioRpcError:
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await client.start_run(asking_journal(request))
        assert error_reason(refused.value) == "JOURNAL_UNAVAILABLE"
        assert error_info(refused.value).metadata["field"] == "checkpoint.journal"
        return refused.value

    async with serving("memory://") as client:
        error = await refusal(client, echo_run("memory-run"))
        assert error.code() == grpc.StatusCode.FAILED_PRECONDITION
        assert "memory store" in (error.details() or "")
        assert "journal" not in (await client.server_info()).capabilities
    state = tmp_path / "state.json"
    async with serving(f"file://{state}", journal=False) as client:
        error = await refusal(client, echo_run("off-run"))
        assert error.code() == grpc.StatusCode.FAILED_PRECONDITION
        assert "--no-journal" in (error.details() or "")
    async with serving(f"file://{state}") as client:
        error = await refusal(client, echo_run("mem-store", store_uri="memory://runs"))
        assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "memory checkpoint store keeps no journal" in (error.details() or "")
        off = echo_run("no-checkpoint")
        off.checkpoint.disabled = True
        assert (await refusal(client, off)).code() == grpc.StatusCode.INVALID_ARGUMENT
        events = await run_to_end(client, asking_journal(echo_run("asked")), progress=True)
        assert "journal" in {save["mode"] for save in saves(events)}
        assert (tmp_path / "state.json.journals" / journal_name("asked")).is_file()


@pytest.mark.crash
@pytest.mark.parametrize("restart_options", [(), ("--no-journal",)], ids=["journal", "no-journal"])
async def test_a_restore_after_kill_9_folds_the_journal_tail(
    tmp_path: Path, restart_options: tuple[str, ...]
) -> None:
    # One task calls lookup twice. The sidecar dies while the second call is outstanding: the
    # first call's commit is then in the journal only (the snapshot is from the task's first
    # turn). The restore folds it in: the first call is never delivered again, the second
    # comes back as a redelivery, and the run completes. Restarted with --no-journal, the run
    # keeps the journal it has (without it, the first call would run again).
    port = free_port()
    store = tmp_path / "state.json"
    journal = tmp_path / "state.json.journals" / journal_name("jk-1")
    killed, stalled = asyncio.Event(), asyncio.Event()

    async def lookup(arguments: dict[str, Any], call: pb.ToolCall) -> str:
        if arguments["query"] == "second" and not killed.is_set():
            stalled.set()
            await asyncio.Event().wait()
        return f"result of {call.idempotency_key}"

    request = run_request("jk-1", arguments={"query": "first"}, task_ids=("t1",))
    request.tasks.tasks[0].description += PADDING
    second = pb.ScriptedToolCall(name="lookup", input_json='{"query": "second"}')
    request.team.agents[0].scripted.turns.insert(1, pb.ScriptedTurn(tool_calls=[second]))
    first_key, second_key = "jk-1:t1:toolu_0_0", "jk-1:t1:toolu_1_0"
    async with SidecarClient(f"127.0.0.1:{port}", TOKEN) as client, asyncio.TaskGroup() as group:
        host = HostTools(client, "journal-host", [lookup_tool(lookup)])
        hosting = group.create_task(host.run(reconnect_delay=0.05))
        try:
            async with sidecar_process(port, store, *SHORT_LEASE) as first:
                await client.ready()
                await asyncio.wait_for(host.registered.wait(), 10)
                await client.start_run(request)
                await asyncio.wait_for(stalled.wait(), 15)
                first.send_signal(signal.SIGKILL)
                await first.wait()
                killed.set()
            # The first result is acknowledged committed by a journal save, and only the
            # journal holds it: the state file's snapshot does not.
            assert host.ledger.committed_keys() == {first_key}
            results = [e for e in await journal_events(journal) if e.type == "tool/result"]
            assert [e.data["toolCallId"] for e in results] == ["toolu_0_0"]
            assert f"result of {first_key}" not in store.read_text()
            # The restarted sidecar adopts the run once the dead one's lease expired.
            async with sidecar_process(port, store, *SHORT_LEASE, *restart_options):
                await client.ready()
                await asyncio.wait_for(host.registered.wait(), 10)
                await asyncio.wait_for(finished(client, "jk-1"), 20)
                run = await client.get_run("jk-1", full=True)
        finally:
            host.stop()
            hosting.cancel()
    assert (run.status, run.attempt) == (pb.RUN_STATUS_COMPLETED, 2), run
    assert run.tasks[0].result == f"done: result of {second_key}"
    keys = [call.idempotency_key for call in host.ledger.deliveries]
    assert keys == [first_key, second_key, second_key]  # the first call ran once
    assert [call.redelivery for call in host.ledger.deliveries] == [False, False, True]
    assert host.ledger.committed_keys() == {first_key, second_key}


async def test_no_journal_flag_of_oma_serve(tmp_path: Path) -> None:
    port = free_port()
    store = tmp_path / "state.json"
    async with SidecarClient(f"127.0.0.1:{port}", TOKEN) as client, asyncio.TaskGroup() as group:
        host = HostTools(client, "plain-host", [lookup_tool(answer)])
        hosting = group.create_task(host.run(reconnect_delay=0.05))
        try:
            async with sidecar_process(port, store, "--no-journal"):
                await client.ready()
                await asyncio.wait_for(host.registered.wait(), 10)
                assert "journal" not in (await client.server_info()).capabilities
                events = await run_to_end(client, run_request("nj-1"), progress=True)
        finally:
            host.stop()
            hosting.cancel()
    assert {save["mode"] for save in saves(events)} == {"snapshot"}
    assert not (tmp_path / "state.json.journals").exists()
