"""Fixtures are found relative to the repository, so a clone in any folder finds them.

CI runs a fresh clone in another folder with ``shared/`` beside it: a test that reads
``/work/shared/...`` would pass on a developer's machine and read nothing (or something stale)
there. Every test file is scanned for string literals that spell an absolute path into the
workspace.
"""

from __future__ import annotations

import ast
from pathlib import Path

from checkpoint_support import OMA_FIXTURE_DIR, SHARED

TESTS = Path(__file__).resolve().parents[1]
REPOSITORY = TESTS.parent


def _absolute_workspace_paths(source: str) -> list[str]:
    """String literals of ``source`` that are absolute paths into shared/ or /work/."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            text = node.value
            if text.startswith("/") and ("/shared/" in text or text.startswith("/work/")):
                found.append(text)
    return found


def test_the_scan_finds_an_absolute_fixture_path() -> None:
    source = 'FIXTURE = Path("/work/shared/fixtures/oma/task-boundary/store.json")\n'
    assert _absolute_workspace_paths(source) == [
        "/work/shared/fixtures/oma/task-boundary/store.json"
    ]
    relative = 'FIXTURE = Path(__file__).resolve().parents[2] / ".." / "shared" / "fixtures"\n'
    assert _absolute_workspace_paths(relative) == []


def test_no_test_reads_a_fixture_through_an_absolute_path() -> None:
    offenders = {
        str(path.relative_to(REPOSITORY)): found
        for path in sorted(TESTS.rglob("*.py"))
        if path != Path(__file__).resolve()  # its own samples above
        and (found := _absolute_workspace_paths(path.read_text(encoding="utf-8")))
    }
    assert offenders == {}


def test_the_oma_fixtures_resolve_beside_the_repository() -> None:
    assert SHARED.resolve() == (REPOSITORY.parent / "shared").resolve()
    assert (OMA_FIXTURE_DIR / "store.json").is_file()
