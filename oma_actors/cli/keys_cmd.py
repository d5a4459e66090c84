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

Exit codes: 0 every value is under the active key; 1 some entries were left (listed);
2 usage (no store file, a bad key file) or a store that cannot be opened.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from oma_actors import open_store
from oma_actors.cli.store_option import add_store_option, missing_store
from oma_actors.errors import CorruptStoreError
from oma_actors.stores import EncryptingStore, KeyRing

if TYPE_CHECKING:
    import argparse

    from rich.console import Console

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
        console.print(f"no store file at {missing}", style="red", markup=False)
        return 2
    keyring = KeyRing.from_file(args.keys)
    async with open_store(args.store) as store:
        done = await rotate(store, keyring)
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
