"""``python -m sidecar`` (``oma serve``): address and token printing, loopback-only binds, stubs."""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import signal
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from sidecar.cli import LISTEN_LINE, TOKEN_LINE, add_arguments, collector_threshold, run
from sidecar.defaults import DEFAULT_GC_THRESHOLD
from sidecar.server import ServerConfigError, is_loopback, split_address

ROOT = Path(__file__).resolve().parents[2]
TOKEN_ENV = {"OMA_SIDECAR_TOKEN": "t"}


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


@pytest.mark.parametrize(
    ("flag", "said"),
    [
        ("--store-root", "--store-root /nonexistent/oma: no such directory"),
        ("--tls-cert", "--tls-cert /nonexistent/oma: no such file"),
        ("--tls-key", "--tls-key /nonexistent/oma: no such file"),
    ],
)
def test_a_missing_store_root_or_tls_file_is_named_in_one_line(flag: str, said: str) -> None:
    process = serve(
        flag, "/nonexistent/oma", "--store", "memory://", env={"OMA_SIDECAR_TOKEN": "t"}
    )
    _, err = process.communicate(timeout=30)
    assert process.returncode == 2, err
    assert err.strip() == f"oma serve: {said}"


def test_a_taken_port_is_one_line_on_stderr(tmp_path: Path) -> None:
    env = {"OMA_SIDECAR_TOKEN": "t"}
    first = serve("--listen", "127.0.0.1:0", "--store", "memory://", env=env)
    try:
        assert first.stdout is not None
        address = first.stdout.readline().strip().removeprefix(LISTEN_LINE)
        second = serve("--listen", address, "--store", str(tmp_path / "s.json"), env=env)
        _, err = second.communicate(timeout=30)
        assert second.returncode == 2, err
        # (gRPC core logs its own bind line; ours is one, and no sweep was left unstarted.)
        assert "never awaited" not in err
        assert [line for line in err.splitlines() if line.startswith("oma serve:")] == [
            f"oma serve: could not bind {address}: address in use (or not available)"
        ]
    finally:
        first.terminate()
        first.communicate(timeout=10)


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


def first_lines(process: subprocess.Popen[str], count: int) -> list[str]:
    assert process.stdout is not None
    return [process.stdout.readline() for _ in range(count)]


def stop(process: subprocess.Popen[str]) -> None:
    process.terminate()
    process.communicate(timeout=10)


def test_a_restart_keeps_the_generated_token(tmp_path: Path) -> None:
    # Every start used to write a new token, locking out the hosts of any other sidecar and
    # every host that read the token once.
    token_file = tmp_path / "sidecar.token"
    args = ("--listen", "127.0.0.1:0", "--store", "memory://")
    tokens = []
    for _ in range(2):
        process = serve(*args, "--generated-token-file", str(token_file))
        try:
            assert first_lines(process, 2)[1].strip() == f"{TOKEN_LINE}{token_file}"
            tokens.append(token_file.read_text().strip())
        finally:
            stop(process)
    assert tokens[0] == tokens[1]
    assert len(tokens[0]) >= 32


def test_a_second_sidecar_on_the_same_port_fails_with_address_in_use(tmp_path: Path) -> None:
    env = {"OMA_SIDECAR_TOKEN": "t"}
    first = serve("--listen", "127.0.0.1:0", "--store", "memory://", env=env)
    try:
        listening = first_lines(first, 1)[0]
        address = listening.removeprefix(LISTEN_LINE).strip()
        # gRPC's SO_REUSEPORT let a second sidecar bind too, splitting the connections.
        second = serve("--listen", address, "--store", "memory://", env=env)
        out, err = second.communicate(timeout=30)
        assert second.returncode == 2, out + err
        assert "address in use" in err
        assert "Traceback" not in err
    finally:
        stop(first)


def test_a_corrupt_state_store_exits_2_with_one_line(tmp_path: Path) -> None:
    state = tmp_path / "state.json"
    state.write_text("not json{")
    process = serve("--listen", "127.0.0.1:0", "--store", f"file://{state}", env=TOKEN_ENV)
    _, err = process.communicate(timeout=30)
    assert process.returncode == 2, err
    assert "Traceback" not in err
    assert len(err.strip().splitlines()) == 1, err


