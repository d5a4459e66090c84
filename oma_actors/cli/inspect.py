"""``oma checkpoint show``: print a stored snapshot readably."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import aiofiles.os

from oma_actors import Checkpoint, FileStore, is_checkpoint_key
from oma_actors.cli.display import show_snapshot

if TYPE_CHECKING:
    from pathlib import Path

    from rich.console import Console


async def show_checkpoint(
    store_path: Path, *, run_id: str | None, key: str | None, raw: bool, console: Console
) -> int:
    """Print the checkpoint of ``run_id`` (or the only one in the store)."""
    if not await aiofiles.os.path.exists(store_path):
        console.print(f"[red]no store file at {store_path}[/]")
        return 2
    store = FileStore(store_path)
    if run_id is None and key is None:
        keys = [entry.key for entry in await store.list() if is_checkpoint_key(entry.key)]
        if len(keys) != 1:
            listed = ", ".join(keys) or "none"
            console.print(
                f"[yellow]{len(keys)} checkpoints in the store ({listed}); pass --run-id[/]"
            )
            return 2 if not keys else 1
        key = keys[0]
    snapshot = await Checkpoint(store, run_id=run_id, key=key).load_latest()
    if snapshot is None:
        console.print(f"[yellow]no checkpoint for run {run_id!r} in {store_path}[/]")
        return 1
    if raw:
        console.print_json(json.dumps(snapshot.raw))
    else:
        show_snapshot(console, snapshot)
    return 0
