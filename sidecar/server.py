"""The sidecar server: wiring, listening address, TLS, health, reflection and shutdown.

``Sidecar`` is an async context manager owning everything a server runs: the store registry,
a task group for the runs, the run registry (in the state store), the failover sweep adopting
runs whose lease expired (a previous incarnation's included), the tool host and the grpc.aio
server.
Leaving it stops the server with a grace period (in which the RPCs received go on, but none starts
a run: ``DRAINING``), cancels what still runs and closes the stores.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import math
import os
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from oma_actors.stores import parse_store_uri
from sidecar._pb.oma.v1 import sidecar_pb2 as pb
from sidecar._pb.oma.v1 import sidecar_pb2_grpc as pb_grpc
from sidecar.approvals import ApprovalDesk
from sidecar.attempt import STOPPING
from sidecar.auth import BearerAuthInterceptor
from sidecar.decoding import DecodingInterceptor
from sidecar.defaults import (
    DEFAULT_LISTEN,
    DEFAULT_MAX_ACTIVE_RUNS_PER_TENANT,
    DEFAULT_MAX_INPUT_BYTES,
    DEFAULT_MAX_WATCHES_PER_TENANT,
    DEFAULT_STORE,
)
from sidecar.execution import RunExecutor
from sidecar.failover import DEFAULT_LEASE_TTL, Failover, lease_terms, shared_store
from sidecar.forks import RunForks
from sidecar.host_events import HostCallEvents
from sidecar.journals import RunJournals
from sidecar.owner import incarnation_id
from sidecar.plugins import load_python_tools
from sidecar.retention import DEFAULT_INTERVAL, Retention, RunDeleter
from sidecar.runs import RunRegistry
from sidecar.servicer import ApprovalServicer, RunServicer, SystemServicer, ToolHostServicer
from sidecar.status import hide_path
from sidecar.stores import StoreRegistry, default_store_roots, normalize_uri
from sidecar.tenancy import Tenancy
from sidecar.timelines import RunTimelines
from sidecar.tool_host import DEFAULT_TIMEOUT, ToolHost

if TYPE_CHECKING:
    from collections.abc import Coroutine, Mapping
    from pathlib import Path
    from types import TracebackType

    from oma_actors import Tool
    from oma_actors.stores import AtomicStore, KeyRing
    from sidecar.principals import Principals
    from sidecar.quotas import RunQuota, WatchQuota

logger = logging.getLogger(__name__)

SERVICES = tuple(service.full_name for service in pb.DESCRIPTOR.services_by_name.values())
MAX_MESSAGE = 16 * 1024 * 1024
MIN_INPUT_BYTES = 64 * 1024
"""The smallest ``max_input_bytes``: below it ordinary requests (a team spec) would not fit."""


class ServerConfigError(ValueError):
    """The server cannot start with these settings (bad address, TLS missing, ...)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ServerConfig:
    """How to run a sidecar.

    Args:
        token: the bearer token every RPC but health must carry (unused with ``principals``).
        principals: the tokens of principals, each with a tenant and roles, instead of the
            single token (``sidecar.principals``); ``None``: the single token.
        listen: ``HOST:PORT``; port 0 picks a free port. Non-loopback needs TLS.
        store_uri: the state store (run registry) and default checkpoint store.
        tls_cert, tls_key: PEM files; both or neither.
        python_tools: tools offered by name; ``None`` loads the ``oma_actors.tools`` entry points.
        reflection: serve grpc.reflection.v1alpha.
        heartbeat_s: idle interval after which watch streams get a heartbeat and tool streams a
            ping.
        grace_s: how long in-flight RPCs may finish at shutdown.
        owner_id: the label of this sidecar's owner id (``<label>/<uuid4>``, fresh per start,
            see ``sidecar.owner``); ``None``: the default label.
        store_roots: the directories a request's ``file://`` or ``sqlite://`` store may be in;
            ``None``: the directory of a file or SQLite ``store_uri`` (none for other stores).
        host_call_timeout_s: how long a host tool call waits for a result when its tool
            definition sets no timeout.
        lease_ttl_s: the TTL of this sidecar's run leases (every store kind); a live sidecar
            (a sibling, or this one restarted) adopts its runs this long after it dies
            (``sidecar.failover``).
        retain_runs, retain_seconds: delete finished runs beyond the newest ``retain_runs`` or
            older than ``retain_seconds`` (``sidecar.retention``); ``None``: no such limit.
        retention_interval_s: seconds between retention sweeps.
        journal: keep a durable journal per run where its store is (``sidecar.journals``);
            ``False`` (``--no-journal``), or a memory or Redis ``store_uri``: runs keep none.
        encryption_keys: ``--encryption-keys``: every store the sidecar opens is an
            ``EncryptingStore`` and every run journal an ``EncryptingJournal`` with these keys
            (``None``: stores and journals are plaintext at rest).
        max_input_bytes: the largest request a client may send (``sidecar.quotas``), from
            ``MIN_INPUT_BYTES`` to ``MAX_MESSAGE``.
        allowed_stores: shell-style patterns of the PostgreSQL and Redis store URIs (password
            masked) a request may name (``--allow-store``); ``store_uri`` is always allowed.
        max_active_runs_per_tenant: the most runs one tenant (the one tenant without
            principals) may hold that have not finished; ``StartRun`` and ``ForkRun`` over it
            are refused with ``TOO_MANY_RUNS`` (``sidecar.quotas``).
        max_watches_per_tenant: the most ``WatchRun`` streams one tenant may have open; one
            more is refused with ``TOO_MANY_WATCHERS``.
    """

    token: str
    principals: Principals | None = field(default=None, compare=False)
    listen: str = DEFAULT_LISTEN
    store_uri: str = DEFAULT_STORE
    tls_cert: Path | None = None
    tls_key: Path | None = None
    python_tools: Mapping[str, Tool] | None = field(default=None, compare=False)
    reflection: bool = True
    heartbeat_s: float = 15.0
    grace_s: float = 2.0
    owner_id: str | None = None
    store_roots: tuple[str, ...] | None = None
    host_call_timeout_s: float = DEFAULT_TIMEOUT
    lease_ttl_s: float = DEFAULT_LEASE_TTL
    retain_runs: int | None = None
    retain_seconds: float | None = None
    retention_interval_s: float = DEFAULT_INTERVAL
    journal: bool = True
    encryption_keys: KeyRing | None = field(default=None, compare=False)
    max_input_bytes: int = DEFAULT_MAX_INPUT_BYTES
    allowed_stores: tuple[str, ...] = ()
    max_active_runs_per_tenant: int = DEFAULT_MAX_ACTIVE_RUNS_PER_TENANT
    max_watches_per_tenant: int = DEFAULT_MAX_WATCHES_PER_TENANT


