"""``oma keys rotate --store URI --keys FILE``: re-seal every value of a store under the active key.

After a new key is put first in the key file (the old ones kept below it), this rewrites every
value sealed under an older key so that the old key can then be dropped from the file. Each
value is rewritten by ``compare_and_set`` against the exact sealed string that was read, so a
writer that changes the entry meanwhile is never overwritten: the entry is read again and, if
still under an old key, re-sealed from its new value. The store is opened as ``decide`` opens it
(a state file is locked while this runs).

Every value is opened before anything is written. When one opens with no key of the file
(plaintext, a key id not in the ring, a failed tag: a key file whose key has the right id but
other bytes fails every value under that id), nothing is re-sealed: the count and the first few
entries are listed and the command exits 1. A value counts as already under the active key only
when it opens with it. Entries with a turn expiry are left as they are and listed (a
compare-and-set would drop it); the command then exits 1 so that no key is dropped while
something still needs it.

Journal events are not re-sealed (a journal is append-only; a live run may be appending): the
journals the store's runs depend on (the store's database journal, the JSONL files its
snapshots name) are read, and every one holding events sealed under another key than the active
one is listed as left, with the key ids, so that the keys stay in the ring while those journals
are kept (a run whose journal events cannot be opened cannot be restored, shown or forked). They
are read before the values, and every event under a key id of the file is opened: one that does
not open is listed, and when none of a journal's events under the active key id opens with it,
nothing is re-sealed (the file's key has the id of the one that sealed them, not its bytes, and
would seal values that the holder of that id cannot open).

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
from oma_actors.journal.encrypting import SEALED_FIELD, open_event
from oma_actors.journal.open import DATABASE_STORE_KINDS
from oma_actors.stores import EncryptingStore, KeyRing, parse_store_uri

if TYPE_CHECKING:
    import argparse

    from rich.console import Console

    from oma_actors.journal import JournalEvent, RunJournal
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
        journals = await journal_leftovers(args.store, store, keyring)  # before any write
        done = await rotate(store, keyring, hold=bool(journals.disproved))
    left = (*done.left, *journals.left)
    console.out(
        f"re-sealed {done.resealed} under {keyring.active!r}; already under it {done.current}; "
        f"rewritten meanwhile {done.raced}; left {len(left)}",
        highlight=False,
    )
    if done.unopened:
        shown = ", ".join(repr(key) for key in done.unopened[:SHOWN])
        more = len(done.unopened) - SHOWN
        console.out(
            f"  {len(done.unopened)} values open with no key of {args.keys}, so nothing was "
            f"re-sealed: {shown}{f' and {more} more' if more > 0 else ''}",
            highlight=False,
        )
    elif journals.disproved:
        console.out(
            f"  the events under {keyring.active!r} of {', '.join(journals.disproved)} do not "
            f"open with the key {keyring.active!r} of {args.keys}, so nothing was re-sealed",
            highlight=False,
        )
    unshown = set(done.unopened[SHOWN:])  # counted above: the first few say why
    for key, why in left:
        if key not in unshown:
            console.out(f"  left {key!r}: {why}", highlight=False)
    return 1 if left else 0


SHOWN = 5
"""How many of the values that open with no key are listed, each with why."""


@dataclass(frozen=True, slots=True)
class Rotation:
    """What ``rotate`` did.

    Attributes:
        resealed: Values re-sealed under the active key.
        current: Values already under it.
        raced: Re-seals refused because a writer changed the entry meanwhile (read again).
        left: ``(key, why)`` of the entries left as they were.
        unopened: The keys of the values that open with no key of the ring; when there are
            any, nothing was re-sealed.
    """

    resealed: int
    current: int
    raced: int
    left: tuple[tuple[str, str], ...]
    unopened: tuple[str, ...] = ()


async def rotate(store: AtomicStore, keyring: KeyRing, *, hold: bool = False) -> Rotation:
    """Re-seal every value of ``store`` (the raw, inner store) under ``keyring.active``.

    Every value is opened first. When one opens with no key of ``keyring``, or with ``hold``
    (something else, a journal's events, does not), nothing is written: the entries that do
    not open are the result's ``unopened``, and its ``left`` with why.
    """
    sealed = EncryptingStore(store, keyring)
    everything = await store.list()
    # Key proofs are the wrapper's bookkeeping, not values: a proof of a retired id goes once
    # every value is re-sealed, and the next writer under the active id leaves its own.
    proofs = {entry.key: sealed.key_proof_id(entry.key) for entry in everything}
    listing = [entry for entry in everything if proofs[entry.key] is None]
    unopened: list[tuple[str, str]] = []
    for listed in listing:
        try:
            sealed.open(listed.key, listed.value)
        except CorruptStoreError as exc:
            unopened.append((listed.key, exc.reason))
    if unopened or hold:
        return Rotation(0, 0, 0, tuple(unopened), tuple(key for key, _ in unopened))
    resealed = current = raced = 0
    left: list[tuple[str, str]] = []
    for listed in listing:
        key = listed.key
        entry = await store.get(key)
        while entry is not None:
            try:
                plaintext = sealed.open(key, entry.value)
            except CorruptStoreError as exc:  # rewritten since the listing opened it
                left.append((key, exc.reason))
                break
            if keyring.sealed_by_active(entry.value):  # it opened, so it is under the key
                current += 1
                break
            if entry.expires_at_turn is not None:
                left.append((key, "has a turn expiry, which a compare-and-set would drop"))
                break
            if await store.compare_and_set(
                key, entry.value, sealed.seal(key, plaintext), entry.metadata
            ):
                resealed += 1
                break
            # A writer changed the entry since it was read: never overwrite it, read it again.
            raced += 1
            entry = await store.get(key)
    if not left:
        for key, key_id in proofs.items():
            if key_id is not None and key_id != keyring.active:
                await store.delete(key)
    return Rotation(resealed, current, raced, tuple(left))


@dataclass(frozen=True, slots=True)
class JournalsLeft:
    """What ``journal_leftovers`` found.

    Attributes:
        left: ``(journal, why)`` of each journal that still needs a key other than the active
            one, holds events their key does not open, or could not be read.
        disproved: The journals holding events under the active key id, none of which opens
            with the ring's key of that id (another key with the same id).
    """

    left: tuple[tuple[str, str], ...]
    disproved: tuple[str, ...]


async def journal_leftovers(store_uri: str, store: AtomicStore, keyring: KeyRing) -> JournalsLeft:
    """The journals of ``store``'s runs holding events sealed under another key than the
    active one: ``(journal, why)``, the key ids and how many events each (see the module
    docstring), and those holding events that the ring's key of their id does not open (how
    many, and why the first does not). A journal that cannot be read is listed too: its keys
    are not known."""
    left: list[tuple[str, str]] = []
    disproved: list[str] = []
    for name, journal in await _journals_of(store_uri, store, keyring):
        try:
            events = await journal.read_from(0)
        except (OSError, CorruptStoreError, ValueError) as exc:
            left.append((name, f"journal not read ({exc}): its events' keys are not known"))
            continue
        finally:
            await journal.close()
        stale: Counter[str] = Counter()
        failed: list[tuple[str, JournalEvent, str]] = []  # key id, event, why
        opened_under_active = False
        for event in events:
            key_id = _key_id(event.data, keyring)
            if key_id in keyring.ids:  # a key id alone proves nothing: open it
                try:
                    open_event(event, keyring, journal=name)
                except CorruptStoreError as exc:
                    failed.append((key_id, event, exc.reason))
                    continue
            if key_id == keyring.active:
                opened_under_active = True
            else:
                stale[key_id] += 1
        if not opened_under_active and any(key_id == keyring.active for key_id, *_ in failed):
            disproved.append(name)
        if failed:
            _, first, why = failed[0]
            left.append(
                (
                    name,
                    f"{len(failed)} journal events do not open, the first run {first.run_id!r} "
                    f"seq {first.seq}: {why}",
                )
            )
        if stale:
            ids = ", ".join(f"{count} under {key_id!r}" for key_id, count in sorted(stale.items()))
            left.append((name, f"journal events are not re-sealed: {ids}; keep those keys"))
    return JournalsLeft(tuple(left), tuple(disproved))


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
