"""The test kit's rule for missing services and tools: skip locally, FAIL under CI=true."""

from __future__ import annotations

import socket

import pytest
import service_kit


@pytest.mark.parametrize("ci", ["", "false", "0"])
def test_a_missing_requirement_skips_outside_ci(monkeypatch: pytest.MonkeyPatch, ci: str) -> None:
    monkeypatch.setenv("CI", ci)
    with pytest.raises(pytest.skip.Exception, match="no such thing"):
        service_kit.skip_or_fail("no such thing")


@pytest.mark.parametrize("ci", ["true", "TRUE", "1"])
def test_a_missing_requirement_fails_under_ci(monkeypatch: pytest.MonkeyPatch, ci: str) -> None:
    monkeypatch.setenv("CI", ci)
    with pytest.raises(pytest.fail.Exception, match=r"no such thing.*CI=true"):
        service_kit.skip_or_fail("no such thing")
    with pytest.raises(pytest.fail.Exception, match="oma-no-such-tool is not installed"):
        service_kit.require_executable("oma-no-such-tool")


def test_an_unreachable_service_fails_under_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CI", "true")
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]  # bound but not listening: connections are refused
        with pytest.raises(
            pytest.fail.Exception, match=f"Redis is not reachable at 127.0.0.1:{port}"
        ):
            service_kit.require_tcp("Redis", f"redis://127.0.0.1:{port}/0")
