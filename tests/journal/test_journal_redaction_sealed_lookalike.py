"""A redacting journal leaves alone only a payload that IS one sealed envelope.

``redacted_event`` skips a sealed payload, because the sealing journal redacted it before it
sealed it and a broad pattern would break the envelope. A plaintext payload that merely has a
``sealed`` member (beside other fields, or holding no envelope) is no envelope: it is redacted
like any other, on the JSONL and the SQLite journal alike.
"""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING, Any

import pytest

from oma_actors.errors import SEALED_PREFIX
from oma_actors.journal import JournalEvent, JsonlRunJournal, SqliteRunJournal

if TYPE_CHECKING:
    from pathlib import Path

    from oma_actors.journal import RunJournal

TOKEN = "sk-abcdefghijklmnopqrstuvwx"
PII = "patient-0042"


def event(**data: Any) -> JournalEvent:
    return JournalEvent(
        seq=1, type="tool/result", run_id="r1", attempt=1, timestamp_unix_ms=1, data=data
    )


def journal(kind: str, tmp_path: Path) -> tuple[RunJournal, Path]:
    if kind == "jsonl":
        path = tmp_path / "run.jsonl"
        return JsonlRunJournal(path, flush_interval_ms=0, redact=[r"patient-\d+"]), path
    path = tmp_path / "run.db"
    return SqliteRunJournal(path, redact=[r"patient-\d+"]), path


def on_disk(kind: str, path: Path) -> str:
    if kind == "jsonl":
        return path.read_text(encoding="utf-8")
    db = sqlite3.connect(path)
    try:
        return "\n".join(db.iterdump())  # every table: the rows as SQL text
    finally:
        db.close()


LOOKALIKES = {
    "envelope-beside-plaintext": {"sealed": f"{SEALED_PREFIX}k1:AAAA", "output": TOKEN, "p": PII},
    "no-envelope": {"sealed": f"{TOKEN} {PII}"},
    # The prefix alone makes no envelope: plaintext follows it (``keyring.is_envelope``).
    "prefix-then-plaintext": {"sealed": f"{SEALED_PREFIX}k1:{TOKEN} {PII}"},
}


@pytest.mark.parametrize("kind", ["jsonl", "sqlite"])
@pytest.mark.parametrize("payload", sorted(LOOKALIKES))
async def test_a_payload_that_only_looks_sealed_is_redacted(
    kind: str, payload: str, tmp_path: Path
) -> None:
    """Holds ``is_sealed_event``'s two conditions (exactly one member, and that member an
    envelope): otherwise a plaintext payload with a ``sealed`` member reaches disk unredacted."""
    written, path = journal(kind, tmp_path)
    await written.append([event(**LOOKALIKES[payload])])
    await written.close()
    text = on_disk(kind, path)
    assert TOKEN not in text
    assert PII not in text
    assert "[redacted]" in text
