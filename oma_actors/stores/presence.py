"""Whether the store a URI names is there, asked without creating it.

Opening a store creates what it lacks (a SQLite file's table, a PostgreSQL table): right for a
run that is about to write, wrong for a command that only looks. A mistyped ``?table=`` made
``oma runs list`` create that table and answer "no runs"; an empty SQLite file was given the
store's schema by ``oma checkpoint list``. A reader asks here first.
"""

from __future__ import annotations

import asyncio
import sqlite3
from typing import TYPE_CHECKING
from urllib.parse import quote

import aiofiles.os

from oma_actors.stores.postgres import DEFAULT_TABLE, asyncpg_module
from oma_actors.stores.sqlite import TABLE as SQLITE_TABLE

if TYPE_CHECKING:
    from oma_actors.stores.uri import StoreTarget


async def store_missing(target: StoreTarget) -> str | None:
    """What is missing of the store ``target`` names (one line), or ``None`` when it is there
    or cannot be told without opening it (a memory or Redis store; a database that cannot be
    reached, which opening the store then reports).

    Nothing is created or written: a SQLite file is opened read-only, PostgreSQL is asked for
    the table by name.
    """
    if target.kind in ("file", "sqlite") and not await aiofiles.os.path.exists(target.location):
        return f"no store file at {target.location}"
    if target.kind == "sqlite" and await table_missing(target, SQLITE_TABLE):
        return f"no store in {target.location} (it holds no {SQLITE_TABLE} table)"
    if target.kind == "postgresql":
        table = target.option or DEFAULT_TABLE
        if await table_missing(target, table):
            return f"no store table {table!r} in {target.uri.split('?')[0]}"
    return None


async def table_missing(target: StoreTarget, table: str) -> bool:
    """Whether the SQLite or PostgreSQL database of ``target`` surely has no table ``table``
    (the store's own, or its journal's), asked without creating anything; ``False`` when it
    cannot be told (another kind of store, a file that is no database, a server that cannot be
    reached: opening it then reports why)."""
    if target.kind == "sqlite":
        return not await asyncio.to_thread(_sqlite_holds, target.location, table)
    if target.kind == "postgresql":
        return await _postgres_lacks(target.location, table)
    return False


def _sqlite_holds(path: str, table: str) -> bool:
    """Whether the SQLite file at ``path`` has ``table`` (``True`` when it cannot be read as a
    database: opening the store reports that)."""
    try:
        connection = sqlite3.connect(f"file:{quote(path)}?mode=ro", uri=True)
    except sqlite3.Error:
        return True
    try:
        found = connection.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (table,)
        ).fetchone()
    except sqlite3.Error:
        return True
    finally:
        connection.close()
    return found is not None


async def _postgres_lacks(dsn: str, table: str) -> bool:
    """Whether the database ``dsn`` names has no table ``table`` (``False`` when it cannot be
    asked)."""
    driver = asyncpg_module()
    try:
        connection = await driver.connect(dsn, timeout=10)
    except (TimeoutError, OSError, driver.PostgresError, driver.InterfaceError):
        return False
    try:
        found = await connection.fetchval("SELECT to_regclass($1) IS NOT NULL", table)
    except driver.PostgresError:
        return False
    finally:
        await connection.close()
    return found is False
