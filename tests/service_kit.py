"""What a test needs from the machine: services, executables, and fresh service-backed stores.

A missing service or tool SKIPS a test locally, with a visible reason, and FAILS it under
``CI=true``: CI must never turn green by skipping what it is there to run. Import from here in
any test module or conftest (``tests/`` is on ``sys.path`` through the root conftest)::

    from service_kit import require_executable, skip_or_fail

    def test_canonical_json_matches_node() -> None:
        node = require_executable("node")

The PostgreSQL and Redis used by the tests default to this machine's (``127.0.0.1``, trust auth,
database ``test``) and can be pointed elsewhere with ``OMA_TEST_POSTGRES_DSN`` and
``OMA_TEST_REDIS_URL``.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar
from urllib.parse import urlsplit

import pytest

from oma_actors.stores import SqliteStore
from oma_actors.stores.postgres import PostgresStore
from oma_actors.stores.redis import RedisStore

if TYPE_CHECKING:
    from collections.abc import Callable, Coroutine

    from oma_actors.stores import MemoryStore

_S = TypeVar("_S", SqliteStore, PostgresStore, RedisStore)

POSTGRES_DSN = os.environ.get("OMA_TEST_POSTGRES_DSN", "postgresql://postgres@127.0.0.1:5432/test")
REDIS_URL = os.environ.get("OMA_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")


def in_ci() -> bool:
    """Whether the tests run under CI (``CI=true``), where nothing may be skipped for lack."""
    return os.environ.get("CI", "").strip().lower() in ("true", "1", "yes")


def skip_or_fail(reason: str) -> NoReturn:
    """Skip the test with ``reason`` locally; fail it under ``CI=true``."""
    if in_ci():
        pytest.fail(f"{reason} (CI=true: this must be available in CI)", pytrace=False)
    pytest.skip(reason)


def require_executable(name: str) -> str:
    """The path of executable ``name``; skips (or fails under CI) when it is not installed."""
    found = shutil.which(name)
    if found is None:
        skip_or_fail(f"{name} is not installed")
    return found


def require_tcp(name: str, url: str) -> None:
    """Skips (or fails under CI) unless something accepts connections at ``url``'s host:port."""
    parts = urlsplit(url)
    host, port = parts.hostname or "127.0.0.1", parts.port
    try:
        with socket.create_connection((host, port or 0), timeout=2):
            return
    except OSError as exc:
        skip_or_fail(f"{name} is not reachable at {host}:{port} ({exc})")


def _run(coroutine: Coroutine[Any, Any, None]) -> None:
    # A sync fixture may run while pytest-asyncio owns this thread's loop: use another thread.
    with ThreadPoolExecutor(max_workers=1) as pool:
        pool.submit(asyncio.run, coroutine).result()


def probe_postgres() -> str:
    """The test PostgreSQL's DSN once it answers a query; skips (fails under CI) otherwise."""
    require_tcp("PostgreSQL", POSTGRES_DSN)

    async def query() -> None:
        import asyncpg

        connection = await asyncpg.connect(POSTGRES_DSN, timeout=10)
        await connection.close()

    try:
        _run(query())
    except Exception as exc:
        skip_or_fail(f"PostgreSQL at {POSTGRES_DSN} refused the test connection ({exc})")
    return POSTGRES_DSN


def probe_redis() -> str:
    """The test Redis's URL once it answers PING; skips (fails under CI) otherwise."""
    require_tcp("Redis", REDIS_URL)

    async def ping() -> None:
        import redis.asyncio

        client = redis.asyncio.Redis.from_url(REDIS_URL, socket_connect_timeout=10)
        try:
            await client.ping()
        finally:
            await client.aclose()

    try:
        _run(ping())
    except Exception as exc:
        skip_or_fail(f"Redis at {REDIS_URL} did not answer PING ({exc})")
    return REDIS_URL


def unique(prefix: str) -> str:
    """A name no other test (or earlier run) uses: ``prefix`` plus 12 random hex digits."""
    return f"{prefix}{uuid.uuid4().hex[:12]}"


