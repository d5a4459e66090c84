"""Fixtures of the crash tests: uninterrupted baselines, run once per scenario and tool mode.

A row that takes ``save`` runs once per save path: ``snapshot`` (a snapshot per boundary) and
``journal`` (journal-first, D10). The baselines are always uninterrupted snapshot runs, so a
journal-first crash and restore is compared with the plain run, not with itself.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from crash_checks import Baseline, run_baseline
from crash_harness import SAVES, Scenario

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
def save(request: pytest.FixtureRequest) -> str:
    """The save path of the row: ``"snapshot"`` or ``"journal"`` (``Scenario.save``)."""
    return str(request.param)


@pytest.fixture(scope="session")
def crashed_store(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    """The FileStore bytes a real crash left behind: chain, all calls committed (C04 boundary)."""
    sc = Scenario(tmp_path_factory.mktemp("crashed"), "chain")
    sc.run(crash="tool_results:before@alpha", expect=CRASH_EXIT)
    return sc.store_path.read_bytes()
