"""State and lock files are private (0600), and no lock file is made beside a non-file."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from oma_actors import StoreError, open_store
from oma_actors.stores import FileStore


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def exists(path: str) -> bool:
    return Path(path).exists()


async def test_a_state_file_and_its_lock_are_created_0600(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    async with FileStore.open(path) as store:
        await store.set("k", "v")
    assert mode(path) == 0o600
    assert mode(Path(f"{path}.lock")) == 0o600


async def test_a_device_is_refused_before_any_lock_file_is_made(tmp_path: Path) -> None:
    link = tmp_path / "zero.json"
    os.symlink("/dev/zero", link)  # a spelling that resolves to a device
    with pytest.raises(StoreError, match="not a regular file"):
        async with open_store(f"file://{link}"):
            pass
    assert not exists("/dev/zero.lock")


async def test_a_sqlite_database_and_its_wal_are_created_0600(tmp_path: Path) -> None:
    from oma_actors.stores import SqliteStore

    path = tmp_path / "state.db"
    async with SqliteStore(path) as store:
        await store.set("k", "v")
        assert mode(path) == 0o600
        assert mode(Path(f"{path}-wal")) == 0o600