class FreshStores:
    """Makes fresh, empty, open stores for one test, and removes every trace of them after.

    Each PostgreSQL store gets its own table in the test database, each Redis store its own key
    prefix, each SQLite store its own file under ``tmp_path``. ``aclose()`` closes them all and
    drops the tables and keys. The services are probed only when a store of theirs is asked for.
    """

    def __init__(
        self, tmp_path: Path, postgres_dsn: Callable[[], str], redis_url: Callable[[], str]
    ) -> None:
        self._tmp_path = tmp_path
        self._probes = {"postgres": postgres_dsn, "redis": redis_url}
        self._found: dict[str, str] = {}
        self._opened: list[SqliteStore | PostgresStore | RedisStore] = []
        self._tables: set[str] = set()
        self._prefixes: set[str] = set()

    async def sqlite(self, path: Path | None = None) -> SqliteStore:
        """A new SQLite store (over ``path`` when given, else a new file)."""
        path = path or self._tmp_path / unique("sqlite-") / "state.db"
        return await self._track(SqliteStore(path))

    def postgres_table(self, table: str | None = None) -> tuple[str, str]:
        """The DSN and a new (or the given) store table, dropped with its journal after the test."""
        table = table or unique("oma_test_")
        dsn = self._postgres_dsn()  # skips (or fails) here when PostgreSQL is down
        self._tables.add(table)
        return dsn, table

    async def postgres(self, table: str | None = None) -> PostgresStore:
        """A new PostgreSQL store (over ``table`` when given, else a new table)."""
        table = table or unique("oma_test_")
        dsn = self._postgres_dsn()  # skips (or fails) here when PostgreSQL is down
        self._tables.add(table)
        return await self._track(PostgresStore(dsn, table=table))

    async def redis(self, prefix: str | None = None) -> RedisStore:
        """A new Redis store (under ``prefix`` when given, else a new prefix)."""
        prefix = prefix or unique("oma-test:") + ":"
        url = self._redis_url()  # skips (or fails) here when Redis is down
        self._prefixes.add(prefix)
        return await self._track(RedisStore(url, prefix=prefix))

    async def reopen(self, store: MemoryStore) -> MemoryStore:
        """A second, independent instance over the same durable state as ``store``."""
        if isinstance(store, SqliteStore):
            return await self.sqlite(Path(store.path))
        if isinstance(store, PostgresStore):
            return await self.postgres(store.table)
        if isinstance(store, RedisStore):
            return await self.redis(store.prefix)
        raise TypeError(f"cannot reopen {store!r}")

    def _postgres_dsn(self) -> str:
        return self._service("postgres")

    def _redis_url(self) -> str:
        return self._service("redis")

    def _service(self, name: str) -> str:
        # Probed (and so skipped or failed) on first use only; remembered for the cleanup.
        if name not in self._found:
            self._found[name] = self._probes[name]()
        return self._found[name]

    async def aclose(self) -> None:
        """Close every store, then drop its table or keys."""
        for store in self._opened:
            await store.aclose()
        if self._tables:
            import asyncpg

            connection = await asyncpg.connect(self._postgres_dsn())
            try:
                for table in self._tables:
                    await connection.execute(f'DROP TABLE IF EXISTS "{table}"')
                    # and its run journal (open_journal's table beside the store's, D15), with
                    # the journal's dispatch marks
                    await connection.execute(f'DROP TABLE IF EXISTS "{table}_journal"')
                    await connection.execute(f'DROP TABLE IF EXISTS "{table}_journal_marks"')
            finally:
                await connection.close()
        if self._prefixes:
            import redis.asyncio

            client = redis.asyncio.Redis.from_url(self._redis_url())
            try:
                for prefix in self._prefixes:
                    keys = [key async for key in client.scan_iter(match=f"{prefix}*")]
                    if keys:
                        await client.delete(*keys)
            finally:
                await client.aclose()

    async def _track(self, store: _S) -> _S:
        self._opened.append(store)
        return await store.open()
