"""A key file whose key has the right id but other bytes: ``oma keys rotate`` writes nothing and
exits 1 listing what does not open (never "already under it"), and a run given that key leaves
the store and the journal as the rightful key holder wrote them."""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
from typing import TYPE_CHECKING

import pytest
from test_cli_encryption import (
    NEW,
    OLD,
    SECRET,
    key_file,
    oma,
    raw_values,
    sealed_file_run,
    seed,
)

from oma_actors import (
    AgentConfig,
    CheckpointOptions,
    JournalOptions,
    OpenMultiAgent,
    Task,
    Team,
    TeamRunResult,
)
from oma_actors.errors import KeyMismatchError
from oma_actors.journal import EncryptingJournal, JsonlRunJournal
from oma_actors.llm import LLMResponse, TextBlock
from oma_actors.stores import EncryptingStore, FileStore, KeyRing
from oma_actors.stores.keyring import PREFIX
from oma_actors.testing import ScriptedAdapter

if TYPE_CHECKING:
    from pathlib import Path

WRONG = bytes(range(100, 132))


async def another_run(store: EncryptingStore, journal: EncryptingJournal) -> TeamRunResult:
    """A new run ``r2`` of one task, journal-first and durable, on ``store`` and ``journal``."""
    answer = LLMResponse([TextBlock(f"done with {SECRET}")])
    team = Team("t", [AgentConfig("w", adapter=ScriptedAdapter([answer]))])
    try:
        return await OpenMultiAgent().run_tasks(
            team, [Task("a", "x", assignee="w", id="t0")],
            checkpoint=CheckpointOptions(store=store, run_id="r2"),
            journal=JournalOptions(journal, durable=True),
        )  # fmt: skip
    finally:
        await journal.close()


def digest(*paths: Path) -> list[str]:
    return [hashlib.sha256(path.read_bytes()).hexdigest() for path in paths]


async def test_rotate_with_a_wrong_key_of_the_same_id_writes_nothing_and_exits_1(
    tmp_path: Path,
) -> None:
    state = tmp_path / "state.json"
    values = {f"v{n}": f"{SECRET}-{n}" for n in range(7)}
    await seed(state, KeyRing({"k1": OLD}, active="k1"), values)
    before = await raw_values(state)
    wrong = key_file(tmp_path / "wrong", k1=WRONG)
    done = await asyncio.to_thread(
        oma, "keys", "rotate", "--store", str(state), "--keys", str(wrong)
    )
    assert done.returncode == 1, (done.stdout, done.stderr)
    assert "re-sealed 0 under 'k1'; already under it 0;" in done.stdout
    assert f"7 values open with no key of {wrong}, so nothing was re-sealed" in done.stdout
    assert "'v0', 'v1', 'v2', 'v3', 'v4' and 2 more" in done.stdout
    assert done.stdout.count("  left '") == 5  # the first few, each with why
    assert "left 'v0': sealed under key 'k1': authentication failed" in done.stdout
    assert await raw_values(state) == before

    # Beside a key that does open them, a new active key does not re-seal a value either.
    mixed = key_file(tmp_path / "mixed", k2=NEW, k1=WRONG)
    done = await asyncio.to_thread(
        oma, "keys", "rotate", "--store", str(state), "--keys", str(mixed)
    )
    assert done.returncode == 1
    assert "re-sealed 0 under 'k2'" in done.stdout
    assert await raw_values(state) == before
    right = key_file(tmp_path / "right", k1=OLD)
    done = await asyncio.to_thread(
        oma, "keys", "rotate", "--store", str(state), "--keys", str(right)
    )
    assert done.returncode == 0, done.stdout
    assert (
        "re-sealed 0 under 'k1'; already under it 7; rewritten meanwhile 0; left 0" in done.stdout
    )


async def test_rotate_reseals_nothing_while_a_journal_does_not_open_with_the_active_key(
    tmp_path: Path,
) -> None:
    # The store's values are under k0 (they open), its run's journal under the rightful k1: a
    # key file [k1 (other bytes), k0] would re-seal every value under a k1 that only shares
    # the id, and the journal shows it.
    state, log = tmp_path / "state.json", tmp_path / "run.jsonl"
    async with sealed_file_run(tmp_path, KeyRing({"k1": OLD}, active="k1")):
        pass
    to_k0 = key_file(tmp_path / "to_k0", k0=NEW, k1=OLD)
    moved = await asyncio.to_thread(
        oma, "keys", "rotate", "--store", str(state), "--keys", str(to_k0)
    )
    assert moved.returncode == 1  # the journal is left under k1
    assert all(v.startswith(PREFIX + "k0:") for v in (await raw_values(state)).values())
    before = digest(state, log)
    wrong = key_file(tmp_path / "wrong", k1=WRONG, k0=NEW)
    done = await asyncio.to_thread(
        oma, "keys", "rotate", "--store", str(state), "--keys", str(wrong)
    )
    assert done.returncode == 1, (done.stdout, done.stderr)
    assert "re-sealed 0 under 'k1'; already under it 0;" in done.stdout
    assert f"the events under 'k1' of {log} do not open with the key 'k1' of {wrong}" in done.stdout
    # How many, and why the first does not open.
    shown = (
        f"left '{re.escape(str(log))}': \\d+ journal events do not open, the first run 'r1' seq 1: "
    )
    assert re.search(shown, done.stdout), done.stdout
    assert "sealed under key 'k1': authentication failed" in done.stdout
    assert digest(state, log) == before


async def test_a_run_with_a_wrong_key_leaves_the_sealed_store_and_journal_as_they_were(
    tmp_path: Path,
) -> None:
    right = KeyRing({"k1": OLD}, active="k1")
    state, log = tmp_path / "state.json", tmp_path / "run.jsonl"
    async with sealed_file_run(tmp_path, right):
        pass
    before = digest(state, log)
    wrong = KeyRing({"k1": WRONG}, active="k1")
    inner = FileStore(state)
    try:
        journal = EncryptingJournal(JsonlRunJournal(log, flush_interval_ms=0), wrong)
        # The admission save is refused before it writes, and the run stops there: going on
        # would run the tasks with nothing durable (no save of this key can ever land).
        with pytest.raises(KeyMismatchError, match="'k1'"):
            await another_run(EncryptingStore(inner, wrong), journal)
    finally:
        await inner.aclose()
    assert digest(state, log) == before
    keys = key_file(tmp_path / "keys", k1=OLD)
    listed = await asyncio.to_thread(
        oma, "runs", "list", "--store", str(state), "--json", keys=keys
    )
    assert listed.returncode == 0, listed.stderr
    assert [run["run_id"] for run in json.loads(listed.stdout)] == ["r1"]
    verified = await asyncio.to_thread(oma, "verify", str(log), keys=keys)
    assert verified.returncode == 0, verified.stderr