def check_limits(config: ServerConfig) -> None:
    """Refuse durations and sizes no server can run with (``nan``, zero, negative, too big).

    Raises:
        ServerConfigError: naming the option.
    """
    durations = (
        ("--heartbeat", config.heartbeat_s),
        ("--host-call-timeout", config.host_call_timeout_s),
        ("--lease-ttl", config.lease_ttl_s),
    )
    for option, value in durations:
        # math.isfinite: nan compares false with everything, so "<= 0" alone lets it through.
        if not (math.isfinite(value) and value > 0):
            raise ServerConfigError(f"{option} must be a positive number of seconds, got {value}")
    if not MIN_INPUT_BYTES <= config.max_input_bytes <= MAX_MESSAGE:
        raise ServerConfigError(
            f"--max-input-bytes must be in [{MIN_INPUT_BYTES}, {MAX_MESSAGE}], "
            f"got {config.max_input_bytes}"
        )
    counts = (
        ("--max-active-runs-per-tenant", config.max_active_runs_per_tenant),
        ("--max-watches-per-tenant", config.max_watches_per_tenant),
    )
    for option, count in counts:
        if count < 1:
            raise ServerConfigError(f"{option} must be at least 1, got {count}")


def split_address(listen: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[v6]:PORT`` for IPv6) as host and port.

    Raises:
        ServerConfigError: the address is malformed.
    """
    host, sep, port_text = listen.rpartition(":")
    if not sep or not host or not port_text.isdigit() or int(port_text) > 65535:
        raise ServerConfigError(f"--listen must be HOST:PORT, got {listen!r}")
    return host.removeprefix("[").removesuffix("]"), int(port_text)


def is_loopback(host: str) -> bool:
    """Whether ``host`` only reaches this machine."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class Sidecar:
    """A running sidecar server (``async with Sidecar(config) as sidecar``)."""

    def __init__(self, config: ServerConfig) -> None:
        self.config = config
        self.port = 0
        self._stack = AsyncExitStack()
        self._tasks: set[asyncio.Task[None]] = set()
        self._server: Any = None
        self._group: asyncio.TaskGroup | None = None
        self.unreadable: list[str] = []
        self.owner_id = ""
        self.store_roots: tuple[str, ...] = ()
        self.registry: RunRegistry | None = None  # once started (tests, benches)
        self.executor: RunExecutor | None = None  # once started (tests)
        self.state: AtomicStore | None = None  # the state store, once started
        self.journals: RunJournals | None = None  # once started
        self.run_quota: RunQuota | None = None  # once started (tests)
        self.watch_quota: WatchQuota | None = None  # once started (tests)

    @property
    def address(self) -> str:
        """``host:port`` as bound (with the chosen port when 0 was asked)."""
        host, _ = split_address(self.config.listen)
        return f"[{host}]:{self.port}" if ":" in host else f"{host}:{self.port}"

    def _credentials(self, host: str) -> Any:
        cert, key = self.config.tls_cert, self.config.tls_key
        if (cert is None) != (key is None):
            raise ServerConfigError("--tls-cert and --tls-key go together")
        if cert is None or key is None:
            if not is_loopback(host):
                raise ServerConfigError(
                    f"refusing to listen on non-loopback {host!r} without TLS "
                    "(give --tls-cert and --tls-key)"
                )
            return None
        return grpc.ssl_server_credentials([(key.read_bytes(), cert.read_bytes())])

    def spawn(self, coro: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        """Run ``coro`` as a task of the server; its failure is logged, never fatal."""
        assert self._group is not None
        task = self._group.create_task(_logged(coro))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def __aenter__(self) -> Sidecar:
        try:
            await self._start()
        except BaseException:
            await self._stack.aclose()
            raise
        return self

    async def _start(self) -> None:
        config = self.config
        check_limits(config)
        host, port = split_address(config.listen)
        credentials = self._credentials(host)
        store_uri = normalize_uri(config.store_uri, field="--store")
        own = parse_store_uri(store_uri)
        if own.kind in ("file", "sqlite"):  # errors sent never name the server's file
            self._stack.callback(hide_path(own.location))
        try:
            self.owner_id = incarnation_id(config.owner_id)
        except ValueError as exc:
            raise ServerConfigError(f"--owner-id: {exc}") from None
        roots = config.store_roots
        if roots is None:
            roots = default_store_roots(store_uri)
        self.store_roots = await asyncio.to_thread(_real_paths, roots)
        stores = await self._stack.enter_async_context(StoreRegistry(config.encryption_keys))
        state = await stores.atomic(store_uri)
        shared = shared_store(store_uri)
        self.journals = journals = RunJournals(
            state_uri=store_uri, enabled=config.journal, keyring=config.encryption_keys
        )
        registry = RunRegistry(state, spawn=self.spawn, shared=shared, journals=journals)
        self.registry, self.state = registry, state
        # Entered before the task group, so it runs at a stop once every run's task has ended
        # and before the stores close: the next process continues each log with no gap.
        self._stack.push_async_callback(registry.close)
        self._stack.push_async_callback(journals.aclose)  # after the runs, before the stores
        self._group = await self._stack.enter_async_context(asyncio.TaskGroup())
        self._stack.push_async_callback(self._cancel_tasks)
        _, unreadable = await registry.scan()
        self.unreadable = sorted(unreadable)
        tools = load_python_tools() if config.python_tools is None else dict(config.python_tools)
        tool_host = ToolHost(
            reserved=frozenset(tools), default_timeout_s=config.host_call_timeout_s
        )
        host_events = HostCallEvents(registry)
        host_events.attach(tool_host)
        executor = RunExecutor(
            registry=registry,
            tool_host=tool_host,
            stores=stores,
            python_tools=tools,
            spawn=self.spawn,
            default_store_uri=store_uri,
            store_roots=self.store_roots,
            allowed_stores=config.allowed_stores,
            host_events=host_events,
            run_store=lease_terms(
                state, owner_id=self.owner_id, lease_ttl=config.lease_ttl_s, shared=shared
            ),
            fenced=shared,
            journals=journals,
        )
        self.executor = executor
        failover = Failover(executor=executor, registry=registry, lease_ttl=config.lease_ttl_s)
        deleter = RunDeleter(registry=registry, executor=executor, stores=stores)
        retention = None
        if config.retain_runs is not None or config.retain_seconds is not None:
            retention = Retention(
                registry=registry,
                executor=executor,
                deleter=deleter,
                keep_runs=config.retain_runs,
                keep_seconds=config.retain_seconds,
                interval=config.retention_interval_s,
            )
        desk = ApprovalDesk(
            registry=registry, stores=stores, executor=executor, default_store_uri=store_uri
        )
        executor.on_suspended = desk.resume_decided  # decided while a parallel task ran
        server = grpc.aio.server(
            interceptors=[
                BearerAuthInterceptor(config.token, principals=config.principals),
                DecodingInterceptor(max_input_bytes=config.max_input_bytes),
            ],
            options=[
                ("grpc.max_receive_message_length", MAX_MESSAGE),
                ("grpc.max_send_message_length", MAX_MESSAGE),
                ("grpc.keepalive_time_ms", 30_000),
                ("grpc.keepalive_permit_without_calls", 1),
                ("grpc.http2.min_ping_interval_without_data_ms", 10_000),
                # gRPC sets SO_REUSEPORT by default: a second sidecar on the same port would
                # bind too and take half the connections. It must fail with "address in use".
                ("grpc.so_reuseport", 0),
            ],
        )
        heartbeat = config.heartbeat_s
        tenancy = Tenancy(config.principals)
        runs = RunServicer(
            executor=executor,
            registry=registry,
            deleter=deleter,
            timelines=RunTimelines(
                registry=registry,
                stores=stores,
                journals=journals,
                run_store=executor.run_store.store,
            ),
            tenancy=tenancy,
            forks=RunForks(registry=registry, executor=executor, stores=stores, journals=journals),
            heartbeat_s=heartbeat,
            max_active_runs=config.max_active_runs_per_tenant,
            max_watches=config.max_watches_per_tenant,
        )
        self.run_quota, self.watch_quota = runs.run_quota, runs.watch_quota
        pb_grpc.add_RunServiceServicer_to_server(runs, server)  # type: ignore[no-untyped-call]
        pb_grpc.add_ApprovalServiceServicer_to_server(ApprovalServicer(desk, tenancy), server)  # type: ignore[no-untyped-call]
        pb_grpc.add_ToolHostServiceServicer_to_server(  # type: ignore[no-untyped-call]
            ToolHostServicer(tool_host, tenancy=tenancy, ping_s=heartbeat), server
        )
        pb_grpc.add_SystemServiceServicer_to_server(  # type: ignore[no-untyped-call]
            SystemServicer(executor=executor, desk=desk, default_store_uri=store_uri), server
        )
        health_servicer = health.aio.HealthServicer()
        health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
        if config.reflection:
            names = (*SERVICES, health.SERVICE_NAME, reflection.SERVICE_NAME)
            reflection.enable_server_reflection(names, server)
        # gRPC binds "localhost" to 127.0.0.1 and ::1, and succeeds with ::1 alone when another
        # process has 127.0.0.1:P: a second sidecar started beside the first. Binding the
        # address "localhost" means to clients first makes that an "address in use".
        bound = "127.0.0.1" if host == "localhost" else host
        bind = f"[{bound}]:{port}" if ":" in bound else f"{bound}:{port}"
        try:
            if credentials is None:
                self.port = server.add_insecure_port(bind)
            else:
                self.port = server.add_secure_port(bind, credentials)
        except RuntimeError:  # grpc's "Failed to bind"; its log line has the errno
            self.port = 0
        if self.port == 0:
            raise ServerConfigError(f"could not bind {bind}: address in use (or not available)")
        await server.start()
        self._server = server
        self._stack.push_async_callback(self._stop_server)
        # The sweeps start once the server serves: a sidecar that cannot bind adopts nothing
        # (and leaves no sweep never started behind it).
        self.spawn(failover.run())
        if retention is not None:
            self.spawn(retention.run())
        serving = health_pb2.HealthCheckResponse.SERVING
        for name in ("", *SERVICES):
            await health_servicer.set(name, serving)

    async def _stop_server(self) -> None:
        # Before the grace period: the RPCs received go on in it, but start no attempt that
        # the stop would cancel at once (they are refused DRAINING, retryable elsewhere).
        assert self.executor is not None
        self.executor.drain()
        await self._server.stop(self.config.grace_s)

    async def _cancel_tasks(self) -> None:
        for task in list(self._tasks):
            # A run's journal ends with this reason: the run was interrupted, not cancelled.
            task.cancel(STOPPING)

    async def wait_closed(self) -> None:
        """Wait until the server terminates."""
        await self._server.wait_for_termination()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self._stack.aclose()


def _real_paths(paths: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(os.path.realpath(path) for path in paths)


async def _logged(coro: Coroutine[Any, Any, None]) -> None:
    try:
        await coro
    except Exception:
        logger.exception("a sidecar background task failed")
