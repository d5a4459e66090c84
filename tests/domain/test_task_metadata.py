"""Task metadata follows OMA's rules (spec T-95): refused up front, masked before it is stored."""

from __future__ import annotations

import json
import math
from collections import OrderedDict
from typing import TYPE_CHECKING, Any

import pytest

from oma_actors import (
    AgentConfig,
    CheckpointOptions,
    OpenMultiAgent,
    Task,
    TaskGraphError,
    Team,
    TokenUsage,
)
from oma_actors.checkpoint import Checkpoint
from oma_actors.domain.metadata import MAX_BYTES, MAX_DEPTH, MAX_ENTRIES
from oma_actors.journal import JournalOptions, JsonlRunJournal
from oma_actors.llm import LLMResponse, TextBlock
from oma_actors.stores import InMemoryStore
from oma_actors.testing import ScriptedAdapter

if TYPE_CHECKING:
    from pathlib import Path


def refused(metadata: Any, names: str) -> TaskGraphError:
    with pytest.raises(TaskGraphError) as caught:
        Task("a", "do a", id="t-1", metadata=metadata)
    assert names in str(caught.value)
    assert "'t-1'" in str(caught.value)
    assert caught.value.tasks == ("t-1",)
    return caught.value


def test_an_object_is_refused_up_front() -> None:
    refused({"o": object()}, "metadata['o'] is a object, not a JSON value")


@pytest.mark.parametrize(
    ("value", "names"),
    [
        (math.nan, "metadata['x'] is nan"),
        (math.inf, "metadata['x'] is inf"),
        (-math.inf, "metadata['x'] is -inf"),
        ([1, math.nan], "metadata['x'][1] is nan"),
        ({1: "a"}, "metadata['x'] has the non-string key 1"),
        ({"ok": {b"k": 1}}, "metadata['x']['ok'] has the non-string key b'k'"),
        ({1, 2}, "metadata['x'] is a set"),
        (b"bytes", "metadata['x'] is a bytes"),
    ],
)
def test_only_json_values(value: Any, names: str) -> None:
    refused({"x": value}, names)


def test_a_top_level_key_must_be_a_string() -> None:
    refused({3: "x"}, "key 3 is not a string")


@pytest.mark.parametrize("key", ["", "1abc", "_lead", "a b", "ü", "a" * 65, "a/b", "a:b"])
def test_the_key_pattern(key: str) -> None:
    refused({key: 1}, f"metadata key {key!r} is not a valid key")


@pytest.mark.parametrize("key", ["a", "a" * 64, "lane", "v1.2", "x-y_z", "input_tokens", "Zed"])
def test_keys_that_fit(key: str) -> None:
    assert Task("a", "d", metadata={key: 1}).metadata == {key: 1}


@pytest.mark.parametrize(
    "key",
    ["password", "api_key", "apiKey", "clientSecret", "token", "github_token", "authorization",
     "sessionId", "privateKey", "accessToken", "cookie", "credentials", "passwd", "token_type"],
)  # fmt: skip
def test_credential_like_keys_are_refused(key: str) -> None:
    refused({key: "x"}, f"metadata key {key!r} looks like a credential")


def test_a_credential_like_key_below_the_top_is_refused() -> None:
    refused({"db": {"host": "h", "password": "p"}}, "metadata['db']['password'] looks like")
    refused({"list": [{"apiKey": "k"}]}, "metadata['list'][0]['apiKey'] looks like")


def test_the_number_of_keys_is_bounded() -> None:
    Task("a", "d", metadata={f"k{i}": i for i in range(MAX_ENTRIES)})
    refused({f"k{i}": i for i in range(MAX_ENTRIES + 1)}, f"at most {MAX_ENTRIES}")


def test_the_size_is_bounded() -> None:
    fits = "x" * (MAX_BYTES - len('{"k":""}'))
    Task("a", "d", metadata={"k": fits})
    refused({"k": fits + "x"}, f"at most {MAX_BYTES} are allowed")
    # Bytes, not characters: a multi-byte string counts what it will take in a snapshot.
    refused({"k": "é" * (MAX_BYTES // 2)}, "bytes of JSON")


def test_the_depth_is_bounded() -> None:
    deep: Any = 1
    for _ in range(MAX_DEPTH):
        deep = [deep]
    Task("a", "d", metadata={"k": deep})
    refused({"k": [deep]}, f"nests deeper than {MAX_DEPTH} levels")


def test_metadata_must_be_a_mapping() -> None:
    refused(["a"], "metadata must be a mapping")


def test_accepted_metadata_is_a_copy_in_json_shapes() -> None:
    given: dict[str, Any] = {"lane": "fast", "n": 2, "tags": ("a", "b"), "nested": {"k": [1.5]}}
    task = Task("a", "d", metadata=OrderedDict(given))
    given["lane"] = "slow"
    assert task.metadata == {"lane": "fast", "n": 2, "tags": ["a", "b"], "nested": {"k": [1.5]}}
    with pytest.raises(TypeError):
        task.metadata["lane"] = "x"  # type: ignore[index]
    assert Task("a", "d").metadata is None


# -- secret-looking values never reach a snapshot or the journal ------------------------------

SECRETS = {
    "note": "deploy with sk-" + "a1" * 12,  # a provider token literal
    "header": "Authorization: Bearer abcdefgh12345678",
    "steps": ["login", "ghp_" + "Z" * 24],
}
MARKED = ["sk-" + "a1" * 12, "abcdefgh12345678", "ghp_" + "Z" * 24]


async def test_raw_checkpoint_and_journal_bytes_hold_no_marked_secret(tmp_path: Path) -> None:
    store = InMemoryStore()
    journal = JsonlRunJournal(tmp_path / "run.jsonl")
    adapter = ScriptedAdapter([LLMResponse([TextBlock("done")], usage=TokenUsage(1, 1))])
    team = Team("t", [AgentConfig("w", adapter=adapter)])
    task = Task("a", "do a", id="a", assignee="w", metadata={**SECRETS, "lane": "fast"})
    assert task.metadata is not None
    assert task.metadata["note"] == SECRETS["note"]  # the caller's task keeps its own value
    result = await OpenMultiAgent().run_tasks(
        team,
        [task],
        checkpoint=CheckpointOptions(store=store, run_id="m1"),
        journal=JournalOptions(journal, durable=False),
    )
    await journal.close()
    assert result.success
    raw = [entry.value for entry in await store.list()]
    raw.append((tmp_path / "run.jsonl").read_text(encoding="utf-8"))
    assert raw[0]  # something was written
    for secret in MARKED:
        assert all(secret not in text for text in raw), secret
    snapshot = await Checkpoint(store, run_id="m1").load_latest()
    assert snapshot is not None
    [saved] = snapshot.tasks
    assert saved.metadata == {
        "note": "deploy with [redacted]",
        "header": "Authorization: [redacted]",
        "steps": ["login", "[redacted]"],
        "lane": "fast",
    }
    assert json.dumps(dict(saved.metadata or {}))  # still JSON after the mask


def test_a_restored_task_is_checked_again() -> None:
    from oma_actors import CheckpointError
    from oma_actors.domain.jsonforms import task_from_json

    raw = {"id": "t", "title": "a", "description": "d", "status": "pending"}
    assert task_from_json({**raw, "metadata": {"lane": "fast"}}).metadata == {"lane": "fast"}
    with pytest.raises(CheckpointError, match="task 't': metadata key 'password' looks like"):
        task_from_json({**raw, "metadata": {"password": "x"}})
