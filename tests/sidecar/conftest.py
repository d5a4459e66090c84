"""Fixtures of the sidecar tests: an in-process server and a client."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest
from sidecar_helpers import ECHO, TOKEN

from sidecar.client import SidecarClient
from sidecar.server import ServerConfig, Sidecar

if TYPE_CHECKING:
    from collections.abc import AsyncIterator


@pytest.fixture
async def sidecar() -> AsyncIterator[Sidecar]:
    """A sidecar on a free loopback port, with a memory store and the Python tool ``echo``."""
    config = ServerConfig(
        token=TOKEN,
        listen="127.0.0.1:0",
        store_uri="memory://",
        python_tools={"echo": ECHO},
        heartbeat_s=0.5,
        grace_s=0.1,
    )
    async with Sidecar(config) as server:
        yield server


@pytest.fixture
async def client(sidecar: Sidecar) -> AsyncIterator[SidecarClient]:
    """A client of ``sidecar`` with the right token."""
    async with SidecarClient(sidecar.address, TOKEN) as connected:
        yield connected
