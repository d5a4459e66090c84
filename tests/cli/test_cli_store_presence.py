"""A command pointed at a store that is not there says so and creates nothing (README: the
listing commands "only read"): an empty SQLite file, a SQLite database of another program, a
mistyped PostgreSQL ``?table=``."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from typing import TYPE_CHECKING

import pytest

from oma_actors.stores import parse_store_uri, store_missing

if TYPE_CHECKING:
    from pathlib import Path

    from service_kit import FreshStores

COMMANDS = (("checkpoint", "list"), ("runs", "list"), ("approvals", "list"))


def oma(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "oma_actors.cli.main", *args],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip


@pytest.mark.parametrize("command", COMMANDS)
def test_a_sqlite_file_without_the_store_s_table_is_refused_and_left_as_it_was(
    tmp_path: Path, command: tuple[str, str]
) -> None:
    empty, other = tmp_path / "empty.db", tmp_path / "other.db"
    empty.write_bytes(b"")
    with sqlite3.connect(other) as connection:
        connection.execute("CREATE TABLE notes (text TEXT)")
    before = other.read_bytes()
    for path in (empty, other):
        done = oma(*command, "--store", f"sqlite:///{path}")
        assert done.returncode == 2, done.stdout
        assert done.stderr.strip().endswith(f"no store in {path} (it holds no oma_kv table)")
        assert done.stdout == ""
    assert empty.read_bytes() == b""  # no schema written into it
    assert other.read_bytes() == before


async def test_a_mistyped_postgres_table_is_refused_and_not_created(
    fresh_stores: FreshStores,
) -> None:
    dsn, table = fresh_stores.postgres_table()  # never created: dropped after the test anyway
    uri = f"{dsn}?table={table}"
    assert await store_missing(parse_store_uri(uri)) == (
        f"no store table {table!r} in {parse_store_uri(uri).uri.split('?')[0]}"
    )
    done = oma("runs", "list", "--store", uri)
    assert done.returncode == 2
    assert f"no store table {table!r}" in done.stderr
    assert await store_missing(parse_store_uri(uri)) is not None  # still not there
    store = await fresh_stores.postgres(table)  # once the store exists, nothing is missing
    await store.set("k", "v")
    assert await store_missing(parse_store_uri(uri)) is None


async def test_stores_that_are_there_or_cannot_be_told_are_not_missing(tmp_path: Path) -> None:
    assert await store_missing(parse_store_uri(str(tmp_path / "absent.json"))) == (
        f"no store file at {tmp_path / 'absent.json'}"
    )
    assert await store_missing(parse_store_uri("memory://x")) is None
    garbage = tmp_path / "garbage.db"
    garbage.write_bytes(b"not a database at all, but some bytes")
    # Opening it reports what it is (a typed error there): not called missing here.
    assert await store_missing(parse_store_uri(f"sqlite:///{garbage}")) is None
