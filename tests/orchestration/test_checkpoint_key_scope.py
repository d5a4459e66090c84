"""``CheckpointOptions.key`` names this run's checkpoint, never another record (issue 24 item 8).

Every save replaces the value at the key: a key under another run's checkpoint prefix, or
under a prefix the runtime reserves (approvals, run records, the sidecar's), would overwrite
what is not this run's. Such a key is a ``ConfigurationError`` before anything is written.
"""

from __future__ import annotations

import pytest

from oma_actors import (
    AgentConfig,
    CheckpointOptions,
    ConfigurationError,
    OpenMultiAgent,
    Task,
    Team,
    TokenUsage,
)
from oma_actors.llm import LLMResponse, TextBlock
from oma_actors.orchestration.options import resolve_checkpoint
from oma_actors.stores import InMemoryStore
from oma_actors.testing import ScriptedAdapter


def team() -> Team:
    adapter = ScriptedAdapter(lambda m, o: LLMResponse([TextBlock("ok")], usage=TokenUsage(1, 1)))
    return Team("t", [AgentConfig("w", adapter=adapter)])


@pytest.mark.parametrize(
    ("key", "names"),
    [
        ("__oma_checkpoint__/other-run/latest", "is not run 'r1'"),
        ("__oma_checkpoint__/latest", "is not run 'r1'"),
        ("__oma_checkpoint__/r1/", "is not run 'r1'"),  # the prefix alone names no checkpoint
        ("__oma_checkpoint__/r10/latest", "is not run 'r1'"),  # a prefix of another run's id
        ("__oma_approval__/apr_1", "reserves"),
        ("__oma_run__/r1", "reserves"),
        ("__oma_sidecar__/runs/r1", "reserves"),
    ],
)
def test_a_key_naming_what_is_not_this_runs_checkpoint_is_refused(key: str, names: str) -> None:
    options = CheckpointOptions(store=InMemoryStore(), run_id="r1", key=key)
    with pytest.raises(ConfigurationError, match=names) as caught:
        resolve_checkpoint(options, team=team(), fallback=InMemoryStore())
    assert repr(key) in str(caught.value)


def test_a_reserved_key_is_refused_without_a_run_id_too() -> None:
    options = CheckpointOptions(store=InMemoryStore(), key="__oma_run__/r1")
    with pytest.raises(ConfigurationError, match="reserves"):
        resolve_checkpoint(options, team=team(), fallback=InMemoryStore())


@pytest.mark.parametrize(
    "key", ["__oma_checkpoint__/r1/latest", "__oma_checkpoint__/r1/nightly", "my-own-key"]
)
def test_this_runs_keys_and_keys_outside_the_reserved_prefixes_are_accepted(key: str) -> None:
    options = CheckpointOptions(store=InMemoryStore(), run_id="r1", key=key)
    resolved = resolve_checkpoint(options, team=team(), fallback=InMemoryStore())
    assert resolved is not None
    assert resolved.key == key


async def test_a_run_with_such_a_key_writes_nothing() -> None:
    store = InMemoryStore()
    await store.set("__oma_run__/r2", "another run's record")
    options = CheckpointOptions(store=store, run_id="r1", key="__oma_run__/r2")
    with pytest.raises(ConfigurationError):
        await OpenMultiAgent().run_tasks(team(), [Task("a", "x")], checkpoint=options)
    assert [(e.key, e.value) for e in await store.list()] == [
        ("__oma_run__/r2", "another run's record")
    ]
