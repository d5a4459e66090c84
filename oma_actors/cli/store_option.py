"""``--store URI``: how every ``oma`` command names a store, and how it opens it.

Every ``--store`` takes the URIs of ``open_store`` (a bare path is a file store), the same
spellings as ``oma serve --store`` and the sidecar's ``store_uri``.

Commands that only read (``checkpoint show|list``, ``approvals list|show``) read a file store
without taking its lock: a FileStore replaces its file by one atomic rename per write, so a
reader always sees one whole revision, and these commands keep working beside the process that
holds the file (a running sidecar or worker). What they print is that revision; a run that is
still going may have moved on. ``approvals decide`` writes, so it opens the store through
``open_store``, which locks a file store (DESIGN D13): while another process holds the file, the
decision is refused rather than silently overwritten by that process's next write.

A file or SQLite store that does not exist is reported, never created, by every command.

With ``OMA_ENCRYPTION_KEYS`` set (``oma_actors.cli.encryption``), both hand out the store
wrapped in ``EncryptingStore``: values are opened on read and sealed on write.
"""

from __future__ import annotations

from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

from oma_actors import open_store
from oma_actors.cli.encryption import keyring_from_env, sealed_store
from oma_actors.stores import FileStore, parse_store_uri, store_missing

if TYPE_CHECKING:
    import argparse
    from collections.abc import AsyncIterator

    from oma_actors.stores import AtomicStore

STORE_HELP = (
    "the store: a state file path (same as file:///abs/state.json), "
    "sqlite:///abs/state.db, postgresql://user@host:5432/db[?table=T] or "
    "redis://host:6379/0[?prefix=P]"
)

# The one phrase of FileStore's refusal that says another process holds the file (D13).
_HELD_ELSEWHERE = "in use by another process"


def add_store_option(parser: argparse.ArgumentParser, *, read_only: bool) -> None:
    """Add the required ``--store URI`` option to ``parser``.

    Args:
        parser: The parser of one command.
        read_only: Whether the command only reads (its help then says a file store is read
            without locking it).
    """
    access = (
        "; a state file is read without locking it, so this works beside a running sidecar"
        if read_only
        else "; a state file is locked while this runs and refused if another process holds it"
    )
    parser.add_argument("--store", required=True, metavar="URI", help=STORE_HELP + access)


def shown_store(uri: str) -> str:
    """``uri`` as a message may print it: its canonical form, any password masked (README:
    an error names the store, never its password)."""
    return parse_store_uri(uri).uri


async def missing_store(uri: str) -> str | None:
    """What is missing of the store ``uri`` names, in one line (``no store file at ...``, a
    SQLite file or a PostgreSQL database without the store's table), else ``None``: a command
    that reads never creates the store it was pointed at (``oma_actors.stores.store_missing``).

    Raises:
        ConfigurationError: ``uri`` is not a store URI.
    """
    return await store_missing(parse_store_uri(uri))


@asynccontextmanager
async def reading(uri: str) -> AsyncIterator[AtomicStore]:
    """The store ``uri`` names, opened to be read; a file store is not locked (see above).

    Raises:
        ConfigurationError: An unknown scheme, a malformed URI, a missing extra, or a bad
            ``OMA_ENCRYPTION_KEYS`` key file.
        StoreError: The store could not be opened.
    """
    keyring = keyring_from_env()
    target = parse_store_uri(uri)
    if target.kind != "file":
        async with open_store(uri) as store:
            yield sealed_store(store, keyring)
        return
    unlocked = FileStore(target.location)
    try:
        yield sealed_store(unlocked, keyring)
    finally:
        await unlocked.aclose()


@asynccontextmanager
async def writing(uri: str) -> AsyncIterator[AtomicStore]:
    """The store ``uri`` names, opened by ``open_store`` to be written (a file store is locked).

    Raises:
        ConfigurationError: An unknown scheme, a malformed URI, a missing extra, or a bad
            ``OMA_ENCRYPTION_KEYS`` key file.
        StoreError: The store could not be opened (a state file another process holds).
    """
    keyring = keyring_from_env()
    async with open_store(uri) as store:
        yield sealed_store(store, keyring)


def held_elsewhere(exc: Exception) -> bool:
    """Whether ``exc`` is a file store's refusal because another process holds the file."""
    # FileStore's lock raises a plain StoreError; its message is the only mark of this case.
    return _HELD_ELSEWHERE in str(exc)
