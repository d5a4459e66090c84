"""Fixtures of the model-adapter tests: a fake provider server and a hermetic environment."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest
from fake_server import FakeServer

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

# Variables through which the SDKs pick up keys, endpoints, profiles or extra headers.
_PROVIDER_ENV = (
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_AUTH_TOKEN",
    "ANTHROPIC_BASE_URL",
    "ANTHROPIC_CONFIG_DIR",
    "ANTHROPIC_CUSTOM_HEADERS",
    "ANTHROPIC_FEDERATION_RULE_ID",
    "ANTHROPIC_IDENTITY_TOKEN",
    "ANTHROPIC_IDENTITY_TOKEN_FILE",
    "ANTHROPIC_ORGANIZATION_ID",
    "ANTHROPIC_PROFILE",
    "OPENAI_ADMIN_KEY",
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "OPENAI_ORG_ID",
    "OPENAI_PROJECT_ID",
)


@pytest.fixture(autouse=True)
def hermetic_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Hide the developer's provider keys and config files from the SDKs."""
    for name in _PROVIDER_ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / ".config"))


@pytest.fixture
def fake_server() -> Iterator[FakeServer]:
    """A running fake provider server on 127.0.0.1 with an OS-assigned port."""
    with FakeServer() as server:
        yield server
