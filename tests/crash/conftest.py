"""Fixtures of the crash tests: uninterrupted baselines, run once per scenario and tool mode.

A row that takes ``save`` runs once per save path: ``snapshot`` (a snapshot per boundary),
``journal`` (journal-first, D10, a JSONL journal beside the FileStore), and journal-first with the
store and its journal in one database (D15): ``sqlite`` and ``postgresql`` (a fresh table of the
test PostgreSQL, dropped after the row; skipped locally, failed under CI, when it is down). A row
that takes ``journal_save`` runs on the three journal-first paths only. The baselines are always
uninterrupted snapshot runs, so a journal-first crash and restore is compared with the plain run,
not with itself.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator

import pytest
from crash_checks import Baseline, run_baseline
from crash_harness import JOURNAL_SAVES, SAVES, Scenario
from service_kit import unique

from oma_actors.testing.crash_points import CRASH_EXIT


@pytest.fixture(scope="session")
def baseline(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str, str], Baseline]:
    """``baseline(scenario, mode)``: the uninterrupted run's result, model calls and effects."""
    cache: dict[tuple[str, str], Baseline] = {}

    def get(scenario: str, mode: str = "default") -> Baseline:
        key = (scenario, mode)
        if key not in cache:
            cache[key] = run_baseline(tmp_path_factory.mktemp(f"baseline-{scenario}-{mode}"), *key)
        return cache[key]

    return get


@pytest.fixture(params=SAVES)
def save(request: pytest.FixtureRequest) -> Iterator[str]:
    """The save path of the row (``Scenario.save``): one of ``SAVES``."""
    yield from save_path(request)


@pytest.fixture(params=JOURNAL_SAVES)
def journal_save(request: pytest.FixtureRequest) -> Iterator[str]:
    """A journal-first save path of the row (``Scenario.save``): one of ``JOURNAL_SAVES``."""
    yield from save_path(request)


def save_path(request: pytest.FixtureRequest) -> Iterator[str]:
    """``request.param``; on PostgreSQL ``postgresql:<fresh table>``, its tables dropped after."""
    kind = str(request.param)
    if kind != "postgresql":
        yield kind
        return
    dsn = str(request.getfixturevalue("postgres_dsn"))
    table = unique("oma_crash_")
    yield f"{kind}:{table}"
    asyncio.run(drop_tables(dsn, table, f"{table}_journal"))


async def drop_tables(dsn: str, *tables: str) -> None:
    """Drop ``tables`` of the test database (a row's store and journal)."""
    import asyncpg

    connection = await asyncpg.connect(dsn)
    try:
        for table in tables:
            await connection.execute(f'DROP TABLE IF EXISTS "{table}"')
    finally:
        await connection.close()


@pytest.fixture(scope="session")
def crashed_store(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    """The FileStore bytes a real crash left behind: chain, all calls committed (C04 boundary)."""
    sc = Scenario(tmp_path_factory.mktemp("crashed"), "chain")
    sc.run(crash="tool_results:before@alpha", expect=CRASH_EXIT)
    return sc.store_path.read_bytes()
