"""A journal beside a redacting store redacts too, or the run is refused before anything.

A ``RedactingStore`` keeps credentials out of the snapshots, but the run's journal holds the
same prompts, tool inputs and outputs (journal-first, it is the save path): a journal that
redacts nothing would keep in clear what the store redacts. Such a pair is refused; a journal
given the store's rules is taken; a restore that opens the journal its snapshot names beside a
redacting store redacts what the attempt appends by the store's rules.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest
from test_journal_encrypting import team_with as one_note_team

from oma_actors import (
    CheckpointOptions,
    OpenMultiAgent,
    Task,
    Team,
)
from oma_actors.errors import ConfigurationError
from oma_actors.journal import InMemoryRunJournal, JournalOptions, JsonlRunJournal
from oma_actors.journal.ref import open_journal_ref
from oma_actors.stores import FileStore, InMemoryStore, RedactingStore

if TYPE_CHECKING:
    from pathlib import Path

SECRET = "password=hunter2-canary"
PII = "patient-0042"


def team_with(effects: list[str]) -> Team:
    return one_note_team(effects, f"{SECRET} {PII}", f"done with {PII}")


@pytest.mark.parametrize("durable", [True, False], ids=["journal-first", "oma-mode"])
async def test_a_journal_that_redacts_nothing_beside_a_redacting_store_is_refused(
    tmp_path: Path, durable: bool
) -> None:
    path = tmp_path / "run.jsonl"
    inner = FileStore(tmp_path / "state.json")
    store = RedactingStore(inner, patterns=[r"patient-\d+"])
    journal = JsonlRunJournal(path)
    effects: list[str] = []
    try:
        with pytest.raises(ConfigurationError, match="RedactingStore"):
            await OpenMultiAgent().run_tasks(
                team_with(effects), [Task("a", "x", assignee="w")],
                checkpoint=CheckpointOptions(store=store, run_id="r1"),
                journal=JournalOptions(journal, durable=durable),
            )  # fmt: skip
    finally:
        await journal.close()
        await inner.aclose()
    assert effects == []
    assert not path.exists() or path.read_bytes() == b""


async def test_a_journal_given_the_stores_rules_keeps_nothing_it_redacts(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    inner = FileStore(tmp_path / "state.json")
    store = RedactingStore(inner, patterns=[r"patient-\d+"])
    effects: list[str] = []
    for journal in (JsonlRunJournal(path, redact=store.patterns), InMemoryRunJournal()):
        try:
            result = await OpenMultiAgent().run_tasks(
                team_with(effects), [Task("a", "x", assignee="w")],
                checkpoint=CheckpointOptions(store=store, run_id=f"r-{type(journal).__name__}"),
                journal=JournalOptions(journal, durable=True),
            )  # fmt: skip
        finally:
            await journal.close()
        assert result.success
    await inner.aclose()
    assert len(effects) == 2
    written = path.read_text() + (tmp_path / "state.json").read_text()
    assert "hunter2" not in written
    assert PII not in written
    assert "[redacted]" in path.read_text()


def test_a_journal_reopened_beside_a_redacting_store_takes_its_rules(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    path.write_text("")
    ref = {"kind": "JsonlRunJournal", "path": str(path), "durable": True}
    plain = open_journal_ref(ref, InMemoryStore())
    assert isinstance(plain, JsonlRunJournal)
    assert not plain.redacts
    store = RedactingStore(InMemoryStore(), patterns=[r"patient-\d+"])
    redacting = open_journal_ref(ref, store)
    assert isinstance(redacting, JsonlRunJournal)
    assert redacting.redacts
    assert redacting._patterns == store.patterns


async def test_a_sealed_journal_redacts_by_its_inner_journals_rules_before_it_seals(
    tmp_path: Path,
) -> None:
    """Under the seal the inner journal sees only the envelope: the sealing journal applies the
    inner's rules first, so what opens is redacted; a broad pattern never touches the envelope,
    and a line keeps naming its run (base fields are never redacted)."""
    from oma_actors.journal import EncryptingJournal
    from oma_actors.journal.event import JournalEvent
    from oma_actors.stores import KeyRing

    ring = KeyRing({"k1": bytes(range(32))}, active="k1")
    path = tmp_path / "run.jsonl"
    broad = [r"patient-\d+", r"[A-Za-z0-9+/]{24,}", r"run-[a-z]+"]
    event = JournalEvent(
        seq=1, type="run/start", run_id="run-abc", attempt=1, timestamp_unix_ms=1,
        data={"note": f"{SECRET} {PII}"},
    )  # fmt: skip
    sealed = EncryptingJournal(JsonlRunJournal(path, redact=broad), ring)
    await sealed.append([event])
    await sealed.close()
    [opened] = await EncryptingJournal(JsonlRunJournal(path), ring).read_from(0)
    assert opened.run_id == "run-abc"
    assert "hunter2" not in str(opened.data)
    assert PII not in str(opened.data)
    plain = JsonlRunJournal(tmp_path / "plain.jsonl", redact=broad)
    await plain.append([event])
    await plain.close()
    [written] = await JsonlRunJournal(tmp_path / "plain.jsonl").read_from(0)
    assert written.run_id == "run-abc"  # a pattern matching the run id leaves it alone
    assert PII not in str(written.data)
