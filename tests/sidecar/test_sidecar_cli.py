"""``python -m sidecar`` (``oma serve``): address and token printing, loopback-only binds, stubs."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from sidecar.cli import LISTEN_LINE, TOKEN_LINE
from sidecar.server import ServerConfigError, is_loopback, split_address

ROOT = Path(__file__).resolve().parents[2]


def serve(*args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    base = {k: v for k, v in os.environ.items() if k != "OMA_SIDECAR_TOKEN"}
    return subprocess.Popen(
        [sys.executable, "-m", "sidecar", *args],
        cwd=ROOT,
        env={**base, **(env or {})},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_port_0_prints_the_address_and_the_generated_token_file(tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    process = serve(
        "--listen", "127.0.0.1:0", "--store", "memory://",
        "--generated-token-file", str(token_file),
    )  # fmt: skip
    try:
        assert process.stdout is not None
        listening = process.stdout.readline()
        token_line = process.stdout.readline()
    finally:
        process.terminate()
        process.communicate(timeout=10)
    assert listening.startswith(LISTEN_LINE)
    host, port = split_address(listening.removeprefix(LISTEN_LINE).strip())
    assert host == "127.0.0.1"
    assert port > 0
    assert token_line.strip() == f"{TOKEN_LINE}{token_file}"
    assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
    assert len(token_file.read_text().strip()) >= 32
    assert process.returncode == 0


@pytest.mark.parametrize("listen", ["0.0.0.0:0", "192.0.2.1:0", "[::]:0"])
def test_a_non_loopback_bind_is_refused_without_tls(listen: str) -> None:
    process = serve("--listen", listen, "--store", "memory://", env={"OMA_SIDECAR_TOKEN": "t"})
    _, err = process.communicate(timeout=30)
    assert process.returncode == 2
    assert "without TLS" in err


def test_bad_addresses_and_stores_exit_2() -> None:
    for args in (["--listen", "nonsense"], ["--store", "mysql://h"]):
        process = serve(*args, env={"OMA_SIDECAR_TOKEN": "t"})
        _, err = process.communicate(timeout=30)
        assert process.returncode == 2, err
    with pytest.raises(ServerConfigError):
        split_address("127.0.0.1")
    assert is_loopback("localhost")
    assert is_loopback("::1")
    assert not is_loopback("10.0.0.1")


def test_a_bare_store_path_is_a_file_store_that_a_second_sidecar_cannot_take(
    tmp_path: Path,
) -> None:
    env = {"OMA_SIDECAR_TOKEN": "t"}
    state = tmp_path / "state.json"
    first = serve("--listen", "127.0.0.1:0", "--store", str(state), env=env)
    try:
        assert first.stdout is not None
        lines = [first.stdout.readline() for _ in range(3)]
        assert lines[0].startswith(LISTEN_LINE), lines
        assert lines[2].strip() == f"oma-sidecar store: file://{state}"
        # Another spelling of the same file, held by the first sidecar (DESIGN D13).
        second = serve("--listen", "127.0.0.1:0", "--store", f"file:////{state}", env=env)
        _, err = second.communicate(timeout=30)
        assert second.returncode == 2, err
        assert f"in use by another process (pid {first.pid})" in err
        assert "Traceback" not in err
        assert len(err.strip().splitlines()) == 1
    finally:
        first.terminate()
        first.communicate(timeout=10)
    assert first.returncode == 0


def test_generated_stubs_match_the_proto() -> None:
    check = subprocess.run(
        [sys.executable, "scripts/gen_protos.py", "--check"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert check.returncode == 0, check.stderr
