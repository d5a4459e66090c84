"""Bad configuration of the orchestrator is a ``ConfigurationError`` naming it, before any work.

Each refusal below had no test: without it, a wrong value was taken silently (a journal that is
no journal ran the run without one, a run id past 128 characters made its key) or failed later
with an error that names nothing (an ``AttributeError`` deep in the run).
"""

from __future__ import annotations

from typing import Any

import pytest
from acceptance_helpers import titled, two_tasks

from oma_actors import (
    AgentConfig,
    CheckpointOptions,
    ConfigurationError,
    OpenMultiAgent,
    Team,
)
from oma_actors.stores import InMemoryStore
from oma_actors.testing import ScriptedAdapter


@pytest.mark.parametrize(
    ("arguments", "named"),
    [
        ({"max_concurrency": 0}, "max_concurrency must be an int >= 1, got 0"),
        ({"max_concurrency": True}, "max_concurrency must be an int >= 1, got True"),
        ({"max_concurrency": "2"}, "max_concurrency must be an int >= 1, got '2'"),
        ({"on_tool_call": "yes"}, "on_tool_call must be callable, not str"),
        ({"on_plan_ready": 1}, "on_plan_ready must be callable, not int"),
        ({"on_task_dispatch": object()}, "on_task_dispatch must be callable, not object"),
        (
            {"checkpoint": "yes"},
            "checkpoint must be True, False, None or CheckpointOptions, not str",
        ),
        ({"journal": "journal.jsonl"}, "journal must be a RunJournal or JournalOptions, not str"),
    ],
)
def test_the_orchestrator_refuses_bad_defaults(arguments: dict[str, Any], named: str) -> None:
    with pytest.raises(ConfigurationError) as caught:
        OpenMultiAgent(**arguments)
    assert str(caught.value) == named


@pytest.mark.parametrize(
    ("arguments", "named"),
    [
        ({"checkpoint": CheckpointOptions(run_id="")}, "run_id must be 1..128 characters"),
        ({"checkpoint": CheckpointOptions(run_id="r" * 129)}, "run_id must be 1..128 characters"),
        ({"checkpoint": CheckpointOptions(store={})}, "must have async get, set, list"),  # type: ignore[arg-type]
        ({"checkpoint": 1}, "not int"),
        ({"journal": 42}, "journal must be a RunJournal or JournalOptions, not int"),
    ],
)
async def test_a_run_refuses_bad_options_before_any_work(
    arguments: dict[str, Any], named: str
) -> None:
    adapter = ScriptedAdapter(titled)
    store = InMemoryStore()
    team = Team("t", [AgentConfig("worker", adapter=adapter)], shared_memory_store=store)
    with pytest.raises(ConfigurationError, match=named):
        await OpenMultiAgent().run_tasks(team, two_tasks(), **arguments)
    assert adapter.call_count == 0
    assert await store.list() == []  # nothing written


async def test_a_run_id_of_128_characters_is_taken() -> None:
    store = InMemoryStore()
    options = CheckpointOptions(store=store, run_id="r" * 128)
    team = Team("t", [AgentConfig("worker", adapter=ScriptedAdapter(titled))])
    result = await OpenMultiAgent().run_tasks(team, two_tasks(), checkpoint=options)
    assert result.success
