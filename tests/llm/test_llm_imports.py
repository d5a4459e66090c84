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


# The exact list of oma_actors.llm.__all__ is pinned with the other surfaces in
# tests/test_public_api_tiers.py.


@pytest.mark.parametrize("name", oma_actors.llm.__all__)
def test_public_names_are_documented(name: str) -> None:
    assert getattr(oma_actors.llm, name).__doc__
