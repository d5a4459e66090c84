"""``oma keys rotate --store URI --keys FILE``: re-seal every value of a store under the active key.

After a new key is put first in the key file (the old ones kept below it), this rewrites every
value sealed under an older key so that the old key can then be dropped from the file. Each
value is rewritten by ``compare_and_set`` against the exact sealed string that was read, so a
writer that changes the entry meanwhile is never overwritten: the entry is read again and, if
still under an old key, re-sealed from its new value. The store is opened as ``decide`` opens it
(a state file is locked while this runs).

Entries that cannot be opened (plaintext, a key id not in the ring, a failed tag) are left as
they are and listed, and so are entries with a turn expiry (a compare-and-set would drop it);
the command then exits 1 so that no key is dropped while something still needs it.

Journal events are not re-sealed (a journal is append-only; a live run may be appending): the
journals the store's runs depend on (the store's database journal, the JSONL files its
snapshots name) are read, and every one holding events sealed under another key than the active
one is listed as left, with the key ids, so that the keys stay in the ring while those journals
are kept (a run whose journal events cannot be opened cannot be restored, shown or forked).

Exit codes: 0 every value is under the active key; 1 some entries were left (listed);
2 usage (no store file, a bad key file) or a store that cannot be opened.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import aiofiles.os

from oma_actors import open_journal, open_store
from oma_actors.checkpoint import CHECKPOINT_KEY_PREFIX
from oma_actors.cli.failure import CommandFailed
from oma_actors.cli.store_option import add_store_option, missing_store, shown_store
from oma_actors.errors import CorruptStoreError
from oma_actors.journal import JsonlRunJournal
from oma_actors.journal.encrypting import SEALED_FIELD
from oma_actors.journal.open import DATABASE_STORE_KINDS
from oma_actors.stores import EncryptingStore, KeyRing, parse_store_uri

if TYPE_CHECKING:
    import argparse

    from rich.console import Console

    from oma_actors.journal import RunJournal
    from oma_actors.stores import AtomicStore


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``keys rotate`` to the ``oma`` sub-commands."""
    keys = commands.add_parser("keys", help="manage the keys of an encrypted store")
    actions = keys.add_subparsers(dest="action", metavar="ACTION", required=True)
    rotate = actions.add_parser(
        "rotate",
        help="re-seal every value under the active (first) key of the key file",
        description=(
            "Re-seal every value of the store under the first key of --keys, by compare-and-set "
            "so a concurrent writer is never overwritten. Exit 0 all re-sealed, 1 entries left "
            "(unreadable or with a turn expiry), 2 usage or store errors."
        ),
    )
    add_store_option(rotate, read_only=False)
    rotate.add_argument(
        "--keys",
        type=Path,
        required=True,
        metavar="FILE",
        help="the key file: one id:base64key a line, the first is the active key (mode 0600)",
    )


async def run(args: argparse.Namespace, console: Console) -> int:
    """Carry out ``oma keys rotate``; 0 done, 1 entries left, 2 usage."""
    missing = await missing_store(args.store)
    if missing is not None:
        raise CommandFailed(missing)
    keyring = KeyRing.from_file(args.keys)
    async with open_store(args.store) as store:
        done = await rotate(store, keyring)
        journals = await journal_leftovers(args.store, store, keyring)
    done = Rotation(done.resealed, done.current, done.raced, (*done.left, *journals))
    console.out(
        f"re-sealed {done.resealed} under {keyring.active!r}; already under it {done.current}; "
        f"rewritten meanwhile {done.raced}; left {len(done.left)}",
        highlight=False,
    )
    for key, why in done.left:
        console.out(f"  left {key!r}: {why}", highlight=False)
    return 1 if done.left else 0


@dataclass(frozen=True, slots=True)
class Rotation:
    """What ``rotate`` did.

    Attributes:
        resealed: Values re-sealed under the active key.
        current: Values already under it.
        raced: Re-seals refused because a writer changed the entry meanwhile (read again).
        left: ``(key, why)`` of the entries left as they were.
    """

    resealed: int
    current: int
    raced: int
    left: tuple[tuple[str, str], ...]


async def rotate(store: AtomicStore, keyring: KeyRing) -> Rotation:
    """Re-seal every value of ``store`` (the raw, inner store) under ``keyring.active``."""
    sealed = EncryptingStore(store, keyring)
    resealed = current = raced = 0
    left: list[tuple[str, str]] = []
    for listed in await store.list():
        key = listed.key
        entry = await store.get(key)
        while entry is not None:
            if keyring.key_id_of(entry.value) == keyring.active:
                current += 1
                break
            if entry.expires_at_turn is not None:
                left.append((key, "has a turn expiry, which a compare-and-set would drop"))
                break
            try:
                plaintext = sealed.open(key, entry.value)
            except CorruptStoreError as exc:
                left.append((key, exc.reason))
                break
            if await store.compare_and_set(
                key, entry.value, sealed.seal(key, plaintext), entry.metadata
            ):
                resealed += 1
                break
            # A writer changed the entry since it was read: never overwrite it, read it again.
            raced += 1
            entry = await store.get(key)
    return Rotation(resealed, current, raced, tuple(left))


async def journal_leftovers(
    store_uri: str, store: AtomicStore, keyring: KeyRing
) -> tuple[tuple[str, str], ...]:
    """The journals of ``store``'s runs holding events sealed under another key than the
    active one: ``(journal, why)``, the key ids and how many events each (see the module
    docstring). A journal that cannot be read is listed too: its keys are not known."""
    left: list[tuple[str, str]] = []
    for name, journal in await _journals_of(store_uri, store, keyring):
        try:
            keys = [_key_id(event.data, keyring) for event in await journal.read_from(0)]
            stale = Counter(key_id for key_id in keys if key_id != keyring.active)
        except (OSError, CorruptStoreError, ValueError) as exc:
            left.append((name, f"journal not read ({exc}): its events' keys are not known"))
            continue
        finally:
            await journal.close()
        if stale:
            ids = ", ".join(f"{count} under {key_id!r}" for key_id, count in sorted(stale.items()))
            left.append((name, f"journal events are not re-sealed: {ids}; keep those keys"))
    return tuple(left)


def _key_id(data: dict[str, object], keyring: KeyRing) -> str:
    """The key id an event's sealed payload names (``plaintext``: none)."""
    envelope = data.get(SEALED_FIELD)
    key_id = keyring.key_id_of(envelope) if isinstance(envelope, str) else None
    return key_id or "plaintext"


async def _journals_of(
    store_uri: str, store: AtomicStore, keyring: KeyRing
) -> list[tuple[str, RunJournal]]:
    """The raw (unsealed) journals the store's runs depend on, each named once."""
    found: dict[str, RunJournal] = {}
    if parse_store_uri(store_uri).kind in DATABASE_STORE_KINDS:
        found[f"journal in {shown_store(store_uri)}"] = open_journal(store_uri)  # its runs' journal
    sealed = EncryptingStore(store, keyring)
    for entry in await store.list(prefix=CHECKPOINT_KEY_PREFIX):  # the runs' states alone
        try:
            ref = json.loads(sealed.open(entry.key, entry.value)).get("journalRef")
        except (CorruptStoreError, ValueError, AttributeError):
            continue  # listed by the rotation itself when it cannot be opened
        path = ref.get("path") if isinstance(ref, dict) else None
        if (
            isinstance(path, str)
            and path not in found
            and ref.get("kind") == "JsonlRunJournal"
            and await aiofiles.os.path.isfile(path)
        ):
            found[path] = JsonlRunJournal(path, flush_interval_ms=0)
    return list(found.items())
