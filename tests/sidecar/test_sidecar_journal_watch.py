"""``WatchRun``: the run's journal as the (default) watch stream, event seq == journal seq.

The stream is compared with the JSONL file itself (read with ``JsonlRunJournal``): the same
seqs in the same order, the same types, attempts and fields; ``after_seq`` resumes exactly, also
after ``kill -9`` of a child sidecar, a restart and ``RestoreRun``; runs that keep no journal
stream their progress events, or are refused with ``JOURNAL_UNAVAILABLE`` when ``journal`` is
set. ``JournalTail`` is checked on hand-written files: it reads what the journal's own reader
reads (a torn line is no event, a trailing one that parses is), a damaged line is DATA_LOSS.
"""

from __future__ import annotations

import asyncio
import signal
import sqlite3
from typing import TYPE_CHECKING, Any

import grpc
import pytest
from google.protobuf.json_format import MessageToDict
from sidecar_helpers import TOKEN, lookup_tool, run_request
from test_sidecar_auth import error_info
from test_sidecar_crash import SHORT_LEASE, finished, free_port, sidecar_process
from test_sidecar_journal import PADDING, echo_run, journal_events, run_to_end, serving

from oma_actors.journal import (
    JournalEvent,
    JsonlRunJournal,
    SqliteRunJournal,
    parse_line,
    to_json_line,
)
from oma_actors.journal import vocabulary as v
from oma_actors.journal.sqlite import JOURNAL_TABLE
from sidecar._pb.oma.v1 import sidecar_pb2 as pb
from sidecar.client import HostTools, SidecarClient, error_reason
from sidecar.journal_watch import JournalTail, journal_message
from sidecar.journals import JournalFileError, RunJournals, journal_name
from sidecar.record import TERMINAL
from sidecar.runs import RunRegistry
from sidecar.status import DataLoss, FailedPrecondition

if TYPE_CHECKING:
    from pathlib import Path


async def watch_journal(
    client: SidecarClient, run_id: str, *, notices: bool = False, **fields: Any
) -> list[pb.RunEvent]:
    """Every event of ``WatchRun(journal=true)`` until the stream ends (heartbeats skipped; the
    live notices, seq 0, too unless ``notices``)."""
    request = pb.WatchRunRequest(run_id=run_id, journal=True, **fields)
    call = client.runs.WatchRun(request, metadata=client.metadata)
    return [
        event
        async for event in call
        if event.type != "heartbeat" and (notices or event.seq or event.type == "gap")
    ]


def journal_of(state: Path, run_id: str) -> Path:
    return state.parent / f"{state.name}.journals" / journal_name(run_id)


async def test_the_stream_is_the_journal_file_seq_for_seq(tmp_path: Path) -> None:
    state = tmp_path / "state.json"
    async with serving(f"file://{state}") as client:
        await client.start_run(echo_run("jw-1"))
        # Watched live from the start, and again once the run has ended: the same stream.
        live = await asyncio.wait_for(watch_journal(client, "jw-1"), 15)
        again = await asyncio.wait_for(watch_journal(client, "jw-1"), 5)
        assert (await client.get_run("jw-1")).status == pb.RUN_STATUS_COMPLETED
    recorded = await journal_events(journal_of(state, "jw-1"))
    assert [e.seq for e in live] == [e.seq for e in recorded]  # event seq == journal seq
    assert [e.seq for e in live] == sorted({e.seq for e in live})
    assert [e.type for e in live] == [e.type for e in recorded]
    assert [(e.attempt, e.task_id, e.agent) for e in live] == [
        (e.attempt, e.task_id or "", e.agent_name or "") for e in recorded
    ]
    assert [MessageToDict(e) for e in again] == [MessageToDict(e) for e in live]
    for message, event in zip(live, recorded, strict=True):
        assert message.run_id == "jw-1"
        assert message.time.ToMilliseconds() == event.timestamp_unix_ms
        data = MessageToDict(message.data)  # the variant's fields, plus the lineage
        assert data.get("sourceEventSeqs") == event.source_event_seqs
        lineage = {"sourceEventSeqs"} if event.source_event_seqs is not None else set()
        assert set(data) == set(event.data) | lineage
        if event.type == "tool/result":
            assert data["toolCallId"] == event.data["toolCallId"]
    assert sum(e.type == "tool/result" for e in live) == 4
    assert live[-1].type == "run/end"  # the stream ended at the run's end
    assert live[-1].run_status.status == pb.RUN_STATUS_COMPLETED
    statuses = [(e.task_id, e.task_status.status) for e in live if e.type == "task/status"]
    assert statuses == [
        ("t1", pb.TASK_STATUS_IN_PROGRESS),
        ("t1", pb.TASK_STATUS_COMPLETED),
        ("t2", pb.TASK_STATUS_IN_PROGRESS),
        ("t2", pb.TASK_STATUS_COMPLETED),
    ]


