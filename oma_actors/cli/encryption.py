"""``OMA_ENCRYPTION_KEYS``: how every ``oma`` command reads encrypted stores and journals.

When the variable names a key file (``KeyRing.from_file``), every store a command opens is
wrapped in ``EncryptingStore`` and every journal it reads in ``EncryptingJournal``, so ``oma
checkpoint``, ``approvals``, ``runs``, ``verify`` and the timeline see plaintext and refuse
(``CorruptStoreError``) anything that is not sealed under a key of the ring. Unset, they read
stores and journals as they are.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from oma_actors.journal import EncryptingJournal
from oma_actors.stores import EncryptingStore, KeyRing

if TYPE_CHECKING:
    from collections.abc import Mapping

    from oma_actors.journal import RunJournal
    from oma_actors.stores import AtomicStore

KEYS_ENV = "OMA_ENCRYPTION_KEYS"


def keyring_from_env(env: Mapping[str, str] | None = None) -> KeyRing | None:
    """The ring of the key file ``OMA_ENCRYPTION_KEYS`` names, or ``None`` when it is unset.

    Raises:
        ConfigurationError: The file is missing, malformed or readable by others.
    """
    path = (os.environ if env is None else env).get(KEYS_ENV, "")
    return KeyRing.from_file(path) if path else None


def sealed_store(store: AtomicStore, keyring: KeyRing | None) -> AtomicStore:
    """``store`` wrapped in ``EncryptingStore`` when there is a ring, else ``store`` itself."""
    if keyring is None:
        return store
    # The wrapper mirrors the inner store's capabilities: over an AtomicStore it is one.
    sealed: AtomicStore = EncryptingStore(store, keyring)
    return sealed


def sealed_journal(journal: RunJournal, keyring: KeyRing | None) -> RunJournal:
    """``journal`` wrapped in ``EncryptingJournal`` when there is a ring, else itself."""
    return journal if keyring is None else EncryptingJournal(journal, keyring)
