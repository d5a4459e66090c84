"""Two ``FileStore`` objects of one file in one process are one store (issue 24, item 4).

Each object with its own mirror would rewrite the whole file from it, erasing what the other
wrote (a checkpoint lost), and compare-and-set would hold in each mirror separately.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

import pytest

from oma_actors.stores import FileStore
from oma_actors.stores import file as file_module
from oma_actors.stores.file_lock import StateFileHold


def keys_on_disk(path: Path) -> list[str]:
    return sorted(entry["key"] for entry in json.loads(path.read_text())["entries"])


async def test_two_filestores_of_one_file_lose_no_checkpoint(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    path = tmp_path / "state.json"
    first = FileStore(path)
    second = FileStore(tmp_path / "sub" / ".." / "state.json")  # another spelling
    await first.list()
    await second.list()  # both read the (missing) file before either wrote
    await first.set("__oma_checkpoint__/a/latest", "snapshot-a")
    await second.set("__oma_checkpoint__/b/latest", "snapshot-b")
    await first.set("__oma_checkpoint__/a/latest", "snapshot-a2")  # a mirror without b's?
    assert await asyncio.to_thread(keys_on_disk, path) == [
        "__oma_checkpoint__/a/latest",
        "__oma_checkpoint__/b/latest",
    ]
    assert first is second
    await first.aclose()


async def test_compare_and_set_is_atomic_across_filestore_objects(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    stores = [FileStore(path), FileStore(str(path))]
    await stores[0].set("approval", "pending")
    won = await asyncio.gather(
        *(
            store.compare_and_set("approval", "pending", f"d{n}")
            for n, store in enumerate(stores * 3)
        )
    )
    assert sum(won) == 1
    await stores[0].aclose()


async def test_a_reader_sees_what_another_process_wrote_since_it_read(tmp_path: Path) -> None:
    # One instance per file must not turn into a stale cache: while this process holds no lock,
    # another may write, and a read after that write returns it.
    path = tmp_path / "state.json"
    reader = FileStore(path)
    assert await reader.get("k") is None
    script = (
        "import asyncio, sys\n"
        "from oma_actors.stores import FileStore\n"
        "async def main():\n"
        "    store = FileStore(sys.argv[1])\n"
        "    await store.set('k', 'from the other process')\n"
        "    await store.aclose()\n"
        "asyncio.run(main())\n"
    )
    child = await asyncio.create_subprocess_exec(sys.executable, "-c", script, str(path))
    assert await child.wait() == 0
    entry = await reader.get("k")
    assert entry is not None
    assert entry.value == "from the other process"


async def test_a_write_made_just_before_this_process_locked_the_file_is_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The window between the last read and the lock: another process writes the file there
    # (played here by a rename inside the lock call, as the other process would do it).
    path = tmp_path / "state.json"
    store = FileStore(path)
    assert await store.list() == []  # read, unlocked
    real_hold = file_module.hold_state_file

    async def written_elsewhere_then_held(at: str) -> StateFileHold:
        other = {"version": 1, "entries": [{"key": "decided", "value": "by alice",
                 "createdAt": "2026-01-01T00:00:00.000Z"}]}  # fmt: skip
        temp = tmp_path / "other.tmp"
        await asyncio.to_thread(temp.write_text, json.dumps(other))
        await asyncio.to_thread(os.replace, temp, path)
        return await real_hold(at)

    monkeypatch.setattr(file_module, "hold_state_file", written_elsewhere_then_held)
    await store.set("mine", "v")
    assert await asyncio.to_thread(keys_on_disk, path) == ["decided", "mine"]
    await store.aclose()