async def test_after_seq_and_types_select_from_the_journal(tmp_path: Path) -> None:
    state = tmp_path / "state.json"
    async with serving(f"file://{state}") as client:
        await run_to_end(client, echo_run("jw-2"))
        everything = await watch_journal(client, "jw-2")
        seqs = [e.seq for e in everything]
        middle = seqs[len(seqs) // 2]
        rest = await watch_journal(client, "jw-2", after_seq=middle)
        assert [e.seq for e in rest] == [seq for seq in seqs if seq > middle]
        assert await watch_journal(client, "jw-2", after_seq=seqs[-1]) == []
        results = await watch_journal(client, "jw-2", types=["tool/result", "run/end"])
        assert [e.seq for e in results] == [
            e.seq for e in everything if e.type in ("tool/result", "run/end")
        ]
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await watch_journal(client, "jw-2", types=["task_started"])  # a progress type
        assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert error_info(refused.value).metadata["field"] == "types"
        # The sidecar's notices are live only: a watch of the ended run replays none of them
        # (every event but the journal's has seq 0), and asking for them alone gets nothing.
        replayed = await watch_journal(client, "jw-2", notices=True)
        assert [e.seq for e in replayed] == seqs
        assert await watch_journal(client, "jw-2", notices=True, types=["run_status"]) == []
        # The journal is the default stream of a run that keeps one.
        default = [e async for e in client.watch("jw-2")]
        assert [(e.seq, e.type) for e in default] == [(e.seq, e.type) for e in everything]
        # The progress stream, asked for by name, is unchanged by the journal's existence: its
        # own seqs and types.
        progress = [e async for e in client.watch("jw-2", progress=True)]
        assert progress[-1].type == "run_status"
        assert not {e.type for e in progress} & {e.type for e in everything}
        # The two streams are one choice: asking for both is refused, naming the field.
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await watch_journal(client, "jw-2", progress=True)
        assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert error_info(refused.value).metadata["field"] == "progress"


async def test_a_watch_for_some_types_still_gets_the_live_run_status_notices(
    tmp_path: Path,
) -> None:
    # WatchRunRequest.types: "run_status is always sent". A journal watch asking for OMA's
    # types alone used to drop the run_status notices, the status changes it ends with.
    release, open_watches = asyncio.Event(), set[str]()

    async def lookup(arguments: dict[str, Any], call: pb.ToolCall) -> str:
        await release.wait()
        return "found"

    async def watched(name: str, request: pb.WatchRunRequest) -> list[pb.RunEvent]:
        events = []
        async for event in client.runs.WatchRun(request, metadata=client.metadata):
            if event.type != "heartbeat":
                events.append(event)
                continue
            open_watches.add(name)
            if open_watches == set(calls):  # both watches are open: the run may go on and end
                release.set()
        return events

    state = tmp_path / "state.json"
    async with serving(f"file://{state}") as client, asyncio.TaskGroup() as group:
        host = HostTools(client, "types-host", [lookup_tool(lookup)])
        hosting = group.create_task(host.run(reconnect_delay=0.05))
        await asyncio.wait_for(host.registered.wait(), 10)
        await client.start_run(run_request("jw-types", task_ids=("t1",)))
        calls = {
            "journal": pb.WatchRunRequest(run_id="jw-types", types=["tool/result"]),
            "notices": pb.WatchRunRequest(run_id="jw-types", types=["tool_call_dispatched"]),
        }
        watches = (watched(name, request) for name, request in calls.items())
        streams = await asyncio.wait_for(asyncio.gather(*watches), 20)
        host.stop()
        hosting.cancel()
    for name, events in zip(calls, streams, strict=True):
        notices = [e for e in events if e.type == "run_status"]
        assert notices, (name, [e.type for e in events])
        assert all(e.seq == 0 for e in notices)
        assert notices[-1].run_status.status == pb.RUN_STATUS_COMPLETED
        wanted = {"tool/result"} if name == "journal" else {"tool_call_dispatched"}
        assert {e.type for e in events} == wanted | {"run_status"}


async def test_last_event_seq_is_where_the_default_stream_resumes(tmp_path: Path) -> None:
    # Run.last_event_seq used to count the progress log (37 where the journal had 42; 1030
    # where it had 39 after an adoption): a client resuming WatchRun from it skipped events.
    stalled, release = asyncio.Event(), asyncio.Event()

    async def lookup(arguments: dict[str, Any], call: pb.ToolCall) -> str:
        stalled.set()
        await release.wait()
        return "found"

    async def seqs(client: SidecarClient, run_id: str, after_seq: int = 0) -> list[int]:
        """The seqs of the default stream after ``after_seq`` (its live notices, seq 0, left
        out), to the run's end."""
        watch = client.watch(run_id, after_seq=after_seq)
        return [e.seq async for e in watch if e.seq]

    state = tmp_path / "state.json"
    async with serving(f"file://{state}") as client, asyncio.TaskGroup() as group:
        host = HostTools(client, "seq-host", [lookup_tool(lookup)])
        hosting = group.create_task(host.run(reconnect_delay=0.05))
        await asyncio.wait_for(host.registered.wait(), 10)
        await client.start_run(run_request("jw-seq", task_ids=("t1", "t2")))
        await asyncio.wait_for(stalled.wait(), 10)
        path = journal_of(state, "jw-seq")
        before = (await journal_events(path))[-1].seq
        middle = (await client.get_run("jw-seq")).last_event_seq
        after = (await journal_events(path))[-1].seq
        release.set()
        rest = await asyncio.wait_for(seqs(client, "jw-seq", middle), 20)
        ended = (await client.get_run("jw-seq")).last_event_seq
        after_end = await asyncio.wait_for(seqs(client, "jw-seq", ended), 5)
        listed = {run.run_id: run.last_event_seq for run in await client.list_runs()}
        # A run that keeps no journal streams its progress log: its last seq is that log's.
        no_journal = run_request("jw-seq-progress", task_ids=("t1",))
        no_journal.checkpoint.disabled = True
        await client.start_run(no_journal)
        progress = await asyncio.wait_for(seqs(client, "jw-seq-progress"), 20)
        progress_run = await client.get_run("jw-seq-progress")
        host.stop()
        hosting.cancel()
    recorded = [e.seq for e in await journal_events(path)]
    assert before <= middle <= after < recorded[-1]  # the journal's newest seq then
    assert middle in recorded
    assert rest == [seq for seq in recorded if seq > middle]  # resumed right after it
    assert ended == recorded[-1] == listed["jw-seq"]
    assert after_end == []
    assert progress_run.last_event_seq == progress[-1]


async def test_the_stream_ends_once_the_record_agrees_with_its_run_end(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The attempt's end (its result) is written a while after its journal closed (here 2 s
    # later): a watcher that read run/end is not let go before the run shows its end, so a
    # GetRun right after the stream shows the status the stream ended with, and its result.
    real_announce = RunRegistry.announce

    async def late_announce(self: RunRegistry, run_id: str, status: Any, *a: Any, **k: Any) -> Any:
        if status in TERMINAL:
            await asyncio.sleep(2)
        return await real_announce(self, run_id, status, *a, **k)

    monkeypatch.setattr(RunRegistry, "announce", late_announce)
    state = tmp_path / "state.json"
    async with serving(f"file://{state}") as client:
        await client.start_run(echo_run("jw-late"))
        watched = await asyncio.wait_for(watch_journal(client, "jw-late"), 20)
        run = await client.get_run("jw-late", full=True)
    assert watched[-1].type == "run/end"
    assert watched[-1].run_status.status == pb.RUN_STATUS_COMPLETED
    assert run.status == pb.RUN_STATUS_COMPLETED
    assert run.result.status.code == "ok"


@pytest.mark.crash
async def test_after_seq_continues_across_kill_9_and_restore(tmp_path: Path) -> None:
    # One task calls lookup twice; the sidecar dies while the second call is outstanding. A
    # journal watcher saw the events up to then; after a restart and RestoreRun it resumes
    # after the last seq it saw: only higher seqs, none twice, and together the whole file.
    port = free_port()
    store = tmp_path / "state.json"
    killed, stalled = asyncio.Event(), asyncio.Event()

    async def lookup(arguments: dict[str, Any], call: pb.ToolCall) -> str:
        if arguments["query"] == "second" and not killed.is_set():
            stalled.set()
            await asyncio.Event().wait()
        return f"result of {call.idempotency_key}"

    request = run_request("jw-k", arguments={"query": "first"}, task_ids=("t1",))
    request.tasks.tasks[0].description += PADDING
    second = pb.ScriptedToolCall(name="lookup", input_json='{"query": "second"}')
    request.team.agents[0].scripted.turns.insert(1, pb.ScriptedTurn(tool_calls=[second]))
    before: list[pb.RunEvent] = []
    broken: list[grpc.StatusCode] = []

    async def watch_until_killed(client: SidecarClient) -> None:
        call = client.runs.WatchRun(
            pb.WatchRunRequest(run_id="jw-k", journal=True), metadata=client.metadata
        )
        try:
            async for event in call:
                if event.seq:  # the journal's events (not heartbeats, nor live notices)
                    before.append(event)
        except grpc.aio.AioRpcError as exc:
            broken.append(exc.code())  # the sidecar died under the stream

    async with SidecarClient(f"127.0.0.1:{port}", TOKEN) as client, asyncio.TaskGroup() as group:
        host = HostTools(client, "watch-host", [lookup_tool(lookup)])
        hosting = group.create_task(host.run(reconnect_delay=0.05))
        try:
            async with sidecar_process(port, store, *SHORT_LEASE) as first:
                await client.ready()
                await asyncio.wait_for(host.registered.wait(), 10)
                await client.start_run(request)
                watcher = group.create_task(watch_until_killed(client))
                await asyncio.wait_for(stalled.wait(), 15)
                for _ in range(500):  # the watcher has seen the first call's committed result
                    if any(e.type == "tool/result" for e in before):
                        break
                    await asyncio.sleep(0.01)
                first.send_signal(signal.SIGKILL)
                await first.wait()
                killed.set()
                await asyncio.wait_for(watcher, 10)
            assert any(e.type == "tool/result" for e in before), [e.type for e in before]
            last_seen = before[-1].seq
            # The restarted sidecar adopts the run once the dead one's lease expired.
            async with sidecar_process(port, store, *SHORT_LEASE):
                await client.ready()
                await asyncio.wait_for(host.registered.wait(), 10)
                after = await asyncio.wait_for(
                    watch_journal(client, "jw-k", after_seq=last_seen), 20
                )
                await asyncio.wait_for(finished(client, "jw-k"), 20)
        finally:
            host.stop()
            hosting.cancel()
    seen = [e.seq for e in before] + [e.seq for e in after]
    assert broken == [grpc.StatusCode.UNAVAILABLE]
    assert after
    assert all(e.seq > last_seen for e in after)
    assert seen == sorted(set(seen))  # strictly increasing: no repeats across the restart
    recorded = await journal_events(journal_of(store, "jw-k"))
    assert seen == [e.seq for e in recorded]  # and nothing of the file left out
    assert {e.attempt for e in after} >= {2}
    assert after[-1].type == "run/end"
    assert after[-1].run_status.status == pb.RUN_STATUS_COMPLETED


async def test_a_run_without_a_journal_streams_progress_unless_journal_is_asked(
    tmp_path: Path,
) -> None:
    async def refused(client: SidecarClient, run_id: str) -> grpc.aio.AioRpcError:
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await watch_journal(client, run_id)
        assert caught.value.code() == grpc.StatusCode.FAILED_PRECONDITION
        assert error_reason(caught.value) == "JOURNAL_UNAVAILABLE"
        assert error_info(caught.value).metadata["field"] == "journal"
        return caught.value

    def progress(events: list[pb.RunEvent]) -> bool:
        # The progress stream: snake_case types, every seq in its own seq space (no notice).
        return "task_completed" in {e.type for e in events} and all(e.seq for e in events)

    async with serving("memory://") as client:
        # Without journal set, a run that keeps none streams what it has: its progress events.
        assert progress(await run_to_end(client, echo_run("memory-run")))
        assert "memory store" in ((await refused(client, "memory-run")).details() or "")
    state = tmp_path / "state.json"
    async with serving(f"file://{state}", journal=False) as client:
        assert progress(await run_to_end(client, echo_run("plain")))
        assert "--no-journal" in ((await refused(client, "plain")).details() or "")
    async with serving(f"file://{state}") as client:
        off = echo_run("no-checkpoint")
        off.checkpoint.disabled = True
        await run_to_end(client, off)
        assert "no checkpoints" in ((await refused(client, "no-checkpoint")).details() or "")
        with pytest.raises(grpc.aio.AioRpcError) as unknown:
            await watch_journal(client, "nobody")
        assert unknown.value.code() == grpc.StatusCode.NOT_FOUND


async def test_an_ended_run_whose_journal_is_gone_ends_the_watch_with_an_error(
    tmp_path: Path,
) -> None:
    # Issue 24, item 9: the watch ended OK with 0 events, passing a lost history off as empty.
    state = tmp_path / "state.json"
    async with serving(f"file://{state}") as client:
        await run_to_end(client, echo_run("jw-gone"))
        journal_of(state, "jw-gone").unlink()
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await watch_journal(client, "jw-gone")
        assert caught.value.code() == grpc.StatusCode.FAILED_PRECONDITION
        assert error_reason(caught.value) == "JOURNAL_MISSING"
        assert "jw-gone" in (caught.value.details() or "")


def line(seq: int, kind: str = "turn/start", run_id: str = "r") -> str:
    event = JournalEvent(
        seq=seq, type=kind, run_id=run_id, attempt=1, timestamp_unix_ms=1000 + seq, data={"turn": 1}
    )
    return to_json_line(event)


def file_tail(path: Path) -> JournalTail:
    return JournalTail(JsonlRunJournal(path), "r", str(path))


async def test_the_tail_reads_what_the_journal_s_reader_reads(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    tail = file_tail(path)
    assert await tail.read(0) == []  # no file yet: an empty journal
    path.write_text(f"{line(1)}\n{line(2, run_id='other')}\n{line(3)}\n{line(4)[:20]}")
    assert [e.seq for e in await tail.read(0)] == [1, 3]  # another run's line left out
    assert await tail.read(3) == []  # the torn line is not an event
    with path.open("a") as file:
        file.write(line(4)[20:] + "\n" + line(5))  # 4 completed; 5 lacks its newline
    # 5 parses: the journal's reader counts it and its repair keeps it, so a restore folds it.
    assert [e.seq for e in await tail.read(3)] == [4, 5]
    assert await tail.read(5, final=True) == []
    # A damaged complete line above the cursor is DATA_LOSS, naming its line.
    path.write_text(f"{line(1)}\nnot json\n{line(3)}\n{line(4)}\n")
    with pytest.raises(DataLoss) as damaged:
        await file_tail(path).read(0)
    assert damaged.value.reason == "JOURNAL_CORRUPT"
    assert "line 2" in damaged.value.message
    # Below the cursor nothing is read again: a follower's read costs what was appended.
    assert [e.seq for e in await file_tail(path).read(3)] == [4]


async def test_a_lost_journal_file_is_told_once_the_run_has_ended(tmp_path: Path) -> None:
    tail = file_tail(tmp_path / "r.jsonl")
    assert await tail.read(0) == []  # not created yet: the run's first append creates it
    with pytest.raises(FailedPrecondition) as lost:
        await tail.read(0, final=True)
    assert lost.value.reason == "JOURNAL_MISSING"


def test_run_end_and_task_status_carry_their_detail() -> None:
    def message(kind: str, **data: Any) -> pb.RunEvent:
        event = JournalEvent(
            seq=7, type=kind, run_id="r", attempt=2, timestamp_unix_ms=1, data=data, task_id="t"
        )
        return journal_message(event)

    # OMA's shape: status {code}, error {message} (oma_actors.journal.vocabulary.run_ended).
    ended = message("run/end", **v.run_ended(status="error", error="1 task(s) failed: t").data)
    assert ended.run_status.status == pb.RUN_STATUS_FAILED
    assert ended.run_status.outcome.code == "error"
    assert ended.run_status.outcome.message == "1 task(s) failed: t"
    ok = message("run/end", **v.run_ended(status="ok").data)
    assert ok.run_status.status == pb.RUN_STATUS_COMPLETED
    suspended = message("run/end", **v.run_ended(status="suspended").data)
    assert suspended.run_status.status == pb.RUN_STATUS_SUSPENDED
    # A journal written before run/end carried OMA's objects: bare strings.
    legacy = message("run/end", status="error", error="1 task(s) failed: t")
    assert legacy.run_status.status == pb.RUN_STATUS_FAILED
    assert legacy.run_status.outcome.message == "1 task(s) failed: t"
    skipped = message("task/status", status="skipped", reason="upstream failed")
    assert skipped.task_status.status == pb.TASK_STATUS_SKIPPED
    assert skipped.task_status.reason == "upstream failed"
    assert (skipped.seq, skipped.attempt, skipped.task_id, skipped.agent) == (7, 2, "t", "")
    assert message("turn/start", turn=1).WhichOneof("detail") is None


async def test_a_database_tail_reports_a_damaged_row_as_data_loss(tmp_path: Path) -> None:
    journal = SqliteRunJournal(str(tmp_path / "runs.db"), flush_interval_ms=0)
    try:
        await journal.append([parse_line(line(1))])
        with sqlite3.connect(tmp_path / "runs.db") as db:
            db.execute(
                f"INSERT INTO {JOURNAL_TABLE} (run_id, seq, payload) VALUES ('r', 2, 'not json')"
            )
        with pytest.raises(DataLoss) as damaged:
            await JournalTail(journal, "r").read(0)
        assert damaged.value.reason == "JOURNAL_CORRUPT"
        assert "'r'" in damaged.value.message
    finally:
        await journal.close()


async def test_a_journal_file_that_cannot_be_created_is_a_typed_error(tmp_path: Path) -> None:
    uri = f"file://{tmp_path}/state.json"
    journals = RunJournals(state_uri=uri)
    (tmp_path / "state.json.journals").write_text("a file where the directory goes")
    with pytest.raises(JournalFileError) as failed:
        await journals.open("r", uri)
    assert failed.value.reason == "JOURNAL_OPEN_FAILED"
    assert failed.value.metadata["path"] == journals.path_of("r", uri)


async def test_the_events_of_a_damaged_journal_file_are_data_loss(tmp_path: Path) -> None:
    uri = f"file://{tmp_path}/state.json"
    journals = RunJournals(state_uri=uri)
    path = tmp_path / "state.json.journals" / journal_name("r")
    assert journals.path_of("r", uri) == str(path)
    path.parent.mkdir()
    path.write_text(f"{line(1)}\nnot json\n{line(3)}\n")
    with pytest.raises(DataLoss) as damaged:
        await journals.events("r", uri)
    assert damaged.value.reason == "JOURNAL_CORRUPT"
    assert "'r'" in damaged.value.message
