"""The write golden: the exact bytes ``encode`` produces for a fixed snapshot.

The write golden (``golden/written_v4.json``) pins the exact bytes ``encode`` produces for the
snapshot of ``written_golden.build_written_snapshot``. These tests only read it: after a
deliberate format change regenerate it with ``.venv/bin/python tests/checkpoint/update_goldens.py``.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from checkpoint_support import GOLDEN_DIR, KEY
from written_golden import WRITTEN_NAME, build_written_snapshot

from oma_actors.checkpoint import decode, encode

WRITTEN_GOLDEN = GOLDEN_DIR / WRITTEN_NAME
UPDATE_SCRIPT = Path(__file__).with_name("update_goldens.py")
REPOSITORY = Path(__file__).resolve().parents[2]


def test_written_snapshot_matches_golden_bytes() -> None:
    text = encode(build_written_snapshot())
    assert text == WRITTEN_GOLDEN.read_text(encoding="utf-8")


def test_the_golden_test_never_rewrites_its_golden(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Whatever the environment says, a stale golden makes the test fail and stays as it was:
    # updating is the explicit update_goldens.py command, never a side effect of a test run.
    stale = tmp_path / WRITTEN_NAME
    stale.write_text("stale", encoding="utf-8")
    monkeypatch.setattr(sys.modules[__name__], "WRITTEN_GOLDEN", stale)
    for name in ("OMA_UPDATE_GOLDEN", "OMA_UPDATE_GOLDENS", "UPDATE_GOLDEN"):
        monkeypatch.setenv(name, "1")
    with pytest.raises(AssertionError):
        test_written_snapshot_matches_golden_bytes()
    assert stale.read_text(encoding="utf-8") == "stale"


def test_the_update_command_writes_what_the_golden_test_expects(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(UPDATE_SCRIPT), "--directory", str(tmp_path)],
        cwd=REPOSITORY,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert (tmp_path / WRITTEN_NAME).read_bytes() == WRITTEN_GOLDEN.read_bytes()
    assert str(tmp_path / WRITTEN_NAME) in done.stdout


def test_written_golden_shape() -> None:
    text = WRITTEN_GOLDEN.read_text(encoding="utf-8")
    assert "\n" not in text
    assert ": " not in text.split('"goal"')[0]
    assert "—" in text  # non-ASCII written as is, like JSON.stringify
    raw = json.loads(text)
    assert list(raw)[:4] == ["version", "mode", "createdAt", "revision"]
    assert raw["version"] == 4
    assert raw["revision"] == 3
    assert raw["identity"] == {
        "runId": "golden-run",
        "attempt": 2,
        "lastTraceId": "0123456789abcdef0123456789abcdef",
        "lastRootSpanId": "fedcba9876543210",
    }
    assert raw["queue"]["version"] == 1
    assert raw["queue"]["inProgress"] == ["t-analyze"]
    assert raw["queue"]["tasks"][1]["dependsOn"] == ["t-gather"]
    assert raw["queue"]["tasks"][1]["createdAt"] == "2025-11-05T11:58:00.125Z"
    assert raw["queue"]["tasks"][1]["retryBackoff"] == 1.5
    assert raw["pendingApprovals"] == []
    assert raw["approvalDecisions"] == []
    assert raw["messageBus"] == {"version": 1, "messages": [], "readState": []}
    entry = raw["inFlightTasks"][0]
    assert list(entry)[:8] == [
        "taskId",
        "assignee",
        "phase",
        "conversationMessages",
        "messages",
        "tokenUsage",
        "toolCalls",
        "turns",
    ]
    committed, dispatched = entry["pendingToolCalls"]
    assert committed["commit"]["result"] == {
        "type": "tool_result",
        "tool_use_id": "toolu_fetch_1",
        "content": "Q3 revenue 1.2M",
    }
    assert dispatched == {
        "call": {
            "type": "tool_use",
            "id": "toolu_post_2",
            "name": "post_update",
            "input": {"channel": "finance", "text": "Q3 up"},
        },
        "dispatched": True,
    }
    assert _snake_case_keys(raw) == set()


_ANTHROPIC_KEYS = {"input_tokens", "output_tokens", "tool_use_id", "media_type", "is_error"}
_FREE_FORM = {"metadata", "input", "sharedMemory"}


def _snake_case_keys(value: Any) -> set[str]:
    """Structural keys that are neither camelCase nor Anthropic block fields."""
    found: set[str] = set()
    if isinstance(value, dict):
        for key, item in value.items():
            if not re.fullmatch(r"[a-z][a-zA-Z0-9]*", key) and key not in _ANTHROPIC_KEYS:
                found.add(key)
            if key not in _FREE_FORM:
                found |= _snake_case_keys(item)
    elif isinstance(value, list):
        for item in value:
            found |= _snake_case_keys(item)
    return found


def test_written_golden_decodes_to_the_built_snapshot() -> None:
    built = build_written_snapshot()
    loaded = decode(WRITTEN_GOLDEN.read_text(encoding="utf-8"), key=KEY)
    # The only normalisation: an absent message bus is written as OMA's empty bus.
    assert loaded.message_bus == {"version": 1, "messages": [], "readState": []}
    assert loaded == replace(built, message_bus=loaded.message_bus)
    assert loaded.in_flight[0].state.pending[1].dispatched is True
    assert loaded.completed[0].agent_result == built.completed[0].agent_result
