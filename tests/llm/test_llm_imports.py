"""Importing the adapters must not import the SDKs (they take a second or more to load)."""

from __future__ import annotations

import subprocess
import sys

import pytest

import oma_actors.llm

SCRIPT = """
import sys
import oma_actors.llm
from oma_actors.llm import AnthropicAdapter, OpenAIAdapter, create_adapter
loaded = sorted(name for name in ("anthropic", "openai", "httpx2") if name in sys.modules)
print(",".join(loaded))
"""


def test_importing_the_adapters_does_not_import_the_sdks() -> None:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT], capture_output=True, text=True, check=False, timeout=60
    )

    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == ""


def test_public_names() -> None:
    assert oma_actors.llm.__all__ == sorted(oma_actors.llm.__all__)
    assert set(oma_actors.llm.__all__) == {
        "AnthropicAdapter",
        "LLMAdapter",
        "OpenAIAdapter",
        "RecordedCall",
        "ScriptedAdapter",
        "create_adapter",
        "text_response",
        "with_retries",
    }


@pytest.mark.parametrize("name", oma_actors.llm.__all__)
def test_public_names_are_documented(name: str) -> None:
    assert getattr(oma_actors.llm, name).__doc__
