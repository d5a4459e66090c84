"""The demo team's two tools: the note writer keeps to its folder, the search says a miss."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import BaseModel

from oma_actors import Tool, ToolContext, ToolResult
from oma_actors.cli.demo_team import SearchInput, WriteInput, make_tools


async def call(tool: Tool, args: BaseModel) -> ToolResult:
    context = ToolContext(run_id="r", task_id="t", tool_call_id="c", agent_name="a")
    result = await tool.execute(args, context)
    assert isinstance(result, ToolResult)
    return result


@pytest.mark.parametrize("filename", ["../escape.md", "notes/escape.md", "", "/tmp/escape.md"])
async def test_the_note_writer_refuses_anything_but_a_plain_file_name(
    tmp_path: Path, filename: str
) -> None:
    out = tmp_path / "out"
    _, write = make_tools(out)
    result = await call(write, WriteInput(filename=filename, content="x"))
    assert result.is_error
    assert f"refused: {filename!r} must be a plain file name" in result.data
    assert not out.exists()  # nothing written, not even the folder


@pytest.mark.parametrize(
    "filename", ["state.json", "journal.jsonl", ".oma-demo", "timeline.html", "state.json.lock"]
)
async def test_the_note_writer_never_writes_the_demos_own_files(
    tmp_path: Path, filename: str
) -> None:
    # A live model picks the names: a note named state.json would overwrite the run's store.
    out = tmp_path / "out"
    out.mkdir()
    (out / filename).write_text("kept")
    _, write = make_tools(out)
    result = await call(write, WriteInput(filename=filename, content="x"))
    assert result.is_error
    assert "is no note name" in result.data
    assert (out / filename).read_text() == "kept"


async def test_the_note_writer_writes_a_plain_name_in_its_folder(tmp_path: Path) -> None:
    out = tmp_path / "out"
    _, write = make_tools(out)
    result = await call(write, WriteInput(filename="brief.md", content="hello"))
    assert not result.is_error
    assert (out / "brief.md").read_text() == "hello\n"


async def test_a_search_without_a_hit_is_an_error_result_naming_the_query(tmp_path: Path) -> None:
    search, _ = make_tools(tmp_path)
    missed = await call(search, SearchInput(query="quantum"))
    assert (missed.is_error, missed.data) == (True, "no entry for 'quantum'")
    found = await call(search, SearchInput(query="fsync"))
    assert not found.is_error
    assert "fsync the directory" in found.data
