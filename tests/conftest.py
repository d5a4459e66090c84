"""Fixtures every test directory can use: the test PostgreSQL and Redis, and fresh stores on them.

A test that needs a service asks for ``postgres_dsn`` or ``redis_url`` (or for a store through
``fresh_stores``): it is skipped with a visible reason when the service is unreachable locally,
and FAILS under ``CI=true`` (see ``service_kit``), so CI cannot pass by skipping them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest
from service_kit import FreshStores, probe_postgres, probe_redis

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from pathlib import Path


@pytest.fixture(scope="session")
def postgres_dsn() -> str:
    """The DSN of the test PostgreSQL (database ``test``); skip locally or fail in CI if down."""
    return probe_postgres()


@pytest.fixture(scope="session")
def redis_url() -> str:
    """The URL of the test Redis; skip locally or fail in CI if it is down."""
    return probe_redis()


@pytest.fixture
async def fresh_stores(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[FreshStores]:
    """Makes fresh SQLite/PostgreSQL/Redis stores for this test and removes them afterwards."""
    stores = FreshStores(
        tmp_path,
        postgres_dsn=lambda: str(request.getfixturevalue("postgres_dsn")),
        redis_url=lambda: str(request.getfixturevalue("redis_url")),
    )
    try:
        yield stores
    finally:
        await stores.aclose()
