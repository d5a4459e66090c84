"""Tenant quotas: the unfinished runs a tenant holds (``--max-active-runs-per-tenant``), the
watches it has open (``--max-watches-per-tenant``), and errors that never name the server's
own store file.

One tenant once filled the shared default file store with suspended runs (retention keeps
them) until another tenant's StartRun took 9 s and failed STORE_FULL, naming the server's state
file; another opened 8,000 WatchRun streams and slowed every tenant's calls.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import random
from dataclasses import replace
from typing import TYPE_CHECKING, Any, cast

import grpc
import pytest
from sidecar_helpers import ECHO, TOKEN, answer, eventually, lookup_tool, run_request
from test_sidecar_auth import error_info
from test_sidecar_history import fork, history
from test_sidecar_journal import echo_run, run_to_end, serving
from test_sidecar_principals import ENTRIES, TOKENS, write_principals

from oma_actors.errors import StoreError, StoreLimitError
from sidecar import cli, quotas
from sidecar import server as server_module
from sidecar._pb.oma.v1 import sidecar_pb2 as pb
from sidecar.client import SidecarClient, error_reason
from sidecar.defaults import DEFAULT_MAX_ACTIVE_RUNS_PER_TENANT, DEFAULT_MAX_WATCHES_PER_TENANT
from sidecar.principals import Principals
from sidecar.quotas import RECOUNT_S, RunQuota, TooManyRunsError
from sidecar.record import UnknownRunError
from sidecar.server import ServerConfig, ServerConfigError, Sidecar
from sidecar.servicer import RunServicer
from sidecar.status import DEFAULT_STORE, hide_path, map_error

if TYPE_CHECKING:
    from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
    from pathlib import Path


def held_request(run_id: str) -> pb.StartRunRequest:
    """A run that stays RUNNING: its agent calls the host tool ``lookup``, and no host serves
    it (the call waits for one up to the default five minutes)."""
    request = run_request(run_id)
    request.team.host_tools.append(lookup_tool(answer).definition())
    return request


@contextlib.asynccontextmanager
async def tenants(
    tmp_path: Path, **changes: Any
) -> AsyncIterator[tuple[Sidecar, SidecarClient, SidecarClient]]:
    """A sidecar with principals; clients of alice (tenant acme) and bob (tenant globex)."""
    principals = Principals.from_file(write_principals(tmp_path / "principals.json", ENTRIES))
    config = ServerConfig(
        token="",
        principals=principals,
        listen="127.0.0.1:0",
        store_uri="memory://",
        python_tools={"echo": ECHO},
        heartbeat_s=0.5,
        grace_s=0.1,
        **changes,
    )
    async with (
        Sidecar(config) as server,
        SidecarClient(server.address, TOKENS["alice"]) as alice,
        SidecarClient(server.address, TOKENS["bob"]) as bob,
    ):
        yield server, alice, bob


async def refused(call: Any) -> grpc.aio.AioRpcError:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await call
    return caught.value


async def retried(attempt: Callable[[], Awaitable[object]], reason: str, pause: float) -> None:
    """Call ``attempt`` until it succeeds, while it is refused with ``reason`` (a refusal's
    count is reused for ``RECOUNT_S``; a watch's place comes back as its stream ends)."""
    refusals: list[str | None] = []
    for _ in range(100):
        try:
            await attempt()
        except grpc.aio.AioRpcError as exc:
            refusals.append(error_reason(exc))
            await asyncio.sleep(pause)
        else:
            break
    else:
        raise AssertionError(f"refused every time: {refusals[-1]}")
    assert set(refusals) <= {reason}


# -- unfinished runs per tenant ----------------------------------------------------------------


async def test_a_tenant_at_its_limit_is_refused_and_the_others_are_not(tmp_path: Path) -> None:
    async with tenants(tmp_path, max_active_runs_per_tenant=2) as (_, alice, bob):
        first = held_request("acme-1")
        await alice.start_run(first)
        await alice.start_run(held_request("acme-2"))
        error = await refused(alice.start_run(held_request("acme-3")))
        assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert error_reason(error) == "TOO_MANY_RUNS"
        assert dict(error_info(error).metadata) == {"held": "2", "limit": "2"}
        assert "--max-active-runs-per-tenant" in (error.details() or "")
        assert {run.run_id for run in await alice.list_runs()} == {"acme-1", "acme-2"}
        # A retry of a start that made its run is answered with it, as ever.
        again = await alice.start_run(first)
        assert (again.run.run_id, again.created) == ("acme-1", False)
        # A run id that is taken stays ALREADY_EXISTS, never TOO_MANY_RUNS.
        await bob.start_run(held_request("globex-1"))
        error = await refused(alice.start_run(held_request("globex-1")))
        assert error_reason(error) == "RUN_ALREADY_EXISTS"
        # The other tenant is not held back by acme's runs.
        await bob.start_run(held_request("globex-2"))
        # A run finished (here: cancelled) frees its place.
        await alice.cancel_run("acme-1")
        await retried(lambda: alice.start_run(held_request("acme-3")), "TOO_MANY_RUNS", RECOUNT_S)
        error = await refused(alice.start_run(held_request("acme-4")))
        assert error_reason(error) == "TOO_MANY_RUNS"


async def test_without_principals_the_limit_is_the_one_tenants(tmp_path: Path) -> None:
    async with serving("memory://", max_active_runs_per_tenant=1) as client:
        await client.start_run(held_request("r1"))
        error = await refused(client.start_run(held_request("r2")))
        assert error_reason(error) == "TOO_MANY_RUNS"
        await client.cancel_run("r1")
        await retried(lambda: client.start_run(held_request("r2")), "TOO_MANY_RUNS", RECOUNT_S)


async def test_fork_is_refused_at_the_limit_and_restore_never_is(tmp_path: Path) -> None:
    async with serving(f"file://{tmp_path / 'state.json'}", max_active_runs_per_tenant=2) as client:
        await run_to_end(client, echo_run("parent"), progress=True)  # completed: not held
        at = (await history(client, "parent"))[-1].seq
        child = await fork(client, "parent", at, "child-1")  # INTERRUPTED until restored: held
        assert child.run.status == pb.RUN_STATUS_INTERRUPTED
        await client.start_run(held_request("held"))
        error = await refused(fork(client, "parent", at, "child-2"))
        assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert error_reason(error) == "TOO_MANY_RUNS"
        # Restoring a held run adds none: a tenant at its limit can still finish its runs.
        await client.restore_run("child-1")
        await client.cancel_run("held")
        await retried(lambda: fork(client, "parent", at, "child-2"), "TOO_MANY_RUNS", RECOUNT_S)


class Runs:
    """A fake store of one tenant's unfinished runs, counted as ``held_runs`` counts."""

    def __init__(self) -> None:
        self.ids: set[int] = set()
        self.counts = 0

    async def count(self, tenant: str, under: int) -> tuple[int, bool]:
        self.counts += 1
        held = len(self.ids)  # read as the count begins; runs stored meanwhile are not in it
        await asyncio.sleep(0.005)  # others go on meanwhile
        return held, True


@pytest.mark.parametrize("recount", [False, True])
async def test_concurrent_admissions_fill_the_limit_exactly(
    recount: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    if recount:  # counts taken while starts are under way: their runs may be missing from them
        monkeypatch.setattr(quotas, "REFRESH_S", 0.0)
        monkeypatch.setattr(quotas, "RECOUNT_S", 0.0)
        monkeypatch.setattr(quotas, "COUNT_SHARE", 1e9)  # no pause after a count either
    runs = Runs()
    quota = RunQuota(10, runs.count)
    refusals: list[TooManyRunsError] = []

    async def start(index: int) -> None:
        await asyncio.sleep(random.random() / 50 if recount else 0)
        try:
            async with quota.admitting("t"):
                await asyncio.sleep(random.random() / 100)
                runs.ids.add(index)  # the run is stored before the start returns
                await asyncio.sleep(random.random() / 100)
        except TooManyRunsError as exc:
            refusals.append(exc)

    await asyncio.gather(*(start(index) for index in range(60)))
    # Never over the limit, and never refused under it: each refusal rests on an exact count.
    assert len(runs.ids) == 10
    assert len(refusals) == 50
    assert {(exc.held, exc.limit) for exc in refusals} == {(10, 10)}
    if not recount:
        # At the limit, the starts under way are waited for, then the runs counted once,
        # exactly: one count to begin, one to refuse (the refusals after it reuse it).
        assert runs.counts <= 3, runs.counts


async def test_starts_under_the_limit_do_not_count_the_runs_each_time() -> None:
    runs = Runs()
    quota = RunQuota(1000, runs.count)
    for index in range(200):
        async with quota.admitting("t"):
            runs.ids.add(index)
    assert runs.counts == 1  # the count is read every REFRESH_S, not per start
    assert quota.estimate("t") == 200
    runs.ids.clear()  # finished: the estimate errs high until the next count
    for index in range(801):
        async with quota.admitting("t"):
            runs.ids.add(index)
    assert runs.counts == 2  # at 1000 the runs are counted again: 800, one more admitted
    assert quota.estimate("t") == 801


async def test_a_start_that_made_no_run_gives_its_place_back() -> None:
    runs = Runs()
    quota = RunQuota(3, runs.count)
    for _ in range(10):
        async with quota.admitting("t") as admission:
            admission.unused()  # a retry, answered with its run
    assert quota.estimate("t") == 0
    assert runs.counts == 1


async def test_a_refusal_counts_again_only_after_a_pause() -> None:
    runs = Runs()
    runs.ids = {1, 2}
    quota = RunQuota(2, runs.count)
    for _ in range(20):  # a client hammering at its limit
        with pytest.raises(TooManyRunsError):
            async with quota.admitting("t"):
                pass
    assert runs.counts == 1
    runs.ids.discard(1)
    await asyncio.sleep(RECOUNT_S + 0.05)
    async with quota.admitting("t"):
        pass
    assert runs.counts == 2


# -- open watches per tenant -------------------------------------------------------------------


async def open_watch(client: SidecarClient, run_id: str) -> Any:
    """A following WatchRun of ``run_id`` whose first event has arrived (so it is open)."""
    call = client.runs.WatchRun(
        pb.WatchRunRequest(run_id=run_id, follow_suspended=True), metadata=client.metadata
    )
    await call.read()
    return call


async def test_a_tenant_at_its_watch_limit_is_refused_until_one_ends(tmp_path: Path) -> None:
    async with tenants(tmp_path, max_watches_per_tenant=2) as (server, alice, bob):
        quota = server.watch_quota
        assert quota is not None
        await alice.start_run(held_request("acme-w"))
        await bob.start_run(held_request("globex-w"))
        first = await open_watch(alice, "acme-w")
        second = await open_watch(alice, "acme-w")
        assert quota.count("acme") == 2
        third = alice.runs.WatchRun(pb.WatchRunRequest(run_id="acme-w"), metadata=alice.metadata)
        error = await refused(third.read())
        assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert error_reason(error) == "TOO_MANY_WATCHERS"
        assert dict(error_info(error).metadata) == {"limit": "2"}
        bobs = await open_watch(bob, "globex-w")  # another tenant's watches are its own
        # A cancelled stream gives its place back.
        first.cancel()
        await eventually(lambda: quota.count("acme") == 1)
        replacement = await open_watch(alice, "acme-w")
        # So does a stream that ends with an error, and one refused before it began.
        unknown = alice.runs.WatchRun(pb.WatchRunRequest(run_id="nope"), metadata=alice.metadata)
        assert error_reason(await refused(unknown.read())) == "TOO_MANY_WATCHERS"
        second.cancel()
        await eventually(lambda: quota.count("acme") == 1)
        unknown = alice.runs.WatchRun(pb.WatchRunRequest(run_id="nope"), metadata=alice.metadata)
        assert error_reason(await refused(unknown.read())) == "RUN_NOT_FOUND"
        assert quota.count("acme") == 1
        # A stream that ends with its run gives its place back too.
        await alice.cancel_run("acme-w")
        last = None
        while (event := await replacement.read()) is not grpc.aio.EOF:
            last = event
        assert last is not None
        assert last.run_status.status == pb.RUN_STATUS_CANCELLED
        await eventually(lambda: quota.count("acme") == 0)
        assert quota.count("globex") == 1
    # The server's stop ends the streams it still served.
    assert quota.count("globex") == 0
    bobs.cancel()


async def test_without_principals_the_watch_limit_is_the_one_tenants() -> None:
    async with serving("memory://", max_watches_per_tenant=1) as client:
        await client.start_run(held_request("r1"))
        watch = await open_watch(client, "r1")
        again = client.runs.WatchRun(pb.WatchRunRequest(run_id="r1"), metadata=client.metadata)
        assert error_reason(await refused(again.read())) == "TOO_MANY_WATCHERS"
        watch.cancel()
        await retried(lambda: open_watch(client, "r1"), "TOO_MANY_WATCHERS", 0.02)


class Context:
    """What ``WatchRun`` uses of a grpc.aio context (no principals: it names no caller)."""

    def __init__(self, *, calls_back: bool) -> None:
        self.callbacks: list[Callable[[object], object]] = []
        self._calls_back = calls_back

    def add_done_callback(self, callback: Callable[[object], object]) -> None:
        if self._calls_back:
            self.callbacks.append(callback)

    def done(self) -> None:
        """The RPC ended: grpc calls the callbacks, whatever became of the handler."""
        for callback in self.callbacks:
            callback(self)

    async def abort_with_status(self, status: object) -> None:
        raise grpc.aio.AbortError()


def watch_servicer(*events: pb.RunEvent, fails: bool = False) -> RunServicer:
    """A RunServicer with one watch allowed, whose watches stream ``events`` (or fail)."""
    servicer = RunServicer(
        executor=cast("Any", None),
        registry=cast("Any", None),
        deleter=cast("Any", None),
        timelines=cast("Any", None),
        forks=cast("Any", None),
        max_watches=1,
    )

    async def streamed() -> AsyncIterator[pb.RunEvent]:
        for event in events:
            yield event

    async def watched(request: pb.WatchRunRequest, context: object) -> AsyncIterator[pb.RunEvent]:
        if fails:
            raise UnknownRunError(request.run_id)
        return streamed()

    servicer._watched = watched  # type: ignore[method-assign]
    return servicer


async def test_a_stream_left_at_a_yield_gives_its_place_back_when_its_rpc_ends() -> None:
    # grpc may drop a cancelled stream's generator where it waits at a yield, never to resume.
    servicer = watch_servicer(pb.RunEvent(type="a"), pb.RunEvent(type="b"))
    assert servicer.watch_quota is not None
    context = Context(calls_back=True)
    stream = cast(
        "AsyncGenerator[pb.RunEvent, None]",
        servicer.WatchRun(pb.WatchRunRequest(run_id="r"), context),
    )
    assert (await anext(stream)).type == "a"
    assert servicer.watch_quota.count("") == 1
    context.done()
    assert servicer.watch_quota.count("") == 0
    await stream.aclose()  # given back once only
    assert servicer.watch_quota.count("") == 0


async def test_a_stream_gives_its_place_back_as_it_ends_or_fails() -> None:
    servicer = watch_servicer(pb.RunEvent(type="a"))
    assert servicer.watch_quota is not None
    streamed = [
        e
        async for e in servicer.WatchRun(pb.WatchRunRequest(run_id="r"), Context(calls_back=False))
    ]
    assert [event.type for event in streamed] == ["a"]
    assert servicer.watch_quota.count("") == 0
    failing = watch_servicer(fails=True)
    assert failing.watch_quota is not None
    with pytest.raises(grpc.aio.AbortError):
        await anext(failing.WatchRun(pb.WatchRunRequest(run_id="r"), Context(calls_back=False)))
    assert failing.watch_quota.count("") == 0


# -- settings ----------------------------------------------------------------------------------


async def test_limits_below_one_are_refused_at_startup() -> None:
    base = ServerConfig(token=TOKEN, listen="127.0.0.1:0", store_uri="memory://")
    for option, config in (
        ("--max-active-runs-per-tenant", replace(base, max_active_runs_per_tenant=0)),
        ("--max-watches-per-tenant", replace(base, max_watches_per_tenant=-1)),
    ):
        with pytest.raises(ServerConfigError, match=option):
            async with Sidecar(config):
                pass


def test_the_flags_are_in_the_help_with_their_defaults(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    shown = " ".join(capsys.readouterr().out.split())
    assert "--max-active-runs-per-tenant N the most runs one tenant" in shown
    assert f"(default {DEFAULT_MAX_ACTIVE_RUNS_PER_TENANT})" in shown
    assert "--max-watches-per-tenant N" in shown
    assert f"(default {DEFAULT_MAX_WATCHES_PER_TENANT})" in shown
    assert DEFAULT_MAX_WATCHES_PER_TENANT >= DEFAULT_MAX_ACTIVE_RUNS_PER_TENANT  # watch each run


async def test_the_flags_reach_the_server(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[ServerConfig] = []

    class Stopping:
        def __init__(self, config: ServerConfig) -> None:
            seen.append(config)

        async def __aenter__(self) -> Sidecar:
            raise ServerConfigError("stop here")

        async def __aexit__(self, *exc: object) -> None:
            return None

    monkeypatch.setattr(server_module, "Sidecar", Stopping)
    monkeypatch.setenv("OMA_SIDECAR_TOKEN", TOKEN)
    parser = argparse.ArgumentParser()
    cli.add_arguments(parser)
    flags = ["--max-active-runs-per-tenant", "7", "--max-watches-per-tenant", "9"]
    assert await cli.run(parser.parse_args(["--store", "memory://", *flags])) == 2
    assert (seen[0].max_active_runs_per_tenant, seen[0].max_watches_per_tenant) == (7, 9)
    assert await cli.run(parser.parse_args(["--store", "memory://"])) == 2
    assert (seen[1].max_active_runs_per_tenant, seen[1].max_watches_per_tenant) == (
        DEFAULT_MAX_ACTIVE_RUNS_PER_TENANT,
        DEFAULT_MAX_WATCHES_PER_TENANT,
    )


# -- the server's store file is never named to a client ----------------------------------------


def test_store_errors_name_the_default_store_and_the_log_has_its_path(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = str(tmp_path / "state.json")
    errors = (
        StoreLimitError(path, 300, 200),
        StoreError(f"{path}: cannot create the lock file {path}.lock (denied)"),
    )
    undo = hide_path(path)
    try:
        with caplog.at_level(logging.WARNING, logger="sidecar.status"):
            mapped = [map_error(exc) for exc in errors]
    finally:
        undo()
    assert [m.reason for m in mapped] == ["STORE_FULL", "STORE_UNAVAILABLE"]
    assert all(path not in m.message and DEFAULT_STORE in m.message for m in mapped), mapped
    assert mapped[1].message.endswith(f"lock file {DEFAULT_STORE}.lock (denied)")
    assert sum(path in record.getMessage() for record in caplog.records) == 2  # the operator's
    assert path in map_error(errors[0]).message  # once undone, as it was


async def test_a_sidecar_hides_its_own_store_file_while_it_serves(tmp_path: Path) -> None:
    # (Filling a real store, as test_sidecar_quotas does, answers the same STORE_FULL: its
    # background tasks log tracebacks, which on CPython 3.11 can upset a later ast.parse.)
    state = str(tmp_path / "state.json")
    other = str(tmp_path / "runs.json")  # a store a request names: its caller wrote the path
    full = StoreLimitError(state, 300, 200)
    async with serving(f"file://{state}"):
        assert map_error(full).message.startswith(f"{DEFAULT_STORE}: the state file would be")
        assert other in map_error(StoreLimitError(other, 300, 200)).message
    async with serving("memory://"):
        assert state in map_error(full).message  # that sidecar is gone: nothing to hide
