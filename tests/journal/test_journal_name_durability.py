"""A new journal's name is durable before its first events are: the folder fsync that makes
it so is tried again after it failed, and every directory the journal creates is synced into
its parent (``stores.file_io``: ``open_for_append``, ``make_directories``, ``sync_directory``).

Before, a failed folder fsync was never tried again (the next append found the file and took
it for an old one), and new parent directories were synced into nobody.
"""

from __future__ import annotations

import errno
import os
from typing import TYPE_CHECKING

import pytest

from oma_actors.errors import StoreError
from oma_actors.journal import JournalEvent, JsonlRunJournal
from oma_actors.stores import FileStore, file_io

if TYPE_CHECKING:
    from pathlib import Path


def event(seq: int) -> JournalEvent:
    return JournalEvent(
        seq=seq, type="turn/start", run_id="r", attempt=1, timestamp_unix_ms=seq, data={}
    )


@pytest.fixture
def root(tmp_path: Path) -> str:
    """``tmp_path`` as the syncs see it (symlinks resolved)."""
    return os.path.realpath(tmp_path)


def watch_folder_syncs(monkeypatch: pytest.MonkeyPatch, fail: dict[int, int]) -> list[str]:
    """Record every folder fsync; the ``n``-th (1-based) raises ``OSError(fail[n])``."""
    synced: list[str] = []
    real = file_io._fsync_directory

    def watched(directory: str) -> None:
        synced.append(os.path.realpath(directory))
        code = fail.get(len(synced))
        if code is not None:
            raise OSError(code, os.strerror(code))
        real(directory)

    monkeypatch.setattr(file_io, "_fsync_directory", watched)
    return synced


async def test_a_failed_folder_fsync_is_tried_again_before_the_next_append(
    tmp_path: Path, root: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    synced = watch_folder_syncs(monkeypatch, {1: errno.EIO})
    path = tmp_path / "journal.jsonl"
    journal = JsonlRunJournal(path, flush_interval_ms=0)
    with pytest.raises(StoreError, match="Input/output error"):
        await journal.append([event(1)])
    assert path.read_bytes() == b""  # created, nothing appended
    await journal.append([event(2)])
    await journal.close()
    assert synced == [root] * 2  # the name synced again before event 2 landed
    assert [e.seq for e in await JsonlRunJournal(path).read_from(0)] == [2]


async def test_a_folder_a_filesystem_cannot_fsync_does_not_stop_the_journal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``EINVAL`` (a filesystem that cannot fsync a folder): as ``FileStore``, let be; the
    empty-file retry above must not turn it into a journal that never takes an event."""
    watch_folder_syncs(monkeypatch, {1: errno.EINVAL, 2: errno.EINVAL})
    path = tmp_path / "journal.jsonl"
    journal = JsonlRunJournal(path, flush_interval_ms=0)
    await journal.append([event(1)])
    await journal.close()
    assert [e.seq for e in await JsonlRunJournal(path).read_from(0)] == [1]


async def test_every_directory_a_journal_creates_is_synced_into_its_parent(
    tmp_path: Path, root: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    synced = watch_folder_syncs(monkeypatch, {})
    path = tmp_path / "runs" / "nightly" / "journal.jsonl"
    journal = JsonlRunJournal(path, flush_interval_ms=0)
    await journal.append([event(1)])
    await journal.close()
    assert synced == [root, f"{root}/runs", f"{root}/runs/nightly"]


async def test_every_directory_a_file_store_creates_is_synced_into_its_parent(
    tmp_path: Path, root: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    synced = watch_folder_syncs(monkeypatch, {})
    async with FileStore.open(tmp_path / "state" / "runs" / "run.json") as store:
        await store.set("k", "v")
    assert synced[:2] == [root, f"{root}/state"]
    assert f"{root}/state/runs" in synced[2:]  # after the rename, as before
