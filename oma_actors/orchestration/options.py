"""Orchestrator options, resolved once at the boundary into frozen values (spec section 8)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from oma_actors.errors import ConfigurationError
from oma_actors.keyspace import (
    CHECKPOINT_KEY_PREFIX,
    RESERVED_PREFIXES,
    checkpoint_key,
    is_checkpoint_key,
    is_reserved_key,
)
from oma_actors.stores.base import is_memory_store

if TYPE_CHECKING:
    from oma_actors.agents.config import Team
    from oma_actors.stores.base import MemoryStore


@dataclass(frozen=True, slots=True, kw_only=True)
class CheckpointOptions:
    """Where and under which key a run checkpoints; ``True`` means ``CheckpointOptions()``.

    Args:
        enabled: ``False`` turns checkpointing off for this call.
        store: the checkpoint store; defaults to the team's shared store, then to a private
            in-memory store of the orchestrator.
        run_id: the run id; the key becomes ``__oma_checkpoint__/<run_id>/latest``.
        key: an explicit checkpoint key (wins over ``run_id`` for the key).
    """

    enabled: bool = True
    store: MemoryStore | None = None
    run_id: str | None = None
    key: str | None = None


CheckpointArg = bool | CheckpointOptions | None


@dataclass(frozen=True, slots=True, kw_only=True)
class ResolvedCheckpoint:
    """The active checkpoint of a call: store, key, requested run id, and store reuse.

    ``reuses_shared_store`` is true when the chosen store is the team's shared-memory store
    itself (CO-08); snapshots then leave shared memory out.
    """

    store: MemoryStore
    key: str
    run_id: str | None
    reuses_shared_store: bool


def checkpoint_options(per_call: CheckpointArg, default: CheckpointArg) -> CheckpointOptions | None:
    """The options in force: per-call replaces the default wholesale (CO-02, CO-04).

    ``None``, ``False`` or ``enabled=False`` turns checkpointing off; ``True`` means the defaults.
    """
    chosen = per_call if per_call is not None else default
    if chosen is None or chosen is False:
        return None
    if chosen is True:
        return CheckpointOptions()
    if not isinstance(chosen, CheckpointOptions):
        raise ConfigurationError(
            "checkpoint must be True, False, None or CheckpointOptions, "
            f"not {type(chosen).__name__}"
        )
    return chosen if chosen.enabled else None


def resolve_checkpoint(
    options: CheckpointOptions | None, *, team: Team, fallback: MemoryStore
) -> ResolvedCheckpoint | None:
    """Choose the store and key of a run's checkpoint, or refuse before any work.

    The store is ``options.store``, else the team's shared-memory store, else ``fallback`` (the
    orchestrator's private store, shared by its runs). The key comes from the options only
    (``key``, else ``run_id``'s key, else the default key). With neither a store of its own nor a
    run id or key, runs on the fallback would share one key, so that is refused.

    Raises:
        ConfigurationError: no store, run id or key can identify the checkpoint, or the store
            is not a ``MemoryStore``, or the run id is empty or longer than 128 characters, or
            the key names a record of the runtime or another run's checkpoint.
    """
    if options is None:
        return None
    if options.run_id is not None and not 1 <= len(options.run_id) <= 128:
        raise ConfigurationError("CheckpointOptions.run_id must be 1..128 characters")
    if options.key:
        _check_key(options.key, options.run_id)
    if options.store is not None and not is_memory_store(options.store):
        raise ConfigurationError(
            "CheckpointOptions.store must have async get, set, list, delete and clear"
        )
    shared = team.shared_memory_store
    if options.store is None and shared is None and options.run_id is None and options.key is None:
        raise ConfigurationError(
            "Checkpoint requires a `run_id` (or an explicit `store`/`key`) when the team has no "
            "shared-memory store: runs would otherwise share the orchestrator's default key."
        )
    store = options.store or shared or fallback
    return ResolvedCheckpoint(
        store=store,
        key=options.key or checkpoint_key(options.run_id),
        run_id=options.run_id,
        reuses_shared_store=shared is not None and store is shared,
    )


def _check_key(key: str, run_id: str | None) -> None:
    """Refuse a key whose saves would overwrite what is not this run's checkpoint.

    Every save replaces the value at the key: under ``__oma_approval__/``, ``__oma_run__/`` or
    ``__oma_sidecar__/`` it would erase an approval row, a run record (its lease and fencing
    token) or the sidecar's registry; under another run's ``__oma_checkpoint__/<id>/`` it would
    erase that run's checkpoint. A key outside the reserved prefixes is the caller's own.
    """
    if is_checkpoint_key(key):
        own = f"{CHECKPOINT_KEY_PREFIX}{run_id}/"
        if run_id is not None and not (key.startswith(own) and len(key) > len(own)):
            raise ConfigurationError(
                f"CheckpointOptions.key {key!r} is not run {run_id!r}'s: a checkpoint key "
                f"of this run lies under {own!r}"
            )
        return
    if is_reserved_key(key):
        raise ConfigurationError(
            f"CheckpointOptions.key {key!r} lies under a prefix the runtime reserves "
            f"({', '.join(RESERVED_PREFIXES)}); choose a key outside them"
        )


def check_max_concurrency(value: int) -> int:
    """Validate ``max_concurrency`` (an int >= 1)."""
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ConfigurationError(f"max_concurrency must be an int >= 1, got {value!r}")
    return value
