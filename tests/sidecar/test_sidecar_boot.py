"""Boot: every process start is a fresh owner; the label is only shown; old records load."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from sidecar_helpers import ECHO, TOKEN, legacy_record_text, run_request

from oma_actors.keyspace import sidecar_key
from oma_actors.stores import FileStore
from sidecar._pb.oma.v1 import sidecar_pb2 as pb
from sidecar.client import SidecarClient
from sidecar.owner import check_label, incarnation_id, label_of
from sidecar.server import ServerConfig, ServerConfigError, Sidecar

ROOT = Path(__file__).resolve().parents[2]


def server_config(path: Path, owner_id: str | None) -> ServerConfig:
    return ServerConfig(
        token=TOKEN,
        listen="127.0.0.1:0",
        store_uri=f"file://{path}",
        python_tools={"echo": ECHO},
        heartbeat_s=0.5,
        grace_s=0.1,
        owner_id=owner_id,
    )


def test_every_incarnation_id_is_fresh_and_carries_its_label() -> None:
    first, second = incarnation_id("pod"), incarnation_id("pod")
    assert first != second
    assert label_of(first) == label_of(second) == "pod"
    assert label_of(incarnation_id()) == "sidecar"
    for bad in ("", " x", "a b", "a/b", "x" * 91):
        with pytest.raises(ValueError, match="owner label"):
            check_label(bad)


async def test_two_sidecars_with_identical_settings_are_two_owners(tmp_path: Path) -> None:
    config = server_config(tmp_path / "s.json", "same")
    async with Sidecar(config) as first:
        owner = first.owner_id
    async with Sidecar(config) as second:
        assert second.owner_id != owner  # a restart is a new owner too
        assert label_of(second.owner_id) == label_of(owner) == "same"


async def test_a_bad_owner_label_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ServerConfigError, match="--owner-id"):
        async with Sidecar(server_config(tmp_path / "s.json", "bad id")):
            pass


async def test_records_of_the_older_format_still_load(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    async with FileStore.open(path) as store:
        await store.set(
            sidecar_key("run", "old-1"),
            legacy_record_text(run_request("old-1"), status="RUN_STATUS_CANCELLED"),
        )
    async with (
        Sidecar(server_config(path, None)) as server,
        SidecarClient(server.address, TOKEN) as client,
    ):
        assert (await client.get_run("old-1")).status == pb.RUN_STATUS_CANCELLED


def test_serve_help_documents_the_owner_label() -> None:
    shown = subprocess.run(
        [sys.executable, "-m", "sidecar", "--help"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    assert "--owner-id" in shown
    assert "fresh on every start" in " ".join(shown.split())
