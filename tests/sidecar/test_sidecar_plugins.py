"""Python tools registered under the entry point group ``oma_actors.tools``."""

from __future__ import annotations

import importlib.metadata
from importlib.metadata import EntryPoint

import pytest

from sidecar import plugins


def test_entry_points_load_tools_and_skip_broken_ones(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    group = plugins.ENTRY_POINT_GROUP
    found = [
        EntryPoint(name="echo", value="sidecar_helpers:ECHO", group=group),
        EntryPoint(name="many", value="sidecar_helpers:echo_tools", group=group),
        EntryPoint(name="broken", value="sidecar_helpers:no_such_tool", group=group),
        EntryPoint(name="wrong", value="sidecar_helpers:TOKEN", group=group),
    ]
    monkeypatch.setattr(importlib.metadata, "entry_points", lambda group: found)
    tools = plugins.load_python_tools()
    assert list(tools) == ["echo"]
    assert "broken" in caplog.text
    assert "wrong" in caplog.text
