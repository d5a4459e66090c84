"""TLS: ``--tls-cert``/``--tls-key`` serve over TLS, and only then may a non-loopback bind start."""

from __future__ import annotations

import subprocess
from typing import TYPE_CHECKING

import pytest
from service_kit import require_executable
from sidecar_helpers import TOKEN

from sidecar.client import SidecarClient
from sidecar.server import ServerConfig, ServerConfigError, Sidecar

if TYPE_CHECKING:
    from pathlib import Path


def self_signed(tmp_path: Path) -> tuple[Path, Path]:
    """A self-signed certificate for localhost; skips (fails under CI=true) without openssl."""
    openssl = require_executable("openssl")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        [openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-keyout", str(key), "-out", str(cert), "-subj", "/CN=localhost",
         "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"],
        check=True, capture_output=True, timeout=60,
    )  # fmt: skip
    return cert, key


async def test_tls_serves_and_the_token_is_still_required(tmp_path: Path) -> None:
    cert, key = self_signed(tmp_path)
    config = ServerConfig(
        token=TOKEN, listen="127.0.0.1:0", store_uri="memory://", python_tools={},
        tls_cert=cert, tls_key=key, grace_s=0.1,
    )  # fmt: skip
    async with (
        Sidecar(config) as server,
        SidecarClient(server.address, TOKEN, root_certificates=cert.read_bytes()) as client,
    ):
        info = await client.server_info()
        assert "oma.v1" in info.api_versions


async def test_non_loopback_needs_both_tls_files(tmp_path: Path) -> None:
    cert, _ = self_signed(tmp_path)
    for tls in ({}, {"tls_cert": cert}):
        config = ServerConfig(token=TOKEN, listen="0.0.0.0:0", store_uri="memory://", **tls)  # type: ignore[arg-type]
        with pytest.raises(ServerConfigError):
            async with Sidecar(config):
                pass
