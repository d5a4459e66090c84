"""The reserved keyspace: every store key the runtime owns, spelled in exactly one place.

A store is shared by several writers: the run's checkpoints, the approval ledger, run records,
the sidecar's registry and the team's shared memory. Keys under a reserved prefix belong to the
runtime; shared memory never exposes, snapshots or restores them (DESIGN.md "Records and their
owners"). Every module that builds or recognises one of these keys imports it from here.
"""

from __future__ import annotations

CHECKPOINT_KEY_PREFIX = "__oma_checkpoint__/"
"""Checkpoint snapshots: ``__oma_checkpoint__/<runId>/latest`` (spec CK-01)."""

DEFAULT_CHECKPOINT_KEY = CHECKPOINT_KEY_PREFIX + "latest"
"""The key of a checkpoint that has no run id (OMA's default, spec CK-01)."""

APPROVAL_KEY_PREFIX = "__oma_approval__/"
"""Durable approval rows: ``__oma_approval__/<requestId>`` (spec AP-11)."""

RUN_KEY_PREFIX = "__oma_run__/"
"""Run records with lease and fencing token: ``__oma_run__/<runId>`` (spec RS-01)."""

SIDECAR_KEY_PREFIX = "__oma_sidecar__/"
"""The sidecar's own records (its run registry and event log)."""

HISTORY_KEY_PREFIX = "__oma_history__/"
"""A journal-first run's compaction snapshots, kept as its history's anchors (decision D17):
``__oma_history__/<runId>/<watermark, 12 digits>``. Outside the checkpoint namespace, so a
listing of checkpoints shows each run once."""

KEY_PROOF_PREFIX = "__oma_key__/"
"""An ``EncryptingStore``'s key proofs: ``__oma_key__/<key id>``, a value sealed under that key,
created once by the first writer under the id (``stores.encrypting``), so that a writer holding
other bytes under the same id is refused even on a store that holds nothing else yet. The
wrapper's own bookkeeping: its listings leave them out; the inner store shows them."""

RESERVED_PREFIXES = (
    CHECKPOINT_KEY_PREFIX,
    APPROVAL_KEY_PREFIX,
    RUN_KEY_PREFIX,
    SIDECAR_KEY_PREFIX,
    HISTORY_KEY_PREFIX,
    KEY_PROOF_PREFIX,
)
"""Every prefix the runtime owns; shared memory must never read or write under one."""


def is_reserved_key(key: str) -> bool:
    """Whether ``key`` belongs to the runtime rather than to shared memory."""
    return key.startswith(RESERVED_PREFIXES)


def checkpoint_key(run_id: str | None) -> str:
    """The snapshot key of ``run_id``: ``__oma_checkpoint__/<run_id>/latest``.

    An empty or missing run id gives OMA's default key ``__oma_checkpoint__/latest``.
    """
    if not run_id:
        return DEFAULT_CHECKPOINT_KEY
    return f"{CHECKPOINT_KEY_PREFIX}{run_id}/latest"


def is_checkpoint_key(key: str) -> bool:
    """Whether ``key`` lies in the checkpoint namespace."""
    return key.startswith(CHECKPOINT_KEY_PREFIX)


def approval_key(request_id: str) -> str:
    """The ledger row of one approval request: ``__oma_approval__/<request_id>``."""
    return APPROVAL_KEY_PREFIX + request_id


def run_record_key(run_id: str) -> str:
    """The run record (lease, fencing token, status) of ``run_id``: ``__oma_run__/<run_id>``."""
    return RUN_KEY_PREFIX + run_id


def sidecar_key(kind: str, name: str) -> str:
    """A sidecar record: ``__oma_sidecar__/<kind>/<name>`` (e.g. ``run``, ``events``)."""
    return f"{SIDECAR_KEY_PREFIX}{kind}/{name}"


def key_proof_key(key_id: str) -> str:
    """The key proof of encryption key ``key_id``: ``__oma_key__/<key_id>``."""
    return KEY_PROOF_PREFIX + key_id


def key_proof_id(key: str) -> str | None:
    """The key id whose key proof is stored at ``key`` (``key_proof_key``'s inverse), or
    ``None`` when ``key`` holds a value."""
    return key[len(KEY_PROOF_PREFIX) :] if key.startswith(KEY_PROOF_PREFIX) else None


def history_prefix(run_id: str) -> str:
    """The prefix of every history anchor of ``run_id``: ``__oma_history__/<run_id>/``."""
    return f"{HISTORY_KEY_PREFIX}{run_id}/"


def is_history_key_of(run_id: str, key: str) -> bool:
    """Whether ``key`` is a history anchor of ``run_id`` itself.

    A run id may hold ``/``: the anchors of ``a/b`` (``__oma_history__/a/b/<12 digits>``) lie
    under the prefix of ``a`` too, and must never be taken for ``a``'s (a replaced or deleted
    ``a`` would delete ``a/b``'s history). ``a``'s own keys are its prefix and 12 digits.
    """
    prefix = history_prefix(run_id)
    watermark = key[len(prefix) :]
    return key.startswith(prefix) and len(watermark) == 12 and watermark.isdigit()


def history_key(run_id: str, watermark: int) -> str:
    """The history anchor of ``run_id`` whose journal watermark is ``watermark``.

    Zero-padded, so a store's key order is the history's order.
    """
    return f"{history_prefix(run_id)}{watermark:012d}"
