"""The owner id of a sidecar: which runs in a state store are this sidecar's own.

Every run record names the sidecar that created or last restored it. At boot a sidecar marks
interrupted only the active runs it owns: only those can have been running in a previous
incarnation of this same sidecar. A sibling sharing the store keeps its live runs untouched.

The id must therefore stay the same across restarts of one sidecar and differ between siblings.
By default it is derived from the two settings that identify a sidecar deployment: the state
store (``--store``, normalized) and the listen address exactly as given (``--listen``, not the
bound port, so ``HOST:0`` gives the same owner on every start). Give ``--owner-id`` when that
is not enough: sidecars on different machines with the same ``--listen`` sharing one store, two
sidecars on ``HOST:0`` sharing one store, or a sidecar that changes address but keeps its runs.
"""

from __future__ import annotations

import hashlib
import re

OWNER_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:@/-]{0,127}")


def default_owner_id(store_uri: str, listen: str) -> str:
    """The owner id of the sidecar serving ``listen`` on the state store ``store_uri``."""
    digest = hashlib.sha256(f"{store_uri}\n{listen}".encode()).hexdigest()
    return f"sidecar-{digest[:16]}"


def check_owner_id(owner_id: str) -> str:
    """``owner_id`` if it is 1-128 of ``[A-Za-z0-9._:@/-]``, starting alphanumeric.

    Raises:
        ValueError: it is not.
    """
    if not OWNER_ID.fullmatch(owner_id):
        raise ValueError(
            f"owner id {owner_id!r} must be 1-128 of [A-Za-z0-9._:@/-], starting alphanumeric"
        )
    return owner_id
