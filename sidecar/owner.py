"""The owner id of a sidecar: one process incarnation, the holder of its runs' leases.

Every process start gets a fresh owner id, ``<label>/<uuid4>``: two sidecars started with
identical flags (identical pods or containers) are still two owners, and a sidecar restarted
after a crash is a new owner too, so the leases its previous incarnation left expire and any
live sidecar, itself included, adopts those runs (``sidecar.failover``). The label
(``--owner-id``) is for people: it is shown in listings and logs, never compared.
"""

from __future__ import annotations

import re
import uuid

DEFAULT_LABEL = "sidecar"
MAX_LABEL = 90
"""128 (the longest owner id) minus ``/`` and a uuid4's 36 characters, with room to spare."""
LABEL = re.compile(rf"[A-Za-z0-9][A-Za-z0-9._:@-]{{0,{MAX_LABEL - 1}}}")


def check_label(label: str) -> str:
    """``label`` if it is 1-90 of ``[A-Za-z0-9._:@-]``, starting alphanumeric.

    Raises:
        ValueError: it is not.
    """
    if not LABEL.fullmatch(label):
        raise ValueError(
            f"owner label {label!r} must be 1-{MAX_LABEL} of [A-Za-z0-9._:@-], "
            "starting alphanumeric"
        )
    return label


def incarnation_id(label: str | None = None) -> str:
    """A fresh owner id for this process start: ``<label>/<uuid4>``.

    Raises:
        ValueError: ``label`` is malformed (``check_label``).
    """
    return f"{check_label(label or DEFAULT_LABEL)}/{uuid.uuid4()}"


def label_of(owner_id: str) -> str:
    """The human label of an owner id (the id itself when it carries none)."""
    return owner_id.rpartition("/")[0] or owner_id