def test_an_unreadable_run_record_is_reported_and_the_sidecar_serves(tmp_path: Path) -> None:
    # A record nested too deep to parse crashed the boot with a RecursionError (exit 1 and a
    # traceback); now the run is listed as unreadable and everything else is served.
    entry = {
        "key": "__oma_sidecar__/run/deep",
        "value": "[" * 100_000 + "]" * 100_000,
        "metadata": {},
        "createdAt": "2026-01-02T03:04:05.678Z",
    }
    state = tmp_path / "state.json"
    state.write_text(json.dumps({"version": 1, "entries": [entry]}))
    process = serve("--listen", "127.0.0.1:0", "--store", f"file://{state}", env=TOKEN_ENV)
    try:
        lines = first_lines(process, 7)
    finally:
        stop(process)
    assert lines[0].startswith(LISTEN_LINE), lines
    assert lines[-1].strip() == "oma-sidecar unreadable run records (see ListRuns): deep"
    assert process.returncode == 0


def test_a_nul_byte_in_the_store_path_exits_2_with_one_line() -> None:
    process = serve("--store", "file:///tmp/x%00y.json", env=TOKEN_ENV)
    _, err = process.communicate(timeout=30)
    assert process.returncode == 2, err
    assert len(err.strip().splitlines()) == 1, err


def test_localhost_is_refused_when_127_0_0_1_has_the_port(tmp_path: Path) -> None:
    # Issue 24, item 8: "localhost:P" started beside a sidecar on 127.0.0.1:P (on ::1 alone).
    first = serve("--listen", "127.0.0.1:0", "--store", "memory://", env=TOKEN_ENV)
    try:
        port = first_lines(first, 1)[0].strip().rsplit(":", 1)[1]
        second = serve("--listen", f"localhost:{port}", "--store", "memory://", env=TOKEN_ENV)
        out, err = second.communicate(timeout=30)
        assert second.returncode == 2, out + err
        assert "address in use" in err
    finally:
        stop(first)


def test_a_token_file_every_user_can_read_is_refused(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("a-token-of-sufficient-length\n")
    token.chmod(0o644)
    process = serve("--listen", "127.0.0.1:0", "--store", "memory://", "--token-file", str(token))
    out, err = process.communicate(timeout=30)
    assert process.returncode == 2, out + err
    assert "readable or writable by every user" in err
    assert "a-token-of" not in out + err
    token.chmod(0o640)  # shared with a group: accepted
    process = serve("--listen", "127.0.0.1:0", "--store", "memory://", "--token-file", str(token))
    try:
        assert first_lines(process, 1)[0].startswith(LISTEN_LINE)
    finally:
        stop(process)


@pytest.mark.parametrize(
    "option",
    [
        ("--heartbeat", "0"),
        ("--heartbeat", "-5"),
        ("--heartbeat", "nan"),
        ("--host-call-timeout", "nan"),
        ("--max-input-bytes", "10"),
        ("--gc-threshold", "-1"),
    ],
)
def test_nonsense_numbers_exit_2_naming_the_option(option: tuple[str, str]) -> None:
    process = serve("--listen", "127.0.0.1:0", "--store", "memory://", *option, env=TOKEN_ENV)
    out, err = process.communicate(timeout=30)
    assert process.returncode == 2, out + err
    assert option[0] in err
    assert "Traceback" not in err


async def test_the_collector_threshold_is_set_while_serving_and_put_back_after() -> None:
    before = gc.get_threshold()
    async with collector_threshold(12_345):
        assert gc.get_threshold() == (12_345, max(before[1], 20), max(before[2], 100))
    assert gc.get_threshold() == before
    async with collector_threshold(0):  # 0: the interpreter's setting stays
        assert gc.get_threshold() == before


async def test_a_sidecar_serves_with_the_default_threshold_and_leaves_the_process_as_it_was(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("OMA_SIDECAR_TOKEN", "t")
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    args = parser.parse_args(["--listen", "127.0.0.1:0", "--store", "memory://"])
    before = gc.get_threshold()
    serving = asyncio.create_task(run(args))
    printed = ""
    for _ in range(500):
        printed += capsys.readouterr().out
        if LISTEN_LINE in printed or serving.done():
            break
        await asyncio.sleep(0.02)
    assert LISTEN_LINE in printed, printed  # (the handlers below are installed from here on)
    try:
        assert gc.get_threshold()[0] == DEFAULT_GC_THRESHOLD
    finally:
        # Only a serving sidecar has its SIGTERM handler on the loop: this stops it, not pytest.
        os.kill(os.getpid(), signal.SIGTERM)
        assert await asyncio.wait_for(serving, 30) == 0
    assert gc.get_threshold() == before
