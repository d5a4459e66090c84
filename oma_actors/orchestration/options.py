"""Orchestrator options, resolved once at the boundary into frozen values."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from oma_actors.errors import ConfigurationError

if TYPE_CHECKING:
    from oma_actors.stores.base import MemoryStore


@dataclass(frozen=True, slots=True, kw_only=True)
class CheckpointOptions:
    """Where and under which key a run checkpoints (spec section 8).

    Args:
        enabled: ``False`` turns checkpointing off for this call.
        store: the checkpoint store; defaults to the team's shared store.
        run_id: the run id; the key becomes ``__oma_checkpoint__/<run_id>/latest``.
        key: an explicit checkpoint key (wins over ``run_id`` for the key).
    """

    enabled: bool = True
    store: MemoryStore | None = None
    run_id: str | None = None
    key: str | None = None


CheckpointArg = bool | CheckpointOptions | None


def resolve_checkpoint(per_call: CheckpointArg, default: CheckpointArg) -> CheckpointOptions | None:
    """The active checkpoint options: per-call replaces the default wholesale (CO-02, CO-04)."""
    chosen = per_call if per_call is not None else default
    if chosen is None or chosen is False:
        return None
    if chosen is True:
        chosen = CheckpointOptions()
    if not isinstance(chosen, CheckpointOptions):
        raise ConfigurationError(
            "checkpoint must be True, False, None or CheckpointOptions, "
            f"not {type(chosen).__name__}"
        )
    if not chosen.enabled:
        return None
    # Durable snapshots, restore and their boundaries are built in the checkpoint package, which
    # this build does not include yet; refusing is safer than silently running without them.
    raise ConfigurationError(
        "checkpointing is not available in this build yet; run with checkpoint=None or False"
    )


def check_max_concurrency(value: int) -> int:
    """Validate ``max_concurrency`` (an int >= 1)."""
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ConfigurationError(f"max_concurrency must be an int >= 1, got {value!r}")
    return value
