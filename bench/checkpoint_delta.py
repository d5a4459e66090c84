"""LangGraph's ``DeltaChannel``: the anchor graph's message list as a delta-written channel.

``langgraph.channels.delta.DeltaChannel`` (beta, in ``langgraph`` 1.2.x, the version pinned in
``bench/requirements.txt``) stores only a sentinel in each checkpoint blob and rebuilds the list
by replaying the ancestor checkpoints' writes through the reducer; every ``snapshot_frequency``
updates (default 100) it writes a full ``_DeltaSnapshot`` of the value. So a step persists the
step's own write (one message) plus, every 100th update of the channel, the whole list. This is
the channel of ``shared/bench/langgraph_bench.py --channel delta``, with the same reducer and
the default snapshot frequency; the graph and the saver (``SqliteSaver``, ``durability="sync"``)
are the same as the default anchor's.
"""

from __future__ import annotations

import importlib.util
import operator
from collections.abc import Sequence
from typing import Any

CHANNELS = ("add", "delta")
"""``add``: ``Annotated[list, operator.add]`` (the default anchor); ``delta``: ``DeltaChannel``."""


def delta_available() -> bool:
    """Whether the installed LangGraph has ``DeltaChannel`` (1.2 and later)."""
    try:
        return importlib.util.find_spec("langgraph.channels.delta") is not None
    except ModuleNotFoundError:
        return False


def extend(state: list[Any], writes: Sequence[list[Any]]) -> list[Any]:
    """The anchor's reducer: the list extended by every write of a batch, in order.

    Batching-invariant, as ``DeltaChannel`` requires: extending by ``xs`` then ``ys`` is
    extending by ``xs + ys``.
    """
    out = list(state)
    for write in writes:
        out.extend(write)
    return out


def message_list_type(channel: str) -> Any:
    """The annotated type of the ``messages`` field for ``channel``."""
    from typing import Annotated

    if channel == "add":
        return Annotated[list, operator.add]
    if channel == "delta":
        from langgraph.channels.delta import DeltaChannel

        return Annotated[list, DeltaChannel(extend)]
    raise ValueError(f"unknown channel {channel!r} (expected one of {CHANNELS})")
