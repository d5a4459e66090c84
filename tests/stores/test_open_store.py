"""``open_store(uri)``: which store each URI names, and the typed error of each bad URI."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from service_kit import FreshStores

from oma_actors.errors import ConfigurationError, StoreError
from oma_actors.stores import (
    FileStore,
    InMemoryStore,
    SqliteStore,
    open_store,
    parse_store_uri,
)
from oma_actors.stores.postgres import PostgresStore
from oma_actors.stores.redis import RedisStore
from oma_actors.stores.rows import redact


async def test_each_scheme_opens_its_store(tmp_path: Path, fresh_stores: FreshStores) -> None:
    async with open_store("memory://") as memory, open_store("memory://named") as named:
        assert isinstance(memory, InMemoryStore)
        assert named is not memory, "each memory:// open is a new store; the name is a label"
    async with open_store(f"file://{tmp_path}/state.json") as file_store:
        assert isinstance(file_store, FileStore)
    async with open_store(f"sqlite://{tmp_path}/state.db") as sqlite:
        assert isinstance(sqlite, SqliteStore)
        assert sqlite.path == str(tmp_path / "state.db")
        await sqlite.set("k", "v")
    postgres = await fresh_stores.postgres()  # a table dropped after the test
    dsn = postgres.name.split(" (table", 1)[0]
    for scheme in ("postgresql", "postgres"):
        uri = f"{scheme}{dsn.removeprefix('postgresql')}?table={postgres.table}"
        async with open_store(uri) as store:
            assert isinstance(store, PostgresStore)
            assert store.table == postgres.table
    redis = await fresh_stores.redis()
    async with open_store(f"{redis.name.split(' (prefix', 1)[0]}?prefix={redis.prefix}") as store:
        assert isinstance(store, RedisStore)
        assert store.prefix == redis.prefix


async def test_a_bare_path_is_a_file_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    async with open_store("state.json") as store:
        assert isinstance(store, FileStore)
        assert store.path == str(tmp_path / "state.json")


def test_every_spelling_of_one_file_has_one_canonical_uri(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    real = f"file://{tmp_path}/real/state.json"
    for spelling in (
        real,
        f"file:////{tmp_path}/real/state.json",
        f"file://localhost{tmp_path}/real/state.json",
        f"file://{tmp_path}/link/state.json",
        f"file://{tmp_path}/link/../real/./state.json",
        str(tmp_path / "link" / "state.json"),
        f"file://{tmp_path}/real/state%2Ejson",
    ):
        assert parse_store_uri(spelling).uri == real, spelling
    assert (
        parse_store_uri(f"sqlite:////{tmp_path}/link/x.db").uri == f"sqlite://{tmp_path}/real/x.db"
    )


def test_service_uris_keep_their_options_and_hide_the_password() -> None:
    target = parse_store_uri("postgresql://u:secret@db:5433/app?sslmode=disable&table=runs")
    assert (target.kind, target.option) == ("postgresql", "runs")
    assert target.location == "postgresql://u:secret@db:5433/app?sslmode=disable"
    assert target.uri == "postgresql://u:***@db:5433/app?sslmode=disable&table=runs"
    target = parse_store_uri("rediss://:pw@cache:6380/2?prefix=app%3A")
    assert (target.kind, target.location, target.option) == (
        "redis",
        "rediss://:pw@cache:6380/2",
        "app:",
    )
    assert "pw" not in target.uri


@pytest.mark.parametrize(
    ("uri", "message"),
    [
        ("", "empty store URI"),
        ("mysql://u@h/db", "unknown store URI scheme 'mysql' in mysql://u@h/db"),
        ("s3://bucket/state.json", "unknown store URI scheme 's3'"),
        ("file://otherhost/x.json", "names host 'otherhost'"),
        ("file:relative.json", "needs an absolute path"),
        ("file:///tmp/dir/", "names a directory"),
        ("file:///tmp/x.json?mode=ro", "takes no query options"),
        ("sqlite://relative.db", "names host 'relative.db'"),
        ("redis://h:notaport/0", "malformed store URI redis://h:notaport/0"),
        ("redis://h:6379/zero", "the database must be a number"),
        ("postgresql://u:secret@h:99999/db", "malformed store URI postgresql://u:***@h:99999/db"),
        (
            "postgresql://app:se#cret@h:5432/db",
            "malformed store URI postgresql://app:***@h:5432/db",
        ),
        ("redis://:se/cret@h:6379/0", "malformed store URI redis://:***@h:6379/0"),
        ("postgresql://h/db?table=drop-me;", "is not a plain name"),
        ("postgresql://h/db?table=a&table=b", "exactly one non-empty table="),
        ("redis://h/0?prefix=", "exactly one non-empty prefix="),
    ],
)
async def test_bad_uris_are_configuration_errors_naming_the_uri(uri: str, message: str) -> None:
    with pytest.raises(
        ConfigurationError, match=message.replace("?", r"\?").replace("*", r"\*")
    ) as caught:
        async with open_store(uri):
            pytest.fail("a bad URI opened a store")
    assert "secret" not in str(caught.value)


@pytest.mark.parametrize(
    ("uri", "names"),
    [
        (
            "postgresql://postgres:secret@127.0.0.1:1/test",
            "postgresql://postgres:***@127.0.0.1:1/test",
        ),
        ("redis://:secret@127.0.0.1:1/0", "redis://:***@127.0.0.1:1/0"),
        # asyncpg and redis-py connect with a password given as a query option too
        (
            "postgresql://postgres@127.0.0.1:1/test?password=secret",
            "postgresql://postgres@127.0.0.1:1/test?password=***",
        ),
        ("redis://127.0.0.1:1/0?password=secret", "redis://127.0.0.1:1/0?password=***"),
    ],
)
async def test_an_unreachable_server_is_a_store_error_naming_the_store(
    uri: str, names: str
) -> None:
    with pytest.raises(StoreError, match="cannot connect") as caught:
        async with open_store(uri):
            pytest.fail("an unreachable server opened")
    assert names in str(caught.value)
    assert "secret" not in str(caught.value)


async def test_wrong_credentials_or_database_are_store_errors(
    postgres_dsn: str, redis_url: str
) -> None:
    host = postgres_dsn.split("@", 1)[1].rsplit("/", 1)[0]
    for uri, reason in (
        (f"postgresql://postgres@{host}/oma_no_such_database", "does not exist"),
        (f"postgresql://oma_no_such_role:secret@{host}/test", "oma_no_such_role"),
        (redis_url.replace("redis://", "redis://oma_no_such_user:secret@"), "invalid username"),
    ):
        with pytest.raises(StoreError, match=reason) as caught:
            async with open_store(uri):
                pytest.fail(f"{uri} opened")
        assert "secret" not in str(caught.value)


@pytest.mark.parametrize(
    ("modules", "make", "extra"),
    [
        (("asyncpg",), lambda: PostgresStore("postgresql://h/db"), "oma-actors[postgres]"),
        (("redis", "redis.asyncio"), lambda: RedisStore("redis://h/0"), "oma-actors[redis]"),
    ],
)
async def test_a_missing_driver_names_the_extra_to_install(
    monkeypatch: pytest.MonkeyPatch, modules: tuple[str, ...], make: object, extra: str
) -> None:
    for module in modules:
        monkeypatch.setitem(sys.modules, module, None)  # makes `import module` fail
    store = make()  # type: ignore[operator]
    with pytest.raises(ConfigurationError, match=extra.replace("[", r"\[").replace("]", r"\]")):
        await store.open()


def test_a_table_name_must_be_a_plain_identifier() -> None:
    for table in ("oma kv", 'x"; DROP TABLE y; --', "1abc", "", "a" * 56):
        with pytest.raises(ConfigurationError, match="not a plain identifier"):
            PostgresStore("postgresql://h/db", table=table)
    assert PostgresStore("postgresql://h/db", table="A_1" + "b" * 52).table.startswith("A_1")


def test_redact_masks_only_the_password() -> None:
    assert redact("postgresql://u:pw@h:1/db?x=1") == "postgresql://u:***@h:1/db?x=1"
    assert redact("redis://:pw@h/0") == "redis://:***@h/0"
    assert redact("postgresql://u@h/db") == "postgresql://u@h/db"
    assert redact("sqlite:///tmp/x.db") == "sqlite:///tmp/x.db"
    assert redact("file:///srv/a@b/state.json") == "file:///srv/a@b/state.json"
    assert redact("postgresql://u@h/db?user=a@b") == "postgresql://u@h/db?user=a@b"


@pytest.mark.parametrize(
    ("uri", "shown"),
    [
        ("postgresql://h/db?password=pw&table=t", "postgresql://h/db?password=***&table=t"),
        ("postgresql://h/db?sslpassword=pw", "postgresql://h/db?sslpassword=***"),
        ("redis://h/0?password=pw", "redis://h/0?password=***"),
        # a password holding an unescaped ``#``, ``/`` or ``?`` cuts urlsplit's user part off
        ("postgresql://app:p#w@db:5432/app", "postgresql://app:***@db:5432/app"),
        ("redis://:p/w@h:6379/0", "redis://:***@h:6379/0"),
        ("postgresql://app:p?w@db/app", "postgresql://app:***@db/app"),
        ("postgresql://app:12/pw@db/app", "postgresql://app:***@db/app"),
    ],
)
def test_redact_masks_a_password_wherever_the_uri_holds_it(uri: str, shown: str) -> None:
    assert redact(uri) == shown
    assert "pw" not in shown.replace("postgresql", "")


def test_a_canonical_store_uri_masks_a_query_password() -> None:
    """``StoreTarget.uri`` is what the sidecar shows clients (``GetRun.store_uri``)."""
    target = parse_store_uri("postgresql://app@db:5432/runs?password=pw&table=t")
    assert target.uri == "postgresql://app@db:5432/runs?password=***&table=t"
