"""One live run per (store, checkpoint key) in this process (decision D9).

Two runs writing the same key would silently overwrite each other's snapshots (OMA's LM-18). The
guard is process-wide on purpose: the hazard is two runs in one process sharing a store object,
whichever orchestrator instances started them. Across processes this is the run store's job.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import TYPE_CHECKING

from oma_actors.errors import ConfigurationError

if TYPE_CHECKING:
    from collections.abc import Iterator

# Keyed by id(store); the entry lives only while the run holding it does.
_LIVE: set[tuple[int, str]] = set()


def refuse_if_live(store: object, key: str) -> None:
    """Raise ``ConfigurationError`` if a live run of this process holds ``key`` of ``store``.

    Checked first by a fresh run, so "already in use" wins over "holds an unfinished run": the
    stored run is not unfinished, it is running right now.
    """
    if (id(store), key) in _LIVE:
        raise ConfigurationError(
            f"checkpoint key {key!r} of this store is already in use by a live run; "
            "give each concurrent run its own run_id"
        )


@contextmanager
def claim(store: object, key: str) -> Iterator[None]:
    """Hold ``key`` of ``store`` for the duration of a run.

    Raises:
        ConfigurationError: a live run of this process already uses that store and key.
    """
    token = (id(store), key)
    refuse_if_live(store, key)
    _LIVE.add(token)
    try:
        yield
    finally:
        _LIVE.discard(token)
